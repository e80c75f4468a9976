"""What the program declares for a test-owned stack (``tests/fixtures/checks/Pulumi.snapshot.yaml``), held to
readable snapshots in ``tests/snapshots/snapshot/``: every resource (URN, type, parent, provider, options,
dependencies, inputs), the stack's outputs, the program's warnings, the held jobs and every manifest, as YAML.

The snapshots are recorded through the SDK's plain path (``engine.render(..., shortcuts=False)``: Pulumi's
``set_mocks`` as its unit-testing guide uses it), and the test renders through the preview's path (shortcuts on),
so they hold the engine's shortcuts to the SDK as well as the program to what a reviewer saw. A change that means
to render differently records them again and is reviewed as a diff of the YAML:
``uv run python tests/test_render_snapshots.py --record``.
"""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checks"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
STACKS = ("snapshot",)  # test-owned stack files in FIXTURES
PARTS = ("resources", "outputs", "warnings", "held", "manifests")
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def parts(stack: str, shortcuts: bool = True) -> dict[str, str]:
    """Each part of ``stack``'s rendering as YAML text (manifests one document each, in apply order)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from offline import engine

    r = engine.render(stack, stacks_dir=FIXTURES, shortcuts=shortcuts)
    values: dict[str, Any] = {"resources": [x.to_json() for x in r.resources], "outputs": r.outputs,
                              "warnings": r.warnings, "held": r.held}
    out = {name: _dump(value) for name, value in values.items()}
    out["manifests"] = yaml.dump_all(r.manifests, Dumper=_DUMPER, sort_keys=True, width=120, explicit_start=True)
    return out


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_DUMPER, sort_keys=True, width=120)


def _path(stack: str, part: str) -> Path:
    return SNAPSHOTS / stack / f"{part}.yaml"


@pytest.mark.parametrize("stack", STACKS)
def test_renders_as_the_reviewed_snapshot(stack):
    got = parts(stack)
    for part in PARTS:
        want = _path(stack, part).read_text()
        if got[part] != want:
            diff = "".join(list(difflib.unified_diff(want.splitlines(True), got[part].splitlines(True),
                                                     f"snapshot/{part}.yaml", "rendered", n=2))[:80])
            pytest.fail(f"{stack} {part} rendered differently from its snapshot (record again with "
                        f"`uv run python tests/test_render_snapshots.py --record` if meant):\n{diff}")


def record() -> None:
    for stack in STACKS:
        for part, text in parts(stack, shortcuts=False).items():
            path = _path(stack, part)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        print(f"recorded {SNAPSHOTS.relative_to(ROOT)}/{stack}/ through the SDK's plain path")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_render_snapshots.py --record")
    record()
