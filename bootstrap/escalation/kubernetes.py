"""The Kubernetes half: each subject's verbs from the stacks' RBAC, and from GKE IAM, which authorizes a request if
IAM *or* RBAC allows it ("IAM permissions work alongside Kubernetes RBAC",
https://cloud.google.com/kubernetes-engine/docs/how-to/iam); and who can become a Kubernetes service account (and
so its GKE workload identity principal): a subject that runs pods, or mints tokens, in its namespace.

A binding to a role no manifest defines is refused unless the role is vendored in ``bootstrap/data/
kubernetes_roles.json`` (the API server's cluster-admin/admin/edit/view, the Kueue chart's metrics reader; each
with its source).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from .gcp import DATA, WORKLOAD_IDENTITY, Reach, Reaches, gke_principal

K8S_ROLES_FILE = DATA / "kubernetes_roles.json"
# What lets a subject run code: pods directly, or through a controller that makes them (core, apps and batch
# kinds; KubeRay's RayCluster/RayJob/RayService; JobSet and LeaderWorkerSet, the TPU multislice wrappers Kueue
# admits), a new container in a running pod (pods/ephemeralcontainers), a shell in one (exec/attach), and GKE's
# thirdPartyObjects (IAM's name for every custom resource, Ray and JobSet objects included).
WORKLOADS = {"pods", "pods/exec", "pods/attach", "pods/ephemeralcontainers", "deployments", "replicasets",
             "statefulsets", "daemonsets", "jobs", "cronjobs", "rayclusters", "rayjobs", "rayservices",
             "replicationcontrollers", "jobsets", "leaderworkersets", "thirdpartyobjects", "*"}
WRITE_VERBS = {"create", "update", "patch", "*"}
READ_SECRET_VERBS = {"get", "list", "watch", "*"}
RBAC_ESCALATION = {"escalate", "bind", "impersonate", "*"}
# Writing these switches the cluster's admission off (the stack's own ValidatingAdmissionPolicy included).
ADMISSION = {"validatingadmissionpolicies", "validatingadmissionpolicybindings", "mutatingadmissionpolicies",
             "mutatingadmissionpolicybindings", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
# GKE IAM permission names (container.<kind>.<verb>, https://cloud.google.com/kubernetes-engine/docs/reference/
# api-permissions) whose kind is no Kubernetes object: the GKE API's own.
GKE_API_KINDS = {"clusters", "operations", "locations", "projects", "hostServiceAgent", "containerDiagnosisInsights",
                 "containerDiagnosisRecommendations", "networkAnalyzerGkeConnectivityInsights",
                 "networkAnalyzerGkeIpAddressInsights", "keyHandles"}
# IAM verbs that are Kubernetes subresources (pods/exec is a create on pods/exec; a token is a create on
# serviceaccounts/token; nodes/proxy is reached with get).
GKE_SUBRESOURCE = {("pods", "exec"): ("pods/exec", "create"), ("pods", "attach"): ("pods/attach", "create"),
                   ("pods", "portForward"): ("pods/portforward", "create"),
                   ("serviceAccounts", "createToken"): ("serviceaccounts/token", "create"),
                   ("nodes", "proxy"): ("nodes/proxy", "get"), ("pods", "getLogs"): ("pods/log", "get")}


def load_builtin_roles(path=K8S_ROLES_FILE) -> dict[str, list[dict]]:
    return {name: r["rules"] for name, r in json.loads(path.read_text())["roles"].items()}


def gke_rbac(perm: str) -> tuple[str, str] | None:
    """(resource, verb) of a GKE IAM permission on Kubernetes objects, or None."""
    parts = perm.split(".")
    if len(parts) != 3 or parts[0] != "container" or parts[1] in GKE_API_KINDS:
        return None
    kind, verb = parts[1], parts[2]
    if (kind, verb) in GKE_SUBRESOURCE:
        return GKE_SUBRESOURCE[kind, verb]
    if verb in ("getStatus", "updateStatus", "getScale", "updateScale"):  # the status and scale subresources
        sub = "status" if verb.endswith("Status") else "scale"
        return f"{kind.lower()}/{sub}", verb.removesuffix("Status").removesuffix("Scale")
    return kind.lower(), verb.lower()


def add_gke(reach: Reaches) -> None:
    """container.* permissions on a project: the same verbs in every namespace of every cluster in it; and pods
    there run as any of its Kubernetes service accounts, so as any workload identity principal of the project."""
    principals = [m for m in reach if gke_principal(m)]
    for r in list(reach.values()):
        projects = set()
        for perm, resource, kind, _ in r.grants:
            # IAM inherits downwards: on a folder or organization, every project's clusters (any project: '*').
            rv = gke_rbac(perm) if kind in ("project", "folder", "organization") else None
            if rv:
                r.gke.add(("*", rv[0], rv[1], ""))
                if rv[0] in WORKLOADS and rv[1] == "create" or rv == ("serviceaccounts/token", "create"):
                    projects.add(resource.split("/")[1] if kind == "project" else "*")
        for p in principals:
            if gke_principal(p)[0] in projects or "*" in projects:
                r.becomes.setdefault(p, f"pods in {gke_principal(p)[0]}'s clusters (GKE IAM)")


def _rules_of(manifests: list[dict], builtin: dict[str, list[dict]], kind: str, name: str,
              namespace: str | None) -> list[dict] | None:
    for d in manifests:
        md = d.get("metadata", {})
        if d.get("kind") == kind and md.get("name") == name and (kind == "ClusterRole" or md.get("namespace") ==
                                                                 namespace):
            # An aggregated ClusterRole's rules are whatever roles match its selectors, now or later: unknown.
            return None if d.get("aggregationRule") else d.get("rules") or []
    # The API server's own roles: a ClusterRole by name, a namespaced Role as <namespace>/<name>.
    return builtin.get(name) if kind == "ClusterRole" else builtin.get(f"{namespace}/{name}")


def subject_key(subject: dict, ns: str) -> str:
    if subject.get("kind") == "User" and subject.get("name", "").endswith(".gserviceaccount.com"):
        return f"serviceAccount:{subject['name']}"
    return f"k8s:{subject.get('kind')}:{subject.get('namespace', ns)}/{subject.get('name')}"


def own_namespace(member: str) -> str | None:
    """A Kubernetes service account's namespace (None for users and groups: they own none)."""
    m = re.match(r"^k8s:ServiceAccount:([^/]+)/", member)
    return m.group(1) if m else None


