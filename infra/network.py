"""The data-center network (DCN) between slices: one VPC, subnet and ingress firewall per extra NIC.

A VPC denies all ingress by default (GCE's implied rules), so slice-to-slice DCN traffic on the extra
NICs is dropped unless a rule admits it: each network admits TCP, UDP and ICMP from its own subnet only,
as cluster-toolkit's TPU v6e blueprint does for its extra VPCs (cloud rule ``gce-vpc-implied-deny-ingress``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from stackspec import names
from stackspec.spec import SecondaryNetwork

# What megascale (gRPC over TCP) and diagnostics (ping) use between hosts; UDP as cluster-toolkit allows it.
DCN_PROTOCOLS = ("tcp", "udp", "icmp")


@dataclass(frozen=True)
class SecondaryNetworksArgs:
    networks: tuple[SecondaryNetwork, ...]
    region: str
    mtu: int


class SecondaryNetworks(pulumi.ComponentResource):
    """Custom-mode VPCs with jumbo frames for Multislice DCN traffic (``megascale``)."""

    networks: list[gcp.compute.Network]
    subnets: list[gcp.compute.Subnetwork]
    firewalls: list[gcp.compute.Firewall]

    def __init__(self, name: str, args: SecondaryNetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SecondaryNetworks", name, None, opts)
        self.networks, self.subnets, self.firewalls = [], [], []
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
            firewall = gcp.compute.Firewall(
                f"{name}-allow-internal-{i}",
                gcp.compute.FirewallArgs(
                    name=names.dcn_firewall(net.network),
                    network=vpc.name,  # known at preview (an id is not), so the policy can match it
                    direction="INGRESS",
                    source_ranges=[net.cidr],  # the slice hosts' extra NICs, nothing else
                    allows=[gcp.compute.FirewallAllowArgs(protocol=p) for p in DCN_PROTOCOLS],
                    description="TPU Multislice DCN: slice hosts reach each other on this network",
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.networks.append(vpc)
            self.subnets.append(subnet)
            self.firewalls.append(firewall)
        self.register_outputs(
            {
                "networks": [n.name for n in self.networks],
                "subnets": [s.name for s in self.subnets],
                "firewalls": [f.name for f in self.firewalls],
            }
        )
