"""MultiKueue across regions: the manager's and workers' objects on real single-region stack views.

The regions are prod's spec loaded twice (us-east5, and asia-northeast1 with a queued flex-start fallback so its
own ClusterQueue carries the DWS check). Every Kueue object is validated against the v0.19.2 CRDs vendored in
``vendor/kueue/`` (with the MultiKueue CRDs' CEL rules), plus the ClusterQueue rules Kueue applies
in its cache; the token script runs for real against a local HTTP stand-in of the metadata server and two
API servers.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from conftest import with_fallbacks

from offline import engine
from stackspec import kube, limits, names
from stackspec import spec as stack_spec
from workloads import kueue
from workloads import multikueue as mk
from workloads import multikueue_token as tok

NS = stack_spec.PROJECT


def _region(cluster: str, region: str, zone: str, config: dict[str, str] | None = None) -> stack_spec.StackSpec:
    cfg = dict(config or engine.stack_config("prod"))
    c = json.loads(cfg[f"{NS}:cluster"])
    c["name"] = cluster
    cfg[f"{NS}:cluster"], cfg["gcp:region"], cfg["gcp:zone"] = json.dumps(c), region, zone
    return stack_spec.load("prod", cfg)


@pytest.fixture(scope="module")
def regions() -> list[stack_spec.StackSpec]:
    flex = with_fallbacks(engine.stack_config("prod"), [{"type": "flex-start", "queuedProvisioning": True}])
    return [_region("tpu-use5", "us-east5", "us-east5-b"),
            _region("tpu-apne1", "asia-northeast1", "asia-northeast1-b", flex)]


@pytest.fixture(scope="module")
def manager(regions) -> mk.Manager:
    return mk.Manager(name="tpu-manager", project="my-tpu-project", region="us-central1",
                      namespace=regions[0].storage.namespace, stack="multiregion")


ENDPOINTS = ["https://gke-aaaa.us-east5.gke.goog", "https://gke-bbbb.asia-northeast1.gke.goog"]


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


# --------------------------------------------------------------------------- schemas and Kueue's rules


def test_every_manager_object_validates_against_the_vendored_crds(manager, regions, kueue_validator):
    docs = mk.manager_objects(manager, regions)
    kinds = {d["kind"] for d in docs}
    assert kinds == {"ResourceFlavor", "WorkloadPriorityClass", "MultiKueueCluster", "MultiKueueConfig",
                     "AdmissionCheck", "ClusterQueue", "LocalQueue"}
    for d in docs:
        assert d["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert kueue_validator(d) == [], (d["kind"], d["metadata"]["name"])
    assert mk.cluster_queue_rules(docs) == []
    # The workers' own objects stay valid and keep their DWS check (never on the manager).
    for r in regions:
        assert mk.cluster_queue_rules(kueue.all_objects(r)) == []
    assert by_kind(kueue.all_objects(regions[1]), "ProvisioningRequestConfig")
    assert not [d for d in docs if d["kind"] == "AdmissionCheck"
                and d["spec"]["controllerName"] == kueue.PROVISIONING_CONTROLLER]


def test_the_schema_and_cel_checks_are_not_vacuous(manager, regions, kueue_validator):
    docs = mk.manager_objects(manager, regions)
    (cluster, _) = by_kind(docs, "MultiKueueCluster")[:1] * 2
    both = copy.deepcopy(cluster)
    both["spec"]["clusterSource"]["clusterProfileRef"] = {"name": "x"}
    assert any("exactly one" in e for e in kueue_validator(both))
    v1beta1_shape = copy.deepcopy(cluster)
    v1beta1_shape["spec"] = {"kubeConfig": cluster["spec"]["clusterSource"]["kubeConfig"]}
    assert kueue_validator(v1beta1_shape)
    (config,) = by_kind(docs, "MultiKueueConfig")
    dup = copy.deepcopy(config)
    dup["spec"]["clusters"].append(dup["spec"]["clusters"][0])
    assert any("must be unique" in e for e in kueue_validator(dup))
    many = copy.deepcopy(config)
    many["spec"]["clusters"] = [f"c{i}" for i in range(21)]
    assert kueue_validator(many)


def test_kueue_cluster_queue_rules_trip(manager, regions):
    docs = mk.manager_objects(manager, regions)
    dws = kueue.provisioning_objects(regions[1])
    cq = next(d for d in docs if d["kind"] == "ClusterQueue")

    def with_checks(*checks):
        out = copy.deepcopy(docs) + dws
        next(d for d in out if d["kind"] == "ClusterQueue")["spec"]["admissionChecksStrategy"] = {
            "admissionChecks": list(checks)}
        return out

    mk_check = {"name": names.multikueue_check(manager.name)}
    assert any("ProvisioningRequest" in m for m in mk.cluster_queue_rules(
        with_checks(mk_check, {"name": dws[1]["metadata"]["name"]})))
    assert any("per flavor" in m for m in mk.cluster_queue_rules(
        with_checks({**mk_check, "onFlavors": [cq["spec"]["resourceGroups"][1]["flavors"][0]["name"]]})))
    second = copy.deepcopy(by_kind(docs, "AdmissionCheck")[0])
    second["metadata"]["name"] = "another"
    assert any("more than one" in m for m in mk.cluster_queue_rules(with_checks(mk_check, {"name": "another"})
                                                                     + [second]))
    tpu_flavor = cq["spec"]["resourceGroups"][1]["flavors"][0]["name"]
    no_flavor = [d for d in docs if not (d["kind"] == "ResourceFlavor" and d["metadata"]["name"] == tpu_flavor)]
    assert any("ResourceFlavors not declared" in m for m in mk.cluster_queue_rules(no_flavor))


# --------------------------------------------------------------------------- the manager's queues


def test_dispatch_order_is_the_regions_order(manager, regions):
    docs = mk.manager_objects(manager, regions)
    clusters = by_kind(docs, "MultiKueueCluster")
    assert [c["metadata"]["name"] for c in clusters] == ["tpu-use5", "tpu-apne1"]
    for c in clusters:
        assert c["spec"]["clusterSource"] == {"kubeConfig": {
            "location": names.multikueue_kubeconfig_secret(c["metadata"]["name"]), "locationType": "Secret"}}
    (config,) = by_kind(docs, "MultiKueueConfig")
    assert config["spec"]["clusters"] == ["tpu-use5", "tpu-apne1"]
    (check,) = by_kind(docs, "AdmissionCheck")
    assert check["spec"] == {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config["metadata"]["name"]}}
    reversed_docs = mk.manager_objects(manager, regions[::-1])
    assert by_kind(reversed_docs, "MultiKueueConfig")[0]["spec"]["clusters"] == ["tpu-apne1", "tpu-use5"]


def test_manager_quota_is_the_workers_total(manager, regions):
    (cq,) = by_kind(mk.manager_objects(manager, regions), "ClusterQueue")
    worker = [kueue.cluster_queue(r) for r in regions]

    def quota(q):
        return {(f["name"], r["name"]): r["nominalQuota"] for g in q["spec"]["resourceGroups"]
                for f in g["flavors"] for r in f["resources"]}

    got = quota(cq)
    (group,) = regions[0].groups
    assert got[(names.resource_flavor(group.name), kube.TPU_RESOURCE)] == "64"  # 2 regions x 2 slices x 16 chips
    assert got[(names.pod_flavor(regions[0].ray.cluster_name), "cpu")] == "162"  # 81 per region
    for key, value in got.items():  # every flavor and resource: the regions' sum, as Kubernetes reads it
        assert limits.quantity(value) == sum(limits.quantity(quota(w).get(key, "0")) for w in worker), key
    # Names, namespace and policy are the workers': the LocalQueue a job names exists on both sides.
    assert cq["metadata"]["name"] == worker[0]["metadata"]["name"]
    assert cq["spec"]["namespaceSelector"] == worker[0]["spec"]["namespaceSelector"]
    assert cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": names.multikueue_check(manager.name)}]}
    (lq,) = by_kind(mk.manager_objects(manager, regions), "LocalQueue")
    assert lq["metadata"]["namespace"] == manager.namespace
    assert lq["metadata"]["name"] == kueue.local_queue(regions[0])["metadata"]["name"]
    assert {p["metadata"]["name"] for p in by_kind(mk.manager_objects(manager, regions), "WorkloadPriorityClass")} \
        == {p["metadata"]["name"] for p in kueue.priority_classes(regions[0])}


def test_regions_that_disagree_are_refused_with_a_sentence(manager, regions):
    cfg = engine.stack_config("prod")
    storage = json.loads(cfg[f"{NS}:storage"])
    storage["namespace"] = "other"
    cfg[f"{NS}:storage"] = json.dumps(storage)
    odd = _region("tpu-odd", "us-east1", "us-east1-d", cfg)
    found = mk.problems(manager, [regions[0], odd])
    assert any("same storage.namespace" in p for p in found), found
    assert any("twice" in p or "unique" in p for p in mk.problems(manager, [regions[0], regions[0]]))
    with pytest.raises(ValueError, match="cannot also be a worker"):
        mk.manager_objects(mk.Manager("tpu-use5", "p", "r", manager.namespace, "s"), regions)
    assert mk.problems(manager, []) and mk.problems(manager, regions) == []


def test_manager_helm_values(manager, regions):
    values = mk.manager_helm_values(manager, regions)
    assert values["controllerManager"] == kueue.helm_values(regions[0])["controllerManager"]
    config = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
    assert config["multiKueue"] == {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                                    "incrementalDispatcherConfig": {"stepSize": 1}}
    assert config["integrations"]["frameworks"] == ["ray.io/rayjob", "ray.io/raycluster"]
    # The same DRA mapping as the workers: the manager admits the same pods' quota first. waitForPodsReady: the
    # workers' settings, but a copy not ready within half a job's deadline is evicted and dispatched again (before
    # KubeRay's activeDeadlineSeconds fails it where it sits).
    worker = kueue.manager_config(regions[0])
    assert config["resources"] == worker["resources"]
    wfpr = config["waitForPodsReady"]
    assert {k: v for k, v in wfpr.items() if k != "timeout"} == {
        k: v for k, v in worker["waitForPodsReady"].items() if k != "timeout"}
    deadline = min(j.active_deadline_seconds for r in regions for j in r.jobs)
    assert wfpr["timeout"] == f"{deadline // 2}s" and deadline // 2 >= 5 * 60  # past a dispatch round (5 min)
    assert "featureGates" not in values.get("controllerManager", {})  # the kubeconfig path needs none


# --------------------------------------------------------------------------- access without a key


def test_worker_rbac_is_least_privilege(manager, regions):
    """Reads cluster-wide (MultiKueue's remote watches list every namespace), writes in the job namespace only:
    tests/test_dispatch.py evaluates the same bindings against Kueue's own e2e rules."""
    docs = mk.worker_objects(regions[0], manager)
    (role,) = by_kind(docs, "ClusterRole")
    granted = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"]
               for r in rule["resources"]}
    assert set(granted) == {("kueue.x-k8s.io", "workloads"), ("kueue.x-k8s.io", "clusterqueues"),
                            ("kueue.x-k8s.io", "localqueues"), ("ray.io", "rayjobs"), ("ray.io", "rayclusters")}
    assert set().union(*granted.values()) == {"get", "list", "watch"}  # nothing written cluster-wide
    (crb,) = by_kind(docs, "ClusterRoleBinding")
    assert role["metadata"]["name"] == crb["roleRef"]["name"] == f"{names.multikueue_worker_role(manager.name)}-read"
    assert crb["subjects"] == [
        {"kind": "ServiceAccount", "name": names.MULTIKUEUE_WORKER_SA, "namespace": kueue.NAMESPACE}]
    [writer] = [d for d in by_kind(docs, "Role") if d["metadata"]["name"] == names.multikueue_worker_role(manager.name)]
    assert writer["metadata"]["namespace"] == regions[0].storage.namespace
    [wrb] = [d for d in by_kind(docs, "RoleBinding") if d["roleRef"]["name"] == writer["metadata"]["name"]]
    assert wrb["metadata"]["namespace"] == writer["metadata"]["namespace"] and wrb["subjects"] == crb["subjects"]
    # The manager's Google identity may only mint that one ServiceAccount's tokens.
    [token_role] = [d for d in by_kind(docs, "Role") if d["metadata"]["namespace"] == kueue.NAMESPACE]
    assert token_role["rules"] == [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                                    "resourceNames": [names.MULTIKUEUE_WORKER_SA], "verbs": ["create"]}]
    [rb] = [d for d in by_kind(docs, "RoleBinding") if d["metadata"]["namespace"] == kueue.NAMESPACE]
    assert token_role["metadata"]["name"] == rb["roleRef"]["name"] == names.multikueue_token_role(manager.name)
    assert rb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                               "name": names.multikueue_account_email("tpu-manager", "my-tpu-project")}]
    assert not [d for d in docs if d["kind"] == "Secret"]  # no long-lived token anywhere


