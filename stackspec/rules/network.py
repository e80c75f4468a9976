"""Address ranges, VPCs and subnets across the cluster, its DCN networks and its slices."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from .. import limits
from ..errors import MISSING
from ..gke import DRANET_MIN_VERSION, gke_version_key
from ..model.types import _ns

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail) -> None:
    c, key = spec.cluster, _ns("cluster")
    primary = spec.network.primary
    ranges = [(_ns("network.primary.cidr"), primary.cidr)]
    ranges += [(f"{_ns('network.secondary')}[{i}].cidr", n.cidr) for i, n in enumerate(spec.networks)]
    ranges += [(f"{key}.{k}", v) for k, v in (("podCidr", c.pod_cidr), ("serviceCidr", c.service_cidr)) if v]
    for i, (k, cidr) in enumerate(ranges):
        for other_key, other in ranges[:i]:
            if ipaddress.ip_network(cidr).overlaps(ipaddress.ip_network(other)):
                fail(k, cidr, f"overlaps {other} at {other_key}")
    if spec.networks and not (c.pod_cidr or c.service_cidr):
        # Pods hold a pod-range address and one on each DCN subnet; GKE would pick the pod and
        # service ranges seeing only the cluster's own VPC.
        fail(f"{key}.podCidr", MISSING, "required with secondary networks (with serviceCidr): private ranges "
             "away from network.secondary, e.g. 10.100.0.0/14 and 10.104.0.0/20")
    elif bool(c.pod_cidr) != bool(c.service_cidr):
        fail(f"{key}.{'serviceCidr' if c.pod_cidr else 'podCidr'}", MISSING,
             "podCidr and serviceCidr are pinned together")
    vpcs = [n.network for n in spec.networks]
    if primary.network in vpcs:
        fail(_ns("network.primary.network"), primary.network, "the cluster's VPC is not a secondary (DCN) one")
    if primary.subnet in [n.subnet for n in spec.networks]:
        fail(_ns("network.primary.subnet"), primary.subnet, "a secondary network has a subnet of this name")
    if len(set(vpcs)) != len(vpcs):
        fail(_ns("network.secondary"), vpcs, "each secondary network needs its own VPC (a NIC per VPC)")
    subnets = [n.subnet for n in spec.networks]
    if len(set(subnets)) != len(subnets):  # one project and region: GCP refuses the second
        fail(_ns("network.secondary"), subnets, "each secondary network needs its own subnet name")
    hosts = sum(s.shape.hosts for s in spec.slices)
    if hosts + c.system_node_count > limits.usable_addresses(primary.cidr):
        fail(_ns("network.primary.cidr"), primary.cidr, f"{limits.usable_addresses(primary.cidr)} usable "
             f"addresses, the cluster has {hosts + c.system_node_count} nodes")
    if c.pod_cidr:
        nodes = hosts + c.system_node_count
        room = ipaddress.ip_network(c.pod_cidr).num_addresses // limits.POD_RANGE_PER_NODE
        if nodes > room:
            fail(f"{key}.podCidr", c.pod_cidr, f"holds {room} node(s) at a /24 per node (110 pods), the "
                 f"stack has {nodes}; use a larger range")
    for i, n in enumerate(spec.networks):
        # Every host of every slice takes one address on each secondary subnet.
        if hosts > limits.usable_addresses(n.cidr):
            fail(f"{_ns('network.secondary')}[{i}].cidr", n.cidr,
                 f"{limits.usable_addresses(n.cidr)} usable addresses, the slices have {hosts} hosts")
    if spec.networks:
        v = gke_version_key(c.version)
        if v and v < gke_version_key(DRANET_MIN_VERSION):
            fail(f"{key}.version", c.version,
                 f"GKE managed DRANET (secondary networks) needs at least {DRANET_MIN_VERSION} on Standard")
        single = [s.name for s in spec.slices if not s.shape.multi_host]
        if single:
            fail(_ns("network.secondary"), [n.subnet for n in spec.networks],
                 f"additional node networks are for multi-host slices; single-host slices: {single}")
