"""GKE ComputeClasses: each worker group's capacity options, in the order GKE should try them.

One cluster-scoped ``cloud.google.com/v1`` ``ComputeClass`` per Ray worker group, named
``names.compute_class(group)``. Each priority rule is one capacity option of the group's slices
(``stackspec.model.Capacity``), in the spec's order, carrying the slice shape as GKE's ``tpu``
rule (type = the GKE accelerator, count = chips per host, topology). The pods of the group
select the class (:func:`pod_selector`); the node pools the stack creates for it carry the
class label and taint (``infra/slice_pool.py``), or GKE creates them itself when the slices ask
for ``nodePoolAutoCreation``.

GKE publishes no CRD schema for ComputeClass: the fields used here, with their documentation
pages, are in ``tests/reference/computeclass/`` (schema.json and README.md), and the tests
validate every rendered class against it.
"""

from __future__ import annotations

from typing import Any

from stackspec import kube
from stackspec.spec import Capacity, StackSpec, WorkerGroup
from stackspec.tpu import SliceShape

API_VERSION = "cloud.google.com/v1"
KIND = "ComputeClass"
# No capacity in any option: leave the pods pending rather than scale up nodes outside the class
# (ScaleUpAnyway would create default nodes with no TPUs at all).
WHEN_UNSATISFIABLE = "DoNotScaleUp"
# Reservation affinities as a ComputeClass names them.
RESERVATION_AFFINITY = {"SPECIFIC": "Specific", "ANY": "AnyBestEffort"}


def tpu_rule(shape: SliceShape) -> dict[str, Any]:
    """GKE's ``tpu`` priority field: one node of the slice (count is the chips of one host)."""
    return {"type": shape.gke_accelerator, "count": shape.chips_per_host, "topology": shape.topology}


def priority(shape: SliceShape, option: Capacity) -> dict[str, Any]:
    """One priority rule: the slice shape and how this option gets its VMs."""
    rule: dict[str, Any] = {"tpu": tpu_rule(shape)}
    if option.type in ("spot", "on-demand"):
        rule["spot"] = option.spot
    elif option.flex_start:
        rule["flexStart"] = {"enabled": True}
        if option.max_run_duration:
            rule["maxRunDurationSeconds"] = option.max_run_duration
    elif option.type == "reservation":
        reservations: dict[str, Any] = {"affinity": RESERVATION_AFFINITY[option.affinity or "SPECIFIC"]}
        if option.reservation:
            specific: dict[str, Any] = {"name": option.reservation}
            if option.project:
                specific["project"] = option.project
            reservations["specific"] = [specific]
        rule["reservations"] = reservations
    return rule


def compute_class(spec: StackSpec, group: WorkerGroup) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": group.compute_class,
            "labels": {
                kube.PART_OF_LABEL: kube.PART_OF_VALUE,
                kube.COMPONENT_LABEL: "compute-class",
                kube.MANAGED_BY_LABEL: "pulumi",
                kube.STACK_LABEL: spec.stack,
                kube.GROUP_LABEL: group.name,
            },
        },
        "spec": {
            "priorities": [priority(group.shape, c) for c in group.capacity],
            "nodePoolAutoCreation": {"enabled": group.node_pool_auto_creation},
            # Moving a training pod to a preferred option that came back kills the run: never.
            "activeMigration": {"optimizeRulePriority": False},
            "whenUnsatisfiable": WHEN_UNSATISFIABLE,
        },
    }


def compute_classes(spec: StackSpec) -> list[dict[str, Any]]:
    """One ComputeClass per worker group, in the groups' order."""
    return [compute_class(spec, g) for g in spec.groups]


def pod_selector(group: WorkerGroup) -> dict[str, str]:
    """What a pod of the group selects: its class (GKE's ``cloud.google.com/compute-class`` node label)."""
    return {kube.COMPUTE_CLASS_LABEL: group.compute_class}


def pod_toleration(group: WorkerGroup) -> dict[str, str]:
    """The class's taint, tolerated. GKE adds it to pods that select the class; written out so the
    pod spec says where it may run on its own."""
    return {"key": kube.COMPUTE_CLASS_LABEL, "operator": "Equal", "value": group.compute_class,
            "effect": "NoSchedule"}
