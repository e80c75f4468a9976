"""Slice-shape rules on single resources: TPU node pools and Ray TPU worker groups.

Every fact (topologies, machine types, hosts, chips per host) comes from
``stackspec.tpu``; a rule only compares a resource against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackspec import tpu

from .common import (
    NODE_POOL,
    Context,
    as_int,
    containers,
    get,
    group_selector,
    group_tpu_chips,
    is_tpu_group,
    is_tpu_pool,
    pool_networks,
    pool_topology,
    tpu_request,
    worker_groups,
)


def _generation_of(machine_type: str) -> tpu.Generation | None:
    for gen in tpu.GENERATIONS.values():
        if any(mt.name == machine_type for mt in gen.machine_types):
            return gen
    return None


# --------------------------------------------------------------------------- node pools


def node_pool_topology(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The pool's ``tpuTopology`` is one its TPU generation offers."""
    if type_ != NODE_POOL or not is_tpu_pool(props):
        return []
    machine = str(get(props, "nodeConfig.machineType"))
    gen = _generation_of(machine)
    topo = get(props, "placementPolicy.tpuTopology")
    if gen is None or topo is None or str(topo) in gen.topologies:
        return []
    return [f"node pool {get(props, 'name', '?')}: topology {topo!r} is not offered for "
            f"{gen.name} ({machine}); allowed: {', '.join(gen.topologies)}"]


