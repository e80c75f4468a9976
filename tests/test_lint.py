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
from conftest import FIXTURE_STACKS

from slicectl import cli
from slicectl.cmd_lint import schema
from slicectl.exits import Exit

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_stacks_lint_clean(capsys):
    assert cli.main(["lint"]) == Exit.OK
    stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"))
    assert capsys.readouterr().out.splitlines() == [f"{s}: ok" for s in stacks]


def test_a_broken_stack_is_annotated_on_its_lines(tmp_path, capsys):
    text = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text().replace("topology: 2x4", "topology: 2x5")
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
    for path in FIXTURE_STACKS.glob("Pulumi.*.yaml"):
        assert list(validator.iter_errors(yaml.safe_load(path.read_text()))) == [], path
    bad = yaml.safe_load((FIXTURE_STACKS / "Pulumi.prod.yaml").read_text())
    bad["config"]["tpu-multislice:slices"][0]["capacity"][0]["type"] = "preemptible"
    bad["config"]["tpu-multislice:cluster"]["systemNodeCount"] = 0
    # cluster and slices are optional since a multi-region stack names them per region: their errors sit in the
    # anyOf's context.
    errors = {c.message for e in validator.iter_errors(bad) for c in (e, *e.context)}
    assert any("preemptible" in m for m in errors) and any("0 is less than the minimum" in m for m in errors)


# A stack file edit each and the key it breaks: what GCP, GKE, Kueue or the workflows refuse (the classes a hidden
# catalogue of misconfigurations found accepted, or answered differently by lint and preview).
DEV_EDITS = {
    "flex-start outside GKE's flex-start zones": (("gcp:zone: us-east5-b", "gcp:zone: us-east5-c"),),
    "an image reference no registry parses": (("image: rayproject/ray:nightly-py312-tpu", "image: Ray Project!"),),
    "a reservation name Compute Engine refuses": (("        - type: spot", "        - type: reservation\n"
                                                   "          reservation: Bad_Name"),),
    "queued provisioning beside another option": (("maxRunDuration: 24h", "maxRunDuration: 24h\n"
                                                   "          queuedProvisioning: true"),),
    "a cluster drill on a job the stack does not have": (("  tpu-multislice:storage:", "  tpu-multislice:deploy:\n"
                                                          "    clusterDrill: no-such-job\n"
                                                          "  tpu-multislice:storage:"),),
}


