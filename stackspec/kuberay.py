"""Which KubeRay release knows which RayJob field: the version guard.

GKE's Ray operator add-on runs a KubeRay release GKE picks; a field that release does not
know is dropped by the API server's structural pruning (an older CRD) or refused by the
operator, and the job runs without the cleanup or deadline the stack asked for. Every RayJob
field the workloads render is listed here with the first KubeRay release whose
``ray-operator/apis/ray/v1/rayjob_types.go`` has it (read at the tags v1.0.0 to v1.7.0 of
github.com/ray-project/kuberay); :func:`unknown_fields` names what a target release lacks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# GKE 1.35's add-on: GKE's documentation publishes no add-on-to-KubeRay version table. GKE's tutorial
# "Multislice and elastic training on TPUs using Ray Train" (GKE 1.35.2-gke.1842000) relies on multi-host
# replica indexing, which KubeRay v1.6 promoted to Beta (Ray's announcement "TPUs are a first-class accelerator
# in Ray"). A cluster's own: its RayJob CRD lists the fields
# (kubectl explain rayjob.spec.deletionStrategy.deletionRules).
DEFAULT_VERSION = "1.6.0"

# (path in RayJob.spec, first release that has it)
FIELDS: dict[str, str] = {
    "entrypoint": "1.0.0",
    "rayClusterSpec": "1.0.0",
    "clusterSelector": "1.0.0",
    "shutdownAfterJobFinishes": "1.0.0",
    "ttlSecondsAfterFinished": "1.0.0",
    "suspend": "1.0.0",
    "submitterPodTemplate": "1.0.0",
    "runtimeEnvYAML": "1.0.0",
    "metadata": "1.0.0",
    "activeDeadlineSeconds": "1.1.0",
    "submissionMode": "1.1.0",
    "backoffLimit": "1.2.0",
    "submitterConfig": "1.2.0",
    "managedBy": "1.3.0",
    # v1.3/v1.4 had spec.deletionPolicy (alpha); v1.5 replaced it with deletionStrategy behind the
    # RayJobDeletionPolicy feature gate, off by default until v1.6 made it Beta and on.
    "deletionStrategy": "1.6.0",
    "deletionStrategy.deletionRules": "1.6.0",
    "deletionStrategy.deletionRules[].condition.jobDeploymentStatus": "1.6.0",
    "preRunningDeadlineSeconds": "1.6.0",
}


def parse(version: str) -> tuple[int, int, int] | None:
    parts = version.removeprefix("v").split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def version_error(version: str) -> str | None:
    v = parse(version)
    if v is None:
        return "a KubeRay release like 1.6.0"
    if v < (1, 0, 0):
        return "ray.io/v1 RayJobs need KubeRay 1.0.0 or later"
    return None


def knows(version: str, field: str) -> bool:
    return parse(version) >= parse(FIELDS[field])


def _paths(spec: Mapping[str, Any]) -> Iterator[str]:
    for key, value in spec.items():
        yield key
        if key == "deletionStrategy" and isinstance(value, Mapping):
            for sub in value:
                yield f"deletionStrategy.{sub}"
            for rule in value.get("deletionRules", ()):
                for cond in rule.get("condition", {}):
                    yield f"deletionStrategy.deletionRules[].condition.{cond}"


def unknown_fields(spec: Mapping[str, Any], version: str) -> list[tuple[str, str | None]]:
    """The fields of a rendered ``RayJob.spec`` that KubeRay ``version`` does not know:
    ``(path, first release with it)``, ``None`` where no release in the table has it."""
    out = []
    for path in _paths(spec):
        if path not in FIELDS:
            if "." not in path:
                out.append((path, None))
        elif not knows(version, path):
            out.append((path, FIELDS[path]))
    return out


def lifecycle(job: Any) -> dict[str, Any]:
    """A job's RayJob lifecycle fields: deadline, retries, and what KubeRay deletes when it ends.

    - Dedicated cluster: ``shutdownAfterJobFinishes`` with ``ttlSecondsAfterFinished`` (every KubeRay
      release; Kueue requires ``shutdownAfterJobFinishes`` for a RayJob it admits, and KubeRay refuses
      it beside ``deletionRules``): the cluster and its TPU slices go ``clusterTtlSeconds`` after the
      job succeeds or fails. The RayJob stays (its status is the run's record).
    - Shared cluster: the cluster outlives its jobs (KubeRay refuses DeleteCluster/DeleteWorkers with
      ``clusterSelector``); with ``jobTtlSeconds`` the finished RayJob and its submitter Job are
      deleted (``deletionRules`` DeleteSelf on SUCCEEDED, FAILED and a failed deployment).
    """
    out: dict[str, Any] = {"activeDeadlineSeconds": job.active_deadline_seconds, "backoffLimit": job.backoff_limit}
    if job.cluster == "dedicated":
        out["shutdownAfterJobFinishes"] = True
        out["ttlSecondsAfterFinished"] = job.cluster_ttl_seconds
    elif job.job_ttl_seconds is not None:
        ttl = job.job_ttl_seconds
        out["deletionStrategy"] = {"deletionRules": [
            {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": ttl}},
            {"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED", "ttlSeconds": ttl}},
            {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": ttl}},
        ]}
    else:
        out["shutdownAfterJobFinishes"] = False
    return out
