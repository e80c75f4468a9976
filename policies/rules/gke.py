"""GKE's, GCE's and IAM's server-side rules on the rendered plan (``stackspec/rules/catalogue.py`` holds each
rule's source): what the first `pulumi up` would be refused for, or what would break once it is up."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from stackspec.gke import IMAGE_STREAMING_ROLE

from .common import (
    BUCKET_GRANTS,
    CLUSTER,
    FIREWALL,
    NETWORK,
    NODE_POOL,
    PROJECT_IAM_MEMBER,
    SUBNETWORK,
    Context,
    Res,
    as_int,
    get,
    grants,
    items,
    pool_networks,
    pool_shape,
)

Violations = list[tuple[Res | None, str]]
ACCOUNT = "gcp:serviceaccount/account:Account"
WORKLOAD_POOL_SUFFIX = ".svc.id.goog"


def _of(resources: Sequence[Res], type_: str) -> list[Res]:
    return [r for r in resources if r.type == type_]


def tpu_autoscaling_per_zone(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """An autoscaled multi-host TPU pool sets the per-zone maximum to the slice's hosts (cloud rule
    gke-tpu-autoscaling-per-zone): with total limits alone the provider sends a per-zone maximum of 0."""
    if type_ != NODE_POOL:
        return []
    shape = pool_shape(props)
    autoscaling = get(props, "autoscaling")
    if shape is None or not shape.multi_host or not isinstance(autoscaling, Mapping) or not autoscaling:
        return []
    top = as_int(autoscaling.get("maxNodeCount"))
    if top == shape.hosts:
        return []
    totals = "totalMaxNodeCount" in autoscaling or "totalMinNodeCount" in autoscaling
    return [f"node pool {get(props, 'name', '?')}: autoscaling.maxNodeCount is {top if top is not None else 'unset'}"
            + (" (total limits set instead: the provider sends a per-zone maximum of 0)" if totals else "")
            + f"; GKE validates a {shape.pod_type} slice pool against its per-zone maximum, which must be "
            f"{shape.hosts}: 'Maximum node count 0 is not a valid size of TPU pod slice'"]


def node_version_unpinned(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """A node pool that auto-upgrades names no version (cloud rule gke-node-version-with-auto-upgrade)."""
    if type_ != NODE_POOL or get(props, "version") is None:
        return []
    if get(props, "management.autoUpgrade", True) is False:
        return []
    return [f"node pool {get(props, 'name', '?')}: version {get(props, 'version')} is pinned while auto-upgrade is "
            "on: after GKE's first upgrade the next `up` rolls the pool back, and once that patch leaves the "
            "channel new pools are refused; drop version (the pool follows the control plane)"]


def _network_key(value: Any) -> str:
    """A network as a node pool or firewall names it (id, self link or name): its last path part."""
    return str(value).rstrip("/").rsplit("/", 1)[-1].removesuffix("-offline-id")


def dcn_network_firewall(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every network attached to TPU pools as an extra NIC admits TCP from its own subnet (cloud rule
    gce-vpc-implied-deny-ingress): a VPC denies all ingress by default."""
    nets = {_network_key(get(n.props, "name", n.name)): n for n in _of(resources, NETWORK)}
    subnets = {_network_key(get(s.props, "name", s.name)): s for s in _of(resources, SUBNETWORK)}
    attached: dict[str, set[str]] = {}
    for p in _of(resources, NODE_POOL):
        for cfg in pool_networks(p.props):
            attached.setdefault(_network_key(get(cfg, "network")), set()).add(_network_key(get(cfg, "subnetwork")))
    out: Violations = []
    for net, subs in sorted(attached.items()):
        cidrs = [str(get(subnets[s].props, "ipCidrRange")) for s in subs if s in subnets]
        ok = False
        for fw in _of(resources, FIREWALL):
            if _network_key(get(fw.props, "network")) != net or get(fw.props, "direction", "INGRESS") != "INGRESS":
                continue
            tcp = any(get(a, "protocol") in ("tcp", "all") and not get(a, "ports") for a in items(get(fw.props,
                                                                                                    "allows", [])))
            sources = [ipaddress.ip_network(str(c), strict=False) for c in items(get(fw.props, "sourceRanges", []))]
            covered = all(any(ipaddress.ip_network(c).subnet_of(src) for src in sources) for c in cidrs if c)
            ok = ok or (tcp and covered and bool(sources))
        if not ok:
            out.append((nets.get(net), f"network {net}: TPU pools attach it as an extra NIC, but no INGRESS firewall "
                                       f"allows TCP on every port from its subnet(s) {cidrs}: a VPC denies ingress "
                                       "by default, so slice-to-slice DCN traffic is dropped"))
    return out


