"""The stack spec as a declarative model (pydantic v2): types, limits and the rules that tie it together.

Field types carry the limits of the systems the stack deploys to (``stackspec.limits``);
each section's own rules are its validators; rules that span sections (slices and jobs,
address ranges, requests against a node's allocatable, derived names) run once the
sections are valid, in :meth:`StackSpec._rules`, and report every problem at once.

Objects are frozen: what the program, the policies and the CLI read is what was checked.
Build them through :mod:`stackspec.loader`, which names the stack file and YAML line of
every problem.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from . import checkpoints, kuberay, limits, machines, names, prices, runs, tpu, zones
from . import maxtext as maxtext_facts
from . import regions as places
from .errors import MISSING, Problem, UnknownName
from .tpu import SliceError, SliceShape

NS = names.PROJECT
ENVIRONMENTS = ("dev", "prod")
CAPACITY_TYPES = ("on-demand", "spot", "reservation", "flex-start")
RELEASE_CHANNELS = ("UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED")
# Prod enrols in a channel GKE's SLA covers (RAPID is not covered; UNSPECIFIED is being retired).
PROD_RELEASE_CHANNELS = ("REGULAR", "STABLE", "EXTENDED")
# GKE maintenance policy limits (cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions):
# a recurring window must leave 48 h of maintenance in any 32 days, counting only stretches of >= 4 h;
# a NO_UPGRADES exclusion lasts at most 30 days; a cluster holds at most 20 exclusions.
EXCLUSION_SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
NO_UPGRADES_MAX_DAYS = 30
MAX_EXCLUSIONS = 20
WINDOW_MIN_HOURS = 4
WINDOW_HOURS_PER_32_DAYS = 48
CONTROL_PLANE_ACCESS = ("dns", "authorized-networks")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
STORAGE_CLASSES = ("STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE")
# GKE managed DRANET on Standard clusters needs at least this version.
DRANET_MIN_VERSION = "1.34.1-gke.1829001"
DCN_MTU = 8896
# One preemption spends two of Ray Train's failures: the lost worker, and the restart that
# still counts the lost slice (Ray's resource view lags) and times out. Measured by the drill.
MIN_ELASTIC_MAX_FAILURES = 2
# MaxText keys a job sets through its own keys, never through the maxtext passthrough.
JOB_OWNED_MAXTEXT_KEYS = frozenset({
    "steps", "per_device_batch_size", "max_target_length", "model_name", "run_name",
    "base_output_directory", "checkpoint_period",
})
DEFAULT_RAY_IMAGE = "rayproject/ray:2.60.0-py312-tpu"
# Ray token authentication: Ray 2.52 brought it, KubeRay 1.5.1 its authOptions.
RAY_AUTH_MIN = (2, 52, 0)
KUBERAY_AUTH_MIN = (1, 5, 1)
# A worker image digest; the offline preview stands in this one where the stack names none yet
# (all zeros: no registry holds it, and the rendered objects say "placeholder" beside it).
IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
PLACEHOLDER_IMAGE_DIGEST = "sha256:" + "0" * 64
_SERVICE_ACCOUNT_EMAIL = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]@[-a-z0-9.]+\.gserviceaccount\.com")
NOTIFICATION_CHANNEL_TYPES = ("email", "pubsub", "webhook")

_GKE_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)-gke\.(\d+)")


def gke_version_key(version: str) -> tuple[int, ...] | None:
    m = _GKE_VERSION.fullmatch(version)
    return tuple(int(g) for g in m.groups()) if m else None


# --------------------------------------------------------------------------- field types


def _check(fn):
    """An AfterValidator from a ``value -> message | None`` check."""

    def run(value):
        if (msg := fn(value)) is not None:
            raise ValueError(msg)
        return value

    return AfterValidator(run)


def _name(rule: limits.NameRule):
    return _check(rule.check)


def _to_str(value: Any) -> Any:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


ClusterName = Annotated[str, _name(limits.GKE_CLUSTER)]
NodePoolName = Annotated[str, _name(limits.GKE_NODE_POOL)]
NetworkName = Annotated[str, _name(limits.COMPUTE_NETWORK)]
SubnetName = Annotated[str, _name(limits.COMPUTE_SUBNETWORK)]
Namespace = Annotated[str, _name(limits.K8S_NAMESPACE)]
KsaName = Annotated[str, _name(limits.K8S_SERVICE_ACCOUNT)]
RayClusterName = Annotated[str, _name(limits.RAY_CLUSTER)]
RayJobName = Annotated[str, _name(limits.RAY_JOB)]
GroupName = Annotated[str, _name(limits.RAY_WORKER_GROUP)]
RunName = Annotated[str, _name(limits.RUN_NAME)]
BucketName = Annotated[str, _check(limits.bucket_name)]
SubnetCidr = Annotated[str, _check(lambda v: limits.private_cidr(v, limits.SUBNET_PREFIX))]
ClusterCidr = Annotated[str, _check(limits.private_cidr)]
Quantity = Annotated[str, BeforeValidator(_to_str), _check(limits.quantity_error)]
Port = Annotated[int, Field(ge=1, le=65535)]
GkeVersion = Annotated[str, _check(lambda v: None if gke_version_key(v) else
                                    "must be a GKE version like 1.35.2-gke.1842000")]
ProjectId = Annotated[str, _check(lambda v: None if re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", v) else
                                   "not a GCP project ID: 6-30 lowercase letters, digits and '-', starting "
                                   "with a letter")]
Region = Annotated[str, _check(lambda v: None if re.fullmatch(r"[a-z]+-[a-z]+\d+", v) else
                                "not a GCP region, e.g. us-east5")]
Zone = Annotated[str, _check(lambda v: None if zones.ZONE.fullmatch(v) else
                              "not a GCE zone: <region>-<a to f> (or an AI zone such as us-central1-ai1), "
                              "e.g. us-east5-b")]
MeshAxis = Literal[tpu.MESH_AXES]
MeshDegree = Annotated[int, _check(lambda v: None if v >= 1 or v == -1 else "must be a positive integer or -1 "
                                                                             "(auto)")]
MaxTextValue = Annotated[str, BeforeValidator(lambda v: str(v).lower() if isinstance(v, bool) else _to_str(v))]


class Section(BaseModel):
    """A section of the stack spec: camelCase keys, unknown keys refused, frozen once checked."""

    # No inf/nan anywhere: YAML's .inf would pass every bound and overflow the arithmetic after it.
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
                              coerce_numbers_to_str=True, allow_inf_nan=False)


def at(key: str, message: str) -> ValueError:
    """A section rule's error on one of its keys (the loader appends ``key`` to the location)."""
    return ValueError(f"@{key}: {message}")


# --------------------------------------------------------------------------- sections


# Flex-start VMs run at most seven days (GKE "About GPU and TPU provisioning with flex-start");
# Compute Engine takes a max run duration of at least 30 s; under 10 minutes a TPU slice is gone
# before MaxText has compiled, so that is the floor here.
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
FLEX_START_MIN_RUN_SECONDS = 600
_DURATION = re.compile(r"(\d+)\s*([smhd]?)")
_DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# What editors are told (slicectl lint --schema): seconds, or a number with a unit.
_DURATION_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": r"^\d+\s*[smhd]?$"}]}


def _seconds(value: Any) -> Any:
    """``3600``, ``"3600s"``, ``"90m"``, ``"24h"`` or ``"7d"`` as seconds; anything else is left to the type."""
    if isinstance(value, str) and (m := _DURATION.fullmatch(value.strip())):
        return int(m[1]) * _DURATION_UNITS[m[2]]
    return value


class Capacity(Section):
    """One way of getting a slice's VMs; a slice lists these in the order GKE should try them."""

    type: Literal[CAPACITY_TYPES] = "on-demand"
    reservation: str | None = None
    affinity: Literal["SPECIFIC", "ANY"] | None = None  # reservations only; SPECIFIC by default
    project: ProjectId | None = None  # a shared reservation's owner project (SPECIFIC only)
    # flex-start only: how long GKE keeps each VM (seconds, or "24h", "7d"); GKE's default is 7 days.
    max_run_duration: Annotated[int, BeforeValidator(_seconds), WithJsonSchema(_DURATION_SCHEMA)] | None = Field(
        None, ge=FLEX_START_MIN_RUN_SECONDS, le=FLEX_START_MAX_RUN_SECONDS)
    # flex-start only: the pool is scaled only by ProvisioningRequests (Dynamic Workload Scheduler
    # through Kueue's admission check), never by plain pending pods.
    queued_provisioning: bool = False
    # Scheduling goodput (README "Cost"): the team's expected wait, in hours, from a job's admission until this
    # option's slices run, in this region (its cost table prices a productive hour with it); unset: unknown.
    expected_wait_hours: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _reservation(self) -> Capacity:
        if self.type == "reservation":
            affinity = self.affinity or "SPECIFIC"
            object.__setattr__(self, "affinity", affinity)
            if affinity == "SPECIFIC" and not self.reservation:
                raise at("reservation", "required when type is reservation with SPECIFIC affinity")
            if affinity != "SPECIFIC" and (self.reservation or self.project):
                # GKE ignores a name with ANY affinity: say so rather than drop it.
                raise at("reservation", f"a reservation name needs affinity SPECIFIC, not {affinity}")
        elif self.reservation or self.affinity or self.project:
            # GKE: Spot and flex-start VMs cannot consume reservations; on-demand needs none here.
            raise at("reservation", f"only allowed when type is reservation, not {self.type}")
        if self.type != "flex-start":
            for key in ("max_run_duration", "queued_provisioning"):
                if key in self.model_fields_set:
                    raise at(to_camel(key), f"only allowed when type is flex-start, not {self.type}")
        return self

    @property
    def spot(self) -> bool:
        return self.type == "spot"

    @property
    def flex_start(self) -> bool:
        return self.type == "flex-start"

    @property
    def reservation_path(self) -> str | None:
        """The reservation as GKE names it: ``NAME``, or ``projects/P/reservations/NAME`` when shared."""
        if not self.reservation:
            return None
        return f"projects/{self.project}/reservations/{self.reservation}" if self.project else self.reservation


def _capacity_list(value: Any) -> Any:
    """The old single mapping (``capacity: {type: spot}``) is a list of one option."""
    if value is None:
        return value
    if isinstance(value, Mapping | Capacity):
        return (value,)
    return value


