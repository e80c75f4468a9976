"""The trainer's modules ship with it: every module beside ``maxtext_trainer.py`` that the script imports (itself or
through another such module) is in the trainer ConfigMap with its file's exact text, and in the image's copy; the
script runs from a directory holding only what the ConfigMap carries, as the Ray head mounts it.

The modules the trainer imports only inside a function ship where a job needs them: ``lease.py`` with the
multi-region manager's queued jobs (their drivers hold the writer lease), ``custom_trainer.py`` with a job's own
trainer. Fixtures: tests/fixtures/stacks (dev, multi), tests/fixtures/rough (own).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS

from stackspec import spec as stack_spec
from workloads import manifests
from workloads.trainer_args import TRAINER_SCRIPT

ROOT = Path(__file__).resolve().parents[1]
HERE = TRAINER_SCRIPT.parent


def _siblings(path: Path, top_level: bool) -> set[str]:
    """The modules beside the trainer that ``path`` imports: at module level (``top_level``) or anywhere."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level else list(ast.walk(tree))
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if (HERE / f"{n}.py").is_file()}


def _closure(top_level: bool) -> set[str]:
    found, todo = set(), {TRAINER_SCRIPT.stem}
    while todo:
        name = todo.pop()
        for n in _siblings(HERE / f"{name}.py", top_level) - found - {TRAINER_SCRIPT.stem}:
            found.add(n)
            todo.add(n)
    return found


ALWAYS = _closure(top_level=True)
WHERE_NEEDED = {"lease": "multi", "custom_trainer": "own"}  # imported inside a function: the stack that needs it


def _configmap(stack: str) -> dict[str, str]:
    where = FIXTURE_STACKS if stack != "own" else ROOT / "tests" / "fixtures" / "rough"
    spec = stack_spec.load_stack(stack, where)
    # A multi-region stack's trainer runs in its regions: the first region's ConfigMap.
    return manifests.trainer_configmap(spec.region_views()[0])["data"]


def test_the_trainer_is_split_into_modules_it_imports():
    assert {"worker_loop", "lease_holder", "progress_lines"} <= ALWAYS, ALWAYS
    assert _closure(top_level=False) - ALWAYS == set(WHERE_NEEDED), _closure(top_level=False) - ALWAYS


@pytest.mark.parametrize("stack", ["dev", "multi", "own"])
def test_every_module_the_trainer_imports_is_in_its_configmap_with_its_text(stack):
    data = _configmap(stack)
    needed = ALWAYS | {m for m, s in WHERE_NEEDED.items() if s == stack}
    for name in sorted(needed):
        assert data.get(f"{name}.py") == (HERE / f"{name}.py").read_text(), f"{name}.py missing from the ConfigMap"
    assert data[TRAINER_SCRIPT.name] == TRAINER_SCRIPT.read_text()


def test_the_trainer_runs_from_what_its_configmap_holds(tmp_path):
    """As the Ray head mounts it: a directory with the ConfigMap's files only; the script's own --help imports every
    module it needs at start (the same as the image's build does)."""
    for name, text in _configmap("dev").items():
        (tmp_path / name).write_text(text)
    out = subprocess.run([sys.executable, str(tmp_path / TRAINER_SCRIPT.name), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_image_copies_the_trainer_with_its_modules():
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    copy = next(line for line in dockerfile.splitlines()
                if line.startswith("COPY ") and "workloads/trainer/maxtext_trainer.py" in line)
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    for name in sorted(ALWAYS | {TRAINER_SCRIPT.stem}):
        assert f"workloads/trainer/{name}.py" in copy.split(), name
        assert f"!workloads/trainer/{name}.py" in ignore, name


def _module_changed(monkeypatch, tmp_path, name: str) -> None:
    """The renderer reads a sibling module whose text changed while the script's did not."""
    changed = tmp_path / f"{name}.py"
    changed.write_text((HERE / f"{name}.py").read_text() + "\n# a change to this module alone\n")
    monkeypatch.setattr(manifests, "TRAINER_MODULES",
                        tuple(changed if m.stem == name else m for m in manifests.TRAINER_MODULES))


@pytest.mark.parametrize("stack", ["dev", "multi"])
def test_a_change_to_a_module_alone_replaces_every_rayjob(stack, monkeypatch, tmp_path):
    """Pulumi replaces a RayJob on any change to its metadata or spec (workloads/component.py): the digest its
    annotation and entrypoint carry covers every file the ConfigMap ships, so a module's change runs the job again."""
    spec = stack_spec.load_stack(stack, FIXTURE_STACKS).region_views()[0]
    jobs = manifests.declared_jobs(spec)
    assert jobs
    before = [manifests.ray_job(spec, j) for j in jobs]
    cm_before = manifests.trainer_configmap(spec)["metadata"]["annotations"]
    _module_changed(monkeypatch, tmp_path, "worker_loop")
    after = [manifests.ray_job(spec, j) for j in jobs]
    assert manifests.trainer_configmap(spec)["metadata"]["annotations"] != cm_before
    for b, a in zip(before, after, strict=True):
        assert b["metadata"]["annotations"] != a["metadata"]["annotations"]
        assert b["spec"]["entrypoint"] != a["spec"]["entrypoint"]


def _mount(directory: Path, data: dict[str, str], version: str) -> None:
    """The kubelet's ConfigMap volume layout: ``..<version>/`` holds the files, ``..data`` links to it, and each key
    is a link through ``..data`` (kubernetes pkg/volume/util/atomic_writer.go)."""
    (directory / f"..{version}").mkdir()
    for name, text in data.items():
        (directory / f"..{version}" / name).write_text(text)
    tmp = directory / "..data_tmp"
    tmp.symlink_to(f"..{version}")
    tmp.replace(directory / "..data")
    for name in data:
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")


def test_the_head_checks_every_mounted_file_against_the_rayjobs_digest(monkeypatch, tmp_path):
    """What the driver computes over its mounted directory is the digest the RayJob was rendered with; a mount that
    still holds an old module (the script unchanged) waits for the kubelet and then fails, it does not train."""
    import shlex

    from workloads.trainer import maxtext_trainer as trainer

    spec = stack_spec.load_stack("dev", FIXTURE_STACKS)
    job = manifests.declared_jobs(spec)[0]
    old = manifests.trainer_configmap(spec)["data"]
    mount = tmp_path / "mount"
    mount.mkdir()
    _mount(mount, old, "v1")
    _module_changed(monkeypatch, tmp_path, "restart_precompile")
    argv = shlex.split(manifests.ray_job(spec, job)["spec"]["entrypoint"])
    wanted = argv[argv.index("--script-sha256") + 1]
    script = str(mount / TRAINER_SCRIPT.name)
    with pytest.raises(SystemExit, match="is the trainer ConfigMap applied"):
        trainer.ensure_script_version(wanted, script, [], wait_s=0.1, poll_s=0.05)
    _mount(mount, manifests.trainer_configmap(spec)["data"], "v2")
    trainer.ensure_script_version(wanted, script, [], wait_s=0.1, poll_s=0.05)  # current: returns
