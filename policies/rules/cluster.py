"""GKE cluster rules: the add-ons the workloads need, workload identity, and the cluster's hardening."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from stackspec import limits
from stackspec.model import PROD_RELEASE_CHANNELS

from .common import CLUSTER, NODE_POOL, Context, get, is_tpu_pool, items


def ray_operator_and_gcsfuse(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The cluster runs the Ray operator add-on and the GCS FUSE CSI driver."""
    if type_ != CLUSTER:
        return []
    name = get(props, "name", "?")
    out = []
    ray = [c for c in items(get(props, "addonsConfig.rayOperatorConfigs", []))
           if get(c, "enabled") is True]
    if not ray:
        out.append(f"cluster {name}: the Ray operator add-on is off "
                   "(addonsConfig.rayOperatorConfigs[0].enabled): RayCluster/RayJob do not exist")
    if get(props, "addonsConfig.gcsFuseCsiDriverConfig.enabled") is not True:
        out.append(f"cluster {name}: the GCS FUSE CSI driver is off "
                   "(addonsConfig.gcsFuseCsiDriverConfig.enabled): the checkpoint volume "
                   "cannot mount")
    return out


def workload_identity(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Workload identity on the cluster, and the GKE metadata server on its node pools."""
    name = get(props, "name", "?")
    if type_ == CLUSTER:
        pool = str(get(props, "workloadIdentityConfig.workloadPool", ""))
        project = get(props, "project")
        want = f"{project}.svc.id.goog" if project else "<project>.svc.id.goog"
        if not pool.endswith(".svc.id.goog") or (project and pool != want):
            return [f"cluster {name}: workloadIdentityConfig.workloadPool is {pool or 'unset'}, "
                    f"must be {want}: pods reach the bucket through workload identity"]
    elif type_ == NODE_POOL and is_tpu_pool(props):
        mode = get(props, "nodeConfig.workloadMetadataConfig.mode")
        if mode != "GKE_METADATA":
            return [f"node pool {name}: nodeConfig.workloadMetadataConfig.mode is {mode}, must "
                    "be GKE_METADATA for workload identity on the TPU hosts"]
    return []


# --------------------------------------------------------------------------- hardening
# GKE's hardening guide: a release channel, private nodes, no public control plane, Shielded GKE
# Nodes. Registered mandatory; in dev they report as advisory (the registry's dev_enforcement).

_PROD_CHANNELS = PROD_RELEASE_CHANNELS  # the spec's rule, read by the policy too


def release_channel(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The cluster is in a release channel; its node pools auto-upgrade and auto-repair with it."""
    name = get(props, "name", "?")
    if type_ == CLUSTER:
        channel = get(props, "releaseChannel.channel")
        if channel not in _PROD_CHANNELS:
            return [f"cluster {name}: releaseChannel.channel is {channel or 'unset'}; allowed: "
                    f"{', '.join(_PROD_CHANNELS)} (no channel is being retired; RAPID has no SLA)"]
    elif type_ == NODE_POOL:
        out = []
        if get(props, "management.autoUpgrade") is not True:
            out.append(f"node pool {name}: management.autoUpgrade is not true; a pool in a release channel "
                       "upgrades with it (hold upgrades off a run with cluster.maintenance.exclusions)")
        flex = get(props, "nodeConfig.flexStart") is True  # GKE does not repair flex-start VMs
        if get(props, "management.autoRepair") is not True and not flex:
            out.append(f"node pool {name}: management.autoRepair is not true")
        return out
    return []


def _public_cidrs(props: Mapping[str, Any]) -> list[str]:
    out = []
    for block in items(get(props, "masterAuthorizedNetworksConfig.cidrBlocks", [])):
        cidr = str(get(block, "cidrBlock", ""))
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            out.append(cidr)  # not a range this rule can vouch for
            continue
        if net.version != 4 or not any(net.subnet_of(r) for r in limits.PRIVATE_RANGES):
            out.append(cidr)
    return out


def no_public_control_plane(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The API server is reached through its DNS endpoint (IAM) or a private IP endpoint, never the internet."""
    if type_ != CLUSTER:
        return []
    name = get(props, "name", "?")
    out = []
    ip_on = get(props, "controlPlaneEndpointsConfig.ipEndpointsConfig.enabled", True) is not False
    public_off = get(props, "privateClusterConfig.enablePrivateEndpoint") is True
    if ip_on and not public_off:
        out.append(f"cluster {name}: the control plane's public IP endpoint is on (neither "
                   "controlPlaneEndpointsConfig.ipEndpointsConfig.enabled=false nor "
                   "privateClusterConfig.enablePrivateEndpoint=true)")
    if get(props, "masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled") is True:
        out.append(f"cluster {name}: masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled lets every "
                   "Compute Engine address reach the control plane")
    public = _public_cidrs(props)
    if public:
        opened = " (the whole internet)" if any(c.endswith("/0") for c in public) else ""
        out.append(f"cluster {name}: authorized networks include public range(s) {public}{opened}")
    return out


def private_nodes(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Nodes have internal IPs only (egress through Cloud NAT)."""
    name = get(props, "name", "?")
    if type_ == CLUSTER and get(props, "privateClusterConfig.enablePrivateNodes") is not True:
        return [f"cluster {name}: privateClusterConfig.enablePrivateNodes is not true: nodes get external IPs"]
    if type_ == NODE_POOL and get(props, "networkConfig.enablePrivateNodes") is False:
        return [f"node pool {name}: networkConfig.enablePrivateNodes is false: its nodes get external IPs"]
    return []


def shielded_nodes(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Shielded GKE Nodes on the cluster; no pool turns integrity monitoring or secure boot off."""
    name = get(props, "name", "?")
    if type_ == CLUSTER and get(props, "enableShieldedNodes") is False:
        return [f"cluster {name}: enableShieldedNodes is false"]
    if type_ == NODE_POOL:
        cfg = get(props, "nodeConfig.shieldedInstanceConfig", {})
        off = [k for k in ("enableIntegrityMonitoring", "enableSecureBoot") if get(cfg, k) is False]
        if off:
            return [f"node pool {name}: nodeConfig.shieldedInstanceConfig turns off {', '.join(off)}"]
    return []
