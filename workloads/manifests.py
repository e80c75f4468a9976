"""The Kubernetes objects that run training on the slices, as plain documents.

Pure functions of the stack spec (no Pulumi here): the DRANET ResourceClaimTemplate,
the trainer ConfigMap, the shared RayCluster and one RayJob per job. Every shape
number comes from the slice model through the spec; the fixed values below are the
seed tutorial's (GKE "Multislice and elastic training on TPUs using Ray Train").
The component in ``workloads/component.py`` declares these documents as resources.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackspec import kube, kuberay, limits, machines, names
from stackspec.model import WORKLOAD_PRIORITIES
from stackspec.spec import Job, StackSpec, WorkerGroup
from workloads import compute_class, custom_trainer_args, multitier, security
from workloads.trainer.shipped_files import files_sha256
from workloads.trainer_args import CLUSTER_DATA_DIR, TRAINER_DIR, TRAINER_SCRIPT, trainer_argv

RAY_API = "ray.io/v1"
DRA_API = "resource.k8s.io/v1"
PART_OF = kube.PART_OF_VALUE
# Annotation carrying the digest of the trainer's files (the script and every module its ConfigMap ships,
# shipped_files.files_sha256) on the ConfigMap and every RayJob.
TRAINER_HASH_ANNOTATION = kube.TRAINER_HASH_ANNOTATION
# The trainer's modules, beside the script in the ConfigMap (it imports them as siblings, as it does lease.py;
# tests/test_trainer_modules.py fails when the script imports one missing here). The digest covers them all (a
# module's change alone replaces the RayJobs; the driver checks its whole mounted directory against it).
TRAINER_MODULES = tuple(TRAINER_SCRIPT.with_name(f"{m}.py") for m in (
    "elastic_verdict", "lease_holder", "maxtext_imports", "progress_lines", "restart_precompile", "warm_spares",
    "shipped_files", "worker_loop"))
LEASE_MODULE = TRAINER_SCRIPT.with_name("lease.py")  # beside the script in the ConfigMap
WARM_WORKER = TRAINER_SCRIPT.with_name("warm_worker.py")  # ditto, with unverified.warmSpares (the workers mount it)

# GKE DRANET: one netdev device per secondary network, attached to every TPU worker pod.
NETDEV_DEVICE_CLASS = kube.NETDEV_DEVICE_CLASS
NETDEV_CLAIM = "netdev"
NETDEV_REQUEST = "req-netdev"

# Ray head ports (KubeRay's well-known names), written once in stackspec.
HEAD_PORTS = tuple(limits.RAY_HEAD_PORTS.items())
# KubeRay adds a container port named "metrics" = 8080 to a Ray container that declares none (v1.6.0
# ray-operator/controllers/ray/common/pod.go:224-231 head, 446-453 workers: "If the metrics port does not exist in
# the Ray container, add a default one for Prometheus"), while Ray exports on ray.metricsExportPort: declared here
# under KubeRay's name (utils.MetricsPortName), so the named port is the one Ray serves.
METRICS_PORT_NAME = "metrics"


def _metrics_port(spec: StackSpec) -> dict[str, Any]:
    return {"containerPort": spec.ray.metrics_export_port, "name": METRICS_PORT_NAME}

# GCS FUSE CSI ephemeral volume for the checkpoint bucket; the sidecar gets no limits.
GCSFUSE_DRIVER = kube.GCSFUSE_DRIVER
GCSFUSE_VOLUME = "gcs-fuse-csi-ephemeral"
GCSFUSE_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}
GCSFUSE_MOUNT_OPTIONS = "implicit-dirs,uid=1000,gid=1000,dir-mode=775,file-mode=664,file-cache:max-size-mb:-1"
SHM_VOLUME = "dshm"
TRAINER_VOLUME = "trainer"
# Pods reach GCS through workload identity: schedule them where the metadata server runs.
METADATA_SERVER_SELECTOR = kube.METADATA_SERVER_SELECTOR

# The seed's tuned libtpu flags for Llama 3 on v6e; the megascale interface list is
# appended from the stack's secondary networks.
LIBTPU_TUNING = (
    "--xla_tpu_scoped_vmem_limit_kib=122880",
    "--xla_tpu_use_minor_sharding_for_major_trivial_input=true",
    "--xla_tpu_relayout_group_size_threshold_for_reduce_scatter=1",
    "--xla_tpu_assign_all_reduce_scatter_layout",
    "--xla_tpu_enable_async_collective_fusion_fuse_all_gather=true",
    "--xla_tpu_enable_async_collective_fusion_multiple_steps=true",
    "--xla_tpu_overlap_compute_collective_tc=true",
    "--xla_enable_async_all_gather=true",
)
# The seed's image pull policy (a pinned tag still re-checks only the digest).
IMAGE_PULL_POLICY = "Always"
# Set to "placeholder" on the RayCluster and RayJobs while the worker image's digest is the offline
# stand-in (stackspec PLACEHOLDER_IMAGE_DIGEST): no registry holds it; `pulumi up` refuses it in prod.
IMAGE_DIGEST_ANNOTATION = f"{PART_OF}/worker-image-digest"
# KubeRay's default submitter container, made explicit so the submitter runs the same image by digest.
# The RayJob's driver (its entrypoint) runs on the head: Ray 2.60's JobSupervisor, a worker process the head's raylet
# starts from the container's environment, runs it with a copy of its own (ray/dashboard/modules/job/
# job_supervisor.py: `env = os.environ.copy()`, then Popen(entrypoint, shell=True, env=env)). With Ray's log
# deduplication on (ray/_private/ray_constants.py RAY_DEDUP_LOGS, default on, read at import) that driver folds its
# workers' lines that differ only in numbers (every step line of every host) into one "[repeated Nx across
# cluster]", and the drills refuse such a log (drills.train_log.FOLDED). Set on the head's container, not in the
# RayJob's runtimeEnvYAML: a job's runtime env is inherited by every actor that has none of its own (Ray Train's
# controller and workers), and the warm spares serve only workers with no runtime env (maxtext_trainer.
# controller_without_runtime_env); nor in the entrypoint, whose `python <script> ...` shape policies parse.
DRIVER_ENV = {"RAY_DEDUP_LOGS": "0"}
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = machines.SUBMITTER_RESOURCES  # counted against the system pool by the spec


# --------------------------------------------------------------------------- helpers


def _labels(spec: StackSpec, component: str, **extra: str) -> dict[str, str]:
    return {
        kube.PART_OF_LABEL: PART_OF,
        kube.COMPONENT_LABEL: component,
        kube.MANAGED_BY_LABEL: "pulumi",
        kube.STACK_LABEL: spec.stack,
        **extra,
    }


def _metadata(spec: StackSpec, name: str, component: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": spec.storage.namespace,
        "labels": _labels(spec, component),
        **extra,
    }


def nic_names(spec: StackSpec) -> list[str]:
    """The pod's DRANET NICs: eth0 is the pod network, eth1..ethN the secondary networks."""
    return [f"eth{i}" for i in range(1, len(spec.networks) + 1)]


