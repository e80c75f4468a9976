"""Slice-shape rules on single resources: TPU node pools and Ray TPU worker groups.

Every fact (topologies, machine types, hosts, chips per host) comes from
``stackspec.tpu``; a rule only compares a resource against it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stackspec import kube, names, tpu

from .common import (
    COMPUTE_CLASS,
    NODE_POOL,
    RAY_CLUSTER,
    RAY_JOB,
    Context,
    Res,
    as_int,
    containers,
    get,
    group_selector,
    group_shape,
    group_tpu_chips,
    is_tpu_group,
    is_tpu_pool,
    items,
    k8s_name,
    pool_networks,
    pool_topology,
    slice_shape,
    tpu_request,
    worker_groups,
)

Violations = list[tuple[Res | None, str]]
# A worker group's ComputeClass lists at least this many capacity options (prod; a warning in dev).
MIN_FALLBACK_OPTIONS = 2


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
        out = []
        if top != shape.hosts:
            out.append(f"node pool {name}: autoscaling maximum is {top}, a {shape.pod_type} "
                       f"({shape.topology}) slice has {shape.hosts} host(s)")
        start = as_int(get(props, "nodeCount", get(props, "initialNodeCount")))
        if start not in (None, 0, shape.hosts):  # none, or the whole slice: never part of one
            out.append(f"node pool {name}: starts with {start} node(s), a {shape.pod_type} "
                       f"({shape.topology}) slice has {shape.hosts} host(s): 0 or {shape.hosts}")
        return out
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
    top = as_int(get(props, "autoscaling.totalMaxNodeCount", get(props, "autoscaling.maxNodeCount"))) or 0
    shape = slice_shape(str(get(props, "nodeConfig.machineType")), str(topo)) if topo else None
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


# --------------------------------------------------------------------------- capacity fallbacks (ComputeClass)


def _classes(resources: Sequence[Res]) -> dict[str, Res]:
    return {k8s_name(r.props): r for r in resources if r.type == COMPUTE_CLASS}


def _group_class(group: Mapping[str, Any]) -> str | None:
    sel = get(group, "template.spec.nodeSelector", {})
    value = sel.get(kube.COMPUTE_CLASS_LABEL) if isinstance(sel, Mapping) else None
    return str(value) if value else None


def _option(rule: Mapping[str, Any]) -> str:
    """A priority rule as the capacity option it stands for, for messages."""
    if get(rule, "flexStart.enabled"):
        return "flex-start"
    if isinstance(get(rule, "reservations"), Mapping):
        names_ = [str(get(r, "name")) for r in items(get(rule, "reservations.specific", []))]
        return f"reservation {', '.join(names_)}".strip() if names_ else "reservation"
    return "spot" if get(rule, "spot") is True else "on-demand"


def priority_shape(rule: Mapping[str, Any]) -> tuple[tpu.SliceShape | None, str | None]:
    """The slice shape a ComputeClass priority provisions, or why it provisions none."""
    t = get(rule, "tpu")
    if not isinstance(t, Mapping):
        return None, "has no tpu rule: it provisions nodes without TPUs"
    try:
        return tpu.from_node_labels(str(t.get("type")), str(t.get("topology")), as_int(t.get("count")) or 0), None
    except tpu.SliceError as e:
        return None, str(e)


def compute_class_fits_jobs(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every option of a worker group's ComputeClass provisions the group's slice shape, and every
    RayJob on that group can run its MaxText mesh on each option."""
    from .stack import _jobs  # the RayJob view (entrypoint, worker group, shape) the job rules share

    classes = _classes(resources)
    out: Violations = []
    jobs_by_group: dict[int, list[Any]] = {}
    for j in _jobs(resources):
        if j.group is not None:
            jobs_by_group.setdefault(id(j.group), []).append(j)
    for r in resources:
        if r.type not in (RAY_CLUSTER, RAY_JOB):
            continue
        for path, group in worker_groups(r.type, r.props):
            name = _group_class(group)
            shape = group_shape(group)
            if name is None or shape is None:
                continue
            where = f"{k8s_name(r.props)} worker group {get(group, 'groupName', path)}"
            cc = classes.get(name)
            if cc is None:
                out.append((r, f"{where} selects ComputeClass {name}, which the stack does not declare: "
                               "its pods never schedule"))
                continue
            for i, rule in enumerate(items(get(cc.props, "spec.priorities", []))):
                got, why = priority_shape(rule)
                opt = f"ComputeClass {name} priority {i + 1} ({_option(rule)})"
                if got is None:
                    out.append((cc, f"{opt} {why}; {where} needs {shape.pod_type} {shape.topology}"))
                    continue
                if got.key != shape.key:
                    out.append((cc, f"{opt} provisions {got.pod_type} {got.topology} ({got.chips_per_host} "
                                    f"chips/host) but {where} runs on {shape.pod_type} {shape.topology} "
                                    f"({shape.chips_per_host} chips/host): a fallback must be the same slice shape"))
                for j in jobs_by_group.get(id(group), []):
                    if msg := tpu.mesh_error("ici", j.call.mesh("ici"), got.chips):
                        out.append((j.res, f"RayJob {j.name} cannot use {opt}: its ICI mesh must tile the "
                                           f"{got.chips} chips of a {got.pod_type} slice: {msg}"))
    return out


