"""A multi-region stack's manager cluster: no TPUs, it holds the queues and Kueue's MultiKueue (README "Regions").

Autopilot by default (it runs only Kueue's controller and the Ray add-on's operator), in its own VPC with private
nodes and Cloud NAT, the control plane behind its DNS endpoint, Secrets encrypted with the bootstrap's key, a
release channel and the spec's maintenance window. No cluster registers in a fleet: nothing consumes a membership
(the manager reaches each worker through its DNS endpoint), and a membership needs gkehub.googleapis.com, which
neither the bootstrap nor the stack enables (GCP review N7).

The Ray add-on gives the manager the RayJob and RayCluster CRDs its queued jobs are created as; its KubeRay operator
skips them, because Kueue's webhook sets ``spec.managedBy: kueue.x-k8s.io/multikueue`` there (KubeRay
ray-operator/controllers/ray/rayjob_controller.go: "Skipping RayJob managed by a custom controller";
Kueue v0.19.2 site/content/en/docs/tasks/run/multikueue/kuberay.md:32).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.cluster import (
    CLOUD_PLATFORM_SCOPE,
    DATABASE_ENCRYPTION,
    GkeCluster,
    GkeClusterArgs,
    authorized_networks,
    control_plane_endpoints,
    kubeconfig,
    maintenance_policy,
    private_cluster_config,
)
from infra.cluster_security import EVALUATION_MODE, SECURITY_BULLETIN_EVENT
from infra.nat import CloudNat, CloudNatArgs
from infra.vpc import ClusterNetwork, ClusterNetworkArgs
from stackspec import names
from stackspec.spec import StackSpec


@dataclass(frozen=True)
class ManagerClusterArgs:
    spec: StackSpec  # the multi-region stack (its manager section)
    notifications_topic: pulumi.Input[str]
    depends_on: tuple[pulumi.Resource, ...] = ()


class ManagerCluster(pulumi.ComponentResource):
    """The manager's VPC, cluster (Autopilot, or Standard with one system pool) and Kubernetes provider."""

    cluster: gcp.container.Cluster
    provider: k8s.Provider
    ready: list[pulumi.Resource]

    def __init__(self, name: str, args: ManagerClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:ManagerCluster", name, None, opts)
        spec, m = args.spec, args.spec.manager
        c = m.as_cluster()
        child = pulumi.ResourceOptions(parent=self)
        self.vpc = ClusterNetwork(f"{name}-network", ClusterNetworkArgs(network=m.network, cluster=c, region=m.region,
                                                                       project=spec.project), opts=child)
        if not m.autopilot:
            gke = GkeCluster(name, GkeClusterArgs(cluster=c, project=spec.project, region=m.region,
                                                  network=self.vpc.network.name, subnetwork=self.vpc.subnet.name,
                                                  notifications_topic=args.notifications_topic),
                             opts=pulumi.ResourceOptions(parent=self,
                                                         depends_on=[*args.depends_on, self.vpc.subnet]))
            self.cluster, self.ready, config = gke.cluster, [gke.system_pool], gke.kubeconfig
        else:
            self.cluster = gcp.container.Cluster(
                name,
                gcp.container.ClusterArgs(
                    name=m.name,
                    project=spec.project,
                    location=m.region,  # Autopilot clusters are regional
                    enable_autopilot=True,
                    min_master_version=m.version,
                    release_channel=gcp.container.ClusterReleaseChannelArgs(channel=m.release_channel),
                    network=self.vpc.network.name,
                    subnetwork=self.vpc.subnet.name,
                    # VPC-native: the subnet's secondary ranges where the spec pins them (infra/vpc.py).
                    ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                        cluster_secondary_range_name=names.POD_RANGE if c.pod_cidr else None,
                        services_secondary_range_name=names.SERVICE_RANGE if c.service_cidr else None,
                    ),
                    # Autopilot's nodes run as the bootstrap's node account, never the default compute one.
                    cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
                        auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                            service_account=names.node_service_account_email(m.name, spec.project),
                            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                        ),
                    ),
                    database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                        state=DATABASE_ENCRYPTION, key_name=names.secrets_key_id(spec.project, m.region, m.name),
                    ),
                    binary_authorization=gcp.container.ClusterBinaryAuthorizationArgs(
                        evaluation_mode=EVALUATION_MODE),
                    notification_config=gcp.container.ClusterNotificationConfigArgs(
                        pubsub=gcp.container.ClusterNotificationConfigPubsubArgs(
                            enabled=True, topic=args.notifications_topic,
                            filter=gcp.container.ClusterNotificationConfigPubsubFilterArgs(
                                event_types=[SECURITY_BULLETIN_EVENT]),
                        ),
                    ),
                    # Autopilot turns these on itself; stated so the policies read them as on every cluster.
                    workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                        workload_pool=f"{spec.project}.svc.id.goog"),
                    addons_config=gcp.container.ClusterAddonsConfigArgs(
                        ray_operator_configs=[gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=True)],
                        gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                            enabled=True),
                    ),
                    deletion_protection=m.deletion_protection,
                    private_cluster_config=private_cluster_config(c),
                    control_plane_endpoints_config=control_plane_endpoints(c),
                    master_authorized_networks_config=authorized_networks(c),
                    maintenance_policy=maintenance_policy(c),
                ),
                opts=pulumi.ResourceOptions(parent=self, protect=m.deletion_protection,
                                            depends_on=[*args.depends_on, self.vpc.subnet]),
            )
            self.ready = [self.cluster]
            endpoint = self.cluster.control_plane_endpoints_config.apply(
                lambda cfg: cfg.dns_endpoint_config.endpoint if cfg and cfg.dns_endpoint_config else None)
            config = (pulumi.Output.all(self.cluster.name, endpoint).apply(lambda a: kubeconfig(a[0], a[1], None))
                      if c.control_plane.access == "dns" else
                      pulumi.Output.all(self.cluster.name, self.cluster.endpoint,
                                        self.cluster.master_auth.cluster_ca_certificate).apply(
                          lambda a: kubeconfig(*a)))
            # Private nodes pull Kueue's image from registry.k8s.io through Cloud NAT.
            self.nat = CloudNat(f"{name}-nat", CloudNatArgs(cluster_name=m.name, network=self.vpc.network.name,
                                                            region=m.region, project=spec.project), opts=child)
        self.provider = k8s.Provider(names.k8s_provider(name), kubeconfig=config, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=self.ready))
        self.register_outputs({"name": self.cluster.name, "location": m.region, "autopilot": m.autopilot})
