"""``slicectl lint``: the shipped stacks pass, a broken one is annotated line by line, and the
published JSON Schema accepts the shipped stack files and refuses what the model refuses by type."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from slicectl import cli
from slicectl.cmd_lint import schema
from slicectl.exits import Exit

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_stacks_lint_clean(capsys):
    assert cli.main(["lint"]) == Exit.OK
    stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert capsys.readouterr().out.splitlines() == [f"{s}: ok" for s in stacks]


def test_a_broken_stack_is_annotated_on_its_lines(tmp_path, capsys):
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text().replace("topology: 2x4", "topology: 2x5")
    (tmp_path / "Pulumi.pr.yaml").write_text(text)
    code = cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "github"])
    out = capsys.readouterr().out
    line = text.splitlines().index("      topology: 2x5") + 1
    assert code == Exit.INVALID_SPEC
    assert f"::error file={tmp_path}/Pulumi.pr.yaml,line={line},title=stack spec::" in out
    assert "tpu-multislice:slices[0].topology" in out
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "json"]) == Exit.INVALID_SPEC
    report = json.loads(capsys.readouterr().out)
    assert report[0]["problems"][0]["line"] == line


def test_the_schema_accepts_the_shipped_stack_files_and_refuses_bad_types():
    validator = jsonschema.Draft202012Validator(schema())
    for path in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path
    bad = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())
    bad["config"]["tpu-multislice:slices"][0]["capacity"][0]["type"] = "preemptible"
    bad["config"]["tpu-multislice:cluster"]["systemNodeCount"] = 0
    # cluster and slices are optional since a multi-region stack names them per region: their errors sit in the
    # anyOf's context.
    errors = {c.message for e in validator.iter_errors(bad) for c in (e, *e.context)}
    assert any("preemptible" in m for m in errors) and any("0 is less than the minimum" in m for m in errors)


# --------------------------------------------------------------------------- issue 27: the rough edges a new user hit

FIXTURES = ROOT / "tests" / "fixtures" / "rough"  # this file's own stacks (solo: one region, duo: two)


def test_the_schema_spells_price_keys_as_stack_files_do():
    """A stack file writes ``prices: {v6e: ...}`` (the generation's name, as slices[].generation takes it); the
    schema editors validate with must accept that spelling and refuse the camelCased ``v6E``."""
    validator = jsonschema.Draft202012Validator(schema())
    doc = yaml.safe_load((FIXTURES / "Pulumi.solo.yaml").read_text())
    generations = validator.schema["properties"]["config"]["properties"]["tpu-multislice:slices"]
    assert doc
    for gen in ("v6e", "v5e", "v5p", "tpu7x"):
        good = copy.deepcopy(doc)
        good["config"]["tpu-multislice:prices"] = {gen: {"flexStart": 1.5}}
        assert not list(validator.iter_errors(good)), gen
        bad = copy.deepcopy(doc)
        bad["config"]["tpu-multislice:prices"] = {gen.upper(): {"flexStart": 1.5}}
        assert list(validator.iter_errors(bad)), gen
    assert generations  # the slices' generation key is in the same schema


def test_a_stacks_dir_that_is_not_there_is_an_error_naming_it(tmp_path, capsys):
    typo = tmp_path / "stakcs"
    assert cli.main(["lint", "--stacks-dir", str(typo)]) == Exit.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(typo) in err[0] and "no such stacks directory" in err[0]
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.USAGE  # there, but no stack in it
    assert "no stack file" in capsys.readouterr().err


def test_a_yaml_syntax_error_is_the_only_problem_with_its_line_and_column(tmp_path, capsys):
    lines = (FIXTURES / "Pulumi.solo.yaml").read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if line.startswith("  gcp:zone:"))
    lines[n] = "  gcp:zone: us-east5-b: [oops"  # a second ': ' on the line: a mapping value where none can be
    (tmp_path / "Pulumi.pr.yaml").write_text("\n".join(lines) + "\n")
    # PyYAML's own reader places the error (independent of the stack loader).
    with pytest.raises(yaml.MarkedYAMLError) as e:
        yaml.safe_load((tmp_path / "Pulumi.pr.yaml").read_text())
    mark = e.value.problem_mark
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.INVALID_SPEC
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"{tmp_path}/Pulumi.pr.yaml:{mark.line + 1}:{mark.column + 1}: "
                                               "not valid YAML: mapping values are not allowed"), out
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "github"]) == Exit.INVALID_SPEC
    (annotation,) = capsys.readouterr().out.strip().splitlines()
    assert annotation.startswith(f"::error file={tmp_path}/Pulumi.pr.yaml,line={mark.line + 1},col={mark.column + 1},")
    assert "required" not in annotation


def _cells(row: str) -> list[str]:
    """A GFM table row's cells: split on the pipes a backslash does not escape."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_an_invalid_stack_leaves_a_job_summary_that_says_why(tmp_path, capsys, monkeypatch):
    for name in ("solo", "duo"):
        (tmp_path / f"Pulumi.{name}.yaml").write_text((FIXTURES / f"Pulumi.{name}.yaml").read_text())
    text = (tmp_path / "Pulumi.solo.yaml").read_text()
    assert "topology: 2x4" in text
    (tmp_path / "Pulumi.solo.yaml").write_text(text.replace("topology: 2x4", "topology: 2x5"))
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "github"]) == Exit.INVALID_SPEC
    capsys.readouterr()
    md = summary.read_text()
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "markdown"]) == Exit.INVALID_SPEC
    assert capsys.readouterr().out.strip() == md.strip()
    rows = [_cells(line) for line in md.splitlines() if line.startswith("|") and "---" not in line]
    verdicts = {r[0]: r[1] for r in rows if len(r) == 2}
    assert verdicts["`duo`"] == "ok" and verdicts["`solo`"].startswith("**invalid**")
    line = text.splitlines().index("      topology: 2x4") + 1
    (problem,) = [r for r in rows if len(r) == 4 and r[1] == "tpu-multislice:slices[0].topology"]
    assert problem[0] == f"{tmp_path}/Pulumi.solo.yaml:{line}" and problem[2] == '"2x5"'
    assert "allowed" in problem[3] or "topolog" in problem[3]