def libtpu_init_args(spec: StackSpec) -> str:
    flags = list(LIBTPU_TUNING)
    if spec.networks:
        # Megascale (DCN) traffic over the secondary NICs, and loopback for same-host peers.
        flags.append(f"--megascale_grpc_interface_prefixes={','.join([*nic_names(spec), 'lo'])}")
    return " ".join(flags)


def ray_version(image: str) -> str | None:
    """Ray's version from a released image tag (``rayproject/ray:2.60.0-py312-tpu``)."""
    m = re.search(r":(\d+\.\d+\.\d+)(?:-|$)", image)
    return m.group(1) if m else None


def claim_template_name(spec: StackSpec) -> str:
    """``two-netdev`` for two secondary networks, as the seed names it."""
    return names.claim_template(len(spec.networks))


def trainer_configmap_name(spec: StackSpec) -> str:
    return names.trainer_configmap(spec.ray.cluster_name)


def trainer_source(path: Path = TRAINER_SCRIPT) -> str:
    return path.read_text()


def trainer_sha256(spec: StackSpec, source: str | None = None) -> str:
    """The digest of every file the trainer ConfigMap ships (not the script's alone: see shipped_files)."""
    return files_sha256(trainer_files(spec, source))


def _gcsfuse_volume(spec: StackSpec) -> dict[str, Any]:
    return {
        "name": GCSFUSE_VOLUME,
        "csi": {
            "driver": GCSFUSE_DRIVER,
            "volumeAttributes": {
                "bucketName": spec.storage.bucket,
                "mountOptions": GCSFUSE_MOUNT_OPTIONS,
            },
        },
    }


