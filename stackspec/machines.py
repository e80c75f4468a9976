"""The machine types the project allows, and what GKE leaves of them for pods.

A pod whose requests exceed its node's allocatable never schedules: the Ray head asking
8 CPUs of an ``n1-standard-8`` waits forever. Allocatable follows GKE's documented
reservation ("Standard cluster architecture: node allocatable resources"):

- CPU: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above four;
- memory: 255 MiB on machines under 1 GiB, else 25% of the first 4 GiB, 20% of the next
  4 GiB, 10% of the next 8 GiB, 6% of the next 112 GiB, 2% above 128 GiB; plus the
  kubelet's 100 MiB eviction threshold.

GKE's own DaemonSets (logging, metadata server, netd, CSI drivers) take a little more on
every node; :data:`DAEMONSET_ALLOWANCE_CPU` and :data:`DAEMONSET_ALLOWANCE_MEMORY` keep room
for them. Shapes: Compute Engine's machine-type tables (general-purpose and TPU).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30
GB = 10**9


@dataclass(frozen=True)
class Machine:
    name: str
    vcpus: int
    memory_bytes: int

    @property
    def allocatable_cpu(self) -> float:
        """Cores left for pods after GKE's kubelet and system reservation."""
        c = self.vcpus
        reserved = 0.06 * min(c, 1) + 0.01 * min(max(c - 1, 0), 1) + 0.005 * min(max(c - 2, 0), 2)
        reserved += 0.0025 * max(c - 4, 0)
        return c - reserved

    @property
    def allocatable_memory(self) -> int:
        m = self.memory_bytes
        if m < GIB:
            return m - 255 * 2**20
        tiers = ((4 * GIB, 0.25), (4 * GIB, 0.20), (8 * GIB, 0.10), (112 * GIB, 0.06))
        reserved, left = 0.0, m
        for size, share in tiers:
            take = min(left, size)
            reserved += take * share
            left -= take
        reserved += left * 0.02
        return int(m - reserved - 100 * 2**20)


def _m(name: str, vcpus: int, gb: float, gib: bool = False) -> Machine:
    return Machine(name, vcpus, int(gb * (GIB if gib else GB)))


MACHINES: dict[str, Machine] = {
    m.name: m
    for m in (
        # General purpose, for the system pool (Ray head, operators). n1 memory in GB.
        _m("n1-standard-4", 4, 15), _m("n1-standard-8", 8, 30), _m("n1-standard-16", 16, 60),
        _m("n1-standard-32", 32, 120),
        _m("n2-standard-8", 8, 32, gib=True), _m("n2-standard-16", 16, 64, gib=True),
        _m("n2-standard-32", 32, 128, gib=True),
        _m("e2-standard-8", 8, 32, gib=True), _m("e2-standard-16", 16, 64, gib=True),
        # TPU hosts. ct6e as Compute Engine lists them (data/machine_regions.csv, gcloud's MEMORY_GB is GiB): the
        # 1-chip host has 176 GiB (not 448) and the 8-chip host 360 vCPUs.
        _m("ct6e-standard-1t", 44, 176, gib=True), _m("ct6e-standard-4t", 180, 720, gib=True),
        _m("ct6e-standard-8t", 360, 1440, gib=True),
        _m("ct5lp-hightpu-1t", 24, 48, gib=True), _m("ct5lp-hightpu-4t", 112, 192, gib=True),
        _m("ct5lp-hightpu-8t", 224, 384, gib=True),
        _m("ct5p-hightpu-4t", 208, 448, gib=True),
        _m("ct4p-hightpu-4t", 240, 407, gib=True),
        _m("tpu7x-standard-4t", 224, 960, gib=True),
    )
}
SYSTEM_MACHINES = tuple(n for n in MACHINES if not n.startswith(("ct", "tpu")))

# Room kept on every node for GKE's DaemonSets (fluentbit, gke-metadata-server, netd,
# CSI node plugins), which request about this much in total on a Standard node.
DAEMONSET_ALLOWANCE_CPU = 0.4
DAEMONSET_ALLOWANCE_MEMORY = 768 * 2**20

# The GCS FUSE CSI sidecar injected into each pod that mounts the bucket: its default
# requests (gke-gcsfuse/cpu-request, memory-request) count against the node too.
GCSFUSE_SIDECAR_CPU = 0.25
GCSFUSE_SIDECAR_MEMORY = 256 * 2**20


# Besides the Ray heads, the system pool runs (requests, as each is installed):
# - KubeRay's submitter pod of each running RayJob (K8sJobMode; workloads/manifests.py renders it with these);
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "200Mi"}}
# - the Kueue controller manager (chart values.yaml at v0.19.2, controllerManager.manager.resources.requests);
KUEUE_CONTROLLER_CPU, KUEUE_CONTROLLER_MEMORY = 0.5, 512 * 2**20
# - GKE's own Deployments (kube-dns and its autoscaler, metrics-server, konnectivity agents, event exporter,
#   default backend), which land on whichever pool has room: about this much in all on a small cluster.
GKE_SYSTEM_CPU, GKE_SYSTEM_MEMORY = 0.5, 512 * 2**20


def pool_left(machine: Machine, nodes: int) -> tuple[float, int]:
    """CPU and memory a pool of ``nodes`` leaves for pods once GKE's DaemonSets run on each node."""
    return (nodes * (machine.allocatable_cpu - DAEMONSET_ALLOWANCE_CPU),
            nodes * (machine.allocatable_memory - DAEMONSET_ALLOWANCE_MEMORY))


def fits(machine: Machine, cpu: float, memory: int, sidecar: bool = True) -> str | None:
    """Why a pod requesting ``cpu`` cores and ``memory`` bytes cannot run on ``machine``, or None."""
    cpu_left = machine.allocatable_cpu - DAEMONSET_ALLOWANCE_CPU - (GCSFUSE_SIDECAR_CPU if sidecar else 0)
    mem_left = machine.allocatable_memory - DAEMONSET_ALLOWANCE_MEMORY - (GCSFUSE_SIDECAR_MEMORY if sidecar else 0)
    problems = []
    if cpu > cpu_left:
        problems.append(f"{cores(cpu)} CPU asked, at most {cores(cpu_left)} of a {machine.name} "
                        f"({machine.vcpus} vCPU, {cores(machine.allocatable_cpu)} allocatable) are left for it")
    if memory > mem_left:
        problems.append(f"{memory / GIB:.1f}Gi memory asked, at most {mem_left / GIB:.1f}Gi of a {machine.name} "
                        f"({machine.memory_bytes / GIB:.0f}Gi, {machine.allocatable_memory / GIB:.1f}Gi "
                        "allocatable) is left for it")
    return "; ".join(problems) or None


def cores(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")
