"""Rules for queued admission with Kueue: RayJobs vs the queues, the ClusterQueue's TPU quota vs the slices.

Kueue's own webhooks refuse some of these only when the object reaches the cluster (a RayJob on an
existing cluster with a queue, no ``shutdownAfterJobFinishes``, in-tree autoscaling); others it never
refuses (a queue that does not exist leaves the job pending for good, a quota above what the node pools
hold admits jobs whose pods then never schedule). Each takes every resource of the stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stackspec import kube
from stackspec.rules import kueue as kueue_rules

from .common import NODE_POOL, RAY_CLUSTER, RAY_JOB, Context, Res, as_int, get, items, k8s_name, pool_shape, pool_slice

Violations = list[tuple[Res | None, str]]

KUEUE_TYPE = f"kubernetes:{kube.KUEUE_GROUP}/"


def _kueue(resources: Sequence[Res], kind: str) -> list[Res]:
    return [r for r in resources if r.type.startswith(KUEUE_TYPE) and r.type.endswith(f":{kind}")]


def _of(resources: Sequence[Res], type_: str) -> list[Res]:
    return [r for r in resources if r.type == type_]


def _labels(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return get(props, "metadata.labels", {}) or {}


def _queue(props: Mapping[str, Any]) -> str | None:
    return _labels(props).get(kube.KUEUE_QUEUE_LABEL)


def rayjob_names_a_queue(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every RayJob Kueue can manage names a LocalQueue the stack declares in its namespace, bound to a
    declared ClusterQueue, at a declared WorkloadPriorityClass; a RayJob on the long-lived cluster names none."""
    local = {(get(r.props, "metadata.namespace", "default"), k8s_name(r.props)): get(r.props, "spec.clusterQueue")
             for r in _kueue(resources, "LocalQueue")}
    cluster_queues = {k8s_name(r.props) for r in _kueue(resources, "ClusterQueue")}
    priorities = {k8s_name(r.props) for r in _kueue(resources, "WorkloadPriorityClass")}
    out: Violations = []
    for r in _of(resources, RAY_JOB):
        name, queue = k8s_name(r.props), _queue(r.props)
        if get(r.props, "spec.clusterSelector"):
            if queue:
                out.append((r, f"RayJob {name} runs on an existing RayCluster (clusterSelector): Kueue does not "
                               f"manage it, so its queue label {queue} queues nothing; drop it or give the job "
                               "its own cluster"))
            continue
        if get(r.props, "spec.suspend") is True and not queue:
            continue  # an operator's pause, outside Kueue
        ns = get(r.props, "metadata.namespace", "default")
        if not queue:
            out.append((r, f"RayJob {name} brings its own cluster but names no LocalQueue "
                           f"({kube.KUEUE_QUEUE_LABEL}): it would take its slices without waiting for quota"))
        elif (ns, queue) not in local:
            out.append((r, f"RayJob {name} names LocalQueue {queue}, which the stack does not declare in "
                           f"namespace {ns}; the job would stay pending for good"))
        elif local[(ns, queue)] not in cluster_queues:
            out.append((r, f"RayJob {name}: LocalQueue {queue} points at ClusterQueue {local[(ns, queue)]}, "
                           "which the stack does not declare"))
        priority = _labels(r.props).get(kube.KUEUE_PRIORITY_LABEL)
        if priority and priority not in priorities:
            out.append((r, f"RayJob {name} names WorkloadPriorityClass {priority}, which the stack does not "
                           f"declare; declared: {', '.join(sorted(priorities)) or 'none'}"))
    return out


def queued_rayjob_lifecycle(resources: Sequence[Res], ctx: Context) -> Violations:
    """A RayJob (or RayCluster) Kueue manages follows Kueue's rules: its own cluster, deleted when the job
    ends, no in-tree autoscaling, and no ``suspend`` of ours for Kueue to fight over."""
    out: Violations = []
    for r in _of(resources, RAY_JOB) + _of(resources, RAY_CLUSTER):
        if not _queue(r.props) or get(r.props, "spec.clusterSelector"):
            continue
        kind, name = ("RayJob" if r.type == RAY_JOB else "RayCluster"), k8s_name(r.props)
        cluster = get(r.props, "spec.rayClusterSpec") if r.type == RAY_JOB else get(r.props, "spec")
        if r.type == RAY_JOB:
            if not isinstance(cluster, Mapping):
                out.append((r, f"RayJob {name} is queued by Kueue but has no rayClusterSpec: Kueue manages only "
                               "RayJobs that bring their own cluster"))
                continue
            if get(r.props, "spec.shutdownAfterJobFinishes") is not True:
                out.append((r, f"RayJob {name} is queued by Kueue but shutdownAfterJobFinishes is not true: its "
                               "cluster would keep the queue's quota after the job ends"))
        if get(cluster, "enableInTreeAutoscaling") is True:
            out.append((r, f"{kind} {name} is queued by Kueue with enableInTreeAutoscaling: Kueue admits a fixed "
                           "size (autoscaling needs its workload slicing); set replicas instead"))
        if get(r.props, "spec.suspend") is not None:
            out.append((r, f"{kind} {name} is queued by Kueue but sets spec.suspend: Kueue suspends and resumes "
                           "it; a value of ours would be re-applied over Kueue's"))
    return out


