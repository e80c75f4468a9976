"""The TPU slice model: the single source of truth for slice math.

Everything that depends on a slice's shape (node counts, ``numOfHosts``,
``google.com/tpu``, Ray worker counts, MaxText parallelism, GKE labels) is
derived here and nowhere else: infra, workloads, policies and the CLI all call
:func:`resolve`.

Facts follow GKE's "Plan TPUs in GKE" tables and Ray's TPU accelerator manager
(``ray._private.accelerators.tpu``): pod-type names count TensorCores for the
generations with two cores per chip (v4, v5p, tpu7x) and chips otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

# GKE node labels the TPU device plugin and the KubeRay TPU webhook key on.
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_RESOURCE = "google.com/tpu"
DRANET_LABEL = "cloud.google.com/gke-networking-dra-driver"


class SliceError(ValueError):
    """A slice description that no TPU generation offers."""


@dataclass(frozen=True)
class MachineType:
    name: str
    chips_per_host: int
    # Topologies this machine type serves; None means "any multi-host topology
    # of the generation whose chip count is a multiple of chips_per_host".
    topologies: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Generation:
    name: str  # as written in a stack spec: v6e, v5e, v5p, v4, tpu7x
    gke_accelerator: str  # value of cloud.google.com/gke-tpu-accelerator
    ray_accelerator_type: str  # Ray's accelerator_type, e.g. TPU-V6E
    pod_type_prefix: str  # Ray's ray.io/tpu-pod-type prefix, e.g. v6e
    cores_per_chip: int  # pod-type names count cores: v5p-8 is 4 chips
    topologies: tuple[str, ...]
    machine_types: tuple[MachineType, ...]

    def machine_type(self, name: str) -> MachineType:
        for mt in self.machine_types:
            if mt.name == name:
                return mt
        raise SliceError(
            f"machine type {name!r} is not a {self.name} machine type; "
            f"allowed: {', '.join(m.name for m in self.machine_types)}"
        )


def _grid(*dims: str) -> tuple[str, ...]:
    return tuple(dims)


_V6E_V5E_TOPOLOGIES = _grid("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_CUBE_TOPOLOGIES = _grid(
    "2x2x1",
    "2x2x2",
    "2x2x4",
    "2x4x4",
    "4x4x4",
    "4x4x8",
    "4x8x8",
    "8x8x8",
    "8x8x16",
    "8x16x16",
)

GENERATIONS: dict[str, Generation] = {
    g.name: g
    for g in (
        Generation(
            name="v6e",
            gke_accelerator="tpu-v6e-slice",
            ray_accelerator_type="TPU-V6E",
            pod_type_prefix="v6e",
            cores_per_chip=1,
            topologies=_V6E_V5E_TOPOLOGIES,
            machine_types=(
                MachineType("ct6e-standard-1t", 1, ("1x1",)),
                MachineType("ct6e-standard-4t", 4),
                MachineType("ct6e-standard-8t", 8, ("2x4",)),
            ),
        ),
        Generation(
            name="v5e",
            gke_accelerator="tpu-v5-lite-podslice",
            ray_accelerator_type="TPU-V5LITEPOD",
            pod_type_prefix="v5litepod",
            cores_per_chip=1,
            topologies=_V6E_V5E_TOPOLOGIES,
            machine_types=(
                MachineType("ct5lp-hightpu-1t", 1, ("1x1",)),
                MachineType("ct5lp-hightpu-4t", 4),
                MachineType("ct5lp-hightpu-8t", 8, ("2x4",)),
            ),
        ),
        Generation(
            name="v5p",
            gke_accelerator="tpu-v5p-slice",
            ray_accelerator_type="TPU-V5P",
            pod_type_prefix="v5p",
            cores_per_chip=2,
            topologies=_CUBE_TOPOLOGIES + ("16x16x16", "16x16x24"),
            machine_types=(MachineType("ct5p-hightpu-4t", 4),),
        ),
        Generation(
            name="v4",
            gke_accelerator="tpu-v4-podslice",
            ray_accelerator_type="TPU-V4",
            pod_type_prefix="v4",
            cores_per_chip=2,
            topologies=_CUBE_TOPOLOGIES + ("16x16x16",),
            machine_types=(MachineType("ct4p-hightpu-4t", 4),),
        ),
        Generation(
            name="tpu7x",
            gke_accelerator="tpu7x",
            ray_accelerator_type="TPU-V7X",
            pod_type_prefix="v7x",
            cores_per_chip=2,
            topologies=_CUBE_TOPOLOGIES,
            machine_types=(MachineType("tpu7x-standard-4t", 4),),
        ),
    )
}


@dataclass(frozen=True)
class SliceShape:
    """One TPU slice: what GKE provisions as one node pool."""

    generation: Generation
    topology: str
    machine_type: MachineType
    chips: int
    hosts: int

    @property
    def chips_per_host(self) -> int:
        return self.machine_type.chips_per_host

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def pod_type(self) -> str:
        """Ray's ``ray.io/tpu-pod-type`` / Cloud TPU accelerator type, e.g. ``v6e-16``."""
        return f"{self.generation.pod_type_prefix}-{self.chips * self.generation.cores_per_chip}"

    @property
    def ray_accelerator_type(self) -> str:
        return self.generation.ray_accelerator_type

    @property
    def gke_accelerator(self) -> str:
        return self.generation.gke_accelerator

    @property
    def node_selector(self) -> dict[str, str]:
        """The labels GKE puts on every node of this slice's node pool."""
        return {ACCELERATOR_LABEL: self.gke_accelerator, TOPOLOGY_LABEL: self.topology}

    @property
    def key(self) -> tuple[str, str, str]:
        """Slices with the same key are interchangeable: one Ray worker group."""
        return (self.generation.name, self.topology, self.machine_type.name)

    @property
    def group_name(self) -> str:
        """A DNS-safe worker-group name for this shape, e.g. ``tpu-v6e-4x4``."""
        suffix = "" if self.machine_type is _default_machine(self) else f"-{self.chips_per_host}t"
        return f"tpu-{self.generation.name}-{self.topology}{suffix}"

    def workers(self, slices: int) -> int:
        """Ray Train workers (one per host) for ``slices`` slices of this shape."""
        return slices * self.hosts


