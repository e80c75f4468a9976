"""The project's own bytecode, compiled at install (README, docs/cli.md, .ci/run, tests/fork_check.sh): one
command in the four places, compiling the project's modules and none of the skipped folders, and never a stale
.pyc: a module edited in the second it was compiled (a checkout, a scripted mutation) keeping its size must run as
edited. A timestamp .pyc records only the source's mtime in whole seconds and its size, so Python would run the old
code (importlib._bootstrap_external.SourceLoader.get_code; PEP 552 for the hash-checked .pyc that is not fooled)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACES = ("README.md", "docs/cli.md", ".ci/run", "tests/fork_check.sh")


def _compileall_args(path: str) -> list[str]:
    lines = [line for line in (ROOT / path).read_text().splitlines() if "-m compileall" in line]
    assert len(lines) == 1, f"{path}: {len(lines)} compileall commands"
    words = shlex.split(lines[0], comments=True)
    return words[words.index("compileall") + 1:]


def _compile(tree: Path) -> None:
    subprocess.run([sys.executable, "-m", "compileall", *_compileall_args(".ci/run")], cwd=tree, check=True,
                   capture_output=True, text=True, timeout=60)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_one_compile_command_in_the_four_places():
    commands = {path: _compileall_args(path) for path in PLACES}
    assert len({tuple(args) for args in commands.values()}) == 1, commands


def test_it_compiles_the_project_and_skips_the_dotted_folders_node_modules_and_build(tmp_path):
    kept = ["pkg/a.py", "pkg/rebuild/b.py", "pkg/builder.py", "tests/node_modules_test.py"]
    skipped = [".venv/lib/c.py", "pkg/.hidden/d.py", "tests/tools/node_modules/e.py", "build/f.py"]
    for name in kept + skipped:
        _write(tmp_path / name, "X = 1\n")
    _compile(tmp_path)
    compiled = {p.parent.parent.joinpath(p.name.split(".")[0] + ".py").relative_to(tmp_path).as_posix()
                for p in tmp_path.rglob("__pycache__/*.pyc")}
    assert compiled == set(kept)


def test_a_module_edited_in_the_second_it_was_compiled_runs_as_edited(tmp_path):
    module = _write(tmp_path / "pkg" / "mod.py", "VALUE = 1\n")
    _compile(tmp_path)
    compiled = os.stat(module)
    module.write_text("VALUE = 2\n")  # the same size
    os.utime(module, ns=(compiled.st_atime_ns, compiled.st_mtime_ns))  # within the same second
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", "import pkg.mod; print(pkg.mod.VALUE)"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "2", "a stale .pyc ran instead of the edited module"