def _provisioned(resources: Sequence[Res]) -> dict[tuple[str, str], int]:
    """Chips the node pools provision per (accelerator, topology): chips per slice x distinct slices
    (a slice's fallback pools carry the same slice label and count once)."""
    slices: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    for r in _of(resources, NODE_POOL):
        shape = pool_shape(r.props)
        if shape is None:
            continue
        key = (shape.gke_accelerator, shape.topology)
        # Per cluster: a multi-region stack's regions may name their slices alike.
        slices.setdefault(key, {})[(str(get(r.props, "cluster")), pool_slice(r))] = shape.chips
    return {k: sum(v.values()) for k, v in slices.items()}


def _dispatching(resources: Sequence[Res]) -> set[tuple[str | None, str]]:
    """(provider, name) of the ClusterQueues that dispatch through MultiKueue: a multi-region manager's queue
    holds the workers' total again (policies/rules/regions.py checks it), its flavors carry no node labels."""
    checks = {(r.provider, k8s_name(r.props)) for r in _kueue(resources, "AdmissionCheck")
              if get(r.props, "spec.controllerName") == kueue_rules.MULTIKUEUE_CONTROLLER}
    return {(cq.provider, k8s_name(cq.props)) for cq in _kueue(resources, "ClusterQueue")
            if any((cq.provider, c["name"]) in checks for c in kueue_rules.admission_checks(dict(cq.props)))}


def tpu_quota_matches_slices(resources: Sequence[Res], ctx: Context) -> Violations:
    """The ClusterQueues' ``google.com/tpu`` quota for each slice shape is the chips the stack provisions (each
    cluster's queue its own flavors; a MultiKueue manager's queue is not counted again)."""
    flavors = {(r.provider, k8s_name(r.props)): get(r.props, "spec.nodeLabels", {}) or {}
               for r in _kueue(resources, "ResourceFlavor")}
    provisioned = _provisioned(resources)
    dispatching = _dispatching(resources)
    quota: dict[tuple[str, str], int] = {}
    out: Violations = []
    for cq in _kueue(resources, "ClusterQueue"):
        if (cq.provider, k8s_name(cq.props)) in dispatching:
            continue
        for rg in items(get(cq.props, "spec.resourceGroups", [])):
            for fl in items(get(rg, "flavors", [])):
                for res in items(get(fl, "resources", [])):
                    if get(res, "name") != kube.TPU_RESOURCE:
                        continue
                    labels = flavors.get((cq.provider, str(get(fl, "name"))))
                    if labels is None:
                        out.append((cq, f"ClusterQueue {k8s_name(cq.props)}: flavor {get(fl, 'name')} is not a "
                                        "declared ResourceFlavor"))
                        continue
                    key = (labels.get(kube.ACCELERATOR_LABEL), labels.get(kube.TOPOLOGY_LABEL))
                    chips = as_int(get(res, "nominalQuota")) or 0
                    quota[key] = quota.get(key, 0) + chips
                    if key not in provisioned:
                        out.append((cq, f"ClusterQueue {k8s_name(cq.props)}: flavor {get(fl, 'name')} "
                                        f"({key[0]} {key[1]}) has {chips} TPU chips of quota but no node pool "
                                        "provisions that slice shape"))
    for key, chips in provisioned.items():
        if key in quota and quota[key] != chips:
            out.append((None, f"TPU quota for {key[0]} {key[1]} is {quota[key]} chips, the slices provision "
                              f"{chips}: Kueue would admit jobs that cannot schedule, or keep slices idle"))
        elif key not in quota and _kueue(resources, "ClusterQueue"):
            out.append((None, f"no ClusterQueue flavor has quota for {key[0]} {key[1]} ({chips} chips "
                              "provisioned): jobs on those slices can never be admitted"))
    return out