def topology_chips(topology: str) -> int:
    try:
        dims = [int(d) for d in topology.split("x")]
    except ValueError:
        raise SliceError(f"topology {topology!r} is not of the form AxB or AxBxC") from None
    if not dims or any(d < 1 for d in dims):
        raise SliceError(f"topology {topology!r} is not of the form AxB or AxBxC")
    return prod(dims)


def generation(name: str) -> Generation:
    try:
        return GENERATIONS[name]
    except KeyError:
        raise SliceError(f"TPU generation {name!r} is unknown; allowed: {', '.join(GENERATIONS)}") from None


def _fits(mt: MachineType, gen: Generation, topology: str) -> bool:
    if mt.topologies is not None:
        return topology in mt.topologies
    chips = topology_chips(topology)
    # A general machine type serves its single-host shape and every multi-host
    # topology it divides; the dedicated 1-chip and 8-chip hosts take the rest.
    return chips >= mt.chips_per_host and chips % mt.chips_per_host == 0


def machine_types_for(gen: Generation, topology: str) -> tuple[str, ...]:
    return tuple(mt.name for mt in gen.machine_types if _fits(mt, gen, topology))


def _default_machine(shape: SliceShape) -> MachineType:
    return next(mt for mt in shape.generation.machine_types if mt.topologies is None)


