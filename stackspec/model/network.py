"""The cluster's own VPC and the secondary (DCN) VPCs between slices."""

from __future__ import annotations

from pydantic import Field

from ..gke import DCN_MTU
from .types import NetworkName, Section, SubnetCidr, SubnetName


class SecondaryNetwork(Section):
    network: NetworkName | None = None  # <cluster>-net-N by default
    subnet: SubnetName
    cidr: SubnetCidr


class PrimaryNetwork(Section):
    """The cluster's own VPC and its nodes' subnet (never the project's ``default`` network)."""

    network: NetworkName | None = None  # <cluster>-vpc by default
    subnet: SubnetName | None = None  # <cluster>-nodes by default
    cidr: SubnetCidr = "10.0.0.0/20"  # the nodes' addresses (4092 usable)


class Network(Section):
    mtu: int = Field(DCN_MTU, ge=1300, le=8896, description="8896 for the TPU DCN (jumbo frames)")
    primary: PrimaryNetwork = Field(default_factory=PrimaryNetwork)
    secondary: tuple[SecondaryNetwork, ...] = ()