def _volumes(spec: StackSpec, trainer: bool) -> list[dict[str, Any]]:
    vols = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}, _gcsfuse_volume(spec)]
    if trainer:
        vols.append({"name": TRAINER_VOLUME, "configMap": {"name": trainer_configmap_name(spec)}})
    return vols


def _volume_mounts(trainer: bool) -> list[dict[str, Any]]:
    mounts = [
        {"name": GCSFUSE_VOLUME, "mountPath": CLUSTER_DATA_DIR},
        {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
    ]
    if trainer:
        mounts.append({"name": TRAINER_VOLUME, "mountPath": TRAINER_DIR, "readOnly": True})
    return mounts


# --------------------------------------------------------------------------- objects


def resource_claim_template(spec: StackSpec) -> dict[str, Any]:
    """GKE DRANET: one ``netdev.google.com`` device per secondary network for each pod."""
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": _metadata(spec, claim_template_name(spec), "dranet"),
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": NETDEV_REQUEST,
                            "exactly": {
                                "deviceClassName": NETDEV_DEVICE_CLASS,
                                "allocationMode": "ExactCount",
                                "count": len(spec.networks),
                            },
                        }
                    ],
                },
            },
        },
    }


def trainer_configmap(spec: StackSpec, source: str | None = None) -> dict[str, Any]:
    """The trainer script, embedded from its file, with its content hash.

    The head mounts it as a directory (no subPath), so an update reaches a running shared
    head after the kubelet's next sync (about a minute); a dedicated cluster starts with it.
    """
    data = trainer_files(spec, source)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(
            spec,
            trainer_configmap_name(spec),
            "trainer",
            annotations={TRAINER_HASH_ANNOTATION: files_sha256(data)},
        ),
        "data": data,
    }


def trainer_files(spec: StackSpec, source: str | None = None) -> dict[str, str]:
    """The trainer ConfigMap's files: the script (``source`` in its place if given) and its modules. A multi-region
    stack's regions also get the writer lease the queued jobs' drivers hold (--lease); jobs' own trainers ride
    along."""
    text = trainer_source() if source is None else source
    return {TRAINER_SCRIPT.name: text, **{m.name: m.read_text() for m in TRAINER_MODULES},
            **({LEASE_MODULE.name: LEASE_MODULE.read_text()} if spec.site is not None else {}),
            **({WARM_WORKER.name: WARM_WORKER.read_text()} if spec.unverified.warm_spares else {}),
            **custom_trainer_args.configmap_files(spec)}


@dataclass(frozen=True)
class GroupSize:
    """How many slices (KubeRay replicas, one per slice) a worker group runs."""

    replicas: int
    min_replicas: int
    max_replicas: int


def shared_sizes(spec: StackSpec) -> dict[str, GroupSize]:
    """The shared cluster holds every slice; elastic jobs may shrink a group to their minimum."""
    sizes = {}
    for g in spec.groups:
        floors = [j.min_slices for j in spec.jobs if j.group == g.name and j.cluster == "shared"]
        sizes[g.name] = GroupSize(g.replicas, min(floors, default=g.replicas), g.replicas)
    return sizes


