"""Cloud NAT for private nodes: egress without external IPs.

Private nodes have internal addresses only. Google APIs and Artifact Registry are reached through
Private Google Access, but the Ray image (Docker Hub) and ``pip install`` at worker start (PyPI) are
on the internet: a Cloud Router with a NAT gateway in the cluster's region gives the nodes outbound
connections and accepts no inbound ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class CloudNatArgs:
    cluster_name: str  # names the router and gateway (<cluster>-nat-router, <cluster>-nat)
    network: pulumi.Input[str]  # the VPC whose nodes get egress (the cluster's primary network)
    region: str
    project: str


class CloudNat(pulumi.ComponentResource):
    """A Cloud Router and its NAT gateway for every subnet range of the cluster's network."""

    router: gcp.compute.Router
    nat: gcp.compute.RouterNat

    def __init__(self, name: str, args: CloudNatArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:CloudNat", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.router = gcp.compute.Router(
            f"{name}-router",
            gcp.compute.RouterArgs(
                name=f"{args.cluster_name}-nat-router",  # the cluster name has <= 40 characters: fits 63
                network=args.network,
                region=args.region,
                project=args.project,
                description=f"Cloud NAT for the private nodes of GKE cluster {args.cluster_name}",
            ),
            opts=child,
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-gateway",
            gcp.compute.RouterNatArgs(
                name=f"{args.cluster_name}-nat",
                router=self.router.name,
                region=args.region,
                project=args.project,
                nat_ip_allocate_option="AUTO_ONLY",
                # Node primary ranges and the pod ranges (VPC-native pods egress as themselves).
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                # Image pulls open many connections at once from each TPU host when a slice starts.
                enable_dynamic_port_allocation=True,
                enable_endpoint_independent_mapping=False,  # dynamic port allocation requires it off
                min_ports_per_vm=256,
                max_ports_per_vm=8192,
                log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            ),
            opts=child,
        )
        self.register_outputs({"router": self.router.name, "nat": self.nat.name})
