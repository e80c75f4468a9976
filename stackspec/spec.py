"""The stack spec: Pulumi config read into typed, frozen objects, validated as a whole.

A stack file (``stacks/Pulumi.<stack>.yaml``) carries the ``gcp:*`` provider
keys and this project's keys (``tpu-multislice:*``). :func:`load` turns the
flat config map into a :class:`StackSpec` or raises one :class:`SpecError`
listing every problem, each naming the stack file, the key, the value and
what is allowed. Nothing is declared before this succeeds.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stackspec import tpu
from stackspec.tpu import SliceError, SliceShape

PROJECT = "tpu-multislice"  # the name in Pulumi.yaml; also the config namespace
ENVIRONMENTS = ("dev", "prod")
CAPACITY_TYPES = ("on-demand", "spot", "reservation", "flex-start")
RESERVATION_AFFINITIES = ("SPECIFIC", "ANY")
JOB_MODES = ("multislice", "elastic")
JOB_CLUSTERS = ("shared", "dedicated")
RELEASE_CHANNELS = ("UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED")
STORAGE_CLASSES = ("STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE")
# GKE managed DRANET on Standard clusters needs at least this version.
DRANET_MIN_VERSION = "1.34.1-gke.1829001"
DCN_MTU = 8896

_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_GKE_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")


def gke_version_key(version: str) -> tuple[int, ...] | None:
    m = _GKE_VERSION.match(version)
    return tuple(int(g) for g in m.groups()) if m else None


def stack_file(stack: str) -> str:
    return f"stacks/Pulumi.{stack}.yaml"


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Capacity:
    type: str = "on-demand"
    reservation: str | None = None
    affinity: str | None = None  # SPECIFIC or ANY, reservations only

    @property
    def spot(self) -> bool:
        return self.type == "spot"


@dataclass(frozen=True)
class Slice:
    name: str  # the node pool's name, e.g. v6e-16-0
    shape: SliceShape
    capacity: Capacity
    group: str  # the Ray worker group that schedules onto this slice


@dataclass(frozen=True)
class SecondaryNetwork:
    network: str  # VPC name, <cluster>-net-N by default
    subnet: str
    cidr: str


@dataclass(frozen=True)
class Cluster:
    name: str
    location: str  # zone (the seed's Standard cluster is zonal)
    version: str
    release_channel: str
    system_machine_type: str
    system_node_count: int
    deletion_protection: bool
    # Pod and service ranges (VPC-native). GKE picks them when unset, seeing only the
    # cluster's own VPC, not the secondary DCN VPCs whose subnets pods also reach.
    pod_cidr: str | None = None
    service_cidr: str | None = None


@dataclass(frozen=True)
class Storage:
    bucket: str
    location: str
    storage_class: str
    namespace: str
    service_account: str  # the Kubernetes service account
    protected: bool  # refuse deletion, keep the bucket when the stack is destroyed


@dataclass(frozen=True)
class RaySettings:
    cluster_name: str
    image: str
    head_cpu: str
    head_memory: str
    worker_cpu: str
    worker_memory: str
    megascale_port: int
    metrics_export_port: int


@dataclass(frozen=True)
class Job:
    name: str
    mode: str  # multislice | elastic
    group: str  # worker group (slice shape) it runs on
    cluster: str  # shared | dedicated
    slices: int  # multislice: exact; elastic: the maximum
    min_slices: int  # elastic lower bound; = slices for multislice
    max_failures: int
    model: str
    steps: int
    per_device_batch_size: float
    max_target_length: int
    run_name: str
    ici: Mapping[str, int]
    dcn: Mapping[str, int]
    maxtext: Mapping[str, str]  # further MaxText key=value settings, passed through
    checkpoint_period: int
    active_deadline_seconds: int
    backoff_limit: int
    suspend: bool = False  # declared but not run (RayJob spec.suspend)

    @property
    def elastic(self) -> bool:
        return self.mode == "elastic"


@dataclass(frozen=True)
class WorkerGroup:
    """One Ray worker group: all slices of one shape."""

    name: str
    shape: SliceShape
    slices: tuple[Slice, ...]

    @property
    def replicas(self) -> int:
        return len(self.slices)

    @property
    def spot(self) -> bool:
        return any(s.capacity.spot for s in self.slices)


@dataclass(frozen=True)
class StackSpec:
    stack: str
    environment: str
    project: str
    region: str
    cluster: Cluster
    mtu: int
    networks: tuple[SecondaryNetwork, ...]
    slices: tuple[Slice, ...]
    storage: Storage
    ray: RaySettings
    jobs: tuple[Job, ...] = field(default=())

    @property
    def prod(self) -> bool:
        return self.environment == "prod"

    @property
    def groups(self) -> tuple[WorkerGroup, ...]:
        order: dict[str, list[Slice]] = {}
        for s in self.slices:
            order.setdefault(s.group, []).append(s)
        return tuple(WorkerGroup(g, ss[0].shape, tuple(ss)) for g, ss in order.items())

    def group(self, name: str) -> WorkerGroup:
        return next(g for g in self.groups if g.name == name)

    @property
    def dranet(self) -> bool:
        return bool(self.networks)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    key: str
    value: Any
    message: str

    def render(self) -> str:
        shown = "(missing)" if self.value is _MISSING else json.dumps(self.value, default=str)
        return f"{self.key} = {shown}: {self.message}"


class SpecError(ValueError):
    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: {len(problems)} problem(s) in the stack spec:"]
        lines += [f"  - {p.render()}" for p in problems]
        super().__init__("\n".join(lines))


_MISSING = object()


class _Reader:
    """Pulls typed values out of config objects, recording problems instead of raising."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        # The keys each section reads (by section key): anything else in it is a typo.
        self.known: dict[str, set[str]] = {}

    def fail(self, key: str, value: Any, message: str) -> None:
        self.problems.append(Problem(key, value, message))

    def unknown_keys(self, obj: Any, prefix: str, also: tuple[str, ...] = ()) -> None:
        """Fail every key of ``obj`` that its section never read (``also``: read elsewhere)."""
        if not isinstance(obj, Mapping):
            return
        known = self.known.get(prefix, set()) | set(also)
        for name in sorted(set(obj) - known):
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            self.fail(f"{prefix}.{name}", obj[name], f"unknown key{hint}; allowed: {', '.join(sorted(known))}")

    def get(
        self,
        obj: Mapping[str, Any],
        prefix: str,
        name: str,
        kind: type | tuple[type, ...],
        default: Any = _MISSING,
        allowed: tuple | None = None,
        check: Callable[[Any], str | None] | None = None,
    ) -> Any:
        key = f"{prefix}.{name}" if prefix else name
        self.known.setdefault(prefix, set()).add(name)
        value = obj.get(name, _MISSING) if isinstance(obj, Mapping) else _MISSING
        if value is _MISSING:
            if default is _MISSING:
                self.fail(key, _MISSING, "required" + (f"; allowed: {', '.join(map(str, allowed))}" if allowed else ""))
                return None
            return default
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            self.fail(key, value, f"must be a {names}")
            return None if default is _MISSING else default
        if allowed is not None and value not in allowed:
            self.fail(key, value, f"allowed: {', '.join(map(str, allowed))}")
            return None
        if check is not None and (msg := check(value)):
            self.fail(key, value, msg)
            return None
        return value


