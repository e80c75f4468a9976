"""The offline engine's fast paths change nothing it renders: prod, dev and a 64-slice stack with capacity
fallbacks render to the digests recorded in ``tests/reference/render-digests.json``.

Each resource (type, name, parent, inputs, dependencies, options), the outputs, the held jobs, the program's
warnings, the manifests and the policy pack's verdicts are digested on their own (canonical JSON, SHA-256),
so a difference names what changed. A change to what the program declares changes them on purpose: record
them again, and review the diff of the digest file with the change,
``python tests/test_render_digest.py --record`` (``uv run``, or the project's venv with the repository on
``PYTHONPATH``).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
from scale import scaled_stack  # noqa: E402

DIGESTS = ROOT / "tests" / "reference" / "render-digests.json"
# name -> (stack, slices of a scaled copy with fallbacks; None: the stack file as it is)
STACKS = {"prod": ("prod", None), "dev": ("dev", None), "prod-64-slices-fallbacks": ("prod", 64)}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def digests(name: str, tmp: Path) -> dict[str, Any]:
    """What the stack ``name`` (of :data:`STACKS`) renders, digested part by part."""
    from offline import engine
    from policies import offline as policy_rules

    stack, slices = STACKS[name]
    stacks_dir = scaled_stack(slices, tmp / name, stack, fallbacks=True).parent if slices else None
    rendering = engine.render(stack, stacks_dir=stacks_dir)
    violations = []
    for v in policy_rules.evaluate(rendering):
        doc = v.to_json()
        if doc["source"] and stacks_dir is not None:  # the scaled copy's temporary directory
            doc["source"] = doc["source"].replace(str(stacks_dir), "<stacks>")
        violations.append(doc)
    return {
        "resources": {r.urn: _digest(r.to_json()) for r in rendering.resources},
        "order": _digest([r.urn for r in rendering.resources]),
        "outputs": _digest(rendering.outputs),
        "held": _digest(rendering.held),
        "warnings": _digest(rendering.warnings),
        "manifests": _digest(rendering.manifests),
        "violations": _digest(violations),
    }


@pytest.mark.parametrize("name", list(STACKS))
def test_renders_as_recorded(name, tmp_path):
    want = json.loads(DIGESTS.read_text())[name]
    got = digests(name, tmp_path)
    missing, extra = sorted(set(want["resources"]) - set(got["resources"])), \
        sorted(set(got["resources"]) - set(want["resources"]))
    changed = sorted(u for u in set(want["resources"]) & set(got["resources"])
                     if want["resources"][u] != got["resources"][u])
    assert (missing, extra, changed) == ([], [], []), "resources missing, added, changed"
    for part in ("order", "outputs", "held", "warnings", "manifests", "violations"):
        assert got[part] == want[part], part


def record() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = {name: digests(name, Path(tmp)) for name in STACKS}
    DIGESTS.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"recorded {DIGESTS.relative_to(ROOT)}: " + ", ".join(f"{n} {len(d['resources'])} resources"
                                                               for n, d in out.items()))


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_render_digest.py --record")
    record()