class Slice(Section):
    name: NodePoolName  # the node pool's name, e.g. v6e-16-0
    generation: Literal[tuple(tpu.GENERATIONS)] = "v6e"
    topology: str
    machine_type: str | None = None  # needed where a topology allows several
    group: GroupName | None = None  # the Ray worker group; by default one per shape
    # Capacity options in the order GKE tries them (a ComputeClass per worker group); one
    # mapping is a list of one.
    capacity: Annotated[tuple[Capacity, ...], BeforeValidator(_capacity_list)] = Field(
        default_factory=lambda: (Capacity(),), min_length=1)
    # GKE creates this slice's node pools from the worker group's ComputeClass instead of the stack.
    node_pool_auto_creation: bool = False

    @model_validator(mode="after")
    def _options(self) -> Slice:
        types = [c.type for c in self.capacity]
        for t in dict.fromkeys(types):
            if types.count(t) > 1:
                raise at("capacity", f"capacity type {t} is listed {types.count(t)} times; list each type once, "
                                     "in the order GKE should try them")
        if self.node_pool_auto_creation and any(c.queued_provisioning for c in self.capacity):
            raise at("nodePoolAutoCreation", "queued provisioning needs a node pool the stack creates; "
                                             "set nodePoolAutoCreation: false or queuedProvisioning: false")
        return self

    @property
    def preferred(self) -> Capacity:
        """The first option: what GKE tries first."""
        return self.capacity[0]

    @property
    def autoscaled(self) -> bool:
        """Whether the slice's pools scale between 0 and a whole slice (the autoscaler picks among the
        options) rather than holding the whole slice as the seed's pools do: with fallbacks, or when
        the one option is flex-start (GKE grows flex-start pools only from zero)."""
        return len(self.capacity) > 1 or self.preferred.flex_start

    @property
    def pools(self) -> tuple[tuple[Capacity, str], ...]:
        """(option, node pool name) for each option; none when GKE auto-creates the pools.

        One option keeps the slice's own name (older stacks keep their pool); with fallbacks
        each option's pool is ``<slice>-<suffix>`` (stable when the order changes)."""
        if self.node_pool_auto_creation:
            return ()
        if len(self.capacity) == 1:
            return ((self.capacity[0], self.name),)
        return tuple((c, names.slice_pool(self.name, c.type)) for c in self.capacity)

    @model_validator(mode="after")
    def _shape(self) -> Slice:
        try:
            shape = tpu.resolve(self.generation, self.topology, self.machine_type)
        except SliceError as e:
            gen = tpu.GENERATIONS[self.generation]
            key = "machineType" if self.machine_type and self.topology in gen.topologies else "topology"
            raise at(key, str(e)) from None
        self.__dict__["shape"] = shape
        if self.group is None:
            object.__setattr__(self, "group", shape.group_name)
        return self

    @cached_property
    def shape(self) -> SliceShape:
        return tpu.resolve(self.generation, self.topology, self.machine_type)


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


def _timestamp(value: Any) -> Any:
    """RFC 3339 (as GKE takes it) to an aware UTC datetime; YAML may hand a datetime already."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            raise ValueError("not an RFC 3339 time; e.g. 2026-03-07T02:00:00Z") from None
    else:
        raise ValueError("not an RFC 3339 time; e.g. 2026-03-07T02:00:00Z")
    if dt.tzinfo is None:
        raise ValueError("an RFC 3339 time with its zone (Z for UTC), e.g. 2026-03-07T02:00:00Z")
    return dt.astimezone(UTC)


Timestamp = Annotated[datetime, BeforeValidator(_timestamp)]


def rfc3339(dt: datetime) -> str:
    """A time as GKE returns it (UTC, Z): anything else would show as a diff on every preview."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rrule(value: str) -> dict[str, str]:
    parts = {}
    for part in value.split(";"):
        key, sep, val = part.partition("=")
        if not sep or not key or not val:
            raise ValueError(f"not an RRULE: {part!r} is not KEY=VALUE")
        parts[key.strip().upper()] = val.strip().upper()
    return parts


class MaintenanceWindow(Section):
    """One recurring window in which GKE may upgrade and repair (a window's first start, end, RRULE)."""

    start: Timestamp
    end: Timestamp
    recurrence: str = "FREQ=WEEKLY;BYDAY=SA,SU"

    @model_validator(mode="after")
    def _window(self) -> MaintenanceWindow:
        hours = (self.end - self.start).total_seconds() / 3600
        if hours <= 0:
            raise at("end", "must be after start (the first window's end)")
        if hours < WINDOW_MIN_HOURS:
            raise at("end", f"the window lasts {hours:g} h; GKE counts only windows of at least {WINDOW_MIN_HOURS} h")
        allowed = "FREQ=DAILY, or FREQ=WEEKLY;BYDAY=<days from MO,TU,WE,TH,FR,SA,SU>"
        try:
            rule = _rrule(self.recurrence)
        except ValueError as e:
            raise at("recurrence", f"{e}; allowed: {allowed}") from None
        freq, days = rule.pop("FREQ", None), rule.pop("BYDAY", None)
        if rule or freq not in ("DAILY", "WEEKLY") or (freq == "DAILY" and days):
            raise at("recurrence", f"{self.recurrence!r} is not a rule this stack checks; allowed: {allowed}")
        if freq == "DAILY":
            per_32_days, period = 32 * hours, 24.0
        else:
            listed = days.split(",") if days else [_WEEKDAYS[self.start.weekday()]]
            if bad := [d for d in listed if d not in _WEEKDAYS]:
                raise at("recurrence", f"BYDAY {bad} are not days; allowed: {', '.join(_WEEKDAYS)}")
            # Any 32 days hold every weekday at least 4 times.
            per_32_days, period = 4 * len(set(listed)) * hours, 24.0 if len(set(listed)) > 1 else 168.0
        if hours > period:
            raise at("end", f"the window lasts {hours:g} h, longer than the {period:g} h between its starts")
        if per_32_days < WINDOW_HOURS_PER_32_DAYS:
            raise at("recurrence", f"leaves {per_32_days:g} h of maintenance in 32 days; GKE needs at least "
                                   f"{WINDOW_HOURS_PER_32_DAYS} h: lengthen the window or add days")
        return self


class MaintenanceExclusion(Section):
    """A stretch in which GKE does not upgrade (e.g. a named training run)."""

    name: Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_. ]*[A-Za-z0-9])?$")]
    start: Timestamp
    end: Timestamp | None = None  # NO_MINOR*: unset holds until the minor version's end of support
    scope: Literal[EXCLUSION_SCOPES] = "NO_UPGRADES"

    @model_validator(mode="after")
    def _span(self) -> MaintenanceExclusion:
        if self.end is None:
            if self.scope == "NO_UPGRADES":
                raise at("end", f"a NO_UPGRADES exclusion needs an end, at most {NO_UPGRADES_MAX_DAYS} days after "
                                "start; only NO_MINOR_UPGRADES and NO_MINOR_OR_NODE_UPGRADES may run to the end "
                                "of support")
            return self
        if self.end <= self.start:
            raise at("end", "must be after start")
        if self.scope == "NO_UPGRADES" and self.end - self.start > timedelta(days=NO_UPGRADES_MAX_DAYS):
            days = (self.end - self.start).total_seconds() / 86400
            raise at("end", f"a NO_UPGRADES exclusion lasts at most {NO_UPGRADES_MAX_DAYS} days, this one {days:g}; "
                            "use scope NO_MINOR_OR_NODE_UPGRADES for longer (control plane patches still apply)")
        return self


class Maintenance(Section):
    window: MaintenanceWindow | None = None  # unset: GKE picks any time
    exclusions: tuple[MaintenanceExclusion, ...] = ()

    @model_validator(mode="after")
    def _exclusions(self) -> Maintenance:
        if len(self.exclusions) > MAX_EXCLUSIONS:
            raise at("exclusions", f"{len(self.exclusions)} exclusions; GKE holds at most {MAX_EXCLUSIONS}")
        names_ = [e.name for e in self.exclusions]
        for n in names_:
            if names_.count(n) > 1:
                raise at("exclusions", f"exclusion names must be unique: {n} repeats")
        return self


class AuthorizedNetwork(Section):
    cidr: str
    name: Annotated[str, Field(min_length=1, max_length=100)] | None = None  # the display name
    public: bool = False  # an explicitly allowed public range: dev only (prod keeps the public endpoint off)

    @model_validator(mode="after")
    def _cidr(self) -> AuthorizedNetwork:
        if self.public:
            try:
                net = ipaddress.ip_network(self.cidr, strict=True)
            except ValueError as e:
                raise at("cidr", f"not an IPv4 CIDR range ({e}); e.g. 203.0.113.0/24") from None
            if net.version != 4:
                raise at("cidr", "must be an IPv4 range")
            if limits.private_cidr(self.cidr) is None:
                raise at("public", f"{self.cidr} is a private range; drop public: true")
        elif (msg := limits.private_cidr(self.cidr)) is not None:
            raise at("cidr", f"{msg}; a public range must say public: true (dev only)")
        return self


class ControlPlane(Section):
    """How kubectl and Pulumi reach the API server.

    ``dns``: only the DNS-based endpoint, each request authorised by IAM; the IP endpoints are off.
    ``authorized-networks``: the IP endpoint, from the listed ranges only (the private endpoint unless a
    range is public).
    """

    access: Literal[CONTROL_PLANE_ACCESS] = "dns"
    authorized_networks: tuple[AuthorizedNetwork, ...] = ()

    @model_validator(mode="after")
    def _networks(self) -> ControlPlane:
        if self.access == "dns" and self.authorized_networks:
            raise at("authorizedNetworks", "the DNS endpoint is reached through IAM, not address ranges; use "
                                           "access: authorized-networks or drop the list")
        if self.access == "authorized-networks" and not self.authorized_networks:
            raise at("authorizedNetworks", "access: authorized-networks needs at least one range, e.g. "
                                           "{cidr: 10.0.0.0/8, name: corp-vpn}")
        return self

    @property
    def public_endpoint(self) -> bool:
        """Whether the IP endpoint's public address stays on (only for an explicitly public range)."""
        return self.access == "authorized-networks" and any(n.public for n in self.authorized_networks)


class Cluster(Section):
    name: ClusterName
    version: GkeVersion
    release_channel: Literal[RELEASE_CHANNELS] = "REGULAR"
    system_machine_type: Literal[machines.SYSTEM_MACHINES] = "n1-standard-16"
    system_node_count: int = Field(1, ge=1, le=100)
    deletion_protection: bool | None = None  # on in prod unless said otherwise (refused off)
    # Pod and service ranges (VPC-native). GKE picks them when unset, seeing only the
    # cluster's own VPC, not the secondary DCN VPCs whose subnets pods also reach.
    pod_cidr: ClusterCidr | None = None
    service_cidr: ClusterCidr | None = None
    # Hardening (README "Cluster hardening"): each on by default, and prod refuses it off.
    private_nodes: bool = True  # nodes without external IPs; Cloud NAT for egress
    shielded_nodes: bool = True  # Shielded GKE Nodes: vTPM node identity, integrity monitoring
    control_plane: ControlPlane = Field(default_factory=ControlPlane)
    maintenance: Maintenance = Field(default_factory=Maintenance)

    @property
    def location(self) -> str:
        """The zone (the seed's Standard cluster is zonal): ``gcp:zone``."""
        return self.__dict__["location"]


class Storage(Section):
    bucket: BucketName
    location: str | None = None  # the region by default
    storage_class: Literal[STORAGE_CLASSES] = "STANDARD"
    # The workload namespace the stack creates (Pod Security labels, README "Inside the cluster"); prod refuses
    # ``default``, and a namespace Kubernetes, GKE or Kueue owns is refused everywhere.
    namespace: Annotated[Namespace, _check(lambda v: f"{v} belongs to Kubernetes, GKE or Kueue; name the stack's own "
                                           f"(default {names.DEFAULT_NAMESPACE})"
                                           if v in names.SYSTEM_NAMESPACES or v.startswith("kube-") else None)] = (
        names.DEFAULT_NAMESPACE)
    service_account: KsaName  # the Kubernetes service account of the workloads
    protected: bool | None = None  # refuse deletion, keep the bucket on destroy; on in prod
    # A configurable dual-region's two regions (location then names their multi-region: US, EU, ASIA). Multi-region
    # stacks pick it (or a predefined dual-region or a multi-region) when location is unset.
    data_locations: tuple[Region, ...] = ()

    @model_validator(mode="after")
    def _data_locations(self) -> Storage:
        if self.data_locations and len(set(self.data_locations)) != 2:
            raise at("dataLocations", "a configurable dual-region names two different regions "
                                      "(https://cloud.google.com/storage/docs/locations)")
        return self
    # Most one run's checkpoints may hold (GB): more is a preview warning and a policy warning.
    checkpoint_budget_gb: float | None = Field(None, gt=0)


