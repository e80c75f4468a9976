"""The checkpoint store: a GCS bucket reached by a Kubernetes SA through workload identity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.iam_policy import PolicyBinding, policy_data
from stackspec import kube
from stackspec.spec import Storage

# Read, write, list and delete objects: what MaxText/Orbax checkpointing needs, no more.
BUCKET_ROLE = "roles/storage.objectUser"


def workload_identity_principal(project_number: str, project: str, namespace: str, ksa: str) -> str:
    """The IAM principal of a Kubernetes SA under GKE workload identity federation."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


def bucket(name: str, st: Storage, project: str, opts: pulumi.ResourceOptions) -> gcp.storage.Bucket:
    """The checkpoint bucket. A multi-region stack's is a dual-region or multi-region every region reads
    (``storage.dataLocations``: a configurable dual-region's two regions, https://cloud.google.com/storage/docs/locations)."""
    return gcp.storage.Bucket(
        name,
        gcp.storage.BucketArgs(
            name=st.bucket,
            project=project,
            location=st.location,
            custom_placement_config=gcp.storage.BucketCustomPlacementConfigArgs(
                data_locations=[r.upper() for r in st.data_locations]) if st.data_locations else None,
            storage_class=st.storage_class,
            uniform_bucket_level_access=True,  # also what hierarchical namespace needs
            hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True)
            if st.hierarchical_namespace else None,
            public_access_prevention="enforced",
            # Objects remain recoverable for a week after an accidental delete.
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(retention_duration_seconds=7 * 86400),
            force_destroy=not st.protected,
            deletion_policy="PREVENT" if st.protected else "DELETE",
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=st.protected,
                                                                       retain_on_delete=st.protected)),
    )


def bucket_policy(name: str, bucket: gcp.storage.Bucket, members: Sequence[pulumi.Input[str]],
                  opts: pulumi.ResourceOptions) -> gcp.storage.BucketIAMPolicy:
    """The bucket's whole IAM policy (infra/iam_policy.py): ``BUCKET_ROLE`` for ``members``, nothing else (not
    even GCS's convenience values for the project's basic roles). Any other member, however it got there, is
    removed by the next ``pulumi up``."""
    return gcp.storage.BucketIAMPolicy(
        name,
        gcp.storage.BucketIAMPolicyArgs(
            bucket=bucket.name,
            policy_data=policy_data([PolicyBinding(BUCKET_ROLE, members)],
                                    pulumi.InvokeOutputOptions(parent=opts.parent)),
        ),
        opts=opts,
    )


def bucket_members(project_number: pulumi.Input[str], project: str, storage: Storage,
                   more: Sequence[pulumi.Input[str]] = ()) -> list[pulumi.Input[str]]:
    """Who the bucket's one policy grants ``BUCKET_ROLE``: the workloads' KSA (workload identity) and ``more``."""
    member = pulumi.Output.from_input(project_number).apply(
        lambda number: workload_identity_principal(number, project, storage.namespace, storage.service_account))
    return [member, *more]


class SharedCheckpointBucket(pulumi.ComponentResource):
    """A multi-region stack's one checkpoint bucket and its one IAM policy.

    The principals are project-wide (one workload identity pool per project; the namespace and KSA are stack-wide), so
    every region's KSA is the same member: one policy serves them all. A policy per region would be several
    authoritative policies on one bucket, each removing the others' members; and a grant per region would be removed
    with its region while the others still use it (GCP review N4). Its name is the stack's, not a region's, so
    adding, removing or reordering regions leaves it in place. Its members are the union every region needs, given
    once for the stack (``members``): no region passes members of its own, so none can be dropped (GCP review G5-6:
    the first region's members used to be kept and a later region's ignored)."""

    bucket: gcp.storage.Bucket
    policy: gcp.storage.BucketIAMPolicy | None = None

    def __init__(self, name: str, storage: Storage, project: str, members: Sequence[pulumi.Input[str]],
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SharedCheckpointBucket", name, None, opts)
        self._name, self._members = name, list(members)
        self.bucket = bucket(f"{name}-bucket", storage, project, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"bucket": self.bucket.name, "location": storage.location,
                               "dataLocations": list(storage.data_locations)})

    def grant(self, workload_pool: Sequence[pulumi.Resource]) -> gcp.storage.BucketIAMPolicy:
        """The one policy, declared by the first region that asks (after its cluster: the pool must exist, cloud rule
        iam-wi-pool-exists); later regions get the same resource. Which region asked first changes only what it waits
        for, never its name or inputs."""
        if self.policy is None:
            self.policy = bucket_policy(f"{self._name}-iam-policy", self.bucket, self._members,
                                        pulumi.ResourceOptions(parent=self, depends_on=list(workload_pool)))
        return self.policy


@dataclass(frozen=True)
class CheckpointStoreArgs:
    storage: Storage
    project: str
    project_number: pulumi.Input[str]
    k8s_provider: k8s.Provider
    # What creates the workload identity pool <project>.svc.id.goog: the first cluster with workload
    # identity. IAM refuses a binding to a pool that does not exist yet (cloud rule iam-wi-pool-exists).
    workload_pool: Sequence[pulumi.Resource] = ()
    # The workload namespace (workloads/namespace.py): the KSA is created in it.
    namespace: Sequence[pulumi.Resource] = ()
    # A multi-region stack's shared bucket: this store then creates only the KSA, and takes the bucket's one policy.
    shared: SharedCheckpointBucket | None = None
    # Other principals the bucket's policy grants BUCKET_ROLE (GKE's checkpoint replicator, with multi-tier
    # checkpointing): in the one policy, never a grant of their own beside it (they would fight). A shared bucket's
    # are the stack's, given to SharedCheckpointBucket.
    more_members: Sequence[pulumi.Input[str]] = ()


class CheckpointStore(pulumi.ComponentResource):
    """Bucket, Kubernetes service account and the bucket's authoritative IAM policy that grants it."""

    bucket: gcp.storage.Bucket
    service_account: k8s.core.v1.ServiceAccount
    policy: gcp.storage.BucketIAMPolicy

    def __init__(self, name: str, args: CheckpointStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:CheckpointStore", name, None, opts)
        st = args.storage
        self.bucket = args.shared.bucket if args.shared else bucket(f"{name}-bucket", st, args.project,
                                                                     pulumi.ResourceOptions(parent=self))
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-ksa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=st.service_account,
                namespace=st.namespace,
                labels={kube.PART_OF_LABEL: kube.PART_OF_VALUE},
            ),
            # No pod of this account calls the Kubernetes API; workload identity (the GKE metadata
            # server) and the GCS FUSE CSI driver (kubelet token requests) need no mounted token.
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=list(args.namespace)),
        )
        members = bucket_members(args.project_number, args.project, st, args.more_members)
        self.member = members[0]
        if args.shared:
            if args.more_members:  # the shared policy's members are the stack's (SharedCheckpointBucket)
                raise ValueError("a region of a shared bucket gives its members to SharedCheckpointBucket, not here")
            self.policy = args.shared.grant(args.workload_pool)
        else:
            self.policy = bucket_policy(f"{name}-iam-policy", self.bucket, members,
                                        pulumi.ResourceOptions(parent=self, depends_on=list(args.workload_pool)))
        self.register_outputs(
            {
                "bucket": self.bucket.name,
                "serviceAccount": st.service_account,
                "member": self.member,
            }
        )
