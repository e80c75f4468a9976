"""Day 0 to day 2, simulated offline with state carried between runs (offline/lifecycle.py).

The program runs for real under mocks each day; the state is the first run's rendering plus GKE's own
changes (simulated: no cloud here), and each plan follows the provider's diff rules the module names.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, rendered

from offline import engine
from offline import lifecycle as lc

ROOT = Path(__file__).resolve().parents[1]
NS = "tpu-multislice"


def day1(stack: str, config: dict | None = None):
    rendering = rendered(stack, config)  # the first run: rendered once per process (conftest)
    first = lc.first_up(rendering)
    state, changes = lc.gke_changes(first.state)
    return rendering, first, state, changes


@pytest.fixture(scope="module")
def prod_days():
    return day1("prod")


def plan_to(stack: str, state, edit) -> lc.Plan:
    cfg = engine.stack_config(stack)
    edit(cfg)
    new = engine.render(stack, cfg)
    return lc.plan(state, new, lc.replace_on_changes(new))


def names(plan: lc.Plan, op: str) -> set[str]:
    return {s.name for s in plan.by_op(op)}


def _section(cfg, key, fn):
    value = json.loads(cfg[f"{NS}:{key}"])
    fn(value)
    cfg[f"{NS}:{key}"] = json.dumps(value)


# --------------------------------------------------------------------------- day 0


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_first_up_creates_in_the_order_the_cloud_needs(stack):
    rendering, first, _, _ = day1(stack)
    # gcp.md B4: image-streaming pools wait for containerfilesystem.googleapis.com (issue #26 item 5).
    assert first.problems == []
    order = {first.state[u]["name"]: i for i, wave in enumerate(first.waves) for u in wave}
    cluster = rendering.spec.cluster.name
    # The cluster, its system pool, then the slices and the Kubernetes provider (the node account and its roles
    # are the bootstrap's, made before any stack).
    assert order[cluster] < order[f"{cluster}-system"]
    for s in rendering.spec.slices:
        pools = [n for n in order if n.startswith(s.name)]
        assert pools and all(order[f"{cluster}-system"] < order[p] for p in pools)
        assert all(order[f"{cluster}-dcn-subnet-1"] < order[p] for p in pools)
    assert order[f"{cluster}-checkpoints-iam-policy"] > order[cluster]  # the WI pool exists first
    assert order[f"{cluster}-k8s"] > order[f"{cluster}-system"]
    jobs = [r.name for r in rendering.by_type("kubernetes:ray.io/v1:RayJob")]
    queues = [r.name for r in rendering.by_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")]
    assert jobs and queues and max(order[q] for q in queues) < min(order[j] for j in jobs)
    # The first up has no image digest: it creates the repository the image is then pushed to.
    assert f"{cluster}-images" in order or rendering.spec.image is None


def test_a_binding_that_would_race_the_identity_pool_is_named(prod_days):
    rendering, first, _, _ = prod_days
    state = copy.deepcopy(first.state)
    cluster = rendering.one("gcp:container/cluster:Cluster", "maxtext-tpu").urn
    binding = rendering.one("gcp:storage/bucketIAMPolicy:BucketIAMPolicy", "maxtext-tpu-checkpoints-iam-policy")
    state[binding.urn]["dependencies"] = [d for d in state[binding.urn]["dependencies"] if d != cluster]
    [problem] = [p for p in lc.prerequisite_problems(state) if "iam-wi-pool-exists" in p]
    assert "maxtext-tpu-checkpoints-iam-policy" in problem


# --------------------------------------------------------------------------- day 1


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_a_second_run_after_gke_changes_plans_nothing(stack):
    rendering, _, state, changes = day1(stack)
    assert any("auto-upgraded" in c for c in changes)
    if stack == "dev":  # Spot then flex-start: GKE labels the flex-start pool, the autoscaler grows pools
        assert any("gke-flex-start" in c for c in changes) and any("autoscaler" in c for c in changes)
    again = lc.plan(state, engine.render(stack), lc.replace_on_changes(rendering))
    assert again.changes == [], [s.line() for s in again.changes]
    assert len(again.steps) == sum(1 for r in rendering.resources if r.custom)


def test_a_pinned_pool_version_or_managed_flex_labels_would_fight_gke():
    """What the project no longer does, shown failing day 1 (so the no-change result above means something)."""
    rendering, first, _, _ = day1("dev")
    pinned = copy.deepcopy(first.state)
    for e in pinned.values():
        if e["type"] == lc.NODE_POOL:
            e["inputs"]["version"] = e["outputs"]["version"] = "1.35.2-gke.1842000"
            e["ignoreChanges"] = []
    state, _ = lc.gke_changes(pinned)
    new = rendered("dev")
    for r in new.resources:
        if r.type == lc.NODE_POOL:
            r.inputs["version"] = "1.35.2-gke.1842000"
            object.__setattr__(r, "ignore_changes", ())
    plan = lc.plan(state, new)
    fields = {f for s in plan.by_op("update") for f in s.fields}
    assert "version" in fields and "nodeConfig.labels.cloud.google.com/gke-flex-start" in fields


# --------------------------------------------------------------------------- day 2


def test_adding_a_slice_adds_its_pool_and_the_quota_only(prod_days):
    _, _, state, _ = prod_days

    def add(slices):
        new = copy.deepcopy(slices[-1])
        new["name"] = "v6e-16-2"
        slices.append(new)
    plan = plan_to("prod", state, lambda cfg: _section(cfg, "slices", add))
    assert names(plan, "create") == {"v6e-16-2"}
    # The quota, and the drill's admission policy (its nodes may now be drilled), in place.
    assert {s.type for s in plan.by_op("update")} == {
        "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"}
    assert not plan.by_op("replace") and not plan.by_op("delete")


def test_reordering_capacity_options_changes_the_compute_class_only():
    _, _, state, _ = day1("dev")
    plan = plan_to("dev", state, lambda cfg: _section(
        cfg, "slices", lambda ss: [s.update(capacity=list(reversed(s["capacity"]))) for s in ss]))
    assert [(s.op, s.type) for s in plan.changes] == [("update", "kubernetes:cloud.google.com/v1:ComputeClass")]


def test_raising_a_jobs_steps_replaces_that_rayjob_only(prod_days):
    _, _, state, _ = prod_days
    plan = plan_to("prod", state, lambda cfg: _section(cfg, "jobs", lambda jobs: jobs[0].update(steps=1000)))
    assert [(s.op, s.name) for s in plan.changes] == [("replace", "maxtext-tpu-workloads-llama3-8b-multislice")]


def test_setting_the_image_digest_moves_only_the_workloads_to_it(prod_days):
    _, _, state, _ = prod_days
    plan = plan_to("prod", state, lambda cfg: _section(cfg, "image",
                                                         lambda i: i.update(digest="sha256:" + "a" * 64)))
    # ... and Binary Authorization stops admitting ray.image's Docker Hub repository (day 0 is over).
    assert {s.type for s in plan.changes} == {"kubernetes:ray.io/v1:RayJob", "gcp:binaryauthorization/policy:Policy"}
    assert all(s.op == "replace" for s in plan.changes if s.type == "kubernetes:ray.io/v1:RayJob")
    assert [s.op for s in plan.changes if s.type.startswith("gcp:")] == ["update"]


# --------------------------------------------------------------------------- the command


def test_slicectl_lifecycle_shows_each_day_and_carries_state(tmp_path, capsys):
    """The command as a user runs it, in this process (``cli.main``, its exit code and what it prints): the
    subprocess would add nothing but an interpreter start per call."""
    from slicectl import cli

    changed = tmp_path / "Pulumi.dev.yaml"
    text = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    changed.write_text(text.replace("steps: 50\n", "steps: 200\n", 1))
    cmd = ["lifecycle", "--stack", "dev", "--change", str(changed), "--out", str(tmp_path / "build")]
    assert cli.main(cmd) == 0
    out = capsys.readouterr().out
    assert "A simulation" in out and "terraform-provider-google @" in out
    assert "Day 0:" in out and "every resource waits" in out
    assert "plan: no changes" in out
    assert "Day 2: to" in out and "1 to replace" in out
    state = tmp_path / "build/dev/state.json"
    assert state.is_file()
    assert cli.main([*cmd[:5], "--state", str(state), "--out", str(tmp_path / "b2")]) == 0
    assert "Day 0: skipped" in capsys.readouterr().out
    assert cli.main([*cmd[:5], "--state", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    for bad in ("{not json", '{"urn": 1}'):
        broken = tmp_path / "broken.json"
        broken.write_text(bad)
        # An exit code, not an exception (in a process: no traceback).
        assert cli.main([*cmd[:5], "--state", str(broken)]) == 2
        assert "not a state slicectl lifecycle wrote" in capsys.readouterr().err


# --------------------------------------------------------------------------- the provider's ForceNew


def test_the_fields_the_review_found_missing_replace():
    """The ForceNew fields a hand list had missed (gcp.md 2.4, with terraform-provider-google's lines) are read
    from the provider's schema now."""
    pool = dict(lc.FORCE_NEW[lc.NODE_POOL])
    for path in ("nodeConfig.maxRunDuration", "nodeConfig.serviceAccount", "nodeConfig.oauthScopes",
                 "nodeConfig.advancedMachineFeatures.threadsPerCore",
                 "nodeConfig.shieldedInstanceConfig.enableSecureBoot",
                 "nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", "nodeConfig.spot",
                 "nodeConfig.flexStart"):
        assert pool.get(path) == "value", path
    # Blocks: replaced when added or removed (terraform-plugin-sdk: a block list's ForceNew is on its count).
    for path in ("nodeConfig.advancedMachineFeatures", "nodeConfig.shieldedInstanceConfig", "placementPolicy"):
        assert pool.get(path) == "count", path
    assert dict(lc.FORCE_NEW["gcp:storage/bucket:Bucket"])["customPlacementConfig.dataLocations"] == "value"
    # Read by hand at the schema's commit (e03b7622): the generic test below takes its fields from the table, so
    # a field the table lost is caught here or by the regeneration from the vendored provider files.
    for path in ("nodeConfig.metadata",  # node_config.go:543
                 "nodeConfig.reservationAffinity.consumeReservationType",  # node_config.go:591
                 "placementPolicy.policyName", "queuedProvisioning.enabled"):  # resource_container_node_pool.go:377,400
        assert pool.get(path) == "value", path
    assert pool.get("queuedProvisioning") == "count"  # resource_container_node_pool.go:392
    assert dict(lc.FORCE_NEW["gcp:compute/network:Network"])["autoCreateSubnetworks"] == "value"  # :153
    # The block is ForceNew on its count only: its tpu_topology is not (resource_container_node_pool.go:383).
    assert "placementPolicy.tpuTopology" not in pool
    # What updates in place in the provider: a machine type, an MTU, multi-networking.
    assert "nodeConfig.machineType" not in pool
    assert "mtu" not in dict(lc.FORCE_NEW["gcp:compute/network:Network"])
    assert "enableMultiNetworking" not in dict(lc.FORCE_NEW[lc.CLUSTER])


def _changed(value):
    """Another value of the same kind, as a spec change would make."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["added"]
    if isinstance(value, dict):
        return {**value, "changed": "yes"}
    raise TypeError(value)


def _set(obj, path, fn):
    """``fn`` applied at ``path`` (through lists: in every element)."""
    head, _, rest = path.partition(".")
    if isinstance(obj, list):
        for v in obj:
            _set(v, path, fn)
    elif isinstance(obj, dict) and head in obj:
        if rest:
            _set(obj[head], rest, fn)
        else:
            obj[head] = fn(obj[head])


def _is_set(obj, path) -> bool:
    head, _, rest = path.partition(".")
    if isinstance(obj, list):
        return any(_is_set(v, path) for v in obj)
    if not isinstance(obj, dict) or head not in obj or obj[head] in (None, {}, []):
        return False
    return _is_set(obj[head], rest) if rest else True


SHIPPED = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", SHIPPED)
def test_a_change_of_each_forcenew_field_we_set_plans_a_replacement(stack):
    """For every GCP resource the stack renders and every attribute of it the provider replaces on (and the program
    sets), a changed value (or a removed block) plans a replacement of that resource, and nothing else changes."""
    rendering = rendered(stack)
    state = lc.first_up(rendering).state
    checked = 0
    for r in rendering.resources:
        for path, on in lc.FORCE_NEW.get(r.type, ()):
            if not r.custom or not _is_set(r.inputs, path) or path in ("name", "project"):
                continue  # a renamed resource is another URN: a delete and a create, never a plan to replace
            if any(path == i or path.startswith(i + ".") for i in r.ignore_changes):
                continue
            # The rendering with this one resource changed (a copy of it; the others are read, never written).
            target = copy.deepcopy(r)
            new = dataclasses.replace(rendering, resources=[target if x is r else x for x in rendering.resources])
            if on == "count":
                if path in lc.COMPUTED.get(r.type, ()):
                    continue  # Optional+Computed: a block left out stays the cloud's, no change (the diff's rule)
                head, _, leaf = path.rpartition(".")
                parent = lc._get(target.inputs, head) if head else target.inputs
                if not isinstance(parent, dict):
                    continue  # a block inside a list: its count is the element's
                parent.pop(leaf)
            else:
                _set(target.inputs, path, _changed)
            steps = [s for s in lc.plan(state, new).changes]
            assert [(s.op, s.urn) for s in steps] == [("replace", r.urn)], (path, [s.line() for s in steps])
            checked += 1
    assert checked >= 3


def test_a_pools_max_run_duration_replaces_it():
    """gcp.md N5: dev's flex-start maxRunDuration 24h -> 7d: the provider replaces the pool (node_config.go
    max_run_duration ForceNew)."""
    _, _, state, _ = day1("dev")

    def longer(slices):
        for s in slices:
            for c in s["capacity"]:
                if c["type"] == "flex-start":
                    c["maxRunDuration"] = "7d"
    plan = plan_to("dev", state, lambda cfg: _section(cfg, "slices", longer))
    replaced = {s.name: s.fields for s in plan.by_op("replace")}
    assert replaced and all(n.endswith("-flex") for n in replaced), [s.line() for s in plan.changes]
    assert all(f == ["nodeConfig.maxRunDuration"] for f in replaced.values())


# --------------------------------------------------------------------------- regions, day 2

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checks"
TWO_REGIONS = "two-region"
THIRD_REGION = {
    "region": "us-central1", "zone": "us-central1-b",
    "cluster": {"name": "maxtext-central1", "version": "1.35.2-gke.1842000", "systemMachineType": "n1-standard-16",
                "systemNodeCount": 3, "podCidr": "10.140.0.0/14", "serviceCidr": "10.104.32.0/20"},
    "network": {"primary": {"cidr": "10.0.48.0/20"},
                "secondary": [{"subnet": "central1-tpu-subnet-1", "cidr": "10.52.0.0/16"},
                              {"subnet": "central1-tpu-subnet-2", "cidr": "10.62.0.0/16"}]},
    "slices": [{"name": "v6e-16-0", "generation": "v6e", "topology": "4x4", "machineType": "ct6e-standard-4t",
                "group": "tpu-group", "capacity": [{"type": "on-demand"}]}],
}


def _regions_plan(edit, jobs=lambda jobs: None):
    cfg = engine.stack_config(TWO_REGIONS, FIXTURES)
    rendering = engine.render(TWO_REGIONS, cfg, stacks_dir=FIXTURES)
    state, _ = lc.gke_changes(lc.first_up(rendering).state)
    _section(cfg, "regions", edit)
    _section(cfg, "jobs", jobs)
    new = engine.render(TWO_REGIONS, cfg, stacks_dir=FIXTURES)
    return state, lc.plan(state, new, lc.replace_on_changes(new))


def _protected_lost(state, plan, going: str = "") -> list[str]:
    """Protected resources the plan replaces or deletes (but a removed region's own, ``going``: its cluster goes)."""
    return [s.line() for s in plan.steps if state.get(s.urn, {}).get("protect") and (
        s.op == "replace" or (s.op == "delete" and not (going and s.name.startswith(going))))]


def test_adding_a_region_replaces_nothing_protected():
    state, plan = _regions_plan(lambda regions: regions.append(copy.deepcopy(THIRD_REGION)))
    assert any(s.op == "create" and s.name.startswith("maxtext-central1") for s in plan.steps)
    assert _protected_lost(state, plan) == []


def test_removing_a_region_replaces_nothing_protected():
    def stay(jobs):  # the jobs held to the region that goes move to the one that stays
        for j in jobs:
            if j.get("region") == "us-east1":
                j["region"] = "us-east5"
    state, plan = _regions_plan(lambda regions: regions.pop(), stay)
    assert any(s.op == "delete" and s.name.startswith("maxtext-east1") for s in plan.steps)
    assert _protected_lost(state, plan, going="maxtext-east1") == []


def test_reordering_the_regions_replaces_nothing_protected():
    state, plan = _regions_plan(lambda regions: regions.reverse())
    assert _protected_lost(state, plan) == []
    assert not plan.by_op("replace") and not plan.by_op("delete"), [s.line() for s in plan.changes]


# --------------------------------------------------------------------------- day 1, what the cloud returns


def _crd_defaulting():
    """A custom object as the API server stores it: its vendored CRD's structural-schema ``default`` values
    written where the object leaves them unset (Kubernetes "Defaulting": applied when reading from etcd and on
    create/update), for every CRD vendored in vendor/ (Kueue, KubeRay)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    schemas = {}
    for path in [*(ROOT / "vendor/kueue").glob("*.yaml"), *(ROOT / "vendor/kuberay").glob("*.yaml")]:
        crd = yaml.load(path.read_text(), Loader=loader)  # noqa: S506
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            continue
        for version in crd["spec"]["versions"]:
            api = f"{crd['spec']['group']}/{version['name']}"
            schemas[(api, crd["spec"]["names"]["kind"])] = version["schema"]["openAPIV3Schema"]

    def fill(schema, value):
        if isinstance(value, dict):
            out = dict(value)
            for key, sub in (schema.get("properties") or {}).items():
                if key not in out and "default" in sub:
                    out[key] = copy.deepcopy(sub["default"])
                if key in out:
                    out[key] = fill(sub, out[key])
            return out
        if isinstance(value, list) and isinstance(schema.get("items"), dict):
            return [fill(schema["items"], v) for v in value]
        return value

    def defaults(doc):
        schema = schemas.get((doc.get("apiVersion"), doc.get("kind")))
        return fill(schema, doc) if schema else doc

    return defaults, schemas


@pytest.mark.parametrize("stack", SHIPPED)
def test_day_1_with_what_the_api_server_and_gke_return_plans_nothing(stack):
    """Day 1 with every day-1 change, the CRDs' defaults included: the API server wrote fields into the custom
    objects (not ones the program set), GKE into the pools and the cluster; the next run plans no change."""
    defaults, schemas = _crd_defaulting()
    rendering = rendered(stack)  # the first run; the next (below) renders again
    first = lc.first_up(rendering)
    state, changes = lc.gke_changes(first.state, api_defaults=defaults)
    written = [u for u, e in state.items() if e["type"].startswith("kubernetes:") and e["outputs"] != e["inputs"]]
    assert any("[api-defaults]" in c for c in changes) and written, "no CRD default reached an object"
    assert any("[goog-gke-labels]" in c for c in changes) and any("[pool-defaults]" in c for c in changes)
    again = lc.plan(state, engine.render(stack), lc.replace_on_changes(rendering))
    assert again.changes == [], [s.line() for s in again.changes]


def test_day_1_is_not_true_by_construction():
    """What day 1 returns is compared, not excused: a pool that set its own metadata without GKE's
    disable-legacy-endpoints would be replaced on the next run (metadata is ForceNew, and GKE adds the key), a
    GKE label on a pool's Kubernetes labels is a difference unless ignored, and goog-gke resource labels pass
    only through the provider's DiffSuppressFunc."""
    rendering = rendered("dev")
    pools = [r for r in rendering.resources if r.type == lc.NODE_POOL]
    for r in pools:
        r.inputs["nodeConfig"]["metadata"] = {"team": "tpu"}
    state, _ = lc.gke_changes(lc.first_up(rendering).state)
    plan = lc.plan(state, rendering)
    assert {s.name for s in plan.by_op("replace")} == {r.name for r in pools}
    assert all(s.fields == ["nodeConfig.metadata.disable-legacy-endpoints"] for s in plan.by_op("replace"))
    assert "nodeConfig.resourceLabels" not in lc.COMPUTED[lc.NODE_POOL]
    assert lc.SUPPRESSED[lc.NODE_POOL]("nodeConfig.resourceLabels.goog-gke-node-pool-provisioning-model")
    assert not lc.SUPPRESSED[lc.NODE_POOL]("nodeConfig.resourceLabels.team")


def test_the_programs_replace_on_changes_come_from_its_registrations():
    """``lc.replace_on_changes`` is what the program asks for (``replaceOnChanges`` of each RegisterResource
    request), not a list of its own: RayJobs on spec and metadata, the immutable ResourceClaimTemplates on spec;
    a template's spec change plans its replacement, as ``pulumi up`` would."""
    rendering = rendered("dev")
    replace_on = lc.replace_on_changes(rendering)
    jobs = rendering.by_type("kubernetes:ray.io/v1:RayJob")
    templates = rendering.by_type("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate")
    assert jobs and templates
    assert {replace_on[r.urn] == ["spec", "metadata"] for r in jobs} == {True}
    assert {replace_on[r.urn] == ["spec"] for r in templates} == {True}
    state = lc.first_up(rendering).state
    new = copy.deepcopy(rendering)
    target = next(r for r in new.resources if r.urn == templates[0].urn)
    target.inputs["spec"]["changed"] = "yes"
    assert [(s.op, s.urn) for s in lc.plan(state, new, lc.replace_on_changes(new)).changes] == [
        ("replace", target.urn)]


def test_a_new_tpu_topology_replaces_the_pool(prod_days):
    """terraform-provider-google (provider_schema.json's commit) marks ``placement_policy`` ForceNew on its count
    and ``policy_name`` only (resource_container_node_pool.go:364-387), and ``nodePoolUpdate`` has no
    ``placement_policy`` branch: a changed ``tpu_topology`` would plan an update that applies nothing. The program
    replaces the pool instead (``replaceOnChanges``)."""
    rendering, _, state, _ = prod_days
    new = copy.deepcopy(rendering)
    pool = next(r for r in new.resources if r.type == lc.NODE_POOL and r.inputs.get("placementPolicy"))
    assert "placementPolicy.tpuTopology" not in dict(lc.FORCE_NEW[lc.NODE_POOL])
    pool.inputs["placementPolicy"]["tpuTopology"] = "4x8"
    steps = lc.plan(state, new, lc.replace_on_changes(new)).changes
    assert [(s.op, s.urn) for s in steps] == [("replace", pool.urn)], [s.line() for s in steps]