def _dns(value: str) -> str | None:
    if not _DNS_LABEL.match(value):
        return "must be a lowercase DNS label (a-z, 0-9, '-', at most 63, starting with a letter)"
    return None


# One preemption spends two of Ray Train's failures: the lost worker, and the restart that
# still counts the lost slice (Ray's resource view lags) and times out. Measured by the drill.
MIN_ELASTIC_MAX_FAILURES = 2


def _elastic_failures(value: int) -> str | None:
    if value >= MIN_ELASTIC_MAX_FAILURES:
        return None
    return (f"must be at least {MIN_ELASTIC_MAX_FAILURES}: one preemption spends two (the lost "
            "worker, and a restart that times out waiting for the lost slice)")


def _positive(value: int) -> str | None:
    return None if value >= 1 else "must be at least 1"


def _non_negative(value: int) -> str | None:
    return None if value >= 0 else "must be 0 or more"


def _cidr(value: str) -> str | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        return f"not a CIDR range ({e})"
    return None if net.is_private else "must be a private (RFC 1918) range"


def _version(value: str) -> str | None:
    return None if gke_version_key(value) else "must be a GKE version like 1.35.2-gke.1842000"


def _bucket(value: str) -> str | None:
    ok = re.match(r"^[a-z0-9][-a-z0-9_.]{1,61}[a-z0-9]$", value) and "goog" not in value
    return None if ok else "must be a valid bucket name (3-63 of a-z, 0-9, '-', '_', '.')"


