"""Inside the cluster: who may reach a Ray head, what the drill identity may do, Ray's token auth.

Plain documents (no Pulumi here), like ``workloads/manifests.py``; ``workloads/component.py``
declares them.

- One ``networking.k8s.io/v1`` NetworkPolicy per RayCluster (the shared one and each dedicated
  job's own), selecting its head pod. Ingress to the head is allowed only from:
  the Ray pods of the same cluster (every port: Ray nodes talk to the head's raylet, object
  manager and the driver's workers on ports Ray picks, besides GCS 6379 and client 10001);
  the cluster's RayJob submitter pods (the dashboard port, where ``ray job submit`` talks);
  ``kube-system`` (the dashboard port: GKE's control plane, which hosts the Ray operator
  add-on and serves ``services/proxy``, reaches pods through the Konnectivity agents there);
  ``gmp-system`` (the metrics port: Google Managed Prometheus's collectors).
  A second one per RayCluster selects its workers: only the same cluster's Ray pods (its head and
  its own workers: the raylet, object manager and worker ports Ray picks) and ``gmp-system`` on the
  metrics port reach them. Nothing else connects to a worker: the KubeRay operator (GKE's Ray add-on)
  talks to the head's dashboard only (job submission and status, port 8265), and without a Ray token
  (stacks without ``ray.auth: token``) any pod that reached a worker's raylet could run tasks as the
  trainer's account.
- The drill identity's RBAC: exactly the calls ``drills/cluster.py``'s ``Kube`` makes (no Secret), and a
  ValidatingAdmissionPolicy that lets it delete only the stack's Ray worker pods and its TPU pools' nodes.
- Ray token authentication (``ray.auth: token``): KubeRay's ``authOptions`` (>= 1.5.1, Ray >= 2.52).
- The workload namespace the stack creates, with its Pod Security admission labels.
"""

from __future__ import annotations

from typing import Any

from stackspec import kube, limits, names
from stackspec.spec import Job, StackSpec

NETWORK_POLICY_API = "networking.k8s.io/v1"
RBAC_API = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
# ValidatingAdmissionPolicy: GA in Kubernetes 1.30 (https://kubernetes.io/docs/reference/access-authn-authz/
# validating-admission-policy/); the stacks pin GKE >= 1.34.
ADMISSION_API = "admissionregistration.k8s.io/v1"

# The Ray head's dashboard port, written once in stackspec (KubeRay's names).
DASHBOARD_PORT = limits.RAY_HEAD_PORTS["dashboard"]

# Kubernetes labels every namespace with its name (1.22+) and every Job's pods with the Job's
# name (1.27+); KubeRay names the submitter Job of a RayJob after the RayJob.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# Google Managed Prometheus's collectors (the PodMonitoring scrapers) run here.
GMP_NAMESPACE = "gmp-system"
# GKE's control plane reaches pods through the Konnectivity agents in kube-system (the API server's
# services/proxy, which the cluster drill checks a token-auth head through, and the KubeRay operator,
# which GKE's Ray add-on hosts outside the nodes and which polls the dashboard's job API).
CONTROL_PLANE_NAMESPACE = "kube-system"


# Pod Security admission (https://kubernetes.io/docs/concepts/security/pod-security-admission/): the namespace
# enforces `baseline` and warns and audits at `restricted`. Baseline is the strictest level the pods meet:
# no privileged container, host namespace, hostPath or added capability (TPU workers run unprivileged: GKE >= 1.28
# gives a container its TPU devices through the google.com/tpu request, cloud.google.com/kubernetes-engine/docs/
# how-to/tpus "privileged mode"). `restricted` also asks runAsNonRoot, all capabilities dropped and a seccomp
# profile on every container, which the Ray images (rayproject/ray and ours FROM it) and the pods as KubeRay
# renders them do not set; its warnings show what is left (kubectl prints them, the audit log keeps them).
PSA_ENFORCE = "baseline"
PSA_WARN = PSA_AUDIT = "restricted"
PSA_LABEL = "pod-security.kubernetes.io"


def pod_security_labels(spec: StackSpec) -> dict[str, str]:
    """The namespace's PSA labels, each level pinned to the cluster's minor version (the checks of that release)."""
    version = ".".join(spec.cluster.version.split(".")[:2])
    out = {}
    for mode, level in (("enforce", PSA_ENFORCE), ("warn", PSA_WARN), ("audit", PSA_AUDIT)):
        out[f"{PSA_LABEL}/{mode}"] = level
        out[f"{PSA_LABEL}/{mode}-version"] = f"v{version}"
    return out


def workload_namespace(spec: StackSpec) -> dict[str, Any] | None:
    """The workload namespace (``storage.namespace``), or None for ``default`` (dev only: Kubernetes owns it)."""
    ns = spec.storage.namespace
    if ns == "default":
        return None
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {**_labels(spec, "workload-namespace"), **pod_security_labels(spec)}}}