class RaySettings(Section):
    cluster_name: RayClusterName = "maxtext-tpu-cluster"
    image: str = DEFAULT_RAY_IMAGE
    head_cpu: Quantity = "8"
    head_memory: Quantity = "16Gi"
    worker_cpu: Quantity = "8"
    worker_memory: Quantity = "200G"
    megascale_port: Port = 9915
    metrics_export_port: Port = 8082
    # The KubeRay release the cluster runs (GKE's Ray operator add-on picks it): RayJob fields it
    # does not know are refused (stackspec.kuberay).
    kuberay_version: Annotated[str, _check(kuberay.version_error)] = kuberay.DEFAULT_VERSION
    # Ray token authentication on every Ray node (KubeRay authOptions; README "Inside the cluster").
    auth: Literal["disabled", "token"] = "disabled"

    @model_validator(mode="after")
    def _auth(self) -> RaySettings:
        if self.auth != "token":
            return self
        tag = re.search(r":(\d+)\.(\d+)\.(\d+)(?:-|$)", self.image)
        if tag is None or tuple(map(int, tag.groups())) < RAY_AUTH_MIN:
            raise at("auth", f"token auth needs Ray >= {'.'.join(map(str, RAY_AUTH_MIN))} named by ray.image's tag "
                     f"(KubeRay refuses it otherwise); ray.image is {self.image}")
        version = kuberay.parse(self.kuberay_version)
        if version is not None and version < KUBERAY_AUTH_MIN:
            raise at("auth", f"KubeRay {self.kuberay_version} (ray.kuberayVersion) has no authOptions (since "
                     f"{'.'.join(map(str, KUBERAY_AUTH_MIN))}): its CRD would drop it silently and Ray would run "
                     "without auth")
        return self

    @model_validator(mode="after")
    def _ports(self) -> RaySettings:
        taken = {**limits.RAY_HEAD_PORTS, **limits.RAY_NODE_PORTS}
        for key, port in (("megascalePort", self.megascale_port), ("metricsExportPort", self.metrics_export_port)):
            clash = [n for n, p in taken.items() if p == port]
            if clash:
                raise at(key, f"port {port} is Ray's {clash[0]} port; pick another")
            taken[key] = port
        return self


class WorkerImage(Section):
    """The prebuilt worker image (the repository's Dockerfile) in the Artifact Registry repository the stack creates."""

    repository: Annotated[str, _name(limits.ARTIFACT_REPOSITORY)] = "tpu-multislice"
    name: Annotated[str, _name(limits.IMAGE_NAME)] = "ray-maxtext"
    # image.yml's output. Unset: the first phase, in which the stack creates the repository and the pusher's grant
    # and the workers run ray.image, installing MaxText at start as the seed does (no deadlock on day 0).
    digest: str | None = None
    location: Region | None = None  # the region by default
    streaming: bool = True  # GKE image streaming on the node pools (Artifact Registry images only)
    pusher: str | None = None  # ci-image@<project>.iam.gserviceaccount.com by default (bootstrap/)

    @model_validator(mode="after")
    def _digest(self) -> WorkerImage:
        if self.digest is not None:
            if not IMAGE_DIGEST.fullmatch(self.digest):
                raise at("digest", "an image digest sha256:<64 hex digits>, as the image workflow prints it")
            if self.digest == PLACEHOLDER_IMAGE_DIGEST:
                raise at("digest", "the offline placeholder is not an image; leave digest unset until the image "
                                   "workflow has pushed one")
        if self.pusher is not None and not _SERVICE_ACCOUNT_EMAIL.fullmatch(self.pusher):
            raise at("pusher", "a service account email, e.g. ci-image@my-project.iam.gserviceaccount.com")
        return self

    @property
    def pending(self) -> bool:
        """No digest yet: the image is built after the first `pulumi up` has made its repository."""
        return self.digest is None


class NotificationChannel(Section):
    name: Annotated[str, Field(min_length=1, max_length=100)]  # the channel's display name, unique
    type: Literal[NOTIFICATION_CHANNEL_TYPES]
    address: str  # email: an address; pubsub: projects/P/topics/T; webhook: an https URL

    @model_validator(mode="after")
    def _address(self) -> NotificationChannel:
        rules = {
            "email": (r"[^@\s]+@[^@\s]+\.[^@\s]+", "an email address"),
            "pubsub": (r"projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/topics/[A-Za-z][-A-Za-z0-9_.~+%]{2,254}",
                       "a Pub/Sub topic, projects/<project>/topics/<topic>"),
            "webhook": (r"https://\S+", "an https:// URL"),
        }
        pattern, what = rules[self.type]
        if not re.fullmatch(pattern, self.address):
            raise at("address", f"a {self.type} channel takes {what}")
        return self


class Monitoring(Section):
    """Alert thresholds and where alerts go. Defaults suit a fleet where a step takes seconds."""

    enabled: bool = True
    notification_channels: tuple[NotificationChannel, ...] = ()
    # TPU duty cycle below this (percent, averaged over a RayCluster's TPUs) for this long while a
    # Ray Train run is RUNNING: the job holds slices and is not training (input-bound, stuck, hung).
    duty_cycle_low_percent: float = Field(10, gt=0, le=100)
    duty_cycle_low_minutes: int = Field(30, ge=5, le=1440)
    # No checkpoint save started for this long while a run is RUNNING: a preemption now loses it all.
    checkpoint_max_age_minutes: int = Field(60, ge=5, le=10080)

    @model_validator(mode="after")
    def _unique(self) -> Monitoring:
        names_ = [c.name for c in self.notification_channels]
        for n in names_:
            if names_.count(n) > 1:
                raise at("notificationChannels", f"channel names must be unique: {n} repeats")
        return self


# Kueue WorkloadPriorityClasses every stack declares (name -> value): Kueue admits higher values
# first and, within the ClusterQueue, may preempt a lower one to admit a higher one.
WORKLOAD_PRIORITIES = {
    "production": 1000,  # runs the stack exists for: admitted first, may preempt the others
    "research": 500,  # experiments: wait for production work, preempt drills
    "drill": 100,  # preemption drills and canaries: only on capacity nobody else wants
}


