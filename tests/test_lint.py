"""``slicectl lint``: the shipped stacks pass, a broken one is annotated line by line, and the
published JSON Schema accepts the shipped stack files and refuses what the model refuses by type."""

from __future__ import annotations

import json
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
    text = (ROOT / "stacks" / "Pulumi.dev.yaml").read_text()
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
