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

from offline import engine
from stackspec import cost, spec

NS = spec.PROJECT
PRICE = 0.5  # USD per machine-hour, given through the spec so no table figure is assumed


def _standard_manager(nodes: int) -> dict:
    out = dict(engine.stack_config("multi"))
    manager = json.loads(out[f"{NS}:manager"])
    manager.update(autopilot=False, systemMachineType="n2-standard-8", systemNodeCount=nodes)
    out[f"{NS}:manager"] = json.dumps(manager)
    prices = json.loads(out.get(f"{NS}:prices", "{}"))
    prices.setdefault("machines", {})["n2-standard-8"] = PRICE
    out[f"{NS}:prices"] = json.dumps(prices)
    return out


def test_a_standard_managers_pool_is_priced_per_zone_of_its_regional_cluster():
    for nodes in (1, 2):
        doc = cost.compute(spec.load("multi", _standard_manager(nodes)))
        [row] = [r for r in doc["standing"] if r["item"].startswith("manager ")]
        assert row["usdPerHour"] == round(3 * nodes * PRICE, 4), row
        assert "3 zones" in row["what"], row["what"]
