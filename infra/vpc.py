"""The cluster's own VPC: a custom-mode network and the nodes' subnet, never the project's ``default``.

The ``default`` network comes with firewall rules open to the internet (SSH and RDP from 0.0.0.0/0) and
organisations that skip it refuse a cluster that names it (CIS Google Cloud Foundations Benchmark 3.1,
"Ensure that the default network does not exist in a project"). Private Google Access lets the private
nodes reach Google APIs and Artifact Registry with internal addresses only
(https://cloud.google.com/vpc/docs/private-google-access); pods and services take the subnet's secondary
ranges (VPC-native, https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from stackspec import names
from stackspec.spec import Cluster, PrimaryNetwork


@dataclass(frozen=True)
class ClusterNetworkArgs:
    network: PrimaryNetwork
    cluster: Cluster  # its pod and service ranges become the subnet's secondary ranges
    region: str
    project: str


class ClusterNetwork(pulumi.ComponentResource):
    """A custom-mode VPC and one subnet with Private Google Access and the pod/service secondary ranges."""

    network: gcp.compute.Network
    subnet: gcp.compute.Subnetwork

    def __init__(self, name: str, args: ClusterNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:ClusterNetwork", name, None, opts)
        p, c = args.network, args.cluster
        child = pulumi.ResourceOptions(parent=self)
        self.network = gcp.compute.Network(
            f"{name}-vpc",
            gcp.compute.NetworkArgs(
                name=p.network,
                project=args.project,
                auto_create_subnetworks=False,  # custom mode: only the subnet below
                description=f"GKE cluster {c.name}: nodes, pods and services",
            ),
            opts=child,
        )
        # Pinned ranges are declared here and named to GKE; unpinned, GKE creates the secondary ranges itself.
        secondary = [
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=rn, ip_cidr_range=cidr)
            for rn, cidr in ((names.POD_RANGE, c.pod_cidr), (names.SERVICE_RANGE, c.service_cidr)) if cidr
        ]
        self.subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            gcp.compute.SubnetworkArgs(
                name=p.subnet,
                project=args.project,
                network=self.network.id,
                region=args.region,
                ip_cidr_range=p.cidr,
                private_ip_google_access=True,
                secondary_ip_ranges=secondary or None,
            ),
            opts=child,
        )
        self.register_outputs({"network": self.network.name, "subnet": self.subnet.name})