def test_iam_is_the_cluster_viewer_role_on_each_worker_project(manager, regions):
    grants = mk.iam_grants(manager, regions)
    assert grants == [mk.IamGrant("my-tpu-project", "roles/container.clusterViewer",
                                  f"serviceAccount:{manager.google_service_account}")]
    assert len(manager.google_service_account_id) <= 30
    assert mk.workload_identity_member(manager) == \
        f"serviceAccount:my-tpu-project.svc.id.goog[{kueue.NAMESPACE}/{names.MULTIKUEUE_MANAGER_KSA}]"


def test_manager_token_job(manager, regions, pod_monitoring_validator):
    docs = mk.manager_access_objects(manager, regions, ENDPOINTS)
    (job,) = by_kind(docs, "CronJob")
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    ksa = names.MULTIKUEUE_MANAGER_KSA
    # Autopilot manager (the default): no nodeSelector (Warden's allow-list has none of GKE's metadata-server
    # label); a Standard manager selects its system pool's metadata server.
    assert pod["serviceAccountName"] == ksa and "nodeSelector" not in pod and manager.autopilot
    standard = mk.manager_access_objects(dataclasses.replace(manager, autopilot=False), regions, ENDPOINTS)
    (std_job,) = by_kind(standard, "CronJob")
    assert std_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"] == kube.METADATA_SERVER_SELECTOR
    sa = next(d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == ksa)
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": manager.google_service_account}
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    config = json.loads(cm["data"]["targets.json"])
    assert [t["server"] for t in config["targets"] if t["kind"] == "kubeconfig"] == ENDPOINTS
    assert {t["expirationSeconds"] for t in config["targets"]} == {3600}
    assert cm["data"]["multikueue_token.py"] == mk.TOKEN_SCRIPT.read_text()
    role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == names.MULTIKUEUE_MANAGER_KSA)
    secret_rules = [r for r in role["rules"] if "secrets" in r["resources"]]
    wanted = [*map(names.multikueue_kubeconfig_secret, ["tpu-use5", "tpu-apne1"]), names.KUEUE_METRICS_SECRET]
    # Patch on the named Secrets, nothing else: no create (RBAC cannot name what create makes), no read.
    assert secret_rules == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": wanted, "verbs": ["patch"]}]
    assert not any(set(r["verbs"]) & {"get", "list", "watch", "update", "delete"} for r in role["rules"])
    assert not any("create" in r["verbs"] and "serviceaccounts/token" not in r["resources"] for r in role["rules"])
    # The stack creates those Secrets, empty, in kueue-system; each MultiKueueCluster reads one of them by name.
    secrets = [d for d in docs if d["kind"] == "Secret"]
    assert [d["metadata"]["name"] for d in secrets] == wanted
    assert all(d["metadata"]["namespace"] == kueue.NAMESPACE and "data" not in d and d["type"] == "Opaque"
               for d in secrets)
    clusters = by_kind(mk.manager_objects(manager, regions), "MultiKueueCluster")
    assert sorted(c["spec"]["clusterSource"]["kubeConfig"]["location"] for c in clusters) == sorted(wanted[:2])
    assert all(c["spec"]["clusterSource"]["kubeConfig"]["locationType"] == "Secret" for c in clusters)
    (pm,) = by_kind(docs, "PodMonitoring")
    assert pod_monitoring_validator(pm) == []
    assert mk.TOKEN_IMAGE in mk.SYSTEM_IMAGES


