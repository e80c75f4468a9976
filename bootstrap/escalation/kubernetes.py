"""The Kubernetes half: each subject's verbs from the stacks' RBAC, and from GKE IAM, which authorizes a request if
IAM *or* RBAC allows it ("IAM permissions work alongside Kubernetes RBAC",
https://cloud.google.com/kubernetes-engine/docs/how-to/iam); and who can become a Kubernetes service account (and
so its GKE workload identity principal): a subject that runs pods, or mints tokens, in its namespace.

A binding to a role no manifest defines is refused unless the role is vendored in ``bootstrap/data/
kubernetes_roles.json`` (the API server's cluster-admin/admin/edit/view, Kueue's metrics reader; each
with its source).
"""

from __future__ import annotations

import functools
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
# Admission webhooks: whoever answers the Service one calls sees every object it matches and, for a mutating one,
# rewrites it (a pod's image, its service account): https://kubernetes.io/docs/concepts/security/rbac-good-practices/
# ("Control admission webhooks"). Its Service, Endpoints or EndpointSlices rewritten point it at another pod.
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
WEBHOOK_BACKENDS = {"services", "endpoints", "endpointslices"}
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
                   ("nodes", "proxy"): ("nodes/proxy", "get"), ("pods", "getLogs"): ("pods/log", "get"),
                   ("certificateSigningRequests", "approve"): ("certificatesigningrequests/approval", "update")}
# The GKE API's switches of a cluster: Binary Authorization evaluation, legacy ABAC, network policy enforcement, its
# node accounts (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/update).
CLUSTER_SWITCHES = "clusters (GKE API)"
# Verbs that change what a pod runs: a new pod or pod template, a patched one (a pod's container image is mutable, a
# template's service account too), a new container in a running pod. A shell (exec, attach) is a create, and a GET
# when the WebSocket handshake is authorized as the request's own verb (kubernetes/website, feature gate
# AuthorizePodWebsocketUpgradeCreatePermission: before it, get on pods/exec opened a shell).
RUN_VERBS = {"create", "update", "patch", "*"}
SHELL = {"pods/exec", "pods/attach"}


def qualify(ns: str | None, cluster: str | None) -> str | None:
    """A namespace of one cluster: ``<namespace>@<cluster>.<project>`` (``*@...``: every namespace of that cluster).
    Namespaces of different clusters are different places: a binding in one cluster's ``maxtext`` grants nothing in
    another's. Without a cluster (a rendering read alone) the namespace stands as it is."""
    return f"{ns}@{cluster}" if cluster and ns is not None else ns


def split_ns(q: str) -> tuple[str, str | None]:
    """(namespace or '*', cluster id or None) of a qualified namespace."""
    ns, _, cluster = q.partition("@")
    return ns, cluster or None


def covers(grant: str, target: str) -> bool:
    """A grant's namespace (or '*') reaches ``target``: the same cluster, and all of it or that namespace."""
    g, gc = split_ns(grant)
    t, tc = split_ns(target)
    return gc == tc and g in ("*", t)


def cluster_id(name: str, project: str) -> str:
    return f"{name}.{project}"


def cluster_project(cluster: str | None) -> str | None:
    """The project of a cluster id (GKE workload identity's pool is per project: PROJECT.svc.id.goog)."""
    return cluster.split(".", 1)[1] if cluster and "." in cluster else None


def ksa_parts(member: str) -> tuple[str, str | None, str] | None:
    """(namespace, cluster id or None, name) of a Kubernetes service account member."""
    m = re.match(r"^k8s:ServiceAccount:([^/]+)/(.+)$", member)
    if not m:
        return None
    ns, cluster = split_ns(m.group(1))
    return ns, cluster, m.group(2)


def runs(res: str, verb: str) -> bool:
    return res in WORKLOADS and verb in RUN_VERBS or res in SHELL and verb == "get"


def load_builtin_roles(path=K8S_ROLES_FILE) -> dict[str, list[dict]]:
    return {name: r["rules"] for name, r in json.loads(path.read_text())["roles"].items()}


