"""GKE cluster rules: the add-ons the workloads need and workload identity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def tpu_pool_no_auto_upgrade(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """TPU slice pools do not auto-upgrade: an upgrade recreates every host of a slice."""
    if type_ != NODE_POOL or not is_tpu_pool(props):
        return []
    if get(props, "management.autoUpgrade") is False:
        return []
    return [f"node pool {get(props, 'name', '?')}: management.autoUpgrade is not false; an "
            "upgrade recreates every host of the slice mid-run"]