def test_worker_metrics_objects(regions, pod_monitoring_validator):
    docs = mk.metrics_objects(regions[0].stack, regions[0].cluster.name)
    (pm,) = by_kind(docs, "PodMonitoring")
    assert pod_monitoring_validator(pm) == []
    ep = pm["spec"]["endpoints"][0]
    assert ep["port"] == "metrics" and ep["scheme"] == "https"
    assert ep["authorization"]["credentials"]["secret"] == {"name": names.KUEUE_METRICS_SECRET, "key": "token"}
    (job,) = by_kind(docs, "CronJob")
    assert "nodeSelector" not in job["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # no Google identity
    crb = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert crb["roleRef"]["name"] == "kueue-metrics-reader"


# --------------------------------------------------------------------------- the token script, for real


class _Api(BaseHTTPRequestHandler):
    """The metadata server, a worker's API server and the manager's, in one (paths tell them apart)."""

    state: dict = {}

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, code: int, body: dict):
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self):
        if self.path == tok.METADATA_TOKEN_PATH and self.headers["Metadata-Flavor"] == "Google":
            return self._reply(200, {"access_token": "google-token", "expires_in": 3599})
        return self._reply(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers["Authorization"]
        self.state.setdefault("calls", []).append((self.path, auth))
        if self.path.endswith("/token"):
            if self.path.startswith("/forbidden"):
                return self._reply(403, {"message": "forbidden: cannot create serviceaccounts/token"})
            self.state.setdefault("expiry", []).append(body["spec"]["expirationSeconds"])
            return self._reply(201, {"status": {"token": f"minted-for-{auth}"}})
        # The job's Role has no create on Secrets (workloads/multikueue.py _secret_rules): RBAC would refuse it.
        self.state.setdefault("refused", []).append(self.path)
        return self._reply(403, {"message": "forbidden: cannot create resource \"secrets\""})

    def do_PATCH(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = self.path.rsplit("/", 1)[1]
        if name not in self.state.get("secrets", {}):
            return self._reply(404, {})
        self.state["secrets"][name].update(body["data"])
        return self._reply(200, {})


@pytest.fixture
def api():
    _Api.state = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", _Api.state
    server.shutdown()


def _kueue_accepts(kubeconfig: str) -> list[str]:
    """Kueue 0.19.2's validateKubeconfig/validateRestConfig (multikueuecluster.go), rule by rule."""
    cfg = yaml.safe_load(kubeconfig)
    out = []
    for u in cfg["users"]:
        out += [f"{k} not allowed" for k in ("tokenFile", "exec", "auth-provider", "username", "password")
                if k in u["user"]]
    for c in cfg["clusters"]:
        out += [f"{k} not allowed" for k in ("insecure-skip-tls-verify", "certificate-authority") if k in c["cluster"]]
        if not c["cluster"].get("server"):
            out.append("server required")
    return out


def _precreated(config: dict, state: dict) -> None:
    """The Secrets as the stack creates them (token_secrets): named, empty."""
    state["secrets"] = {d["metadata"]["name"]: dict(d.get("data") or {}) for d in mk.token_secrets("s", config)}


def test_the_token_script_writes_kubeconfigs_kueue_accepts(manager, regions, api):
    base, state = api
    config = mk.token_targets(manager, regions, [base, base])
    _precreated(config, state)
    lines = tok.refresh(config, local_api=base, local_bearer="manager-sa-token", metadata_base=base)
    use5, apne1 = map(names.multikueue_kubeconfig_secret, ["tpu-use5", "tpu-apne1"])
    assert lines == [f"{use5}: updated (kubeconfig, 3600s)", f"{apne1}: updated (kubeconfig, 3600s)",
                     f"{names.KUEUE_METRICS_SECRET}: updated (token, 3600s)"]
    assert "refused" not in state  # it never tried to create a Secret
    kc = base64.b64decode(state["secrets"][use5][mk.KUBECONFIG_KEY]).decode()
    assert _kueue_accepts(kc) == []
    parsed = yaml.safe_load(kc)
    # The worker's token was asked for with the Google identity; the metrics token with the pod's own.
    assert parsed["users"][0]["user"]["token"] == "minted-for-Bearer google-token"
    assert base64.b64decode(state["secrets"][names.KUEUE_METRICS_SECRET]["token"]).decode() == \
        "minted-for-Bearer manager-sa-token"
    assert state["expiry"] == [3600, 3600, 3600]
    # The next run replaces the key in place.
    again = tok.refresh(config, local_api=base, local_bearer="manager-sa-token", metadata_base=base)
    assert all("updated" in line for line in again)


def test_the_token_script_refuses_a_secret_the_stack_did_not_create(manager, regions, api):
    """A Secret missing (deleted by hand, or the stack not applied): an error naming it, no attempt to create one
    (the Role would refuse it; no other name can appear)."""
    base, state = api
    config = mk.token_targets(manager, regions, [base, base])
    _precreated(config, state)
    use5 = names.multikueue_kubeconfig_secret("tpu-use5")
    del state["secrets"][use5]
    with pytest.raises(tok.TokenError, match=f"Secret {kueue.NAMESPACE}/{use5} does not exist: the stack creates it"):
        tok.refresh(config, local_api=base, local_bearer="t", metadata_base=base)
    assert "refused" not in state and use5 not in state["secrets"]


def test_the_token_script_reports_each_failure_and_keeps_going(manager, regions, api):
    base, state = api
    config = mk.token_targets(manager, regions, [base + "/forbidden", base])
    _precreated(config, state)
    with pytest.raises(tok.TokenError) as e:
        tok.refresh(config, local_api=base, local_bearer="t", metadata_base=base)
    use5, apne1 = map(names.multikueue_kubeconfig_secret, ["tpu-use5", "tpu-apne1"])
    assert f"{use5}: TokenRequest {kueue.NAMESPACE}/{names.MULTIKUEUE_WORKER_SA} at" in str(e.value)
    assert "HTTP 403 forbidden" in str(e.value)
    assert {k for k, v in state["secrets"].items() if v} == {apne1, names.KUEUE_METRICS_SECRET}  # the others written
    assert state["secrets"][use5] == {}
    with pytest.raises(tok.TokenError, match="metadata server: HTTP 404"):
        tok.google_access_token(base + "/nowhere")


# --------------------------------------------------------------------------- the components, under the engine


@pytest.fixture(scope="module")
def components():
    from pathlib import Path
    return engine.render("prod", program=Path(__file__).with_name("programs") / "multikueue.py")


def test_components_declare_every_document(components, manager, regions, kueue_validator):
    types = {r.type for r in components.resources}
    assert {"tpu-multislice:workloads:MultiKueueManager", "tpu-multislice:workloads:MultiKueueWorker"} <= types
    got = {(m["kind"], m["metadata"]["name"]) for m in components.manifests}
    want = {(d["kind"], d["metadata"]["name"]) for d in [
        *mk.manager_objects(manager, regions), *mk.manager_access_objects(manager, regions, ENDPOINTS),
        *(d for r in regions for d in [*mk.worker_objects(r, manager), *mk.metrics_objects(r.stack, r.cluster.name)])]}
    assert want <= got, want - got
    for m in components.manifests:
        if m["apiVersion"].startswith("kueue.x-k8s.io/"):
            assert kueue_validator(m) == [], m["metadata"]["name"]
    # The endpoints reach the token job's ConfigMap once the clusters' outputs resolve.
    cm = next(m for m in components.manifests
              if m["kind"] == "ConfigMap" and m["metadata"]["name"] == names.MULTIKUEUE_MANAGER_KSA)
    servers = [t["server"] for t in json.loads(cm["data"]["targets.json"])["targets"] if t["kind"] == "kubeconfig"]
    assert servers == ["https://gke-tpu-use5.us-east5.gke.goog", "https://gke-tpu-apne1.asia-northeast1.gke.goog"]
    # IAM: only the workload identity binding, on the account the bootstrap makes (named by stackspec.names); the
    # account and its viewer role on the workers' project are the bootstrap's (no deploy identity could make them).
    (wi,) = components.by_type("gcp:serviceaccount/iAMMember:IAMMember")
    assert wi.inputs["member"] == mk.workload_identity_member(manager)
    assert wi.inputs["serviceAccountId"] == (
        f"projects/my-tpu-project/serviceAccounts/{names.multikueue_account_email('tpu-manager', 'my-tpu-project')}")
    assert not components.by_type("gcp:serviceaccount/account:Account")
    assert not components.by_type("gcp:projects/iAMMember:IAMMember")
    (config,) = [c for c in components.by_type("kubernetes:core/v1:ConfigMap")
                 if c.inputs["metadata"]["name"] == "kueue-manager-config"]
    assert "multiKueue" in config.inputs["data"]["controller_manager_config.yaml"]


def test_components_create_the_token_secrets_and_never_write_their_data(components, manager, regions):
    """The Secrets the token job patches are Pulumi's (created empty, before the job can run), with their data
    ignored: the job's token is never diffed against nor overwritten by the next `up`."""
    secrets = components.by_type("kubernetes:core/v1:Secret")
    want = {d["metadata"]["name"] for d in mk.manager_access_objects(manager, regions, ENDPOINTS)
            if d["kind"] == "Secret"}
    want |= {names.KUEUE_METRICS_SECRET}  # each worker's own metrics token job fills its own
    want |= {kueue.WEBHOOK_SECRET}  # Kueue's cert rotator fills its own (workloads/kueue_install.py)
    assert {s.inputs["metadata"]["name"] for s in secrets} == want
    for s in secrets:
        assert s.inputs["metadata"]["namespace"] == kueue.NAMESPACE and "data" not in s.inputs
        assert set(s.ignore_changes) == {"data", "stringData"}, s.name
    # Every MultiKueueCluster reads a Secret the stack creates in the namespace Kueue's controller runs in.
    locations = {m["spec"]["clusterSource"]["kubeConfig"]["location"] for m in components.manifests
                 if m["kind"] == "MultiKueueCluster"}
    assert locations and locations <= {s.inputs["metadata"]["name"] for s in secrets}
