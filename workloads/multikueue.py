"""Across regions: Kueue's MultiKueue on a manager cluster dispatching jobs to regional TPU clusters.

Pure functions (no Pulumi), rendered for Kueue v0.19.2 (``kueue.x-k8s.io/v1beta2``; CRDs vendored in
``vendor/kueue/``). ``regions`` are single-region stack views in dispatch order (cheapest first).

On the manager (:func:`manager_objects`, :func:`manager_helm_values`):

- a ``MultiKueueCluster`` per region, named after its GKE cluster, reading a kubeconfig Secret
  (``spec.clusterSource.kubeConfig``; v1beta2 takes exactly one of kubeConfig and clusterProfileRef);
- one ``MultiKueueConfig`` listing them in dispatch order, and the ``kueue.x-k8s.io/multikueue``
  ``AdmissionCheck`` naming it;
- the ClusterQueue jobs queue in, whose quota is the workers' total (the sum of every region's ClusterQueue,
  flavor by flavor), with the MultiKueue check and never a ProvisioningRequest check (Kueue marks such a
  queue inactive, ``MultiKueueWithProvisioningRequest``: the DWS check stays on the workers' queues);
- the workers' LocalQueue and WorkloadPriorityClasses under the same names (Kueue's setup_multikueue.md:
  workers mirror the manager's namespaces and LocalQueues), and label-less flavors of the same names;
- Kueue configured with the incremental dispatcher, one region at a time in the config's order.

Access from the manager to each worker, without a key (:func:`manager_access_objects`,
:func:`worker_objects`, :func:`iam_grants`): a CronJob on the manager runs as a Google service account
(workload identity) and mints a one-hour token for a ServiceAccount on each worker (TokenRequest), which it
writes into the kubeconfig Secret Kueue reads (``workloads/multikueue_token.py``; the stack creates the Secret
empty and the job may only patch it, :func:`token_secrets`). The worker grants that
ServiceAccount exactly what Kueue's own example grants for the two frameworks the project dispatches, and the
Google identity only ``create`` on that one ServiceAccount's token. GKE fleet ClusterProfiles need Kueue's
alpha ``MultiKueueClusterProfile`` gate and a credentials plugin image that has no official release: see
the README ("Across regions: MultiKueue").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from stackspec import kube, limits, names
from stackspec.model import WORKLOAD_PRIORITIES
from stackspec.rules import kueue as kueue_rules
from stackspec.spec import StackSpec
from workloads import kueue

# The controller and Kueue's ClusterQueue rules live in stackspec/rules/kueue.py (the policies read them too).
MULTIKUEUE_CONTROLLER = kueue_rules.MULTIKUEUE_CONTROLLER
cluster_queue_rules = kueue_rules.cluster_queue_rules
INCREMENTAL_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# One region per 5-minute round, in MultiKueueConfig order (MultiKueueIncrementalDispatcherRespectConfigOrder
# and MultiKueueIncrementalDispatcherConfig are Beta and on in 0.19: concepts/multikueue.md "Incremental").
DISPATCH_STEP = 1
MAX_CLUSTERS = 20  # MultiKueueConfig spec.clusters: 1..20, unique (CRD validation)
# Six dispatch rounds (incrementalDispatcherRoundTimeout, 5 minutes: incrementaldispatcher.go:50) at least.
MIN_PODS_READY_SECONDS = 1800
KUBECONFIG_KEY = "kubeconfig"  # kueue.MultiKueueConfigSecretKey

# The worker side's identity for the manager is a ServiceAccount in kueue-system (names.MULTIKUEUE_WORKER_SA),
# whose tokens the manager's CronJob (its KSA names.MULTIKUEUE_MANAGER_KSA) requests.
TOKEN_SECONDS = names.MULTIKUEUE_TOKEN_SECONDS
TOKEN_SCHEDULE = f"*/{names.MULTIKUEUE_TOKEN_PERIOD_MINUTES} * * * *"  # three chances to refresh before a token expires
TOKEN_SCRIPT = Path(__file__).with_name("multikueue_token.py")
# An image with python3 and nothing to configure (Google's Cloud SDK, Debian slim), pinned by digest to a
# versioned tag (versioned tags stay published; `stable-slim` is not a documented tag). The digest is the one two
# independent public Dockerfiles pin for `google-cloud-cli:562.0.0-slim` (found by content search; no registry
# was reachable to re-check it: `gcloud container images describe <this>` before a first deploy, see
# docs/multikueue.md). The pod names the digest alone, the reference Binary Authorization's allow-list pattern
# matches (infra/cluster_security.py image_pattern), beside Kueue's (SYSTEM_IMAGES).
TOKEN_IMAGE_TAG = "gcr.io/google.com/cloudsdktool/google-cloud-cli:562.0.0-slim"
TOKEN_IMAGE = ("gcr.io/google.com/cloudsdktool/google-cloud-cli"
               "@sha256:0da2de42ae51cd6092b5caf7c96d25003659fd15548760eb4c50c2623e7bf9c2")
SYSTEM_IMAGES = (kueue.IMAGE, TOKEN_IMAGE)  # the stack-wide policy's patterns: each at its tag

# Least privilege on a worker. The rules are Kueue's own e2e setup's (test/util/multikueue.go at v0.19.2,
# MultiKueueRulesForManager: Workloads, their status, the queues, and frameworkRules for the frameworks the
# manager enables, here ray.io/rayjob and ray.io/raycluster; vendored in vendor/kueue-multikueue/), split
# by scope instead of one ClusterRole:
# - WORKER_READ_RULES, cluster-wide (ClusterRole): MultiKueue's remote watches and its garbage collector list
#   every namespace (multikueuecluster.go:421 establishWatch and :693 List carry no namespace), which a
#   namespaced Role cannot grant;
# - WORKER_WRITE_RULES, in the job namespace only (Role + RoleBinding there): MultiKueue creates, patches and
#   deletes the remote Workload and RayJob/RayCluster in the manager object's own namespace (workload.go:819,945
#   Create of the clone; ray_multikueue_adapter.go:220 Create, :257,:274 Patch, :298 Delete). So the token can
#   create no RayCluster (hence no pod) in kube-system, default or any other namespace.
WORKER_READ_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [kube.KUEUE_GROUP], "resources": ["workloads", "clusterqueues", "localqueues"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["ray.io"], "resources": ["rayjobs", "rayclusters"], "verbs": ["get", "list", "watch"]},
)
WORKER_WRITE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [kube.KUEUE_GROUP], "resources": ["workloads"], "verbs": ["create", "update", "patch", "delete"]},
    {"apiGroups": [kube.KUEUE_GROUP], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["ray.io"], "resources": ["rayjobs", "rayclusters"],
     "verbs": ["create", "update", "patch", "delete"]},
    {"apiGroups": ["ray.io"], "resources": ["rayjobs/status", "rayclusters/status"], "verbs": ["get"]},
)
# What the manager's Google identity needs on a worker's project to reach its API server: authenticate
# (container.clusters.get) and pass the DNS-based endpoint (container.clusters.connect); nothing inside the
# cluster, which is RBAC's (worker_objects). https://cloud.google.com/kubernetes-engine/docs/how-to/iam,
# https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint).
WORKER_PROJECT_ROLE = "roles/container.clusterViewer"


@dataclass(frozen=True)
class Manager:
    """The manager cluster: small, without TPUs; it holds the queues and dispatches."""

    name: str  # its GKE cluster name
    project: str
    region: str
    namespace: str  # the workload namespace (the regions' storage.namespace: LocalQueues mirror it)
    stack: str
    # Autopilot (the default) or Standard: on Autopilot workload identity is always on and GKE Warden refuses a
    # nodeSelector outside its allow-list (token_job's pods select no node there).
    autopilot: bool = True

    @property
    def google_service_account_id(self) -> str:
        """The Google service account the token CronJob runs as (the bootstrap creates it, <= 30 characters)."""
        return names.multikueue_account_id(self.name)

    @property
    def google_service_account(self) -> str:
        return names.multikueue_account_email(self.name, self.project)


def manager_of(spec: StackSpec) -> Manager:
    """A multi-region stack's manager (``tpu-multislice:manager``) as MultiKueue's functions read it."""
    if spec.manager is None:
        raise ValueError(f"stack {spec.stack} has no tpu-multislice:manager")
    return Manager(name=spec.manager.name, project=spec.project, region=spec.manager.region or spec.region,
                   namespace=spec.storage.namespace, stack=spec.stack, autopilot=spec.manager.autopilot)


@dataclass(frozen=True)
class IamGrant:
    """A project-level role for a member (the bootstrap grants it: bootstrap/components/stack_project.py
    StackProject)."""

    project: str
    role: str
    member: str


def _meta(stack: str, name: str, component: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {
        kube.PART_OF_LABEL: kube.PART_OF_VALUE, kube.COMPONENT_LABEL: component,
        kube.MANAGED_BY_LABEL: "pulumi", kube.STACK_LABEL: stack}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _kueue(kind: str, meta: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": kueue.KUEUE_API, "kind": kind, "metadata": meta, **body}


def _rbac(kind: str, meta: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta, **body}


# Every name MultiKueue's objects carry is derived in stackspec/names.py (multikueue_*, KUEUE_METRICS_*): slicectl,
# the policies and the tests read them there.


# --------------------------------------------------------------------------- the regions agree


def problems(manager: Manager, regions: Sequence[StackSpec]) -> list[str]:
    """What MultiKueue needs the regions to agree on, one sentence each (empty: fine)."""
    out = []
    if not 1 <= len(regions) <= MAX_CLUSTERS:
        out.append(f"MultiKueue dispatches to 1 to {MAX_CLUSTERS} worker clusters; the stack has {len(regions)}")
    clusters = [r.cluster.name for r in regions]
    if len(set(clusters)) != len(clusters):
        out.append(f"worker cluster names must be unique (MultiKueueCluster names): {clusters}")
    if manager.name in clusters:
        out.append(f"the manager {manager.name} cannot also be a worker (Kueue concepts/multikueue.md)")
    for what, get in (("storage.namespace", lambda r: r.storage.namespace),
                      ("ray.clusterName (the LocalQueue and ClusterQueue names)", lambda r: r.ray.cluster_name),
                      ("ray.kuberayVersion", lambda r: r.ray.kuberay_version)):
        values = {r.cluster.name: get(r) for r in regions}
        if len(set(values.values())) > 1:
            out.append(f"every region must have the same {what}: {values}")
    if regions and manager.namespace != regions[0].storage.namespace:
        out.append(f"the manager's namespace {manager.namespace} must be the regions' storage.namespace "
                   f"{regions[0].storage.namespace} (workers mirror its LocalQueue)")
    return out


def _check(manager: Manager, regions: Sequence[StackSpec]) -> None:
    if found := problems(manager, regions):
        raise ValueError("; ".join(found))


# --------------------------------------------------------------------------- quota


def total_quota(regions: Sequence[StackSpec]) -> dict[tuple[int, str], dict[str, dict[str, str]]]:
    """Every region's ClusterQueue quota summed: {(group index, flavor): {resource: quantity}}.

    The resource groups are the workers' (CPU and memory on the pod flavor; TPU, and DRANET NICs where a
    region has them, on each slice shape's flavor); a flavor a region lacks counts 0 there.
    """
    sums: dict[tuple[int, str], dict[str, Any]] = {}
    for r in regions:
        for gi, group in enumerate(kueue.cluster_queue(r)["spec"]["resourceGroups"]):
            for f in group["flavors"]:
                slot = sums.setdefault((gi, f["name"]), {})
                for res in f["resources"]:
                    slot[res["name"]] = slot.get(res["name"], 0) + limits.quantity(res["nominalQuota"])
    out: dict[tuple[int, str], dict[str, str]] = {}
    for key, resources in sums.items():
        out[key] = {name: (kueue._cpu(v) if name == "cpu" else kueue._memory(v) if name == "memory" else str(int(v)))
                    for name, v in resources.items()}
    return out


def manager_cluster_queue(manager: Manager, regions: Sequence[StackSpec]) -> dict[str, Any]:
    first = regions[0]
    quota = total_quota(regions)
    groups = []
    for gi in sorted({gi for gi, _ in quota}):
        flavors = [name for g, name in quota if g == gi]
        covered = list(dict.fromkeys(res for name in flavors for res in quota[(gi, name)]))
        groups.append({"coveredResources": covered, "flavors": [
            {"name": name, "resources": [{"name": res, "nominalQuota": quota[(gi, name)].get(res, "0")}
                                         for res in covered]} for name in flavors]})
    return _kueue("ClusterQueue", _meta(manager.stack, names.cluster_queue(first.ray.cluster_name), "multikueue"),
                  spec={
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": manager.namespace}},
                      "queueingStrategy": kueue.QUEUEING_STRATEGY,
                      "preemption": dict(kueue.PREEMPTION),
                      "resourceGroups": groups,
                      # One MultiKueue check, on the whole queue (Kueue refuses it per flavor).
                      "admissionChecksStrategy": {"admissionChecks": [{"name": names.multikueue_check(manager.name)}]},
                  })


# --------------------------------------------------------------------------- the manager's objects


def manager_objects(manager: Manager, regions: Sequence[StackSpec]) -> list[dict[str, Any]]:
    """Every Kueue object on the manager, in apply order (what others refer to first)."""
    _check(manager, regions)
    first = regions[0]
    flavor_names = list(dict.fromkeys(name for _, name in total_quota(regions)))
    flavors = [_kueue("ResourceFlavor", _meta(manager.stack, name, "multikueue"), spec={})
               for name in flavor_names]
    priorities = [_kueue("WorkloadPriorityClass", _meta(manager.stack, name, "multikueue"), value=value,
                         description=f"tpu-multislice jobs with priority: {name}")
                  for name, value in WORKLOAD_PRIORITIES.items()]
    clusters = [_kueue("MultiKueueCluster", _meta(manager.stack, names.multikueue_cluster(r.cluster.name),
                                                  "multikueue"), spec={
        "clusterSource": {"kubeConfig": {"location": names.multikueue_kubeconfig_secret(r.cluster.name),
                                         "locationType": "Secret"}}})
        for r in regions]
    check_name = names.multikueue_check(manager.name)
    config = _kueue("MultiKueueConfig", _meta(manager.stack, check_name, "multikueue"), spec={
        "clusters": [names.multikueue_cluster(r.cluster.name) for r in regions]})
    check = _kueue("AdmissionCheck", _meta(manager.stack, check_name, "multikueue"), spec={
        "controllerName": MULTIKUEUE_CONTROLLER,
        "parameters": {"apiGroup": kube.KUEUE_GROUP, "kind": "MultiKueueConfig", "name": check_name}})
    local_queue = _kueue("LocalQueue", _meta(manager.stack, names.local_queue(first.ray.cluster_name), "multikueue",
                                             manager.namespace),
                         spec={"clusterQueue": names.cluster_queue(first.ray.cluster_name)})
    return [*flavors, *priorities, *clusters, config, check, manager_cluster_queue(manager, regions), local_queue]


def manager_config(manager: Manager, regions: Sequence[StackSpec]) -> dict[str, Any]:
    """The workers' Kueue configuration (same integrations, waitForPodsReady, DRA mapping) plus MultiKueue."""
    _check(manager, regions)
    config = kueue.manager_config(next((r for r in regions if r.dranet), regions[0]))
    config["multiKueue"] = {
        "dispatcherName": INCREMENTAL_DISPATCHER,
        "incrementalDispatcherConfig": {"stepSize": DISPATCH_STEP},
    }
    config["waitForPodsReady"] = {**config["waitForPodsReady"], "timeout": f"{manager_pods_ready_seconds(regions)}s"}
    return config