class Job(Section):
    name: RayJobName
    mode: Literal["multislice", "elastic"] = "multislice"
    group: str | None = None  # worker group (slice shape); the only one by default
    # dedicated: the RayJob brings its own RayCluster and is queued by Kueue (admitted whole when
    # quota frees); shared: submitted to the long-lived RayCluster, which Kueue cannot queue per job.
    cluster: Literal["shared", "dedicated"] = "shared"
    priority: Literal[tuple(WORKLOAD_PRIORITIES)] = "research"  # Kueue WorkloadPriorityClass
    slices: int | None = Field(None, ge=1)  # multislice: exact; resolved: the maximum
    min_slices: int | None = Field(None, ge=1)  # elastic only
    max_slices: int | None = Field(None, ge=1)  # elastic only
    max_failures: int | None = Field(None, ge=0)  # elastic: 3 by default, at least 2
    model: Annotated[str, _check(maxtext_facts.model_error)] = "llama3-8b"
    steps: int = Field(100, ge=1)
    per_device_batch_size: float = Field(4, gt=0)
    max_target_length: int = Field(4096, ge=1)
    # The run name is derived (stackspec.runs): a new value here starts a fresh run of the same settings.
    rerun: int | str | None = None
    ici: dict[MeshAxis, MeshDegree] = Field(default_factory=dict)
    dcn: dict[MeshAxis, MeshDegree] = Field(default_factory=dict)
    maxtext: dict[str, MaxTextValue] = Field(default_factory=dict)  # further MaxText key=value settings
    # Steps between checkpoints; unset: the seed's for multislice jobs, Young/Daly's for elastic ones
    # (from checkpointSaveSeconds, expectedPreemptionIntervalMinutes and the step time).
    checkpoint_period: int | None = Field(None, ge=1)
    checkpoint_save_seconds: float | None = Field(None, gt=0)  # measured blocking time of one save
    expected_preemption_interval_minutes: float | None = Field(None, gt=0)  # mean time between preemptions
    # Seconds per training step on this job's slices, for the cost of a run; unset: shown as unknown.
    expected_step_seconds: float | None = Field(None, gt=0)
    active_deadline_seconds: int = Field(4 * 3600, ge=1)
    backoff_limit: int = Field(0, ge=0)
    # A dedicated cluster (and its slices) is deleted this long after the job ends (logs until then).
    # Queued jobs take 0: Kueue frees the job's quota when KubeRay reports it finished, not when the
    # cluster goes (cloud rule kueue-quota-freed-at-job-end).
    cluster_ttl_seconds: int = Field(0, ge=0)
    # Shared-cluster jobs: KubeRay deletes the finished RayJob and its submitter Job after this long
    # (deletionRules, KubeRay >= 1.6). Unset: kept, so Pulumi's state and the cluster agree.
    job_ttl_seconds: int | None = Field(None, ge=0)
    # Multi-region stacks (tpu-multislice:regions): the region whose cluster this job is created in directly.
    # Unset: queued through the manager, whose MultiKueue dispatches it to the first region that admits it.
    region: Region | None = None
    # An operator's pause: a dedicated job is declared suspended and outside Kueue (no queue label:
    # Kueue would unsuspend it on admission); a shared job is not submitted (held for review).
    suspend: bool = False

    @model_validator(mode="after")
    def _mode_keys(self) -> Job:
        given = self.model_fields_set
        if self.mode == "elastic":
            if "slices" in given:
                raise at("slices", "elastic jobs take minSlices and maxSlices")
            failures = 3 if self.max_failures is None else self.max_failures
            if failures < MIN_ELASTIC_MAX_FAILURES:
                raise at("maxFailures", f"must be at least {MIN_ELASTIC_MAX_FAILURES}: one preemption spends two "
                                        "(the lost worker, and a restart that times out waiting for the lost slice)")
            object.__setattr__(self, "max_failures", failures)
        else:
            for key in ("min_slices", "max_slices"):
                if key in given:
                    raise at(to_camel(key), "multislice jobs take slices; minSlices/maxSlices are for mode elastic")
            object.__setattr__(self, "max_failures", self.max_failures or 0)
        for key in self.maxtext:
            if key.startswith(("ici_", "dcn_")) or key in JOB_OWNED_MAXTEXT_KEYS:
                raise at(f"maxtext.{key}", "set through the job's own key (ici, dcn, steps, ...), not maxtext")
            if msg := maxtext_facts.key_error(key):
                raise at(f"maxtext.{key}", msg)
        if self.backoff_limit and self.cluster == "shared":
            raise at("backoffLimit", "KubeRay retries a job by creating a new RayCluster: a job on the shared cluster "
                                     "takes backoffLimit 0 (or cluster: dedicated)")
        if self.cluster_ttl_seconds and self.queued:
            raise at("clusterTtlSeconds", f"{self.cluster_ttl_seconds}: Kueue frees a queued job's quota as soon as "
                     "KubeRay reports it finished, so a cluster kept after that holds slices the next admitted job "
                     "is counted on (its pods pend, or the autoscaler brings up another fallback): 0 for a queued "
                     "job; read its logs in Cloud Logging")
        if self.job_ttl_seconds is not None and self.cluster == "dedicated":
            raise at("jobTtlSeconds", "a dedicated job's cluster goes with shutdownAfterJobFinishes (Kueue requires "
                                      "it), which KubeRay's deletionRules exclude: use clusterTtlSeconds")
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_run_name(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "runName" in data:
            raise at("runName", "the run name is derived from the model, mesh, batch, sequence length and dataset "
                                "(so a changed job never restores a checkpoint that does not fit it): remove runName; "
                                "set rerun: 1 (or any new value) to start a fresh run of unchanged settings")
        return data

    @property
    def elastic(self) -> bool:
        return self.mode == "elastic"

    @cached_property
    def run_identity(self) -> dict[str, Any]:
        """What a checkpoint of this job must agree with (hashed into :attr:`run_name`)."""
        return runs.identity(model=self.model, ici=self.ici, dcn=self.dcn,
                             per_device_batch_size=self.per_device_batch_size,
                             max_target_length=self.max_target_length, maxtext=self.maxtext, rerun=self.rerun)

    @cached_property
    def run_name(self) -> str:
        """MaxText's run_name and Ray Train's run: ``<name>-<8 hex>`` (:mod:`stackspec.runs`)."""
        return runs.run_name(self.name, self.run_identity)

    @property
    def checkpoint_plan(self) -> checkpoints.Plan:
        """The resolved checkpoint period and how it was chosen (set by ``StackSpec._checkpoint_rules``)."""
        return self.__dict__.get("checkpoint_plan") or checkpoints.Plan(
            self.checkpoint_period or checkpoints.SEED_CHECKPOINT_PERIOD, "unresolved")

    @property
    def checkpoint_storage(self) -> checkpoints.Storage | None:
        """One run's checkpoints at its end (None: the model's size is not in the table)."""
        return checkpoints.storage(self.model, self.steps, self.checkpoint_plan.period, self.maxtext)

    @property
    def queued(self) -> bool:
        """Kueue admits this job's RayJob: it brings its own cluster (Kueue's rule) and is not paused."""
        return self.cluster == "dedicated" and not self.suspend


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
        """Any option of any slice is Spot: a job here may be preempted."""
        return any(c.spot for s in self.slices for c in s.capacity)

    @property
    def capacity(self) -> tuple[Capacity, ...]:
        """The group's options in order (its slices agree: ``StackSpec._slice_rules``)."""
        return self.slices[0].capacity

    @property
    def node_pool_auto_creation(self) -> bool:
        return self.slices[0].node_pool_auto_creation

    @property
    def compute_class(self) -> str:
        return names.compute_class(self.name)


class Unverified(Section):
    """Paths no test here can prove and no apply-tested peer takes: off by default, so a stack runs what
    the seed or a peer is known to run. Each one turned on is listed as unverified by the preview."""

    # TPU pools that scale from zero (capacity fallbacks, flex-start) while their pods claim DRANET devices:
    # the cluster autoscaler grows a DRA node group from zero only where the cloud provider models the
    # driver's devices on its template node (cluster-autoscaler docs/dra_support.md), which GKE does not
    # document for netdev.google.com. The seed's fixed-size pools are known to work.
    dra_scale_from_zero: bool = False
    # Ray token auth through KubeRay's authOptions (KubeRay >= 1.5.1): GKE does not publish the Ray add-on's
    # KubeRay version, and an older RayCluster CRD prunes the field silently, leaving the head open.
    ray_token_auth: bool = False
    # Binary Authorization blocking (ENFORCED_BLOCK_AND_AUDIT_LOG) rather than logging (DRYRUN_AUDIT_LOG_ONLY): the
    # images GKE itself runs on the nodes (its system policy's list) and the GCS FUSE sidecar GKE injects are not
    # checked here against the policy, and a refused system pod stops the cluster's add-ons.
    binary_authorization_enforce: bool = False
    # Multi-tier checkpointing (workloads/multitier.py): MaxText's enable_multi_tier_checkpointing with GKE's
    # HighScaleCheckpointing add-on; GKE documents it with JobSet workloads, not KubeRay's pods.
    multi_tier_checkpointing: bool = False


UNVERIFIED = {
    "draScaleFromZero": "TPU pools scale from zero while worker pods claim DRANET devices: GKE documents no "
                        "template-node devices for netdev.google.com, so the autoscaler may never grow them",
    "rayTokenAuth": "ray.auth: token relies on the GKE Ray add-on running KubeRay >= 1.5.1 (authOptions), which GKE "
                    "does not publish: an older CRD drops the field and the head runs without a token (the cluster "
                    "drill checks that the head refuses a request without one)",
    "binaryAuthorizationEnforce": "Binary Authorization blocks every image its policy does not allow: the images GKE "
                                  "runs for itself are trusted through Google's system policy, which no test here "
                                  "can list; a refused system pod stops the cluster's add-ons (the default only logs)",
    "multiTierCheckpointing": "multi-tier checkpointing (MaxText enable_multi_tier_checkpointing, GKE's "
                              "HighScaleCheckpointing add-on, a CheckpointConfiguration and the "
                              "multitier-checkpoint.csi.storage.gke.io volume at /local on the TPU workers): GKE "
                              "documents it for JobSet pods, whose indices its replicator pairs peers by, not for "
                              "KubeRay's; the backups need a bucket with hierarchical namespace; the local period's "
                              "save rate is assumed (stackspec/checkpoints.py), not measured",
}


class Deploy(Section):
    """What the GitOps workflows do with the stack (bootstrap/ makes the environments and identities these need)."""

    # deploy.yml applies the stack on every push to main, in the GitHub environment deploy-<stack>, as the
    # stack's own deploy identity ci-deploy-<stack>. Off by default: a new stack is previewed, never applied.
    on_push: bool = False
    # drills.yml's weekly cluster drill runs this elastic job against the deployed stack (environment drill-<stack>).
    cluster_drill: str | None = None


class TpuPrices(Section):
    """USD per chip-hour by capacity type; unset: the dated table, stackspec/data/prices.json."""

    on_demand: float | None = Field(None, gt=0)
    spot: float | None = Field(None, gt=0)
    flex_start: float | None = Field(None, gt=0)
    reservation: float | None = Field(None, gt=0)


class Prices(Section):
    """Prices the stack gives itself (a negotiated rate, a current Spot price, what the table lacks)."""

    v6e: TpuPrices | None = None
    v5e: TpuPrices | None = None
    v5p: TpuPrices | None = None
    v4: TpuPrices | None = None
    tpu7x: TpuPrices | None = None
    machines: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)  # USD per machine-hour
    storage_gb_month: float | None = Field(None, gt=0)  # USD per GB-month of the bucket's storage class
    bucket_gb: float | None = Field(None, ge=0)  # the checkpoint bucket's expected size, for the monthly line
    # Multi-region stacks: the manager cluster's hourly cost (Autopilot bills pod requests, not in the table).
    manager_per_hour: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _machines(self) -> Prices:
        for name in self.machines:
            if name not in machines.MACHINES:
                raise at(f"machines.{name}", f"not a machine type of the machine table; allowed: "
                                             f"{', '.join(machines.MACHINES)}")
        return self

    def tpu_overrides(self) -> dict[str, dict[str, float]]:
        """``{generation: {onDemand|spot|flexStart|reservation: usd}}`` for what the stack sets."""
        out = {}
        for gen in tpu.GENERATIONS:
            p = getattr(self, gen, None)
            if p is not None:
                out[gen] = {to_camel(k): v for k, v in p.model_dump().items() if v is not None}
        return out


class Manager(Section):
    """The multi-region stack's manager cluster: no TPUs, it holds the queues and Kueue's MultiKueue, which
    dispatches each queued job to a region's cluster (README "Regions")."""

    name: ClusterName
    region: Region | None = None  # gcp:region by default
    # Autopilot by default: the manager runs only Kueue's controller (its RayJobs are never run there, spec.managedBy
    # hands them to MultiKueue). false: a Standard cluster with one system pool.
    autopilot: bool = True
    version: GkeVersion
    release_channel: Literal[RELEASE_CHANNELS] = "REGULAR"
    system_machine_type: Literal[machines.SYSTEM_MACHINES] = "n1-standard-4"  # Standard only
    system_node_count: int = Field(1, ge=1, le=100)  # Standard only
    deletion_protection: bool | None = None  # on in prod unless said otherwise (refused off)
    cidr: SubnetCidr = "10.0.0.0/20"  # its own VPC's node subnet (<name>-vpc, <name>-nodes)
    pod_cidr: ClusterCidr | None = None  # pinned pod and service ranges (secondary ranges of its subnet)
    service_cidr: ClusterCidr | None = None
    control_plane: ControlPlane = Field(default_factory=ControlPlane)
    maintenance: Maintenance = Field(default_factory=Maintenance)

    def as_cluster(self) -> Cluster:
        """The manager as the cluster settings the infra reads (regional: Autopilot clusters are regional)."""
        c = Cluster(name=self.name, version=self.version, release_channel=self.release_channel,
                    system_machine_type=self.system_machine_type, system_node_count=self.system_node_count,
                    deletion_protection=self.deletion_protection, control_plane=self.control_plane,
                    maintenance=self.maintenance, pod_cidr=self.pod_cidr, service_cidr=self.service_cidr)
        c.__dict__["location"] = self.region
        return c

    @property
    def network(self) -> PrimaryNetwork:
        return PrimaryNetwork(network=names.cluster_network(self.name), subnet=names.cluster_subnet(self.name),
                              cidr=self.cidr)

    @model_validator(mode="after")
    def _standard_only(self) -> Manager:
        if self.autopilot:
            for key in ("system_machine_type", "system_node_count"):
                if key in self.model_fields_set:
                    raise at(to_camel(key), "Autopilot sizes its own nodes; only for autopilot: false")
        return self


class RegionSite(Section):
    """One region of a multi-region stack: a cluster in a zone, its networks, its slices and its prices."""

    region: Region
    zone: Zone
    cluster: Cluster
    network: Network = Field(default_factory=Network)
    slices: tuple[Slice, ...]
    prices: Prices | None = None  # this region's own prices; unset: tpu-multislice:prices

    @model_validator(mode="after")
    def _zone(self) -> RegionSite:
        if not self.zone.startswith(self.region + "-"):
            gens = sorted({s.generation for s in self.slices})
            hint = "; ".join(zones.suggestion(self.region, g) for g in gens) or f"e.g. {self.region}-b"
            raise at("zone", f"must be a zone of region {self.region} ({hint})")
        return self


@dataclass(frozen=True)
class Dispatch:
    """A region's place in the manager's dispatch order and why it is there."""

    view: StackSpec
    index: int  # its place in tpu-multislice:regions
    usd_per_chip_hour: float | None  # its slices' first-choice price, weighted by chips; None: unknown
    reason: str


# --------------------------------------------------------------------------- the stack


def _ns(key: str) -> str:
    return f"{NS}:{key}"


