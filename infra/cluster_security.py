"""What the cluster's hardening needs beside the cluster: GKE security bulletins on Pub/Sub, and the
project's Binary Authorization policy.

- Security bulletins: the cluster publishes ``SECURITY_BULLETIN_EVENT`` notifications to a topic of the
  stack's project (the topic must be in the cluster's project; pulumi-gcp ClusterNotificationConfigPubsubArgs,
  https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-notifications). Subscribe the on-call
  channel to it.
- Binary Authorization (https://cloud.google.com/binary-authorization/docs/key-concepts): the project's one
  policy denies every image except the workers' repository, Kueue's, GKE's own (Google's system policy,
  ``globalPolicyEvaluationMode: ENABLE``, plus GKE's registries for what GKE injects into pods, the GCS FUSE
  sidecar) and, while the day-0 phase runs ``ray.image`` (no digest yet, or no prebuilt image), that image's
  Docker Hub repository. It logs denials (``DRYRUN_AUDIT_LOG_ONLY``) unless the stack opts in to blocking
  (``unverified.binaryAuthorizationEnforce``): GKE's system image list is Google's, not checked here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from stackspec import names
from stackspec.spec import StackSpec

PUBSUB_API = "pubsub.googleapis.com"
BINARY_AUTHORIZATION_API = "binaryauthorization.googleapis.com"
SECURITY_BULLETIN_EVENT = "SECURITY_BULLETIN_EVENT"
# The cluster's evaluation mode: the project's singleton policy, enforced at pod admission
# (pulumi-gcp ClusterBinaryAuthorizationArgs.evaluation_mode; GKE's "enabled" field is deprecated for it).
EVALUATION_MODE = "PROJECT_SINGLETON_POLICY_ENFORCE"
BLOCK, AUDIT = "ENFORCED_BLOCK_AND_AUDIT_LOG", "DRYRUN_AUDIT_LOG_ONLY"
# GKE's own images: gcr.io/gke-release (add-ons) and gke.gcr.io (what GKE injects, e.g. the GCS FUSE sidecar
# gke.gcr.io/gcs-fuse-csi-driver-sidecar-mounter; GKE docs "Cloud Storage FUSE CSI driver sidecar").
GKE_IMAGE_PATTERNS = ("gcr.io/gke-release/*", "gke.gcr.io/*")


def repository_pattern(image: str) -> str:
    """The Binary Authorization pattern for every image beside ``image`` (its registry path, ``/*``).

    ``rayproject/ray:2.60.0`` -> ``docker.io/rayproject/*``; Docker Hub's short names get their host.
    """
    path = image.split("@", 1)[0]
    head, _, last = path.rpartition("/")
    path = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    parts = path.split("/")
    if len(parts) == 1 or not ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = ["docker.io", *(["library"] if len(parts) == 1 else []), *parts]
    return "/".join(parts[:-1]) + "/*"


def admission_patterns(spec: StackSpec, system_images: Sequence[str] = ()) -> list[str]:
    """What the policy admits besides Google's system images, in order."""
    out = list(GKE_IMAGE_PATTERNS) + [repository_pattern(i) for i in system_images]
    if spec.image is not None:
        out.append(f"{names.registry_host(spec.image.location)}/{spec.project}/{spec.image.repository}/*")
    if not spec.prebuilt_image:
        out.append(repository_pattern(spec.ray.image))  # day 0 (or no prebuilt image): workers run ray.image
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class ClusterSecurityArgs:
    spec: StackSpec
    # Images the stack installs besides its workers' (Kueue's controller), as repositories.
    system_images: Sequence[str] = field(default_factory=tuple)
    # The cluster the bulletin topic is named after; None: spec.cluster (a multi-region stack's: its manager).
    topic_owner: str | None = None


class ClusterSecurity(pulumi.ComponentResource):
    """The bulletin topic and the Binary Authorization policy, with the APIs they need."""

    services: list[gcp.projects.Service]
    topic: gcp.pubsub.Topic
    policy: gcp.binaryauthorization.Policy

    def __init__(self, name: str, args: ClusterSecurityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:ClusterSecurity", name, None, opts)
        spec = args.spec
        child = pulumi.ResourceOptions(parent=self)
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}-api",
                gcp.projects.ServiceArgs(project=spec.project, service=api, disable_on_destroy=False),
                opts=child,
            )
            for api in (PUBSUB_API, BINARY_AUTHORIZATION_API)
        ]
        after = pulumi.ResourceOptions(parent=self, depends_on=self.services)
        self.topic = gcp.pubsub.Topic(
            f"{name}-notifications",
            gcp.pubsub.TopicArgs(
                name=names.notifications_topic(args.topic_owner or spec.cluster.name),
                project=spec.project,
                labels={"tpu-multislice-stack": spec.stack},
            ),
            opts=after,
        )
        self.patterns = admission_patterns(spec, args.system_images)
        self.enforcement = BLOCK if spec.unverified.binary_authorization_enforce else AUDIT
        self.policy = gcp.binaryauthorization.Policy(
            f"{name}-binauthz",
            gcp.binaryauthorization.PolicyArgs(
                project=spec.project,
                description=f"tpu-multislice stack {spec.stack}: the workers' repository, Kueue and GKE only",
                global_policy_evaluation_mode="ENABLE",  # Google's system policy: GKE's own images
                admission_whitelist_patterns=[
                    gcp.binaryauthorization.PolicyAdmissionWhitelistPatternArgs(name_pattern=p) for p in self.patterns
                ],
                default_admission_rule=gcp.binaryauthorization.PolicyDefaultAdmissionRuleArgs(
                    evaluation_mode="ALWAYS_DENY", enforcement_mode=self.enforcement,
                ),
            ),
            opts=after,
        )
        self.register_outputs({"topic": self.topic.name, "admissionPatterns": self.patterns,
                               "enforcement": self.enforcement})