def manager_pods_ready_seconds(regions: Sequence[StackSpec]) -> int:
    """The manager's waitForPodsReady timeout: half the shortest queued job's activeDeadlineSeconds (30 minutes at
    least). A copy admitted on a worker whose pods never get ready (admission there is quota only) is then evicted
    on the manager, its copies removed (multikueue/workload.go:380-393) and the job dispatched again with a fresh
    deadline (KubeRay starts a RayJob's clock when it initializes it: rayjob_controller.go v1.5.1 l.826-857), instead
    of failing at its deadline in the region that admitted it. Dispatched again from the head of the MultiKueueConfig,
    not the next region: eviction clears the nominations (pkg/workload/evict/evict.go:205-217) and the incremental
    dispatcher starts over (workloaddispatcher/incrementaldispatcher.go:169-192), unboundedly (no backoffLimitCount;
    core/workload_controller.go:1283-1285); docs/multikueue.md says what that means for a stuck region. The manager's
    clock starts when a worker admits
    (its MultiKueue check Ready: core/workload_controller.go:1657-1682) and stops at its RayJob's PodsReady, read
    from the status MultiKueue mirrors (rayjob/rayjob_controller.go:229-231, ray_multikueue_adapter.go:196-200).
    The workers keep their own 24 h (slow fallback capacity, workloads/kueue.py). docs/multikueue.md
    "waitForPodsReady"."""
    deadlines = [j.active_deadline_seconds for r in regions for j in r.jobs if j.region is None]
    return max(MIN_PODS_READY_SECONDS, min(deadlines, default=2 * MIN_PODS_READY_SECONDS) // 2)


def manager_helm_values(manager: Manager, regions: Sequence[StackSpec]) -> dict[str, Any]:
    """The chart's values on the manager. The kubeconfig path needs no feature gate: MultiKueue and the
    incremental dispatcher's options are Beta and on in 0.19 (pkg/features/kube_features.go)."""
    values = kueue.helm_values(regions[0])
    values["managerConfig"] = {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(manager, regions),
                                                                             sort_keys=False)}
    return values


