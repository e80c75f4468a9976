"""``slicectl lint`` and ``slicectl preview`` give one answer on every refusal fixture: the same exit code and the
same problem lines (file, line, key, value, words), never a traceback.

The refusal fixtures are ``tests/test_bad_inputs.py``'s cases (each a broken stack file) and the shapes a person
types by mistake (a list where a map is, a null, a number where text is, unicode). A broken file's shape (not YAML,
not a mapping, no ``config:`` mapping) is its one problem in both commands: the keys an unreadable ``config:`` lacks
are not problems of their own; a file whose shape is fine gets every problem at once in both, its stack-file keys'
(a duplicate key, an unknown top-level key) and its config's together.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS
from test_bad_inputs import SPEC_CASES

from slicectl import cli
from slicectl.exits import Exit
from stackspec import spec as stack_spec

NS = stack_spec.PROJECT
PROD = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    text = out.getvalue() + err.getvalue()
    assert "Traceback" not in text
    return code, text


def _problems(text: str) -> list[str]:
    return sorted(line.removeprefix("error: ") for line in text.splitlines() if ".yaml:" in line)


def both(tmp_path: Path, text: str) -> tuple[int, list[str]]:
    (tmp_path / "Pulumi.case.yaml").write_text(text)
    lint_code, lint_out = _run(["lint", "--stack", "case", "--stacks-dir", str(tmp_path)])
    code, out = _run(["preview", "--stack", "case", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    assert code == lint_code, (lint_out, out)
    assert _problems(lint_out) == _problems(out), (lint_out, out)
    return code, _problems(out)


def _set(path: tuple, value):
    doc = yaml.safe_load(PROD)
    node = doc["config"]
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


TYPED: dict[str, str] = {
    "a section as a list": _set((f"{NS}:cluster",), ["maxtext-tpu"]),
    "a list as a map": _set((f"{NS}:slices",), {"name": "v6e"}),
    "a null section": _set((f"{NS}:storage",), None),
    "a number for a name": _set((f"{NS}:cluster", "name"), 12),
    "unicode in a name": _set((f"{NS}:cluster", "name"), "clüster-✓"),
    "a map for a switch": _set((f"{NS}:deploy", "onPush"), {"yes": True}),
    "a null list item": _set((f"{NS}:jobs",), [None]),
    "config is null": "config:\n",
    "config is text": "config: maxtext\n",
}


@pytest.mark.parametrize("case", [*SPEC_CASES, *TYPED])
def test_lint_and_preview_give_one_answer(case, tmp_path):
    text = SPEC_CASES[case][0] if case in SPEC_CASES else TYPED[case]
    code, problems = both(tmp_path, text)
    assert code == Exit.INVALID_SPEC and problems


@pytest.mark.parametrize(("text", "only"), [
    ("", "the stack file is empty"),
    ("- a\n- b\n", "a stack file is a mapping"),
    ("config:\n  - a\n", "must be a mapping of keys"),
    ("config: maxtext\n", "must be a mapping of keys"),
])
def test_a_broken_files_shape_is_its_one_problem(tmp_path, text, only):
    """Not seven '(missing): required' lines after the one that says why: lint said those, preview did not."""
    _, problems = both(tmp_path, text)
    assert len(problems) == 1 and only in problems[0], problems


def test_a_stack_file_key_problem_and_a_config_problem_come_together(tmp_path):
    """A duplicate key no longer hides the config's own problems from preview (lint showed both)."""
    text = PROD.replace("      topology: 4x4\n", "      topology: 4x4\n      topology: 4x4\n", 1)
    text = text.replace("    name: maxtext-tpu\n", "    name: " + "m" * 41 + "\n", 1)
    _, problems = both(tmp_path, text)
    assert any("duplicate key" in p for p in problems), problems
    assert any(f"{NS}:cluster.name" in p and "1-40 characters" in p for p in problems), problems


MULTI = (FIXTURE_STACKS / "Pulumi.multi.yaml").read_text()


@pytest.mark.parametrize("manager", ["absent", "null"])
def test_a_multi_region_stack_without_its_manager_is_answered_not_a_traceback(tmp_path, manager):
    """The loader's fuzz (every leaf of every fixture set to a null, a list, a map, a number, unicode) found one
    traceback: a multi-region stack with no manager (resolving read its name)."""
    doc = yaml.safe_load(MULTI)
    if manager == "null":
        doc["config"][f"{NS}:manager"] = None
    else:
        del doc["config"][f"{NS}:manager"]
    code, problems = both(tmp_path, yaml.safe_dump(doc, sort_keys=False))
    assert code == Exit.INVALID_SPEC
    assert any(f"{NS}:manager = (missing): required with regions" in p for p in problems), problems


SANDBOX = (Path(__file__).resolve().parent / "fixtures" / "sandbox" / "Pulumi.sbx.yaml").read_text()


@pytest.mark.parametrize("value", ["'yes'", "'on'", "1"])
def test_the_sandbox_switch_is_true_or_false_only(tmp_path, value):
    """tpu-multislice:sandbox relaxes rules (a public control plane, no CI bootstrap): pydantic's lax mode read
    'yes', 'on' and 1 as true on it, as it once did on deploy.onPush. (Pulumi hands every top-level value as text,
    so the text true stays true.)"""
    text = SANDBOX.replace(f"  {NS}:sandbox: true\n", f"  {NS}:sandbox: {value}\n")
    assert text != SANDBOX
    code, problems = both(tmp_path, text)
    assert code == Exit.INVALID_SPEC
    assert any(f"{NS}:sandbox = " in p and "must be true or false" in p for p in problems), problems