@pytest.mark.parametrize("what", list(DEV_EDITS))
def test_lint_and_preview_give_one_answer(what, tmp_path, capsys):
    """The same stack file: ``slicectl lint`` and ``slicectl preview`` both refuse it, naming the same keys."""
    text = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    for old, new in DEV_EDITS[what]:
        assert old in text, old
        text = text.replace(old, new, 1)
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "json"]) == Exit.INVALID_SPEC
    keys = {p["key"] for r in json.loads(capsys.readouterr().out) for p in r["problems"]}
    assert keys
    code = cli.main(["preview", "--stack", "dev", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == Exit.INVALID_SPEC, captured.out + captured.err
    said = captured.out + captured.err
    assert all(k in said for k in keys), (keys, said)


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


def _scaled(into, count: int, topology: str = "16x16", quota: list | None = None, name: str = "big"):
    """The solo fixture with ``count`` copies of its slice at ``topology`` (v6e-256 by default), ranges wide enough."""
    doc = yaml.safe_load((FIXTURES / "Pulumi.solo.yaml").read_text())
    config = doc["config"]
    first = config["tpu-multislice:slices"][0]
    config["tpu-multislice:slices"] = [{**first, "name": f"v6e-{i}", "topology": topology} for i in range(count)]
    config["tpu-multislice:cluster"]["podCidr"] = "10.128.0.0/10"
    config["tpu-multislice:network"].setdefault("primary", {})["cidr"] = "10.0.0.0/16"
    config.pop("tpu-multislice:jobs", None)
    if quota is not None:
        config["tpu-multislice:quota"] = quota
    into.mkdir(parents=True, exist_ok=True)
    (into / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return doc


def test_200_v6e_256_slices_do_not_lint_clean_against_a_declared_quota(tmp_path, capsys):
    """Issue 27: 200 x v6e-256 linted clean. Each slice is 256 chips (Cloud TPU: v6e-256 is 16x16, one chip per
    core); the fixture's slices list spot then flex-start, both drawing on preemptible quota (docs/quota.md)."""
    from stackspec import tpu

    (shape,) = [s for s in tpu.table() if s.pod_type == "v6e-256"][:1]
    assert shape.chips == 16 * 16
    _scaled(tmp_path, 200, quota=[{"generation": "v6e", "preemptible": 1024, "onDemand": 0}])
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.INVALID_SPEC
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "tpu-multislice:quota[0].preemptible = 1024" in x]
    assert f"need {200 * 256} v6e chips" in line and f"{200 * 256 - 1024} more than declared" in line
    assert "v6e-0" in line and "v6e-199" in line and "docs/quota.md" in line
    # Enough quota: clean; the region must be declared when a quota section is.
    _scaled(tmp_path, 200, quota=[{"generation": "v6e", "preemptible": 200 * 256}])
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.OK, capsys.readouterr().out
    capsys.readouterr()
    _scaled(tmp_path, 2, quota=[{"region": "europe-west4", "generation": "v6e", "preemptible": 512}])
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.INVALID_SPEC
    assert "no entry for v6e in us-east5" in capsys.readouterr().out


def test_without_a_declared_quota_the_preview_warns_with_the_chips_per_region(tmp_path, capsys):
    _scaled(tmp_path, 3, topology="4x4")
    assert cli.main(["preview", "--stack", "big", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    warning = [x for x in out.splitlines() if "TPU quota not declared" in x]
    assert warning == [f"  warning: TPU quota not declared (tpu-multislice:quota): the slices need {3 * 16} v6e chips "
                       "of preemptible (spot, flex-start) quota in us-east5; check the project's quota (docs/quota.md)"]
    assert out.index(warning[0]) < out.index("Plan (")  # before the long plan
    assert (ROOT / "docs" / "quota.md").is_file()
    assert cli.main(["cost", "--stack", "big", "--stacks-dir", str(tmp_path)]) == 0
    cost = capsys.readouterr().out
    assert re.search(r"^\s+us-east5\s+v6e\s+preemptible \(spot, flex-start\)\s+48\s+not declared\s", cost, re.M), cost
    # lint says the same on the pull request (a warning annotation: nothing refused).
    assert cli.main(["lint", "--stacks-dir", str(tmp_path), "--format", "github"]) == Exit.OK
    annotations = [x for x in capsys.readouterr().out.splitlines() if "title=TPU quota::" in x]
    assert annotations == [f"::warning file={tmp_path}/Pulumi.big.yaml,title=TPU quota::{warning[0].split(': ', 1)[1]}"]


def test_two_stacks_in_one_project_are_refused_at_their_project_lines(tmp_path, capsys):
    """Each stack declares its project's Binary Authorization policy; a project has at most one
    (stackspec/rules/across_stacks.py quotes the API reference): two stacks in one project would overwrite
    each other's."""
    text = (FIXTURES / "Pulumi.solo.yaml").read_text()
    (tmp_path / "Pulumi.a.yaml").write_text(text)
    (tmp_path / "Pulumi.b.yaml").write_text(text)
    project = yaml.safe_load(text)["config"]["gcp:project"]
    line = next(n for n, x in enumerate(text.splitlines(), 1) if x.strip().startswith("gcp:project:"))
    for argv in (["lint", "--stacks-dir", str(tmp_path)], ["lint", "--stacks-dir", str(tmp_path), "--stack", "a"]):
        assert cli.main(argv) == Exit.INVALID_SPEC
        out = capsys.readouterr().out
        assert f"{tmp_path}/Pulumi.a.yaml:{line}: gcp:project = \"{project}\": also the project of b" in out
        assert "at most one policy per project" in out
    (tmp_path / "Pulumi.b.yaml").write_text(text.replace(project, "another-project-b"))
    assert cli.main(["lint", "--stacks-dir", str(tmp_path)]) == Exit.OK
