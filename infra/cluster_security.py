"""What the cluster's hardening needs beside the cluster: GKE security bulletins on Pub/Sub, and the
project's Binary Authorization policy.

- Security bulletins: the cluster publishes ``SECURITY_BULLETIN_EVENT`` notifications to a topic of the
  stack's project (the topic must be in the cluster's project; pulumi-gcp ClusterNotificationConfigPubsubArgs,
  https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-notifications). Subscribe the on-call
  channel to it.
- Binary Authorization (https://cloud.google.com/binary-authorization/docs/key-concepts): the project's one
  policy admits, without a check, GKE's own images (Google's system policy, ``globalPolicyEvaluationMode: ENABLE``,
  plus GKE's registries for what GKE injects into pods, the GCS FUSE sidecar), Kueue's controller image at the
  stack's version and, while the day-0 phase runs ``ray.image`` (no digest yet, or no prebuilt image), that
  image at its tag. Everything else needs the worker image attestor's attestation (the bootstrap's attestor,
  whose Cloud KMS key only ``image.yml`` signs with, as ci-image-<stack>, the digest it pushed): the workers'
  repository is never allow-listed (checked: :func:`policy_problems`), so an image pushed there but not signed, or
  named by tag, is refused. Attestations are
  checked on digests only. It logs denials (``DRYRUN_AUDIT_LOG_ONLY``) unless the stack opts in to blocking
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


def _image_path(image: str) -> tuple[str, str]:
    """An image reference's full registry path (Docker Hub's short names get their host) and its ``:tag`` or
    ``@digest`` suffix: ``rayproject/ray:2.60.0`` -> (``docker.io/rayproject/ray``, ``:2.60.0``)."""
    path, at, digest = image.partition("@")
    head, _, last = path.rpartition("/")
    name, colon, tag = last.partition(":")
    parts = [*(head.split("/") if head else []), name]
    if len(parts) == 1 or not ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = ["docker.io", *(["library"] if len(parts) == 1 else []), *parts]
    return "/".join(parts), (at + digest if at else colon + tag)


def image_pattern(image: str) -> str:
    """The narrowest pattern the docs give for one image: its full path and tag (or digest), then a trailing ``*``
    (a trailing wildcard is the only one allowed, and it does not match ``/``: ``gcr.io/nginx*`` matches
    ``gcr.io/nginx@latest``, not ``gcr.io/nginx/image``: AdmissionWhitelistPattern.name_pattern,
    https://cloud.google.com/python/docs/reference/binaryauthorization/latest/google.cloud.binaryauthorization_v1beta1.types.AdmissionWhitelistPattern).
    No source documents an exact digest as a pattern, so the workers' image is admitted by attestation instead.
    ``registry.k8s.io/kueue/kueue:v0.19.2`` -> ``registry.k8s.io/kueue/kueue:v0.19.2*``."""
    path, suffix = _image_path(image)
    return f"{path}{suffix}*"


def admits(pattern: str, image: str) -> bool:
    """Whether an admission allowlist pattern admits ``image`` (a reference with its ``:tag`` or ``@digest``).
    AdmissionWhitelistPattern.name_pattern (link above): "This supports a trailing * as a wildcard ... * wildcard
    does not match /, i.e., gcr.io/nginx* matches gcr.io/nginx@latest, but it does not match gcr.io/nginx/image.
    This also supports a trailing ** wildcard which matches subdirectories, i.e., gcr.io/nginx** matches
    gcr.io/nginx/image." Without a wildcard, the pattern is the image's name itself."""
    path, suffix = _image_path(image)
    ref = path + suffix
    if pattern.endswith("**"):
        return ref.startswith(pattern[:-2])
    if pattern.endswith("*"):
        return ref.startswith(pattern[:-1]) and "/" not in ref[len(pattern) - 1:]
    return ref == pattern or path == pattern


def policy_problems(spec: StackSpec, patterns: Sequence[str], rule: dict[str, object],
                    owner: str | None = None) -> list[str]:
    """Why a policy would admit the stack's own repository without its attestor: the default rule must require
    the stack's own attestor (the bootstrap's, named after ``owner``), and no pattern may admit any image of the
    stack's repository, by digest or by tag, directly in it or below it. Empty: the policy holds."""
    if spec.image is None:
        return [] if rule.get("evaluation_mode") == "ALWAYS_DENY" else [
            f"no image repository: the default rule must deny, not {rule.get('evaluation_mode')}"]
    own = names.image_attestor_id(spec.project, owner or spec.cluster.name)
    out = []
    if rule.get("evaluation_mode") != "REQUIRE_ATTESTATION" or rule.get("require_attestations_bies") != [own]:
        out.append(f"the default rule must require the stack's own attestor {own} (and only it): {rule}")
    repository = names.repository_path(spec.image.location, spec.project, spec.image.repository)
    digest = "@sha256:" + "0" * 64
    probes = [f"{repository}/{spec.image.name}{digest}", f"{repository}/{spec.image.name}:latest",
              f"{repository}/other{digest}", f"{repository}/nested/image{digest}"]
    for pattern in patterns:
        admitted = [i for i in probes if admits(pattern, i)]
        if admitted:
            out.append(f"admission pattern {pattern!r} admits the stack's repository unattested ({admitted[0]})")
    return out


def admission_patterns(spec: StackSpec, system_images: Sequence[str] = ()) -> list[str]:
    """What the policy admits without an attestation besides Google's system images, in order. The workers'
    own repository is never among them: its images are admitted by the attestor only."""
    out = list(GKE_IMAGE_PATTERNS) + [image_pattern(i) for i in system_images]
    if not spec.prebuilt_image:
        out.append(image_pattern(spec.ray.image))  # day 0 (or no prebuilt image): workers run ray.image
    return list(dict.fromkeys(out))


def default_rule(spec: StackSpec, owner: str | None = None) -> dict[str, object]:
    """The rule for every image no pattern admits: the worker image attestor's attestation when the stack has an
    image repository (the bootstrap made the attestor, named after ``owner``: the stack's cluster, or a multi-region
    stack's manager), else deny; blocking only with the opt-in."""
    enforcement = BLOCK if spec.unverified.binary_authorization_enforce else AUDIT
    if spec.image is None:
        return {"evaluation_mode": "ALWAYS_DENY", "enforcement_mode": enforcement}
    return {"evaluation_mode": "REQUIRE_ATTESTATION", "enforcement_mode": enforcement,
            "require_attestations_bies": [names.image_attestor_id(spec.project, owner or spec.cluster.name)]}


@dataclass(frozen=True)
class ClusterSecurityArgs:
    spec: StackSpec
    # Images the stack installs besides its workers' (Kueue's controller), as the pods name them.
    system_images: Sequence[str] = field(default_factory=tuple)
    # The cluster the bulletin topic and the image attestor are named after; None: spec.cluster (a multi-region
    # stack's: its manager, as the bootstrap names the attestor).
    owner: str | None = None


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
                name=names.notifications_topic(args.owner or spec.cluster.name),
                project=spec.project,
                labels={"tpu-multislice-stack": spec.stack},
            ),
            opts=after,
        )
        self.patterns = admission_patterns(spec, args.system_images)
        self.rule = default_rule(spec, args.owner)
        # Checked, not assumed: a system image that shares the workers' repository path, or a rule naming another
        # attestor, would admit the stack's own images without its signature.
        if problems := policy_problems(spec, self.patterns, self.rule, args.owner):
            raise ValueError(f"stack {spec.stack}: Binary Authorization policy: " + "; ".join(problems))
        self.enforcement = self.rule["enforcement_mode"]
        self.policy = gcp.binaryauthorization.Policy(
            f"{name}-binauthz",
            gcp.binaryauthorization.PolicyArgs(
                project=spec.project,
                # A sandbox has no image section and no ci-image identity signing one (docs/sandbox.md).
                description=(f"tpu-multislice sandbox {spec.stack}: GKE, Kueue, the workers' Ray image by name"
                             if spec.sandbox else f"tpu-multislice stack {spec.stack}: GKE, Kueue, the workers' "
                             "image as ci-image signed it"),
                global_policy_evaluation_mode="ENABLE",  # Google's system policy: GKE's own images
                admission_whitelist_patterns=[
                    gcp.binaryauthorization.PolicyAdmissionWhitelistPatternArgs(name_pattern=p) for p in self.patterns
                ],
                default_admission_rule=gcp.binaryauthorization.PolicyDefaultAdmissionRuleArgs(**self.rule),
            ),
            opts=after,
        )
        self.register_outputs({"topic": self.topic.name, "admissionPatterns": self.patterns,
                               "enforcement": self.enforcement})
