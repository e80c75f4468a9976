"""What a sandbox stack (``tpu-multislice:sandbox: true``, docs/sandbox.md) creates that the CI bootstrap makes for
every other stack: its project's APIs, and its nodes' service account with that account's project roles.

A CI stack names the bootstrap's node account and Secrets key (bootstrap/components/stack_project.py); a sandbox
has no bootstrap behind it, so ``pulumi up`` with the owner's own credentials creates these itself, before the
cluster (tests/test_references.py checks every account, key, network, bucket and repository a rendered resource
names is declared by the stack or the bootstrap that serves it).

What a sandbox turns off instead of creating:

- Application-layer Secrets encryption with Cloud KMS. GKE's "Encrypt secrets at the application layer"
  (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets): "By default, Google Kubernetes
  Engine (GKE) encrypts customer content stored at rest, including Secrets ... Application-layer secrets encryption
  provides an additional layer of security"; "To use application-layer secrets encryption, you must first create a
  Cloud KMS key and give the GKE service account access to the key" (roles/cloudkms.cryptoKeyEncrypterDecrypter on
  the key for GKE's service agent; cloud rule gke-secrets-kms-key). A sandbox is meant to be destroyed and made
  again, and a Cloud KMS key cannot be: "Deleted CryptoKey names can't be reused"
  (https://docs.cloud.google.com/kms/docs/delete-kms-resources, which deletes keys and key versions, never key
  rings), and a key's versions are only scheduled for destruction (30 days by default,
  https://cloud.google.com/kms/docs/destroy-restore).
  A second ``pulumi up`` after ``pulumi destroy`` would fail on the name already taken. So a sandbox cluster keeps
  GKE's default encryption at rest and makes no key.
- Everything else the bootstrap makes serves CI alone (identities, federation, state, the image attestor): a
  sandbox has no image section, no drill user, and is single-region (the MultiKueue token account and its grants
  on the workers' projects are the bootstrap's; stackspec/rules/sandbox.py refuses the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from stackspec import names

__all__ = ["SANDBOX_SERVICES", "SandboxProject", "SandboxProjectArgs", "wait_for_apis"]

# The APIs the bootstrap enables in a stack's project (bootstrap/access.py STACK_SERVICES) but Cloud KMS (no key
# here) and Container Analysis (the attestor's note, CI's). Pub/Sub and Binary Authorization are enabled by
# infra/cluster_security.py, Logging and Monitoring by infra/monitoring.py, for every stack.
SANDBOX_SERVICES = ("container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                    "iam.googleapis.com", "cloudresourcemanager.googleapis.com")


@dataclass(frozen=True)
class SandboxProjectArgs:
    project: str
    cluster: str  # the cluster whose nodes run as the account
    node_roles: tuple[str, ...]  # infra.cluster.node_roles: what the bootstrap grants a CI stack's node account


class SandboxProject(pulumi.ComponentResource):
    """The APIs and the node service account with its roles, before the cluster (``ready``)."""

    services: list[gcp.projects.Service]
    node_account: gcp.serviceaccount.Account
    ready: list[pulumi.Resource]

    def __init__(self, name: str, args: SandboxProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SandboxProject", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # disable_on_destroy off: `pulumi destroy` leaves the APIs on (turning one off would break anything else in
        # the project that uses it); docs/teardown.md lists what stays.
        self.services = [
            gcp.projects.Service(f"{name}-{api.split('.')[0]}-api",
                                 gcp.projects.ServiceArgs(project=args.project, service=api, disable_on_destroy=False),
                                 opts=child)
            for api in SANDBOX_SERVICES
        ]
        after = pulumi.ResourceOptions(parent=self, depends_on=self.services)
        # The same account id the bootstrap gives a CI stack's nodes (stackspec.names), so the cluster names one
        # email either way. Made in the same update as the cluster and pools that run as it, as cluster-toolkit's
        # apply-tested v6e blueprint does (GoogleCloudPlatform/cluster-toolkit@1047080
        # examples/gke-tpu-v6e/gke-tpu-v6e.yaml: node_pool_service_account, then gke-tpu-v6e-cluster and the pool
        # that uses it, in one deployment group; vendored in tests/reference/peers/cluster-toolkit/).
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            gcp.serviceaccount.AccountArgs(account_id=names.node_service_account_id(args.cluster), project=args.project,
                                           display_name=f"GKE nodes of {args.cluster} (sandbox)"),
            opts=after,
        )
        member = self.node_account.email.apply(lambda e: f"serviceAccount:{e}")
        grants = [
            gcp.projects.IAMMember(f"{name}-nodes-{role.split('/')[-1].split('.')[-1].lower()}",
                                   gcp.projects.IAMMemberArgs(project=args.project, role=role, member=member),
                                   opts=child)
            for role in args.node_roles
        ]
        self.ready = [*self.services, self.node_account, *grants]
        self.register_outputs({"nodeAccount": self.node_account.email})


def wait_for_apis(services: list[gcp.projects.Service]) -> None:
    """Every Google Cloud resource declared after this call waits for the sandbox's APIs: in a fresh project the
    networks, the bucket and the rest would otherwise race ``compute``/``storage`` being turned on (a CI stack's
    project has them from the bootstrap). A stack transformation (the SDK's ``register_stack_transformation``)
    rather than a ``depends_on`` on each component: a component's ``depends_on`` does not hold its children back."""

    def after_apis(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not args.type_.startswith("gcp:") or args.type_ == "gcp:projects/service:Service":
            return None
        opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(depends_on=services))
        return pulumi.ResourceTransformationResult(args.props, opts)

    pulumi.runtime.register_stack_transformation(after_apis)
