"""The cloud's server-side rules (stackspec/rules/catalogue.py): each one tripped through the checks it names.

Everything runs the real code: the program under mocks (offline.engine.render), the real policy rules over
the rendered plan, the real spec model. Only the cloud is absent; what it would refuse is the rule under test.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import documentation, rendered

from offline import engine
from policies import offline
from policies.registry import BY_NAME
from stackspec import names, zones
from stackspec import spec as stack_spec
from stackspec.rules import catalogue as cloud_rules
from workloads import kueue

ROOT = Path(__file__).resolve().parents[1]


def _bootstrap():
    """The bootstrap's access model and config (installed with the project: pyproject's packages.find)."""
    from types import SimpleNamespace

    from bootstrap import access, config

    return SimpleNamespace(**{**vars(access), "read_stacks": config.read_stacks})
NS = stack_spec.PROJECT
COVERED: set[str] = set()


def covers(*rule_ids: str):
    """Marks a test as tripping these cloud rules (every rule needs one: test_every_rule_has_a_test)."""
    for rid in rule_ids:
        cloud_rules.by_id(rid)  # a typo fails at import
    COVERED.update(rule_ids)
    return lambda fn: fn


def violations(resources, rule: str, env: str = "prod") -> list[str]:
    found = offline.evaluate_resources(resources, env)
    return [v.message for v in found if v.rule == rule]


def edited(rendering, type_: str, name: str, fn):
    """The rendering's custom resources with one resource's inputs edited by ``fn``."""
    out = []
    for r in offline.resources_of(rendering):
        if r.type == type_ and r.name == name:
            props = copy.deepcopy(dict(r.props))
            fn(props)
            r = type(r)(r.type, r.name, r.urn, props, r.dependencies)
        out.append(r)
    return out


def spec_problems(cfg: dict[str, str], stack: str = "prod") -> str:
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load(stack, cfg)
    return str(e.value)


def config(stack: str = "prod", **sections) -> dict[str, str]:
    cfg = engine.stack_config(stack)
    for key, value in sections.items():
        cfg[f"{NS}:{key}" if ":" not in key else key] = value if isinstance(value, str) else json.dumps(value)
    return cfg


def prod_with_capacity(capacity: list[dict], **unverified) -> dict[str, str]:
    cfg = engine.stack_config("prod")
    slices = json.loads(cfg[f"{NS}:slices"])
    for s in slices:
        s["capacity"] = capacity
    cfg[f"{NS}:slices"] = json.dumps(slices)
    opted = {**json.loads(cfg.get(f"{NS}:unverified", "{}")), **unverified}
    cfg[f"{NS}:unverified"] = json.dumps(opted)
    return cfg


@pytest.fixture(scope="module")
def fallbacks():
    """prod with a reservation, flex-start and on-demand per slice (opted in to DRA scale-from-zero)."""
    cfg = prod_with_capacity([{"type": "reservation", "reservation": "v6e-res"},
                              {"type": "flex-start", "maxRunDuration": "7d"}, {"type": "on-demand"}],
                             draScaleFromZero=True)
    return engine.render("prod", cfg)


# --------------------------------------------------------------------------- GKE node pools


@covers("gke-tpu-autoscaling-per-zone")
def test_autoscaled_slice_pools_set_per_zone_limits(fallbacks):
    pools = [r for r in fallbacks.by_type("gcp:container/nodePool:NodePool") if r.name.startswith("v6e-16-0")]
    assert len(pools) == 3
    for p in pools:
        assert p.inputs["autoscaling"]["maxNodeCount"] == 4 and p.inputs["autoscaling"]["minNodeCount"] == 0
        assert "totalMaxNodeCount" not in p.inputs["autoscaling"]
    assert not violations(offline.resources_of(fallbacks), "tpu-autoscaling-per-zone")

    def totals(props):
        props["autoscaling"] = {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}
    bad = edited(fallbacks, "gcp:container/nodePool:NodePool", "v6e-16-0-flex", totals)
    [msg] = violations(bad, "tpu-autoscaling-per-zone")
    assert "v6e-16-0-flex" in msg and "per-zone maximum of 0" in msg and "must be 4" in msg


@covers("gke-node-version-with-auto-upgrade")
def test_no_pool_pins_a_version_and_the_policy_refuses_one(prod):
    pools = prod.by_type("gcp:container/nodePool:NodePool")
    assert pools and all("version" not in p.inputs for p in pools)
    cluster = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu")
    assert cluster.inputs["minMasterVersion"] == prod.spec.cluster.version  # a minimum for the control plane
    bad = edited(prod, "gcp:container/nodePool:NodePool", "v6e-16-1",
                 lambda p: p.update(version="1.35.2-gke.1842000"))
    [msg] = violations(bad, "gke-node-version-unpinned")
    assert "v6e-16-1" in msg and "rolls the pool back" in msg


@covers("gke-compact-placement")
def test_multi_host_pools_are_compact_with_their_topology(prod):
    for p in prod.by_type("gcp:container/nodePool:NodePool"):
        if p.name.startswith("v6e"):
            assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    bad = edited(prod, "gcp:container/nodePool:NodePool", "v6e-16-0", lambda p: p.pop("placementPolicy"))
    assert violations(bad, "tpu-compact-placement")


@covers("gke-flex-start-constraints", "gke-flex-start-labels")
def test_flex_start_pools_start_at_zero_take_no_reservation_and_ignore_gke_labels(fallbacks):
    flex = fallbacks.one("gcp:container/nodePool:NodePool", "v6e-16-0-flex")
    cfg = flex.inputs["nodeConfig"]
    assert cfg["flexStart"] is True and not cfg.get("spot")
    assert cfg["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert flex.inputs["initialNodeCount"] == 0 and flex.inputs["autoscaling"]["locationPolicy"] == "ANY"
    assert flex.inputs["management"]["autoRepair"] is False
    assert cfg["maxRunDuration"] == f"{7 * 86400}s"
    assert set(flex.ignore_changes) == {"initialNodeCount", "nodeConfig.labels"}
    # Other pools keep their labels managed (the compute-class label must follow the spec).
    rsv = next(p for p in fallbacks.by_type("gcp:container/nodePool:NodePool") if p.inputs["name"] == "v6e-16-0-rsv")
    assert "nodeConfig.labels" not in rsv.ignore_changes
    # GKE's limit on a flex-start VM's life: at most 7 days.
    cfg8 = prod_with_capacity([{"type": "flex-start", "maxRunDuration": "8d"}], draScaleFromZero=True)
    assert "maxRunDuration" in spec_problems(cfg8)


@covers("gke-queued-provisioning-only-by-request")
def test_queued_flex_start_goes_through_kueue_provisioning_requests():
    cfg = prod_with_capacity([{"type": "flex-start", "queuedProvisioning": True}], draScaleFromZero=True)
    spec = stack_spec.load("prod", cfg)
    queue = kueue.cluster_queue(spec)
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"].endswith("-dws")
    config_, check = kueue.provisioning_objects(spec)
    assert config_["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert check["spec"]["controllerName"] == kueue.PROVISIONING_CONTROLLER


# --------------------------------------------------------------------------- networks


@covers("gce-vpc-implied-deny-ingress")
def test_every_dcn_network_admits_its_subnet_and_the_policy_catches_a_missing_rule(prod):
    walls = prod.by_type("gcp:compute/firewall:Firewall")
    assert {w.inputs["name"] for w in walls} == {"maxtext-tpu-net-1-allow-internal", "maxtext-tpu-net-2-allow-internal"}
    for w, net in zip(sorted(walls, key=lambda w: w.name), prod.spec.networks, strict=True):
        assert w.inputs["sourceRanges"] == [net.cidr] and w.inputs["direction"] == "INGRESS"
        assert {a["protocol"] for a in w.inputs["allows"]} == {"tcp", "udp", "icmp"}
    assert not violations(offline.resources_of(prod), "dcn-network-firewall")
    resources = [r for r in offline.resources_of(prod) if r.name != "maxtext-tpu-dcn-allow-internal-2"]
    [msg] = violations(resources, "dcn-network-firewall")
    assert "maxtext-tpu-net-2" in msg and "10.60.0.0/16" in msg
    narrow = edited(prod, "gcp:compute/firewall:Firewall", "maxtext-tpu-dcn-allow-internal-1",
                    lambda p: p.update(sourceRanges=["10.50.0.0/24"]))
    assert violations(narrow, "dcn-network-firewall")


@covers("gke-multi-networking-for-extra-nics")
def test_extra_node_networks_come_with_multi_networking(prod):
    cluster = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu")
    assert cluster.inputs["enableMultiNetworking"] is True
    assert cluster.inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    off = edited(prod, "gcp:container/cluster:Cluster", "maxtext-tpu", lambda p: p.pop("enableMultiNetworking"))
    [msg] = violations(off, "gke-multi-networking")
    assert "enableMultiNetworking" in msg


@covers("gke-dranet-min-version")
def test_dranet_needs_its_minimum_version():
    cfg = engine.stack_config("prod")
    cluster = json.loads(cfg[f"{NS}:cluster"])
    cluster["version"] = "1.34.0-gke.1000000"
    cfg[f"{NS}:cluster"] = json.dumps(cluster)
    assert "1.34.1-gke.1829001" in spec_problems(cfg)


# --------------------------------------------------------------------------- IAM


@covers("gke-image-streaming-node-sa-role")
def test_streaming_nodes_hold_service_usage_consumer(prod):
    ci = _bootstrap()
    stacks, problems = ci.read_stacks()
    assert not problems
    roles = {s.name: s.node_roles for s in stacks}
    assert roles["prod"] == ("roles/container.defaultNodeServiceAccount", "roles/serviceusage.serviceUsageConsumer")
    pools = prod.by_type("gcp:container/nodePool:NodePool")
    assert all(p.inputs["nodeConfig"]["serviceAccount"] == "maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"
               for p in pools)
    assert not prod.by_type("gcp:serviceaccount/account:Account")  # the bootstrap's, not the stack's
    # A plan that makes its own node account must grant it the role.
    res = offline.resources_of(prod)
    account = type(res[0])("gcp:serviceaccount/account:Account", "nodes", "urn:nodes",
                           {"accountId": "maxtext-tpu-nodes", "project": "my-tpu-project"})
    msgs = violations([*res, account], "node-sa-image-streaming-role")
    assert msgs and all("serviceUsageConsumer" in m for m in msgs)
    grant = type(res[0])("gcp:projects/iAMMember:IAMMember", "g", "urn:g", {
        "role": "roles/serviceusage.serviceUsageConsumer",
        "member": "serviceAccount:maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"})
    assert not violations([*res, account, grant], "node-sa-image-streaming-role")


def _after(rendering) -> dict[str, set[str]]:
    """Every resource's URN -> the URNs it waits for, transitively (dependencies, and parents' own)."""
    by = {r.urn: r for r in rendering.resources}
    memo: dict[str, set[str]] = {}

    def walk(urn: str) -> set[str]:
        if urn not in memo:
            memo[urn] = set()
            r = by.get(urn)
            direct = set(r.dependencies) if r else set()
            memo[urn] = direct | {d for x in direct for d in walk(x)}
        return memo[urn]

    return {u: walk(u) for u in by}


@pytest.mark.parametrize("stack", ["prod", "multi"])
def test_streaming_pools_wait_for_the_container_file_system_api(stack, request):
    """Image streaming needs the Container File System API on (GKE's image-streaming requirements): every pool with
    gcfsConfig enabled waits for that Service, so a first `up` enables it before any streaming node."""
    r = request.getfixturevalue(stack) if stack == "prod" else engine.render(stack)
    (api,) = [x for x in r.resources if x.type == "gcp:projects/service:Service"
              and x.inputs["service"] == "containerfilesystem.googleapis.com"]
    after = _after(r)
    streaming = [p for p in r.by_type("gcp:container/nodePool:NodePool")
                 if (p.inputs["nodeConfig"].get("gcfsConfig") or {}).get("enabled")]
    assert streaming
    assert [p.name for p in streaming if api.urn not in after[p.urn]] == []


@covers("iam-wi-pool-exists")
def test_the_bucket_binding_waits_for_the_cluster(prod):
    binding = prod.one("gcp:storage/bucketIAMPolicy:BucketIAMPolicy", "maxtext-tpu-checkpoints-iam-policy")
    cluster = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu")
    assert cluster.urn in binding.dependencies
    assert not violations(offline.resources_of(prod), "wi-binding-after-cluster")
    resources = [type(r)(r.type, r.name, r.urn, r.props, tuple(d for d in r.dependencies if d != cluster.urn))
                 for r in offline.resources_of(prod)]
    [msg] = violations(resources, "wi-binding-after-cluster")
    assert "Identity Pool does not exist" in msg


# --------------------------------------------------------------------------- capacity and zones


@covers("gce-reservation-any-falls-back-on-demand")
def test_reservation_any_before_other_options_is_refused():
    cfg = prod_with_capacity([{"type": "reservation", "affinity": "ANY"}, {"type": "flex-start"}],
                             draScaleFromZero=True)
    msg = spec_problems(cfg)
    assert "capacity[0].affinity" in msg and "runs on-demand VMs when no reservation matches" in msg
    # Last, it is a plain "any reservation, else on demand": allowed.
    stack_spec.load("prod", prod_with_capacity([{"type": "flex-start"}, {"type": "reservation", "affinity": "ANY"}],
                                               draScaleFromZero=True))


@covers("ca-dra-scale-from-zero")
def test_scale_from_zero_with_dranet_is_an_opt_in_the_preview_names():
    cfg = prod_with_capacity([{"type": "flex-start"}, {"type": "on-demand"}])
    msg = spec_problems(cfg)
    assert "unverified.draScaleFromZero" in msg and "dra_support" not in msg
    spec = stack_spec.load("prod", prod_with_capacity([{"type": "flex-start"}, {"type": "on-demand"}],
                                                      draScaleFromZero=True))
    assert f"{NS}:unverified.draScaleFromZero" in spec.unverified_paths
    # Without DRANET nothing claims devices: no opt-in needed.
    cfg = prod_with_capacity([{"type": "flex-start"}, {"type": "on-demand"}])
    cfg[f"{NS}:network"] = json.dumps({"mtu": 8896})
    stack_spec.load("prod", cfg)


@covers("gke-ray-addon-kuberay-version")
def test_token_auth_is_an_opt_in():
    cfg = engine.stack_config("prod")
    cfg[f"{NS}:unverified"] = json.dumps({})
    assert "unverified.rayTokenAuth" in spec_problems(cfg)
    assert f"{NS}:unverified.rayTokenAuth" in stack_spec.load("prod", engine.stack_config("prod")).unverified_paths


@covers("tpu-zone-offers-generation")
@pytest.mark.parametrize(("zone", "region", "want"), [
    ("europe-west4-z", "europe-west4", "not a GCE zone"),
    ("europe-west4-c", "europe-west4", "offers no v6e TPUs; v6e zones of europe-west4: europe-west4-a"),
    ("us-east5-b", "europe-west4", "must be a zone of gcp:region europe-west4 (v6e zones of europe-west4: "
                                   "europe-west4-a)"),
    ("us-west4-a", "us-west4", "us-west4 offers no v6e zone in the table"),
])
def test_zones_that_do_not_exist_or_offer_no_v6e_are_refused(zone, region, want):
    cfg = config(**{"gcp:zone": zone, "gcp:region": region})
    assert want in spec_problems(cfg)


@covers("gce-zone-offers-machine-type")
def test_a_system_pool_machine_its_zone_does_not_offer_is_refused():
    # The seed's n1-standard-16 in us-east5-b: GCE lists no N1 there (tests/test_machine_regions.py: lint, preview,
    # a region's pool, a Standard manager, a TPU host).
    cfg = config(cluster={**json.loads(engine.stack_config("prod")[f"{NS}:cluster"]),
                          "systemMachineType": "n1-standard-16"})
    assert "n1-standard-16 is not offered in us-east5-b" in spec_problems(cfg)


def test_the_zone_table_is_dated_and_sourced():
    table = zones.table()
    assert table["source"].startswith("https://") and re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["published"])
    assert "us-east5-b" in zones.zones("v6e")[0] and zones.zones("v6e")[1]
    stack_spec.load("prod", config(**{"gcp:zone": "us-central1-ai1", "gcp:region": "us-central1"}))


@covers("gke-system-pool-capacity")
def test_the_system_pool_must_hold_heads_submitters_kueue_and_gke():
    cfg = engine.stack_config("dev")
    cluster = json.loads(cfg[f"{NS}:cluster"])
    cluster["systemNodeCount"] = 1
    cfg[f"{NS}:cluster"] = json.dumps(cluster)
    msg = spec_problems(cfg, "dev")
    assert "cluster.systemNodeCount" in msg and "the Kueue controller" in msg and "GKE's system Deployments" in msg
    stack_spec.load("dev", engine.stack_config("dev"))  # the shipped dev has two nodes


# --------------------------------------------------------------------------- Kueue and KubeRay


@covers("kueue-wait-for-pods-ready")
def test_kueue_waits_long_for_slices_and_never_evicts_a_recovering_job(prod):
    cfg = kueue.manager_config(prod.spec)
    assert cfg["waitForPodsReady"] == {"timeout": "24h", "recoveryTimeout": "0s", "blockAdmission": False}
    assert "enable" not in cfg["waitForPodsReady"]  # v1beta2 has no such field (strict decoding)
    values = yaml.safe_load(kueue.helm_values(prod.spec)["managerConfig"]["controllerManagerConfigYaml"])
    assert values["waitForPodsReady"]["timeout"] == "24h"


@covers("kueue-quota-freed-at-job-end")
def test_queued_jobs_delete_their_cluster_at_once(prod):
    for doc in prod.manifests:
        if doc["kind"] == "RayJob" and "kueue.x-k8s.io/queue-name" in doc["metadata"].get("labels", {}):
            assert doc["spec"].get("ttlSecondsAfterFinished", 0) == 0
    cfg = engine.stack_config("prod")
    jobs = json.loads(cfg[f"{NS}:jobs"])
    jobs[0]["clusterTtlSeconds"] = 300
    cfg[f"{NS}:jobs"] = json.dumps(jobs)
    assert "Kueue frees a queued job's quota" in spec_problems(cfg)
    jobs[0]["suspend"] = True  # an operator's pause is outside the queue
    cfg[f"{NS}:jobs"] = json.dumps(jobs)
    stack_spec.load("prod", cfg)


@covers("kueue-dra-device-class-mapping")
def test_dranet_devices_map_to_a_quota_resource(prod):
    mapping = kueue.manager_config(prod.spec)["resources"]["deviceClassMappings"]
    assert mapping == [{"name": "tpu-multislice/netdev", "deviceClassNames": ["netdev.google.com"]}]


@covers("kueue-rayjob-rules")
def test_kueue_rayjob_rules_hold_for_every_queued_job(prod):
    assert not violations(offline.resources_of(prod), "kueue-rayjob-lifecycle")
    job = next(r for r in prod.resources if r.type == "kubernetes:ray.io/v1:RayJob")
    bad = edited(prod, job.type, job.name, lambda p: p["spec"].update(shutdownAfterJobFinishes=False))
    assert violations(bad, "kueue-rayjob-lifecycle")


@covers("kueue-chart-webhook-secret")
def test_the_drift_check_skips_the_kueue_webhook_secret(tmp_path):
    """The drift step, run on multi's rendered URNs plus the chart's webhook Secret (a child the chart's Construct
    registers): every Secret, and nothing else, is its own --exclude argument."""
    from test_workflows import drift_refresh_argv

    drills = yaml.safe_load((ROOT / ".github/workflows/drills.yml").read_text())
    run = next(s["run"] for s in drills["jobs"]["drift"]["steps"] if "pulumi refresh" in s.get("run", ""))
    urns = [r.urn for r in engine.render("multi").resources]
    chart = f"urn:pulumi:multi::tpu-multislice::kubernetes:helm.sh/v4:Chart$kubernetes:core/v1:Secret::" \
            f"kueue-{kueue.WEBHOOK_SECRET}"
    secrets = sorted([u for u in urns if u.split("::")[2].endswith("kubernetes:core/v1:Secret")] + [chart])
    assert len(secrets) >= 4
    argv = drift_refresh_argv(run, tmp_path, urns + [chart])
    assert [a for i, a in enumerate(argv) if i and argv[i - 1] == "--exclude"] == secrets
    assert argv.count("--exclude") == len(secrets) and "--expect-no-changes" in argv


# --------------------------------------------------------------------------- MultiKueue across regions (issue 19)


def _mk_regions():
    from test_multikueue import _region

    return [_region("tpu-use5", "us-east5", "us-east5-b"), _region("tpu-euw4", "europe-west4", "europe-west4-a")]


def _mk_manager(regions):
    from workloads import multikueue as mk

    return mk.Manager("tpu-manager", "my-tpu-project", "us-central1", regions[0].storage.namespace, "multiregion")


@covers("kueue-multikueue-kubeconfig")
def test_multikueue_credentials_are_short_lived_kubeconfigs_kueue_accepts():
    from workloads import multikueue as mk
    from workloads import multikueue_token as tok

    regions = _mk_regions()
    m = _mk_manager(regions)
    config = yaml.safe_load(tok.kubeconfig("tpu-use5", "https://gke-a.us-east5.gke.goog", "t"))
    assert config["users"][0]["user"] == {"token": "t"}  # no tokenFile, exec or auth-provider
    assert set(config["clusters"][0]["cluster"]) == {"server"}  # no CA file, no insecure TLS
    for cluster in (d for d in mk.manager_objects(m, regions) if d["kind"] == "MultiKueueCluster"):
        assert cluster["spec"]["clusterSource"]["kubeConfig"]["locationType"] == "Secret"
    docs = mk.manager_access_objects(m, regions, ["https://a", "https://b"])
    # The stack declares the Secrets empty (the job may only patch them); their only content is the job's one-hour
    # tokens, never a credential of the program's.
    secrets = [d for d in docs if d["kind"] == "Secret"]
    assert secrets and not [d for d in secrets if set(d) & {"data", "stringData"}]
    assert {t["expirationSeconds"] for d in docs if d["kind"] == "ConfigMap"
            for t in json.loads(d["data"]["targets.json"])["targets"]} == {3600}


@covers("kueue-multikueue-cluster-queue", "kueue-multikueue-dispatch-order")
def test_the_manager_queue_and_config_follow_kueues_rules():
    from workloads import multikueue as mk

    regions = _mk_regions()
    docs = mk.manager_objects(_mk_manager(regions), regions)
    assert mk.cluster_queue_rules(docs) == []
    (config,) = [d for d in docs if d["kind"] == "MultiKueueConfig"]
    assert config["spec"]["clusters"] == [r.cluster.name for r in regions]
    broken = copy.deepcopy(docs) + kueue.provisioning_objects(
        stack_spec.load("prod", prod_with_capacity([{"type": "flex-start", "queuedProvisioning": True}],
                                                   draScaleFromZero=True)))
    cq = next(d for d in broken if d["kind"] == "ClusterQueue")
    dws = next(d for d in broken if d["kind"] == "AdmissionCheck"
               and d["spec"]["controllerName"] == kueue.PROVISIONING_CONTROLLER)
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"].append({"name": dws["metadata"]["name"]})
    assert any("ProvisioningRequest" in p for p in mk.cluster_queue_rules(broken))
    assert any("1 to 20" in p for p in mk.problems(_mk_manager(regions), regions * 11))


@covers("gke-google-identity-rbac-user", "kueue-multikueue-clusterprofile-alpha")
def test_the_manager_reaches_workers_as_a_google_identity_with_one_permission():
    from workloads import multikueue as mk

    regions = _mk_regions()
    m = _mk_manager(regions)
    assert [g.role for g in mk.iam_grants(m, regions)] == ["roles/container.clusterViewer"]
    binding = next(d for d in mk.worker_objects(regions[0], m) if d["kind"] == "RoleBinding"
                   and d["metadata"]["namespace"] == kueue.NAMESPACE)  # the token's (the other: the job namespace's)
    assert binding["subjects"][0]["kind"] == "User" and binding["subjects"][0]["name"] == m.google_service_account
    # The default path is the kubeconfig one: no ClusterProfile, no alpha gate.
    values = mk.manager_helm_values(m, regions)
    assert "clusterProfile" not in values["managerConfig"]["controllerManagerConfigYaml"]
    assert "featureGates" not in values["controllerManager"]


@covers("kueue-metrics-authenticated")
def test_kueue_metrics_are_scraped_with_a_reader_token():
    from workloads import multikueue as mk

    docs = mk.metrics_objects("prod", "maxtext-tpu")
    (pm,) = [d for d in docs if d["kind"] == "PodMonitoring"]
    ep = pm["spec"]["endpoints"][0]
    assert ep["scheme"] == "https"
    assert ep["authorization"]["credentials"]["secret"]["name"] == names.KUEUE_METRICS_SECRET
    crb = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert crb["roleRef"]["name"] == f"{kueue.RELEASE}-metrics-reader"


# --------------------------------------------------------------------------- the table itself


def test_every_rule_has_a_test_and_its_checks_exist():
    assert {r.id for r in cloud_rules.RULES} <= COVERED, "a cloud rule no test trips"
    for r in cloud_rules.RULES:
        assert r.source and r.checks, r.id
        for check in r.checks:
            kind, _, what = check.partition(":")
            if kind == "policy":
                assert what in BY_NAME, (r.id, check)
            elif kind == "code":
                assert (ROOT / what).is_file(), (r.id, check)
            else:
                assert kind == "spec", (r.id, check)
    assert len({r.id for r in cloud_rules.RULES}) == len(cloud_rules.RULES)


_URL = re.compile(r"https://[^\s]+")
_REPO_REF = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{40}):(?P<path>[^:\s]+)"
                       r":(?P<a>\d+)(?:-(?P<b>\d+))?")
SOURCES = ROOT / "tests" / "reference" / "cloud-rule-sources.json"


def test_every_rule_quotes_what_it_relies_on_where_it_says():
    """Each rule quotes at least one sentence or line with where it is: a URL, or a repository line range at a
    commit. A repository quote must be in the lines ``tests/tools/cloud_rule_sources.py`` read at that commit
    (``tests/reference/cloud-rule-sources.json``): a path or line that does not exist there, or words not in them,
    fail; so does a recorded range no rule cites any more."""
    recorded = {f"{e['repo']}@{e['commit']}:{e['path']}:{e['lines']}": e for e in json.loads(SOURCES.read_text())}
    cited = set()
    for r in cloud_rules.RULES:
        assert r.quotes, f"{r.id}: no quote"
        for q in r.quotes:
            assert q.text.strip(), r.id
            m = _REPO_REF.fullmatch(q.where)
            if m is None:
                assert _URL.fullmatch(q.where), f"{r.id}: neither a URL nor owner/name@commit:path:line: {q.where}"
                continue
            key = f"{m['repo']}@{m['commit']}:{m['path']}:{m['a']}-{m['b'] or m['a']}"
            assert key in recorded, f"{r.id}: {q.where} was not read at its commit (tests/tools/cloud_rule_sources.py)"
            assert " ".join(q.text.split()) in " ".join(recorded[key]["text"].split()), (r.id, q.where)
            cited.add(key)
    assert set(recorded) == cited, f"recorded but not quoted: {set(recorded) - cited}"


def test_the_quote_check_fails_on_a_bad_quote(monkeypatch):
    rule = cloud_rules.RULES[0]
    bad = cloud_rules.Quote("words the file does not have", rule.quotes[1].where)
    monkeypatch.setattr(cloud_rules, "RULES", (dataclasses.replace(rule, quotes=(bad,)),))
    with pytest.raises(AssertionError):
        test_every_rule_quotes_what_it_relies_on_where_it_says()
    missing = cloud_rules.Quote(rule.quotes[1].text, rule.quotes[1].where.replace("node_pool.go", "nodepool.go"))
    monkeypatch.setattr(cloud_rules, "RULES", (dataclasses.replace(rule, quotes=(missing,)),))
    with pytest.raises(AssertionError, match="was not read"):
        test_every_rule_quotes_what_it_relies_on_where_it_says()


def test_the_readme_table_is_the_module_table():
    readme = documentation()
    rows = [f"| `{r.id}` | {r.system} | {r.rule} | {r.source} | {', '.join(f'`{c}`' for c in r.checks)} |"
            for r in cloud_rules.RULES]
    start = readme.index("| rule | system | what it accepts or does | source | checks |")
    lines = readme[start:].splitlines()[2:]
    table = lines[:next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines))]
    assert table == rows


# --------------------------------------------------------------------------- cluster hardening (issue 17)


@covers("gke-secrets-kms-key")
def test_the_cluster_names_the_bootstraps_secrets_key_in_its_region(prod):
    ci = _bootstrap()
    (stack,) = [s for s in ci.read_stacks()[0] if s.name == "prod"]
    key = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu").inputs["databaseEncryption"]["keyName"]
    # The key's location is the zonal cluster's region, and it is the key the bootstrap makes for this stack.
    assert key.split("/")[3] == prod.spec.region == stack.region
    assert key == names.secrets_key_id(stack.project, stack.region, stack.cluster)
    assert ci.GKE_SECRETS_KEY_ROLE == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
    assert "cloudkms.googleapis.com" in ci.STACK_SERVICES


@covers("gke-notifications-topic-same-project")
def test_bulletins_go_to_a_topic_of_the_clusters_project(prod):
    cluster = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu")
    (topic,) = prod.by_type("gcp:pubsub/topic:Topic")
    assert topic.inputs["project"] == cluster.inputs["project"]
    assert cluster.inputs["notificationConfig"]["pubsub"]["filter"]["eventTypes"] == ["SECURITY_BULLETIN_EVENT"]
    assert topic.urn in cluster.dependencies


def _admitted_by_pattern(image: str, patterns: list[str]) -> bool:
    """Binary Authorization's pattern match (infra.cluster_security.admits): a trailing ``*`` matches anything but
    ``/``, a trailing ``**`` anything."""
    from infra.cluster_security import admits

    return any(admits(p, image) for p in patterns)


def test_the_pattern_match_is_the_documented_one():
    from infra.cluster_security import admits

    # AdmissionWhitelistPattern.name_pattern's own examples.
    assert admits("gcr.io/nginx*", "gcr.io/nginx@latest") and not admits("gcr.io/nginx*", "gcr.io/nginx/image")
    assert admits("gcr.io/nginx**", "gcr.io/nginx/image")
    assert admits("docker.io/library/ubuntu", "ubuntu:24.04") and not admits("gcr.io/nginx", "gcr.io/nginx2")


@pytest.mark.parametrize(("stack", "change", "why"), [
    ("prod", lambda s, repo: {"patterns": [f"{repo}/*"]}, "admits the stack's repository unattested"),
    ("prod", lambda s, repo: {"patterns": [repo.rsplit("/", 1)[0] + "/**"]}, "admits the stack's repository"),
    ("prod", lambda s, repo: {"patterns": [f"{repo}/{s.image.name}@sha256:" + "0" * 64]}, "admits the stack's"),
    ("prod", lambda s, repo: {"attestors": [names.image_attestor_id("other-project", s.cluster.name)]},
     "must require the stack's own attestor"),
    ("prod", lambda s, repo: {"mode": "ALWAYS_ALLOW"}, "must require the stack's own attestor"),
    ("dev", lambda s, repo: {"mode": "ALWAYS_ALLOW"}, "the default rule must deny"),
])
def test_the_policy_check_refuses_the_stacks_repository_unattested(stack, change, why):
    """infra.cluster_security.policy_problems, which ClusterSecurity runs before it declares the policy: the
    rendered policies pass it, and a pattern over the stack's repository or a rule without its own attestor fails."""
    from infra.cluster_security import admission_patterns, default_rule, policy_problems

    s = rendered(stack).spec
    patterns, rule = admission_patterns(s, (kueue.IMAGE,)), default_rule(s)
    assert policy_problems(s, patterns, rule) == []
    repo = names.repository_path(s.image.location, s.project, s.image.repository) if s.image else "x/y/z"
    c = change(s, repo)
    patterns = [*patterns, *c.get("patterns", [])]
    rule = {**rule, **({"require_attestations_bies": c["attestors"]} if "attestors" in c else {}),
            **({"evaluation_mode": c["mode"]} if "mode" in c else {})}
    problems = policy_problems(s, patterns, rule)
    assert any(why in p for p in problems), problems


@covers("binauthz-project-singleton-policy", "binauthz-attestation-by-digest")
def test_binary_authorization_admits_the_images_the_stack_runs(prod):
    from infra.cluster_security import admission_patterns, image_pattern

    assert image_pattern("ubuntu:24.04") == "docker.io/library/ubuntu:24.04*"  # Docker Hub's short names
    assert image_pattern("rayproject/ray:2.60.0-py312-tpu") == "docker.io/rayproject/ray:2.60.0-py312-tpu*"
    assert image_pattern(kueue.IMAGE) == "registry.k8s.io/kueue/kueue:v0.19.2*"
    assert image_pattern("localhost:5000/x@sha256:" + "0" * 64) == "localhost:5000/x@sha256:" + "0" * 64 + "*"
    cluster = prod.one("gcp:container/cluster:Cluster", "maxtext-tpu")
    assert cluster.inputs["binaryAuthorization"]["evaluationMode"] == "PROJECT_SINGLETON_POLICY_ENFORCE"
    # Day 0: every image the rendered pods name is admitted by a pattern; the chart's Kueue image among them.
    patterns = admission_patterns(prod.spec, (kueue.IMAGE,))
    images = {c["image"] for d in prod.manifests for c in _containers(d)}
    assert images and all(_admitted_by_pattern(i, patterns) for i in images), (images, patterns)
    assert not _admitted_by_pattern("rayproject/ray:nightly", patterns)  # another tag of the same image
    assert not _admitted_by_pattern("registry.k8s.io/kueue/kueueviz-backend:v0.19.2", patterns)
    # The digest set: the workers' image is admitted by no pattern, only by the attestor, and named by digest.
    cfg = engine.stack_config("prod")
    image = {**json.loads(cfg[f"{stack_spec.PROJECT}:image"]), "digest": "sha256:" + "a" * 64}
    r = engine.render("prod", {**cfg, f"{stack_spec.PROJECT}:image": json.dumps(image)})
    (policy,) = r.by_type("gcp:binaryauthorization/policy:Policy")
    patterns = [p["namePattern"] for p in policy.inputs["admissionWhitelistPatterns"]]
    rule = policy.inputs["defaultAdmissionRule"]
    assert rule["evaluationMode"] == "REQUIRE_ATTESTATION"
    assert rule["requireAttestationsBies"] == [names.image_attestor_id(r.spec.project, r.spec.cluster.name)]
    workers = {c["image"] for d in r.manifests for c in _containers(d)} - {kueue.IMAGE}
    assert workers == {r.spec.worker_image} and "@sha256:" in r.spec.worker_image
    assert not _admitted_by_pattern(r.spec.worker_image, patterns), patterns
    # The attestor, key and grants the rule names are the bootstrap's (bootstrap/components/stack_project.py).
    ci = _bootstrap()
    assert ci.IMAGE_SIGNING_ALGORITHM == "EC_SIGN_P256_SHA256"
    assert {"binaryauthorization.googleapis.com", "containeranalysis.googleapis.com"} <= set(ci.STACK_SERVICES)
    # image.yml signs with the key version the attestor holds, the digest it pushed (never a tag).
    wf = (ROOT / ".github" / "workflows" / "image.yml").read_text()
    assert '--artifact-url="$IMAGE@$DIGEST" --attestor="$ATTESTOR" --keyversion="$KEYVERSION"' in wf


def _containers(doc: dict) -> list[dict]:
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "containers" in x and isinstance(x["containers"], list):
                out.extend(c for c in x["containers"] if isinstance(c, dict) and "image" in c)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return out


@covers("gce-subnet-ranges-disjoint")
def test_the_cluster_subnet_is_checked_by_spec_and_policy(prod):
    msg = spec_problems(config("prod", network={**json.loads(engine.stack_config("prod")[f"{NS}:network"]),
                                                "primary": {"cidr": "10.100.0.0/20"}}))
    assert "overlaps 10.100.0.0/20 at tpu-multislice:network.primary.cidr" in msg
    assert not violations(offline.resources_of(prod), "subnets-no-overlap")

    def overlap(props):
        props["ipCidrRange"] = "10.104.0.0/24"  # inside the service range
    msgs = violations(edited(prod, "gcp:compute/subnetwork:Subnetwork", "maxtext-tpu-network-subnet", overlap),
                      "subnets-no-overlap")
    assert msgs and any("10.104.0.0/24" in m for m in msgs)


@covers("binauthz-kms-key-id")
def test_the_attestor_key_id_is_the_one_gcloud_signs_with(tmp_path):
    """The attestor's public key id is the data source's id as returned; an attestation made by image.yml's step
    verifies against it (tests/test_attestation.py runs the step and the check)."""
    import test_attestation as t
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    boot = t.render(t.example_config(), t.BootstrapMocks(pem=public))
    (target, *_) = t.run_stacks_job("image.yml", tmp_path)["image"]
    # The step as test_attestation runs it: the stand-in gcloud in the bootstrap's signing context, the attestation it
    # wrote read back (sign_with_image_yml returns the process since the stand-in checks the beta track and project).
    result = t.sign_with_image_yml(target, tmp_path / "sign", private, t.signer_context(boot))
    assert result.returncode == 0, result.stdout + result.stderr
    attestation = t.attestation_of(result, tmp_path / "sign")
    attestors = {f"projects/{r.inputs['project']}/attestors/{r.inputs['name']}": r.inputs
                 for r in boot.of("gcp:binaryauthorization/attestor:Attestor")}
    assert attestation["publicKeyId"].startswith("//cloudkms.googleapis.com/v1/projects/")
    assert t.verifies(attestation, attestors[attestation["attestor"]])
