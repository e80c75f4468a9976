"""Rules across the stack: networks vs node pools, Ray worker groups vs node pools,
RayJobs vs their cluster, the cluster's version vs DRANET.

Each takes every resource of the stack and returns ``(resource, message)`` pairs.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from stackspec import kube, tpu
from stackspec import spec as stack_spec

from .common import (
    BUCKET,
    CLAIM_TEMPLATE,
    CLUSTER,
    GCSFUSE_DRIVER,
    NETDEV_DEVICE_CLASS,
    NETWORK,
    NODE_POOL,
    RAY_CLUSTER,
    RAY_JOB,
    SUBNETWORK,
    Context,
    Res,
    TrainerCall,
    as_int,
    cluster_specs,
    containers,
    get,
    group_selector,
    group_shape,
    is_tpu_group,
    is_tpu_pool,
    items,
    k8s_name,
    parse_entrypoint,
    pool_networks,
    pool_shape,
    pool_slice,
    pool_spot,
    worker_groups,
)

Violations = list[tuple[Res | None, str]]


def _of(resources: Sequence[Res], type_: str) -> list[Res]:
    return [r for r in resources if r.type == type_]


def _tpu_pools(resources: Sequence[Res]) -> list[tuple[Res, tpu.SliceShape]]:
    out = []
    for r in _of(resources, NODE_POOL):
        shape = pool_shape(r.props)
        if shape is not None:
            out.append((r, shape))
    return out


def _ref_name(value: Any) -> str:
    """A network reference by name, id or self link: its last path segment."""
    return str(value).rstrip("/").rsplit("/", 1)[-1]


# --------------------------------------------------------------------------- networks


def dcn_network_mtu(resources: Sequence[Res], ctx: Context) -> Violations:
    """Every network a TPU node pool attaches as an extra NIC has MTU 8896."""
    used = {_ref_name(get(n, "network")) for r in _of(resources, NODE_POOL)
            for n in pool_networks(r.props)}
    out: Violations = []
    for r in _of(resources, NETWORK):
        if {_ref_name(get(r.props, "name", r.name)), r.name} & used:
            mtu = as_int(get(r.props, "mtu"))
            if mtu != stack_spec.DCN_MTU:
                out.append((r, f"network {get(r.props, 'name', r.name)} carries TPU DCN traffic "
                               f"with MTU {mtu or 'default (1460)'}; it must be "
                               f"{stack_spec.DCN_MTU}"))
    return out


def _cluster_ranges(resources: Sequence[Res]) -> list[tuple[Res, str, str]]:
    out = []
    for r in _of(resources, CLUSTER):
        for key in ("clusterIpv4Cidr", "ipAllocationPolicy.clusterIpv4CidrBlock",
                    "ipAllocationPolicy.servicesIpv4CidrBlock"):
            if cidr := get(r.props, key):
                out.append((r, f"cluster {get(r.props, 'name', r.name)} {key}", str(cidr)))
    return out


def dcn_subnets_no_overlap(resources: Sequence[Res], ctx: Context) -> Violations:
    """Subnet ranges overlap neither each other, nor the cluster's ranges, nor reserved ones."""
    ranges: list[tuple[Res | None, str, str]] = []
    declared = {get(sec, "rangeName") for r in _of(resources, SUBNETWORK)
                for sec in items(get(r.props, "secondaryIpRanges", [])) if get(sec, "ipCidrRange")}
    for r in _of(resources, SUBNETWORK):
        label = f"subnet {get(r.props, 'name', r.name)}"
        if cidr := get(r.props, "ipCidrRange"):
            ranges.append((r, label, str(cidr)))
        for sec in items(get(r.props, "secondaryIpRanges", [])):
            if cidr := get(sec, "ipCidrRange"):
                ranges.append((r, f"{label} range {get(sec, 'rangeName', '?')}", str(cidr)))
    ranges += _cluster_ranges(resources)
    ranges += [(None, "reserved range", str(c)) for c in ctx.config.get("reservedRanges", [])]
    out: Violations = []
    if ctx.config.get("requirePinnedClusterRanges", True) and _dranet_used(resources):
        # Pods hold an address from the pod range and one per DCN subnet: GKE picks unpinned
        # ranges seeing only the cluster's VPC, and may land on a DCN subnet.
        for r in _of(resources, CLUSTER):
            # (the legacy top-level clusterIpv4Cidr pins the pod range too)
            # ... or names secondary ranges a declared subnet pins (infra/vpc.py: VPC-native on its own subnet).
            pods = (get(r.props, "ipAllocationPolicy.clusterIpv4CidrBlock") or get(r.props, "clusterIpv4Cidr")
                    or get(r.props, "ipAllocationPolicy.clusterSecondaryRangeName") in declared)
            services = (get(r.props, "ipAllocationPolicy.servicesIpv4CidrBlock")
                        or get(r.props, "ipAllocationPolicy.servicesSecondaryRangeName") in declared)
            missing = [k for k, v in (("clusterIpv4CidrBlock", pods), ("servicesIpv4CidrBlock", services))
                       if not v]
            if missing:
                out.append((r, f"cluster {get(r.props, 'name', r.name)} leaves "
                               f"ipAllocationPolicy.{' and '.join(missing)} to GKE, which cannot see the "
                               "secondary DCN networks' subnets; pin them (cluster.podCidr, cluster.serviceCidr)"))
    parsed = []
    for r, label, cidr in ranges:
        try:
            parsed.append((r, label, ipaddress.ip_network(cidr, strict=False)))
        except ValueError:
            out.append((r, f"{label}: {cidr!r} is not a CIDR range"))
    for i, a in enumerate(parsed):
        for b in parsed[:i]:
            owner = a[0] or b[0]  # the later declared resource; reserved ranges have none
            if a[2].overlaps(b[2]) and owner is not None:
                (_, l1, n1), (_, l2, n2) = sorted((a, b), key=lambda x: x[1])
                out.append((owner, f"{l1} {n1} overlaps {l2} {n2}"))
    return out


