"""The GKE Standard cluster: Ray operator, GCS FUSE CSI, workload identity, Dataplane V2, and its hardening.

Hardening (README "Cluster hardening", after GKE's "Harden your cluster's security"): a release
channel with auto-upgrade and auto-repair on every pool, a maintenance window and exclusions from the
spec, private nodes with Cloud NAT egress, the control plane behind its DNS endpoint (IAM) or
authorized networks, Shielded GKE Nodes, its own VPC (``infra/vpc.py``), Secrets encrypted with the
bootstrap's Cloud KMS key, the kubelet's read-only port off on every pool, Binary Authorization and
security bulletins on Pub/Sub (``infra/cluster_security.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.cluster_security import EVALUATION_MODE, SECURITY_BULLETIN_EVENT
from infra.nat import CloudNat, CloudNatArgs
from stackspec import names
from stackspec.gke import IMAGE_STREAMING_ROLE
from stackspec.model import rfc3339
from stackspec.spec import Cluster

# The minimal role GKE documents for a node service account (logs, metrics,
# image pulls): nodes never run as the default compute service account.
NODE_SA_ROLE = "roles/container.defaultNodeServiceAccount"


def node_roles(image_streaming: bool) -> tuple[str, ...]:
    """The project roles the node account holds (granted by the bootstrap, which creates the account; a sandbox
    stack creates and grants them itself: infra/sandbox.py)."""
    return (NODE_SA_ROLE, *((IMAGE_STREAMING_ROLE,) if image_streaming else ()))
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# The kubelet's unauthenticated read-only port (10255) off on every node: it serves pod specs and metrics to
# anything that reaches the node (https://cloud.google.com/kubernetes-engine/docs/how-to/disable-kubelet-readonly-port;
# CIS GKE Benchmark "Ensure that the --read-only-port argument is set to 0"). The provider takes "TRUE"/"FALSE".
KUBELET_READONLY_PORT = "FALSE"
# Application-layer Secrets encryption (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets):
# the key must exist and GKE's service agent must hold cryptoKeyEncrypterDecrypter on it before the cluster
# (cloud rule gke-secrets-kms-key); the bootstrap makes both, the stack names the key. A sandbox stack has no
# bootstrap and keeps GKE's default encryption at rest instead (infra/sandbox.py says why).
DATABASE_ENCRYPTION = "ENCRYPTED"


def kubelet_config(cls):
    """A pool's kubelet settings (``cls`` the provider's ...KubeletConfigArgs of that node config)."""
    return cls(insecure_kubelet_readonly_port_enabled=KUBELET_READONLY_PORT)


@dataclass(frozen=True)
class GkeClusterArgs:
    cluster: Cluster
    project: str
    region: str  # Cloud NAT's router lives in the cluster's region
    network: pulumi.Input[str]  # the cluster's own VPC and its nodes' subnet (infra/vpc.py)
    subnetwork: pulumi.Input[str]
    notifications_topic: pulumi.Input[str]  # projects/<p>/topics/<t>: security bulletins (infra/cluster_security.py)
    image_streaming: bool = False  # GKE image streaming on the system pool (the Ray head's image)
    multi_networking: bool = False  # node pools attach extra (DCN) networks
    # A MultiKueue worker: its DNS endpoint also accepts Kubernetes ServiceAccount tokens (the manager's Kueue
    # presents one; control_plane_endpoints). Never the manager or a single-region cluster.
    kubernetes_tokens_via_dns: bool = False
    # GKE's HighScaleCheckpointing add-on (multi-tier checkpointing: workloads/multitier.py, an unverified opt-in).
    multi_tier_checkpointing: bool = False
    # Application-layer Secrets encryption with the bootstrap's key; off in a sandbox (infra/sandbox.py).
    secrets_encryption: bool = True


class GkeCluster(pulumi.ComponentResource):
    """A zonal Standard cluster with its default pool replaced by a CPU system pool.

    The CPU pool hosts the Ray head and system pods; TPU slices come as
    :class:`infra.slice_pool.SliceNodePool` children of the program.
    """

    cluster: gcp.container.Cluster
    node_service_account_email: str
    system_pool: gcp.container.NodePool

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:GkeCluster", name, None, opts)
        c = args.cluster
        child = pulumi.ResourceOptions(parent=self)
        # A component's depends_on does not hold its children back: the cluster takes it.
        after = list(opts.depends_on) if opts and isinstance(opts.depends_on, list) else []

        # The node account and its roles are the bootstrap's (bootstrap/components/stack_project.py): the deploy
        # identity can neither create service accounts nor change the project's IAM policy, only act as this one.
        # A sandbox stack creates them itself (infra/sandbox.py) and passes them in ``opts.depends_on``.
        self.node_service_account_email = names.node_service_account_email(c.name, args.project)

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
                    service_account=self.node_service_account_email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    kubelet_config=kubelet_config(gcp.container.ClusterNodeConfigKubeletConfigArgs),
                ),
                # Pools the cluster creates later (auto-provisioned) get the same kubelet setting.
                node_pool_defaults=gcp.container.ClusterNodePoolDefaultsArgs(
                    node_config_defaults=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsArgs(
                        insecure_kubelet_readonly_port_enabled=KUBELET_READONLY_PORT,
                    ),
                ),
                networking_mode="VPC_NATIVE",
                # Pinned where the spec says (GKE would pick without seeing the DCN VPCs): the subnet's secondary
                # ranges, declared by infra/vpc.py; unpinned, GKE creates them in the subnet.
                ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                    cluster_secondary_range_name=names.POD_RANGE if c.pod_cidr else None,
                    services_secondary_range_name=names.SERVICE_RANGE if c.service_cidr else None,
                ),
                database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                    state=DATABASE_ENCRYPTION, key_name=names.secrets_key_id(args.project, args.region, c.name),
                ) if args.secrets_encryption else None,
                binary_authorization=gcp.container.ClusterBinaryAuthorizationArgs(evaluation_mode=EVALUATION_MODE),
                notification_config=gcp.container.ClusterNotificationConfigArgs(
                    pubsub=gcp.container.ClusterNotificationConfigPubsubArgs(
                        enabled=True,
                        topic=args.notifications_topic,
                        filter=gcp.container.ClusterNotificationConfigPubsubFilterArgs(
                            event_types=[SECURITY_BULLETIN_EVENT]),
                    ),
                ),
                datapath_provider="ADVANCED_DATAPATH",  # Dataplane V2
                # Extra node networks: both apply-tested peers turn multi-networking on (it needs Dataplane V2 and
                # is set only at creation; cloud rule gke-multi-networking-for-extra-nics).
                enable_multi_networking=True if args.multi_networking else None,
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
                    high_scale_checkpointing_config=gcp.container.ClusterAddonsConfigHighScaleCheckpointingConfigArgs(
                        enabled=True) if args.multi_tier_checkpointing else None,
                ),
                deletion_protection=c.deletion_protection,
                network=args.network,
                subnetwork=args.subnetwork,
                enable_shielded_nodes=c.shielded_nodes,
                private_cluster_config=private_cluster_config(c),
                control_plane_endpoints_config=control_plane_endpoints(c, args.kubernetes_tokens_via_dns),
                master_authorized_networks_config=authorized_networks(c),
                maintenance_policy=maintenance_policy(c),
            ),
            opts=pulumi.ResourceOptions(parent=self, protect=c.deletion_protection, depends_on=after),
        )
        # Private nodes have no external IPs: Docker Hub (the Ray image) and PyPI go through Cloud NAT.
        self.nat = (
            CloudNat(f"{name}-nat", CloudNatArgs(cluster_name=c.name, network=args.network, region=args.region,
                                                 project=args.project), opts=child)
            if c.private_nodes
            else None
        )

        self.system_pool = gcp.container.NodePool(
            f"{name}-system",
            gcp.container.NodePoolArgs(
                name="system",
                cluster=self.cluster.name,
                location=c.location,
                project=args.project,
                node_count=c.system_node_count,
                # No version: the pool follows the control plane through auto-upgrade
                # (gke-node-version-with-auto-upgrade).
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=c.system_machine_type,
                    gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True)
                    if args.image_streaming
                    else None,
                    service_account=self.node_service_account_email,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA",  # the Ray head's nodeSelector needs the metadata server
                    ),
                    kubelet_config=kubelet_config(gcp.container.NodePoolNodeConfigKubeletConfigArgs),
                    # Secure boot refuses unsigned kernel modules; the system pool loads none.
                    shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                        enable_secure_boot=True,
                        enable_integrity_monitoring=True,
                    ),
                ),
                management=node_management(c),
            ),
            opts=child,
        )

        self.name = self.cluster.name
        if c.control_plane.access == "dns":
            # The DNS endpoint serves a publicly trusted certificate: no CA data to carry.
            self.endpoint = self.cluster.control_plane_endpoints_config.apply(
                lambda cfg: cfg.dns_endpoint_config.endpoint if cfg and cfg.dns_endpoint_config else None
            )
            self.kubeconfig = pulumi.Output.all(self.cluster.name, self.endpoint).apply(
                lambda a: kubeconfig(a[0], a[1], None)
            )
        else:
            self.endpoint = self.cluster.endpoint
            self.kubeconfig = pulumi.Output.all(
                self.cluster.name, self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
            ).apply(lambda a: kubeconfig(*a))
        self.register_outputs(
            {
                "name": self.cluster.name,
                "endpoint": self.cluster.endpoint,
                "nodeServiceAccount": self.node_service_account_email,
            }
        )


# --------------------------------------------------------------------------- hardening, from the spec


def node_management(c: Cluster) -> gcp.container.NodePoolManagementArgs:
    """Auto-upgrade and auto-repair on: a pool in a release channel cannot opt out of upgrades (GKE
    refuses it); the spec's maintenance window and exclusions decide when they happen."""
    return gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True)