def _head_group(spec: StackSpec) -> dict[str, Any]:
    ray = spec.ray
    return {
        # The same metrics port as the workers: one PodMonitoring endpoint scrapes both.
        "rayStartParams": {"metrics-export-port": str(ray.metrics_export_port)},
        # The dashboard and job API stay inside the cluster (kubectl port-forward to reach them).
        "serviceType": "ClusterIP",
        "enableIngress": False,
        "template": {
            "metadata": {"annotations": dict(GCSFUSE_ANNOTATIONS)},
            "spec": {
                "serviceAccountName": spec.storage.service_account,
                # No Kubernetes API calls from the head (no in-tree autoscaler): no API token in the pod.
                # GCS access is workload identity through the GKE metadata server, which needs none.
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "ray-head",
                        "image": spec.worker_image,
                        "imagePullPolicy": IMAGE_PULL_POLICY,
                        "env": [{"name": k, "value": v} for k, v in DRIVER_ENV.items()],
                        "ports": [*({"containerPort": port, "name": n} for n, port in HEAD_PORTS),
                                  _metrics_port(spec)],
                        "resources": {
                            "limits": {"memory": ray.head_memory},
                            "requests": {"cpu": ray.head_cpu, "memory": ray.head_memory},
                        },
                        "volumeMounts": _volume_mounts(trainer=True),
                    }
                ],
                "volumes": _volumes(spec, trainer=True),
                "nodeSelector": dict(METADATA_SERVER_SELECTOR),
            },
        },
    }


def _worker_env(spec: StackSpec, slices: int) -> list[dict[str, str]]:
    # MEGASCALE_NUM_SLICES is the seed's static value. Ray Train's JaxTrainer overwrites it
    # (and the coordinator/slice id) only for groups of several slices; for a one-slice group
    # (an elastic job after a preemption) the trainer drops it (clear_stale_megascale).
    env = [
        {"name": "MEGASCALE_NUM_SLICES", "value": str(slices)},
        {"name": "MEGASCALE_PORT", "value": str(spec.ray.megascale_port)},
        {"name": "JAX_PLATFORMS", "value": "tpu,cpu"},
        {"name": "ENABLE_PJRT_COMPATIBILITY", "value": "true"},
        {"name": "LIBTPU_INIT_ARGS", "value": libtpu_init_args(spec)},
    ]
    if spec.unverified.warm_spares:
        # Every worker process the raylet starts imports MaxText first (warm_worker.py, from the trainer's
        # ConfigMap). The raylet's startup limit, min(host cores, the pod's CPUs) (ray/_private/services.py
        # maximum_startup_concurrency), is already above the one spare a training worker asks for at a time.
        env += [{"name": "RAY_preload_python_modules", "value": WARM_WORKER.stem},
                {"name": "PYTHONPATH", "value": TRAINER_DIR}]
    return env


def _worker_group(spec: StackSpec, group: WorkerGroup, size: GroupSize) -> dict[str, Any]:
    ray, shape = spec.ray, group.shape
    tpu = str(shape.chips_per_host)
    resources: dict[str, Any] = {
        "limits": {"memory": ray.worker_memory, kube.TPU_RESOURCE: tpu},
        "requests": {"cpu": ray.worker_cpu, "memory": ray.worker_memory, kube.TPU_RESOURCE: tpu},
    }
    pod: dict[str, Any] = {"serviceAccountName": spec.storage.service_account,
                           "automountServiceAccountToken": False}  # workers never call the Kubernetes API
    if spec.dranet:
        pod["resourceClaims"] = [{"name": NETDEV_CLAIM, "resourceClaimTemplateName": claim_template_name(spec)}]
        resources = {"claims": [{"name": NETDEV_CLAIM}], **resources}
    pod["containers"] = [
        {
            "name": "ray-worker",
            "image": spec.worker_image,
            "imagePullPolicy": IMAGE_PULL_POLICY,
            "ports": [_metrics_port(spec)],
            "resources": resources,
            "env": _worker_env(spec, size.replicas),
            # Not privileged (the seed is): on GKE >= 1.28 the TPU device plugin gives a container that
            # requests google.com/tpu its chips' devices, and the pinned version (>= 1.34, DRANET) is
            # past that; DRANET attaches the DCN NICs itself. The policy pack refuses privileged.
            "securityContext": {"privileged": False, "allowPrivilegeEscalation": False},
            "volumeMounts": _volume_mounts(trainer=spec.unverified.warm_spares),
        }
    ]
    pod["volumes"] = _volumes(spec, trainer=spec.unverified.warm_spares)
    if multitier.enabled(spec):  # the local checkpoint tier: GKE's in-memory volume (an unverified opt-in)
        pod["volumes"].append(multitier.volume())
        pod["containers"][0]["volumeMounts"].append(multitier.volume_mount())
    # The group's ComputeClass picks the capacity option (GKE's fallback order); the TPU labels stay
    # beside it: every pool of the class has them, and the slice-shape policies read them.
    pod["nodeSelector"] = {**METADATA_SERVER_SELECTOR, **shape.node_selector, **compute_class.pod_selector(group)}
    pod["tolerations"] = [compute_class.pod_toleration(group)]
    return {
        "groupName": group.name,
        "replicas": size.replicas,
        "minReplicas": size.min_replicas,
        "maxReplicas": size.max_replicas,
        # KubeRay creates and deletes all hosts of one slice (replica) together.
        "numOfHosts": shape.hosts,
        "rayStartParams": {"metrics-export-port": str(ray.metrics_export_port)},
        "template": {
            "metadata": {"annotations": dict(GCSFUSE_ANNOTATIONS)},
            "spec": pod,
        },
    }


