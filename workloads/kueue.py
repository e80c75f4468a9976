"""Queued admission with Kueue: the objects that let jobs wait for slices instead of being flipped by hand.

Pure functions of the stack spec (no Pulumi here), rendered for Kueue v0.19.2 (``kueue.x-k8s.io/v1beta2``,
the storage version of the CRDs vendored in ``vendor/kueue/``):

- a ``ResourceFlavor`` per worker group (slice shape), whose node labels are the TPU labels the group's
  pods already select (accelerator, topology, and the GKE ComputeClass where the pods select one), plus
  one label-less flavor for CPU and memory, which heads, submitters and TPU workers all request;
- one ``ClusterQueue`` whose ``google.com/tpu`` quota is exactly the chips the stack provisions
  (chips per slice x slices of the group), so Kueue admits a job only when its slices are free, and
  admits a multislice job whole (all its pods' quota at once) or not at all;
- the ``LocalQueue`` jobs name (``kueue.x-k8s.io/queue-name``) in the workload namespace;
- the ``WorkloadPriorityClass`` objects jobs name (``kueue.x-k8s.io/priority-class``);
- for slices with a flex-start capacity option, an ``AdmissionCheck`` with a ``ProvisioningRequestConfig``
  (Dynamic Workload Scheduler, ``queued-provisioning.gke.io``) on those groups' flavors only;
- Kueue's manager configuration with the RayJob/RayCluster integrations (:func:`helm_values`, shaped as the chart's
  values; ``workloads/kueue_install.py`` writes it into the vendored release manifest's ConfigMap).

The RayJob side (labels, no ``suspend`` for Kueue to fight over) is in ``workloads/manifests.py``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import yaml

from stackspec import kube, limits, names
from stackspec.model import WORKLOAD_PRIORITIES
from stackspec.rules import kueue as kueue_rules
from stackspec.spec import Capacity, Slice, StackSpec, WorkerGroup
from workloads import manifests

KUEUE_VERSION = "0.19.2"
KUEUE_API = f"{kube.KUEUE_GROUP}/v1beta2"
# The released chart (hack/helm-chart-package.sh pushes it here with the image pinned to the tag): not installed
# (the program applies the release manifest, workloads/kueue_install.py); tests/test_journey.py installs it in its
# place to show why.
CHART = "oci://registry.k8s.io/kueue/charts/kueue"
CHART_VERSION = KUEUE_VERSION
IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"
# The controller image as the release manifest's Deployment names it: what Binary Authorization admits.
IMAGE = f"{IMAGE_REPOSITORY}:v{KUEUE_VERSION}"
NAMESPACE = names.KUEUE_NAMESPACE
RELEASE = "kueue"
# The release manifest (as the chart) holds this Secret empty and Kueue's cert rotator fills it; a read-only
# identity cannot read Secrets, so the drift check leaves it out (cloud rule kueue-chart-webhook-secret).
WEBHOOK_SECRET = f"{RELEASE}-webhook-server-cert"
# The Kueue frameworks the stack uses: RayJobs with their own cluster, and the long-lived RayCluster.
FRAMEWORKS = ("ray.io/rayjob", "ray.io/raycluster")

# Dynamic Workload Scheduler (flex-start with queued provisioning) through Kueue's built-in
# ProvisioningRequest admission check controller (GA since Kueue 0.14: no feature gate to open).
PROVISIONING_CONTROLLER = kueue_rules.PROVISIONING_CONTROLLER
DWS_PROVISIONING_CLASS = "queued-provisioning.gke.io"
DWS_NODE_SELECTOR = "autoscaling.gke.io/provisioning-request"

# Node labels a flavor may carry: those GKE puts on a slice's nodes and the pods select.
FLAVOR_LABEL_KEYS = (kube.ACCELERATOR_LABEL, kube.TOPOLOGY_LABEL, kube.COMPUTE_CLASS_LABEL)
PREEMPTION = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
# A region of a multi-region stack preempts nothing itself: its Kueue sees only its own jobs ("acts like a
# standalone Kueue cluster", concepts/multikueue.md), and the incremental dispatcher offers a job to one region
# first (incrementaldispatcher.go:137-192), so a higher-priority job would evict a running one there while another
# region idles. The manager's ClusterQueue, which holds every queued job against the regions' total, preempts by
# priority instead; evicting a manager Workload removes its copies (multikueue/workload.go:380-393). Kueue's own
# cross-cluster preemption (MultiKueueOrchestratedPreemption) is Alpha and off in 0.19. docs/multikueue.md.
REGION_PREEMPTION = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
QUEUEING_STRATEGY = "BestEffortFIFO"  # a small job may start while a bigger one waits for slices
# WaitForPodsReady is on by default since Kueue 0.19 (30 min to ready, 30 min to recover; cloud rule
# kueue-wait-for-pods-ready). A slice from a ComputeClass fallback (flex-start without queued provisioning,
# Spot) may take hours to arrive after admission: evicting at 30 minutes deletes the pending pods and the
# slice may never land. Jobs whose capacity is queued (DWS) are admitted only once it is there.
# recoveryTimeout 0s turns the recovery eviction off (an elastic job that lost a slice trains on with fewer);
# omitting it would mean "same as timeout". v1beta2 has no `enable` key.
WAIT_FOR_PODS_READY = {"timeout": "24h", "recoveryTimeout": "0s", "blockAdmission": False}


def _meta(spec: StackSpec, name: str, component: str, namespaced: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {
        kube.PART_OF_LABEL: kube.PART_OF_VALUE,
        kube.COMPONENT_LABEL: component,
        kube.MANAGED_BY_LABEL: "pulumi",
        kube.STACK_LABEL: spec.stack,
    }}
    if namespaced:
        meta["namespace"] = spec.storage.namespace
    return meta


def labels(spec: StackSpec, component: str) -> dict[str, str]:
    """The labels every object of the stack carries (policies: required-labels), Kueue's release objects too."""
    return _meta(spec, "", component)["labels"]


