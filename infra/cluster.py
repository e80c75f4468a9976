"""The GKE Standard cluster: Ray operator, GCS FUSE CSI, workload identity, Dataplane V2."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from stackspec import names
from stackspec.spec import Cluster

# The minimal role GKE documents for a node service account (logs, metrics,
# image pulls): nodes never run as the default compute service account.
NODE_SA_ROLE = "roles/container.defaultNodeServiceAccount"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True)
class GkeClusterArgs:
    cluster: Cluster
    project: str
    image_streaming: bool = False  # GKE image streaming on the system pool (the Ray head's image)


class GkeCluster(pulumi.ComponentResource):
    """A zonal Standard cluster with its default pool replaced by a CPU system pool.

    The CPU pool hosts the Ray head and system pods; TPU slices come as
    :class:`infra.slice_pool.SliceNodePool` children of the program.
    """

    cluster: gcp.container.Cluster
    node_service_account: gcp.serviceaccount.Account
    system_pool: gcp.container.NodePool

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:GkeCluster", name, None, opts)
        c = args.cluster
        child = pulumi.ResourceOptions(parent=self)

        self.node_service_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            gcp.serviceaccount.AccountArgs(
                account_id=names.node_service_account_id(c.name),  # length checked by the spec
                display_name=f"GKE nodes of {c.name}",
                project=args.project,
            ),
            opts=child,
        )
        self.node_sa_role = gcp.projects.IAMMember(
            f"{name}-nodes-role",
            gcp.projects.IAMMemberArgs(
                project=args.project,
                role=NODE_SA_ROLE,
                member=self.node_service_account.email.apply(lambda e: f"serviceAccount:{e}"),
            ),
            opts=child,
        )

        self.cluster = gcp.container.Cluster(
            name,
            gcp.container.ClusterArgs(
                name=c.name,
                project=args.project,
                location=c.location,
                min_master_version=c.version,
                release_channel=gcp.container.ClusterReleaseChannelArgs(channel=c.release_channel),
                # GKE needs one pool at creation; it is removed for the pools below.
                remove_default_node_pool=True,
                initial_node_count=1,
                # Even the short-lived default pool runs as the dedicated node account.
                node_config=gcp.container.ClusterNodeConfigArgs(
                    service_account=self.node_service_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                ),
                networking_mode="VPC_NATIVE",
                # Pinned where the spec says: GKE would pick without seeing the DCN VPCs.
                ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                    cluster_ipv4_cidr_block=c.pod_cidr,
                    services_ipv4_cidr_block=c.service_cidr,
                ),
                datapath_provider="ADVANCED_DATAPATH",  # Dataplane V2
                workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                    workload_pool=f"{args.project}.svc.id.goog",
                ),
                addons_config=gcp.container.ClusterAddonsConfigArgs(
                    ray_operator_configs=[
                        gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(
                            enabled=True,
                            ray_cluster_logging_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterLoggingConfigArgs(
                                enabled=True
                            ),
                            ray_cluster_monitoring_config=gcp.container.ClusterAddonsConfigRayOperatorConfigRayClusterMonitoringConfigArgs(
                                enabled=True
                            ),
                        )
                    ],
                    gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                        enabled=True
                    ),
                ),
                deletion_protection=c.deletion_protection,
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=c.deletion_protection),
        )

        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            gcp.container.NodePoolArgs(
                name="system",
                cluster=self.cluster.name,
                location=c.location,
                project=args.project,
                node_count=c.system_node_count,
                version=c.version,
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=c.system_machine_type,
                    gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True)
                    if args.image_streaming
                    else None,
                    service_account=self.node_service_account.email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA",  # the Ray head's nodeSelector needs the metadata server
                    ),
                    shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                        enable_secure_boot=True,
                    ),
                ),
                management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=False),
            ),
            opts=child,
        )

        self.name = self.cluster.name
        self.endpoint = self.cluster.endpoint
        self.kubeconfig = pulumi.Output.all(
            self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
        ).apply(lambda a: kubeconfig(*a))
        self.register_outputs(
            {
                "name": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "nodeServiceAccount": self.node_service_account.email,
            }
        )


def kubeconfig(name: str, endpoint: str, ca_cert: str) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin: no static credentials."""
    ctx = f"gke_{name}"
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {ctx}
  cluster:
    certificate-authority-data: {ca_cert}
    server: https://{endpoint}
contexts:
- name: {ctx}
  context:
    cluster: {ctx}
    user: {ctx}
current-context: {ctx}
users:
- name: {ctx}
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)
      provideClusterInfo: true
"""