def resolve(generation_name: str, topology: str, machine_type: str | None = None) -> SliceShape:
    """Resolve a slice description into its full shape, or raise :class:`SliceError`.

    ``machine_type`` may be omitted when the topology allows only one.
    """
    gen = generation(generation_name)
    if topology not in gen.topologies:
        raise SliceError(f"topology {topology!r} is not offered for {gen.name}; allowed: {', '.join(gen.topologies)}")
    fitting = machine_types_for(gen, topology)
    if machine_type is None:
        if len(fitting) != 1:
            raise SliceError(
                f"{gen.name} topology {topology} needs an explicit machine type; allowed: {', '.join(fitting)}"
            )
        machine_type = fitting[0]
    mt = gen.machine_type(machine_type)
    if machine_type not in fitting:
        raise SliceError(
            f"machine type {machine_type!r} does not fit {gen.name} topology {topology}; allowed: {', '.join(fitting)}"
        )
    chips = topology_chips(topology)
    return SliceShape(gen, topology, mt, chips, chips // mt.chips_per_host)


def from_node_labels(accelerator: str, topology: str, chips_per_host: int) -> SliceShape:
    """The shape behind a pair of GKE node labels and a per-host chip count.

    Used by policies that only see a worker group's node selector and its
    ``google.com/tpu`` request.
    """
    for gen in GENERATIONS.values():
        if gen.gke_accelerator == accelerator:
            for mt in gen.machine_types:
                if mt.chips_per_host == chips_per_host and _fits(mt, gen, topology):
                    return resolve(gen.name, topology, mt.name)
            if topology not in gen.topologies:
                raise SliceError(
                    f"topology {topology!r} is not offered for {gen.name}; allowed: {', '.join(gen.topologies)}"
                )
            raise SliceError(
                f"{gen.name} topology {topology} has no host with {chips_per_host} chips; "
                f"allowed: {', '.join(str(m.chips_per_host) for m in gen.machine_types if _fits(m, gen, topology))}"
            )
    raise SliceError(
        f"GKE accelerator {accelerator!r} is unknown; allowed: "
        f"{', '.join(g.gke_accelerator for g in GENERATIONS.values())}"
    )


def from_machine_type(machine_type: str, topology: str) -> SliceShape:
    """The shape of a node pool, from its machine type and ``tpuTopology``."""
    for gen in GENERATIONS.values():
        if any(mt.name == machine_type for mt in gen.machine_types):
            return resolve(gen.name, topology, machine_type)
    raise SliceError(f"machine type {machine_type!r} is not a TPU machine type")


def is_tpu_machine_type(machine_type: str) -> bool:
    return machine_type in _TPU_MACHINE_TYPES


# Every TPU machine type of the table, for the rules that ask of each node pool (thousands at scale).
_TPU_MACHINE_TYPES = frozenset(mt.name for gen in GENERATIONS.values() for mt in gen.machine_types)


# MaxText mesh axes and their defaults in MaxText 0.2.1's base.yml: -1 means
# "auto-shard whatever is left" (ICI: fsdp, DCN: data).
MESH_AXES = (
    "diloco",
    "data",
    "fsdp",
    "fsdp_transpose",
    "sequence",
    "context",
    "context_autoregressive",
    "tensor",
    "tensor_transpose",
    "tensor_sequence",
    "autoregressive",
    "pipeline",
    "expert",
)
MAXTEXT_DEFAULTS = {"ici": {"fsdp": -1}, "dcn": {"data": -1}}


def mesh_error(level: str, axes: dict[str, int], target: int) -> str | None:
    """Why a MaxText ``ici_*``/``dcn_*`` assignment cannot tile ``target`` devices, or None.

    ``level`` is ``ici`` (target: chips per slice) or ``dcn`` (target: slices).
    Unset axes take MaxText's defaults; at most one axis may be -1 (auto).
    """
    merged = {a: 1 for a in MESH_AXES} | MAXTEXT_DEFAULTS[level] | dict(axes)
    unknown = sorted(set(axes) - set(MESH_AXES))
    if unknown:
        return f"unknown {level} axes {unknown}; allowed: {', '.join(MESH_AXES)}"
    auto = [a for a, v in merged.items() if v == -1]
    bad = [a for a, v in merged.items() if v != -1 and v < 1]
    if bad:
        return f"{level} axes {bad} must be positive or -1"
    if len(auto) > 1:
        return f"only one {level} axis may be -1 (auto), got {auto}"
    fixed = prod(v for v in merged.values() if v != -1)
    desc = " x ".join(f"{level}_{a}_parallelism={v}" for a, v in merged.items() if v != 1)
    if auto and target % fixed:
        return f"{desc or 'the fixed axes'} (product {fixed}) does not divide {target}"
    if not auto and fixed != target:
        return f"{desc or 'every axis 1'} gives {fixed}, must be {target}"
    return None


def table() -> list[SliceShape]:
    """Every (generation, topology, machine type) GKE offers, for docs and tests."""
    return [
        resolve(gen.name, topo, mt)
        for gen in GENERATIONS.values()
        for topo in gen.topologies
        for mt in machine_types_for(gen, topo)
    ]