def compute_class_fallbacks(resources: Sequence[Res], ctx: Context) -> Violations:
    """A TPU worker group's ComputeClass has a fallback: at least two capacity options."""
    # Per cluster: a multi-region stack's region clusters each hold a class of the same name (their Kubernetes
    # provider tells them apart) over their own pools.
    classes = {(r.provider, k8s_name(r.props)): r for r in resources if r.type == COMPUTE_CLASS}
    out: Violations = []
    seen: set[tuple[str | None, str | None]] = set()
    for r in resources:
        if r.type not in (RAY_CLUSTER, RAY_JOB):
            continue
        for _, group in worker_groups(r.type, r.props):
            key = (r.provider, _group_class(group))
            # A class built without its provider (a hand-made resource) is the cluster's only one of that name.
            cls = classes.get(key) or classes.get((None, key[1]))
            if not is_tpu_group(group) or key in seen or cls is None:
                continue
            seen.add(key)
            name = key[1]
            pools = [p for p in resources if p.type == NODE_POOL and _pool_class(p.props) == name
                     and (r.provider is None or names.k8s_provider(str(get(p.props, "cluster"))) == r.provider)]
            rules = items(get(cls.props, "spec.priorities", []))
            if len(rules) < MIN_FALLBACK_OPTIONS and not _held(pools, name) and not _queued(pools, name):
                have = ", ".join(_option(x) for x in rules) or "none"
                out.append((cls, f"ComputeClass {name} has {len(rules)} capacity option(s) ({have}): "
                                 "when it has no capacity the slices wait; add a fallback"))
    return out


def _queued(resources: Sequence[Res], compute_class: str) -> bool:
    """Every pool of the class has queued provisioning (DWS): the slices wait in Kueue's ProvisioningRequest queue
    by design, and the spec allows no other option beside it (``stackspec/rules/kueue.py``)."""
    pools = [r for r in resources if r.type == NODE_POOL and _pool_class(r.props) == compute_class]
    return bool(pools) and all(get(p.props, "queuedProvisioning.enabled") is True for p in pools)


def _held(resources: Sequence[Res], compute_class: str) -> bool:
    """Every pool of the class is fixed at its whole slice (the seed's pools): the capacity is held while the
    pool exists, so there is nothing for a fallback to catch."""
    pools = [r for r in resources if r.type == NODE_POOL and _pool_class(r.props) == compute_class]
    return bool(pools) and all(not get(p.props, "autoscaling") and (as_int(get(p.props, "nodeCount")) or 0) > 0
                               for p in pools)


def _pool_class(props: Mapping[str, Any]) -> str | None:
    labels = get(props, "nodeConfig.labels", {})
    return labels.get(kube.COMPUTE_CLASS_LABEL) if isinstance(labels, Mapping) else None


def node_pool_compute_class(type_: str, props: Mapping[str, Any], ctx: Context) -> list[str]:
    """A node pool labelled for a ComputeClass is also tainted for it (GKE's rule for pools made by hand)."""
    if type_ != NODE_POOL:
        return []
    name = _pool_class(props)
    if not name:
        return []
    taints = items(get(props, "nodeConfig.taints", []))
    if any(get(t, "key") == kube.COMPUTE_CLASS_LABEL and get(t, "value") == name
           and get(t, "effect") in ("NO_SCHEDULE", "NoSchedule") for t in taints):
        return []
    return [f"node pool {get(props, 'name', '?')}: labelled {kube.COMPUTE_CLASS_LABEL}={name} without the taint "
            f"{kube.COMPUTE_CLASS_LABEL}={name}:NoSchedule: pods of other classes would land on it"]