def _doc(kind: str, meta: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": kind, "metadata": meta, **body}


# --------------------------------------------------------------------------- capacity


def _queued_flex(option: Capacity) -> bool:
    """A flex-start option whose pool only ProvisioningRequests scale (queuedProvisioning)."""
    return option.flex_start and option.queued_provisioning


def capacity_options(s: Slice) -> list[Capacity]:
    """A slice's capacity options in fallback order (the model makes a single mapping a list of one)."""
    return list(s.capacity)


def capacity_types(s: Slice) -> list[str]:
    return [str(o.type) for o in capacity_options(s)]


def flex_groups(spec: StackSpec) -> list[WorkerGroup]:
    """Worker groups with a slice that may come from flex-start with queued provisioning: Kueue asks the
    Dynamic Workload Scheduler for the whole workload's nodes before it admits one there."""
    return [g for g in spec.groups if any(_queued_flex(o) for s in g.slices for o in capacity_options(s))]


def group_chips(group: WorkerGroup) -> int:
    """What the stack provisions for a worker group: chips per slice x its slices."""
    return group.shape.chips * group.replicas


def group_hosts(group: WorkerGroup) -> int:
    return group.shape.hosts * group.replicas


# --------------------------------------------------------------------------- quantities


def _cpu(value: Decimal) -> str:
    milli = math.ceil(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _memory(value: Decimal) -> str:
    mib = math.ceil(value / 2**20)
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def _requests(resources: dict[str, Any]) -> tuple[Decimal, Decimal]:
    req = resources.get("requests") or resources.get("limits") or {}
    return limits.quantity(str(req.get("cpu", "0"))), limits.quantity(str(req.get("memory", "0")))


def pod_quota(spec: StackSpec) -> tuple[str, str]:
    """CPU and memory for every TPU worker of every slice, plus a Ray head and a submitter per slice.

    Every workload Kueue admits holds at least one slice, so at most as many heads and submitters run
    as there are slices. Rounded up to whole millicores and MiB.
    """
    ray = spec.ray
    worker_cpu, worker_mem = limits.quantity(ray.worker_cpu), limits.quantity(ray.worker_memory)
    head_cpu, head_mem = limits.quantity(ray.head_cpu), limits.quantity(ray.head_memory)
    # KubeRay's submitter pod (K8sJobMode): Kueue accounts for it as a pod set of the RayJob.
    sub_cpu, sub_mem = _requests(manifests.SUBMITTER_RESOURCES)
    hosts = sum(group_hosts(g) for g in spec.groups)
    slices = sum(g.replicas for g in spec.groups)
    cpu = worker_cpu * hosts + (head_cpu + sub_cpu) * slices
    mem = worker_mem * hosts + (head_mem + sub_mem) * slices
    return _cpu(cpu), _memory(mem)


# --------------------------------------------------------------------------- objects


def flavor_labels(spec: StackSpec) -> dict[str, dict[str, str]]:
    """Each worker group's flavor labels: the node labels its TPU pods select, as rendered."""
    out = {}
    for wg in manifests.worker_groups({"kind": "RayCluster", "spec": manifests.ray_cluster_spec(spec)}):
        selector = wg["template"]["spec"].get("nodeSelector", {})
        out[wg["groupName"]] = {k: selector[k] for k in FLAVOR_LABEL_KEYS if k in selector}
    return out


def resource_flavors(spec: StackSpec) -> list[dict[str, Any]]:
    labels = flavor_labels(spec)
    docs = [_doc("ResourceFlavor", _meta(spec, names.pod_flavor(spec.ray.cluster_name), "kueue"), spec={})]
    for g in spec.groups:
        docs.append(_doc("ResourceFlavor", _meta(spec, names.resource_flavor(g.name), "kueue"),
                         spec={"nodeLabels": labels[g.name]}))
    return docs


def tpu_resources(spec: StackSpec) -> list[str]:
    """The resources TPU worker pods request besides CPU and memory."""
    return [kube.TPU_RESOURCE, *([kube.KUEUE_NETDEV_RESOURCE] if spec.dranet else [])]


def cluster_queue(spec: StackSpec) -> dict[str, Any]:
    cpu, memory = pod_quota(spec)
    tpu_flavors = []
    for g in spec.groups:
        quota = [{"name": kube.TPU_RESOURCE, "nominalQuota": str(group_chips(g))}]
        if spec.dranet:
            quota.append({"name": kube.KUEUE_NETDEV_RESOURCE,
                          "nominalQuota": str(len(spec.networks) * group_hosts(g))})
        tpu_flavors.append({"name": names.resource_flavor(g.name), "resources": quota})
    body: dict[str, Any] = {
        # Only the workload namespace's LocalQueue may use the stack's slices.
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": spec.storage.namespace}},
        "queueingStrategy": QUEUEING_STRATEGY,
        "preemption": dict(PREEMPTION if spec.site is None else REGION_PREEMPTION),
        "resourceGroups": [
            {"coveredResources": ["cpu", "memory"],
             "flavors": [{"name": names.pod_flavor(spec.ray.cluster_name),
                          "resources": [{"name": "cpu", "nominalQuota": cpu},
                                        {"name": "memory", "nominalQuota": memory}]}]},
            {"coveredResources": tpu_resources(spec), "flavors": tpu_flavors},
        ],
    }
    if flex := flex_groups(spec):
        body["admissionChecksStrategy"] = {"admissionChecks": [{
            "name": names.provisioning_check(spec.ray.cluster_name),
            "onFlavors": [names.resource_flavor(g.name) for g in flex],
        }]}
    return _doc("ClusterQueue", _meta(spec, names.cluster_queue(spec.ray.cluster_name), "kueue"), spec=body)


def local_queue(spec: StackSpec) -> dict[str, Any]:
    return _doc("LocalQueue", _meta(spec, names.local_queue(spec.ray.cluster_name), "kueue", namespaced=True),
                spec={"clusterQueue": names.cluster_queue(spec.ray.cluster_name)})


def priority_classes(spec: StackSpec) -> list[dict[str, Any]]:
    return [_doc("WorkloadPriorityClass", _meta(spec, name, "kueue"), value=value,
                 description=f"tpu-multislice jobs with priority: {name}")
            for name, value in WORKLOAD_PRIORITIES.items()]


def provisioning_objects(spec: StackSpec) -> list[dict[str, Any]]:
    """The DWS admission check and its config, when a slice may come from flex-start capacity."""
    if not flex_groups(spec):
        return []
    name = names.provisioning_check(spec.ray.cluster_name)
    config = _doc("ProvisioningRequestConfig", _meta(spec, name, "kueue"), spec={
        "provisioningClassName": DWS_PROVISIONING_CLASS,
        # Only the TPU pod sets are provisioned: heads and submitters run on the system pool.
        "managedResources": [kube.TPU_RESOURCE],
        # The admitted pods go to the nodes provisioned for their request, as Kueue's API (v0.19.2
        # provisioningrequestconfig_types.go: "used to target the provisioned nodes") and xpk's DWS config
        # (src/xpk/templates/kueue_config.yaml.j2) set it: GKE labels those nodes with the resize request's name.
        "podSetUpdates": {"nodeSelector": [{"key": DWS_NODE_SELECTOR,
                                            "valueFromProvisioningClassDetail": "ResizeRequestName"}]},
    })
    check = _doc("AdmissionCheck", _meta(spec, name, "kueue"), spec={
        "controllerName": PROVISIONING_CONTROLLER,
        "parameters": {"apiGroup": kube.KUEUE_GROUP, "kind": "ProvisioningRequestConfig", "name": name},
    })
    return [config, check]


def namespace(spec: StackSpec) -> dict[str, Any]:
    """Kueue's own namespace (the chart installs into it, and creates none)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(spec, NAMESPACE, "kueue")}


def all_objects(spec: StackSpec) -> list[dict[str, Any]]:
    """Every Kueue object of the stack, in apply order (what others refer to first)."""
    return [*resource_flavors(spec), *priority_classes(spec), *provisioning_objects(spec),
            cluster_queue(spec), local_queue(spec)]


# --------------------------------------------------------------------------- the Helm chart


def manager_config(spec: StackSpec) -> dict[str, Any]:
    """Kueue's Configuration: the chart's defaults (charts/kueue/values.yaml at v0.19.2), only the Ray
    integrations, and the DRANET device class mapped to a quota resource."""
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        # Jobs without a queue label stay KubeRay's (an operator's paused job, shared-cluster submissions).
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "waitForPodsReady": dict(WAIT_FOR_PODS_READY),
    }
    if spec.dranet:
        config["resources"] = {"deviceClassMappings": [
            {"name": kube.KUEUE_NETDEV_RESOURCE, "deviceClassNames": [kube.NETDEV_DEVICE_CLASS]}]}
    return config


def helm_values(spec: StackSpec) -> dict[str, Any]:
    return {
        "controllerManager": {"manager": {"image": {
            "repository": IMAGE_REPOSITORY, "tag": f"v{KUEUE_VERSION}", "pullPolicy": "IfNotPresent"}}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(spec), sort_keys=False)},
    }

