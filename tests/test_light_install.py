"""The light default install: preview, lint and cost import nothing of the ``train`` extra, and the
commands that need it say so in one line (exit 2) instead of a traceback.

Each command runs as a real ``slicectl`` process whose import system refuses Ray, MaxText, JAX and
matplotlib (a ``sys.meta_path`` finder installed by ``-c`` before the CLI loads), which is what
the default install (``uv sync`` without ``--extra train``) looks like to the program.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_PRELUDE

from slicectl import extras

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("ray", "maxtext", "jax", "matplotlib")
BLOCKER = f"""
import atexit, sys
BLOCKED, tried = {BLOCKED!r}, []
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            tried.append(name)
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Refuse())
atexit.register(lambda: tried and print("tried to import:", *sorted(set(tried)), file=sys.stderr))
{FIXTURE_PRELUDE}
from slicectl.cli import main
sys.exit(main(sys.argv[1:]))
"""


def slicectl(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", BLOCKER, *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_extra_is_what_the_blocker_refuses():
    assert set(extras.TRAIN + extras.PICTURES) == set(BLOCKED)
    assert extras.missing(extras.TRAIN) == []  # the test suite's own install has the extra


@pytest.mark.parametrize("argv", [
    ("preview", "--stack", "prod", "--out", "{tmp}/prod"),
    ("lint",),
    ("cost", "--stack", "prod", "--format", "json"),
], ids=lambda a: a[0])
def test_preview_lint_cost_need_only_the_light_install(argv, tmp_path):
    got = slicectl(*(a.format(tmp=tmp_path) for a in argv))
    assert got.returncode == 0, got.stderr
    assert "tried to import" not in got.stderr and "Traceback" not in got.stderr


@pytest.mark.parametrize("argv", [
    ("train", "--local", "--stack", "dev"),
    ("drill", "--local", "--stack", "dev"),
    ("drill", "--stack", "prod", "--ray-address", "http://127.0.0.1:8265"),
], ids=lambda a: " ".join(a[:2]))
def test_local_runs_name_the_install_command(argv, tmp_path):
    got = slicectl(*argv, cwd=tmp_path)
    assert got.returncode == 2 and got.stdout == ""
    # Looking for the extra's top-level modules (importlib.util.find_spec) is all it does with them.
    line, *tried = got.stderr.splitlines()
    assert len(tried) <= 1 and set(tried[0].split(":")[1].split() if tried else ()) <= set(BLOCKED)
    assert line.startswith(f"error: slicectl {argv[0]} ") and line.endswith(f"run `{extras.INSTALL}`")
    assert "needs the train extra (ray" in line
    assert not list(tmp_path.iterdir())  # nothing started, nothing written