def private_cluster_config(c: Cluster) -> gcp.container.ClusterPrivateClusterConfigArgs | None:
    if not c.private_nodes:
        return None  # the provider asks for no block at all rather than enable_private_nodes=false
    return gcp.container.ClusterPrivateClusterConfigArgs(
        enable_private_nodes=True,
        # The IP endpoint's public address off, unless the spec lists an explicitly public range (dev only).
        enable_private_endpoint=not c.control_plane.public_endpoint,
    )


def control_plane_endpoints(c: Cluster, kubernetes_tokens: bool = False,
                            ) -> gcp.container.ClusterControlPlaneEndpointsConfigArgs:
    """``kubernetes_tokens``: a MultiKueue worker's DNS endpoint accepts Kubernetes ServiceAccount tokens too
    (GKE API DNSEndpointConfig.enable_k8s_tokens_via_dns, "Controls whether the k8s token auth is allowed via
    DNS"; terraform-provider-google resource_container_cluster.go schema "enable_k8s_tokens_via_dns", sent by
    expandControlPlaneEndpointsConfig, no ForceNew: updated in place). Without it GKE answers a Kubernetes
    token there with 401 (terraform-google-modules/terraform-google-kubernetes-engine#2578), and Kueue's
    MultiKueue presents exactly that (docs/multikueue.md "Credential", with its exposure)."""
    dns = c.control_plane.access == "dns"
    return gcp.container.ClusterControlPlaneEndpointsConfigArgs(
        # Every request with a Google credential over the DNS endpoint is authorised by IAM
        # (container.clusters.connect); a Kubernetes token, where allowed, by the cluster's RBAC alone.
        dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
            allow_external_traffic=dns,
            enable_k8s_tokens_via_dns=True if kubernetes_tokens and dns else None,
        ),
        # DNS-only: no IP endpoint to reach, public or private.
        ip_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigIpEndpointsConfigArgs(enabled=not dns),
    )


