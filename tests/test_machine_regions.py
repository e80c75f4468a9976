"""Every machine type a stack names is offered in its zone (cloud rule gce-zone-offers-machine-type), checked against
the vendored gcloud machine-types export (stackspec/data/machine_regions.csv; its source in stackspec/data/README.md),
alike in ``slicectl lint`` and ``slicectl preview``, for the system pool, a Standard manager and the TPU pools."""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS
from test_cloud_rules import covers

from slicectl import cli
from slicectl.exits import Exit
from stackspec import machine_regions, machines
from stackspec import spec as stack_spec

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "stackspec" / "data"
NS = stack_spec.PROJECT
STACKS = ROOT / "stacks"


def test_the_extract_is_the_recorded_one_and_covers_every_machine_type():
    """The README records the source file's digest and the extract's; the extract holds the source's header and the
    lines of exactly the machine types the spec allows (so a machine added to stackspec/machines.py without
    re-vendoring fails here)."""
    readme = (DATA / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `machine_regions.csv`"))
    digests = re.findall(r"sha256 `([0-9a-f]{64})`", row) + re.findall(r"extract `([0-9a-f]{64})`", row)
    assert len(digests) == 2 and re.search(r"commit `[0-9a-f]{40}`", row) and "Apache-2.0" in row
    body = (DATA / "machine_regions.csv").read_bytes()
    assert hashlib.sha256(body).hexdigest() == digests[1], "re-vendor: the extract differs from the recorded one"
    rows = list(csv.DictReader(body.decode().splitlines(), delimiter=";"))
    assert list(rows[0]) == ["NAME", "CPUS", "SHARED_CPU", "MEMORY_GB", "DEPRECATED", "ZONE"]
    names = {r["NAME"] for r in rows}
    assert names <= set(machines.MACHINES)
    # The export's account sees no ct4p (v4 is restricted): that one is listed nowhere, so it is not checked.
    assert set(machines.MACHINES) - names == {"ct4p-hightpu-4t"}
    for r in rows:  # the machine table the capacity rules use never promises more than Compute Engine gives
        m = machines.MACHINES[r["NAME"]]
        assert int(r["CPUS"]) == m.vcpus, r
        assert m.memory_bytes <= float(r["MEMORY_GB"]) * machines.GIB, r  # gcloud's MEMORY_GB: memoryMb / 1024


def test_the_table_answers_what_gcloud_lists():
    assert machine_regions.offered("n1-standard-16", "us-east5-b") is False
    assert machine_regions.offered("n2-standard-16", "us-east5-b") is True
    assert machine_regions.offered("n1-standard-16", "us-east1-d") is True
    assert machine_regions.offered("ct6e-standard-4t", "us-east5-b") is True
    # Unknown to the export: an AI zone, a machine type it cannot see.
    assert machine_regions.offered("ct6e-standard-4t", "us-south1-ai1b") is None
    assert machine_regions.offered("ct4p-hightpu-4t", "us-east5-a") is None
    assert machine_regions.offered("n1-standard-16", "us-east5-z") is None  # no such zone: the zone rules say so
    assert machine_regions.system_default("us-east5-b") == "n2-standard-16"
    assert machine_regions.system_default("europe-west4-a") == "n1-standard-16"


def _run(tmp_path: Path, text: str, capsys, command: str) -> tuple[int, str]:
    (tmp_path / "Pulumi.case.yaml").write_text(text)
    extra = ["--out", str(tmp_path / "out")] if command == "preview" else []
    code = cli.main([command, "--stack", "case", "--stacks-dir", str(tmp_path), *extra])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err + captured.out


def _lines(out: str, key: str) -> list[str]:
    """The problem lines of ``key``, from the key on (lint and preview prefix them differently)."""
    mark = f"{NS}:{key} = "
    return sorted(mark + line.split(mark, 1)[1] for line in out.splitlines() if mark in line)


def _prod(edit) -> str:
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.prod.yaml").read_text())
    edit(doc["config"])
    return yaml.safe_dump(doc, sort_keys=False)


def _multi(edit) -> str:
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.multi.yaml").read_text())
    edit(doc["config"])
    return yaml.safe_dump(doc, sort_keys=False)


def _standard_manager(machine: str):
    def edit(c):
        c[f"{NS}:manager"].update(autopilot=False, systemMachineType=machine)
    return edit


CASES = {
    # The seed's machine in the zone the shipped stacks used: GCE lists no N1 in us-east5.
    "system pool": (_prod(lambda c: c[f"{NS}:cluster"].update(systemMachineType="n1-standard-16")),
                    "cluster.systemMachineType"),
    # A region's system pool in a multi-region stack, named at the region's key.
    "region's system pool": (_multi(lambda c: c[f"{NS}:regions"][0]["cluster"].update(
        systemMachineType="n1-standard-16")), "regions[0].cluster.systemMachineType"),
    # A Standard manager is regional: its pool lands in the region's zones.
    "standard manager": (_multi(_standard_manager("n1-standard-4")), "manager.systemMachineType"),
}


@covers("gce-zone-offers-machine-type")
@pytest.mark.parametrize("case", CASES)
def test_lint_and_preview_refuse_a_machine_its_zone_does_not_offer_alike(case, tmp_path, capsys):
    text, key = CASES[case]
    lint_code, lint_out = _run(tmp_path, text, capsys, "lint")
    preview_code, preview_out = _run(tmp_path, text, capsys, "preview")
    assert lint_code != Exit.OK and preview_code == Exit.INVALID_SPEC
    said = _lines(lint_out, key)
    assert said and said == _lines(preview_out, key), (lint_out, preview_out)
    msg = said[0]
    assert "is not offered in us-east5" in msg and "regions whose zones offer it: " in msg
    assert "us-east1" in msg.split("regions whose zones offer it: ")[1]  # where it is offered
    assert "stackspec/data/machine_regions.csv" in msg
    assert not (tmp_path / "out" / "resources.json").exists()


def test_a_tpu_machine_its_region_does_not_offer_is_refused_once(tmp_path, capsys):
    """v5p's zone list is incomplete (so its zone rule checks nothing); the export says which regions offer
    ct5p-hightpu-4t: asia-northeast1 is not one of them."""
    assert "asia-northeast1" not in machine_regions.regions("ct5p-hightpu-4t")

    def edit(c):
        c.update({"gcp:region": "asia-northeast1", "gcp:zone": "asia-northeast1-a"})
        c[f"{NS}:cluster"]["systemMachineType"] = "n1-standard-16"
        for s in c[f"{NS}:slices"]:
            s.update(generation="v5p", topology="2x2x2", machineType="ct5p-hightpu-4t")
    code, out = _run(tmp_path, _prod(edit), capsys, "lint")
    assert code != Exit.OK
    said = _lines(out, "slices[0].machineType")
    assert len(said) == 1 and "ct5p-hightpu-4t is not offered in asia-northeast1-a" in said[0], out


def test_the_shipped_stacks_name_only_offered_machines_and_say_why_beside_the_choice():
    for path in sorted(STACKS.glob("Pulumi.*.yaml")):
        stack = path.name.split(".")[1]
        s = stack_spec.load_stack(stack, STACKS)
        for v in (s.views or (s,)):
            assert machine_regions.offered(v.cluster.system_machine_type, v.zone) is not False, (stack, v.zone)
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "systemMachineType:" in line:
                near = " ".join(lines[max(0, i - 2):i + 1])
                assert "stackspec/data/machine_regions.csv" in near, (path.name, line)


def test_an_unset_system_machine_resolves_to_one_the_region_offers():
    """The model's defaults (the tutorial's n1-standard-16; n1-standard-4 for a Standard manager) where the region
    offers them, else their N2 twin: a stack that names none is never refused for a machine it did not write."""
    def drop(c):
        c[f"{NS}:cluster"].pop("systemMachineType", None)
    east5 = stack_spec.load("case", _config(_prod(drop)))
    assert east5.cluster.system_machine_type == "n2-standard-16"

    def in_europe(c):
        drop(c)
        c.update({"gcp:region": "europe-west4", "gcp:zone": "europe-west4-a"})
    assert stack_spec.load("case", _config(_prod(in_europe))).cluster.system_machine_type == "n1-standard-16"

    def standard_manager(c):
        c[f"{NS}:manager"]["autopilot"] = False
        c[f"{NS}:manager"].pop("systemMachineType", None)
        for r in c[f"{NS}:regions"]:
            r["cluster"].pop("systemMachineType", None)
    multi = stack_spec.load("case", _config(_multi(standard_manager)))
    assert multi.manager.system_machine_type == "n2-standard-8"  # us-east5: no n1-standard-4
    assert [(v.region, v.cluster.system_machine_type) for v in multi.views] == [
        ("us-east5", "n2-standard-16"), ("us-east1", "n1-standard-16")]


def _config(text: str) -> dict[str, str]:
    """A stack file's text as the flat config ``stack_spec.load`` reads (values of sections as JSON)."""
    import json

    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in yaml.safe_load(text)["config"].items()}
