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

An object of a vendored manifest the program applies unchanged but for the stack's labels (Kueue's release:
``workloads/data/kueue-<version>/``, its CRDs whole) is held the same way: its kind, name, labels as rendered, and the
sha256 of the object as the release holds it. The vendored file has its own digest check (``SHA256SUMS``), and an
object the program changes (the manager ConfigMap, the Deployment) is held in full. The CRDs in full made the
snapshot 3.7 MB.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
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
    values: dict[str, Any] = {"resources": [_held(x["inputs"], x) for x in resources],
                              "outputs": r.outputs, "warnings": r.warnings,
                              "held": [_held(h) for h in r.held]}
    out = {name: _dump(value) for name, value in values.items()}
    out["manifests"] = yaml.dump_all([_held(m) for m in r.manifests], Dumper=_DUMPER, sort_keys=True,
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


def _held(obj: dict[str, Any], whole: dict[str, Any] | None = None) -> dict[str, Any]:
    """``obj`` as a snapshot holds it: a vendored object by its digest, a script by its digest (``whole`` as above)."""
    held = _scripts_digested(_vendored_digested(obj))
    return held if whole is None else {**whole, "inputs": held}


def _identity(obj: dict[str, Any]) -> tuple[str, ...]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


@functools.cache
def _vendored() -> dict[tuple[str, ...], tuple[dict[str, Any], str]]:
    """Each object of the vendored manifests the program applies, by identity: the object and where it is from."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from workloads import kueue_install

    where = kueue_install.MANIFEST.relative_to(ROOT).as_posix()
    return {_identity(o): (o, where) for o in kueue_install.release_objects()}


def _canonical(obj: dict[str, Any]) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _as_sent(value: Any) -> Any:
    """``value`` with each whole float an int: a resource's inputs cross Pulumi's wire as a protobuf Struct, whose
    numbers are doubles (``15`` arrives as ``15.0``), while a manifest holds them as written."""
    if isinstance(value, dict):
        return {k: _as_sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_sent(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _vendored_digested(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as its kind, name and labels plus the vendored object's digest, when it is a vendored manifest's object
    unchanged but for its labels; otherwise ``obj`` whole."""
    if not isinstance(obj, dict) or _identity(obj) not in _vendored():
        return obj
    source, where = _vendored()[_identity(obj)]
    meta = obj["metadata"]
    if _canonical(_as_sent({**obj, "metadata": {**meta, "labels": source["metadata"].get("labels")}})) != _canonical(
            _as_sent({**source, "metadata": {**source["metadata"], "labels": source["metadata"].get("labels")}})):
        return obj  # changed by the program: held in full
    digest = hashlib.sha256(_canonical(source).encode()).hexdigest()
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": {k: meta[k] for k in ("name", "namespace", "labels") if k in meta},
            "vendored": f"sha256:{digest} (JSON, keys sorted) = an object of {where}"}


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


def test_a_vendored_object_is_held_as_its_digest_unless_the_program_changed_it():
    """A Kueue CRD labelled by the stack reads as its digest and labels; one with a changed field is held in full, as
    are the objects the program changes, and every held digest is an object of the vendored manifest."""
    source, _ = next(v for v in _vendored().values() if v[0]["kind"] == "CustomResourceDefinition")
    labelled = {**source, "metadata": {**source["metadata"], "labels": {"tpu-multislice/stack": "s"}}}
    held = _held(labelled)
    assert held["metadata"]["labels"] == {"tpu-multislice/stack": "s"} and "spec" not in held
    assert held["vendored"].startswith(f"sha256:{hashlib.sha256(_canonical(source).encode()).hexdigest()} ")
    changed = {**labelled, "spec": {**labelled["spec"], "preserveUnknownFields": True}}
    assert _held(changed) == changed
    digests = {hashlib.sha256(_canonical(o).encode()).hexdigest() for o, _ in _vendored().values()}
    manifests = [d for d in yaml.safe_load_all(_path("snapshot", "manifests").read_text()) if d]
    vendored = [d for d in manifests if "vendored" in d]
    assert vendored and all(d["vendored"].split()[0].removeprefix("sha256:") in digests for d in vendored)
    in_full = {d["kind"] for d in manifests if _identity(d) in _vendored() and "vendored" not in d}
    assert {"ConfigMap", "Deployment"} <= in_full  # the manager configuration and the pull policy are the program's


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
