"""Capacity fallbacks: the spec's capacity options, their node pools, the ComputeClass and its policies.

The real program runs under Pulumi's mocks (``offline.engine.render``: GCP and the Pulumi engine
are the only things replaced); rendered ComputeClasses are validated against the schema written
from GKE's documentation (tests/reference/computeclass/, GKE publishes no CRD for it).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from conftest import with_fallbacks

from offline import engine
from policies import offline as policy
from policies.rules.common import COMPUTE_CLASS, NODE_POOL
from stackspec import kube, names
from stackspec import spec as stack_spec
from stackspec.errors import SpecError

NS = stack_spec.PROJECT
SCHEMA = json.loads((Path(__file__).parent / "reference" / "computeclass" / "schema.json").read_text())


def each(**keys):
    """An edit setting ``keys`` on every item of a list value (every slice)."""
    return lambda items: [dict(item, **keys) for item in items]


def config(stack: str, **edits) -> dict[str, str]:
    """The stack file's config, with JSON values replaced by ``fn(value)`` per key (``slices=fn``)."""
    cfg = dict(engine.stack_config(stack))
    for key, fn in edits.items():
        k = f"{NS}:{key}"
        value = copy.deepcopy(json.loads(cfg[k]))
        out = fn(value)
        cfg[k] = json.dumps(value if out is None else out)
    return cfg


def classes(rendering) -> list[dict]:
    return [d for d in rendering.manifests if d["kind"] == "ComputeClass"]


def validate(doc: dict) -> None:
    jsonschema.validate(doc, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_prod_has_a_schema_valid_compute_class_per_group_in_the_spec_order(prod, prod_fallbacks):
    # prod as shipped: the seed's on-demand slices, one priority.
    spec = prod.spec
    docs = {d["metadata"]["name"]: d for d in classes(prod)}
    assert set(docs) == {names.compute_class(g.name) for g in spec.groups}
    for g in spec.groups:
        doc = docs[g.compute_class]
        validate(doc)
        assert [c.type for c in g.capacity] == ["on-demand"]
        assert doc["spec"]["priorities"] == [{"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"},
                                              "spot": False}]
        assert doc["spec"]["whenUnsatisfiable"] == "DoNotScaleUp"
        assert doc["spec"]["nodePoolAutoCreation"] == {"enabled": False}
        assert "namespace" not in doc["metadata"]  # cluster-scoped
    # Opted in to fallbacks: one priority per option, in the spec's order.
    spec = prod_fallbacks.spec
    docs = {d["metadata"]["name"]: d for d in classes(prod_fallbacks)}
    assert set(docs) == {names.compute_class(g.name) for g in spec.groups}
    for g in spec.groups:
        doc = docs[g.compute_class]
        validate(doc)
        rules = doc["spec"]["priorities"]
        assert [c.type for c in g.capacity] == ["reservation", "flex-start", "on-demand"]
        assert rules[0]["reservations"] == {"affinity": "Specific", "specific": [{"name": "v6e-res"}]}
        assert rules[1]["flexStart"] == {"enabled": True} and rules[1]["maxRunDurationSeconds"] == 7 * 86400
        assert rules[2]["spot"] is False and "flexStart" not in rules[2]
        assert len(rules) == 3
        for rule in rules:
            assert rule["tpu"] == {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}
        assert doc["spec"]["whenUnsatisfiable"] == "DoNotScaleUp"
        assert doc["spec"]["nodePoolAutoCreation"] == {"enabled": False}


def test_prod_node_pools_labelled_tainted_and_whole(prod):
    """prod as shipped: one on-demand pool per slice, named for it, the whole slice held as the seed's."""
    pools = {r.inputs["name"]: r.inputs for r in prod.by_type(NODE_POOL) if r.inputs["name"] != "system"}
    assert set(pools) == {"v6e-16-0", "v6e-16-1"}
    for p in pools.values():
        cfg = p["nodeConfig"]
        assert cfg["labels"][kube.COMPUTE_CLASS_LABEL] == "tpu-group-class"
        assert cfg["labels"][kube.CAPACITY_LABEL] == "on-demand"
        assert {"key": kube.COMPUTE_CLASS_LABEL, "value": "tpu-group-class", "effect": "NO_SCHEDULE"} in cfg["taints"]
        assert p["nodeCount"] == 4 and "autoscaling" not in p
        assert not cfg.get("flexStart") and not cfg.get("spot") and "reservationAffinity" not in cfg