def _object(r: _Reader, raw: Mapping[str, str], key: str, required: bool = True) -> Any:
    """A config value from the flat Pulumi map (JSON-encoded for objects and lists)."""
    value = raw.get(key, _MISSING)
    if value is _MISSING:
        if required:
            r.fail(key, _MISSING, "required")
        return _MISSING
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# --------------------------------------------------------------------------- sections


def _capacity(r: _Reader, obj: Any, key: str) -> Capacity:
    if obj is _MISSING or obj is None:
        return Capacity()
    if not isinstance(obj, Mapping):
        r.fail(key, obj, f"must be an object with 'type'; allowed types: {', '.join(CAPACITY_TYPES)}")
        return Capacity()
    ctype = r.get(obj, key, "type", str, "on-demand", allowed=CAPACITY_TYPES)
    reservation = r.get(obj, key, "reservation", str, None)
    affinity = r.get(obj, key, "affinity", str, None, allowed=RESERVATION_AFFINITIES)
    r.unknown_keys(obj, key)
    if ctype == "reservation":
        affinity = affinity or "SPECIFIC"
        if affinity == "SPECIFIC" and not reservation:
            r.fail(f"{key}.reservation", _MISSING, "required when type is reservation with SPECIFIC affinity")
        elif affinity != "SPECIFIC" and reservation:
            # GKE ignores a name with ANY affinity: say so rather than drop it.
            r.fail(f"{key}.reservation", reservation, f"a reservation name needs affinity SPECIFIC, not {affinity}")
    elif reservation or affinity:
        # GKE: Spot and flex-start VMs cannot consume reservations; on-demand needs none here.
        r.fail(f"{key}.reservation", reservation or affinity, f"only allowed when type is reservation, not {ctype}")
        reservation = affinity = None
    return Capacity(ctype or "on-demand", reservation, affinity)


def _slices(r: _Reader, raw: Any, key: str) -> tuple[Slice, ...]:
    if raw is _MISSING:
        return ()
    if not isinstance(raw, list) or not raw:
        r.fail(key, raw, "must be a non-empty list of slices")
        return ()
    out: list[Slice] = []
    seen: set[str] = set()
    group_shapes: dict[str, SliceShape] = {}
    for i, obj in enumerate(raw):
        k = f"{key}[{i}]"
        if not isinstance(obj, Mapping):
            r.fail(k, obj, "must be an object with name, generation, topology")
            continue
        name = r.get(obj, k, "name", str, check=_dns)
        gen = r.get(obj, k, "generation", str, "v6e", allowed=tuple(tpu.GENERATIONS))
        topology = r.get(obj, k, "topology", str)
        machine = r.get(obj, k, "machineType", str, None)
        capacity = _capacity(r, obj.get("capacity", _MISSING), f"{k}.capacity")
        group = r.get(obj, k, "group", str, None, check=_dns)
        r.unknown_keys(obj, k, also=("capacity",))
        if name in seen:
            r.fail(f"{k}.name", name, "slice names must be unique")
        seen.add(name)
        if gen is None or topology is None:
            continue
        try:
            shape = tpu.resolve(gen, topology, machine)
        except SliceError as e:
            bad = "machineType" if machine and topology in tpu.generation(gen).topologies else "topology"
            r.fail(f"{k}.{bad}", machine if bad == "machineType" else topology, str(e))
            continue
        group = group or shape.group_name
        if group in group_shapes and group_shapes[group].key != shape.key:
            r.fail(f"{k}.group", group, "a worker group holds slices of one shape only")
            continue
        group_shapes[group] = shape
        if name:
            out.append(Slice(name, shape, capacity, group))
    return tuple(out)


def _disjoint(r: _Reader, ranges: list[tuple[str, str]]) -> None:
    """Fail every range (by its key) that overlaps one listed before it."""
    for i, (k, cidr) in enumerate(ranges):
        net = ipaddress.ip_network(cidr)
        for other_key, other in ranges[:i]:
            if net.overlaps(ipaddress.ip_network(other)):
                r.fail(k, cidr, f"overlaps {other} at {other_key}")