# --------------------------------------------------------------------------- access without a key


def worker_objects(region: StackSpec, manager: Manager) -> list[dict[str, Any]]:
    """On a worker: the ServiceAccount the manager acts as, its least-privilege roles (read cluster-wide, write in
    the job namespace only), and the one permission the manager's Google identity holds (a token for that
    ServiceAccount)."""
    ns, stack, sa = kueue.NAMESPACE, region.stack, names.MULTIKUEUE_WORKER_SA
    role, token_role = names.multikueue_worker_role(manager.name), names.multikueue_token_role(manager.name)
    reader = f"{role}-read"
    subject = [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(stack, sa, "multikueue", ns),
         "automountServiceAccountToken": False},
        _rbac("ClusterRole", _meta(stack, reader, "multikueue"), rules=[dict(r) for r in WORKER_READ_RULES]),
        _rbac("ClusterRoleBinding", _meta(stack, reader, "multikueue"),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
              subjects=subject),
        _rbac("Role", _meta(stack, role, "multikueue", region.storage.namespace),
              rules=[dict(r) for r in WORKER_WRITE_RULES]),
        _rbac("RoleBinding", _meta(stack, role, "multikueue", region.storage.namespace),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}, subjects=subject),
        _rbac("Role", _meta(stack, token_role, "multikueue", ns), rules=[
            {"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": [sa],
             "verbs": ["create"]}]),
        # GKE names a Google service account's requests after its email: RBAC's User subject
        # (https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control, "Define subjects").
        _rbac("RoleBinding", _meta(stack, token_role, "multikueue", ns),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": token_role},
              subjects=[{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                         "name": manager.google_service_account}]),
    ]


