"""A slice (a node pool per capacity option), its capacity options, and a Ray worker group of slices of one shape."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

from .. import limits, names, tpu
from ..gke import FLEX_START_MAX_RUN_SECONDS, FLEX_START_MIN_RUN_SECONDS
from ..tpu import SliceError, SliceShape
from .types import GroupName, NodePoolName, ProjectId, Section, at

CAPACITY_TYPES = ("on-demand", "spot", "reservation", "flex-start")
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
            affinity = self.affinity or "SPECIFIC"  # the resolve step sets it (stackspec.defaults)
            if affinity == "SPECIFIC" and not self.reservation:
                raise at("reservation", "required when type is reservation with SPECIFIC affinity")
            if self.reservation and (msg := limits.reservation_name(self.reservation)):
                raise at("reservation", msg)
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
    group: GroupName | None = None  # the Ray worker group; by default one per shape (resolved: its name)
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
            tpu.resolve(self.generation, self.topology, self.machine_type)
        except SliceError as e:
            gen = tpu.GENERATIONS[self.generation]
            key = "machineType" if self.machine_type and self.topology in gen.topologies else "topology"
            raise at(key, str(e)) from None
        return self

    @cached_property
    def shape(self) -> SliceShape:
        return tpu.resolve(self.generation, self.topology, self.machine_type)


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
