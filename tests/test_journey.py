"""The deploy journey (``pulumi preview --save-plan``, then ``pulumi up --plan``) of every stack, by Pulumi's own rules
(offline/journey.py, each rule quoting pulumi/pulumi or pulumi-kubernetes at a pinned commit).

The real program runs for each day: day 0 from an empty state, day 1 with nothing changed (no step), day 2 with the
changes ``slicectl lifecycle`` is for (a region added, removed or reordered, a cluster replaced, a version bumped).
Stacks: the tests' own (``tests/fixtures/``), and stacks this test writes with ``slicectl new`` (one region, several
regions, a sandbox); every stack in ``stacks/`` goes through :func:`check_day0` in ``tests/test_examples.py``, the
one suite that reads it. Mutations: Kueue as a Helm v4 Chart under a provider built from the cluster's outputs, a
resource missing from the plan, an input the plan does not hold, an object Check would change at ``up``; and
``.github/scripts/check_plan.py`` run on the plans the simulator writes.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS

from offline import engine
from offline import journey as jr

ROOT = Path(__file__).resolve().parents[1]
STACKS = FIXTURE_STACKS  # the tests' own copies of the examples
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checks"
CHECK_PLAN = ROOT / ".github" / "scripts" / "check_plan.py"
NS = "tpu-multislice"
ACME = ["--project", "acme-ml-prod", "--region", "us-east5", "--ci-project", "acme-ci",
        "--gke-version", "1.35.2-gke.1842000"]
WRITTEN = {  # slicectl new's arguments for each stack the test writes
    "one": ["--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2"],
    "several": ["--regions", "us-east5:us-east5-b,us-east1:us-east1-d", "--slice-shape", "v6e-16", "--slices", "2"],
    "sand": ["--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2", "--sandbox"],
}
_RENDERED: dict[tuple, engine.Rendering] = {}


def render(stack: str, stacks_dir: Path, config: dict | None = None) -> engine.Rendering:
    """The journey's rendering (tagged answers), once per stack and config in this process."""
    key = (stack, str(stacks_dir), json.dumps(config, sort_keys=True))
    if key not in _RENDERED:
        _RENDERED[key] = jr.render(stack, config, stacks_dir=stacks_dir)
    return _RENDERED[key]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    from slicectl import cli

    out = tmp_path_factory.mktemp("written")
    for stack, argv in WRITTEN.items():
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert cli.main(["new", stack, *ACME, *argv, "--stacks-dir", str(out)]) == 0, err.getvalue()
    return out


def day0_day1(rendering: engine.Rendering) -> tuple[jr.Preview, dict, jr.Preview]:
    preview, state, violations = jr.journey({}, rendering)
    assert [str(v) for v in violations] == []
    again, after, violations = jr.journey(state, rendering)
    assert [str(v) for v in violations] == []
    assert {u: p.ops for u, p in again.plans.items() if p.ops != ["same"]} == {}  # day 1: no step
    assert after == state
    return preview, state, again


def check_day0(rendering: engine.Rendering) -> None:
    """Day 0 applies the plan as approved, day 1 plans no step (tests/test_examples.py runs it on ``stacks/``)."""
    preview, _, _ = day0_day1(rendering)
    # Day 0 exercises the rules that broke the chart: every Kubernetes provider is unconfigured at preview.
    providers = [r.urn for r in rendering.by_type("pulumi:providers:kubernetes")]
    assert providers and sorted(preview.unconfigured) == sorted(providers)
    assert preview.skipped == []
    # Every object the update registers is in the plan, with an operation: the plan approved is the plan applied.
    assert all(p.ops == ["create"] for p in preview.plans.values())
    # ... and deploy.yml's check of that plan passes it: no IAM or RBAC input unknown or secret, nothing missing
    # (a sandbox is not deployed by deploy.yml: its operator runs `up`, docs/sandbox.md; its node account is made
    # in the same update, so its IAM member is unknown at preview).
    if not rendering.by_type("tpu-multislice:infra:SandboxProject"):
        assert _check_plan().findings(jr.saved_plan(preview), set()) == []


