"""One multi-host TPU slice = one GKE node pool per capacity option, shaped by the slice model.

A slice lists capacity options in order (reservation, flex-start, Spot, on-demand); its worker
group's ComputeClass (``workloads/compute_class.py``) tells GKE's autoscaler that order. Each
option gets its own node pool, labelled and tainted for the class as GKE asks of node pools
created by hand (GKE: "About custom ComputeClasses", manually created node pools).

Sizing (``Slice.autoscaled``): a slice with one option keeps its whole slice up, as the seed does
(nothing to fall back to; flex-start excepted, which GKE only scales from zero). A slice with
fallbacks scales every option's pool from zero to one whole slice: the autoscaler only chooses
among pools it may grow, a fixed-size pool would fail `pulumi up` exactly when its capacity is
short, and a fallback left at zero costs nothing until the preferred option has none.

An autoscaled multi-host pool sets the per-zone limits, not only the totals: with just
``total_max_node_count`` the provider sends a per-zone maximum of 0 and GKE refuses the pool
("Maximum node count 0 is not a valid size of TPU pod slice"; rule ``gke-tpu-autoscaling-per-zone``
in ``stackspec/rules/catalogue.py``). No ``version``: pools follow the cluster's release channel
(rule ``gke-node-version-with-auto-upgrade``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.cluster import CLOUD_PLATFORM_SCOPE, kubelet_config
from stackspec import kube, names
from stackspec.spec import Capacity, Slice
from stackspec.tpu import DRANET_LABEL


@dataclass(frozen=True)
class SliceNodePoolArgs:
    slice: Slice
    cluster_name: pulumi.Input[str]
    location: str
    project: str
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
            values=[capacity.reservation_path],
        )
    if capacity.type == "reservation":
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="ANY_RESERVATION")
    if capacity.type == "on-demand":
        # As the seed's `gcloud ... node-pools create`: no affinity, so GCE's default applies
        # and on-demand slices still use a matching reservation the project holds.
        return None
    # Spot and flex-start VMs must not consume reservations.
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")


def class_taint(compute_class: str) -> gcp.container.NodePoolNodeConfigTaintArgs:
    """GKE's taint on a node pool made by hand for a ComputeClass; pods selecting the class tolerate it."""
    return gcp.container.NodePoolNodeConfigTaintArgs(key=kube.COMPUTE_CLASS_LABEL, value=compute_class,
                                                     effect="NO_SCHEDULE")


class SliceNodePool(pulumi.ComponentResource):
    """The node pools GKE provisions atomically as one TPU slice, one per capacity option."""

    node_pool: gcp.container.NodePool | None  # the preferred (first) option's pool
    node_pools: list[gcp.container.NodePool]

    def __init__(self, name: str, args: SliceNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SliceNodePool", name, None, opts)
        s = args.slice
        shape = s.shape
        compute_class = names.compute_class(s.group)
        labels = {kube.SLICE_LABEL: s.name, kube.GROUP_LABEL: s.group, kube.COMPUTE_CLASS_LABEL: compute_class}
        network_config = None
        if args.additional_networks:
            labels[DRANET_LABEL] = "true"  # GKE managed DRANET attaches the extra NICs to pods
            network_config = gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=n, subnetwork=sn)
                    for n, sn in args.additional_networks
                ]
            )
        self.node_pools = []
        # A component's depends_on does not hold its children back: pass it on (the system pool first).
        after = list(opts.depends_on) if opts and isinstance(opts.depends_on, list) else []
        for cap, pool_name in s.pools:
            flex = cap.flex_start
            from_zero = s.autoscaled
            pool = gcp.container.NodePool(
                # A slice with one option keeps the component's name (the slice's); with fallbacks each pool is named
                # for its option, so reordering the options changes the ComputeClass, never a pool's identity.
                name if len(s.pools) == 1 else pool_name,
                gcp.container.NodePoolArgs(
                    name=pool_name,
                    cluster=args.cluster_name,
                    location=args.location,
                    project=args.project,
                    # No version: GKE creates the pool at the control plane's version and auto-upgrade keeps
                    # it there (a pinned version fights auto-upgrade: cloud rule gke-node-version-with-auto-upgrade).
                    # From zero: the autoscaler grows the pool to a whole slice when the class picks it.
                    node_count=None if from_zero else shape.hosts,
                    initial_node_count=0 if from_zero else None,
                    # Per-zone limits (the cluster is zonal: one zone holds the whole slice). Totals alone send a
                    # per-zone maximum of 0, which GKE refuses for a multi-host slice (gke-tpu-autoscaling-per-zone).
                    autoscaling=gcp.container.NodePoolAutoscalingArgs(
                        min_node_count=0, max_node_count=shape.hosts, location_policy="ANY"
                    )
                    if from_zero
                    else None,
                    # DWS queued provisioning: only ProvisioningRequests (Kueue's admission check) grow it.
                    queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
                    if cap.queued_provisioning
                    else None,
                    # Multi-host slices are all-or-nothing: a COMPACT placement with the topology.
                    placement_policy=gcp.container.NodePoolPlacementPolicyArgs(
                        type="COMPACT", tpu_topology=shape.topology
                    )
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
                        labels={**labels, kube.CAPACITY_LABEL: cap.type},
                        # Only pods selecting the class land here (GKE adds their toleration).
                        taints=[class_taint(compute_class)],
                        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                        service_account=args.node_service_account,
                        spot=cap.spot,
                        flex_start=True if flex else None,
                        max_run_duration=f"{cap.max_run_duration}s" if cap.max_run_duration else None,
                        reservation_affinity=reservation_affinity(cap),
                        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
                            mode="GKE_METADATA",
                        ),
                        # The kubelet's read-only port off, as on every pool (infra/cluster.py).
                        kubelet_config=kubelet_config(gcp.container.NodePoolNodeConfigKubeletConfigArgs),
                    ),
                    # The release channel keeps auto-upgrade on (GKE refuses it off in a channel); an upgrade
                    # recreates every host of a slice, so runs hold it off with the spec's maintenance exclusions
                    # (cluster.maintenance). Flex-start VMs are not repaired: GKE reclaims them at max run duration.
                    # No shielded_instance_config: GKE's TPU docs list no Shielded VM option for ct6e pools, so
                    # secure boot here is unverified and a refusal fails the whole slice; the cluster's Shielded
                    # GKE Nodes (node identity, integrity monitoring) still cover them.
                    management=gcp.container.NodePoolManagementArgs(auto_repair=not flex, auto_upgrade=True),
                ),
                # As cluster-toolkit's gke-node-pool: initialNodeCount is a creation value the autoscaler moves
                # on from; flex-start pools also get labels from GKE (the provider suppresses only GKE Sandbox's),
                # which the next `up` would otherwise strip (cloud rule gke-flex-start-labels).
                # The provider updates no placement policy in place (terraform-provider-google
                # resource_container_node_pool.go: only the block's count and policy_name are ForceNew, and
                # nodePoolUpdate has no placement_policy branch), so a new topology would plan an update that
                # changes nothing: replaced instead, deleted first (the new pool has the same name).
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=after,
                    ignore_changes=["initialNodeCount", *(["nodeConfig.labels"] if flex else [])],
                    replace_on_changes=["placementPolicy"], delete_before_replace=True),
            )
            self.node_pools.append(pool)
        self.node_pool = self.node_pools[0] if self.node_pools else None
        self.register_outputs({
            "names": [p.name for p in self.node_pools],
            "computeClass": compute_class,
            "capacity": [c.type for c in s.capacity],
            "maxNodeCount": shape.hosts,
        })
