"""The GKE cluster: control-plane access, maintenance windows and exclusions; the multi-region manager."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from .. import limits, machines, names
from ..gke import (
    EXCLUSION_SCOPES,
    MAX_EXCLUSIONS,
    NO_UPGRADES_MAX_DAYS,
    RELEASE_CHANNELS,
    WINDOW_HOURS_PER_32_DAYS,
    WINDOW_MIN_HOURS,
)
from .network import PrimaryNetwork
from .types import ClusterCidr, ClusterName, GkeVersion, Region, Section, SubnetCidr, at, resolved

CONTROL_PLANE_ACCESS = ("dns", "authorized-networks")
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")


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

    # Resolved (stackspec.defaults): where the cluster is, gcp:zone (the seed's Standard cluster is zonal), or a
    # manager's region (Autopilot clusters are regional).
    location: SkipJsonSchema[str | None] = resolved()


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
    # Standard only; per zone: the manager is regional, its pool in three zones (gke.REGIONAL_NODE_ZONES)
    system_node_count: int = Field(1, ge=1, le=100)
    deletion_protection: bool | None = None  # on in prod unless said otherwise (refused off)
    cidr: SubnetCidr = "10.0.0.0/20"  # its own VPC's node subnet (<name>-vpc, <name>-nodes)
    pod_cidr: ClusterCidr | None = None  # pinned pod and service ranges (secondary ranges of its subnet)
    service_cidr: ClusterCidr | None = None
    control_plane: ControlPlane = Field(default_factory=ControlPlane)
    maintenance: Maintenance = Field(default_factory=Maintenance)

    def as_cluster(self) -> Cluster:
        """The manager as the cluster settings the infra reads (regional: Autopilot clusters are regional)."""
        return Cluster(name=self.name, version=self.version, release_channel=self.release_channel,
                       system_machine_type=self.system_machine_type, system_node_count=self.system_node_count,
                       deletion_protection=self.deletion_protection, control_plane=self.control_plane,
                       maintenance=self.maintenance, pod_cidr=self.pod_cidr,
                       service_cidr=self.service_cidr).model_copy(update={"location": self.region})

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
