"""Region-level availability is not zone-level: GKE creates a zonal cluster's pool in its zone, and a regional
cluster's (the Standard manager's, infra/cluster.py location=<region>, no node_locations) in three zones of its region
(https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters). The region export
(machine_regions.csv) lists a region when any zone offers the type. The last per-zone export of the same repository
(Cyclenerd/google-cloud-pricing-cost-calculator tools/machinetypezone.csv@4ed73c63446f86017f85a564b71bca2d07ee7156,
2023-05-02; stackspec/data/machine_zones.csv) lists n1-standard-* in me-west1-b and -c, not -a, while it and the
2026 region export list me-west1: a zonal cluster in me-west1-a, or a Standard manager in me-west1 with its
default n1-standard-4, was accepted and fails at its pool."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

from offline import engine
from stackspec import machine_regions, machines, spec
from stackspec.errors import SpecError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "stackspec" / "data"
NS = spec.PROJECT


def test_the_zone_extract_is_the_recorded_one_and_covers_every_system_machine():
    row = next(line for line in (DATA / "README.md").read_text().splitlines()
               if line.startswith("| `machine_zones.csv`"))
    digests = re.findall(r"sha256 `([0-9a-f]{64})`", row) + re.findall(r"extract `([0-9a-f]{64})`", row)
    assert len(digests) == 2 and re.search(r"commit `[0-9a-f]{40}`", row) and "Apache-2.0" in row
    body = (DATA / "machine_zones.csv").read_bytes()
    assert hashlib.sha256(body).hexdigest() == digests[1]
    rows = list(csv.DictReader(body.decode().splitlines(), delimiter=";"))
    assert {r["NAME"] for r in rows} == set(machines.SYSTEM_MACHINES)


def test_a_zone_the_per_zone_export_lists_without_the_type_is_refused():
    assert machine_regions.offered("n1-standard-16", "me-west1-b") is True
    assert machine_regions.offered("n1-standard-16", "me-west1-a") is False
    msg = machine_regions.error("n1-standard-16", "me-west1-a")
    assert msg and "me-west1-b, me-west1-c" in msg and "2023-05-02" in msg, msg
    assert machine_regions.offered("n2-standard-16", "me-west1-a") is True
    # Where the per-zone export cannot say (a region it predates), the region export decides, as before.
    assert machine_regions.offered("n2-standard-16", "us-east5-b") is True


def test_a_regional_pool_needs_the_type_in_three_zones():
    assert machine_regions.offered("n1-standard-4", "me-west1") is False  # b and c only
    assert machine_regions.offered("n2-standard-8", "me-west1") is True
    assert machine_regions.system_default("me-west1", "n1-standard-4") == "n2-standard-8"


def test_a_standard_manager_in_me_west1_gets_an_offered_default_and_is_refused_with_n1():
    cfg = dict(engine.stack_config("multi"))
    manager = json.loads(cfg[f"{NS}:manager"])
    manager.update(autopilot=False, region="me-west1")
    manager.pop("systemMachineType", None)
    cfg[f"{NS}:manager"] = json.dumps(manager)
    try:
        loaded = spec.load("multi", cfg)
        assert loaded.manager.system_machine_type == "n2-standard-8"
    except SpecError as e:  # other rules may refuse a manager moved across the world; never for its machine
        assert "systemMachineType" not in str(e), str(e)
    manager["systemMachineType"] = "n1-standard-4"
    cfg[f"{NS}:manager"] = json.dumps(manager)
    try:
        spec.load("multi", cfg)
        raise AssertionError("a Standard manager of n1-standard-4 in me-west1 was accepted")
    except SpecError as e:
        assert "manager.systemMachineType" in str(e) and "n1-standard-4" in str(e), str(e)