def node_pool_machine_type(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The machine type serves the topology (generation and chips per host agree)."""
    if type_ != NODE_POOL or not is_tpu_pool(props):
        return []
    machine = str(get(props, "nodeConfig.machineType"))
    gen = _generation_of(machine)
    topo = pool_topology(props)
    if gen is None or topo is None or topo not in gen.topologies:
        return []
    fitting = tpu.machine_types_for(gen, topo)
    if machine in fitting:
        return []
    return [f"node pool {get(props, 'name', '?')}: machine type {machine} "
            f"({gen.machine_type(machine).chips_per_host} chips per host) does not fit {gen.name} "
            f"topology {topo}; allowed: {', '.join(fitting)}"]


def node_pool_node_count(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """A slice pool has exactly as many nodes as the topology has hosts."""
    if type_ != NODE_POOL or not is_tpu_pool(props):
        return []
    topo = pool_topology(props)
    try:
        shape = tpu.from_machine_type(str(get(props, "nodeConfig.machineType")), topo or "")
    except tpu.SliceError:
        return []  # the topology and machine-type rules say why
    name = get(props, "name", "?")
    autoscaling = get(props, "autoscaling")
    if isinstance(autoscaling, Mapping) and autoscaling:
        # Flex-start / queued pools scale 0 <-> one whole slice.
        top = as_int(autoscaling.get("totalMaxNodeCount", autoscaling.get("maxNodeCount")))
        if top != shape.hosts:
            return [f"node pool {name}: autoscaling maximum is {top}, a {shape.pod_type} "
                    f"({shape.topology}) slice has {shape.hosts} host(s)"]
        return []
    count = as_int(get(props, "nodeCount", get(props, "initialNodeCount")))
    if count != shape.hosts:
        return [f"node pool {name}: nodeCount is {count}, a {shape.pod_type} ({shape.topology}, "
                f"{shape.machine_type.name}) slice has {shape.hosts} host(s)"]
    return []


def node_pool_compact_placement(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """Multi-host slices need a COMPACT placement policy carrying the tpuTopology."""
    if type_ != NODE_POOL or not is_tpu_pool(props):
        return []
    name = get(props, "name", "?")
    placement = get(props, "placementPolicy", {})
    topo = get(placement, "tpuTopology")
    count = as_int(get(props, "nodeCount", get(props, "initialNodeCount"))) or 0
    top = as_int(get(props, "autoscaling.totalMaxNodeCount")) or 0
    shape = None
    if topo:
        try:
            shape = tpu.from_machine_type(str(get(props, "nodeConfig.machineType")), str(topo))
        except tpu.SliceError:
            shape = None
    multi_host = (shape.multi_host if shape else False) or max(count, top) > 1
    if not multi_host:
        return []
    if not topo:
        return [f"node pool {name}: {max(count, top)} TPU hosts without placementPolicy."
                "tpuTopology are separate single-host slices, not one multi-host slice"]
    if get(placement, "type") != "COMPACT":
        return [f"node pool {name}: multi-host topology {topo} needs placementPolicy.type "
                f"COMPACT, got {get(placement, 'type')!r}"]
    return []


def node_pool_dranet(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """The DRANET label only with additional node networks, and gVNIC on for them."""
    if type_ != NODE_POOL:
        return []
    name = get(props, "name", "?")
    labels = get(props, "nodeConfig.labels", {})
    dranet = isinstance(labels, Mapping) and str(labels.get(tpu.DRANET_LABEL, "")) == "true"
    nets = pool_networks(props)
    gvnic = bool(get(props, "nodeConfig.gvnic.enabled", False))
    out = []
    if dranet and not nets:
        out.append(f"node pool {name}: label {tpu.DRANET_LABEL}=true without "
                   "networkConfig.additionalNodeNetworkConfigs: DRANET has no NIC to attach")
    if nets and not dranet:
        out.append(f"node pool {name}: {len(nets)} additional network(s) but no "
                   f"{tpu.DRANET_LABEL}=true label: pods cannot claim the extra NICs")
    if (dranet or nets) and not gvnic:
        out.append(f"node pool {name}: additional networks need gVNIC "
                   "(nodeConfig.gvnic.enabled=true)")
    return out


# --------------------------------------------------------------------------- worker groups


def _group_label(path: str, group: Mapping[str, Any]) -> str:
    return f"worker group {get(group, 'groupName', path)}"


def worker_hosts(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """``numOfHosts`` equals the hosts of the topology the group's node selector names."""
    out = []
    for path, group in worker_groups(type_, props):
        if not is_tpu_group(group):
            continue
        accel, topo = group_selector(group)
        chips = group_tpu_chips(group)
        label = _group_label(path, group)
        if not accel or not topo:
            out.append(f"{label}: requests TPUs but its nodeSelector lacks "
                       f"{tpu.ACCELERATOR_LABEL} and {tpu.TOPOLOGY_LABEL}")
            continue
        try:
            shape = tpu.from_node_labels(str(accel), str(topo), chips or 0)
        except tpu.SliceError as e:
            if chips:
                out.append(f"{label}: {e}")
            continue
        hosts = as_int(get(group, "numOfHosts", 1))
        if hosts != shape.hosts:
            out.append(f"{label}: numOfHosts is {hosts}, topology {topo} with {chips} chips per "
                       f"host has {shape.hosts} host(s)")
    return out


def worker_tpu_request(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """``google.com/tpu`` request = limit = chips per host of the selected topology."""
    out = []
    for path, group in worker_groups(type_, props):
        if not is_tpu_group(group):
            continue
        label = _group_label(path, group)
        accel, topo = group_selector(group)
        allowed: tuple[int, ...] = ()
        for gen in tpu.GENERATIONS.values():
            if gen.gke_accelerator == accel and topo in gen.topologies:
                allowed = tuple(sorted({gen.machine_type(m).chips_per_host
                                        for m in tpu.machine_types_for(gen, str(topo))}))
        for c in containers(get(group, "template.spec", {})):
            req, lim = tpu_request(c)
            if req is None and lim is None:
                continue
            cname = get(c, "name", "?")
            if req != lim:
                out.append(f"{label} container {cname}: google.com/tpu request {req} != "
                           f"limit {lim}; TPUs are requested whole, request = limit")
            elif allowed and req not in allowed:
                out.append(f"{label} container {cname}: google.com/tpu is {req}, a host of "
                           f"{accel} {topo} has {' or '.join(map(str, allowed))} chips")
    return out
