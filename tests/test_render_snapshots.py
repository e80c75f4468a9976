"""What the program declares for a test-owned stack (``tests/fixtures/checks/Pulumi.snapshot.yaml``), held to
readable snapshots in ``tests/snapshots/snapshot/``: every resource (URN, type, parent, provider, options,
dependencies, inputs), the stack's outputs, the program's warnings, the held jobs and every manifest, as YAML.

The snapshots are recorded through the SDK's plain path (``engine.render(..., shortcuts=False)``: Pulumi's
``set_mocks`` as its unit-testing guide uses it), and the test renders through the preview's path (shortcuts on),
so they hold the engine's shortcuts to the SDK as well as the program to what a reviewer saw. A change that means
to render differently records them again and is reviewed as a diff of the YAML:
``uv run python tests/test_render_snapshots.py --record``.

A script a ConfigMap carries (``data`` keys ending ``.py`` or ``.sh``: the trainer, the lease module, the token
minter) is held as its sha256 and length, and the repository file whose text it is: the snapshots are the
rendered objects, and each script has tests of its own (``tests/test_workloads.py`` checks the ConfigMap holds the
trainer's exact text, ``tests/test_trainer_args.py``, ``tests/test_lease.py``, ...). Half of the manifests' text
was the trainer's, recorded again at every edit of it.
"""

from __future__ import annotations

import difflib
import hashlib
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
    resources = [x.to_json() for x in r.resources]
    values: dict[str, Any] = {"resources": [_scripts_digested(x["inputs"], x) for x in resources],
                              "outputs": r.outputs, "warnings": r.warnings,
                              "held": [_scripts_digested(h) for h in r.held]}
    out = {name: _dump(value) for name, value in values.items()}
    out["manifests"] = yaml.dump_all([_scripts_digested(m) for m in r.manifests], Dumper=_DUMPER, sort_keys=True,
                                     width=120, explicit_start=True)
    return out


SCRIPT_SUFFIXES = (".py", ".sh")


def _repository_scripts() -> dict[str, str]:
    """sha256 -> path of each script of the program's packages (what a ConfigMap may carry)."""
    return {hashlib.sha256(p.read_bytes()).hexdigest(): p.relative_to(ROOT).as_posix()
            for package in ("workloads", "infra") for p in sorted((ROOT / package).rglob("*"))
            if p.suffix in SCRIPT_SUFFIXES and p.is_file()}


def digest_of(text: str) -> str:
    """A script as a snapshot holds it: ``sha256:<hex> (<n> bytes)``, and ``= <path>`` when it is that file's text."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    where = _repository_scripts().get(digest)
    return f"sha256:{digest} ({len(text.encode())} bytes)" + (f" = {where}" if where else "")


def _scripts_digested(obj: dict[str, Any], whole: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` (a manifest, or a resource's inputs inside ``whole``) with each script its ConfigMap carries digested."""
    if obj.get("kind") == "ConfigMap" and isinstance(obj.get("data"), dict):
        obj = {**obj, "data": {k: digest_of(v) if k.endswith(SCRIPT_SUFFIXES) and isinstance(v, str) else v
                               for k, v in obj["data"].items()}}
    return obj if whole is None else {**whole, "inputs": obj}


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_DUMPER, sort_keys=True, width=120)


def _path(stack: str, part: str) -> Path:
    return SNAPSHOTS / stack / f"{part}.yaml"


def test_a_script_is_held_as_its_digest_and_its_file():
    """The trainer a ConfigMap carries reads as its file's digest; a changed copy reads as a digest of no file."""
    trainer = ROOT / "workloads" / "trainer" / "maxtext_trainer.py"
    text = trainer.read_text()
    cm = {"kind": "ConfigMap", "data": {"maxtext_trainer.py": text, "targets.json": "{}"}}
    held = _scripts_digested(cm)["data"]
    assert held["maxtext_trainer.py"] == (f"sha256:{hashlib.sha256(text.encode()).hexdigest()} "
                                          f"({len(text.encode())} bytes) = workloads/trainer/maxtext_trainer.py")
    assert held["targets.json"] == "{}"  # not a script: as rendered
    changed = _scripts_digested({**cm, "data": {"maxtext_trainer.py": text + "#"}})["data"]["maxtext_trainer.py"]
    assert changed.startswith("sha256:") and "=" not in changed


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