def iam_grants(manager: Manager, regions: Sequence[StackSpec]) -> list[IamGrant]:
    """Project roles the manager's Google identity needs: the cluster viewer role on each worker project. The
    bootstrap creates the account and grants these (no deploy identity changes a project's IAM policy); the
    program binds workload identity for the CronJob's KSA on the account, once the manager's pool exists."""
    return [IamGrant(p, WORKER_PROJECT_ROLE, f"serviceAccount:{manager.google_service_account}")
            for p in dict.fromkeys(r.project for r in regions)]


def workload_identity_member(manager: Manager) -> str:
    """The member bound with roles/iam.workloadIdentityUser on the Google service account."""
    return f"serviceAccount:{manager.project}.svc.id.goog[{kueue.NAMESPACE}/{names.MULTIKUEUE_MANAGER_KSA}]"


def token_targets(manager: Manager, regions: Sequence[StackSpec], endpoints: Sequence[str],
                  metrics: bool = True) -> dict[str, Any]:
    """What the CronJob does each run: a kubeconfig per worker, the metrics token of its own cluster.

    ``endpoints``: each worker's API server URL, in region order (the cluster's DNS-based endpoint,
    ``https://gke-....<region>.gke.goog``, served with a publicly trusted certificate: no CA inline).
    """
    if len(endpoints) != len(regions):
        raise ValueError(f"{len(regions)} regions, {len(endpoints)} endpoints")
    targets: list[dict[str, Any]] = [
        {"kind": "kubeconfig", "cluster": r.cluster.name, "server": e, "tokenNamespace": kueue.NAMESPACE,
         "serviceAccount": names.MULTIKUEUE_WORKER_SA, "secret": names.multikueue_kubeconfig_secret(r.cluster.name),
         "expirationSeconds": TOKEN_SECONDS}
        for r, e in zip(regions, endpoints, strict=True)]
    if metrics:
        targets.append(metrics_target())
    return {"namespace": kueue.NAMESPACE, "targets": targets}