def gke_multi_networking(resources: Sequence[Res], ctx: Context) -> Violations:
    """Extra node networks need multi-networking and Dataplane V2 on the cluster (cloud rule
    gke-multi-networking-for-extra-nics)."""
    # The clusters whose pools attach networks (a multi-region stack's manager has no TPU pools).
    attached = {get(p.props, "cluster") for p in _of(resources, NODE_POOL) if pool_networks(p.props)}
    if not attached:
        return []
    out: Violations = []
    for c in _of(resources, CLUSTER):
        name = get(c.props, "name", c.name)
        if name not in attached:
            continue
        if get(c.props, "enableMultiNetworking") is not True:
            out.append((c, f"cluster {name}: node pools attach additional node networks but enableMultiNetworking "
                           "is not true (set only at creation)"))
        if get(c.props, "datapathProvider") != "ADVANCED_DATAPATH":
            out.append((c, f"cluster {name}: multi-networking needs Dataplane V2 (datapathProvider "
                           "ADVANCED_DATAPATH)"))
    return out


def node_sa_image_streaming_role(resources: Sequence[Res], ctx: Context) -> Violations:
    """Pools that stream images run as an account holding Service Usage Consumer (cloud rule
    gke-image-streaming-node-sa-role), where the plan makes the account: the stacks' node accounts are the
    bootstrap's, which grants the role from the same stack spec (tests/test_bootstrap.py)."""
    made = {str(get(a.props, "accountId")) for a in _of(resources, ACCOUNT)}
    granted = {str(get(m.props, "member")).removeprefix("serviceAccount:")
               for m in _of(resources, PROJECT_IAM_MEMBER) if get(m.props, "role") == IMAGE_STREAMING_ROLE}
    out: Violations = []
    for p in _of(resources, NODE_POOL):
        if get(p.props, "nodeConfig.gcfsConfig.enabled") is not True:
            continue
        account = str(get(p.props, "nodeConfig.serviceAccount", "default"))
        if account.split("@")[0] in made and account not in granted:
            out.append((p, f"node pool {get(p.props, 'name', p.name)}: image streaming is on but its service account "
                           f"{account} is not granted {IMAGE_STREAMING_ROLE}: GKE then pulls every image whole"))
    return out


def _waits_for(r: Res, type_: str, by_urn: Mapping[str, Res], seen: set[str] | None = None) -> bool:
    seen = set() if seen is None else seen
    for urn in r.dependencies:
        if urn in seen:
            continue
        seen.add(urn)
        dep = by_urn.get(urn)
        if dep is not None and (dep.type == type_ or _waits_for(dep, type_, by_urn, seen)):
            return True
    return False


def wi_binding_after_cluster(resources: Sequence[Res], ctx: Context) -> Violations:
    """An IAM binding to workload identity principals waits for a cluster (cloud rule iam-wi-pool-exists)."""
    if not _of(resources, CLUSTER):
        return []
    by_urn = {r.urn: r for r in resources}
    out: Violations = []
    for m in [*(r for t in BUCKET_GRANTS for r in _of(resources, t)), *_of(resources, PROJECT_IAM_MEMBER)]:
        member = next((x for _, x in grants(m.props) if WORKLOAD_POOL_SUFFIX in x), "")
        if not member or _waits_for(m, CLUSTER, by_urn):
            continue
        out.append((m, f"{m.name}: binds {member.split('/subject/')[-1]} in the workload identity pool before any "
                       "cluster exists: on a fresh project IAM answers 'Identity Pool does not exist' until a second "
                       "`up`; make it depend on the cluster"))
    return out
