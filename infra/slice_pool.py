"""One multi-host TPU slice = one GKE node pool, shaped by the slice model."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.cluster import CLOUD_PLATFORM_SCOPE
from stackspec import kube
from stackspec.spec import Capacity, Slice
from stackspec.tpu import DRANET_LABEL


@dataclass(frozen=True)
class SliceNodePoolArgs:
    slice: Slice
    cluster_name: pulumi.Input[str]
    location: str
    project: str
    version: str
    node_service_account: pulumi.Input[str]
    # (network, subnetwork) names of the secondary DCN networks, in NIC order.
    additional_networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = ()
    # GKE image streaming (Artifact Registry images only): a worker starts before its image is fully pulled.
    image_streaming: bool = False


def reservation_affinity(capacity: Capacity) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs | None:
    if capacity.type == "reservation" and capacity.affinity == "SPECIFIC":
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key="compute.googleapis.com/reservation-name",
            values=[capacity.reservation],
        )
    if capacity.type == "reservation":
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="ANY_RESERVATION")
    if capacity.type == "on-demand":
        # As the seed's `gcloud ... node-pools create`: no affinity, so GCE's default applies
        # and on-demand slices still use a matching reservation the project holds.
        return None
    # Spot and flex-start VMs must not consume reservations.
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")


class SliceNodePool(pulumi.ComponentResource):
    """The node pool GKE provisions atomically as one TPU slice."""

    node_pool: gcp.container.NodePool

    def __init__(self, name: str, args: SliceNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SliceNodePool", name, None, opts)
        s = args.slice
        shape = s.shape
        labels = {kube.SLICE_LABEL: s.name, kube.GROUP_LABEL: s.group}
        network_config = None
        if args.additional_networks:
            labels[DRANET_LABEL] = "true"  # GKE managed DRANET attaches the extra NICs to pods
            network_config = gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=n, subnetwork=sn)
                    for n, sn in args.additional_networks
                ]
            )
        cap = s.capacity
        flex = cap.type == "flex-start"
        self.node_pool = gcp.container.NodePool(
            name,
            gcp.container.NodePoolArgs(
                name=s.name,
                cluster=args.cluster_name,
                location=args.location,
                project=args.project,
                version=args.version,
                # Flex-start slices are created empty and scale to a whole slice on demand.
                node_count=None if flex else shape.hosts,
                initial_node_count=0 if flex else None,
                autoscaling=gcp.container.NodePoolAutoscalingArgs(
                    total_min_node_count=0, total_max_node_count=shape.hosts, location_policy="ANY"
                )
                if flex
                else None,
                # Multi-host slices are all-or-nothing: a COMPACT placement with the topology.
                placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT", tpu_topology=shape.topology)
                if shape.multi_host
                else None,
                network_config=network_config,
                node_config=gcp.container.NodePoolNodeConfigArgs(
                    machine_type=shape.machine_type.name,
                    advanced_machine_features=gcp.container.NodePoolNodeConfigAdvancedMachineFeaturesArgs(
                        threads_per_core=1,
                    ),
                    gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                    gcfs_config=gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True)
                    if args.image_streaming
                    else None,
                    labels=labels,
                    oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                    service_account=args.node_service_account,
                    spot=cap.type == "spot",
                    flex_start=True if flex else None,
                    reservation_affinity=reservation_affinity(cap),
                    workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                        mode="GKE_METADATA",
                    ),
                ),
                # The release channel keeps auto-upgrade on (GKE refuses it off in a channel); an upgrade
                # recreates every host of a slice, so runs hold it off with the spec's maintenance exclusions
                # (cluster.maintenance). Flex-start VMs are not repaired: GKE reclaims them at max run duration.
                # No shielded_instance_config: GKE's TPU docs list no Shielded VM option for ct6e pools, so
                # secure boot here is unverified and a refusal fails the whole slice; the cluster's Shielded
                # GKE Nodes (node identity, integrity monitoring) still cover them.
                management=gcp.container.NodePoolManagementArgs(auto_repair=not flex, auto_upgrade=True),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"name": self.node_pool.name, "nodeCount": shape.hosts})