def metrics_target() -> dict[str, Any]:
    return {"kind": "token", "tokenNamespace": kueue.NAMESPACE, "serviceAccount": names.KUEUE_METRICS_SA,
            "secret": names.KUEUE_METRICS_SECRET, "expirationSeconds": TOKEN_SECONDS}


def _secret_rules(secrets: list[str], service_accounts: list[str]) -> list[dict[str, Any]]:
    # patch on the named Secrets only (the script's merge patch of its one key). No create: RBAC cannot limit create
    # by name ("you cannot restrict create or deletecollection requests by their resource name",
    # https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources), so the stack makes the
    # Secrets (token_secrets) and the job only fills them.
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets, "verbs": ["patch"]},
    ]
    if service_accounts:
        rules.append({"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": service_accounts,
                      "verbs": ["create"]})
    return rules


def token_secrets(stack: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The Secrets the token job fills, created empty by the stack, as Kueue's setup creates each worker's kubeconfig
    Secret by name before its MultiKueueCluster reads it ("kubectl create secret generic worker1-secret -n
    kueue-system --from-file=kubeconfig=worker1.kubeconfig", kueue site/content/en/docs/tasks/manage/
    setup_multikueue.md). The stack never writes their data (ignore_changes, workloads/multikueue_component.py): the
    job's key is the only content; until its first run a MultiKueueCluster finds no kubeconfig key and stays
    inactive, as it did while the Secret was missing."""
    return [{"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": _meta(stack, t["secret"], "multikueue", config["namespace"])} for t in config["targets"]]


def token_job(stack: str, name: str, ksa: str, config: dict[str, Any], annotations: dict[str, str] | None = None,
              workload_identity: bool = False) -> list[dict[str, Any]]:
    """The CronJob that refreshes the tokens, its ServiceAccount, its Role, the script as a ConfigMap and the
    Secrets it fills (created empty here: the job may patch them, never create one)."""
    ns = kueue.NAMESPACE
    secrets = [t["secret"] for t in config["targets"]]
    local_sas = [t["serviceAccount"] for t in config["targets"] if t["kind"] == "token"]
    sa_meta = _meta(stack, ksa, "multikueue", ns)
    if annotations:
        sa_meta["annotations"] = dict(annotations)
    pod_spec: dict[str, Any] = {
        "serviceAccountName": ksa,
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": names.MULTIKUEUE_TOKEN_CONTAINER,
            "image": TOKEN_IMAGE,
            "command": ["python3", "/token/multikueue_token.py", "/token/targets.json"],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
            "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]}},
            "volumeMounts": [{"name": "token", "mountPath": "/token", "readOnly": True}],
        }],
        "volumes": [{"name": "token", "configMap": {"name": name}}],
    }
    if workload_identity:
        pod_spec["nodeSelector"] = dict(kube.METADATA_SERVER_SELECTOR)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa_meta},
        *token_secrets(stack, config),
        _rbac("Role", _meta(stack, name, "multikueue", ns), rules=_secret_rules(secrets, local_sas)),
        _rbac("RoleBinding", _meta(stack, name, "multikueue", ns),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
              subjects=[{"kind": "ServiceAccount", "name": ksa, "namespace": ns}]),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(stack, name, "multikueue", ns), "data": {
            "multikueue_token.py": TOKEN_SCRIPT.read_text(), "targets.json": json.dumps(config, indent=1)}},
        {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(stack, name, "multikueue", ns), "spec": {
            "schedule": TOKEN_SCHEDULE,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 300,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {"backoffLimit": 2, "activeDeadlineSeconds": 300, "ttlSecondsAfterFinished": 3600,
                                     "template": {"metadata": {"labels": {kube.COMPONENT_LABEL: "multikueue"}},
                                                  "spec": pod_spec}}},
        }},
    ]


def manager_access_objects(manager: Manager, regions: Sequence[StackSpec],
                           endpoints: Sequence[str]) -> list[dict[str, Any]]:
    """On the manager: the token CronJob (running as the Google service account through workload identity),
    and Kueue's own metrics scraping."""
    config = token_targets(manager, regions, endpoints)
    # Standard: the pod selects a node with GKE's metadata server (the system pool's GKE_METADATA). Autopilot:
    # no selector. "In Autopilot, Workload Identity Federation for GKE is always enabled"
    # (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity), and GKE Warden refuses
    # other keys: "[denied by autogke-node-affinity-selector-limitation] ... Autopilot allows node affinity
    # only on labels with keys: <["topology.kubernetes.io/region", "topology.kubernetes.io/zone", ...,
    # "cloud.google.com/gke-os-distribution", "kubernetes.io/os", "kubernetes.io/arch"]>"
    # (kubernetes-sigs/secrets-store-csi-driver#672, quoting the admission webhook's answer).
    job = token_job(manager.stack, names.MULTIKUEUE_MANAGER_KSA, names.MULTIKUEUE_MANAGER_KSA, config,
                    annotations={"iam.gke.io/gcp-service-account": manager.google_service_account},
                    workload_identity=not manager.autopilot)
    return [*job, *metrics_objects(manager.stack, manager.name, with_job=False)]


# --------------------------------------------------------------------------- scheduling goodput metrics

# Kueue serves /metrics on :8443 (HTTPS; the chart's manager container port "metrics", manager.yaml),
# behind authentication and authorization (cmd/kueue/main.go: SecureServing with
# filters.WithAuthenticationAndAuthorization): a bearer token whose identity may GET /metrics (the chart's
# <release>-metrics-reader ClusterRole). The certificate is Kueue's self-signed one.
METRICS_PORT = "metrics"
METRICS_READER_ROLE = f"{kueue.RELEASE}-metrics-reader"
# charts/kueue/templates/_helpers.tpl kueue.selectorLabels (release "kueue").
KUEUE_POD_LABELS = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": kueue.RELEASE,
                    "control-plane": "controller-manager"}
