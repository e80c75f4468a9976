"""Kubernetes, GKE and KubeRay facts the project's layers share: labels, drivers, device classes.

Written once here; workloads render them, policies and drills look for them.
"""

from __future__ import annotations

from .names import PART_OF, PROJECT
from .tpu import ACCELERATOR_LABEL, DRANET_LABEL, TOPOLOGY_LABEL, TPU_RESOURCE

__all__ = ["ACCELERATOR_LABEL", "DRANET_LABEL", "TOPOLOGY_LABEL", "TPU_RESOURCE"]

# The project's labels and annotations.
PART_OF_LABEL = "app.kubernetes.io/part-of"
COMPONENT_LABEL = "app.kubernetes.io/component"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
STACK_LABEL = f"{PROJECT}/stack"
JOB_LABEL = f"{PROJECT}/job"
SLICE_LABEL = f"{PROJECT}/slice"  # on each slice's nodes
GROUP_LABEL = f"{PROJECT}/group"  # on each slice's nodes: its Ray worker group
TRAINER_HASH_ANNOTATION = f"{PROJECT}/trainer-sha256"
PART_OF_VALUE = PART_OF

# KubeRay's labels on the pods it creates.
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"

# GKE.
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
# GKE ComputeClass: pods select a class with this node label; node pools the stack creates for a
# class carry it as a label and as a NoSchedule taint (GKE adds the toleration to pods selecting it).
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
CAPACITY_LABEL = f"{PROJECT}/capacity"  # on each slice pool's nodes: its capacity option's type
# Pods reach GCS through workload identity: schedule them where the metadata server runs.
METADATA_SERVER_SELECTOR = {"iam.gke.io/gke-metadata-server-enabled": "true"}
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
NETDEV_DEVICE_CLASS = "netdev.google.com"  # GKE managed DRANET's network device class

# Kueue (kubernetes-sigs/kueue v0.19.2, pkg/controller/constants): the LocalQueue a job is queued in and
# its WorkloadPriorityClass, as labels on the RayJob (or RayCluster) Kueue manages.
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Kueue counts DRA devices only through a device-class mapping in its configuration (KueueDRAIntegration,
# on by default since 0.18): the DRANET NICs as this quota resource, or the TPU pods stay inadmissible.
KUEUE_NETDEV_RESOURCE = f"{PROJECT}/netdev"

# Ray token auth (KubeRay >= 1.5.1 authOptions.mode: token): KubeRay's Secret, named after the
# RayCluster, holds the token under this key; Ray's dashboard also reads it from this header, the
# one a proxy (the API server's service proxy keeps Authorization for itself) can pass through.
RAY_AUTH_TOKEN_KEY = "auth_token"
RAY_AUTH_HEADER = "X-Ray-Authorization"