# --------------------------------------------------------------------------- worker groups


def _all_groups(resources: Sequence[Res]):
    for r in resources:
        if r.type in (RAY_CLUSTER, RAY_JOB):
            for path, group in worker_groups(r.type, r.props):
                if is_tpu_group(group):
                    yield r, path, group


def _gname(path: str, group: Mapping[str, Any]) -> str:
    return str(get(group, "groupName", path))


def worker_selects_node_pool(resources: Sequence[Res], ctx: Context) -> Violations:
    """A TPU worker group's accelerator/topology selectors match an existing slice node pool."""
    pools = _tpu_pools(resources)
    offered = sorted({(s.gke_accelerator, s.topology, s.chips_per_host) for _, s in pools})
    out: Violations = []
    for r, path, group in _all_groups(resources):
        accel, topo = group_selector(group)
        shape = group_shape(group)
        if shape is not None and any(s.key == shape.key for _, s in pools):
            continue
        have = "; ".join(f"{a} {t} ({c} chips/host)" for a, t, c in offered) or "none"
        out.append((r, f"{k8s_name(r.props)} worker group {_gname(path, group)} selects "
                       f"{accel} {topo} but no node pool provides it; node pools: {have}"))
    return out


def worker_replicas_fit(resources: Sequence[Res], ctx: Context) -> Violations:
    """``replicas`` and ``maxReplicas`` are at most the slice node pools of the group's shape."""
    pools = _tpu_pools(resources)
    out: Violations = []
    for r, path, group in _all_groups(resources):
        shape = group_shape(group)
        if shape is None:
            continue
        have = len({pool_slice(p) for p, s in pools if s.key == shape.key})  # fallback pools count once
        for key in ("replicas", "maxReplicas"):
            n = as_int(get(group, key))
            if n is not None and n > have:
                out.append((r, f"{k8s_name(r.props)} worker group {_gname(path, group)}: {key} "
                               f"is {n} but only {have} {shape.pod_type} ({shape.topology}) "
                               "slice node pool(s) exist; the extra replicas never schedule"))
    return out


def _claim_counts(resources: Sequence[Res]) -> dict[str, int]:
    counts = {}
    for r in _of(resources, CLAIM_TEMPLATE):
        n = 0
        for req in items(get(r.props, "spec.spec.devices.requests", [])):
            exactly = get(req, "exactly", req)
            if get(exactly, "deviceClassName") == NETDEV_DEVICE_CLASS:
                n += as_int(get(exactly, "count", 1)) or 0
        counts[k8s_name(r.props)] = n
    return counts