def authorized_networks(c: Cluster) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs | None:
    if c.control_plane.access == "dns":
        return None  # no IP endpoint
    return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=n.cidr,
                                                                             display_name=n.name or n.cidr)
            for n in c.control_plane.authorized_networks
        ],
        gcp_public_cidrs_access_enabled=False,  # not every Compute Engine address in the world
        private_endpoint_enforcement_enabled=True,
    )


def maintenance_policy(c: Cluster) -> gcp.container.ClusterMaintenancePolicyArgs | None:
    m = c.maintenance
    if m.window is None and not m.exclusions:
        return None
    return gcp.container.ClusterMaintenancePolicyArgs(
        recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
            start_time=rfc3339(m.window.start), end_time=rfc3339(m.window.end), recurrence=m.window.recurrence,
        )
        if m.window
        else None,
        maintenance_exclusions=[
            gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name=e.name,
                start_time=rfc3339(e.start),
                end_time=rfc3339(e.end) if e.end else None,
                exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                    scope=e.scope, end_time_behavior=None if e.end else "UNTIL_END_OF_SUPPORT",
                ),
            )
            for e in m.exclusions
        ]
        or None,
    )


def get_credentials(c: Cluster, project: str) -> str:
    """The operator's command for a kubeconfig: through the DNS endpoint (IAM) unless the spec chose IPs."""
    flag = " --dns-endpoint" if c.control_plane.access == "dns" else ""
    return f"gcloud container clusters get-credentials {c.name} --location={c.location} --project={project}{flag}"


def kubeconfig(name: str, endpoint: str, ca_cert: str | None) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin: no static credentials.

    ``ca_cert`` None: the DNS endpoint, whose certificate a public CA signs.
    """
    ctx = f"gke_{name}"
    ca = f"\n    certificate-authority-data: {ca_cert}" if ca_cert else ""
    return f"""apiVersion: v1
kind: Config
clusters:
- name: {ctx}
  cluster:{ca}
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