def _networks(
    r: _Reader, raw: Any, key: str, cluster_name: str
) -> tuple[int, tuple[SecondaryNetwork, ...], list[tuple[str, str]]]:
    """MTU, the secondary networks, and every valid subnet range by its key (for _disjoint)."""
    if raw is _MISSING:
        return DCN_MTU, (), []
    if not isinstance(raw, Mapping):
        r.fail(key, raw, "must be an object with mtu and secondary")
        return DCN_MTU, (), []
    mtu = r.get(
        raw,
        key,
        "mtu",
        int,
        DCN_MTU,
        check=lambda v: None if 1300 <= v <= 8896 else "must be 1300..8896 (8896 for the TPU DCN)",
    )
    nets = r.get(raw, key, "secondary", list, [])
    r.unknown_keys(raw, key)
    out: list[SecondaryNetwork] = []
    ranges: list[tuple[str, str]] = []
    for i, obj in enumerate(nets or []):
        k = f"{key}.secondary[{i}]"
        if not isinstance(obj, Mapping):
            r.fail(k, obj, "must be an object with subnet and cidr")
            continue
        network = r.get(obj, k, "network", str, f"{cluster_name}-net-{i + 1}", check=_dns)
        subnet = r.get(obj, k, "subnet", str, check=_dns)
        cidr = r.get(obj, k, "cidr", str, check=_cidr)
        r.unknown_keys(obj, k)
        if cidr:
            ranges.append((f"{k}.cidr", cidr))
        if network and subnet and cidr:
            out.append(SecondaryNetwork(network, subnet, cidr))
    names = [n.network for n in out]
    if len(set(names)) != len(names):
        r.fail(f"{key}.secondary", names, "each secondary network needs its own VPC")
    return mtu or DCN_MTU, tuple(out), ranges


def _parallelism(r: _Reader, obj: Any, key: str) -> dict[str, int]:
    if obj is _MISSING or obj is None:
        return {}
    if not isinstance(obj, Mapping):
        r.fail(key, obj, f"must be an object of axis: degree; axes: {', '.join(tpu.MESH_AXES)}")
        return {}
    out = {}
    for axis, v in obj.items():
        if axis not in tpu.MESH_AXES:
            r.fail(f"{key}.{axis}", v, f"unknown mesh axis; allowed: {', '.join(tpu.MESH_AXES)}")
        elif isinstance(v, bool) or not isinstance(v, int) or (v < 1 and v != -1):
            r.fail(f"{key}.{axis}", v, "must be a positive integer or -1 (auto)")
        else:
            out[axis] = v
    return out