def netdev_claims(resources: Sequence[Res], ctx: Context) -> Violations:
    """A TPU worker group claims one netdev device per secondary network of its node pools."""
    pools = _tpu_pools(resources)
    claims = _claim_counts(resources)
    out: Violations = []
    for r, path, group in _all_groups(resources):
        shape = group_shape(group)
        nets = max((len(pool_networks(p.props)) for p, s in pools
                    if shape is not None and s.key == shape.key), default=0)
        pod = get(group, "template.spec", {})
        label = f"{k8s_name(r.props)} worker group {_gname(path, group)}"
        netdev = {}
        for c in items(get(pod, "resourceClaims", [])):
            tmpl = get(c, "resourceClaimTemplateName")
            if tmpl in claims:
                netdev[get(c, "name")] = claims[tmpl]
            elif tmpl:
                out.append((r, f"{label}: resource claim template {tmpl!r} is not declared"))
        total = sum(netdev.values())
        if nets and not netdev:
            out.append((r, f"{label}: its node pools have {nets} secondary network(s) but the "
                           f"pods claim no {NETDEV_DEVICE_CLASS} device"))
        elif netdev and total != nets:
            out.append((r, f"{label}: claims {total} {NETDEV_DEVICE_CLASS} device(s), its node "
                           f"pools have {nets} secondary network(s)"))
        for c in containers(pod):
            if not is_tpu_container(c):
                continue
            used = {get(x, "name") for x in items(get(c, "resources.claims", []))}
            if missing := sorted(set(netdev) - used):
                out.append((r, f"{label} container {get(c, 'name', '?')}: resources.claims "
                               f"lacks {missing}; the NICs are not attached to it"))
    return out


def is_tpu_container(c: Mapping[str, Any]) -> bool:
    return any(tpu.TPU_RESOURCE in (get(c, f"resources.{k}", {}) or {})
               for k in ("requests", "limits"))


# --------------------------------------------------------------------------- RayJobs


def _job_cluster(job: Res, resources: Sequence[Res]) -> tuple[Mapping[str, Any] | None, str]:
    """The RayCluster spec a RayJob runs on: its own, or the one its clusterSelector names."""
    own = get(job.props, "spec.rayClusterSpec")
    if isinstance(own, Mapping):
        return own, "its own cluster"
    sel = get(job.props, "spec.clusterSelector", {})
    name = sel.get(kube.RAY_CLUSTER_LABEL) if isinstance(sel, Mapping) else None
    for r in _of(resources, RAY_CLUSTER):
        if k8s_name(r.props) == name:
            for _, spec in cluster_specs(r.type, r.props):
                return spec, f"RayCluster {name}"
    return None, f"RayCluster {name}"


def _job_group(call: TrainerCall, cluster: Mapping[str, Any]) -> Mapping[str, Any] | None:
    groups = [g for g in items(get(cluster, "workerGroupSpecs", [])) if is_tpu_group(g)]
    topo, accel = call.flags.get("--topology"), call.flags.get("--accelerator-type")
    for g in groups:
        shape = group_shape(g)
        if shape and shape.topology == topo and shape.ray_accelerator_type == accel:
            return g
    return groups[0] if len(groups) == 1 else None


class _Job:
    """A RayJob with its parsed entrypoint, its worker group and that group's shape."""

    def __init__(self, res: Res, resources: Sequence[Res]):
        self.res = res
        self.name = k8s_name(res.props)
        self.call = parse_entrypoint(str(get(res.props, "spec.entrypoint", "")))
        self.cluster, self.where = _job_cluster(res, resources)
        self.group = (_job_group(self.call, self.cluster)
                      if self.call and self.cluster is not None else None)
        self.shape = group_shape(self.group) if self.group else None
        self.elastic = bool(self.call and self.call.flags.get("--mode") == "elastic")

    @property
    def replicas(self) -> int:
        return as_int(get(self.group, "replicas", 0)) or 0

    @property
    def max_replicas(self) -> int:
        """What the group may grow to (an autoscaling group's maxReplicas), else replicas."""
        return max(self.replicas, as_int(get(self.group, "maxReplicas", 0)) or 0)

    def slice_range(self) -> tuple[int | None, int | None]:
        if not self.call:
            return None, None
        if self.elastic:
            return self.call.int_flag("--min-slices"), self.call.int_flag("--max-slices")
        n = self.call.int_flag("--slices")
        return n, n


