"""Google Managed Prometheus scraping of the Ray metrics port, as plain ``PodMonitoring`` documents.

One ``monitoring.googleapis.com/v1`` PodMonitoring per RayCluster (the shared one, and each
dedicated job's own), selecting its head and worker pods by KubeRay's labels and scraping
``ray.metricsExportPort`` (every Ray node's metrics agent: TPU duty cycle per chip
``ray_tpu_duty_cycle``, Ray Train's ``ray_train_controller_state``, ...). Pod labels become target
labels, so alerts and the dashboard (``infra/monitoring.py``) group by cluster, worker group and slice.
"""

from __future__ import annotations

from typing import Any

from stackspec import kube
from stackspec.spec import StackSpec
from workloads import manifests

GMP_API = "monitoring.googleapis.com/v1"
SCRAPE_INTERVAL = "30s"
# Prometheus target labels (GMP reserves cluster, namespace, job, instance, project_id, location).
TARGET_LABELS = {
    kube.RAY_CLUSTER_LABEL: "ray_cluster",
    kube.RAY_GROUP_LABEL: "ray_group",
    kube.RAY_NODE_TYPE_LABEL: "ray_node_type",
    kube.RAY_REPLICA_INDEX_LABEL: "ray_replica",  # one replica of a TPU worker group = one slice
    kube.JOB_LABEL: "rayjob",
}
RAY_NODE_TYPES = ("head", "worker")


def pod_monitoring_name(ray_cluster: str) -> str:
    return f"{ray_cluster}-ray-metrics"


def _pod_monitoring(spec: StackSpec, name: str, match_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": GMP_API,
        "kind": "PodMonitoring",
        "metadata": {
            "name": pod_monitoring_name(name),
            "namespace": spec.storage.namespace,
            "labels": {
                kube.PART_OF_LABEL: kube.PART_OF_VALUE,
                kube.COMPONENT_LABEL: "ray-metrics",
                kube.MANAGED_BY_LABEL: "pulumi",
                kube.STACK_LABEL: spec.stack,
            },
        },
        "spec": {
            "selector": {
                "matchLabels": match_labels,
                "matchExpressions": [
                    {"key": kube.RAY_NODE_TYPE_LABEL, "operator": "In", "values": list(RAY_NODE_TYPES)},
                ],
            },
            "endpoints": [{"port": spec.ray.metrics_export_port, "interval": SCRAPE_INTERVAL, "path": "/metrics"}],
            "targetLabels": {
                "fromPod": [{"from": k, "to": v} for k, v in TARGET_LABELS.items()],
                "metadata": ["pod", "container", "node"],
            },
        },
    }


def pod_monitorings(spec: StackSpec) -> list[dict[str, Any]]:
    """A PodMonitoring for the shared RayCluster (if declared) and one per dedicated job's cluster.

    A dedicated job's cluster is named by KubeRay (``<job>-<suffix>``): its pods are selected by the
    job label the RayJob's pod templates carry (:func:`workloads.manifests.ray_job`).
    """
    docs = []
    if manifests.needs_shared_cluster(spec):
        docs.append(_pod_monitoring(spec, spec.ray.cluster_name, {kube.RAY_CLUSTER_LABEL: spec.ray.cluster_name}))
    for job in manifests.declared_jobs(spec):
        if job.cluster == "dedicated":
            docs.append(_pod_monitoring(spec, job.name, {kube.JOB_LABEL: job.name}))
    return docs
