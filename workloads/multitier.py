"""Multi-tier checkpointing: restore a preempted slice from node memory instead of the bucket (an unverified opt-in).

``tpu-multislice:unverified.multiTierCheckpointing: true`` turns on, for every TPU job of the stack:

- MaxText's multi-tier checkpointing (maxtext 0.2.1, ``configs/base.yml`` and ``configs/types.py``
  ``EmergencyCheckpointing``): ``enable_multi_tier_checkpointing=true``, a ``local_checkpoint_directory``
  (MaxText's example: ``/local``), a ``local_checkpoint_period`` in steps and a
  ``multi_tier_checkpointing_backup_interval_minutes`` (MaxText refuses either at 0). MaxText then builds Orbax's
  ``ReplicatorCheckpointManager`` on the local directory (``utils/train_utils.py`` ``create_training_tools``):
  saves go to node memory, GKE's replicator copies them to peers and backs them up to the bucket, and a restore
  reads the nearest copy (this node's, a peer's, then the bucket's);
- GKE's side (how-to "Train large-scale machine learning models on GKE with Multi-Tier Checkpointing"): the
  ``HighScaleCheckpointing`` add-on (cluster >= 1.32.4-gke.1415000, Standard clusters only), a cluster-scoped
  ``CheckpointConfiguration`` (``checkpointing.gke.io/v1``: the bucket, the TPU nodes by machine type and
  toleration, the in-memory volume's size) and, in each TPU worker pod, a CSI volume of driver
  ``multitier-checkpoint.csi.storage.gke.io`` mounted at the local directory; the replicator's Kubernetes SA
  ``gke-managed-checkpointing/gke-checkpointing-multitier-node`` gets ``roles/storage.objectUser`` on the bucket.
  The object shapes are xpk's, Google's own TPU launcher (AI-Hypercomputer/xpk ``src/xpk/core/mtc.py``,
  ``src/xpk/templates/mtc-cpc.yaml``, ``src/xpk/core/workload.py`` ``get_volumes``/``get_volume_mounts``).

Unverified (why it is an opt-in the preview lists): GKE documents the feature with JobSet workloads, whose pods
carry the job and replica indices the replicator pairs peers by; KubeRay's TPU worker pods are not JobSet pods,
and nothing here can run GKE's controller. The bucket also needs hierarchical namespace for the backups (GKE's
requirement), which an existing checkpoint bucket cannot gain in place.
"""

from __future__ import annotations

import math
from typing import Any

from stackspec import checkpoints
from stackspec.spec import Job, StackSpec

API = "checkpointing.gke.io/v1"
KIND = "CheckpointConfiguration"
CSI_DRIVER = "multitier-checkpoint.csi.storage.gke.io"
VOLUME = "mtc-local"
LOCAL_DIR = "/local"  # MaxText base.yml's example local_checkpoint_directory
REPLICATOR_NAMESPACE = "gke-managed-checkpointing"
REPLICATOR_KSA = "gke-checkpointing-multitier-node"
TPU_TOLERATION_KEY = "google.com/tpu"
# xpk's CheckpointConfiguration mount options for the replicator's GCS FUSE backup mount (mtc-cpc.yaml).
MOUNT_OPTIONS = ("implicit-dirs", "client-protocol=http1", "metadata-cache:negative-ttl-secs:0",
                 "metadata-cache:ttl-secs:-1", "metadata-cache:stat-cache-max-size-mb:-1",
                 "metadata-cache:type-cache-max-size-mb:-1", "file-system:kernel-list-cache-ttl-secs:0",
                 "read_ahead_kb=1024", "write:enable-streaming-writes:true")
# Local copies the in-memory volume holds per host: the one being written and the last committed one.
LOCAL_COPIES = 2
# Backups to the bucket: MaxText's example interval (base.yml: multi_tier_checkpointing_backup_interval_minutes=20).
BACKUP_INTERVAL_MINUTES = 20


def enabled(spec: StackSpec) -> bool:
    return bool(getattr(spec.unverified, "multi_tier_checkpointing", False))


def settings(spec: StackSpec, job: Job) -> dict[str, str]:
    """The MaxText keys for ``job`` on the cluster (defaults: the job's ``maxtext`` passthrough may set its own)."""
    if not enabled(spec):
        return {}
    return {
        "enable_multi_tier_checkpointing": "true",
        "local_checkpoint_directory": LOCAL_DIR,
        "local_checkpoint_period": str(local_period(spec, job).period),
        "multi_tier_checkpointing_backup_interval_minutes": str(BACKUP_INTERVAL_MINUTES),
    }


def local_period(spec: StackSpec, job: Job) -> checkpoints.Plan:
    """The local tier's period: Young/Daly with the local save's cost and the local restore, where the job's step
    time and preemption interval are known; else the job's own checkpoint period."""
    step = spec.step_time(job)
    mtbf = job.expected_preemption_interval_minutes
    state = checkpoints.storage(job.model, job.steps, job.checkpoint_period, job.maxtext)
    if step is None or not mtbf or state is None:
        return checkpoints.Plan(job.checkpoint_period, "the job's checkpointPeriod (no step time, preemption "
                                                       "interval or model size to plan a local period from)")
    shape = spec.group(job.group).shape
    hosts = job.slices * shape.hosts
    return checkpoints.multi_tier_period(state.checkpoint_bytes / hosts, mtbf, step[0], step[1], job.steps)


def volume_size(spec: StackSpec) -> str:
    """The in-memory volume per TPU host: LOCAL_COPIES of the largest job's state share per host, in GiB."""
    need = 0.0
    for job in spec.jobs:
        state = checkpoints.storage(job.model, job.steps, job.checkpoint_period, job.maxtext)
        if state is None or job.group is None:
            continue
        hosts = job.slices * spec.group(job.group).shape.hosts
        need = max(need, LOCAL_COPIES * state.checkpoint_bytes / hosts)
    return f"{max(1, math.ceil(need / 2**30))}Gi"


def volume() -> dict[str, Any]:
    return {"name": VOLUME, "csi": {"driver": CSI_DRIVER}}


def volume_mount() -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": LOCAL_DIR}


def checkpoint_configuration(spec: StackSpec) -> dict[str, Any]:
    """The cluster-scoped CheckpointConfiguration: the bucket, the TPU hosts (one machine type per object, as GKE's
    ``nodeSelector`` names one) and the in-memory volume."""
    machine_types = sorted({g.shape.machine_type.name for g in spec.groups})
    return {
        "apiVersion": API,
        "kind": KIND,
        "metadata": {"name": f"{spec.ray.cluster_name}-checkpoints",
                     "labels": {"tpu-multislice/stack": spec.stack}},
        "spec": {
            "cloudStorageBucketName": spec.storage.bucket,
            "nodeSelector": {"node.kubernetes.io/instance-type": machine_types[0]},
            "tolerations": [{"key": TPU_TOLERATION_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "inMemoryVolumeSize": volume_size(spec),
            "mountOptions": list(MOUNT_OPTIONS),
        },
    }


def replicator_principal(project_number: str, project: str) -> str:
    """The IAM principal of GKE's replicator (xpk ``add_mtc_bucket_iam_member``)."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{project}.svc.id.goog/subject/ns/{REPLICATOR_NAMESPACE}/sa/{REPLICATOR_KSA}")