class StackSpec(BaseModel):
    """One stack: its ``gcp:*`` keys, the project's sections and the stack file's secrets provider."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)

    # The file the spec was read from (the loader sets it; ``--stacks-dir`` moves it), for messages.
    _source: str | None = PrivateAttr(default=None)

    stack: str
    environment: Literal[ENVIRONMENTS] = Field(alias=_ns("environment"))
    project: ProjectId = Field(alias="gcp:project")
    # The bootstrap's CI project: the CI identities (image pusher, drill user) and the state keys live there.
    ci_project: ProjectId = Field(alias=_ns("ciProject"))
    region: Region = Field(alias="gcp:region")
    # Required in a single-region stack (StackSpec._one_place); a multi-region stack names them per region.
    zone: Zone | None = Field(None, alias="gcp:zone")
    cluster: Cluster | None = Field(None, alias=_ns("cluster"))
    network: Network = Field(default_factory=Network, alias=_ns("network"))
    slices: tuple[Slice, ...] | None = Field(None, alias=_ns("slices"))
    storage: Storage = Field(alias=_ns("storage"))
    ray: RaySettings = Field(default_factory=RaySettings, alias=_ns("ray"))
    jobs: tuple[Job, ...] = Field((), alias=_ns("jobs"))
    image: WorkerImage | None = Field(None, alias=_ns("image"))  # absent: ray.image, MaxText installed at start
    monitoring: Monitoring = Field(default_factory=Monitoring, alias=_ns("monitoring"))
    prices: Prices = Field(default_factory=Prices, alias=_ns("prices"))
    unverified: Unverified = Field(default_factory=Unverified, alias=_ns("unverified"))
    # Several regions (README "Regions"): a manager cluster holding the queues, a cluster per region with its
    # zone, networks and slices, and the order MultiKueue offers a queued job to the regions.
    manager: Manager | None = Field(None, alias=_ns("manager"))
    regions: tuple[RegionSite, ...] = Field((), alias=_ns("regions"))
    dispatch: Literal[places.DISPATCH] = Field("cost", alias=_ns("dispatch"))
    deploy: Deploy = Field(default_factory=Deploy, alias=_ns("deploy"))
    # The stack file's own top-level keys (beside config:), as Pulumi writes them.
    secrets_provider: str | None = Field(None, alias="secretsprovider")
    encryption_salt: str | None = Field(None, alias="encryptionsalt")  # present: the passphrase provider
    encrypted_key: str | None = Field(None, alias="encryptedkey")

    # ------------------------------------------------------------------ views

    @property
    def prod(self) -> bool:
        return self.environment == "prod"

    @property
    def mtu(self) -> int:
        return self.network.mtu

    @property
    def networks(self) -> tuple[SecondaryNetwork, ...]:
        return self.network.secondary

    @property
    def dranet(self) -> bool:
        return bool(self.networks)

    @property
    def unverified_paths(self) -> dict[str, str]:
        """The opt-in paths this stack takes that nothing here can verify (spec key -> what is unverified)."""
        on = self.unverified.model_dump(by_alias=True)
        return {_ns(f"unverified.{k}"): why for k, why in UNVERIFIED.items() if on.get(k)}

    @property
    def worker_image(self) -> str:
        """What every Ray container runs: the prebuilt image by digest, or ``ray.image`` (MaxText then installs
        at worker start) when the stack has no prebuilt image or its digest is still pending."""
        if not self.prebuilt_image:
            return self.ray.image
        return names.image_reference(self.image.location, self.project, self.image.repository, self.image.name,
                                     self.image.digest)

    @property
    def prebuilt_image(self) -> bool:
        """The workers run the stack's own image (its digest is set)."""
        return self.image is not None and not self.image.pending

    @cached_property
    def groups(self) -> tuple[WorkerGroup, ...]:
        order: dict[str, list[Slice]] = {}
        for s in self.slices:
            order.setdefault(s.group, []).append(s)
        return tuple(WorkerGroup(g, ss[0].shape, tuple(ss)) for g, ss in order.items())

    def group(self, name: str) -> WorkerGroup:
        return next(g for g in self.groups if g.name == name)

    def step_time(self, job: Job) -> tuple[float, str] | None:
        """Seconds per step and where the figure comes from: the job's ``expectedStepSeconds``,
        else the seed's measured step for the same model, shape, slices, batch and length."""
        if job.expected_step_seconds:
            return job.expected_step_seconds, "expectedStepSeconds"
        shape = self.group(job.group).shape
        return checkpoints.step_seconds(job.model, shape.pod_type, job.slices, job.per_device_batch_size,
                                        job.max_target_length)

    @property
    def stack_file(self) -> str:
        """The stack file the spec was read from (``stacks/Pulumi.<stack>.yaml`` unless read elsewhere)."""
        return self._source or names.stack_file(self.stack)

    def job(self, name: str | None = None) -> Job:
        """The named job, or the stack's first; :class:`UnknownName` naming the stack file otherwise."""
        where = self.stack_file
        if not self.jobs:
            raise UnknownName(f"{where}: {NS}:jobs is empty; add a job")
        if name is None:
            return self.jobs[0]
        for job in self.jobs:
            if job.name == name:
                return job
        raise UnknownName(f"{where}: no job named {name!r} in {NS}:jobs; allowed: "
                          f"{', '.join(j.name for j in self.jobs)}")

    def drill_job(self, name: str | None = None) -> Job:
        """The named job, else the first running elastic job (what a preemption drill is for)."""
        if name:
            return self.job(name)
        running = [j for j in self.jobs if j.elastic and not j.suspend]
        elastic = [j for j in self.jobs if j.elastic]
        return (running or elastic or [self.job()])[0]

    def derived_names(self) -> list[names.Derived]:
        """Every name the stack deploys, with the spec key it comes from and its limit."""
        d, c, ray = names.Derived, self.cluster.name, self.ray.cluster_name
        sa = names.node_service_account_id(c)
        out = [
            d(_ns("cluster.name"), c, limits.GKE_CLUSTER, "the GKE cluster"),
            d(_ns("cluster.name"), sa, limits.SERVICE_ACCOUNT_ID, f"the node service account <cluster>-nodes ({sa})"),
            d(_ns("ray.clusterName"), ray, limits.RAY_CLUSTER, "the shared RayCluster"),
            d(_ns("ray.clusterName"), names.trainer_configmap(ray), limits.CONFIG_MAP,
              "the trainer ConfigMap <clusterName>-trainer"),
            d(_ns("storage.namespace"), self.storage.namespace, limits.K8S_NAMESPACE, "the workload namespace"),
            d(_ns("storage.serviceAccount"), self.storage.service_account, limits.K8S_SERVICE_ACCOUNT,
              "the workloads' Kubernetes service account"),
            d("stack", self.stack, limits.LABEL_VALUE, "the tpu-multislice/stack label on every object"),
        ]
        if self.deploy.on_push:
            out.append(d(_ns("deploy.onPush"), names.deploy_account_id(self.stack), limits.SERVICE_ACCOUNT_ID,
                         "the stack's deploy identity ci-deploy-<stack> (bootstrap/)"))
        if self.image is not None:
            out.append(d(_ns("image.repository"), self.image.repository, limits.ARTIFACT_REPOSITORY,
                         "the Artifact Registry repository"))
        primary = self.network.primary
        out += [d(_ns("network.primary.network"), primary.network, limits.COMPUTE_NETWORK, "the cluster's VPC"),
                d(_ns("network.primary.subnet"), primary.subnet, limits.COMPUTE_SUBNETWORK, "the nodes' subnet")]
        for i, net in enumerate(self.networks):
            k = _ns(f"network.secondary[{i}]")
            out += [d(f"{k}.network", net.network, limits.COMPUTE_NETWORK, "a secondary VPC"),
                    d(f"{k}.network", names.dcn_firewall(net.network), limits.COMPUTE_FIREWALL,
                      "its ingress firewall <network>-allow-internal"),
                    d(f"{k}.subnet", net.subnet, limits.COMPUTE_SUBNETWORK, "a secondary subnet")]
        for i, s in enumerate(self.slices):
            k = _ns(f"slices[{i}]")
            out += [d(f"{k}.name", s.name, limits.GKE_NODE_POOL, "the slice's node pool"),
                    d(f"{k}.group", s.group, limits.RAY_WORKER_GROUP, "the Ray worker group")]
            out += [d(f"{k}.name", pool, limits.GKE_NODE_POOL, f"the node pool of its {c.type} option <name>-<suffix>")
                    for c, pool in s.pools if pool != s.name]
        for g in self.groups:
            i = next(n for n, s in enumerate(self.slices) if s.group == g.name)
            # The class name is also a node label value (cloud.google.com/compute-class=<class>).
            out.append(d(_ns(f"slices[{i}].group"), g.compute_class, limits.LABEL_VALUE,
                         "the worker group's ComputeClass <group>-class (a node label value)"))
        for i, j in enumerate(self.jobs):
            k = _ns(f"jobs[{i}]")
            out += [d(f"{k}.name", j.name, limits.RAY_JOB, "the RayJob (KubeRay appends 6 characters for its cluster)"),
                    d(f"{k}.name", names.submitter_job(j.name), limits.LABEL_VALUE,
                      "the submitter Job and the tpu-multislice/job label"),
                    d(f"{k}.name", j.run_name, limits.RUN_NAME, "the MaxText run name <name>-<8 hex>")]
        return out

    # ------------------------------------------------------------------ rules across sections

    @model_validator(mode="before")
    @classmethod
    def _zone_in_region(cls, data: Any, info: ValidationInfo) -> Any:
        # Checked on the raw keys too, so it is reported even when a section is invalid.
        if isinstance(data, Mapping) and info.context is not None:
            zone, region = data.get("gcp:zone"), data.get("gcp:region")
            if isinstance(zone, str) and isinstance(region, str) and not zone.startswith(region + "-"):
                gens = {s.get("generation", "v6e") for s in data.get(_ns("slices")) or [] if isinstance(s, Mapping)}
                hint = "; ".join(zones.suggestion(region, str(g)) for g in sorted(gens, key=str)) or f"e.g. {region}-b"
                info.context.setdefault("problems", []).append(
                    Problem("gcp:zone", zone, f"must be a zone of gcp:region {region} ({hint})"))
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_place(cls, data: Any, info: ValidationInfo) -> Any:
        """A single-region stack names its zone, cluster and slices at the top; a multi-region stack names them
        per region and refuses them at the top (one place per fact)."""
        if not isinstance(data, Mapping):
            return data
        problems = []
        if data.get(_ns("regions")):
            for key, where in (("gcp:zone", "zone"), (_ns("cluster"), "cluster"), (_ns("network"), "network"),
                               (_ns("slices"), "slices")):
                if key in data:
                    problems.append(Problem(key, data[key], f"a stack with {_ns('regions')} names each region's "
                                            f"{where} there (regions[].{where}): move it (one place per fact)"))
            if data.get(_ns("manager")) is None:
                problems.append(Problem(_ns("manager"), MISSING, "required with regions: the cluster that holds the "
                                        "queues, e.g. {name: tpu-manager, version: 1.35.2-gke.1842000} (Autopilot)"))
        else:
            for key in ("gcp:zone", _ns("cluster"), _ns("slices")):
                if data.get(key) is None:
                    problems.append(Problem(key, MISSING, "required"))
            for key in (_ns("manager"), _ns("dispatch")):
                if key in data:
                    problems.append(Problem(key, data[key], f"only with {_ns('regions')} (a multi-region stack)"))
        if problems:
            if info.context is None:
                raise ValueError("; ".join(p.render() for p in problems))
            info.context.setdefault("problems", []).extend(problems)
        return data

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> StackSpec:
        problems: list[Problem] = []
        fail = lambda key, value, msg: problems.append(Problem(key, value, msg))  # noqa: E731
        if self.regions:
            self._multi_region_rules(fail, info)
        elif self.zone is not None and self.cluster is not None and self.slices is not None:
            self._single_region_rules(fail, info, problems)
        drill = self.deploy.cluster_drill
        if (info.context or {}).get("as_written") and drill is not None and not any(
                j.name == drill and j.elastic for j in self.jobs):
            # The cluster drill preempts a running elastic job and follows it back (drills/cluster.py). Checked on
            # the stack file as written (lint, the workflows' stack lists, the bootstrap), so they answer alike.
            elastic = ", ".join(j.name for j in self.jobs if j.elastic) or "none is elastic"
            fail(_ns("deploy.clusterDrill"), drill, f"the cluster drill preempts an elastic job of "
                 f"{_ns('jobs')} ({elastic})")
        sink = (info.context or {}).get("problems") if info.context is not None else None
        if problems:
            if sink is None:
                raise ValueError("; ".join(p.render() for p in problems))
            sink.extend(problems)
        return self

    # ------------------------------------------------------------------ several regions

    def _multi_region_rules(self, fail, info: ValidationInfo) -> None:
        """The manager, the regions and what spans them; then each region as a single-region view, whose
        problems are named at the region's keys (``stackspec.regions.rename``)."""
        m, ns = self.manager, _ns("regions")
        if m is None:
            return  # reported by _one_place
        if m.region is None:
            object.__setattr__(m, "region", self.region)
        if m.deletion_protection is None:
            object.__setattr__(m, "deletion_protection", self.prod)
        elif self.prod and not m.deletion_protection:
            fail(_ns("manager.deletionProtection"), False, "a production cluster keeps deletion protection on")
        if self.prod and m.release_channel not in PROD_RELEASE_CHANNELS:
            fail(_ns("manager.releaseChannel"), m.release_channel, "prod enrols in a release channel with GKE's SLA; "
                 f"allowed: {', '.join(PROD_RELEASE_CHANNELS)}")
        if len(self.regions) > places.MAX_REGIONS:
            fail(ns, [r.region for r in self.regions], f"{len(self.regions)} regions; a MultiKueueConfig lists at "
                 f"most {places.MAX_REGIONS} clusters (Kueue v0.19.2 multikueue_types.go, MaxItems=20)")
        seen_region: dict[str, int] = {}
        seen_cluster = {m.name: _ns("manager.name")}
        for i, r in enumerate(self.regions):
            if r.region in seen_region:
                fail(f"{ns}[{i}].region", r.region, f"{ns}[{seen_region[r.region]}] is in {r.region} too: one "
                     "cluster per region (list a zone's slices under its region's cluster)")
            seen_region.setdefault(r.region, i)
            if r.cluster.name in seen_cluster:
                fail(f"{ns}[{i}].cluster.name", r.cluster.name, f"{seen_cluster[r.cluster.name]} names this cluster "
                     "too: each cluster's name is unique (its node account, Secrets key and MultiKueueCluster are "
                     "named after it)")
            seen_cluster.setdefault(r.cluster.name, f"{ns}[{i}].cluster.name")
            if r.cluster.control_plane.access != "dns":
                # The manager's token job (workloads/multikueue.py) reaches each worker from its own VPC, through
                # the DNS-based endpoint's publicly trusted certificate and IAM; a private IP endpoint is not routable.
                fail(f"{ns}[{i}].cluster.controlPlane.access", r.cluster.control_plane.access, "a region's cluster is "
                     "reached by the manager's MultiKueue through its DNS endpoint; allowed: dns")
        if m.region in seen_region:
            pass  # a manager beside a worker in one region is fine; the manager is never one of its own workers
        self._bucket_place(fail)
        listed = [r.region for r in self.regions]
        for k, j in enumerate(self.jobs):
            key = _ns(f"jobs[{k}].region")
            if j.region is not None and j.region not in listed:
                fail(key, j.region, f"not a region of {ns}; allowed: {', '.join(listed)}")
            elif j.region is None and j.elastic:
                # Kueue v0.19.2 site/content/en/docs/concepts/elastic_workload.md:84 "No Multikueue support".
                fail(key, MISSING, "an elastic job stays in one region: MultiKueue does not dispatch elastic "
                     "workloads (Kueue's elastic workload docs: \"No Multikueue support\"); name the region whose "
                     f"cluster runs it; allowed: {', '.join(listed)}")
            elif j.region is None and not j.queued:
                fail(key, MISSING, "only a queued job (cluster: dedicated, not suspended) goes through the manager: "
                     "a job on a shared RayCluster or held outside Kueue is created in one region; name it; allowed: "
                     f"{', '.join(listed)}")
        self._build_views(fail, info)

    def _bucket_place(self, fail) -> None:
        """One checkpoint bucket every region reads: a dual-region or multi-region holding them all."""
        st, regions_ = self.storage, [r.region for r in self.regions]
        ways = places.bucket_places(regions_)
        shown = "; ".join(w.describe() for w in ways)
        if st.location is None:
            if not ways:
                fail(_ns("storage.location"), MISSING, f"no dual-region or multi-region holds all of {regions_} "
                     "(https://cloud.google.com/storage/docs/locations): jobs resume only from a bucket every "
                     "region reads; pick regions of one continent")
                return
            object.__setattr__(st, "location", ways[0].location)
            object.__setattr__(st, "data_locations", ways[0].data_locations)
            return
        place = places.place_of(st.location, st.data_locations)
        object.__setattr__(st, "location", place.location)
        missing = [r for r in regions_ if not place.contains(r)]
        if missing:
            fail(_ns("storage.location"), st.location, f"{place.describe()} does not hold {missing}: a job resumes "
                 f"in whichever region admits it, from one bucket every region reads; allowed: {shown or 'none'}")

    def _build_views(self, fail, info: ValidationInfo) -> None:
        ctx = info.context or {}
        skip = {"manager", "regions", "dispatch", "zone", "cluster", "network", "slices", "jobs", "prices", "region"}
        base = {f.alias or n: getattr(self, n) for n, f in type(self).model_fields.items() if n not in skip}
        queued = [k for k, j in enumerate(self.jobs) if j.region is None and j.queued and not j.elastic]
        misfit: dict[int, list[tuple[int, Problem]]] = {k: [] for k in queued}

        def view(i: int, r: RegionSite, ks: list[int]) -> tuple[StackSpec | None, list[tuple[int | None, Problem]]]:
            data = {**base, "gcp:region": r.region, "gcp:zone": r.zone, _ns("cluster"): r.cluster,
                    _ns("network"): r.network, _ns("slices"): r.slices, _ns("prices"): r.prices or self.prices,
                    _ns("jobs"): tuple(self.jobs[k].model_copy() for k in ks)}
            sink: list[Problem] = []
            try:
                v = type(self).model_validate(data, context={"problems": sink, "stack_file": ctx.get("stack_file"),
                                                             "view": True})
            except ValueError as e:  # the sections were checked already: only a bug lands here
                sink.append(Problem(f"{ns}[{i}]", r.region, str(e)))
                v = None
            own = ("cluster", "network", "slices") + (("prices",) if r.prices else ())
            out = []
            for p in sink:
                mk = re.match(rf"{re.escape(NS)}:jobs\[(\d+)\]", p.key)
                k = ks[int(mk[1])] if mk and int(mk[1]) < len(ks) else None
                out.append((k, Problem(places.rename(p.key, i, own, dict(enumerate(ks)), NS), p.value, p.message)))
            return v, out

        ns = _ns("regions")
        views: list[StackSpec | None] = []
        fits: dict[str, tuple[int, ...]] = {}
        for i, r in enumerate(self.regions):
            ks = sorted({k for k, j in enumerate(self.jobs) if j.region == r.region} | set(queued))
            v, found = view(i, r, ks)
            bad = {k for k, _ in found if k in misfit}
            for k, p in found:
                if k in misfit:
                    misfit[k].append((i, p))
            if bad:  # the region's view without the queued jobs it cannot run
                v, found = view(i, r, [k for k in ks if k not in bad])
            for _, p in found:
                fail(p.key, p.value, p.message)
            if v is not None:
                v.__dict__["_site"] = (i, r)
            views.append(v)
            for k in queued:
                if k not in bad:
                    fits.setdefault(self.jobs[k].name, ())
                    fits[self.jobs[k].name] += (i,)
        for k in queued:
            if self.jobs[k].name not in fits:
                for i, p in misfit[k]:
                    fail(p.key, p.value, f"fits no region; in {self.regions[i].region} ({self.regions[i].cluster.name})"
                                         f": {p.message}")
        self.__dict__["_views"] = tuple(views)
        self.__dict__["_fits"] = fits

    @property
    def multi_region(self) -> bool:
        return bool(self.regions)

    @property
    def home(self) -> tuple[str, str]:
        """(cluster, region) the stack-wide resources are named after and kept in: the stack's cluster, or a
        multi-region stack's manager (the bulletin topic, the image attestor and its signing key)."""
        if self.multi_region:
            return self.manager.name, self.manager.region
        return self.cluster.name, self.region

    @property
    def site(self) -> RegionSite | None:
        """A region view's region (its place in tpu-multislice:regions); None for a single-region stack."""
        got = self.__dict__.get("_site")
        return got[1] if got else None

    @property
    def site_index(self) -> int | None:
        got = self.__dict__.get("_site")
        return got[0] if got else None

    def region_views(self) -> tuple[StackSpec, ...]:
        """Each region as a single-region stack (its zone, cluster, networks, slices and prices, the jobs it may
        run), in the file's order; a single-region stack is its own only view."""
        if not self.regions:
            return (self,)
        return tuple(v for v in self.__dict__.get("_views", ()) if v is not None)

    def created_here(self) -> tuple[Job, ...]:
        """The jobs whose RayJob is created in this cluster: all of a single-region stack's; in a region view, those
        naming its region (the queued ones are created on the manager and mirrored here by MultiKueue)."""
        if self.site is None:
            return self.jobs
        return tuple(j for j in self.jobs if j.region is not None)

    def placements(self) -> dict[str, tuple[StackSpec, ...]]:
        """Each job queued through the manager -> the region views that can run it, in dispatch order."""
        order = [d.index for d in self.dispatch_order()]
        by_index = {v.site_index: v for v in self.region_views()}
        return {name: tuple(by_index[i] for i in order if i in idx and i in by_index)
                for name, idx in self.__dict__.get("_fits", {}).items()}

    def dispatch_order(self) -> tuple[Dispatch, ...]:
        """The regions in the order the manager's MultiKueueConfig lists them (the incremental dispatcher nominates
        clusters in that order, Kueue v0.19.2 multikueue_types.go:149-160), and why each is where it is.

        ``cost``: cheapest first by the first-choice price per chip-hour of the region's slices (a job's hourly cost
        there is its chips times that), unknown prices last, ties in the listed order; ``listed``: the file's order."""
        out = []
        for v in self.region_views():
            usd = chips = 0.0
            unknown = []
            for s in v.slices:
                p = prices.tpu(s.generation, s.preferred.type, v.region, v.prices.tpu_overrides())
                if p.usd is None:
                    unknown.append(p.key)
                else:
                    usd += p.usd * s.shape.chips
                    chips += s.shape.chips
            rate = None if unknown or not chips else usd / chips
            first = sorted({s.preferred.type for s in v.slices})
            why = (f"${rate:.2f}/chip-hour first choice ({', '.join(first)})" if rate is not None
                   else f"price unknown (set {unknown[0]})")
            out.append(Dispatch(v, v.site_index, rate, why))
        if self.dispatch == "cost":
            out.sort(key=lambda d: (d.usd_per_chip_hour is None, d.usd_per_chip_hour or 0.0, d.index))

            def why(d: Dispatch) -> str:
                if d.usd_per_chip_hour is None:
                    return d.reason + "; after every priced region"
                tie = [o.view.region for o in out if o is not d and o.usd_per_chip_hour == d.usd_per_chip_hour]
                return d.reason + (f"; ties with {', '.join(tie)}: listed order" if tie else "; cheapest first")

            return tuple(Dispatch(d.view, d.index, d.usd_per_chip_hour, why(d)) for d in out)
        return tuple(Dispatch(d.view, d.index, d.usd_per_chip_hour, d.reason + "; listed order (dispatch: listed)")
                     for d in out)

    def _single_region_rules(self, fail, info: ValidationInfo, problems: list[Problem]) -> None:
        for j in self.jobs:
            if j.region is not None and not (info.context or {}).get("view"):
                fail(_ns(f"jobs[{self.jobs.index(j)}].region"), j.region,
                     f"only in a multi-region stack ({_ns('regions')}); this stack runs in gcp:zone {self.zone}")
        self._defaults(fail)
        self._network_rules(fail)
        self._slice_rules(fail)
        if not any(p.key.startswith(_ns("slices")) for p in problems):
            # Jobs are checked against sound slices only: one bad slice gives one error.
            self._job_rules(fail)
            self._checkpoint_rules(fail)
            self._kuberay_rules(fail)
        self._resource_rules(fail)
        self._unverified_rules(fail)
        self._safety_rules(fail, stack_file=bool((info.context or {}).get("stack_file")))
        self._hardening_rules(fail)
        for d in self.derived_names():
            if d.name and (msg := d.rule.check(d.name)):
                fail(d.key, d.name, f"{d.how}: {msg}")

    def _defaults(self, fail) -> None:
        prod = self.prod
        self.cluster.__dict__["location"] = self.zone
        if self.cluster.deletion_protection is None:
            object.__setattr__(self.cluster, "deletion_protection", prod)
        elif prod and not self.cluster.deletion_protection:
            fail(_ns("cluster.deletionProtection"), False, "a production cluster keeps deletion protection on")
        if self.storage.location is None:
            object.__setattr__(self.storage, "location", self.region)
        if self.storage.protected is None:
            object.__setattr__(self.storage, "protected", prod)
        elif prod and not self.storage.protected:
            fail(_ns("storage.protected"), False, "production checkpoints must be protected from deletion")
        if self.image is not None:
            if self.image.location is None:
                object.__setattr__(self.image, "location", self.region)
            if self.image.pusher is None:
                object.__setattr__(self.image, "pusher",
                                   names.ci_account_email("image", self.ci_project))
        primary = self.network.primary
        if primary.network is None:
            object.__setattr__(primary, "network", names.cluster_network(self.cluster.name))
        if primary.subnet is None:
            object.__setattr__(primary, "subnet", names.cluster_subnet(self.cluster.name))
        for i, net in enumerate(self.networks, start=1):
            if net.network is None:
                object.__setattr__(net, "network", names.network_name(self.cluster.name, i))

    def _network_rules(self, fail) -> None:
        c, key = self.cluster, _ns("cluster")
        primary = self.network.primary
        ranges = [(_ns("network.primary.cidr"), primary.cidr)]
        ranges += [(f"{_ns('network.secondary')}[{i}].cidr", n.cidr) for i, n in enumerate(self.networks)]
        ranges += [(f"{key}.{k}", v) for k, v in (("podCidr", c.pod_cidr), ("serviceCidr", c.service_cidr)) if v]
        for i, (k, cidr) in enumerate(ranges):
            for other_key, other in ranges[:i]:
                if ipaddress.ip_network(cidr).overlaps(ipaddress.ip_network(other)):
                    fail(k, cidr, f"overlaps {other} at {other_key}")
        if self.networks and not (c.pod_cidr or c.service_cidr):
            # Pods hold a pod-range address and one on each DCN subnet; GKE would pick the pod and
            # service ranges seeing only the cluster's own VPC.
            fail(f"{key}.podCidr", MISSING, "required with secondary networks (with serviceCidr): private ranges "
                 "away from network.secondary, e.g. 10.100.0.0/14 and 10.104.0.0/20")
        elif bool(c.pod_cidr) != bool(c.service_cidr):
            fail(f"{key}.{'serviceCidr' if c.pod_cidr else 'podCidr'}", MISSING,
                 "podCidr and serviceCidr are pinned together")
        vpcs = [n.network for n in self.networks]
        if primary.network in vpcs:
            fail(_ns("network.primary.network"), primary.network, "the cluster's VPC is not a secondary (DCN) one")
        if primary.subnet in [n.subnet for n in self.networks]:
            fail(_ns("network.primary.subnet"), primary.subnet, "a secondary network has a subnet of this name")
        if len(set(vpcs)) != len(vpcs):
            fail(_ns("network.secondary"), vpcs, "each secondary network needs its own VPC (a NIC per VPC)")
        subnets = [n.subnet for n in self.networks]
        if len(set(subnets)) != len(subnets):  # one project and region: GCP refuses the second
            fail(_ns("network.secondary"), subnets, "each secondary network needs its own subnet name")
        hosts = sum(s.shape.hosts for s in self.slices)
        if hosts + c.system_node_count > limits.usable_addresses(primary.cidr):
            fail(_ns("network.primary.cidr"), primary.cidr, f"{limits.usable_addresses(primary.cidr)} usable "
                 f"addresses, the cluster has {hosts + c.system_node_count} nodes")
        if c.pod_cidr:
            nodes = hosts + c.system_node_count
            room = ipaddress.ip_network(c.pod_cidr).num_addresses // limits.POD_RANGE_PER_NODE
            if nodes > room:
                fail(f"{key}.podCidr", c.pod_cidr, f"holds {room} node(s) at a /24 per node (110 pods), the "
                     f"stack has {nodes}; use a larger range")
        for i, n in enumerate(self.networks):
            # Every host of every slice takes one address on each secondary subnet.
            if hosts > limits.usable_addresses(n.cidr):
                fail(f"{_ns('network.secondary')}[{i}].cidr", n.cidr,
                     f"{limits.usable_addresses(n.cidr)} usable addresses, the slices have {hosts} hosts")
        if self.networks:
            v = gke_version_key(c.version)
            if v and v < gke_version_key(DRANET_MIN_VERSION):
                fail(f"{key}.version", c.version,
                     f"GKE managed DRANET (secondary networks) needs at least {DRANET_MIN_VERSION} on Standard")
            single = [s.name for s in self.slices if not s.shape.multi_host]
            if single:
                fail(_ns("network.secondary"), [n.subnet for n in self.networks],
                     f"additional node networks are for multi-host slices; single-host slices: {single}")

    def _slice_rules(self, fail) -> None:
        if not self.slices:
            fail(_ns("slices"), [], "at least one slice: a list of {name, generation, topology, ...}")
        seen: set[str] = set()
        shapes: dict[str, SliceShape] = {}
        for i, s in enumerate(self.slices):
            if s.name in seen:
                fail(f"{_ns('slices')}[{i}].name", s.name, "slice names must be unique")
            seen.add(s.name)
            if s.group in shapes and shapes[s.group].key != s.shape.key:
                fail(f"{_ns('slices')}[{i}].group", s.group, "a worker group holds slices of one shape only")
            shapes.setdefault(s.group, s.shape)
            # One ComputeClass per worker group: its slices try the same options in the same order.
            first = next(o for o in self.slices if o.group == s.group)
            if s.capacity != first.capacity:
                fail(f"{_ns('slices')}[{i}].capacity", [c.type for c in s.capacity],
                     f"worker group {s.group} selects one ComputeClass: its slices list the same capacity options "
                     f"in the same order as slice {first.name}: {[c.type for c in first.capacity]}")
            self._capacity_rules(i, s, fail)
            if self.zone.startswith(self.region + "-") and (msg := zones.zone_error(self.zone, s.generation)):
                fail(f"{_ns('slices')}[{i}].generation", s.generation, f"gcp:zone {self.zone} {msg}")
            if s.node_pool_auto_creation != first.node_pool_auto_creation:
                fail(f"{_ns('slices')}[{i}].nodePoolAutoCreation", s.node_pool_auto_creation,
                     f"worker group {s.group} selects one ComputeClass: set it as slice {first.name} does")
            if s.node_pool_auto_creation and self.networks:
                # A ComputeClass has no field for additional node networks: auto-created pools get no DCN NICs.
                fail(f"{_ns('slices')}[{i}].nodePoolAutoCreation", True,
                     "auto-created node pools get no additional node networks (network.secondary): the stack "
                     "creates this slice's pools; set nodePoolAutoCreation: false")

    def _capacity_rules(self, i: int, s: Slice, fail) -> None:
        key = f"{_ns('slices')}[{i}].capacity"
        types = [c.type for c in s.capacity]
        for n, c in enumerate(s.capacity[:-1]):
            if c.type == "reservation" and c.affinity == "ANY":
                # GCE: ANY consumes a matching reservation, else runs the VM on demand (cloud rule
                # gce-reservation-any-falls-back-on-demand): the options after it would never be tried first.
                fail(f"{key}[{n}].affinity", "ANY", f"ANY runs on-demand VMs when no reservation matches, so "
                     f"{types[n + 1:]} after it are reached only on an on-demand stock-out: name the reservation "
                     "(affinity: SPECIFIC, reservation: NAME) or make it the last option")
        if self.dranet and s.autoscaled and not self.unverified.dra_scale_from_zero:
            fail(key, types, "with DRANET (network.secondary) every TPU worker claims netdev devices, and these "
                 "pools scale from zero: the cluster autoscaler does that for DRA pods only where GKE models the "
                 "driver's devices on a template node, which it does not document for netdev.google.com "
                 "(unverified; cloud rule ca-dra-scale-from-zero). Keep one option that is not flex-start (the "
                 f"seed's whole slice held), or opt in with {_ns('unverified.draScaleFromZero')}: true")

    def _job_rules(self, fail) -> None:
        available = {g.name: g.replicas for g in self.groups}
        seen: set[str] = set()
        for i, j in enumerate(self.jobs):
            k = f"{_ns('jobs')}[{i}]"
            if j.name in seen:
                fail(f"{k}.name", j.name, "job names must be unique")
            seen.add(j.name)
            if j.group is None and len(available) == 1:
                object.__setattr__(j, "group", next(iter(available)))
            if j.group not in available:
                fail(f"{k}.group", MISSING if j.group is None else j.group,
                     f"{'required with several worker groups' if j.group is None else 'no such worker group'}; "
                     f"allowed: {', '.join(available)}")
                continue
            n = available[j.group]
            key = "maxSlices" if j.elastic else "slices"
            high = (j.max_slices if j.elastic else j.slices) or n
            low = (j.min_slices or 1) if j.elastic else high
            object.__setattr__(j, "slices", high)
            object.__setattr__(j, "min_slices", low)
            if high > n:
                fail(f"{k}.{key}", high, f"worker group {j.group} has only {n} slice(s); allowed: 1..{n}")
                continue
            if low > high:
                fail(f"{k}.minSlices", low, f"must be at most maxSlices ({high})")
                continue
            shape = self.group(j.group).shape
            if msg := tpu.mesh_error("ici", dict(j.ici), shape.chips):
                fail(f"{k}.ici", dict(j.ici), f"ICI mesh must tile the {shape.chips} chips of a {shape.pod_type} "
                     f"slice: {msg}")
            for count in sorted({low, high}):
                if msg := tpu.mesh_error("dcn", dict(j.dcn), count):
                    fail(f"{k}.dcn", dict(j.dcn), f"DCN mesh must tile {count} slice(s): {msg}")
            if not j.elastic and self.group(j.group).spot:
                fail(f"{k}.mode", j.mode, f"worker group {j.group} runs on Spot capacity: jobs there must be "
                     "elastic; allowed: elastic")
        # Running jobs on the shared cluster would queue for the same slices while their
        # activeDeadlineSeconds ticks: the slices they ask for together must exist.
        for group, n in available.items():
            running = [(i, j) for i, j in enumerate(self.jobs)
                       if j.group == group and j.cluster == "shared" and not j.suspend]
            if running and sum(j.slices or 0 for _, j in running) > n:
                i, _ = running[-1]
                fail(f"{_ns('jobs')}[{i}].suspend", False,
                     f"jobs {[j.name for _, j in running]} together ask for "
                     f"{sum(j.slices or 0 for _, j in running)} slice(s) of worker group {group}, which has {n}; "
                     "suspend all but what fits (suspend: true)")

    def _checkpoint_rules(self, fail) -> None:
        """Each job's checkpoint period: as set, the seed's (multislice) or Young/Daly's (elastic)."""
        for i, j in enumerate(self.jobs):
            k = f"{_ns('jobs')}[{i}]"
            if j.group not in {g.name for g in self.groups}:
                continue
            if j.checkpoint_period is not None:
                plan = checkpoints.Plan(j.checkpoint_period, "checkpointPeriod in the stack file")
            elif not j.elastic:
                plan = checkpoints.Plan(checkpoints.SEED_CHECKPOINT_PERIOD,
                                        "the seed's (it sets none: MaxText's default), so a run saves at step 0 "
                                        "and its last step")
            else:
                step = self.step_time(j)
                missing = [key for key, v in (("checkpointSaveSeconds", j.checkpoint_save_seconds),
                                              ("expectedPreemptionIntervalMinutes",
                                               j.expected_preemption_interval_minutes),
                                              ("expectedStepSeconds", step)) if v is None]
                if missing:
                    fail(f"{k}.{missing[0]}", MISSING,
                         f"an elastic job's checkpoint period comes from Young/Daly's rule: set "
                         f"{', '.join(missing)} (MaxText logs each save's and step's seconds), or checkpointPeriod")
                    continue
                plan = checkpoints.elastic_period(j.checkpoint_save_seconds, j.expected_preemption_interval_minutes,
                                                  step[0], step[1], j.steps)
            object.__setattr__(j, "checkpoint_period", plan.period)
            j.__dict__["checkpoint_plan"] = plan

    def _kuberay_rules(self, fail) -> None:
        """The RayJob fields each job needs must exist in the KubeRay release the cluster runs."""
        version = self.ray.kuberay_version
        for i, j in enumerate(self.jobs):
            spec = {"entrypoint": "", "submissionMode": "K8sJobMode", **kuberay.lifecycle(j)}
            for path, since in kuberay.unknown_fields(spec, version):
                key = "jobTtlSeconds" if path.startswith("deletionStrategy") else "name"
                fail(f"{_ns('jobs')}[{i}].{key}", getattr(j, "job_ttl_seconds" if key != "name" else "name"),
                     f"its RayJob needs spec.{path}, which KubeRay {version} (ray.kuberayVersion) does not know "
                     f"(KubeRay {since} or later has it): drop the key, or set ray.kuberayVersion to what the "
                     "cluster runs (a KubeRay installed by its pinned Helm chart where GKE's add-on is older)")

    def _unverified_rules(self, fail) -> None:
        if self.ray.auth == "token" and not self.unverified.ray_token_auth:
            fail(_ns("ray.auth"), "token", "GKE does not publish the KubeRay version of its Ray add-on, and one older "
                 "than 1.5.1 drops authOptions silently (cloud rule gke-ray-addon-kuberay-version): opt in with "
                 f"{_ns('unverified.rayTokenAuth')}: true (the preview lists it as unverified), or leave auth disabled "
                 "as the seed does")

    def _resource_rules(self, fail) -> None:
        """Requests against what the node's machine type leaves for pods."""
        ray, key = self.ray, _ns("ray")
        head = machines.MACHINES[self.cluster.system_machine_type]
        if msg := machines.fits(head, float(limits.quantity(ray.head_cpu)), int(limits.quantity(ray.head_memory))):
            fail(f"{key}.headCpu", {"headCpu": ray.head_cpu, "headMemory": ray.head_memory},
                 f"the Ray head runs on the system pool: {msg}; lower it or raise cluster.systemMachineType")
        self._system_pool_rule(fail)
        for g in self.groups:
            host = machines.MACHINES.get(g.shape.machine_type.name)
            if host and (msg := machines.fits(host, float(limits.quantity(ray.worker_cpu)),
                                               int(limits.quantity(ray.worker_memory)))):
                fail(f"{key}.workerCpu", {"workerCpu": ray.worker_cpu, "workerMemory": ray.worker_memory},
                     f"a worker of group {g.name} runs alone on its TPU host: {msg}")

    def _system_pool_rule(self, fail) -> None:
        """The system pool holds every Ray head (with its GCS FUSE sidecar), every running job's submitter, the
        Kueue controller and GKE's own Deployments at once (cloud rule gke-system-pool-capacity)."""
        ray, c = self.ray, self.cluster
        shared = not self.jobs or any(j.cluster == "shared" for j in self.jobs)
        dedicated = sum(1 for j in self.jobs if j.cluster == "dedicated" and not j.suspend)
        # Each admitted dedicated job holds at least one slice, so no more clusters run than there are slices.
        heads = min(len(self.slices), int(shared) + dedicated)
        submitters = min(len(self.slices), sum(1 for j in self.jobs if not j.suspend))
        sub = machines.SUBMITTER_RESOURCES["requests"]
        parts = [
            (f"{heads} Ray head(s) with GCS FUSE sidecars",
             heads * (float(limits.quantity(ray.head_cpu)) + machines.GCSFUSE_SIDECAR_CPU),
             heads * (int(limits.quantity(ray.head_memory)) + machines.GCSFUSE_SIDECAR_MEMORY)),
            (f"{submitters} job submitter(s)", submitters * float(limits.quantity(sub["cpu"])),
             submitters * int(limits.quantity(sub["memory"]))),
            ("the Kueue controller", machines.KUEUE_CONTROLLER_CPU, machines.KUEUE_CONTROLLER_MEMORY),
            ("GKE's system Deployments", machines.GKE_SYSTEM_CPU, machines.GKE_SYSTEM_MEMORY),
        ]
        cpu, mem = sum(p[1] for p in parts), sum(p[2] for p in parts)
        machine = machines.MACHINES[c.system_machine_type]
        cpu_left, mem_left = machines.pool_left(machine, c.system_node_count)
        if cpu > cpu_left or mem > mem_left:
            need = ", ".join(f"{name} {machines.cores(pc)} CPU/{pm / machines.GIB:.1f}Gi" for name, pc, pm in parts)
            fail(_ns("cluster.systemNodeCount"), c.system_node_count,
                 f"{c.system_node_count} {c.system_machine_type} node(s) leave {machines.cores(cpu_left)} CPU and "
                 f"{mem_left / machines.GIB:.1f}Gi for pods, but the system pool runs {need}: "
                 f"{machines.cores(cpu)} CPU and {mem / machines.GIB:.1f}Gi in all; add a node or a larger "
                 "cluster.systemMachineType")

    def _hardening_rules(self, fail) -> None:
        """Prod keeps the cluster hardening on (dev may turn it off; the policies warn there)."""
        if not self.prod:
            return
        c, key = self.cluster, _ns("cluster")
        if c.release_channel not in PROD_RELEASE_CHANNELS:
            fail(f"{key}.releaseChannel", c.release_channel, "prod enrols in a release channel with GKE's SLA; "
                 f"allowed: {', '.join(PROD_RELEASE_CHANNELS)}")
        if not c.private_nodes:
            fail(f"{key}.privateNodes", False, "prod nodes have no external IPs (egress goes through Cloud NAT)")
        if not c.shielded_nodes:
            fail(f"{key}.shieldedNodes", False, "prod keeps Shielded GKE Nodes on")
        for i, n in enumerate(c.control_plane.authorized_networks):
            if n.public:
                fail(f"{key}.controlPlane.authorizedNetworks[{i}].cidr", n.cidr,
                     "prod keeps the control plane's public endpoint off"
                     + (" and never opens it to the internet" if n.cidr.endswith("/0") else "")
                     + ": use access: dns (IAM) or private ranges")

    def _safety_rules(self, fail, stack_file: bool = False) -> None:
        if self.ci_project == self.project:
            fail(_ns("ciProject"), self.ci_project, "the CI identities and their federation live in a project of their "
                 "own (bootstrap/), never in a stack's project: a stack's deploy must not reach them")
        if not self.prod:
            return
        image = self.ray.image
        if image.endswith((":latest", ":nightly")) or ":nightly-" in image or (":" not in image and "@" not in image):
            fail(_ns("ray.image"), image, f"prod pins a released image (e.g. {DEFAULT_RAY_IMAGE}) or a digest, "
                 "not latest or nightly")
        if self.storage.namespace == "default":
            fail(_ns("storage.namespace"), "default", "prod runs its workloads in a namespace of their own (anyone who "
                 f"may create a pod in default could run as the checkpoint KSA): e.g. {names.DEFAULT_NAMESPACE}, "
                 "which the stack creates with Pod Security labels")
        kms = "pulumi stack change-secrets-provider gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K"
        if self.encryption_salt is not None:
            fail("encryptionsalt", "(passphrase)", f"prod stacks keep secrets with Cloud KMS, not a passphrase: {kms}")
        elif self.secrets_provider is None and stack_file:
            # Without one Pulumi falls back to its service backend's key or a passphrase; neither is the stack's key.
            fail("secretsprovider", MISSING, f"prod stacks keep secrets with their own Cloud KMS key (made by "
                 f"bootstrap/): {kms}")
        elif self.secrets_provider is not None and not self.secrets_provider.startswith("gcpkms://"):
            fail("secretsprovider", self.secrets_provider, "prod stacks keep secrets with Cloud KMS: gcpkms://...")


def config_keys() -> Mapping[str, str]:
    """The stack file's config keys and what each section is, for messages and docs."""
    return {f.alias or n: n for n, f in StackSpec.model_fields.items() if f.alias}
