"""Multi-region stacks (README "Regions"): one spec for a manager and regional TPU clusters, each region a
single-region view the existing rules and components run on; the real program rendered under mocks."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, policy_bindings, rendered

from offline import engine
from slicectl import cli
from stackspec import names
from stackspec import regions as places
from stackspec import spec as stack_spec

ROOT = Path(__file__).resolve().parents[1]
MULTI = (FIXTURE_STACKS / "Pulumi.multi.yaml").read_text()
NS = stack_spec.PROJECT


def load(text: str, tmp_path: Path):
    path = tmp_path / "Pulumi.mr.yaml"
    path.write_text(text)
    return stack_spec.load_file(path)


def problems(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(stack_spec.SpecError) as err:
        load(text, tmp_path)
    return [p.render() for p in err.value.problems]


@pytest.fixture(scope="module")
def multi():
    return rendered("multi")


def test_each_region_is_a_single_region_view():
    s = stack_spec.load_stack("multi")
    views = s.region_views()
    assert [(v.region, v.zone, v.cluster.name, v.cluster.location) for v in views] == [
        ("us-east5", "us-east5-b", "maxtext-east5", "us-east5-b"),
        ("us-east1", "us-east1-d", "maxtext-east1", "us-east1-d")]
    assert [v.network.primary.network for v in views] == ["maxtext-east5-vpc", "maxtext-east1-vpc"]
    # The elastic job names us-east1: created there only; the queued ones may run in either region.
    assert [j.name for j in views[1].created_here()] == ["llama3-8b-elastic"]
    assert views[0].created_here() == ()
    assert {k: [v.region for v in vs] for k, vs in s.placements().items()} == {
        "llama3-70b-multislice": ["us-east5", "us-east1"], "llama3-8b-multislice": ["us-east5", "us-east1"]}
    # A run's name does not depend on the region: it resumes from the shared bucket wherever it lands.
    names = {v.job("llama3-70b-multislice").run_name for v in views}
    assert len(names) == 1
    # One bucket both regions read: the configurable dual-region US [us-east1, us-east5].
    assert (s.storage.location, s.storage.data_locations) == ("US", ("us-east1", "us-east5"))
    assert stack_spec.load_stack("prod").region_views() == (stack_spec.load_stack("prod"),)


def test_dispatch_order_is_cheapest_first_ties_listed(tmp_path):
    s = stack_spec.load_stack("multi")
    order = s.dispatch_order()
    assert [d.view.region for d in order] == ["us-east5", "us-east1"]
    assert "ties with us-east1: listed order" in order[0].reason
    cheaper = MULTI.replace("  tpu-multislice:storage:", "  tpu-multislice:prices:\n    v6e: {onDemand: 3.5}\n"
                            "  tpu-multislice:storage:", 1)
    # us-east1 gets its own, lower price: it goes first.
    i = cheaper.index("    - region: us-east1")
    own = "      prices: {v6e: {onDemand: 2.0}}\n      slices:\n"
    cheaper = cheaper[:i] + cheaper[i:].replace("      slices:\n", own, 1)
    order = load(cheaper, tmp_path).dispatch_order()
    assert [(d.view.region, d.usd_per_chip_hour) for d in order] == [("us-east1", 2.0), ("us-east5", 3.5)]
    listed = load(cheaper.replace("dispatch: cost", "dispatch: listed"), tmp_path).dispatch_order()
    assert [d.view.region for d in listed] == ["us-east5", "us-east1"]


def test_one_place_per_fact(tmp_path):
    text = MULTI.replace("  gcp:region: us-east5 ", "  gcp:zone: us-east5-b\n  gcp:region: us-east5 ", 1)
    got = problems(text, tmp_path)
    assert any(p.startswith("gcp:zone = \"us-east5-b\": a stack with tpu-multislice:regions") for p in got), got
    got = problems(MULTI.replace("  tpu-multislice:manager:\n    name: tpu-manager\n",
                                 "  tpu-multislice:manager-x:\n    name: tpu-manager\n"), tmp_path)
    assert any(p.startswith(f"{NS}:manager = (missing): required with regions") for p in got), got


def test_region_problems_are_named_at_the_region(tmp_path):
    second = "        - {name: v6e-16-1, generation: v6e, topology: 4x4"
    got = problems(MULTI.replace(second, second.replace("4x4", "4x5"), 1), tmp_path)
    assert any(p.startswith(f"{NS}:regions[0].slices[1].topology") for p in got), got
    dup = MULTI.replace("name: maxtext-east1", "name: maxtext-east5")
    assert any(p.startswith(f"{NS}:regions[1].cluster.name") and "unique" in p for p in problems(dup, tmp_path))


def test_multikueue_limits(tmp_path):
    no_region = MULTI.replace("      region: us-east1\n      minSlices", "      minSlices")
    got = problems(no_region, tmp_path)
    assert any(p.startswith(f"{NS}:jobs[2].region = (missing)") and "No Multikueue support" in p for p in got), got
    elsewhere = MULTI.replace("      region: us-east1\n      minSlices", "      region: europe-west4\n      minSlices")
    assert any("allowed: us-east5, us-east1" in p for p in problems(elsewhere, tmp_path))
    eu = MULTI.replace("    location: US\n    dataLocations: [us-east1, us-east5]\n", "    location: EU\n", 1)
    got = problems(eu, tmp_path)
    assert any(p.startswith(f"{NS}:storage.location = \"EU\"") and "does not hold" in p for p in got), got


def test_a_job_fitting_no_region_is_refused(tmp_path):
    text = MULTI.replace("      slices: 2\n      model: llama3-70b", "      slices: 3\n      model: llama3-70b")
    got = problems(text, tmp_path)
    assert sum("fits no region" in p and p.startswith(f"{NS}:jobs[0].slices") for p in got) == 2, got


def test_single_region_stacks_refuse_region_keys(tmp_path):
    prod = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    got = problems(prod.replace("      mode: elastic\n", "      mode: elastic\n      region: us-east5\n"), tmp_path)
    assert any(p.startswith(f"{NS}:jobs[2].region") and "only in a multi-region stack" in p for p in got), got


def test_the_program_renders_every_region_and_the_manager(multi):
    by_type: dict[str, list] = {}
    for r in multi.resources:
        by_type.setdefault(r.type, []).append(r)
    clusters = {r.inputs["name"]: r.inputs for r in by_type["gcp:container/cluster:Cluster"]}
    assert set(clusters) == {"tpu-manager", "maxtext-east5", "maxtext-east1"}
    assert clusters["tpu-manager"]["enableAutopilot"] is True and clusters["tpu-manager"]["location"] == "us-east5"
    # No fleet: nothing consumes a membership and gkehub.googleapis.com is enabled nowhere (GCP review N7).
    assert not any("fleet" in c for c in clusters.values())
    pools = {(r.inputs["cluster"], r.inputs["name"]) for r in by_type["gcp:container/nodePool:NodePool"]
             if r.inputs["name"] != "system"}
    assert pools == {(c, p) for c in ("maxtext-east5", "maxtext-east1") for p in ("v6e-16-0", "v6e-16-1")}
    [bucket] = by_type["gcp:storage/bucket:Bucket"]
    assert bucket.inputs["location"] == "US"
    assert bucket.inputs["customPlacementConfig"] == {"dataLocations": ["US-EAST1", "US-EAST5"]}
    # One grant on the shared bucket, the stack's: the principal is project-wide (GCP review N4).
    [grant] = by_type["gcp:storage/bucketIAMPolicy:BucketIAMPolicy"]
    assert grant.name == "tpu-manager-checkpoints-iam-policy" and "SharedCheckpointBucket" in grant.parent
    jobs = {r.inputs["metadata"]["name"]: r.provider for r in by_type["kubernetes:ray.io/v1:RayJob"]}
    assert {n: ("tpu-manager-k8s" in p) for n, p in jobs.items()} == {
        "llama3-70b-multislice": True, "llama3-8b-multislice": True, "llama3-8b-elastic": False}
    assert "maxtext-east1-k8s" in jobs["llama3-8b-elastic"]
    # The manager's RayJobs are MultiKueue's from their creation (what Kueue's webhook would default, without
    # depending on its caches); a job created in its region is KubeRay's there.
    assert {r.inputs["metadata"]["name"]: r.inputs["spec"].get("managedBy")
            for r in by_type["kubernetes:ray.io/v1:RayJob"]} == {
        "llama3-70b-multislice": "kueue.x-k8s.io/multikueue", "llama3-8b-multislice": "kueue.x-k8s.io/multikueue",
        "llama3-8b-elastic": None}


def test_the_multi_stack_previews_clean(tmp_path, capsys):
    assert cli.main(["preview", "--stack", "multi", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Policies: all" in out and "Dispatch order" in out
    md = (tmp_path / "preview.md").read_text() if (tmp_path / "preview.md").exists() else ""
    assert not md or "Regions and dispatch order" in md


def test_the_stack_wide_policy_names_the_attestor_the_bootstrap_makes(multi):
    """One Binary Authorization policy per project, named after the manager, as the bootstrap names the attestor
    and signing key of a multi-region stack (bootstrap/components/stack_project.py: a multi stack's cluster is its
    manager)."""
    from stackspec import names

    s = stack_spec.load_stack("multi")
    [policy] = multi.by_type("gcp:binaryauthorization/policy:Policy")
    assert policy.inputs["defaultAdmissionRule"]["requireAttestationsBies"] == [
        names.image_attestor_id(s.project, s.manager.name)]


def test_multikueue_is_wired_and_every_object_validates(multi, kueue_validator, kuberay_validator,
                                                         pod_monitoring_validator):
    """The manager's Kueue with MultiKueue, each worker's access objects, the token job and its IAM, as
    tests/programs/multikueue.py wires them, on the multi stack; every Kueue, KubeRay and GMP object it renders
    is valid against its vendored CRD, and Kueue's ClusterQueue rules hold on every cluster."""
    from workloads import kueue
    from workloads import multikueue as mk

    s = stack_spec.load_stack("multi")
    order = [d.view for d in s.dispatch_order()]
    m = mk.manager_of(s)
    docs = multi.manifests
    checked = {"kueue": 0, "ray": 0, "gmp": 0}
    for d in docs:
        group = d["apiVersion"].partition("/")[0]
        if group == "kueue.x-k8s.io":
            assert kueue_validator(d) == [], (d["kind"], d["metadata"]["name"])
            checked["kueue"] += 1
        elif group == "ray.io":
            assert kuberay_validator(d) == [], (d["kind"], d["metadata"]["name"])
            checked["ray"] += 1
        elif group == "monitoring.googleapis.com":
            assert pod_monitoring_validator(d) == [], (d["kind"], d["metadata"]["name"])
            checked["gmp"] += 1
    assert checked["kueue"] >= 20 and checked["ray"] == 3 and checked["gmp"] >= 5, checked

    # Each cluster's Kueue objects, through its provider: the manager's are manager_objects in dispatch order.
    def kueue_on(provider: str) -> list[dict]:
        return [engine.kubernetes_manifest(r) for r in multi.resources if engine.is_kubernetes_object(r)
                and r.inputs["apiVersion"] == kueue.KUEUE_API and (r.provider_urn or "").endswith(f"::{provider}")]
    on_manager = kueue_on("tpu-manager-k8s")
    assert sorted((d["kind"], d["metadata"]["name"]) for d in on_manager) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in mk.manager_objects(m, order))
    [config] = [d for d in on_manager if d["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == ["maxtext-east5", "maxtext-east1"] == multi.outputs["dispatchOrder"]
    for name in ("tpu-manager-k8s", "maxtext-east5-k8s", "maxtext-east1-k8s"):
        assert mk.cluster_queue_rules(kueue_on(name)) == [], name
    # The manager's Kueue runs the incremental dispatcher; the workers' are the plain one, same version.
    controllers = {r.provider: r.inputs for r in multi.by_type("kubernetes:apps/v1:Deployment")
                   if r.inputs["metadata"]["name"] == "kueue-controller-manager"}
    assert len(controllers) == 3
    assert {c["spec"]["template"]["spec"]["containers"][0]["image"] for c in controllers.values()} == {kueue.IMAGE}
    configs = {r.provider: r.inputs["data"]["controller_manager_config.yaml"]
               for r in multi.by_type("kubernetes:core/v1:ConfigMap")
               if r.inputs["metadata"]["name"] == "kueue-manager-config"}
    assert [p for p, c in configs.items() if mk.INCREMENTAL_DISPATCHER in c] == ["tpu-manager-k8s-offline-id"]
    # Each worker: the manager's ServiceAccount and least-privilege RBAC, its user the manager's Google identity.
    for v in order:
        want = {(d["kind"], d["metadata"]["name"]) for d in mk.worker_objects(v, m)}
        got = {(engine.kubernetes_manifest(r)["kind"], r.inputs["metadata"]["name"]) for r in multi.resources
               if engine.is_kubernetes_object(r) and (r.provider_urn or "").endswith(f"::{v.cluster.name}-k8s")}
        assert want <= got, want - got
    # The token job reaches every worker's DNS endpoint, in dispatch order.
    [cm] = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == names.MULTIKUEUE_MANAGER_KSA]
    targets = json.loads(cm["data"]["targets.json"])["targets"]
    assert [t["cluster"] for t in targets if t["kind"] == "kubeconfig"] == ["maxtext-east5", "maxtext-east1"]
    assert all(t["server"] == f"https://{engine.PLACEHOLDER_ENDPOINT}" for t in targets if t["kind"] == "kubeconfig")
    # IAM: the CronJob's workload identity on the bootstrap's account (names.multikueue_account_id of the manager),
    # after the manager's cluster (its pool); the account and its cluster viewer role are the bootstrap's.
    [wi] = multi.by_type("gcp:serviceaccount/iAMMember:IAMMember")
    assert wi.inputs["member"] == mk.workload_identity_member(m)
    email = names.multikueue_account_email(s.manager.name, s.project)
    assert wi.inputs["serviceAccountId"] == f"projects/{s.project}/serviceAccounts/{email}"
    assert multi.outputs["multikueueServiceAccount"] == email
    by_urn_ = {r.urn: r for r in multi.resources}
    assert "gcp:container/cluster:Cluster" in {by_urn_[u].type for u in wi.dependencies if u in by_urn_}
    assert not multi.by_type("gcp:projects/iAMMember:IAMMember")
    assert {r.inputs["accountId"] for r in multi.by_type("gcp:serviceaccount/account:Account")} <= {
        names.node_service_account_id(c) for c in [s.manager.name, *(v.cluster.name for v in order)]}
    # The queued RayJobs wait for the manager's Kueue: its chart and its queues.
    by_urn = {r.urn: r for r in multi.resources}
    for job in multi.by_type("kubernetes:ray.io/v1:RayJob"):
        if "tpu-manager-k8s" not in job.provider:
            continue
        waits = {by_urn[u].type for u in job.dependencies if u in by_urn}
        assert {"kubernetes:apps/v1:Deployment", "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
                "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"} <= waits, job.name
    # Binary Authorization admits the token job's image (it runs on every cluster) beside Kueue's.
    [policy] = multi.by_type("gcp:binaryauthorization/policy:Policy")
    patterns = [p["namePattern"] for p in policy.inputs["admissionWhitelistPatterns"]]
    assert f"{mk.TOKEN_IMAGE}*" in patterns and f"{kueue.IMAGE}*" in patterns
    assert {c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
            for c in docs if c["kind"] == "CronJob"} == {mk.TOKEN_IMAGE}


# --------------------------------------------------------------------------- policies across clusters


def _fired(resources) -> dict[str, list[str]]:
    from policies.offline import evaluate_resources

    out: dict[str, list[str]] = {}
    for v in evaluate_resources(resources, "prod"):
        out.setdefault(v.rule, []).append(v.message)
    return out


def _edit(resources, pick, change):
    """The resources with ``change(props)`` applied to a deep copy of the props of each one ``pick`` takes."""
    import copy

    from policies.rules.common import Res

    out = []
    for r in resources:
        if pick(r):
            props = copy.deepcopy(dict(r.props))
            change(props)
            r = Res(r.type, r.name, r.urn, props, r.dependencies, r.provider)
        out.append(r)
    return out


ACROSS = {"multikueue-same-kueue", "gke-version-skew-across-clusters", "one-checkpoint-location",
          "queued-job-placeable", "multikueue-manager-quota", "multikueue-consistent"}


def test_policies_across_clusters_pass_and_trip(multi):
    from policies.offline import resources_of

    base = resources_of(multi)
    assert not _fired(base), _fired(base)
    on = lambda cluster, kind: lambda r: r.provider == f"{cluster}-k8s" and r.type.endswith(f":{kind}")  # noqa: E731

    # The manager's queue a flavor's TPU chips short: the manager rule, never the per-cluster quota rule.
    def short(props):
        for g in props["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                for res in f["resources"]:
                    if res["name"] == "google.com/tpu":
                        res["nominalQuota"] = "32"
    got = _fired(_edit(base, on("tpu-manager", "ClusterQueue"), short))
    assert set(got) == {"multikueue-manager-quota"}, got
    assert "google.com/tpu" in got["multikueue-manager-quota"][0] and "('32', '64')" in got[
        "multikueue-manager-quota"][0]

    # Kueue one version ahead in one region (its controller's image).
    def ahead(p):
        p["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.k8s.io/kueue/kueue:v0.20.0"
    got = _fired(_edit(base, lambda r: r.type == "kubernetes:apps/v1:Deployment" and r.provider == "maxtext-east1-k8s"
                       and r.props["metadata"]["name"] == "kueue-controller-manager", ahead))
    assert set(got) == {"multikueue-same-kueue"} and "'maxtext-east1': '0.20.0'" in got["multikueue-same-kueue"][0]
    # ... or as a Helm chart's own objects carry it (a fork that installs Kueue from its chart).
    from policies.rules.common import Res
    labelled = Res("kubernetes:apps/v1:Deployment", "kueue-controller-manager", "urn:kueue", {
        "metadata": {"name": "kueue-controller-manager", "labels": {"helm.sh/chart": "kueue-0.18.0",
                                                                "app.kubernetes.io/part-of": "tpu-multislice"}}}, (),
        "tpu-manager-k8s")
    assert set(_fired([r for r in base if not (r.type == "kubernetes:apps/v1:Deployment"
                                                and r.provider == "tpu-manager-k8s")] + [labelled])) == {
        "multikueue-same-kueue"}

    # A region two minors ahead of the others.
    got = _fired(_edit(base, lambda r: r.type == "gcp:container/cluster:Cluster" and r.props["name"] == "maxtext-east1",
                       lambda p: p.update(minMasterVersion="1.37.1-gke.100")))
    assert set(got) == {"gke-version-skew-across-clusters"}, got
    assert "maxtext-east1 runs GKE 1.37.1-gke.100" in got["gke-version-skew-across-clusters"][0]

    # A region's checkpoint identity also bound on a bucket of its own (the stack declares one grant, on the shared
    # bucket: a second one, as a per-region grant would be, on another bucket).
    from policies.rules.common import Res

    [grant] = [r for r in base if r.type == "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"]
    own = Res(grant.type, "maxtext-east1-checkpoints-iam-policy", grant.urn.replace("tpu-manager", "maxtext-east1"),
              {**grant.props, "bucket": "elsewhere"}, grant.dependencies, grant.provider)
    got = _fired([*base, own])
    assert "one-checkpoint-location" in got and "different buckets" in got["one-checkpoint-location"][0]

    # No region with two 4x4 slices left: the queued jobs fit nowhere.
    fewer = [r for r in base if not (r.type == "gcp:container/nodePool:NodePool" and r.props.get("name") == "v6e-16-1")]
    got = _fired(fewer)
    assert len(got["queued-job-placeable"]) == 2, got
    assert "needs 2 x tpu-v6e-slice 4x4" in got["queued-job-placeable"][0]

    # A worker without the manager's LocalQueue; a DWS check beside MultiKueue on the manager.
    no_queue = [r for r in base if not on("maxtext-east5", "LocalQueue")(r)]
    got = _fired(no_queue)
    assert "multikueue-consistent" in got and "worker maxtext-east5 lacks the manager's LocalQueues" in " ".join(
        got["multikueue-consistent"])
    dws = _edit(base, on("tpu-manager", "ClusterQueue"), lambda p: p["spec"]["admissionChecksStrategy"][
        "admissionChecks"].append({"name": "maxtext-tpu-cluster-dws"}))
    dws.append(Res("kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck", "dws", "urn:dws", {
        "metadata": {"name": "maxtext-tpu-cluster-dws"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}, (), "tpu-manager-k8s"))
    got = _fired(dws)
    assert any("ProvisioningRequest check beside MultiKueue" in m for m in got["multikueue-consistent"]), got


def test_single_region_stacks_see_none_of_the_rules_across_clusters():
    from policies.offline import evaluate_resources, resources_of
    from policies.registry import BY_NAME

    assert ACROSS <= set(BY_NAME)
    for stack in ("prod", "dev"):
        r = engine.render(stack)
        assert not {v.rule for v in evaluate_resources(resources_of(r), r.spec.environment)} & ACROSS


def test_a_region_reached_by_ip_is_refused(tmp_path):
    text = MULTI.replace("        systemNodeCount: 3\n        podCidr: 10.120.0.0/14",
                         "        systemNodeCount: 3\n        controlPlane: {access: authorized-networks, "
                         "authorizedNetworks: [{cidr: 10.0.0.0/8, name: corp}]}\n        podCidr: 10.120.0.0/14", 1)
    got = problems(text, tmp_path)
    assert any(p.startswith(f"{NS}:regions[1].cluster.controlPlane.access") and "allowed: dns" in p for p in got), got


def test_one_set_of_channels_per_stack_and_the_scheduling_dashboard(multi):
    """The channels and the monitoring APIs once per stack (every region's alerts notify the same channels); the
    scheduling-goodput tiles on the stack's own dashboard, over the manager and every region."""
    from infra import monitoring

    [channel] = multi.by_type("gcp:monitoring/notificationChannel:NotificationChannel")
    assert channel.inputs["labels"] == {"email_address": "tpu-oncall@example.com"}
    services = [r.inputs["service"] for r in multi.by_type("gcp:projects/service:Service")
                if r.inputs["service"] in monitoring.SERVICES]
    assert sorted(services) == sorted(monitoring.SERVICES)
    alerts = [a for a in multi.by_type("gcp:monitoring/alertPolicy:AlertPolicy")
              if not a.name.startswith("tpu-manager-monitoring-")]  # the manager's own: test_monitoring.py
    assert len(alerts) == 2 * len(monitoring.alert_queries(multi.spec.region_views()[0]))
    assert {a.name.split("-monitoring-")[0] for a in alerts} == {"maxtext-east5", "maxtext-east1"}
    assert all(a.inputs["notificationChannels"] == [f"{channel.name}-offline-id"] for a in alerts)
    boards = {r.name: json.loads(r.inputs["dashboardJson"])
              for r in multi.by_type("gcp:monitoring/dashboard:Dashboard")}
    scheduling = boards["tpu-manager-monitoring-scheduling"]
    queries = [t["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"]
               for t in scheduling["mosaicLayout"]["tiles"]]
    assert all('cluster=~"tpu-manager|maxtext-east5|maxtext-east1"' in q for q in queries if "wait" in q)
    assert any(monitoring.KUEUE_ADMITTED in q for q in queries)
    assert len(queries) == len(monitoring.KUEUE_WAITS) + 1


# --------------------------------------------------------------------------- day 2: regions added, removed, reordered

EAST5 = MULTI[MULTI.index("    - region: us-east5\n"):MULTI.index("    - region: us-east1\n")]
EAST1 = MULTI[MULTI.index("    - region: us-east1\n"):MULTI.index("  tpu-multislice:storage:\n")]
CENTRAL1 = (EAST1.replace("us-east1-d", "us-central1-b").replace("us-east1", "us-central1")
            .replace("maxtext-east1", "maxtext-central1").replace("east1-tpu-subnet", "central1-tpu-subnet")
            .replace("10.120.0.0/14", "10.124.0.0/14").replace("10.104.16.0/20", "10.104.32.0/20")
            .replace("10.0.32.0/20", "10.0.48.0/20").replace("10.51.0.0/16", "10.52.0.0/16")
            .replace("10.61.0.0/16", "10.62.0.0/16"))


def _day2(text: str, tmp_path: Path, name: str):
    d = tmp_path / name
    d.mkdir()
    (d / "Pulumi.multi.yaml").write_text(text)
    return engine.render("multi", stacks_dir=d)


def _stack_wide(r) -> dict:
    """The protected bucket, the image repository and the bucket's grant: URN -> inputs."""
    kinds = ("gcp:storage/bucket:Bucket", "gcp:artifactregistry/repository:Repository",
             "gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    return {x.urn: x.inputs for x in r.resources if x.type in kinds}


def test_regions_reordered_or_removed_keep_the_bucket_its_grant_and_the_repository(multi, tmp_path):
    """Day 2 without loss: a bucket's location and dataLocations are ForceNew and the repository's location too, so
    neither may follow the regions; the bucket's one grant is the stack's, so no region's removal deletes it."""
    want = _stack_wide(multi)
    assert len(want) == 3
    swapped = _day2(MULTI.replace(EAST5 + EAST1, EAST1 + EAST5), tmp_path, "swapped")
    assert _stack_wide(swapped) == want
    # dispatch: cost, and both regions price alike: the tie keeps the listed order, the one order meant to change.
    assert swapped.outputs["dispatchOrder"] == multi.outputs["dispatchOrder"][::-1]
    without = MULTI.replace(EAST1, "").replace("      region: us-east1\n      minSlices", "      region: us-east5\n"
                                               "      minSlices")
    assert _stack_wide(_day2(without, tmp_path, "one")) == want


def test_the_repository_has_one_policy_with_every_clusters_node_account(multi, tmp_path):
    """The stack's one repository has one authoritative policy (two on one repository would fight): every worker
    cluster's node account a reader, the stack's own ci-image the writer, and nothing else; reordering the regions
    changes neither its name nor its data (the data source sorts the members)."""
    (policy,) = multi.by_type("gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy")
    clusters = [v.cluster.name for v in multi.spec.region_views()]  # the workers pull; the manager runs no worker
    assert policy_bindings(policy) == {
        "roles/artifactregistry.reader": sorted(
            f"serviceAccount:{names.node_service_account_email(c, multi.spec.project)}" for c in clusters),
        "roles/artifactregistry.writer": [
            f"serviceAccount:{names.image_account_email('multi', multi.spec.ci_project)}"],
    }
    assert not multi.by_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")
    swapped = _day2(MULTI.replace(EAST5 + EAST1, EAST1 + EAST5), tmp_path, "swapped-registry")
    (again,) = swapped.by_type("gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy")
    assert (again.urn, again.inputs) == (policy.urn, policy.inputs)


def test_a_region_the_bucket_does_not_hold_is_refused_not_a_moved_bucket(tmp_path):
    """Adding us-central1 to a dual-region us-east1 + us-east5 bucket: refused (a new place means a new bucket), never
    a silent change of dataLocations (ForceNew: the protected bucket would be refused or replaced)."""
    got = problems(MULTI.replace(EAST1, EAST1 + CENTRAL1), tmp_path)
    assert any(p.startswith(f'{NS}:storage.location = "US"') and "does not hold ['us-central1']" in p
               for p in got), got


def test_a_multi_region_stack_names_its_bucket_place(tmp_path):
    unnamed = MULTI.replace("    location: US\n    dataLocations: [us-east1, us-east5]\n", "")
    got = problems(unnamed, tmp_path)
    assert any(p.startswith(f"{NS}:storage.location = (missing): required in a multi-region stack") and
               "ForceNew" in p and "dataLocations: ['us-east1', 'us-east5']" in p for p in got), got


def test_a_dual_region_gcs_does_not_offer_is_refused(tmp_path):
    """GCS's table of configurable dual-regions (docs.cloud.google.com/storage/docs/locations): both regions listed
    under the location code named, and not a pair offered only predefined (NAM4, EUR4). Refused in the spec, not at
    apply time by GCS on the protected bucket."""
    named = "    location: US\n    dataLocations: [us-east1, us-east5]\n"
    eu = problems(MULTI.replace(named, "    location: EU\n    dataLocations: [us-east1, us-east5]\n"), tmp_path)
    assert any(p.startswith(f"{NS}:storage.dataLocations") and "EU offers configurable dual-regions of" in p
               for p in eu), eu
    assert places.dual_region_error("US", ("us-east1", "us-east5")) is None
    assert "predefined dual-region NAM4" in places.dual_region_error("US", ("us-central1", "us-east1"))
    assert "not asia-northeast1" in places.dual_region_error("ASIA", ("asia-east1", "asia-northeast1"))
    # What the spec suggests is what GCS accepts: NAM4, never US with the NAM4 pair; no ASIA pair with Tokyo.
    assert [(w.location, w.data_locations) for w in places.bucket_places(["us-central1", "us-east1"])] == [
        ("NAM4", ()), ("US", ())]
    assert [w.location for w in places.bucket_places(["asia-east1", "asia-northeast1"])] == ["ASIA"]
    # dataLocations name a dual-region's two regions under its code; a single-region stack's default location (its
    # region) is none.
    prod = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    got = problems(prod.replace("    storageClass: STANDARD\n", "    storageClass: STANDARD\n"
                                "    dataLocations: [us-east1, us-east5]\n", 1), tmp_path)
    assert any(p.startswith(f"{NS}:storage.location") and "required with dataLocations" in p for p in got), got


# --------------------------------------------------------------------------- issue 27: per-cluster manifests, diagrams

FIXTURES = ROOT / "tests" / "fixtures" / "rough"  # stacks of this test's own (duo: two regions and a manager)


def test_manifests_are_written_per_cluster(tmp_path, capsys):
    """``build/<stack>/manifests/<cluster>/``: which of the three clusters each object is applied to is visible. The
    split follows the Kubernetes provider each object was declared through (the resources' own provider URNs)."""
    out = tmp_path / "build"
    assert cli.main(["preview", "--stack", "duo", "--stacks-dir", str(FIXTURES), "--out", str(out)]) == 0
    capsys.readouterr()
    s = stack_spec.load_stack("duo", FIXTURES)
    clusters = {s.manager.name, *(v.cluster.name for v in s.region_views())}
    assert len(clusters) == 3
    folders = {p.name for p in (out / "manifests").iterdir() if p.is_dir()} - {"held"}
    assert folders == clusters
    assert not list((out / "manifests").glob("*.yaml"))  # nothing left flat
    rendering = engine.render("duo", stacks_dir=FIXTURES)
    by_provider: dict[str, int] = {}
    for r in rendering.resources:
        if engine.is_kubernetes_object(r):
            by_provider[r.provider_urn.rsplit("::", 1)[-1]] = by_provider.get(r.provider_urn.rsplit("::", 1)[-1], 0) + 1
    for cluster in clusters:
        files = sorted((out / "manifests" / cluster).glob("*.yaml"))
        assert len(files) == by_provider[names.k8s_provider(cluster)], cluster
    # The manager holds the MultiKueue objects, each region its worker ServiceAccount.
    kinds = {c: {f.name.split("-", 2)[1] for f in (out / "manifests" / c).glob("*.yaml")} for c in clusters}
    assert "multikueuecluster" in kinds[s.manager.name]
    assert all("multikueuecluster" not in kinds[v.cluster.name] for v in s.region_views())
    # A second preview leaves no file of the first behind.
    assert cli.main(["preview", "--stack", "duo", "--stacks-dir", str(FIXTURES), "--out", str(out)]) == 0
    capsys.readouterr()
    assert sum(len(list((out / "manifests" / c).glob("*.yaml"))) for c in clusters) == len(rendering.manifests)


# Mermaid refuses a diagram text longer than maxTextSize, default 50000
# (https://mermaid.js.org/config/schema-docs/config-properties-maxtextsize.html).
MERMAID_MAX_TEXT_SIZE = 50_000


@pytest.mark.parametrize("count, shape", [(256, ("v6e", "4x4", "ct6e-standard-4t")),
                                          (16, ("v6e", "16x16", "ct6e-standard-4t"))])
def test_the_topology_diagram_stays_under_mermaids_limit_and_names_every_slice_group(tmp_path, count, shape):
    import yaml

    from slicectl import cmd_preview

    doc = yaml.safe_load((FIXTURES / "Pulumi.solo.yaml").read_text())
    config = doc["config"]
    generation, topology, machine = shape
    first = config[f"{NS}:slices"][0]
    # Two worker groups of identical slices, as a team scaling out would write them.
    config[f"{NS}:slices"] = [{**first, "name": f"{generation}-{i}", "generation": generation, "topology": topology,
                               "machineType": machine, **({"group": "second"} if i >= count // 2 else {})}
                              for i in range(count)]
    config[f"{NS}:cluster"]["podCidr"] = "10.128.0.0/10"
    config[f"{NS}:network"].setdefault("primary", {})["cidr"] = "10.0.0.0/16"
    config.pop(f"{NS}:jobs", None)
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    try:
        s = stack_spec.load_file(path)
    except stack_spec.SpecError as e:
        pytest.skip(f"the fixture cannot be scaled this way: {e}")
    diagram = cmd_preview.mermaid(s)
    assert len(diagram) < MERMAID_MAX_TEXT_SIZE, len(diagram)
    for g in s.groups:
        assert f"group {g.name}:" in diagram, g.name
        assert f"ComputeClass {g.compute_class}" in diagram
    # Every slice is counted once: the boxes' "N x" add up to the stack's slices.
    assert sum(int(n) for n in re.findall(r'\["group [^:]+: (\d+) x ', diagram)) == count
