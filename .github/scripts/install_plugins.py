"""Install the Pulumi plugins of .github/pulumi-plugins.json, each checked against its sha256; fail closed.

Every Pulumi job runs with PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true (pulumi/pulumi
sdk/go/common/env/env.go DisableAutomaticPluginAcquisition): the engine then downloads no plugin, neither
the program's nor one a stack's state names (its pluginDownloadURL included), so these are the only
plugin binaries a job runs. `pulumi plugin install ... --checksum` refuses an archive whose SHA-256
differs (pulumi/pulumi pkg/cmd/pulumi/plugin/plugin_install.go: "The expected SHA256 checksum for the
plugin archive"). Standard library only.

    python3 .github/scripts/install_plugins.py [--dry-run]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[1] / "pulumi-plugins.json"
SHA256 = re.compile(r"[0-9a-f]{64}")


def commands(doc: dict) -> tuple[list[list[str]], list[str]]:
    """The install commands, and every problem (a plugin without a checksum is one)."""
    out, problems = [], []
    for p in doc.get("plugins", []):
        what = f"{p.get('kind')} {p.get('name')} {p.get('version')}"
        if not isinstance(p.get("sha256"), str) or not SHA256.fullmatch(p["sha256"]):
            problems.append(f"{PLUGINS.name}: {what}: sha256 = {p.get('sha256')!r}; want the 64 hex digits of the "
                            "linux-amd64 archive from the release's checksums file")
            continue
        out.append(["pulumi", "plugin", "install", p["kind"], p["name"], p["version"], "--checksum", p["sha256"]])
    return out, problems


def main(argv: list[str]) -> int:
    cmds, problems = commands(json.loads(PLUGINS.read_text()))
    for problem in problems:
        print(f"::error file=.github/{PLUGINS.name}::{problem}", file=sys.stderr)
    if problems:
        return 1
    for cmd in cmds:
        print(" ".join(cmd))
        if "--dry-run" not in argv:
            subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