def compute_rbac(manifests: Iterable[dict], reach: Reaches, builtin: dict[str, list[dict]] | None = None) -> None:
    manifests = list(manifests)
    builtin = builtin if builtin is not None else load_builtin_roles()
    # Where Kueue admits jobs: the namespaces with a LocalQueue (the MultiKueue manager may create jobs there).
    reach.job_namespaces |= {d["metadata"].get("namespace") for d in manifests if d.get("kind") == "LocalQueue"}
    for doc in manifests:
        if doc.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = doc.get("roleRef", {})
        ns = doc.get("metadata", {}).get("namespace") if doc["kind"] == "RoleBinding" else "*"
        rules = _rules_of(manifests, builtin, ref.get("kind", ""), ref.get("name", ""), ns)
        if rules is None:
            reach.unknown_roles.append(f"{doc['kind']} {doc['metadata'].get('name')} -> {ref.get('kind')} "
                                       f"{ref.get('name')} (no manifest defines it, none vendored)")
            rules = []
        for subject in doc.get("subjects") or []:
            r = reach.get_or_add(subject_key(subject, ns))
            for rule in rules:
                names = ",".join(sorted(rule.get("resourceNames") or []))
                for res in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        r.rbac.add((ns, res, verb, names))
                for url in rule.get("nonResourceURLs") or []:
                    for verb in rule.get("verbs") or []:
                        r.rbac.add(("*", f"url:{url}", verb, ""))
    # A Kubernetes service account is its GKE workload identity principal; and whoever runs pods in its
    # namespace, or mints its tokens, becomes it.
    ksas = {m for m in reach if m.startswith("k8s:ServiceAccount:")}
    ksas |= {f"k8s:ServiceAccount:{d['metadata'].get('namespace')}/{d['metadata']['name']}" for d in manifests
             if d.get("kind") == "ServiceAccount"}
    for k in ksas:
        reach.get_or_add(k)
    for member, r in list(reach.items()):
        for ns, res, verb, names in sorted(r.rbac):
            runs = res in WORKLOADS and verb in ("create", "*")
            token = res == "serviceaccounts/token" and verb in ("create", "*")
            imp = res in ("serviceaccounts", "*") and verb in ("impersonate", "*")
            if not (runs or token or imp):
                continue
            for k in ksas:
                kns, ksa = k.removeprefix("k8s:ServiceAccount:").split("/", 1)
                if k != member and ns in ("*", kns) and (runs or not names or ksa in names.split(",")):
                    r.becomes.setdefault(k, f"{verb} {res} in {ns}")