def ray_cluster_spec(spec: StackSpec, sizes: Mapping[str, GroupSize] | None = None) -> dict[str, Any]:
    """A RayCluster spec: the head and one TPU worker group per entry of ``sizes``.

    ``sizes`` maps worker-group names to their size; by default every group of the
    stack with all its slices (the shared cluster).
    """
    sizes = shared_sizes(spec) if sizes is None else sizes
    body: dict[str, Any] = {}
    if version := ray_version(spec.ray.image):
        body["rayVersion"] = version
    if auth := security.auth_options(spec):
        body["authOptions"] = auth
    body["headGroupSpec"] = _head_group(spec)
    body["workerGroupSpecs"] = [_worker_group(spec, g, sizes[g.name]) for g in spec.groups if g.name in sizes]
    return body


def image_annotations(spec: StackSpec) -> dict[str, str]:
    """Marks objects that run ``ray.image`` while the stack's own image is pending (no digest yet)."""
    return {IMAGE_DIGEST_ANNOTATION: "pending"} if spec.image is not None and spec.image.pending else {}


def submitter_pod_template(spec: StackSpec) -> dict[str, Any]:
    """The `ray job submit` pod: KubeRay's defaults, on the worker image by digest."""
    return {
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,  # `ray job submit` talks to the dashboard only
            "containers": [{"name": SUBMITTER_CONTAINER, "image": spec.worker_image,
                            "imagePullPolicy": IMAGE_PULL_POLICY, "resources": SUBMITTER_RESOURCES}],
        }
    }


def queue_labels(spec: StackSpec, priority: str | None) -> dict[str, str]:
    """Kueue's labels: the stack's LocalQueue (workloads/kueue.py) and a WorkloadPriorityClass."""
    labels = {kube.KUEUE_QUEUE_LABEL: names.local_queue(spec.ray.cluster_name)}
    if priority:
        labels[kube.KUEUE_PRIORITY_LABEL] = priority
    return labels


def shared_cluster_priority(spec: StackSpec) -> str | None:
    """The shared RayCluster is admitted as one workload, at the highest priority of its jobs."""
    shared = [j.priority for j in spec.jobs if j.cluster == "shared"]
    return max(shared, key=lambda p: WORKLOAD_PRIORITIES[p], default=None)


def ray_cluster(spec: StackSpec) -> dict[str, Any]:
    """The shared RayCluster (the seed's ``maxtext-tpu-cluster``).

    Kueue admits it as one workload (its RayCluster integration): its slices count against the same
    ClusterQueue as the queued jobs', for as long as it lives. The jobs submitted to it are not queued.
    """
    meta = _metadata(spec, spec.ray.cluster_name, "ray-cluster")
    meta["labels"].update(queue_labels(spec, shared_cluster_priority(spec)))
    if annotations := image_annotations(spec):
        meta["annotations"] = annotations
    return {
        "apiVersion": RAY_API,
        "kind": "RayCluster",
        "metadata": meta,
        "spec": ray_cluster_spec(spec),
    }


def entrypoint(spec: StackSpec, job: Job, source: str | None = None) -> str:
    # The head mounts the script from a ConfigMap the kubelet refreshes lazily: the script
    # checks it is the version this RayJob was rendered with before it trains.
    argv = ["python", f"{TRAINER_DIR}/{TRAINER_SCRIPT.name}",
            "--script-sha256", trainer_sha256(spec, source), *trainer_argv(spec, job, local=False)]
    return shlex.join(argv)


