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