GMP_COLLECTOR = ("gmp-system", "collector")  # GMP's collector reads the Secrets a PodMonitoring names


def metrics_objects(stack: str, cluster: str, with_job: bool = True) -> list[dict[str, Any]]:
    """Kueue's metrics into Google Managed Prometheus: a PodMonitoring on the controller's HTTPS port with a
    one-hour bearer token of a metrics-reader ServiceAccount (minted by the token job) that only GMP's
    collector may read. ``with_job``: this cluster's own token job (the manager's job does it there)."""
    ns, sa, secret = kueue.NAMESPACE, names.KUEUE_METRICS_SA, names.KUEUE_METRICS_SECRET
    reader = f"{sa}-reader"
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(stack, sa, "kueue-metrics", ns),
         "automountServiceAccountToken": False},
        _rbac("ClusterRoleBinding", _meta(stack, reader, "kueue-metrics"),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER_ROLE},
              subjects=[{"kind": "ServiceAccount", "name": sa, "namespace": ns}]),
        _rbac("Role", _meta(stack, f"{secret}-reader", "kueue-metrics", ns), rules=[
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get"]}]),
        _rbac("RoleBinding", _meta(stack, f"{secret}-reader", "kueue-metrics", ns),
              roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{secret}-reader"},
              subjects=[{"kind": "ServiceAccount", "name": GMP_COLLECTOR[1], "namespace": GMP_COLLECTOR[0]}]),
        {"apiVersion": "monitoring.googleapis.com/v1", "kind": "PodMonitoring",
         "metadata": _meta(stack, names.KUEUE_METRICS_MONITORING, "kueue-metrics", ns), "spec": {
             "selector": {"matchLabels": dict(KUEUE_POD_LABELS)},
             "endpoints": [{"port": METRICS_PORT, "scheme": "https", "interval": "30s", "path": "/metrics",
                            "authorization": {"type": "Bearer", "credentials": {
                                "secret": {"name": secret, "key": "token"}}},
                            # Kueue's own self-signed serving certificate (no CA to pin from outside).
                            "tls": {"insecureSkipVerify": True}}],
         }},
    ]
    if with_job:
        name = names.KUEUE_METRICS_TOKEN_JOB
        docs += token_job(stack, name, name, {"namespace": ns, "targets": [metrics_target()]})
    return docs

