"""What runs on the cluster: Ray settings, the worker image, the checkpoint storage, monitoring."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .. import kuberay, limits, names
from .. import regions as places
from .types import BucketName, KsaName, Namespace, Port, Quantity, RayClusterName, Region, Section, _check, _name, at

STORAGE_CLASSES = ("STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE")
DEFAULT_RAY_IMAGE = "rayproject/ray:2.60.0-py312-tpu"
# Ray token authentication: Ray 2.52 brought it, KubeRay 1.5.1 its authOptions.
RAY_AUTH_MIN = (2, 52, 0)
KUBERAY_AUTH_MIN = (1, 5, 1)
# A worker image digest; the offline preview stands in this one where the stack names none yet
# (all zeros: no registry holds it, and the rendered objects say "placeholder" beside it).
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
PLACEHOLDER_IMAGE_DIGEST = "sha256:" + "0" * 64
# <account id>@<project>.iam.gserviceaccount.com (an account ID has a project ID's shape: 6-30, RFC 1035).
_SERVICE_ACCOUNT_EMAIL = re.compile(rf"{limits.PROJECT_ID.pattern}@[-a-z0-9.]+\.gserviceaccount\.com")
NOTIFICATION_CHANNEL_TYPES = ("email", "pubsub", "webhook")


class Storage(Section):
    bucket: BucketName
    location: str | None = None  # the region by default
    storage_class: Literal[STORAGE_CLASSES] = "STANDARD"
    # The workload namespace the stack creates (Pod Security labels, README "Inside the cluster"); prod refuses
    # ``default``, and a namespace Kubernetes, GKE or Kueue owns is refused everywhere.
    namespace: Annotated[Namespace, _check(lambda v: f"{v} belongs to Kubernetes, GKE or Kueue; name the stack's own "
                                           f"(default {names.DEFAULT_NAMESPACE})"
                                           if v in names.SYSTEM_NAMESPACES or v.startswith("kube-") else None)] = (
        names.DEFAULT_NAMESPACE)
    service_account: KsaName  # the Kubernetes service account of the workloads
    protected: bool | None = None  # refuse deletion, keep the bucket on destroy; on in prod
    # A configurable dual-region's two regions (location then names the code the GCS table lists both under: US, EU,
    # ASIA, ...; stackspec.regions.CONFIGURABLE_DUAL_REGIONS). A multi-region stack names its place, never derived.
    data_locations: tuple[Region, ...] = ()
    # Hierarchical namespace (folders as resources), which multi-tier checkpointing's backups need
    # (rules/jobs.py multi_tier). GCS sets it only when the bucket is created: turning it on replaces the bucket.
    hierarchical_namespace: bool = False

    @model_validator(mode="after")
    def _data_locations(self) -> Storage:
        if not self.data_locations:
            return self
        if len(set(self.data_locations)) != 2:
            raise at("dataLocations", "a configurable dual-region names two different regions "
                                      "(https://cloud.google.com/storage/docs/locations)")
        if self.location is None:
            raise at("location", "required with dataLocations: a configurable dual-region's location code (US, EU, "
                                 "ASIA, ...), never a region (https://cloud.google.com/storage/docs/locations)")
        if error := places.dual_region_error(self.location, self.data_locations):
            raise at("dataLocations", error)
        return self
    # Most one run's checkpoints may hold (GB): more is a preview warning and a policy warning.
    checkpoint_budget_gb: float | None = Field(None, gt=0)


class RaySettings(Section):
    cluster_name: RayClusterName = "maxtext-tpu-cluster"
    image: Annotated[str, _check(limits.image_reference)] = DEFAULT_RAY_IMAGE
    head_cpu: Quantity = "8"
    head_memory: Quantity = "16Gi"
    worker_cpu: Quantity = "8"
    worker_memory: Quantity = "200G"
    megascale_port: Port = 9915
    metrics_export_port: Port = 8082
    # The KubeRay release the cluster runs (GKE's Ray operator add-on picks it): RayJob fields it
    # does not know are refused (stackspec.kuberay).
    kuberay_version: Annotated[str, _check(kuberay.version_error)] = kuberay.DEFAULT_VERSION
    # Ray token authentication on every Ray node (KubeRay authOptions; README "Inside the cluster").
    auth: Literal["disabled", "token"] = "disabled"

    @model_validator(mode="after")
    def _auth(self) -> RaySettings:
        if self.auth != "token":
            return self
        tag = re.search(r":(\d+)\.(\d+)\.(\d+)(?:-|$)", self.image)
        if tag is None or tuple(map(int, tag.groups())) < RAY_AUTH_MIN:
            raise at("auth", f"token auth needs Ray >= {'.'.join(map(str, RAY_AUTH_MIN))} named by ray.image's tag "
                     f"(KubeRay refuses it otherwise); ray.image is {self.image}")
        version = kuberay.parse(self.kuberay_version)
        if version is not None and version < KUBERAY_AUTH_MIN:
            raise at("auth", f"KubeRay {self.kuberay_version} (ray.kuberayVersion) has no authOptions (since "
                     f"{'.'.join(map(str, KUBERAY_AUTH_MIN))}): its CRD would drop it silently and Ray would run "
                     "without auth")
        return self

    @model_validator(mode="after")
    def _ports(self) -> RaySettings:
        taken = {**limits.RAY_HEAD_PORTS, **limits.RAY_NODE_PORTS}
        for key, port in (("megascalePort", self.megascale_port), ("metricsExportPort", self.metrics_export_port)):
            clash = [n for n, p in taken.items() if p == port]
            if clash:
                raise at(key, f"port {port} is Ray's {clash[0]} port; pick another")
            taken[key] = port
        return self


class WorkerImage(Section):
    """The prebuilt worker image (the repository's Dockerfile) in the Artifact Registry repository the stack creates."""

    repository: Annotated[str, _name(limits.ARTIFACT_REPOSITORY)] = "tpu-multislice"
    name: Annotated[str, _name(limits.IMAGE_NAME)] = "ray-maxtext"
    # image.yml's output. Unset: the first phase, in which the stack creates the repository and the pusher's grant
    # and the workers run ray.image, installing MaxText at start as the seed does (no deadlock on day 0).
    digest: str | None = None
    location: Annotated[str, _check(limits.artifact_registry_location)] | None = None  # the region by default
    streaming: bool = True  # GKE image streaming on the node pools (Artifact Registry images only)
    pusher: str | None = None  # ci-image-<stack>@<ciProject>.iam.gserviceaccount.com by default (bootstrap/)

    @model_validator(mode="after")
    def _digest(self) -> WorkerImage:
        if self.digest is not None:
            if not IMAGE_DIGEST.fullmatch(self.digest):
                raise at("digest", "an image digest sha256:<64 hex digits>, as the image workflow prints it")
            if self.digest == PLACEHOLDER_IMAGE_DIGEST:
                raise at("digest", "the offline placeholder is not an image; leave digest unset until the image "
                                   "workflow has pushed one")
        if self.pusher is not None and not _SERVICE_ACCOUNT_EMAIL.fullmatch(self.pusher):
            raise at("pusher", "a service account email, e.g. ci-image-prod@my-project.iam.gserviceaccount.com")
        return self

    @property
    def pending(self) -> bool:
        """No digest yet: the image is built after the first `pulumi up` has made its repository."""
        return self.digest is None


class NotificationChannel(Section):
    name: Annotated[str, Field(min_length=1, max_length=100)]  # the channel's display name, unique
    type: Literal[NOTIFICATION_CHANNEL_TYPES]
    address: str  # email: an address; pubsub: projects/P/topics/T; webhook: an https URL

    @model_validator(mode="after")
    def _address(self) -> NotificationChannel:
        rules = {
            "email": (r"[^@\s]+@[^@\s]+\.[^@\s]+", "an email address"),
            "pubsub": (rf"projects/{limits.PROJECT_ID.pattern}/topics/[A-Za-z][-A-Za-z0-9_.~+%]{{2,254}}",
                       "a Pub/Sub topic, projects/<project>/topics/<topic>"),
            "webhook": (r"https://\S+", "an https:// URL"),
        }
        pattern, what = rules[self.type]
        if not re.fullmatch(pattern, self.address):
            raise at("address", f"a {self.type} channel takes {what}")
        return self


class Monitoring(Section):
    """Alert thresholds and where alerts go. Defaults suit a fleet where a step takes seconds."""

    enabled: bool = True
    notification_channels: tuple[NotificationChannel, ...] = ()
    # TPU duty cycle below this (percent, averaged over a RayCluster's TPUs) for this long while a
    # Ray Train run is RUNNING: the job holds slices and is not training (input-bound, stuck, hung).
    duty_cycle_low_percent: float = Field(10, gt=0, le=100)
    duty_cycle_low_minutes: int = Field(30, ge=5, le=1440)
    # No checkpoint save started for this long while a run is RUNNING: a preemption now loses it all.
    checkpoint_max_age_minutes: int = Field(60, ge=5, le=10080)

    @model_validator(mode="after")
    def _unique(self) -> Monitoring:
        names_ = [c.name for c in self.notification_channels]
        for n in names_:
            if names_.count(n) > 1:
                raise at("notificationChannels", f"channel names must be unique: {n} repeats")
        return self
