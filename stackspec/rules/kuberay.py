"""KubeRay's rules on a stack's jobs: every RayJob field a job needs exists in the KubeRay release the cluster runs.

Which release knows which field is :mod:`stackspec.kuberay`'s table (read at the tags of ray-project/kuberay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import kuberay
from ..model.types import _ns

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail) -> None:
    """The RayJob fields each job needs must exist in the KubeRay release the cluster runs."""
    version = spec.ray.kuberay_version
    for i, j in enumerate(spec.jobs):
        spec = {"entrypoint": "", "submissionMode": "K8sJobMode", **kuberay.lifecycle(j)}
        for path, since in kuberay.unknown_fields(spec, version):
            key = "jobTtlSeconds" if path.startswith("deletionStrategy") else "name"
            fail(f"{_ns('jobs')}[{i}].{key}", getattr(j, "job_ttl_seconds" if key != "name" else "name"),
                 f"its RayJob needs spec.{path}, which KubeRay {version} (ray.kuberayVersion) does not know "
                 f"(KubeRay {since} or later has it): drop the key, or set ray.kuberayVersion to what the "
                 "cluster runs (a KubeRay installed by its pinned Helm chart where GKE's add-on is older)")