def test_prod_fallback_node_pools_one_per_option_labelled_tainted_and_scaled_from_zero(prod_fallbacks):
    pools = {r.inputs["name"]: r.inputs for r in prod_fallbacks.by_type(NODE_POOL) if r.inputs["name"] != "system"}
    assert set(pools) == {f"v6e-16-{i}-{o}" for i in (0, 1) for o in ("rsv", "flex", "std")}
    for name, p in pools.items():
        cfg = p["nodeConfig"]
        assert cfg["labels"][kube.COMPUTE_CLASS_LABEL] == "tpu-group-class"
        assert {"key": kube.COMPUTE_CLASS_LABEL, "value": "tpu-group-class", "effect": "NO_SCHEDULE"} in cfg["taints"]
        # Fallbacks cost nothing unused: every option's pool scales 0 <-> one whole slice (4 hosts), per zone.
        assert p["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
        assert "nodeCount" not in p or p["nodeCount"] is None
        if name.endswith("-flex"):
            assert cfg["flexStart"] is True and cfg["maxRunDuration"] == "604800s"
            assert cfg["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
            assert cfg["labels"][kube.CAPACITY_LABEL] == "flex-start"
            assert p["management"]["autoRepair"] is False
        elif name.endswith("-rsv"):  # the named reservation
            assert cfg["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                                  "key": "compute.googleapis.com/reservation-name",
                                                  "values": ["v6e-res"]}
            assert cfg["labels"][kube.CAPACITY_LABEL] == "reservation" and not cfg.get("spot")
        else:
            assert not cfg.get("flexStart") and not cfg.get("spot") and "reservationAffinity" not in cfg
            assert cfg["labels"][kube.CAPACITY_LABEL] == "on-demand"


def test_an_any_reservation_comes_last():
    """GCE runs an ANY reservation's VMs on demand when none matches: options after it would never be tried."""
    ahead = [{"type": "reservation", "affinity": "ANY"}, {"type": "flex-start"}, {"type": "on-demand"}]
    with pytest.raises(SpecError) as e:
        stack_spec.load("prod", with_fallbacks(engine.stack_config("prod"), ahead))
    assert f"{NS}:slices[0].capacity[0].affinity" in str(e.value) and "make it the last option" in str(e.value)
    last = [{"type": "flex-start"}, {"type": "reservation", "affinity": "ANY"}]
    s = stack_spec.load("prod", with_fallbacks(engine.stack_config("prod"), last))
    assert [c.type for c in s.slices[0].capacity] == ["flex-start", "reservation"]


def test_prod_pods_select_the_class(prod):
    from workloads.manifests import worker_groups

    groups = [g for d in prod.manifests if d["kind"] in ("RayCluster", "RayJob") for g in worker_groups(d)]
    assert groups
    for group in groups:
        pod = group["template"]["spec"]
        name = names.compute_class(group["groupName"])
        assert pod["nodeSelector"][kube.COMPUTE_CLASS_LABEL] == name
        assert {"key": kube.COMPUTE_CLASS_LABEL, "operator": "Equal", "value": name,
                "effect": "NoSchedule"} in pod["tolerations"]


def test_prod_passes_the_fallback_policies(prod, prod_fallbacks):
    for r in (prod, prod_fallbacks):
        found = [v for v in policy.evaluate(r) if v.rule.startswith("compute-class")]
        assert found == []


def test_spot_reservation_and_flex_pools():
    """Every option type's pool: Spot, a shared reservation, flex-start, on-demand (dev stack); queued flex-start
    is a slice's only option (``test_kueue``), so it has its own render below."""
    opts = [{"type": "reservation", "reservation": "v6e-res", "project": "shared-tpu-project"},
            {"type": "spot"}, {"type": "flex-start", "maxRunDuration": "24h"},
            {"type": "on-demand"}]
    r = engine.render("dev", config("dev", slices=each(capacity=opts)))
    pools = {p.inputs["name"]: p.inputs for p in r.by_type(NODE_POOL) if p.inputs["name"] != "system"}
    assert set(pools) == {"v6e-8-0-rsv", "v6e-8-0-spot", "v6e-8-0-flex", "v6e-8-0-std"}  # order: the class
    rsv = pools["v6e-8-0-rsv"]["nodeConfig"]["reservationAffinity"]
    assert rsv == {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "compute.googleapis.com/reservation-name",
                   "values": ["projects/shared-tpu-project/reservations/v6e-res"]}
    assert pools["v6e-8-0-spot"]["nodeConfig"]["spot"] is True
    assert "queuedProvisioning" not in pools["v6e-8-0-flex"]
    assert pools["v6e-8-0-flex"]["nodeConfig"]["maxRunDuration"] == "86400s"
    queued = engine.render("dev", config("dev", slices=each(capacity=[
        {"type": "flex-start", "maxRunDuration": "24h", "queuedProvisioning": True}])))
    (flex,) = [p.inputs for p in queued.by_type(NODE_POOL) if p.inputs["name"] != "system"]
    assert flex["queuedProvisioning"] == {"enabled": True}
    (doc,) = classes(r)
    validate(doc)
    rules = doc["spec"]["priorities"]
    assert rules[0]["reservations"] == {"affinity": "Specific",
                                        "specific": [{"name": "v6e-res", "project": "shared-tpu-project"}]}
    assert rules[1]["spot"] is True and rules[2]["flexStart"] == {"enabled": True} and rules[3]["spot"] is False
    assert all(x["tpu"] == {"type": "tpu-v6e-slice", "count": 4, "topology": "2x4"} for x in rules)


def _with_class(rendering, fn):
    """The rendering's resources with the ComputeClass's props changed by ``fn`` (a hand-edited class)."""
    out = []
    for res in policy.resources_of(rendering):
        if res.type == COMPUTE_CLASS:
            props = copy.deepcopy(dict(res.props))
            fn(props)
            res = type(res)(res.type, res.name, res.urn, props)
        out.append(res)
    return out


def test_policy_refuses_a_fallback_of_another_topology(prod_fallbacks):
    from policies.registry import rule

    def add_4x8(props):
        props["spec"]["priorities"].append({"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x8"},
                                            "spot": False})

    found = rule("compute-class-fits-jobs").check(_with_class(prod_fallbacks, add_4x8), policy.Context("prod"))
    msgs = [m for _, m in found]
    assert any("priority 4 (on-demand) provisions v6e-32 4x8" in m and "same slice shape" in m for m in msgs)
    # The job's 16-chip ICI mesh cannot tile a 32-chip slice either: the RayJob is named.
    assert any(m.startswith("RayJob llama3-8b-elastic cannot use ComputeClass tpu-group-class priority 4")
               and "32 chips" in m for m in msgs)


def test_policy_refuses_a_single_option_class_in_prod_and_warns_in_dev(prod, prod_fallbacks):
    from policies.registry import rule

    r = rule("compute-class-has-fallback")
    # Pools that scale from zero behind a class of one option: when it has no capacity the slices wait.
    one = _with_class(prod_fallbacks, lambda p: p["spec"]["priorities"].__delitem__(slice(1, None)))
    (found,) = r.check(one, policy.Context("prod"))
    assert "ComputeClass tpu-group-class has 1 capacity option(s) (reservation v6e-res)" in found[1]
    assert r.level("prod") == "mandatory" and r.level("dev") == "advisory"
    # prod as shipped: one option, but every pool of the class holds its whole slice (the seed's): passes.
    assert r.check(policy.resources_of(prod), policy.Context("prod")) == []
    # The same class with one of its pools scaling from zero is refused.
    def autoscaled(res):
        if res.type == NODE_POOL and res.props.get("name") == "v6e-16-1":
            props = {k: v for k, v in res.props.items() if k != "nodeCount"}
            props["autoscaling"] = {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
            return type(res)(res.type, res.name, res.urn, props)
        return res

    (found,) = r.check([autoscaled(x) for x in policy.resources_of(prod)], policy.Context("prod"))
    assert "ComputeClass tpu-group-class has 1 capacity option(s) (on-demand)" in found[1]


def test_pool_labelled_for_a_class_without_its_taint_is_refused():
    from policies.rules.slice_shape import node_pool_compute_class

    props = {"name": "p", "nodeConfig": {"labels": {kube.COMPUTE_CLASS_LABEL: "c"}, "taints": []}}
    (msg,) = node_pool_compute_class(NODE_POOL, props, policy.Context("prod"))
    assert "without the taint cloud.google.com/compute-class=c:NoSchedule" in msg


def test_old_single_capacity_form_still_loads():
    cfg = config("dev", slices=each(capacity={"type": "spot"}))
    s = stack_spec.load("dev", cfg)
    (only,) = s.slices
    assert only.capacity == (stack_spec.Capacity(type="spot"),) and only.preferred.spot
    assert only.pools == ((only.capacity[0], "v6e-8-0"),)  # one option keeps the slice's own pool name
    r = engine.render("dev", cfg)
    (pool,) = [p.inputs for p in r.by_type(NODE_POOL) if p.inputs["name"] != "system"]
    assert pool["name"] == "v6e-8-0" and pool["nodeCount"] == 2  # one option: the slice stays up, as before
    (doc,) = classes(r)
    validate(doc)
    assert doc["spec"]["priorities"] == [{"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "2x4"},
                                          "spot": True}]


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        ([{"type": "spot"}, {"type": "spot"}], "capacity type spot is listed 2 times"),
        ([{"type": "reservation"}, {"type": "on-demand"}], "required when type is reservation with SPECIFIC"),
        ([{"type": "flex-start", "maxRunDuration": "8d"}], "must be at most 604800"),
        ([{"type": "flex-start", "maxRunDuration": 60}], "must be at least 600"),
        ([{"type": "spot", "maxRunDuration": "1h"}], "only allowed when type is flex-start, not spot"),
        ([{"type": "on-demand", "queuedProvisioning": True}], "only allowed when type is flex-start, not on-demand"),
        ([{"type": "spot", "project": "other-project"}], "only allowed when type is reservation, not spot"),
        ([], "needs at least 1 item"),
    ],
)
def test_capacity_option_rules(capacity, expected):
    with pytest.raises(SpecError) as e:
        stack_spec.load("dev", config("dev", slices=lambda v: v[0].update(capacity=capacity)))
    assert expected in str(e.value)