def _jobs(r: _Reader, raw: Any, key: str, groups: Mapping[str, tuple[SliceShape, int]] | None) -> tuple[Job, ...]:
    if raw is _MISSING or groups is None:
        return ()
    if not isinstance(raw, list):
        r.fail(key, raw, "must be a list of jobs")
        return ()
    out = []
    names: set[str] = set()
    for i, obj in enumerate(raw):
        k = f"{key}[{i}]"
        if not isinstance(obj, Mapping):
            r.fail(k, obj, "must be an object")
            continue
        problems_before = len(r.problems)
        name = r.get(obj, k, "name", str, check=_dns)
        if name in names:
            r.fail(f"{k}.name", name, "job names must be unique")
        names.add(name)
        mode = r.get(obj, k, "mode", str, "multislice", allowed=JOB_MODES)
        default_group = next(iter(groups)) if len(groups) == 1 else _MISSING
        group = r.get(obj, k, "group", str, default_group, allowed=tuple(groups))
        cluster = r.get(obj, k, "cluster", str, "shared", allowed=JOB_CLUSTERS)
        available = groups[group][1] if group in groups else 0
        if mode == "elastic":
            max_s = r.get(obj, k, "maxSlices", int, available, check=_positive)
            min_s = r.get(obj, k, "minSlices", int, 1, check=_positive)
            max_failures = r.get(obj, k, "maxFailures", int, 3, check=_elastic_failures)
            if "slices" in obj:
                r.fail(f"{k}.slices", obj["slices"], "elastic jobs take minSlices and maxSlices")
        else:
            max_s = r.get(obj, k, "slices", int, available, check=_positive)
            min_s = max_s
            for other in ("minSlices", "maxSlices"):
                if other in obj:
                    r.fail(f"{k}.{other}", obj[other], "multislice jobs take slices; minSlices/maxSlices are for "
                           "mode elastic")
            max_failures = r.get(obj, k, "maxFailures", int, 0, check=_non_negative)
        if max_s and min_s and min_s > max_s:
            r.fail(f"{k}.minSlices", min_s, f"must be at most maxSlices ({max_s})")
        if max_s and available and max_s > available:
            r.fail(
                f"{k}.{'maxSlices' if mode == 'elastic' else 'slices'}",
                max_s,
                f"worker group {group} has only {available} slice(s); allowed: 1..{available}",
            )
        ici = _parallelism(r, obj.get("ici", _MISSING), f"{k}.ici")
        dcn = _parallelism(r, obj.get("dcn", _MISSING), f"{k}.dcn")
        if group in groups and len(r.problems) == problems_before:
            shape = groups[group][0]
            if msg := tpu.mesh_error("ici", ici, shape.chips):
                r.fail(
                    f"{k}.ici", ici, f"ICI mesh must tile the {shape.chips} chips of a {shape.pod_type} slice: {msg}"
                )
            for n in sorted({min_s, max_s}):
                if msg := tpu.mesh_error("dcn", dcn, n):
                    r.fail(f"{k}.dcn", dcn, f"DCN mesh must tile {n} slice(s): {msg}")
        maxtext = r.get(obj, k, "maxtext", dict, {})
        for mk, mv in (maxtext or {}).items():
            if mk.startswith(("ici_", "dcn_")) or mk in _JOB_OWNED_KEYS:
                r.fail(f"{k}.maxtext.{mk}", mv, "set through the job's own key (ici, dcn, steps, ...), not maxtext")
        out.append(
            Job(
                name=name or "",
                mode=mode or "multislice",
                group=group or "",
                cluster=cluster or "shared",
                slices=max_s or 1,
                min_slices=min_s or 1,
                max_failures=max_failures or 0,
                model=r.get(obj, k, "model", str, "llama3-8b"),
                steps=r.get(obj, k, "steps", int, 100, check=_positive),
                per_device_batch_size=r.get(obj, k, "perDeviceBatchSize", (int, float), 4),
                max_target_length=r.get(obj, k, "maxTargetLength", int, 4096, check=_positive),
                run_name=r.get(obj, k, "runName", str, name or "", check=_dns),
                ici=ici,
                dcn=dcn,
                maxtext={str(a): str(b) for a, b in (maxtext or {}).items()},
                checkpoint_period=r.get(obj, k, "checkpointPeriod", int, 10, check=_positive),
                active_deadline_seconds=r.get(obj, k, "activeDeadlineSeconds", int, 4 * 3600, check=_positive),
                backoff_limit=r.get(obj, k, "backoffLimit", int, 0, check=_non_negative),
                suspend=r.get(obj, k, "suspend", bool, False),
            )
        )
        r.unknown_keys(obj, k, also=("ici", "dcn", "slices", "minSlices", "maxSlices"))
    return tuple(out)


_JOB_OWNED_KEYS = {
    "steps",
    "per_device_batch_size",
    "max_target_length",
    "model_name",
    "run_name",
    "base_output_directory",
    "checkpoint_period",
}


# --------------------------------------------------------------------------- load