@functools.cache  # a pure function of the name, asked for every project grant of every check
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
            if kind in ("project", "folder", "organization") and perm in ("container.clusters.update",
                                                                       "container.clusters.create"):
                r.gke.add(("*", CLUSTER_SWITCHES, perm.rsplit(".", 1)[1], ""))
            rv = gke_rbac(perm) if kind in ("project", "folder", "organization") else None
            if rv:
                r.gke.add(("*", rv[0], rv[1], ""))
                # A ConfigMap write is a pod's code where a pod mounts one (the token jobs' scripts): counted so.
                if runs(*rv) or rv == ("serviceaccounts/token", "create") or rv[0] == "configmaps" and rv[1] in \
                        RUN_VERBS:
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


def subject_key(subject: dict, ns: str, cluster: str | None = None) -> str:
    if subject.get("kind") == "User" and subject.get("name", "").endswith(".gserviceaccount.com"):
        return f"serviceAccount:{subject['name']}"
    return f"k8s:{subject.get('kind')}:{qualify(subject.get('namespace', ns), cluster)}/{subject.get('name')}"


def own_namespace(member: str) -> str | None:
    """A Kubernetes service account's namespace (None for users and groups: they own none)."""
    m = re.match(r"^k8s:ServiceAccount:([^/]+)/", member)
    return m.group(1) if m else None


def compute_rbac(manifests: Iterable[dict], reach: Reaches, builtin: dict[str, list[dict]] | None = None,
                 cluster: str | None = None) -> None:
    """``manifests``: one cluster's objects; ``cluster`` its id (``cluster_id``), which qualifies every namespace."""
    manifests = list(manifests)
    builtin = builtin if builtin is not None else load_builtin_roles()
    # Where Kueue admits jobs: the namespaces with a LocalQueue (the MultiKueue manager may create jobs there).
    reach.job_namespaces |= {qualify(d["metadata"].get("namespace"), cluster) for d in manifests
                             if d.get("kind") == "LocalQueue"}
    for doc in manifests:
        if doc.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = doc.get("roleRef", {})
        raw = doc.get("metadata", {}).get("namespace") if doc["kind"] == "RoleBinding" else "*"
        ns = qualify(raw, cluster)
        rules = _rules_of(manifests, builtin, ref.get("kind", ""), ref.get("name", ""), raw)
        if rules is None:
            reach.unknown_roles.append(f"{doc['kind']} {doc['metadata'].get('name')} -> {ref.get('kind')} "
                                       f"{ref.get('name')} (no manifest defines it, none vendored)")
            rules = []
        for subject in doc.get("subjects") or []:
            r = reach.get_or_add(subject_key(subject, raw, cluster))
            for rule in rules:
                names = ",".join(sorted(rule.get("resourceNames") or []))
                for res in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        r.rbac.add((ns, res, verb, names))
                for url in rule.get("nonResourceURLs") or []:
                    for verb in rule.get("verbs") or []:
                        r.rbac.add((qualify("*", cluster), f"url:{url}", verb, ""))
    reach.pod_templates |= set(pod_templates(manifests, cluster))
    reach.ksa_accounts |= {f"k8s:ServiceAccount:{qualify(d['metadata'].get('namespace'), cluster)}/"
                           f"{d['metadata']['name']}": gsa
                           for d in manifests if d.get("kind") == "ServiceAccount"
                           and (gsa := (d["metadata"].get("annotations") or {}).get("iam.gke.io/gcp-service-account"))}
    # K6: the Services the declared admission webhooks call; K11: the token jobs' own accounts, the Secrets' writers.
    reach.webhook_services |= {(qualify(svc.get("namespace"), cluster), svc.get("name")) for d in manifests
                               if d.get("kind") in WEBHOOK_KINDS for w in d.get("webhooks") or []
                               if (svc := (w.get("clientConfig") or {}).get("service"))}
    # A webhook that calls a URL (clientConfig.url, "the location of the webhook, in standard URL form",
    # kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/) is answered by whoever
    # serves that address, which no grant here models: refused by name, whatever the URL.
    reach.webhook_urls += [f"{d['kind']} {(d.get('metadata') or {}).get('name')} ({cluster}): webhook {w.get('name')} "
                           f"calls {url}" for d in manifests if d.get("kind") in WEBHOOK_KINDS
                           for w in d.get("webhooks") or [] if (url := (w.get("clientConfig") or {}).get("url"))]
    targets = {(qualify((d.get("metadata") or {}).get("namespace"), cluster), (d.get("metadata") or {}).get("name"))
               for d in manifests if d.get("kind") == "ConfigMap" and "targets.json" in (d.get("data") or {})}
    reach.token_jobs |= {f"k8s:ServiceAccount:{ns}/{sa}" for ns, sa, maps in pod_templates(manifests, cluster)
                         if any((ns, m) in targets for m in maps)}
    for key, accounts in secret_tokens(manifests, cluster).items():
        reach.secret_tokens.setdefault(key, set()).update(accounts)
    # A Kubernetes service account is its GKE workload identity principal; and whoever runs pods in its
    # namespace, or mints its tokens, becomes it; and whoever writes a ConfigMap a pod mounts becomes the pod's.
    ksas = {m for m in reach if m.startswith("k8s:ServiceAccount:")}
    ksas |= {f"k8s:ServiceAccount:{qualify(d['metadata'].get('namespace'), cluster)}/{d['metadata']['name']}"
             for d in manifests if d.get("kind") == "ServiceAccount"}
    for k in ksas:
        reach.get_or_add(k)
    for member, r in list(reach.items()):
        for ns, res, verb, names in sorted(r.rbac):
            if res in ("configmaps", "*") and verb in RUN_VERBS:
                for tns, sa, maps in sorted(reach.pod_templates):
                    k = f"k8s:ServiceAccount:{tns}/{sa}"
                    if k != member and covers(ns, tns) and (not names or maps & set(names.split(","))):
                        r.becomes.setdefault(k, f"{verb} {res} in {ns} (mounted by its pods)")
            run = runs(res, verb)
            token = res == "serviceaccounts/token" and verb in ("create", "*")
            imp = res in ("serviceaccounts", "*") and verb in ("impersonate", "*")
            if not (run or token or imp):
                continue
            for k in ksas:
                kns, ksa = k.removeprefix("k8s:ServiceAccount:").split("/", 1)
                if k != member and covers(ns, kns) and (run or not names or ksa in names.split(",")):
                    r.becomes.setdefault(k, f"{verb} {res} in {ns}")