def test_slices_of_a_group_share_their_options():
    cfg = config("prod", slices=lambda v: v[1].update(capacity=[{"type": "on-demand"}, {"type": "flex-start"}]))
    with pytest.raises(SpecError) as e:
        stack_spec.load("prod", cfg)
    assert (f"{NS}:slices[1].capacity" in str(e.value)
            and "list the same capacity options in the same order as slice v6e-16-0" in str(e.value))


def test_auto_created_pools_refused_with_dcn_networks():
    cfg = config("prod", slices=each(nodePoolAutoCreation=True))
    with pytest.raises(SpecError) as e:
        stack_spec.load("prod", cfg)
    assert "auto-created node pools get no additional node networks" in str(e.value)


def test_auto_created_pools_render_no_pool_and_enable_auto_creation():
    cfg = config("dev", slices=each(nodePoolAutoCreation=True),
                 network=lambda v: v.update(secondary=[]))
    r = engine.render("dev", cfg)
    assert [p.inputs["name"] for p in r.by_type(NODE_POOL)] == ["system"]
    (doc,) = classes(r)
    validate(doc)
    assert doc["spec"]["nodePoolAutoCreation"] == {"enabled": True}


def test_schema_refuses_what_gke_refuses():
    good = {"apiVersion": "cloud.google.com/v1", "kind": "ComputeClass", "metadata": {"name": "c"},
            "spec": {"priorities": [{"tpu": {"type": "tpu-v6e-slice", "count": 4, "topology": "4x4"}}]}}
    validate(good)
    for bad_rule in ({"spot": True, "flexStart": {"enabled": True}},
                     {"flexStart": {"enabled": True}, "reservations": {"affinity": "AnyBestEffort"}},
                     {"reservations": {"affinity": "Specific"}},
                     {"tpu": {"type": "tpu-v6e-slice", "count": 4}},
                     {"unknownField": 1}):
        bad = copy.deepcopy(good)
        bad["spec"]["priorities"][0].update(bad_rule)
        with pytest.raises(jsonschema.ValidationError):
            validate(bad)
