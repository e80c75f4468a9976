"""Day 0 to day 2, simulated offline with state carried between runs (offline/lifecycle.py).

The program runs for real under mocks each day; the state is the first run's rendering plus GKE's own
changes (simulated: no cloud here), and each plan follows the provider's diff rules the module names.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, rendered

from offline import engine
from offline import lifecycle as lc

ROOT = Path(__file__).resolve().parents[1]
NS = "tpu-multislice"


def day1(stack: str, config: dict | None = None):
    rendering = engine.render(stack, config)
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
    assert order[f"{cluster}-checkpoints-object-user"] > order[cluster]  # the WI pool exists first
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
    binding = rendering.one("gcp:storage/bucketIAMMember:BucketIAMMember", "maxtext-tpu-checkpoints-object-user")
    state[binding.urn]["dependencies"] = [d for d in state[binding.urn]["dependencies"] if d != cluster]
    [problem] = lc.prerequisite_problems(state)
    assert "maxtext-tpu-checkpoints-object-user" in problem and "iam-wi-pool-exists" in problem


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
    assert "version" in fields and "nodeConfig.labels" in fields


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

    changed = tmp_path / "Pulumi.prod.yaml"
    text = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    changed.write_text(text.replace("steps: 100\n", "steps: 200\n", 1))
    cmd = ["lifecycle", "--stack", "prod", "--change", str(changed), "--out", str(tmp_path / "build")]
    assert cli.main(cmd) == 0
    out = capsys.readouterr().out
    assert "Day 0:" in out and "every resource waits" in out
    assert "plan: no changes" in out
    assert "Day 2: to" in out and "1 to replace" in out
    state = tmp_path / "build/prod/state.json"
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
