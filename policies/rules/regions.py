"""Rules across the clusters of a multi-region stack (README "Regions", "Across regions: MultiKueue").

A stack is multi-region when a cluster declares a ``MultiKueueConfig`` (the manager); every rule here finds
nothing in a single-region stack. Kubernetes objects are told apart by the provider they go through (one per
cluster, ``names.k8s_provider``); a region's workers are the clusters the MultiKueueConfig lists.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from stackspec import kube, limits, names
from stackspec.regions import MAX_REGIONS
from stackspec.rules import kueue as kueue_rules

from .common import (
    BUCKET,
    BUCKET_GRANTS,
    CLUSTER,
    NODE_POOL,
    RAY_JOB,
    Context,
    Res,
    as_int,
    get,
    grants,
    group_shape,
    is_tpu_group,
    items,
    k8s_name,
    pool_shape,
    pool_slice,
    worker_groups,
)

Violations = list[tuple[Res | None, str]]

KUEUE_TYPE = f"kubernetes:{kube.KUEUE_GROUP}/"
CHART = "kubernetes:helm.sh/v4:Chart"
KUEUE_CHART = "kueue"  # the chart's name, the last part of its OCI reference
# <chart>-<version> on everything Kueue's chart renders (charts/kueue/templates/_helpers.tpl kueue.labels).
HELM_CHART_LABEL = "helm.sh/chart"
# Kueue as its release manifest installs it (workloads/kueue_install.py): the controller Deployment's image tag.
KUEUE_DEPLOYMENT = ("kubernetes:apps/v1:Deployment", "kueue-controller-manager")
KUEUE_IMAGE = re.compile(r"/kueue/kueue:v(\S+)$")
# GKE's Kubernetes versions, 1.35.2-gke.1842000 (https://cloud.google.com/kubernetes-engine/versioning).
_VERSION = re.compile(r"^(\d+)\.(\d+)")
# Kubernetes' version skew policy: the API servers one client talks to are within one minor version of each
# other (https://kubernetes.io/releases/version-skew-policy/, "kube-apiserver"). MultiKueue writes the manager's
# objects into each worker's API server, and GKE's Ray add-on brings the KubeRay its cluster's GKE version comes
# with (https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/concepts/overview: "GKE automatically
# installs and hosts the KubeRay operator"; the version is not published): clusters further apart risk fields one
# side drops. GKE itself keeps nodes within two minors of their control plane
# (https://cloud.google.com/kubernetes-engine/versioning, "Version support").
MAX_MINOR_SKEW = 1


def _cluster(r: Res) -> str | None:
    """The cluster a Kubernetes object is applied to (its provider's name without the suffix)."""
    suffix = names.k8s_provider("")
    if r.provider and r.provider.endswith(suffix):
        return r.provider[: -len(suffix)]
    return r.provider


def _labels(r: Res) -> Mapping[str, Any]:
    labels = get(r.props, "metadata.labels", {})
    return labels if isinstance(labels, Mapping) else {}


def _kueue_docs(resources: Sequence[Res]) -> dict[str | None, list[dict[str, Any]]]:
    """Every cluster's Kueue objects as documents."""
    out: dict[str | None, list[dict[str, Any]]] = {}
    for r in resources:
        if r.type.startswith(KUEUE_TYPE):
            doc = {"kind": r.type.rsplit(":", 1)[-1], **dict(r.props)}
            doc.setdefault("metadata", {"name": r.name})
            out.setdefault(_cluster(r), []).append(doc)
    return out


def _by_name(docs: Sequence[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {k8s_name(d): d for d in docs if d["kind"] == kind}


def _topology(resources: Sequence[Res]) -> tuple[str, list[str]] | None:
    """(the manager, its workers in dispatch order) when the stack has a MultiKueueConfig, else None. The config
    lists MultiKueueClusters, each named after its worker's cluster (``names.multikueue_cluster``)."""
    by_docs = _kueue_docs(resources)
    clusters = {names.multikueue_cluster(str(c)): str(c) for c in by_docs if c is not None}
    for cluster, docs in by_docs.items():
        for config in (d for d in docs if d["kind"] == "MultiKueueConfig"):
            return str(cluster), [clusters.get(str(c), str(c)) for c in items(get(config, "spec.clusters", []))]
    return None


def _manager_queues(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manager's ClusterQueues that dispatch through MultiKueue."""
    checks = kueue_rules.multikueue_checks(docs)
    return [d for d in docs if d["kind"] == "ClusterQueue"
            and any(c["name"] in checks for c in kueue_rules.admission_checks(d))]


# --------------------------------------------------------------------------- versions


def _minor(version: Any) -> tuple[int, int] | None:
    m = _VERSION.match(str(version or ""))
    return (int(m[1]), int(m[2])) if m else None


def same_versions(resources: Sequence[Res], ctx: Context) -> Violations:
    """Kueue (its release objects, or a chart) is the same version on every cluster, the manager included (Kueue's
    MultiKueue needs the same Kueue on both sides: site docs concepts/multikueue.md), and GKE's Ray add-on serves
    RayJobs on each."""
    if _topology(resources) is None:
        return []
    charts: dict[str, tuple[Res, str]] = {}
    for r in resources:
        # The Chart's own inputs (offline), or the objects it renders (labelled helm.sh/chart: kueue-<version>).
        if r.type == CHART and str(get(r.props, "chart", "")).rstrip("/").rsplit("/", 1)[-1] == KUEUE_CHART:
            charts[str(_cluster(r))] = (r, str(get(r.props, "version", "unpinned")))
        elif (label := str(_labels(r).get(HELM_CHART_LABEL, ""))).startswith(f"{KUEUE_CHART}-"):
            charts.setdefault(str(_cluster(r)), (r, label[len(KUEUE_CHART) + 1:]))
        elif (r.type, get(r.props, "metadata.name")) == KUEUE_DEPLOYMENT:
            for c in get(r.props, "spec.template.spec.containers", []) or []:
                if m := KUEUE_IMAGE.search(str(c.get("image", ""))):
                    charts[str(_cluster(r))] = (r, m[1])
    versions = {c: v for c, (_, v) in charts.items()}
    if len(set(versions.values())) > 1:
        first = next(iter(charts.values()))[0]
        return [(first, f"Kueue's chart differs between clusters: {versions}; MultiKueue runs one Kueue version "
                        "on the manager and every worker (pin workloads/kueue.py KUEUE_VERSION once)")]
    return []


def gke_version_skew(resources: Sequence[Res], ctx: Context) -> Violations:
    """The clusters' GKE versions are within one minor version of each other."""
    if _topology(resources) is None:
        return []
    clusters = [(r, _minor(get(r.props, "minMasterVersion"))) for r in resources if r.type == CLUSTER]
    known = [(r, v) for r, v in clusters if v is not None]
    if not known:
        return []
    low = min(v for _, v in known)
    out: Violations = []
    for r, v in known:
        if v[0] != low[0] or v[1] - low[1] > MAX_MINOR_SKEW:
            oldest = next(get(o.props, "name") for o, w in known if w == low)
            out.append((r, f"cluster {get(r.props, 'name')} runs GKE {get(r.props, 'minMasterVersion')}, more than "
                           f"{MAX_MINOR_SKEW} minor version above {oldest} "
                           f"({'.'.join(map(str, low))}): MultiKueue mirrors objects between their API servers "
                           "and each runs the KubeRay of its GKE version; keep every cluster within one minor"))
    return out


# --------------------------------------------------------------------------- checkpoints


def one_checkpoint_location(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every region's checkpoint identity binds the same bucket: a run resumes wherever it lands."""
    if _topology(resources) is None:
        return []
    buckets = [r for r in resources if r.type == BUCKET]
    out: Violations = []
    if len(buckets) != 1:
        out.append((buckets[1] if len(buckets) > 1 else None,
                    f"{len(buckets)} checkpoint buckets ({[get(b.props, 'name') for b in buckets]}): a multi-region "
                    "stack keeps one bucket every region reads (storage.location: a dual- or multi-region)"))
    bound = {str(get(r.props, "bucket")) for r in resources if r.type in BUCKET_GRANTS
             and any(".svc.id.goog" in m for _, m in grants(r.props))}  # workload identity principals
    if len(bound) > 1:
        out.append((None, f"the regions' checkpoint identities bind different buckets {sorted(bound)}: a job "
                          "resumed in another region would not find its checkpoints"))
    elif len(buckets) == 1 and bound and bound != {str(get(buckets[0].props, "name"))}:
        # One policy serves every region (infra/checkpoints.py SharedCheckpointBucket): on another bucket, no region
        # reads the checkpoints.
        out.append((None, f"the regions' checkpoint identity binds {sorted(bound)}, not the checkpoint bucket "
                          f"{get(buckets[0].props, 'name')}: no region could read or write its checkpoints"))
    return out


# --------------------------------------------------------------------------- placement


def _slices(resources: Sequence[Res]) -> dict[str, dict[tuple[str, str], int]]:
    """Each cluster's TPU slices per (accelerator, topology), a slice's fallback pools counted once."""
    out: dict[str, dict[tuple[str, str], set[str]]] = {}
    for r in resources:
        if r.type != NODE_POOL or (shape := pool_shape(r.props)) is None:
            continue
        out.setdefault(str(get(r.props, "cluster")), {}).setdefault(
            (shape.gke_accelerator, shape.topology), set()).add(pool_slice(r))
    return {c: {k: len(v) for k, v in shapes.items()} for c, shapes in out.items()}


def _needs(job: Res) -> tuple[dict[tuple[str, str], int], list[str]]:
    """The slices a RayJob's worker groups ask for, per shape; the groups it cannot read."""
    need: dict[tuple[str, str], int] = {}
    unread = []
    for path, group in worker_groups(job.type, job.props):
        if not is_tpu_group(group):
            continue
        shape = group_shape(group)
        if shape is None:
            unread.append(path)
            continue
        key = (shape.gke_accelerator, shape.topology)
        need[key] = need.get(key, 0) + (as_int(get(group, "replicas")) or 0)
    return need, unread


def queued_jobs_placeable(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every RayJob queued on the manager fits at least one worker: its slice shapes and counts."""
    top = _topology(resources)
    if top is None:
        return []
    manager, workers = top
    slices = _slices(resources)
    out: Violations = []
    for job in resources:
        if job.type != RAY_JOB or _cluster(job) != manager:
            continue
        need, unread = _needs(job)
        if unread:
            out.append((job, f"RayJob {k8s_name(job.props)}: worker groups {unread} name no valid TPU slice shape"))
            continue
        fits = [w for w in workers if all(slices.get(w, {}).get(k, 0) >= n for k, n in need.items())]
        if not fits:
            shown = ", ".join(f"{n} x {a} {t}" for (a, t), n in need.items())
            out.append((job, f"RayJob {k8s_name(job.props)} needs {shown} and no worker ({', '.join(workers)}) "
                             "has them: MultiKueue would keep it queued for good"))
    return out


# --------------------------------------------------------------------------- quota and Kueue's rules


def _quota(cq: Mapping[str, Any]) -> dict[tuple[str, str], Decimal]:
    out: dict[tuple[str, str], Decimal] = {}
    for rg in items(get(cq, "spec.resourceGroups", [])):
        for fl in items(get(rg, "flavors", [])):
            for res in items(get(fl, "resources", [])):
                q = limits.quantity(str(get(res, "nominalQuota", "0")))
                key = (str(get(fl, "name")), str(get(res, "name")))
                out[key] = out.get(key, Decimal(0)) + (q or Decimal(0))
    return out


def manager_quota_is_workers_total(resources: Sequence[Res], ctx: Context) -> Violations:
    """The manager's MultiKueue ClusterQueue holds exactly the workers' total quota, flavor by flavor."""
    top = _topology(resources)
    if top is None:
        return []
    manager, workers = top
    docs = _kueue_docs(resources)
    total: dict[tuple[str, str], Decimal] = {}
    for w in workers:
        for cq in (d for d in docs.get(w, []) if d["kind"] == "ClusterQueue"):
            for key, q in _quota(cq).items():
                total[key] = total.get(key, Decimal(0)) + q
    out: Violations = []
    for cq in _manager_queues(docs.get(manager, [])):
        got = _quota(cq)
        diff = {f"{f}/{r}": (str(got.get((f, r), 0)), str(total.get((f, r), 0)))
                for f, r in sorted(set(got) | set(total)) if got.get((f, r), 0) != total.get((f, r), 0)}
        if diff:
            res = next((r for r in resources if r.type.startswith(KUEUE_TYPE) and _cluster(r) == manager
                        and k8s_name(r.props) == k8s_name(cq)), None)
            out.append((res, f"ClusterQueue {k8s_name(cq)} on the manager: quota (manager, workers' total) "
                             f"differs for {diff}: the manager would admit what no worker holds, or hold back what "
                             "they do (Kueue concepts/multikueue.md)"))
    return out


def multikueue_consistent(resources: Sequence[Res], ctx: Context) -> Violations:
    """Kueue's ClusterQueue rules on every cluster (stackspec/rules/kueue.py); the MultiKueueConfig's clusters
    each a declared MultiKueueCluster, never the manager, within Kueue's 20; every worker mirrors the manager's
    LocalQueues (same namespace and name) and WorkloadPriorityClasses (Kueue's setup_multikueue.md)."""
    top = _topology(resources)
    if top is None:
        return []
    manager, workers = top
    docs = _kueue_docs(resources)
    out: Violations = []
    for cluster, ds in docs.items():
        out += [(None, f"cluster {cluster}: {p}") for p in kueue_rules.cluster_queue_rules(ds)]
    on_manager = docs.get(manager, [])
    declared = _by_name(on_manager, "MultiKueueCluster")
    if missing := [w for w in workers if names.multikueue_cluster(w) not in declared]:
        out.append((None, f"the MultiKueueConfig lists {missing} with no MultiKueueCluster on the manager"))
    if manager in workers:
        out.append((None, f"the manager {manager} is listed as its own worker"))
    if not 1 <= len(workers) <= MAX_REGIONS:
        out.append((None, f"the MultiKueueConfig lists {len(workers)} clusters; Kueue takes 1 to {MAX_REGIONS}"))
    if len(set(workers)) != len(workers):
        out.append((None, f"the MultiKueueConfig lists a cluster twice: {workers}"))
    want = {(get(d, "metadata.namespace"), k8s_name(d)) for d in on_manager if d["kind"] == "LocalQueue"}
    priorities = {k8s_name(d) for d in on_manager if d["kind"] == "WorkloadPriorityClass"}
    for w in workers:
        ds = docs.get(w, [])
        have = {(get(d, "metadata.namespace"), k8s_name(d)) for d in ds if d["kind"] == "LocalQueue"}
        if gone := sorted(want - have, key=str):
            out.append((None, f"worker {w} lacks the manager's LocalQueues {gone}: MultiKueue creates the job "
                              "there in the same namespace and queue"))
        if gone := sorted(priorities - {k8s_name(d) for d in ds if d["kind"] == "WorkloadPriorityClass"}):
            out.append((None, f"worker {w} lacks the manager's WorkloadPriorityClasses {gone}"))
    return out