def link_principals(reach: Reaches) -> None:
    """A GKE workload identity principal and its Kubernetes service account are one identity: edges both ways."""
    for member in list(reach):
        g = gke_principal(member)
        if not g:
            continue
        _, ns, sa = g
        for k in [m for m in reach if m.startswith("k8s:ServiceAccount:")]:
            kns, ksa = k.removeprefix("k8s:ServiceAccount:").split("/", 1)
            if ns in ("*", kns) and sa in ("*", ksa):
                reach[k].becomes.setdefault(member, WORKLOAD_IDENTITY)
                if ns != "*" and sa != "*":
                    reach[member].becomes.setdefault(k, WORKLOAD_IDENTITY)
        # A pod can name any service account of its namespace, one no manifest declares included (every
        # namespace has `default`; a grant may name a KSA before it exists): pod creators there become the
        # principal directly, whether or not a manifest declares the KSA.
        for holder, r in list(reach.items()):
            for rns, res, verb, names in sorted(r.rbac):
                runs = res in WORKLOADS and verb in ("create", "*")
                token = res == "serviceaccounts/token" and verb in ("create", "*") and (
                    not names or sa in names.split(","))
                if (runs or token) and rns in ("*", ns) and holder != member:
                    r.becomes.setdefault(member, f"{verb} {res} in {rns}")


def findings(member: str, r: Reach) -> list[tuple[str, str, str]]:
    """(source, namespace or '*', what) for each Kubernetes path to more: source 'RBAC' (the manifests) or
    'GKE IAM'."""
    out = []
    own = own_namespace(member)
    for source, tuples in (("RBAC", r.rbac), ("GKE IAM", r.gke)):
        groups: dict[tuple[str, str], set[str]] = {}
        for ns, res, verb, names in tuples:
            scope = "cluster-wide" if ns == "*" else ns
            outside = ns == "*" or ns != own
            if res.startswith("url:"):
                rule = f"non-resource URL {verb!r}" if verb == "*" else None
            elif verb in RBAC_ESCALATION:
                rule = f"verb {verb!r}"
            elif res == "*" and verb in WRITE_VERBS | {"delete"}:
                rule = f"{verb} on every resource (*)"
            elif res in WORKLOADS and verb in WRITE_VERBS and outside:
                rule = f"{verb} of pod-making kinds outside its own namespace"
            elif res == "serviceaccounts/token" and verb in WRITE_VERBS and (ns == "*" or outside and not names):
                rule = "service account tokens (any account's)"
            elif res in ("secrets", "*") and verb in READ_SECRET_VERBS and outside and not names:
                rule = f"{verb} Secrets"
            elif res == "nodes/proxy":
                rule = "the kubelet API (nodes/proxy: exec in any pod on the node)"
            elif res in ADMISSION and verb in WRITE_VERBS | {"delete", "deletecollection"}:
                rule = "admission control writes (can switch the stack's admission policy off)"
            else:
                rule = None
            if rule:
                groups.setdefault((ns, f"Kubernetes {rule} ({scope})"), set()).add(res)
        out += [(source, ns, f"{k}: {', '.join(sorted(v)[:8])}{' ...' if len(v) > 8 else ''}")
                for (ns, k), v in sorted(groups.items())]
    return out
