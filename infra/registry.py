"""The worker image's Artifact Registry repository: created by the stack, pulled by the nodes, pushed by CI."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.iam_policy import PolicyBinding, policy_data
from stackspec.spec import WorkerImage

ARTIFACT_REGISTRY_API = "artifactregistry.googleapis.com"
# Artifact Analysis scans every image pushed to the repository for vulnerabilities once this API is on
# (https://cloud.google.com/artifact-analysis/docs/enable-automatic-scanning); the repository inherits it.
CONTAINER_SCANNING_API = "containerscanning.googleapis.com"
# GKE image streaming reads images through the Container File System API
# (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements: "You must enable the
# Container File System API"): :func:`image_streaming_api`, before the cluster and its pools.
CONTAINER_FILESYSTEM_API = "containerfilesystem.googleapis.com"
# Repository-scoped grants: the nodes pull (image streaming reads through the same permission),
# the stack's own image workflow identity (bootstrap/'s ci-image-<stack>) pushes; neither reaches another repository.
READER_ROLE = "roles/artifactregistry.reader"
WRITER_ROLE = "roles/artifactregistry.writer"
# Digests are what the stacks deploy; untagged versions older than this go (tagged ones stay).
UNTAGGED_MAX_AGE = f"{30 * 86400}s"


def image_streaming_api(parent_name: str, project: str, parent: pulumi.Resource) -> gcp.projects.Service:
    """The Container File System API, which pools with image streaming (``gcfs_config``) read images through: the
    cluster depends on it, so its system pool and every slice pool (which wait for the cluster) come after it.
    Left on at destroy, as the stack's other APIs; ``parent`` the component holding the project's APIs (the
    stack's ClusterSecurity, named ``parent_name``)."""
    return gcp.projects.Service(
        f"{parent_name}-{CONTAINER_FILESYSTEM_API.split('.')[0]}-api",
        gcp.projects.ServiceArgs(project=project, service=CONTAINER_FILESYSTEM_API, disable_on_destroy=False),
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(frozen=True)
class ImageRegistryArgs:
    image: WorkerImage
    project: str
    node_service_account: pulumi.Input[str] | None
    protected: bool = False  # prod: the repository survives `pulumi destroy` and refuses deletion
    # A multi-region stack's other clusters' node accounts (cluster name -> email): readers too.
    more_readers: tuple[tuple[str, str], ...] = ()


class ImageRegistry(pulumi.ComponentResource):
    """A Docker repository with immutable tags, readable by the node service accounts, written by the stack's own
    image identity, and nothing else: its IAM policy is authoritative (infra/iam_policy.py)."""

    services: list[gcp.projects.Service]
    repository: gcp.artifactregistry.Repository
    policy: gcp.artifactregistry.RepositoryIamPolicy

    def __init__(self, name: str, args: ImageRegistryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:ImageRegistry", name, None, opts)
        img = args.image
        child = pulumi.ResourceOptions(parent=self)
        apis = [ARTIFACT_REGISTRY_API, CONTAINER_SCANNING_API]
        self.services = [
            gcp.projects.Service(
                f"{name}-{api.split('.')[0]}-api",
                gcp.projects.ServiceArgs(project=args.project, service=api, disable_on_destroy=False),
                opts=child,
            )
            for api in apis
        ]
        self.repository = gcp.artifactregistry.Repository(
            name,
            gcp.artifactregistry.RepositoryArgs(
                repository_id=img.repository,
                format="DOCKER",
                location=img.location,
                project=args.project,
                description="Ray TPU worker images (Dockerfile at the repository root), deployed by digest",
                docker_config=gcp.artifactregistry.RepositoryDockerConfigArgs(immutable_tags=True),
                # Scanning follows the project's Container Scanning API (on, above); DISABLED would opt out.
                vulnerability_scanning_config=gcp.artifactregistry.RepositoryVulnerabilityScanningConfigArgs(
                    enablement_config="INHERITED"),
                cleanup_policies=[
                    gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                        id="delete-old-untagged",
                        action="DELETE",
                        condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                            tag_state="UNTAGGED", older_than=UNTAGGED_MAX_AGE
                        ),
                    )
                ],
            ),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=self.services, protect=args.protected, retain_on_delete=args.protected
            ),
        )
        # Every reader (a single-region stack's node account; a multi-region stack's node accounts, all in
        # more_readers) and the pusher, in the repository's one authoritative policy: a multi-region stack's clusters
        # hand their node accounts to it, never a policy or a grant each (two policies on one repository fight).
        # The members are sorted by the data source, so the order of regions changes nothing.
        readers: list[pulumi.Input[str]] = [] if args.node_service_account is None else [
            pulumi.Output.from_input(args.node_service_account).apply(lambda e: f"serviceAccount:{e}")]
        readers += [f"serviceAccount:{email}" for _, email in args.more_readers]
        self.policy = gcp.artifactregistry.RepositoryIamPolicy(
            f"{name}-iam-policy",
            gcp.artifactregistry.RepositoryIamPolicyArgs(
                project=args.project,
                location=img.location,
                # The id the stack names, not the repository's computed `name` (the same string: the provider
                # flattens the API's name to its last part, resource_artifact_registry_repository.go:1498-1502): a
                # new repository's `name` is unknown in the preview, and a saved plan with an unknown IAM input is
                # refused (.github/scripts/check_plan.py). The dependency is explicit instead.
                repository=img.repository,
                policy_data=policy_data([PolicyBinding(READER_ROLE, readers),
                                         PolicyBinding(WRITER_ROLE, [f"serviceAccount:{img.pusher}"])],
                                        pulumi.InvokeOutputOptions(parent=self)),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.repository]),
        )
        self.register_outputs({"repository": self.repository.name, "pusher": img.pusher})