def _check_plan():
    """.github/scripts/check_plan.py as a module (a script, not a package: loaded from its file)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_plan", CHECK_PLAN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("stack", sorted(WRITTEN))
def test_every_stack_slicectl_new_writes_deploys_on_day_0_and_plans_nothing_on_day_1(written, stack):
    check_day0(render(stack, written))


# --------------------------------------------------------------------------- day 2


def _section(cfg: dict, key: str, fn) -> dict:
    cfg = dict(cfg)
    value = json.loads(cfg[f"{NS}:{key}"])
    fn(value)
    cfg[f"{NS}:{key}"] = json.dumps(value)
    return cfg


def _third_region(regions):
    from test_day0_to_day2 import THIRD_REGION

    regions.append(copy.deepcopy(THIRD_REGION))


def _jobs_to_east5(cfg: dict) -> dict:
    def move(jobs):
        for j in jobs:
            if j.get("region") == "us-east1":
                j["region"] = "us-east5"
    return _section(cfg, "jobs", move)


def _replace_cluster(regions):
    regions[0]["zone"] = "us-east5-a"  # the cluster's location is ForceNew: the cluster is replaced, same URN


def _bump(regions):
    for r in regions:
        r["cluster"]["version"] = "1.35.3-gke.1100000"


DAY2 = {
    "add a region": lambda cfg: _section(cfg, "regions", _third_region),
    "remove a region": lambda cfg: _section(_jobs_to_east5(cfg), "regions", lambda regions: regions.pop()),
    "reorder the regions": lambda cfg: _section(cfg, "regions", lambda regions: regions.reverse()),
    "replace a cluster": lambda cfg: _section(cfg, "regions", _replace_cluster),
    "bump the GKE version": lambda cfg: _section(cfg, "regions", _bump),
}


@pytest.fixture(scope="module")
def two_regions():
    cfg = engine.stack_config("two-region", FIXTURES)
    _, state, _ = day0_day1(render("two-region", FIXTURES, cfg))
    return cfg, state


@pytest.mark.parametrize("change", sorted(DAY2))
def test_every_day_2_change_is_applied_as_planned(two_regions, change):
    cfg, state = two_regions
    new = render("two-region", FIXTURES, DAY2[change](cfg))
    preview, after, violations = jr.journey(state, new)
    assert [str(v) for v in violations] == [], change
    changed = {u: p.ops[0] for u, p in preview.plans.items() if p.ops != ["same"]}
    assert changed, change  # each change plans something
    if change == "replace a cluster":
        # The new cluster's endpoint is unknown: its provider is unconfigured and replaced, and so is every object
        # on it (provider_plugin.go Configure; pulumi-kubernetes DiffConfig; step_generator.go providerChanged).
        (provider,) = preview.unconfigured
        assert changed[provider] == "replace"
        on_it = [u for u, p in preview.plans.items() if p.goal and p.goal["provider"] == provider]
        assert on_it and all(changed[u] == "replace" for u in on_it)
    if change == "add a region":
        assert len(preview.unconfigured) == 1 and all(changed[u] == "create" for u in preview.unconfigured)
    # The day after: nothing to do.
    again, _, violations = jr.journey(after, new)
    assert violations == [] and all(p.ops == ["same"] for p in again.plans.values())


def test_the_written_multi_region_stack_takes_a_cluster_replacement(written):
    cfg = engine.stack_config("several", written)
    _, state, _ = day0_day1(render("several", written, cfg))
    new = render("several", written, _section(cfg, "regions", _replace_cluster))
    preview, _, violations = jr.journey(state, new)
    assert violations == [] and preview.unconfigured


# --------------------------------------------------------------------------- mutations


def _chart_instead(monkeypatch):
    """Kueue as it was installed before: a Helm v4 Chart (a component the provider constructs)."""
    import pulumi
    import pulumi_kubernetes as k8s

    from workloads import kueue, queueing

    def chart(name, config_yaml, labels, namespace, opts):
        return k8s.helm.v4.Chart(name, chart=kueue.CHART, version=kueue.CHART_VERSION, namespace=kueue.NAMESPACE,
                                 values={"managerConfig": {"controllerManagerConfigYaml": config_yaml}},
                                 opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                     depends_on=[namespace])))
    monkeypatch.setattr(queueing, "KueueInstall", chart)


def test_a_chart_under_a_provider_built_from_the_clusters_outputs_fails_day_0(monkeypatch, tmp_path):
    _chart_instead(monkeypatch)
    rendering = jr.render("prod", stacks_dir=STACKS)
    preview, _, violations = jr.journey({}, rendering)
    (chart,) = rendering.by_type("kubernetes:helm.sh/v4:Chart")
    assert preview.skipped == [chart.urn]
    assert [(v.urn, v.rule) for v in violations] == [(f"{chart.urn}${jr.CHILDREN}", "plan-absent")]
    assert "create is not allowed by the plan: no steps were expected for this resource" in str(violations[0])
    assert "provider_plugin.go" not in str(violations[0]) and "step_generator.go:449-455" in str(violations[0])
    # check_plan.py sees the plan the simulator wrote lacks the chart's children and refuses it.
    result = run_check_plan(jr.saved_plan(preview), tmp_path)
    assert result.returncode == 1 and "with no child in the plan" in result.stderr and chart.urn in result.stderr


def test_a_chart_fails_the_day_2_cluster_replacement_too(monkeypatch, two_regions):
    _chart_instead(monkeypatch)
    cfg, _ = two_regions
    before = jr.render("two-region", cfg, stacks_dir=FIXTURES)
    state = jr.state_of(before)  # day 1: the clusters exist, the chart's children too
    again, _, violations = jr.journey(state, before)
    assert violations == [] and not again.skipped  # with a known kubeconfig, Construct runs at preview
    preview, _, violations = jr.journey(state, jr.render("two-region", DAY2["replace a cluster"](cfg),
                                                         stacks_dir=FIXTURES))
    assert len(preview.skipped) == 1
    assert [v.rule for v in violations] == ["plan-not-deleted"]
    assert "resource unexpectedly not deleted" in str(violations[0])


def test_a_resource_missing_from_the_plan_fails_up():
    rendering = render("prod", STACKS)
    preview = jr.preview({}, rendering)
    (cq,) = rendering.by_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    del preview.plans[cq.urn]
    _, violations = jr.up({}, preview, rendering)
    assert [(v.urn, v.rule) for v in violations] == [(cq.urn, "plan-absent")]
    # ... and a planned step never taken: a resource the program no longer registers at up.
    preview = jr.preview({}, rendering)
    edited = copy.copy(rendering)
    edited.resources = [r for r in rendering.resources if r.urn != cq.urn]
    _, violations = jr.up({}, preview, edited)
    assert [(v.urn, v.rule) for v in violations] == [(cq.urn, "plan-ops-not-seen")]


def test_up_refuses_an_input_the_plan_does_not_hold():
    """A plan binds every known input: a program that registers another value at up is refused."""
    cfg = engine.stack_config("prod", STACKS)
    planned = render("prod", STACKS, cfg)
    preview = jr.preview({}, planned)
    pushed = render("prod", STACKS, _section(cfg, "jobs", lambda jobs: jobs[0].update(steps=jobs[0]["steps"] + 1)))
    _, violations = jr.up({}, preview, pushed)
    assert violations and {v.rule for v in violations} == {"plan-goal"}
    assert all("RayJob" in str(v) or "ConfigMap" in str(v) for v in violations), [str(v) for v in violations]


def _edited(rendering: engine.Rendering, pick, change) -> engine.Rendering:
    out = copy.copy(rendering)
    out.resources = []
    for r in rendering.resources:
        if pick(r):
            r = copy.deepcopy(r)
            change(r)
        out.resources.append(r)
    return out


def test_what_check_changes_at_up_fails_an_object_planned_unchecked():
    """Under an unconfigured provider Check is skipped at preview and runs at up: an object without a name is
    named then, and one applied client-side is labelled managed-by (pulumi-kubernetes provider.go Check)."""
    rendering = render("prod", STACKS)
    ns = lambda r: r.type == "kubernetes:core/v1:Namespace" and r.name.endswith("kueue-ns")  # noqa: E731
    unnamed = _edited(rendering, ns, lambda r: r.inputs["metadata"].pop("name"))
    _, _, violations = jr.journey({}, unnamed)
    assert [v.rule for v in violations] == ["plan-goal"] and "Check ran at up" in str(violations[0])
    client_side = _edited(rendering, lambda r: r.type == "pulumi:providers:kubernetes",
                          lambda r: r.inputs.update(enableServerSideApply="false"))
    _, _, violations = jr.journey({}, client_side)
    assert violations and {v.rule for v in violations} == {"plan-goal"}


# --------------------------------------------------------------------------- check_plan.py on the simulator's plans


def run_check_plan(plan: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "allowed.json").write_text(json.dumps({"allowed": []}))
    return subprocess.run([sys.executable, str(CHECK_PLAN), str(tmp_path / "plan.json"), "--allowed",
                           str(tmp_path / "allowed.json")], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("stack", ["prod", "multi"])
def test_check_plan_passes_the_day_0_plan_of_the_program(tmp_path, stack):
    rendering = render(stack, STACKS)
    plan = jr.saved_plan(jr.preview({}, rendering))
    result = run_check_plan(plan, tmp_path)
    assert result.returncode == 0, result.stderr
    # The plan is Pulumi's shape: unknowns as the computed placeholder (the kubeconfig on day 0).
    (provider,) = [p for p in rendering.by_type("pulumi:providers:kubernetes")][:1]
    assert plan["plan"]["resourcePlans"][provider.urn]["goal"]["inputDiff"]["adds"]["kubeconfig"] == jr.COMPUTED


def test_check_plan_refuses_a_secret_wrapped_unknown_iam_input(tmp_path):
    """An IAM member that is a secret computed from a cluster created in the same update: saved as ciphertext
    (deployment.go), it cannot be read, so it is refused."""
    rendering = render("multi", STACKS)
    wi = lambda r: r.type == "gcp:serviceaccount/iAMMember:IAMMember"  # noqa: E731
    (cluster,) = [r for r in rendering.by_type("gcp:container/cluster:Cluster") if r.name == "tpu-manager"]
    tag = f"⟦cmp:{cluster.type}::{cluster.name}⟧"
    secret = _edited(rendering, wi, lambda r: r.inputs.update(
        member={engine.SECRET: f"serviceAccount:x{tag}.svc.id.goog[kueue-system/multikueue]"}))
    plan = jr.saved_plan(jr.preview({}, secret))
    (urn,) = [r.urn for r in rendering.resources if wi(r)]
    member = plan["plan"]["resourcePlans"][urn]["goal"]["inputDiff"]["adds"]["member"]
    assert set(member) == {jr.SECRET_SIG, "ciphertext"} and jr.COMPUTED not in json.dumps(member)
    result = run_check_plan(plan, tmp_path)
    assert result.returncode == 1 and f"{urn}: member is secret" in result.stderr
    # Unwrapped, the same unknown is refused as unknown.
    plain = _edited(rendering, wi, lambda r: r.inputs.update(member=f"serviceAccount:x{tag}"))
    result = run_check_plan(jr.saved_plan(jr.preview({}, plain)), tmp_path)
    assert result.returncode == 1 and f"{urn}: member is unknown" in result.stderr


def test_every_rule_names_its_source():
    for rule, (source, what) in jr.RULES.items():
        assert source.startswith(("pulumi/pulumi@", "pulumi/pulumi-kubernetes@")) and what, rule
        commit = source.split("@", 1)[1].split(":", 1)[0]
        assert len(commit) == 40, rule


def test_slicectl_lifecycle_runs_the_journey_and_names_each_refusal(tmp_path, capsys, monkeypatch):
    from slicectl import cli

    assert cli.main(["lifecycle", "--stack", "prod", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "preview --save-plan, then up --plan:" in out and "`up` applies the plan as approved" in out
    _chart_instead(monkeypatch)
    assert cli.main(["lifecycle", "--stack", "prod", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "`pulumi up --plan` would refuse" in out
    assert "create is not allowed by the plan: no steps were expected for this resource" in out
    assert "[plan-absent: pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8:" in out


# --------------------------------------------------------------------------- Kueue's webhooks at up


def _kueue_deployment(rendering: engine.Rendering) -> engine.Resource:
    (d,) = [r for r in rendering.by_type("kubernetes:apps/v1:Deployment") if r.name.endswith("controller-manager")]
    return d


def test_an_object_kueues_webhook_intercepts_waits_for_kueues_controller_to_be_available():
    """Kueue's release installs failurePolicy=Fail webhooks on ClusterQueues, ResourceFlavors, RayJobs, Pods, ...;
    until its controller is Available the API server refuses them, so each waits for the controller's Deployment
    (Kueue's e2e setup waits for the same; the provider's create of a Deployment returns once it is Available)."""
    rendering = render("prod", STACKS)
    deployment = _kueue_deployment(rendering)
    (cq,) = rendering.by_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
    assert deployment.urn in jr.nodes(rendering)
    # Mutation: the ClusterQueue no longer depends on Kueue's install: created as soon as the cluster is up.
    racing = _edited(rendering, lambda r: r.urn == cq.urn, lambda r: setattr(r, "dependencies", ()))
    _, _, violations = jr.journey({}, racing)
    assert [(v.urn, v.rule) for v in violations] == [(cq.urn, "webhook-not-serving")]
    assert "mclusterqueue.kb.io" in str(violations[0]) and "kueue-controller-manager" in str(violations[0])
    assert "kubernetes-sigs/kueue@8eab68778fc1b52affe165fdf5af29d1e9b4f3cb:cmd/kueue/main.go" in str(violations[0])


def test_kueues_controller_created_without_awaiting_availability_races_every_object_its_webhooks_intercept():
    rendering = render("prod", STACKS)
    deployment = _kueue_deployment(rendering)
    skip = _edited(rendering, lambda r: r.urn == deployment.urn, lambda r: r.inputs["metadata"].setdefault(
        "annotations", {}).update({"pulumi.com/skipAwait": "true"}))
    _, _, violations = jr.journey({}, skip)
    kinds = {v.urn.split("::")[2].rsplit("$", 1)[-1] for v in violations}
    assert {v.rule for v in violations} == {"webhook-not-serving"}
    assert {"kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
            "kubernetes:ray.io/v1:RayJob"} <= kinds
    assert all("pulumi.com/skipAwait" in str(v) for v in violations)
    # Objects in kueue-system (excluded by the webhooks' namespaceSelector) and kinds no webhook names are not.
    assert not any(":core/v1:ConfigMap" in v.urn or ":core/v1:Namespace" in v.urn for v in violations)


def test_on_a_running_cluster_kueues_webhooks_are_serving_already():
    """Day 1 and an update of Kueue's Deployment (it rolls out behind the running replica): no race."""
    rendering = render("prod", STACKS)
    state = jr.state_of(rendering)
    racing = _edited(rendering, lambda r: r.type == "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
                     lambda r: (setattr(r, "dependencies", ()), r.inputs["spec"].update(stopPolicy="None")))
    _, _, violations = jr.journey(state, racing)
    assert [v.rule for v in violations] == []