def _labels(spec: StackSpec, component: str) -> dict[str, str]:
    return {
        kube.PART_OF_LABEL: kube.PART_OF_VALUE,
        kube.COMPONENT_LABEL: component,
        kube.MANAGED_BY_LABEL: "pulumi",
        kube.STACK_LABEL: spec.stack,
    }


# --------------------------------------------------------------------------- NetworkPolicy


def network_policy_name(ray_cluster: str) -> str:
    return f"{ray_cluster}-head-ingress"


def _ports(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def _from_namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def head_network_policy(spec: StackSpec, name: str, ray_pods: dict[str, str], submitters: list[str]) -> dict[str, Any]:
    """The NetworkPolicy of one RayCluster's head.

    ``ray_pods`` selects the cluster's pods (``ray.io/cluster`` for the shared cluster, the job
    label for a dedicated one, whose name KubeRay picks); ``submitters`` are the RayJobs whose
    submitter pods call the head's dashboard port.
    """
    ingress: list[dict[str, Any]] = [
        # Ray's node-to-node traffic: GCS, raylet, object manager, workers (ports Ray chooses).
        {"from": [{"podSelector": {"matchLabels": dict(ray_pods)}}]},
    ]
    if submitters:
        ingress.append({
            "from": [{"podSelector": {"matchExpressions": [
                {"key": JOB_NAME_LABEL, "operator": "In", "values": sorted(submitters)}]}}],
            "ports": _ports(DASHBOARD_PORT),
        })
    ingress += [
        {"from": [_from_namespace(CONTROL_PLANE_NAMESPACE)], "ports": _ports(DASHBOARD_PORT)},
        {"from": [_from_namespace(GMP_NAMESPACE)], "ports": _ports(spec.ray.metrics_export_port)},
    ]
    return {
        "apiVersion": NETWORK_POLICY_API,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": network_policy_name(name),
            "namespace": spec.storage.namespace,
            "labels": _labels(spec, "ray-network-policy"),
        },
        "spec": {
            "podSelector": {"matchLabels": {**ray_pods, kube.RAY_NODE_TYPE_LABEL: "head"}},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def worker_network_policy_name(ray_cluster: str) -> str:
    return f"{ray_cluster}-worker-ingress"


def worker_network_policy(spec: StackSpec, name: str, ray_pods: dict[str, str]) -> dict[str, Any]:
    """The NetworkPolicy of one RayCluster's workers: its own Ray pods (head and workers, every port: GCS
    callbacks, raylet, object manager, the worker ports Ray picks) and the metrics collectors, nothing else."""
    return {
        "apiVersion": NETWORK_POLICY_API,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": worker_network_policy_name(name),
            "namespace": spec.storage.namespace,
            "labels": _labels(spec, "ray-network-policy"),
        },
        "spec": {
            "podSelector": {"matchLabels": {**ray_pods, kube.RAY_NODE_TYPE_LABEL: "worker"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": dict(ray_pods)}}]},
                {"from": [_from_namespace(GMP_NAMESPACE)], "ports": _ports(spec.ray.metrics_export_port)},
            ],
        },
    }


def network_policies(spec: StackSpec, shared: bool, jobs: list[Job]) -> list[dict[str, Any]]:
    """Two NetworkPolicies per RayCluster (its head's, its workers'): the shared one (``shared``) and each
    dedicated job's."""
    docs = []
    if shared:
        on_shared = [j.name for j in jobs if j.cluster == "shared"]
        pods = {kube.RAY_CLUSTER_LABEL: spec.ray.cluster_name}
        docs += [head_network_policy(spec, spec.ray.cluster_name, pods, on_shared),
                 worker_network_policy(spec, spec.ray.cluster_name, pods)]
    for job in jobs:
        if job.cluster == "dedicated":
            pods = {kube.JOB_LABEL: job.name}
            docs += [head_network_policy(spec, job.name, pods, [names.submitter_job(job.name)]),
                     worker_network_policy(spec, job.name, pods)]
    return docs


# --------------------------------------------------------------------------- drill RBAC


def drill_user(spec: StackSpec) -> str | None:
    """The stack's own drill service account (bootstrap/: ci-drill-<stack>), a Kubernetes user of its email on GKE;
    none in a sandbox, and none for a stack CI does not drill (no ``deploy.clusterDrill``): the bootstrap creates
    that account only for a drilled stack (bootstrap/access.py), and a grant to an account nobody made is one a later
    account of that name would inherit (tests/test_references.py)."""
    if spec.ci_project is None or spec.deploy.cluster_drill is None:
        return None
    return names.drill_account_email(spec.stack, spec.ci_project)


# What drills/cluster.py's Kube calls, and nothing more: read the RayJob, list the worker group's
# pods and delete one (or a replica's), read the RayJob submitter pod's log (the Ray job's log: no Ray
# token, so no Secret), read the head service's port and GET its dashboard through services/proxy (the
# check that a token-auth head refuses a request without a token); cluster-wide, read a node's pool
# label and delete that node. The deletes are narrowed by drill_admission_policy.
DRILL_NAMESPACED_RULES = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["services/proxy"], "verbs": ["get"]},
)
DRILL_CLUSTER_RULES = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "delete"]},
)


