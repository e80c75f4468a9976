"""The cost table under the stack's own cluster shapes: a Standard manager is a regional cluster, and its system
pool's ``node_count`` is per zone.

``infra/cluster.py`` creates the manager's pool with ``location=<region>``, ``node_count=systemNodeCount`` and no
``node_locations``. terraform-provider-google (website/docs/r/container_node_pool.html.markdown): ``node_count`` is
"The number of nodes per instance group", one instance group per zone; GKE's regional clusters page
(https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters): with the default configuration a
regional cluster in us-east1 provisions nodes in three zones (us-east1-b, -c, -d), its default pool "nine nodes
(three per zone)". So a Standard manager runs ``systemNodeCount`` nodes in each of three zones.
"""

from __future__ import annotations

import json

import pytest

from offline import engine
from stackspec import cost, errors, machines, quota, spec

NS = spec.PROJECT
PRICE = 0.5  # USD per machine-hour, given through the spec so no table figure is assumed


def _standard_manager(nodes: int, machine: str = "n2-standard-8", region: str | None = None) -> dict:
    out = dict(engine.stack_config("multi"))
    manager = json.loads(out[f"{NS}:manager"])
    manager.update(autopilot=False, systemMachineType=machine, systemNodeCount=nodes)
    if region:  # the stack's us-east5 offers no N1 machine
        manager["region"] = region
    out[f"{NS}:manager"] = json.dumps(manager)
    prices = json.loads(out.get(f"{NS}:prices", "{}"))
    prices.setdefault("machines", {})[machine] = PRICE
    out[f"{NS}:prices"] = json.dumps(prices)
    return out


def test_a_standard_managers_pool_is_priced_per_zone_of_its_regional_cluster():
    for nodes in (1, 2):
        doc = cost.compute(spec.load("multi", _standard_manager(nodes)))
        [row] = [r for r in doc["standing"] if r["item"].startswith("manager ")]
        assert row["usdPerHour"] == round(3 * nodes * PRICE, 4), row
        assert "3 zones" in row["what"], row["what"]


def _with_cpu_quota(config: dict, region: str, cpus: int) -> tuple[dict, int]:
    """``config`` declaring the TPU quota its slices need (a ``quota`` section checks every region's chips) and
    ``cpus`` as ``region``'s CPUs quota; and the index of the entry that declares it."""
    entries: dict[tuple[str, str], dict] = {}
    for n in quota.needs(spec.load("multi", config)):
        if n.quota_type != "reserved":
            entries.setdefault((n.region, n.generation), {"region": n.region, "generation": n.generation})[
                n.quota_type] = n.chips
    listed = list(entries.values())
    at = next((k for k, e in enumerate(listed) if e["region"] == region), len(listed))
    listed[at:at + 1] = [{**(listed[at] if at < len(listed) else {"region": region}), "cpus": cpus}]
    return {**config, f"{NS}:quota": json.dumps(listed)}, at


def test_a_standard_managers_pool_counts_against_the_cpu_quota_in_each_zone():
    """The declared CPUs quota of the manager's region holds its n1 pool in each of three zones (8 vCPUs x nodes x 3),
    beside the zonal system pool of a region cluster there (one zone): one vCPU less is refused, naming the key."""
    for nodes in (1, 2):
        config = _standard_manager(nodes, "n1-standard-8", "us-east1")
        plain = spec.load("multi", config)
        region = plain.manager.region or plain.region
        zonal = sum(machines.MACHINES[v.cluster.system_machine_type].vcpus * v.cluster.system_node_count
                    for v in plain.region_views()
                    if v.region == region and v.cluster.system_machine_type.startswith("n1-"))
        need = 8 * nodes * 3 + zonal
        spec.load("multi", _with_cpu_quota(config, region, need)[0])  # exactly enough: accepted
        short, at = _with_cpu_quota(config, region, need - 1)
        with pytest.raises(errors.SpecError) as refused:
            spec.load("multi", short)
        assert [p.key for p in refused.value.problems] == [f"{NS}:quota[{at}].cpus"], refused.value
        message = refused.value.problems[0].message
        assert f"need {need} vCPUs" in message and "in each of 3 zones" in message, message


def test_a_pool_of_a_family_with_its_own_cpu_quota_is_not_counted_against_cpus():
    """An n2 (or e2) pool draws on its family's quota (``N2_CPUS``, ``E2_CPUS``), not on ``CPUS``: a Standard
    manager of n2-standard-8 nodes is not refused for the CPUs quota its region declares, however small."""
    config = _standard_manager(2, "n2-standard-8")
    plain = spec.load("multi", config)
    region = plain.manager.region or plain.region
    n1 = sum(machines.MACHINES[v.cluster.system_machine_type].vcpus * v.cluster.system_node_count
             for v in plain.region_views() if v.region == region and v.cluster.system_machine_type.startswith("n1-"))
    loaded = spec.load("multi", _with_cpu_quota(config, region, n1)[0])  # the n1 pools' vCPUs only: accepted
    assert plain.manager.name not in "; ".join(quota.cpu_needs(loaded).get(region, (0, []))[1])


def test_an_entry_declaring_only_cpus_does_not_hide_the_regions_tpu_entry():
    """``{region, cpus}`` as an entry of its own (as docs/quota.md shows it), beside the region's TPU entry: its
    generation is the default one, yet the chips are checked against the entry that declares them."""
    config = _standard_manager(1, "n1-standard-8", "us-east1")
    with_tpu, _ = _with_cpu_quota(config, "us-east1", 10_000)
    listed = json.loads(with_tpu[f"{NS}:quota"])
    for e in listed:
        e.pop("cpus", None)
    for at in (0, len(listed)):  # before and after the TPU entries
        entries = [*listed[:at], {"region": "us-east1", "cpus": 10_000}, *listed[at:]]
        spec.load("multi", {**config, f"{NS}:quota": json.dumps(entries)})