def _jobs(resources: Sequence[Res]) -> list[_Job]:
    return [_Job(r, resources) for r in _of(resources, RAY_JOB)]


def rayjob_worker_count(resources: Sequence[Res], ctx: Context) -> Violations:
    """The job's workers (slices x hosts per slice) are what its worker group brings up."""
    out: Violations = []
    for j in _jobs(resources):
        if j.call is None:
            out.append((j.res, f"RayJob {j.name}: entrypoint is not a trainer call with --mode "
                               "(cannot check its worker count)"))
            continue
        if j.cluster is None:
            out.append((j.res, f"RayJob {j.name}: {j.where} is not declared in the stack"))
            continue
        if j.group is None or j.shape is None:
            out.append((j.res, f"RayJob {j.name}: {j.where} has no TPU worker group for "
                               f"{j.call.flags.get('--accelerator-type')} "
                               f"{j.call.flags.get('--topology')}"))
            continue
        s, g = j.shape, j.group
        expect = {"--hosts-per-slice": s.hosts, "--chips-per-host": s.chips_per_host,
                  "--topology": s.topology, "--accelerator-type": s.ray_accelerator_type}
        for flag, want in expect.items():
            got = j.call.flags.get(flag)
            if str(got) != str(want):
                out.append((j.res, f"RayJob {j.name}: {flag} is {got}, worker group "
                                   f"{get(g, 'groupName')} ({s.pod_type}) needs {want}"))
        hosts = as_int(get(g, "numOfHosts", 1)) or 1
        if not j.elastic:
            n = j.call.int_flag("--slices")
            workers = (n or 0) * (j.call.int_flag("--hosts-per-slice") or 0)
            if workers != j.replicas * hosts:
                out.append((j.res, f"RayJob {j.name}: {workers} workers ({n} slice(s)) but "
                                   f"worker group {get(g, 'groupName')} brings up "
                                   f"{j.replicas} x {hosts} = {j.replicas * hosts}"))
    return out


def rayjob_elastic_range(resources: Sequence[Res], ctx: Context) -> Violations:
    """Elastic jobs range over whole slices: 1 <= min <= max <= slices available."""
    pools = _tpu_pools(resources)
    out: Violations = []
    for j in _jobs(resources):
        if not j.elastic or j.call is None:
            continue
        lo, hi = j.slice_range()
        if lo is None or hi is None:
            out.append((j.res, f"RayJob {j.name}: elastic mode needs --min-slices and "
                               "--max-slices (whole slices)"))
            continue
        if lo < 1:
            out.append((j.res, f"RayJob {j.name}: --min-slices is {lo}, must be at least 1"))
        if lo > hi:
            out.append((j.res, f"RayJob {j.name}: --min-slices {lo} > --max-slices {hi}"))
        if j.shape is not None:
            available = min(j.max_replicas, sum(1 for _, s in pools if s.key == j.shape.key))
            if hi > available:
                out.append((j.res, f"RayJob {j.name}: --max-slices is {hi} but only "
                                   f"{available} {j.shape.pod_type} slice(s) are available"))
    return out


def rayjob_maxtext_mesh(resources: Sequence[Res], ctx: Context) -> Violations:
    """MaxText's ICI mesh tiles one slice's chips; its DCN mesh tiles the slice count."""
    out: Violations = []
    for j in _jobs(resources):
        if j.call is None or j.shape is None:
            continue
        if msg := tpu.mesh_error("ici", j.call.mesh("ici"), j.shape.chips):
            out.append((j.res, f"RayJob {j.name}: ICI mesh must tile the {j.shape.chips} chips "
                               f"of a {j.shape.pod_type} slice: {msg}"))
        lo, hi = j.slice_range()
        if lo is None or hi is None:
            continue
        for n in range(max(lo, 1), hi + 1):
            if msg := tpu.mesh_error("dcn", j.call.mesh("dcn"), n):
                out.append((j.res, f"RayJob {j.name}: DCN mesh must tile {n} slice(s): {msg}"))
    return out


