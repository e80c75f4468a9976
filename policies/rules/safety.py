"""Safety rules: the checkpoint bucket, IAM, keys, exposure, images, privilege, locations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stackspec import kube
from stackspec.model import RAY_AUTH_MIN
from stackspec.zones import region_of

from .common import (
    BUCKET,
    CLUSTER,
    NODE_POOL,
    RAY_CLUSTER,
    RAY_JOB,
    SERVICE,
    SUBNETWORK,
    Context,
    Res,
    cluster_specs,
    containers,
    get,
    grants,
    items,
    k8s_name,
    pod_specs,
    tpu_request,
)

# --------------------------------------------------------------------------- bucket


def _bucket(props: Mapping[str, Any]) -> str:
    return f"bucket {get(props, 'name', '?')}"


def bucket_uniform_access(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Uniform bucket-level access: IAM only, no per-object ACLs."""
    if type_ != BUCKET or get(props, "uniformBucketLevelAccess") is True:
        return []
    return [f"{_bucket(props)}: uniformBucketLevelAccess is not true (object ACLs can leak "
            "checkpoints)"]


def bucket_public_access_prevention(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Public access prevention is enforced on the bucket."""
    if type_ != BUCKET or get(props, "publicAccessPrevention") == "enforced":
        return []
    return [f"{_bucket(props)}: publicAccessPrevention is "
            f"{get(props, 'publicAccessPrevention', 'unset (inherited)')}, must be enforced"]


def bucket_protected_in_prod(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """In prod the bucket cannot be deleted with its checkpoints.

    Pulumi's ``protect`` option is not part of a resource's props, so the rule checks
    what is: ``forceDestroy`` false and ``deletionPolicy`` PREVENT.
    """
    if type_ != BUCKET or not ctx.prod:
        return []
    out = []
    if get(props, "forceDestroy") is True:
        out.append(f"{_bucket(props)}: forceDestroy is true in {ctx.environment}: a destroy "
                   "deletes every checkpoint")
    if get(props, "deletionPolicy") != "PREVENT":
        out.append(f"{_bucket(props)}: deletionPolicy is {get(props, 'deletionPolicy')}, must be "
                   f"PREVENT in {ctx.environment}")
    return out


# --------------------------------------------------------------------------- IAM and keys

_PROJECT_IAM = {
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/iAMBinding:IAMBinding",
}
_PUBLIC_MEMBERS = {"allUsers", "allAuthenticatedUsers"}
_BUCKET_IAM = {
    "gcp:storage/bucketIAMMember:BucketIAMMember",
    "gcp:storage/bucketIAMBinding:BucketIAMBinding",
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
}


def iam_bucket_scoped(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Storage roles are granted on the bucket, never project-wide, and never to the public."""
    role = str(get(props, "role", ""))
    if type_ in _PROJECT_IAM:
        broad = ctx.config.get("projectWideForbiddenRoles", DEFAULT_FORBIDDEN_ROLES)
        if role.startswith("roles/storage.") or role in broad:
            return [f"project IAM grants {role} to {get(props, 'member', get(props, 'members'))} "
                    f"on project {get(props, 'project', '?')}: every bucket of the project, not "
                    "just the checkpoint bucket"]
    if type_ == "gcp:projects/iAMPolicy:IAMPolicy":
        data = str(get(props, "policyData", ""))
        if re.search(r"roles/storage\.|roles/(owner|editor)\"", data):
            return ["project IAM policy grants storage (or owner/editor) roles project-wide"]
    if type_ in _BUCKET_IAM:
        allowed = ctx.config.get("bucketAllowedRoles", DEFAULT_BUCKET_ROLES)
        out = []
        for role, member in grants(props):
            if member in _PUBLIC_MEMBERS:
                out.append(f"bucket {get(props, 'bucket', '?')} IAM grants {role} to {member}: public")
            elif role and role not in allowed:
                out.append(f"bucket {get(props, 'bucket', '?')} IAM grants {role} to {member}: more than reading "
                           f"and writing checkpoints needs; allowed: {', '.join(allowed)}")
        return out
    return []


DEFAULT_FORBIDDEN_ROLES = ["roles/owner", "roles/editor"]
# Object access only: training reads and writes checkpoints, it never administers the bucket.
DEFAULT_BUCKET_ROLES = ["roles/storage.objectUser", "roles/storage.objectViewer",
                        "roles/storage.objectCreator"]

_KEY_TYPES = {
    "gcp:serviceaccount/key:Key": "service-account key",
    "gcp:storage/hmacKey:HmacKey": "HMAC key",
}


def no_service_account_keys(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """No long-lived keys: pods use workload identity, CI uses workload identity federation."""
    if type_ not in _KEY_TYPES:
        return []
    owner = get(props, "serviceAccountId", get(props, "serviceAccountEmail", "?"))
    return [f"{_KEY_TYPES[type_]} for {owner}: a long-lived credential that can leak"]


# --------------------------------------------------------------------------- exposure

_RAY_PORTS = {6379, 8265, 10001}
_PUBLIC_SERVICE_TYPES = {"LoadBalancer", "NodePort"}
_INTERNAL_LB = "networking.gke.io/load-balancer-type"


def _service_exposure(svc: Mapping[str, Any], where: str) -> list[str]:
    out = []
    kind = get(svc, "spec.type", "ClusterIP")
    annotations = get(svc, "metadata.annotations", {})
    internal = isinstance(annotations, Mapping) and \
        str(annotations.get(_INTERNAL_LB, "")).lower() == "internal"
    if kind in _PUBLIC_SERVICE_TYPES and not (kind == "LoadBalancer" and internal):
        out.append(f"{where}: service type {kind} exposes the Ray head (dashboard, job API, "
                   "GCS) outside the cluster")
    if ips := items(get(svc, "spec.externalIPs", [])):
        out.append(f"{where}: externalIPs {list(ips)} expose the Ray head")
    return out


def ray_head_not_public(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The Ray head (dashboard 8265, client 10001, GCS 6379) is never reachable from outside."""
    out = []
    for path, spec in cluster_specs(type_, props):
        where = f"{k8s_name(props)} {path}.headGroupSpec"
        kind = get(spec, "headGroupSpec.serviceType")
        if kind in _PUBLIC_SERVICE_TYPES:
            out.append(f"{where}: serviceType {kind} exposes the Ray dashboard and job API "
                       "outside the cluster")
        svc = get(spec, "headGroupSpec.headService")
        if isinstance(svc, Mapping):
            out += _service_exposure(svc, f"{where}.headService")
        if get(spec, "headGroupSpec.enableIngress") is True:
            out.append(f"{where}: enableIngress creates an Ingress to the Ray dashboard")
    if type_ == SERVICE:
        sel = get(props, "spec.selector", {}) or {}
        ports = {int(p) for x in items(get(props, "spec.ports", []))
                 for p in (get(x, "port"), get(x, "targetPort")) if isinstance(p, int | float)}
        if any(str(k).startswith("ray.io/") for k in sel) or ports & _RAY_PORTS:
            out += _service_exposure(props, f"service {k8s_name(props)}")
    return out


# --------------------------------------------------------------------------- images, privilege

DEFAULT_MUTABLE_TAGS = ["latest", "nightly"]


def _mutable(image: str, tags: list[str]) -> bool:
    if "@sha256:" in image:
        return False
    name, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    if not tag:
        return True  # no tag means latest
    return any(tag == t or tag.startswith(f"{t}-") or tag.endswith(f"-{t}") for t in tags)


def no_mutable_images_in_prod(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Prod pins released images: no ``latest``/``nightly`` tag (nor a missing one)."""
    if not ctx.prod or not type_.startswith("kubernetes:"):
        return []
    tags = list(ctx.config.get("mutableTags", DEFAULT_MUTABLE_TAGS))
    out = []
    for path, pod in pod_specs(type_, props):
        for c in containers(pod):
            image = str(get(c, "image", ""))
            if image and _mutable(image, tags):
                out.append(f"{k8s_name(props)} {path} container {get(c, 'name', '?')}: image "
                           f"{image} is mutable ({'/'.join(tags)} or untagged) in "
                           f"{ctx.environment}")
    return out


def privileged_only_for_tpu(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """No ``privileged`` container unless the allow-list names it with a reason.

    TPU containers are not on it by default: on GKE >= 1.28 the TPU device plugin hands a container
    that requests ``google.com/tpu`` its chips' devices, and the stacks pin GKE >= 1.34 (DRANET).
    """
    allowed: Mapping[str, Any] = ctx.config.get("privilegedAllowed", {}) or {}
    out = []
    for path, pod in pod_specs(type_, props):
        for c in containers(pod):
            name = str(get(c, "name", "?"))
            if get(c, "securityContext.privileged") is not True or allowed.get(name):
                continue
            where = f"{k8s_name(props)} {path} container {name}"
            if tpu_request(c) == (None, None):
                out.append(f"{where} is privileged but requests no google.com/tpu")
            else:
                out.append(f"{where} is privileged: GKE >= {'.'.join(map(str, TPU_UNPRIVILEGED_SINCE))} "
                           "gives TPU containers their devices without it (allow it by name, with a "
                           "reason, in privilegedAllowed only for an older GKE)")
        if get(pod, "hostNetwork") is True:
            out.append(f"{k8s_name(props)} {path}: hostNetwork shares the node's network; "
                       "DRANET attaches the NICs instead")
    return out


# --------------------------------------------------------------------------- in-cluster access

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
# GKE's TPU device plugin gives unprivileged containers the TPU devices from this version on.
TPU_UNPRIVILEGED_SINCE = (1, 28)


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector matches pods carrying ``labels`` (an empty selector: every pod)."""
    for k, v in (get(selector, "matchLabels", {}) or {}).items():
        if labels.get(k) != v:
            return False
    for e in items(get(selector, "matchExpressions", [])):
        key, op, values = get(e, "key"), get(e, "operator"), items(get(e, "values", []))
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def _heads(resources: list[Res]) -> list[tuple[Res, str, dict[str, str]]]:
    """(resource, namespace, head pod labels) for every RayCluster and RayJob with its own cluster."""
    out = []
    for r in resources:
        for _, spec in cluster_specs(r.type, r.props):
            template = get(spec, "headGroupSpec.template.metadata.labels", {}) or {}
            labels = {str(k): str(v) for k, v in template.items()}
            labels[kube.RAY_NODE_TYPE_LABEL] = "head"
            if r.type == RAY_CLUSTER:
                labels[kube.RAY_CLUSTER_LABEL] = k8s_name(r.props)  # KubeRay's label on its pods
            out.append((r, str(get(r.props, "metadata.namespace", "default")), labels))
    return out


# A peer that names its sources: in the policy's namespace, pods with at least one label value required; elsewhere,
# namespaces by name (the label Kubernetes puts on every namespace, 1.22+). An empty podSelector "selects all pods in
# the namespace", an empty namespaceSelector "selects all namespaces" (kubernetes.io/docs/concepts/services-networking/
# network-policies/), and a selector of only Exists/NotIn/DoesNotExist terms or an ipBlock (0.0.0.0/0 is every
# address) admits sources nobody named: none of them restricts a Ray pod's ingress.
_NAMESPACE_NAME = "kubernetes.io/metadata.name"


def _names_something(selector: Mapping[str, Any], key: str | None = None) -> bool:
    """The selector requires a label value (``key``'s, when given): matchLabels or an ``In`` term."""
    if any(key in (None, k) for k in (get(selector, "matchLabels", {}) or {})):
        return True
    return any(get(e, "operator") == "In" and key in (None, get(e, "key"))
               for e in items(get(selector, "matchExpressions", [])))


def _names(selector: Mapping[str, Any], key: str) -> set[str]:
    """The values a selector requires of ``key`` (matchLabels, ``In`` terms)."""
    out = {str(v) for k, v in (get(selector, "matchLabels", {}) or {}).items() if k == key}
    for e in items(get(selector, "matchExpressions", [])):
        if get(e, "operator") == "In" and get(e, "key") == key:
            out |= {str(v) for v in items(get(e, "values", []))}
    return out


def _narrow(peer: Mapping[str, Any], namespace: str) -> bool:
    if get(peer, "ipBlock") is not None:
        return False
    ns_selector, pod_selector = get(peer, "namespaceSelector"), get(peer, "podSelector")
    if ns_selector is not None:
        # The policy's own namespace named: the same as no namespaceSelector, its pods must be named too.
        if namespace in _names(ns_selector, _NAMESPACE_NAME) and not _names_something(pod_selector or {}):
            return False
        return _names_something(ns_selector, _NAMESPACE_NAME)
    return pod_selector is not None and _names_something(pod_selector)


def _restricts(policy: Mapping[str, Any], namespace: str) -> bool:
    """Every ingress rule of the policy names its sources (a rule without "from" admits every source)."""
    return all(items(get(rule, "from", [])) and all(_narrow(peer, namespace) for peer in items(get(rule, "from", [])))
               for rule in items(get(policy, "spec.ingress", [])))


def _ingress_selects(policy: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    types = items(get(policy, "spec.policyTypes", [])) or ["Ingress"]
    return "Ingress" in types and _selects(get(policy, "spec.podSelector", {}) or {}, labels)


def _guarded(policies: list[Res], namespace: str, labels: Mapping[str, str]) -> bool:
    """Some NetworkPolicy of the namespace selects the pod, and every one that does restricts its ingress:
    policies are additive ("the union of what the applicable policies allow", the page above), so a second policy
    that allows every source opens the pod whatever the first one says."""
    applying = [p for p in policies if get(p.props, "metadata.namespace", "default") == namespace
                and _ingress_selects(p.props, labels)]
    return bool(applying) and all(_restricts(p.props, namespace) for p in applying)


def ray_head_network_policy(resources: list[Res], ctx: Context) -> list[tuple[Res | None, str]]:
    """Every RayCluster (and RayJob bringing its own) has a NetworkPolicy guarding its head."""
    policies = [r for r in resources if r.type == NETWORK_POLICY]
    out = []
    for r, ns, labels in _heads(resources):
        if not _guarded(policies, ns, labels):
            kind = "RayCluster" if r.type == RAY_CLUSTER else "RayJob's own RayCluster"
            out.append((r, f"{kind} {k8s_name(r.props)}: no NetworkPolicy in namespace {ns} restricts "
                           "ingress to its head (GCS, client and dashboard ports open to every pod)"))
    return out


def _workers(resources: list[Res]) -> list[tuple[Res, str, str, dict[str, str]]]:
    """(resource, namespace, worker group name, worker pod labels) for every worker group of every RayCluster and
    RayJob with its own cluster (KubeRay labels each pod with its node type and, for a RayCluster, its name)."""
    out = []
    for r in resources:
        for _, spec in cluster_specs(r.type, r.props):
            for group in items(get(spec, "workerGroupSpecs", [])):
                labels = {str(k): str(v) for k, v in (get(group, "template.metadata.labels", {}) or {}).items()}
                labels[kube.RAY_NODE_TYPE_LABEL] = "worker"
                if r.type == RAY_CLUSTER:
                    labels[kube.RAY_CLUSTER_LABEL] = k8s_name(r.props)
                out.append((r, str(get(r.props, "metadata.namespace", "default")), str(get(group, "groupName", "")),
                            labels))
    return out


def ray_worker_network_policy(resources: list[Res], ctx: Context) -> list[tuple[Res | None, str]]:
    """Every Ray worker group has a NetworkPolicy restricting its ingress (workloads/security.py's
    ``<cluster>-worker-ingress``): without one, any pod of the cluster reaches a worker's raylet and runs tasks as the
    trainer's account (a stack without Ray token authentication has no other guard)."""
    policies = [r for r in resources if r.type == NETWORK_POLICY]
    out = []
    for r, ns, group, labels in _workers(resources):
        if not _guarded(policies, ns, labels):
            kind = "RayCluster" if r.type == RAY_CLUSTER else "RayJob's own RayCluster"
            out.append((r, f"{kind} {k8s_name(r.props)}: no NetworkPolicy in namespace {ns} restricts ingress to "
                           f"its worker group {group} (any pod reaches the raylet and runs tasks as the trainer)"))
    return out


def ray_pods_no_token_automount(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Ray pods (head, workers, RayJob submitter) get no Kubernetes API token."""
    if type_ not in (RAY_CLUSTER, RAY_JOB):
        return []
    autoscaled = any(get(spec, "enableInTreeAutoscaling") is True for _, spec in cluster_specs(type_, props))
    out = []
    for path, pod in pod_specs(type_, props):
        if autoscaled and path.endswith("headGroupSpec"):
            continue  # the autoscaler sidecar on the head calls the API
        if get(pod, "automountServiceAccountToken") is not False:
            out.append(f"{k8s_name(props)} {path}: automountServiceAccountToken is not false: the pod "
                       "gets a Kubernetes API token it never uses")
    return out


def ray_auth_version(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """A Ray cluster with token auth names a Ray version KubeRay accepts for it (>= 2.52.0)."""
    out = []
    for path, spec in cluster_specs(type_, props):
        if get(spec, "authOptions.mode") != "token":
            continue
        version = str(get(spec, "rayVersion", ""))
        parts = tuple(int(p) for p in version.split(".")[:3] if p.isdigit())
        if len(parts) != 3 or parts < RAY_AUTH_MIN:
            out.append(f"{k8s_name(props)} {path}: authOptions.mode token with rayVersion "
                       f"{version or 'unset'}: KubeRay refuses it below "
                       f"{'.'.join(map(str, RAY_AUTH_MIN))}")
    return out


# --------------------------------------------------------------------------- organisation


def _location_of(type_: str, props: Mapping[str, Any]) -> str | None:
    if type_ in (CLUSTER, NODE_POOL, BUCKET):
        return get(props, "location")
    if type_ == SUBNETWORK:
        return get(props, "region")
    return None


def allowed_locations(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Clusters, node pools, subnets and buckets stay in the organisation's regions/zones."""
    loc = _location_of(type_, props)
    if not loc:
        return []
    loc = str(loc).lower()
    regions = [str(r).lower() for r in ctx.config.get("allowedRegions", [])]
    zones = [str(z).lower() for z in ctx.config.get("allowedZones", [])]
    what = f"{type_.rsplit(':', 1)[-1]} {get(props, 'name', '?')}"
    # The spec's zone syntax (stackspec.zones.ZONE): a zone is <region>-<a to f> or an AI zone (us-central1-ai1).
    zone_region = region_of(loc)
    is_zone = zone_region is not None
    region = zone_region or loc
    if regions and region not in regions and loc not in regions:
        return [f"{what}: location {loc} is outside the allowed regions {regions}"]
    if zones and is_zone and loc not in zones:
        return [f"{what}: zone {loc} is outside the allowed zones {zones}"]
    return []


_GCP_LABEL_PATHS = {BUCKET: "labels", CLUSTER: "resourceLabels",
                    NODE_POOL: "nodeConfig.resourceLabels"}


def required_labels(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Kubernetes objects and labelled GCP resources carry the organisation's labels."""
    if type_.startswith("kubernetes:") and "metadata" in props:
        want, labels = ctx.config.get("kubernetesLabels", DEFAULT_K8S_LABELS), \
            get(props, "metadata.labels", {})
        what = f"{props.get('kind', type_)} {k8s_name(props)} metadata.labels"
    elif type_ in _GCP_LABEL_PATHS:
        want, labels = ctx.config.get("gcpLabels", []), get(props, _GCP_LABEL_PATHS[type_], {})
        what = f"{type_.rsplit(':', 1)[-1]} {get(props, 'name', '?')} {_GCP_LABEL_PATHS[type_]}"
    else:
        return []
    missing = [k for k in want if not isinstance(labels, Mapping) or k not in labels]
    return [f"{what} lacks {missing}"] if missing else []


DEFAULT_K8S_LABELS = [kube.PART_OF_LABEL]

# RayJob bounds live here too: they are about not burning TPU hours unattended.


def rayjob_bounded(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """A RayJob has a deadline, and a job-owned cluster is deleted when the job ends."""
    if type_ != RAY_JOB:
        return []
    name = k8s_name(props)
    out = []
    deadline = get(props, "spec.activeDeadlineSeconds")
    if not isinstance(deadline, int | float) or deadline <= 0:
        out.append(f"RayJob {name}: no activeDeadlineSeconds; a hung job holds its slices "
                   "forever")
    if isinstance(get(props, "spec.rayClusterSpec"), Mapping):
        if get(props, "spec.shutdownAfterJobFinishes") is not True:
            out.append(f"RayJob {name}: brings its own cluster but shutdownAfterJobFinishes is "
                       "not true; its TPU workers outlive the job")
    return out

