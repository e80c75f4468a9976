"""Slices against each other, their worker groups, their zone and their capacity options."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import zones
from ..model.slices import Slice
from ..model.types import _ns
from ..tpu import SliceShape
from . import gke, kueue

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail) -> None:
    if not spec.slices:
        fail(_ns("slices"), [], "at least one slice: a list of {name, generation, topology, ...}")
    seen: set[str] = set()
    shapes: dict[str, SliceShape] = {}
    for i, s in enumerate(spec.slices):
        if s.name in seen:
            fail(f"{_ns('slices')}[{i}].name", s.name, "slice names must be unique")
        seen.add(s.name)
        if s.group in shapes and shapes[s.group].key != s.shape.key:
            fail(f"{_ns('slices')}[{i}].group", s.group, "a worker group holds slices of one shape only")
        shapes.setdefault(s.group, s.shape)
        # One ComputeClass per worker group: its slices try the same options in the same order.
        first = next(o for o in spec.slices if o.group == s.group)
        if s.capacity != first.capacity:
            fail(f"{_ns('slices')}[{i}].capacity", [c.type for c in s.capacity],
                 f"worker group {s.group} selects one ComputeClass: its slices list the same capacity options "
                 f"in the same order as slice {first.name}: {[c.type for c in first.capacity]}")
        capacity(spec, i, s, fail)
        if spec.zone.startswith(spec.region + "-") and (msg := zones.zone_error(spec.zone, s.generation)):
            fail(f"{_ns('slices')}[{i}].generation", s.generation, f"gcp:zone {spec.zone} {msg}")
        if msg := gke.flex_start_zone(s.generation, spec.zone, [c.type for c in s.capacity]):
            fail(f"{_ns('slices')}[{i}].capacity", [c.type for c in s.capacity], msg)
        if s.node_pool_auto_creation != first.node_pool_auto_creation:
            fail(f"{_ns('slices')}[{i}].nodePoolAutoCreation", s.node_pool_auto_creation,
                 f"worker group {s.group} selects one ComputeClass: set it as slice {first.name} does")
        if s.node_pool_auto_creation and spec.networks:
            # A ComputeClass has no field for additional node networks: auto-created pools get no DCN NICs.
            fail(f"{_ns('slices')}[{i}].nodePoolAutoCreation", True,
                 "auto-created node pools get no additional node networks (network.secondary): the stack "
                 "creates this slice's pools; set nodePoolAutoCreation: false")


def capacity(spec: StackSpec, i: int, s: Slice, fail) -> None:
    key = f"{_ns('slices')}[{i}].capacity"
    types = [c.type for c in s.capacity]
    if msg := kueue.queued_provisioning_alone(s.capacity):
        fail(key, types, msg)
    for n, c in enumerate(s.capacity[:-1]):
        if c.type == "reservation" and c.affinity == "ANY":
            # GCE: ANY consumes a matching reservation, else runs the VM on demand (cloud rule
            # gce-reservation-any-falls-back-on-demand): the options after it would never be tried first.
            fail(f"{key}[{n}].affinity", "ANY", f"ANY runs on-demand VMs when no reservation matches, so "
                 f"{types[n + 1:]} after it are reached only on an on-demand stock-out: name the reservation "
                 "(affinity: SPECIFIC, reservation: NAME) or make it the last option")
    if spec.dranet and s.autoscaled and not spec.unverified.dra_scale_from_zero:
        fail(key, types, "with DRANET (network.secondary) every TPU worker claims netdev devices, and these "
             "pools scale from zero: the cluster autoscaler does that for DRA pods only where GKE models the "
             "driver's devices on a template node, which it does not document for netdev.google.com "
             "(unverified; cloud rule ca-dra-scale-from-zero). Keep one option that is not flex-start (the "
             f"seed's whole slice held), or opt in with {_ns('unverified.draScaleFromZero')}: true")
