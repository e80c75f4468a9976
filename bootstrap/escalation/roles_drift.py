"""Is the vendored catalog still Google's? Compare each predefined role in ``bootstrap/data/iam_roles.json`` with
what the IAM API returns today (``gcloud iam roles describe``, i.e. roles.get, the source iam-dataset collects).

Google adds permissions to predefined roles; a role that grew may carry a new path the escalation check cannot
see until the catalog is vendored again. Run it where gcloud is signed in (any identity may read predefined
roles: roles.get on ``roles/*`` needs no grant):

    uv run python -m bootstrap.escalation.roles_drift          # exit 1 and the differences when any role changed
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from .gcp import ROLES_FILE, load_roles


def live_permissions(role: str, gcloud: str = "gcloud") -> frozenset[str]:
    out = subprocess.run([gcloud, "iam", "roles", "describe", role, "--format=json"], capture_output=True, text=True,
                         check=True)
    return frozenset(json.loads(out.stdout).get("includedPermissions", []))


Describe = Callable[[str, str], frozenset[str]]


def drift(gcloud: str = "gcloud", describe: Describe = live_permissions) -> dict[str, tuple[list[str], list[str]]]:
    """role -> (permissions Google added, permissions Google removed), for each role that differs.

    ``describe(role, gcloud)``: a role's permissions today (default :func:`live_permissions`, one gcloud call)."""
    out = {}
    for role, vendored in sorted(load_roles().items()):
        live = describe(role, gcloud)
        if live != vendored:
            out[role] = (sorted(live - vendored), sorted(vendored - live))
    return out


def main(argv: list[str], describe: Describe = live_permissions) -> int:
    changed = drift(argv[0] if argv else "gcloud", describe)
    for role, (added, removed) in changed.items():
        print(f"{role}: added {added or 'nothing'}; removed {removed or 'nothing'}")
    if changed:
        print(f"re-vendor {ROLES_FILE.name} (its _source names the dataset) and run tests/test_escalation.py")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