def needs_shared_cluster(spec: StackSpec) -> bool:
    """A shared RayCluster holds its slices for good: declare it only when a job uses it
    (or when there is no job yet, as in the seed, to submit to by hand)."""
    return not spec.jobs or any(j.cluster == "shared" for j in spec.jobs)


def declared_jobs(spec: StackSpec) -> list[Job]:
    """Jobs that get a RayJob object. A suspended job on the shared cluster gets none:
    KubeRay refuses ``suspend`` with ``clusterSelector``, so "suspended" means "not submitted"
    there; a suspended dedicated job is declared with ``spec.suspend`` and creates nothing."""
    return [j for j in spec.jobs if not (j.suspend and j.cluster == "shared")]


def held_jobs(spec: StackSpec) -> list[Job]:
    """The jobs :func:`declared_jobs` leaves out: rendered for review, never applied."""
    declared = declared_jobs(spec)
    return [j for j in spec.jobs if j not in declared]


def ray_job(spec: StackSpec, job: Job, source: str | None = None) -> dict[str, Any]:
    """The RayJob for ``job``: on the shared cluster or on its own, deleted after the run."""
    body: dict[str, Any] = {
        "entrypoint": entrypoint(spec, job, source),
        # A Kubernetes Job runs `ray job submit`; its retries are KubeRay's to manage.
        "submissionMode": "K8sJobMode",
    }
    # Always explicit: KubeRay's default submitter pod would mount an API token it never uses.
    body["submitterPodTemplate"] = submitter_pod_template(spec)
    if job.cluster == "shared":
        body["clusterSelector"] = {kube.RAY_CLUSTER_LABEL: spec.ray.cluster_name}
    else:
        size = GroupSize(job.slices, job.min_slices, job.slices)
        body["rayClusterSpec"] = ray_cluster_spec(spec, {job.group: size})
        # KubeRay names this cluster itself: the job label on its pods is what metrics select on.
        for group in (body["rayClusterSpec"]["headGroupSpec"], *body["rayClusterSpec"]["workerGroupSpecs"]):
            group["template"]["metadata"].setdefault("labels", {})[kube.JOB_LABEL] = job.name
        if job.suspend:
            # An operator's pause, outside Kueue (no queue label below): KubeRay creates nothing. A queued
            # job carries no suspend at all: Kueue's webhook suspends it on creation and admission lifts it.
            body["suspend"] = True
    custom_trainer_args.with_image(body, job)  # a job's own trainer may bring its workers' image
    # Deadline, retries and cleanup in the fields of the target KubeRay (stackspec.kuberay.lifecycle;
    # the spec refused any it does not know).
    body.update(kuberay.lifecycle(job))
    if unknown := kuberay.unknown_fields(body, spec.ray.kuberay_version):
        raise ValueError(f"RayJob {job.name}: KubeRay {spec.ray.kuberay_version} does not know {unknown}")
    meta = _metadata(
        spec,
        job.name,
        "ray-job",
        annotations={TRAINER_HASH_ANNOTATION: trainer_sha256(spec, source)},
    )
    meta["labels"][kube.JOB_LABEL] = job.name
    if job.queued:
        meta["labels"].update(queue_labels(spec, job.priority))
    meta["annotations"].update(image_annotations(spec))
    return {"apiVersion": RAY_API, "kind": "RayJob", "metadata": meta, "spec": body}


def all_objects(spec: StackSpec, source: str | None = None) -> list[dict[str, Any]]:
    """Every object of the stack's workloads, in apply order."""
    docs: list[dict[str, Any]] = []
    if spec.dranet:
        docs.append(resource_claim_template(spec))
    docs.append(trainer_configmap(spec, source))
    if multitier.enabled(spec):
        docs.append(multitier.checkpoint_configuration(spec))
    if needs_shared_cluster(spec):
        docs.append(ray_cluster(spec))
    docs += [ray_job(spec, j, source) for j in declared_jobs(spec)]
    return docs


def worker_groups(doc: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The worker groups of a RayCluster or of a RayJob's own cluster."""
    body = doc["spec"]
    body = body.get("rayClusterSpec", body) if doc["kind"] == "RayJob" else body
    return body.get("workerGroupSpecs", [])