def _templates(doc: dict) -> list[dict]:
    """The pod specs a workload object declares (core, apps and batch kinds; KubeRay's head and worker groups)."""
    spec = doc.get("spec") or {}
    kind = doc.get("kind")
    if kind == "Pod":
        return [spec]
    if kind == "CronJob":
        return [((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec") or {}]
    if kind in ("RayJob", "RayCluster", "RayService"):
        ray = spec.get("rayClusterSpec") or (spec.get("rayClusterConfig") if kind == "RayService" else spec) or {}
        groups = [ray.get("headGroupSpec") or {}, *(ray.get("workerGroupSpecs") or [])]
        submitter = [(spec.get("submitterPodTemplate") or {}).get("spec") or {}] if kind == "RayJob" else []
        return [(g.get("template") or {}).get("spec") or {} for g in groups] + submitter
    if "template" in spec:
        return [(spec.get("template") or {}).get("spec") or {}]
    return []


def pod_templates(manifests: Iterable[dict], cluster: str | None = None) -> list[tuple[str, str, frozenset[str]]]:
    """(namespace, service account, the ConfigMaps mounted) of each pod template the manifests declare."""
    out = []
    for d in manifests:
        ns = qualify((d.get("metadata") or {}).get("namespace") or "default", cluster)
        for pod in _templates(d):
            maps = {v["configMap"]["name"] for v in pod.get("volumes") or [] if (v.get("configMap") or {}).get("name")}
            maps |= {src["configMap"]["name"] for v in pod.get("volumes") or []
                     for src in (v.get("projected") or {}).get("sources") or [] if (src.get("configMap") or {})
                     .get("name")}
            if maps:
                out.append((ns, pod.get("serviceAccountName") or "default", frozenset(maps)))
    return out


def secret_tokens(manifests: Iterable[dict], cluster: str | None = None) -> dict[tuple[str, str], set[str]]:
    """What the token jobs write where: their ConfigMap's targets.json (workloads/multikueue.py) names, per target,
    the Secret and the service account whose token (or kubeconfig) goes into it: a kubeconfig target's account is
    in the worker cluster it names (same project), a token target's in the job's own cluster."""
    out: dict[tuple[str, str], set[str]] = {}
    for d in manifests:
        if d.get("kind") != "ConfigMap" or "targets.json" not in (d.get("data") or {}):
            continue
        try:
            doc = json.loads(d["data"]["targets.json"])
            for t in doc["targets"]:
                where = cluster_id(t["cluster"], cluster_project(cluster)) if t.get("cluster") and \
                    cluster_project(cluster) else cluster
                out.setdefault((qualify(doc["namespace"], cluster), t["secret"]), set()).add(
                    f"k8s:ServiceAccount:{qualify(t['tokenNamespace'], where)}/{t['serviceAccount']}")
        except (ValueError, KeyError, TypeError):
            continue  # not a token job's: its writers' Secrets are judged by what they can mint (fail closed)
    return out


TOKEN_EDGES = ("serviceaccounts/token",)


def link_secrets(reach: Reaches) -> None:
    """A Secret read is becoming whoever the Secret holds a token of: the identities its writers (a token job that
    patches it) mint tokens for, through TokenRequests and workload identity, transitively. Named or not, in the
    reader's namespace or not (rbac-good-practices "Listing secrets": list and watch reveal contents too)."""
    writers: dict[str, list[tuple[str, set[str] | None]]] = {}
    for member, r in reach.items():
        for ns, res, verb, names in r.rbac:
            if res in ("secrets", "*") and verb in ("create", "update", "patch", "*"):
                writers.setdefault(member, []).append((ns, set(names.split(",")) if names else None))

    def minted(w: str) -> set[str]:
        """Every identity ``w`` mints a token of: through a TokenRequest, as itself or as an identity it signs in
        as (its workload identity), transitively."""
        seen, out, todo = {w}, set(), [w]
        while todo:
            for t, edge in reach[todo.pop()].becomes.items():
                if t in seen or t not in reach:
                    continue
                if any(e in edge for e in TOKEN_EDGES):
                    out.add(t)
                elif edge != WORKLOAD_IDENTITY:
                    continue
                seen.add(t)
                todo.append(t)
        return out

    for member, r in list(reach.items()):
        for ns, res, verb, names in sorted(r.rbac):
            if res not in ("secrets", "*") or verb not in READ_SECRET_VERBS:
                continue
            read = set(names.split(",")) if names else None
            declared = {k: v for k, v in reach.secret_tokens.items() if covers(ns, k[0]) and (
                read is None or k[1] in read)}
            for (sns, secret), accounts in sorted(declared.items()):
                for t in sorted(accounts - {member}):
                    r.becomes.setdefault(t, f"{verb} secret {secret} in {sns} (a token of {t.split(':')[-1]})")
            for w, written in writers.items():
                for wns, wnames in written:
                    same_ns = covers(ns, wns) or covers(wns, ns)
                    # A Secret whose tokens a token job declares is judged above by what it holds.
                    undeclared = None if wnames is None else {n for n in wnames if (wns, n) not in reach.secret_tokens}
                    overlap = read is None or undeclared is None or read & undeclared
                    if wnames is not None and not undeclared:
                        continue
                    if w != member and same_ns and overlap:
                        for t in sorted(minted(w) - {member}):
                            r.becomes.setdefault(t, f"{verb} secrets in {ns} (tokens {w.split(':')[-1]} writes)")


def link_principals(reach: Reaches) -> None:
    """A GKE workload identity principal and its Kubernetes service account are one identity: edges both ways."""
    for member in list(reach):
        g = gke_principal(member)
        if not g:
            continue
        project, ns, sa = g
        for k in [m for m in reach if m.startswith("k8s:ServiceAccount:")]:
            kns, kcluster, ksa = ksa_parts(k)
            # One pool per project: a principal is its namespace's account in that project's clusters only.
            if cluster_project(kcluster) in (None, project) and ns in ("*", kns) and sa in ("*", ksa):
                reach[k].becomes.setdefault(member, WORKLOAD_IDENTITY)
                if ns != "*" and sa != "*":
                    reach[member].becomes.setdefault(k, WORKLOAD_IDENTITY)
        # A pod can name any service account of its namespace, one no manifest declares included (every
        # namespace has `default`; a grant may name a KSA before it exists): pod creators there become the
        # principal directly, whether or not a manifest declares the KSA.
        for holder, r in list(reach.items()):
            for rns, res, verb, names in sorted(r.rbac):
                run = runs(res, verb)
                token = res == "serviceaccounts/token" and verb in ("create", "*") and (
                    not names or sa in names.split(","))
                rraw, rcluster = split_ns(rns)
                if (run or token) and rraw in ("*", ns) and cluster_project(rcluster) in (None, project) and \
                        holder != member:
                    r.becomes.setdefault(member, f"{verb} {res} in {rns}")


def _under(grant: str, target: str) -> bool:
    """A grant's namespace reaches ``target`` (GKE IAM's unqualified '*': every cluster's)."""
    return grant == "*" or covers(grant, target)


def findings(member: str, r: Reach, reach: Reaches | None = None) -> list[tuple[str, str, str]]:
    """(source, namespace or '*', what) for each Kubernetes path to more: source 'RBAC' (the manifests) or
    'GKE IAM'. ``reach`` gives the declared webhooks' Services and the token jobs' Secrets (K6, K11)."""
    out = []
    hooks = reach.webhook_services if reach is not None else set()
    kubeconfigs = set(reach.secret_tokens) if reach is not None and member not in reach.token_jobs else set()
    own = own_namespace(member)
    for source, tuples in (("RBAC", r.rbac), ("GKE IAM", r.gke)):
        groups: dict[tuple[str, str], set[str]] = {}
        for ns, res, verb, names in tuples:
            raw, cluster = split_ns(ns)
            wide = raw == "*"
            scope = ("cluster-wide" if wide else raw) + (f") (cluster {cluster}" if cluster else "")
            outside = wide or ns != own
            if res.startswith("url:"):
                rule = f"non-resource URL {verb!r}" if verb == "*" else None
            elif verb in RBAC_ESCALATION:
                rule = f"verb {verb!r}"
            elif res == "*" and verb in WRITE_VERBS | {"delete"}:
                rule = f"{verb} on every resource (*)"
            elif runs(res, verb) and outside:
                rule = f"{verb} of pod-making kinds outside its own namespace"
            elif res == CLUSTER_SWITCHES:
                rule = (f"the cluster's own switches (container.clusters.{verb}: Binary Authorization evaluation, "
                        "legacy ABAC, network policy, node accounts)")
            elif res == "certificatesigningrequests/approval" and verb in WRITE_VERBS or res == "signers" and \
                    verb in ("approve", "*"):
                rule = "certificate request approval (a client certificate for any user name)"
            elif res == "persistentvolumes" and verb in WRITE_VERBS:
                rule = "PersistentVolumes (a hostPath volume is the node's filesystem)"
            elif res == "namespaces" and verb in ("update", "patch", "*"):
                rule = "namespace labels (the Pod Security admission level, what network policies select)"
            elif res in WEBHOOK_BACKENDS | {"*"} and verb in WRITE_VERBS | {"delete"} and (
                    hit := sorted(n for wns, n in hooks if _under(ns, wns) and (
                        not names or res != "services" or n in names.split(",")))):
                rule = (f"admission webhook backends ({', '.join(hit)}: whoever answers them sees every object "
                        "the webhook matches, and a mutating one rewrites pods)")
            elif res in ("secrets", "*") and verb in ("update", "patch", "*") and (
                    hit := sorted(n for sns, n in kubeconfigs if _under(ns, sns) and (
                        not names or n in names.split(",")))):
                rule = (f"the Secrets Kueue reads ({', '.join(hit[:4])}: a rewritten kubeconfig points MultiKueue's "
                        "dispatch, and the credentials it sends, at another server)")
            elif res == "secrets" and verb == "create":
                rule = "Secrets created (a service-account-token Secret is any account of the namespace)"
            elif res == "networkpolicies" and verb in WRITE_VERBS | {"delete", "deletecollection"} and outside:
                rule = "network policy writes (opens the Ray and Kueue ports to any pod)"
            elif res == "serviceaccounts/token" and verb in WRITE_VERBS and (wide or outside and not names):
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
