"""The data-center network (DCN) between slices: one VPC and subnet per extra NIC."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from stackspec.spec import SecondaryNetwork


@dataclass(frozen=True)
class SecondaryNetworksArgs:
    networks: tuple[SecondaryNetwork, ...]
    region: str
    mtu: int


class SecondaryNetworks(pulumi.ComponentResource):
    """Custom-mode VPCs with jumbo frames for Multislice DCN traffic (``megascale``)."""

    networks: list[gcp.compute.Network]
    subnets: list[gcp.compute.Subnetwork]

    def __init__(self, name: str, args: SecondaryNetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SecondaryNetworks", name, None, opts)
        self.networks, self.subnets = [], []
        for i, net in enumerate(args.networks, start=1):
            vpc = gcp.compute.Network(
                f"{name}-net-{i}",
                gcp.compute.NetworkArgs(
                    name=net.network,
                    auto_create_subnetworks=False,  # --subnet-mode=custom
                    mtu=args.mtu,
                    description="TPU Multislice DCN (secondary NIC) network",
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            subnet = gcp.compute.Subnetwork(
                f"{name}-subnet-{i}",
                gcp.compute.SubnetworkArgs(
                    name=net.subnet,
                    network=vpc.id,
                    region=args.region,
                    ip_cidr_range=net.cidr,
                    private_ip_google_access=True,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.networks.append(vpc)
            self.subnets.append(subnet)
        self.register_outputs(
            {
                "networks": [n.name for n in self.networks],
                "subnets": [s.name for s in self.subnets],
            }
        )