def load(stack: str, config: Mapping[str, Any]) -> StackSpec:
    """Build the spec from a flat Pulumi config map (``ns:key`` -> value or JSON text).

    Raises :class:`SpecError` naming ``stacks/Pulumi.<stack>.yaml`` and every bad key.
    """
    source = stack_file(stack)
    r = _Reader()
    ns = PROJECT

    def scalar(key: str, default: Any = _MISSING, **kw: Any) -> Any:
        v = _object(r, config, key, required=default is _MISSING)
        if v is _MISSING:
            return default
        return r.get({key: v}, "", key, **kw)

    environment = scalar(f"{ns}:environment", "dev", kind=str, allowed=ENVIRONMENTS)
    project = scalar("gcp:project", kind=str)
    region = scalar("gcp:region", kind=str)
    zone = scalar("gcp:zone", kind=str)
    if region and zone and not zone.startswith(region + "-"):
        r.fail("gcp:zone", zone, f"must be a zone of gcp:region {region} (e.g. {region}-b)")
    prod = environment == "prod"

    c_raw = _object(r, config, f"{ns}:cluster")
    c_key = f"{ns}:cluster"
    c_obj = c_raw if isinstance(c_raw, Mapping) else {}
    if c_raw is not _MISSING and not isinstance(c_raw, Mapping):
        r.fail(c_key, c_raw, "must be an object with name and version")
    cluster = Cluster(
        name=r.get(c_obj, c_key, "name", str, check=_dns) or "",
        location=zone or "",
        version=r.get(c_obj, c_key, "version", str, check=_version) or "",
        release_channel=r.get(c_obj, c_key, "releaseChannel", str, "UNSPECIFIED", allowed=RELEASE_CHANNELS),
        system_machine_type=r.get(c_obj, c_key, "systemMachineType", str, "n1-standard-16"),
        system_node_count=r.get(c_obj, c_key, "systemNodeCount", int, 1, check=_positive),
        deletion_protection=r.get(c_obj, c_key, "deletionProtection", bool, prod),
        pod_cidr=r.get(c_obj, c_key, "podCidr", str, None, check=_cidr),
        service_cidr=r.get(c_obj, c_key, "serviceCidr", str, None, check=_cidr),
    )
    r.unknown_keys(c_obj, c_key)
    if prod and cluster.deletion_protection is False:
        r.fail(f"{c_key}.deletionProtection", False, "a production cluster keeps deletion protection on")

    mtu, networks, subnet_ranges = _networks(
        r, _object(r, config, f"{ns}:network", required=False), f"{ns}:network", cluster.name
    )
    cluster_ranges = [(f"{c_key}.{k}", v) for k, v in (("podCidr", cluster.pod_cidr),
                                                       ("serviceCidr", cluster.service_cidr)) if v]
    _disjoint(r, subnet_ranges + cluster_ranges)
    if networks and not cluster_ranges and "podCidr" not in c_obj and "serviceCidr" not in c_obj:
        # Pods hold a pod-range address and one on each DCN subnet; GKE would pick the pod and
        # service ranges seeing only the cluster's own VPC.
        r.fail(f"{c_key}.podCidr", _MISSING, "required with secondary networks (with serviceCidr): "
               "private ranges away from network.secondary, e.g. 10.100.0.0/14 and 10.104.0.0/20")
    elif bool(cluster.pod_cidr) != bool(cluster.service_cidr) and not any(
            p.key in (f"{c_key}.podCidr", f"{c_key}.serviceCidr") for p in r.problems):
        missing = "serviceCidr" if cluster.pod_cidr else "podCidr"
        r.fail(f"{c_key}.{missing}", _MISSING, "podCidr and serviceCidr are pinned together")
    before = len(r.problems)
    slice_list = _slices(r, _object(r, config, f"{ns}:slices"), f"{ns}:slices")
    slices_ok = len(r.problems) == before

    # DRANET attaches the secondary NICs; on GKE Standard it needs a minimum version.
    if networks and cluster.version and gke_version_key(cluster.version):
        if gke_version_key(cluster.version) < gke_version_key(DRANET_MIN_VERSION):
            r.fail(
                f"{c_key}.version",
                cluster.version,
                f"GKE managed DRANET (secondary networks) needs at least {DRANET_MIN_VERSION} on Standard",
            )
    if networks:
        single = [s.name for s in slice_list if not s.shape.multi_host]
        if single:
            r.fail(
                f"{ns}:network.secondary",
                [n.subnet for n in networks],
                f"additional node networks are for multi-host slices; single-host slices: {single}",
            )

    s_raw = _object(r, config, f"{ns}:storage")
    s_key = f"{ns}:storage"
    s_obj = s_raw if isinstance(s_raw, Mapping) else {}
    storage = Storage(
        bucket=r.get(s_obj, s_key, "bucket", str, check=_bucket) or "",
        location=r.get(s_obj, s_key, "location", str, region or ""),
        storage_class=r.get(s_obj, s_key, "storageClass", str, "STANDARD", allowed=STORAGE_CLASSES),
        namespace=r.get(s_obj, s_key, "namespace", str, "default", check=_dns),
        service_account=r.get(s_obj, s_key, "serviceAccount", str, check=_dns) or "",
        protected=r.get(s_obj, s_key, "protected", bool, prod),
    )
    r.unknown_keys(s_obj, s_key)
    if prod and storage.protected is False:
        r.fail(f"{s_key}.protected", False, "production checkpoints must be protected from deletion")

    y_raw = _object(r, config, f"{ns}:ray", required=False)
    y_key = f"{ns}:ray"
    y_obj = y_raw if isinstance(y_raw, Mapping) else {}
    image = r.get(y_obj, y_key, "image", str, "rayproject/ray:2.60.0-py312-tpu")
    if prod and image and (image.endswith((":latest", ":nightly")) or ":nightly-" in image or ":" not in image):
        r.fail(
            f"{y_key}.image",
            image,
            "prod pins a released image (e.g. rayproject/ray:2.60.0-py312-tpu), not latest or nightly",
        )
    ray = RaySettings(
        cluster_name=r.get(y_obj, y_key, "clusterName", str, "maxtext-tpu-cluster", check=_dns),
        image=image,
        head_cpu=str(r.get(y_obj, y_key, "headCpu", (str, int), "8")),
        head_memory=r.get(y_obj, y_key, "headMemory", str, "16Gi"),
        worker_cpu=str(r.get(y_obj, y_key, "workerCpu", (str, int), "8")),
        worker_memory=r.get(y_obj, y_key, "workerMemory", str, "200G"),
        megascale_port=r.get(y_obj, y_key, "megascalePort", int, 9915),
        metrics_export_port=r.get(y_obj, y_key, "metricsExportPort", int, 8082),
    )
    r.unknown_keys(y_obj, y_key)

    groups = {}
    for s in slice_list:
        shape, n = groups.get(s.group, (s.shape, 0))
        groups[s.group] = (shape, n + 1)
    # Jobs are checked against the slices only when those are sound: one bad
    # slice should give one error, not one more per job that counts on it.
    jobs = _jobs(r, _object(r, config, f"{ns}:jobs", required=False), f"{ns}:jobs", groups if slices_ok else None)
    for i, j in enumerate(jobs):
        if j.group in groups and not j.elastic and any(s.capacity.spot for s in slice_list if s.group == j.group):
            r.fail(
                f"{ns}:jobs[{i}].mode",
                j.mode,
                f"worker group {j.group} runs on Spot capacity: jobs there must be elastic; allowed: elastic",
            )

    # Running jobs on the shared cluster would queue for the same slices while their
    # activeDeadlineSeconds ticks: the slices they ask for together must exist.
    for group, (_shape, available) in groups.items():
        running = [(i, j) for i, j in enumerate(jobs) if j.group == group and j.cluster == "shared" and not j.suspend]
        if sum(j.slices for _, j in running) > available:
            i, j = running[-1]
            r.fail(
                f"{ns}:jobs[{i}].suspend",
                False,
                f"jobs {[x.name for _, x in running]} together ask for {sum(x.slices for _, x in running)} slice(s) "
                f"of worker group {group}, which has {available}; suspend all but what fits (suspend: true)",
            )

    known = {f"{ns}:{k}" for k in ("environment", "cluster", "network", "slices", "storage", "ray", "jobs")}
    for key in config:
        if key.startswith(f"{ns}:") and key not in known:
            r.fail(key, config[key], f"unknown key; allowed: {', '.join(sorted(known))}")

    if r.problems:
        raise SpecError(source, r.problems)
    return StackSpec(
        stack=stack,
        environment=environment,
        project=project,
        region=region,
        cluster=cluster,
        mtu=mtu,
        networks=networks,
        slices=slice_list,
        storage=storage,
        ray=ray,
        jobs=jobs,
    )


def load_file(path: str, stack: str | None = None) -> StackSpec:
    """Read a stack file directly (the offline engine and tests); the same rules apply."""
    import os

    import yaml

    stack = stack or os.path.basename(path).removeprefix("Pulumi.").removesuffix(".yaml")
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    return load(stack, flat_config(doc.get("config", {})))


def flat_config(config: Mapping[str, Any]) -> dict[str, str]:
    """A stack file's ``config:`` block as Pulumi hands it to a program: ``ns:key`` -> text."""
    out = {}
    for key, value in config.items():
        if ":" not in key:
            key = f"{PROJECT}:{key}"
        out[key] = value if isinstance(value, str) else json.dumps(value)
    return out


def from_pulumi() -> StackSpec:
    """The spec of the stack Pulumi is running (real engine or the offline mocks)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    return load(pulumi.get_stack(), raw)