def drill_role_name(spec: StackSpec) -> str:
    return f"{spec.cluster.name}-drill"


def drill_rbac(spec: StackSpec) -> list[dict[str, Any]]:
    """Role + RoleBinding in the workload namespace, ClusterRole + ClusterRoleBinding for nodes."""
    if drill_user(spec) is None:  # a sandbox, or a stack CI does not drill: no CI drill user to grant anything
        return []
    name, ns = drill_role_name(spec), spec.storage.namespace
    labels = _labels(spec, "drill-rbac")
    subject = [{"kind": "User", "apiGroup": RBAC_GROUP, "name": drill_user(spec)}]
    return [
        {"apiVersion": RBAC_API, "kind": "Role",
         "metadata": {"name": name, "namespace": ns, "labels": labels},
         "rules": [dict(r) for r in DRILL_NAMESPACED_RULES]},
        {"apiVersion": RBAC_API, "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": ns, "labels": labels},
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": name},
         "subjects": subject},
        {"apiVersion": RBAC_API, "kind": "ClusterRole",
         "metadata": {"name": name, "labels": labels},
         "rules": [dict(r) for r in DRILL_CLUSTER_RULES]},
        {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
         "subjects": subject},
    ]


def drill_node_pools(spec: StackSpec) -> list[str]:
    """Every TPU slice's node pools (each capacity option's): the only nodes the drill may delete."""
    return sorted({pool for s in spec.slices for _, pool in s.pools} or {s.name for s in spec.slices})


def _cel_list(values: list[str]) -> str:
    return "[" + ", ".join("'" + v + "'" for v in values) + "]"


def _label_in(key: str, values: list[str]) -> str:
    return (f"('{key}' in oldObject.metadata.labels && "
            f"oldObject.metadata.labels['{key}'] in {_cel_list(values)})")


def drill_admission_policy(spec: StackSpec) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: RBAC cannot select by label, so the drill user's deletes are
    checked at admission (CEL on ``oldObject``, the object being deleted): a node only with one of the TPU
    pools' ``cloud.google.com/gke-nodepool``, a pod only if it is a Ray worker of the stack's shared
    RayCluster (``ray.io/cluster``) or of one of its jobs' own clusters (the job label the stack puts on them).
    Nobody else's requests are matched (``matchConditions`` on the user)."""
    name = drill_role_name(spec)
    shared = [spec.ray.cluster_name] if any(j.cluster == "shared" for j in spec.jobs) else []
    dedicated = sorted(j.name for j in spec.jobs if j.cluster == "dedicated")
    owners = [c for c in (_label_in(kube.RAY_CLUSTER_LABEL, shared) if shared else "",
                          _label_in(kube.JOB_LABEL, dedicated) if dedicated else "") if c]
    pod_rule = (f"request.resource.resource != 'pods' || (has(oldObject.metadata.labels) && "
                f"{_label_in(kube.RAY_NODE_TYPE_LABEL, ['worker'])} && ({' || '.join(owners) or 'false'}))")
    node_rule = (f"request.resource.resource != 'nodes' || (has(oldObject.metadata.labels) && "
                 f"{_label_in(kube.NODEPOOL_LABEL, drill_node_pools(spec))})")
    labels = _labels(spec, "drill-admission")
    return [
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name, "labels": labels},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{
                 "apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                 "resources": ["pods", "nodes"]}]},
             "matchConditions": [{"name": "drill-user",
                                  "expression": f"request.userInfo.username == '{drill_user(spec)}'"}],
             "validations": [
                 {"expression": pod_rule,
                  "message": f"the drill deletes only Ray worker pods of stack {spec.stack}'s clusters"},
                 {"expression": node_rule,
                  "message": f"the drill deletes only nodes of stack {spec.stack}'s TPU slice pools"},
             ]}},
        {"apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name, "labels": labels},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


# --------------------------------------------------------------------------- Ray token auth


def auth_options(spec: StackSpec) -> dict[str, Any] | None:
    """KubeRay's ``authOptions`` for ``ray.auth: token``: the operator generates a Secret named
    after the RayCluster, sets RAY_AUTH_MODE/RAY_AUTH_TOKEN on every Ray container and on the
    RayJob submitter, and sends the token on its own dashboard calls."""
    if spec.ray.auth != "token":
        return None
    return {"mode": "token"}
