"""Requests against what a node's machine type leaves for pods (GKE's allocatable, stackspec.machines)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import limits, machine_regions, machines, zones
from ..model.types import _ns

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail) -> None:
    """Requests against what the node's machine type leaves for pods."""
    ray, key = spec.ray, _ns("ray")
    head = machines.MACHINES[spec.cluster.system_machine_type]
    if msg := machines.fits(head, float(limits.quantity(ray.head_cpu)), int(limits.quantity(ray.head_memory))):
        fail(f"{key}.headCpu", {"headCpu": ray.head_cpu, "headMemory": ray.head_memory},
             f"the Ray head runs on the system pool: {msg}; lower it or raise cluster.systemMachineType")
    system_pool(spec, fail)
    offered(spec, fail)
    for g in spec.groups:
        host = machines.MACHINES.get(g.shape.machine_type.name)
        if host and (msg := machines.fits(host, float(limits.quantity(ray.worker_cpu)),
                                           int(limits.quantity(ray.worker_memory)))):
            fail(f"{key}.workerCpu", {"workerCpu": ray.worker_cpu, "workerMemory": ray.worker_memory},
                 f"a worker of group {g.name} runs alone on its TPU host: {msg}")


def system_pool(spec: StackSpec, fail) -> None:
    """The system pool holds every Ray head (with its GCS FUSE sidecar), every running job's submitter, the
    Kueue controller and GKE's own Deployments at once (cloud rule gke-system-pool-capacity)."""
    ray, c = spec.ray, spec.cluster
    shared = not spec.jobs or any(j.cluster == "shared" for j in spec.jobs)
    dedicated = sum(1 for j in spec.jobs if j.cluster == "dedicated" and not j.suspend)
    # Each admitted dedicated job holds at least one slice, so no more clusters run than there are slices.
    heads = min(len(spec.slices), int(shared) + dedicated)
    submitters = min(len(spec.slices), sum(1 for j in spec.jobs if not j.suspend))
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


def offered(spec: StackSpec, fail) -> None:
    """Every machine type the cluster's pools name is offered in its zone (cloud rule
    gce-zone-offers-machine-type): Compute Engine refuses a pool's VMs otherwise, at ``up``, half applied."""
    c = spec.cluster
    if msg := machine_regions.error(c.system_machine_type, spec.zone):
        here = [n for n in machines.SYSTEM_MACHINES if machine_regions.offered(n, spec.zone)]
        fail(_ns("cluster.systemMachineType"), c.system_machine_type, f"{msg}; allowed here: {', '.join(here)}")
    for i, s in enumerate(spec.slices):
        name = s.shape.machine_type.name
        # A zone that does not offer the generation is refused once, by the slices' zone rule.
        if not zones.zone_error(spec.zone, s.generation) and (msg := machine_regions.error(name, spec.zone)):
            fail(f"{_ns('slices')}[{i}].machineType", name, msg)
