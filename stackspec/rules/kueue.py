"""Kueue's rules: on a stack's capacity options, and on a cluster's queue objects that no CRD schema expresses
(pure functions of documents). Kueue v0.19.2.

The queue-object rules are read by ``workloads/multikueue.py`` (what it renders) and by the policies (what a stack
declares on each cluster), so each rule is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..model.types import _ns

if TYPE_CHECKING:
    from ..model.stack import StackSpec

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"  # apis/kueue/v1beta2/multikueue_types.go
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"  # apis/kueue/v1beta2/provisioningrequestconfig_types.go


def multikueue_checks(docs: Sequence[dict[str, Any]]) -> set[str]:
    """The names of the AdmissionChecks run by MultiKueue among ``docs``."""
    return {d["metadata"]["name"] for d in docs
            if d.get("kind") == "AdmissionCheck" and (d.get("spec") or {}).get("controllerName") ==
            MULTIKUEUE_CONTROLLER}


def admission_checks(cluster_queue: dict[str, Any]) -> list[dict[str, Any]]:
    """A ClusterQueue's admission checks, from either field (``admissionChecksStrategy`` or the list)."""
    spec = cluster_queue.get("spec") or {}
    checks = list((spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or [])
    return [*checks, *({"name": n} for n in spec.get("admissionChecks") or [])]


def cluster_queue_rules(docs: Sequence[dict[str, Any]]) -> list[str]:
    """Kueue's rules on a ClusterQueue's admission checks that no schema expresses: a queue breaking them
    stays inactive (pkg/cache/scheduler/clusterqueue.go at v0.19.2, lines 253-262 and 334-346): its flavors and
    checks exist, at most one MultiKueue check, never per flavor, and no ProvisioningRequest check beside it.
    ``docs``: every Kueue object of one cluster."""
    controllers = {d["metadata"]["name"]: (d.get("spec") or {}).get("controllerName")
                   for d in docs if d["kind"] == "AdmissionCheck"}
    flavors = {d["metadata"]["name"] for d in docs if d["kind"] == "ResourceFlavor"}
    out = []
    for cq in (d for d in docs if d["kind"] == "ClusterQueue"):
        name = cq["metadata"]["name"]
        checks = admission_checks(cq)
        mk = [c for c in checks if controllers.get(c["name"]) == MULTIKUEUE_CONTROLLER]
        if len(mk) > 1:
            out.append(f"ClusterQueue {name}: more than one MultiKueue check ({[c['name'] for c in mk]})")
        if any(c.get("onFlavors") for c in mk):
            out.append(f"ClusterQueue {name}: a MultiKueue check cannot apply per flavor (onFlavors)")
        if mk and any(controllers.get(c["name"]) == PROVISIONING_CONTROLLER for c in checks):
            out.append(f"ClusterQueue {name}: a ProvisioningRequest check beside MultiKueue (it belongs on the "
                       "workers' queues)")
        if missing := [c["name"] for c in checks if c["name"] not in controllers]:
            out.append(f"ClusterQueue {name}: admission checks not declared: {missing}")
        used = [f["name"] for g in (cq.get("spec") or {}).get("resourceGroups") or [] for f in g.get("flavors") or []]
        if missing := [f for f in used if f not in flavors]:
            out.append(f"ClusterQueue {name}: ResourceFlavors not declared: {missing}")
    return out


def queued_provisioning_alone(capacity: Sequence[Any]) -> str | None:
    """Queued provisioning (DWS) only as a slice's one capacity option.

    Kueue admits a workload on a flavor gated by a ProvisioningRequest check only once the request is provisioned,
    and the check's ProvisioningRequestConfig pins the pods to the provisioned nodes (``podSetUpdates.nodeSelector``
    ``autoscaling.gke.io/provisioning-request``, kueue v0.19.2 ``apis/kueue/v1beta2/provisioningrequestconfig_types.go``
    "podSetUpdates specifies the update of the workload's PodSetUpdates which are used to target the provisioned
    nodes"); a pool with queued provisioning grows only through ProvisioningRequests (terraform-provider-google
    ``resource_container_node_pool.go``: "obtainable solely through the ProvisioningRequest API"). The slices of a
    worker group share one flavor, so other options beside it would never be used: every job of the group would
    wait for DWS."""
    queued = [c for c in capacity if getattr(c, "queued_provisioning", False)]
    if queued and len(capacity) > 1:
        others = [c.type for c in capacity if not getattr(c, "queued_provisioning", False)]
        return (f"queuedProvisioning is the slice's only way to capacity: Kueue's DWS check gates the worker group's "
                f"flavor and pins its pods to the provisioned nodes, so the other options {others} would never be "
                "used; list flex-start with queuedProvisioning alone, or drop queuedProvisioning")
    return None


# kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/rayjob/rayjob_webhook.go (validateCreate): "None of the
# workerGroups should be named "head"" (field.Forbidden: "%q is reserved for the head group"; the head's PodSet is
# headGroupPodSetName = "head"), and field.TooMany(...workerGroupSpecs, len, 7): a Workload has at most 8 PodSets.
KUEUE_HEAD_POD_SET = "head"
KUEUE_MAX_WORKER_GROUPS = 7
# ray-project/kuberay ray-operator/controllers/ray/utils/constant.go: RayNodeHeadGroupLabelValue = "headgroup",
# "the value for the RayNodeGroupLabelKey label on a head node": a worker group of that name shares the head's label.
KUBERAY_HEAD_GROUP = "headgroup"


def worker_groups(spec: StackSpec, fail) -> None:
    """Worker group names Kueue's RayJob webhook or KubeRay reserve for the head, and at most 7 groups."""
    first = {}
    for i, s in enumerate(spec.slices):
        first.setdefault(s.group, i)
    for group, i in first.items():
        if group in (KUEUE_HEAD_POD_SET, KUBERAY_HEAD_GROUP):
            owner = "Kueue's RayJob webhook" if group == KUEUE_HEAD_POD_SET else "KubeRay"
            fail(_ns(f"slices[{i}].group"), group, f"{group!r} is reserved for the head group ({owner}: the head's "
                 f"{'PodSet' if group == KUEUE_HEAD_POD_SET else 'ray.io/group label'}); name the worker group "
                 "otherwise, e.g. tpu-v6e-4x4")
    if len(first) > KUEUE_MAX_WORKER_GROUPS:
        fail(_ns("slices"), list(first), f"{len(first)} worker groups; Kueue's RayJob webhook admits at most "
             f"{KUEUE_MAX_WORKER_GROUPS} (a Workload's PodSets: the head and 7 groups)")