def _bucket_mounts(pod: Mapping[str, Any], buckets: set[str]) -> list[str]:
    vols = {get(v, "name") for v in items(get(pod, "volumes", []))
            if get(v, "csi.driver") == GCSFUSE_DRIVER
            and (not buckets or get(v, "csi.volumeAttributes.bucketName") in buckets)}
    return [str(get(m, "mountPath")) for c in containers(pod)
            for m in items(get(c, "volumeMounts", [])) if get(m, "name") in vols]


def rayjob_spot_elastic(resources: Sequence[Res], ctx: Context) -> Violations:
    """Jobs on Spot slices are elastic, retry (max failures >= 1) and checkpoint to the bucket."""
    pools = _tpu_pools(resources)
    buckets = {str(get(b.props, "name", b.name)) for b in _of(resources, BUCKET)}
    out: Violations = []
    for j in _jobs(resources):
        if j.call is None or j.shape is None or j.group is None:
            continue
        if not any(pool_spot(p.props) for p, s in pools if s.key == j.shape.key):
            continue
        if not j.elastic:
            out.append((j.res, f"RayJob {j.name} runs on Spot {j.shape.pod_type} slices but is "
                               f"{j.call.flags.get('--mode')}: a preemption fails it"))
        if (j.call.int_flag("--max-failures") or 0) < stack_spec.MIN_ELASTIC_MAX_FAILURES:
            out.append((j.res, f"RayJob {j.name} runs on Spot slices with --max-failures "
                               f"{j.call.flags.get('--max-failures', 0)}: one preemption spends "
                               f"{stack_spec.MIN_ELASTIC_MAX_FAILURES} (the lost worker and a "
                               "restart that waits for the lost slice)"))
        outdir = j.call.maxtext.get("base_output_directory", "")
        mounts = _bucket_mounts(get(j.group, "template.spec", {}), buckets)
        on_bucket = outdir.startswith("gs://") or any(
            outdir.rstrip("/").startswith(m.rstrip("/")) for m in mounts)
        if not on_bucket:
            out.append((j.res, f"RayJob {j.name}: base_output_directory {outdir!r} is not on "
                               f"the checkpoint bucket (GCS FUSE mounts: {mounts or 'none'})"))
        if j.call.maxtext.get("enable_checkpointing", "true").lower() in ("false", "0"):
            out.append((j.res, f"RayJob {j.name}: enable_checkpointing is off on Spot slices"))
        period, steps = (as_int(j.call.maxtext.get("checkpoint_period")),
                         as_int(j.call.maxtext.get("steps")))
        if period and steps and period >= steps:
            out.append((j.res, f"RayJob {j.name}: checkpoint_period {period} >= steps {steps}: "
                               "nothing is saved before a preemption"))
    return out


# --------------------------------------------------------------------------- cluster


def _dranet_used(resources: Sequence[Res]) -> bool:
    for r in _of(resources, NODE_POOL):
        labels = get(r.props, "nodeConfig.labels", {})
        if pool_networks(r.props) or (isinstance(labels, Mapping)
                                      and str(labels.get(tpu.DRANET_LABEL)) == "true"):
            return True
    return any(_claim_counts(resources).values())


def gke_dranet_version(resources: Sequence[Res], ctx: Context) -> Violations:
    """With DRANET, the cluster and its TPU pools run at least the DRANET minimum version."""
    if not _dranet_used(resources):
        return []
    floor = stack_spec.gke_version_key(stack_spec.DRANET_MIN_VERSION)
    out: Violations = []
    checks = [(r, "minMasterVersion") for r in _of(resources, CLUSTER)]
    checks += [(r, "version") for r in _of(resources, NODE_POOL) if is_tpu_pool(r.props)]
    for r, key in checks:
        version = get(r.props, key)
        kind = "cluster" if r.type == CLUSTER else "node pool"
        label = f"{kind} {get(r.props, 'name', r.name)}"
        if version is None:
            if r.type == CLUSTER:
                out.append((r, f"{label}: DRANET is used but {key} is not pinned; GKE managed "
                               f"DRANET on Standard needs >= {stack_spec.DRANET_MIN_VERSION}"))
            continue
        got = stack_spec.gke_version_key(str(version))
        if got is None or got < floor:
            out.append((r, f"{label}: {key} {version} is below "
                           f"{stack_spec.DRANET_MIN_VERSION}, the minimum for GKE managed "
                           "DRANET on Standard"))
    return out
