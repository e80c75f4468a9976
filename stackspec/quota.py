"""TPU quota: the chips each quota type must allow, per region and generation, against what the stack declares.

A GCP project's TPU quota is per region, per TPU generation and per quota type. Cloud TPU's quota page: "There are
different quotas for each version of TPU ... For each version of TPU there are different types of quota: on-demand
and preemptible (spot)" (https://cloud.google.com/tpu/docs/quota). Flex-start draws on the preemptible one: "You
should also ensure you have sufficient preemptible quota to use Flex-start. The default preemptible quota for TPU v5e
and v6e is 64 cores." (https://cloud.google.com/tpu/docs/request-using-flex-start). GKE's TPU nodes count against the
Compute Engine API's TPU quotas of the same kinds (https://cloud.google.com/tpu/docs/consumption-options, read in its
Chinese edition). docs/quota.md says how to read and raise them.

A slice may land on any capacity option it lists (GKE tries them in order), so each quota type must allow the chips of
every slice listing an option that draws on it: on-demand -> ``onDemand``, spot and flex-start -> ``preemptible``, a
named reservation -> ``reserved`` (checked only when declared). The optional ``tpu-multislice:quota`` section declares
what the project has, in chips (a v4, v5p or tpu7x quota written in TensorCores is twice the chips)::

    tpu-multislice:quota:
      - region: us-east5        # default: gcp:region
        generation: v6e
        onDemand: 64
        preemptible: 128

Declared, every region and generation the slices use must be listed and cover them (lint refuses otherwise);
undeclared, the preview and ``slicectl cost`` print what is needed and warn that nothing checked it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from . import gke, machines, tpu

NS = "tpu-multislice"
# Capacity type -> the quota type it draws on (and the spec key that declares it).
QUOTA_TYPE = {"on-demand": "onDemand", "spot": "preemptible", "flex-start": "preemptible", "reservation": "reserved"}
LABEL = {"onDemand": "on-demand", "preemptible": "preemptible (spot, flex-start)", "reserved": "reserved"}
DOC = "docs/quota.md"
SOURCES = {
    "types": "https://cloud.google.com/tpu/docs/quota",
    "flex-start": "https://cloud.google.com/tpu/docs/request-using-flex-start",
    "gke": "https://cloud.google.com/tpu/docs/consumption-options",
}


# GCP's default quota of a new project, in chips, where a source states it (docs/quota.md "GCP's defaults"):
# preemptible v5e and v6e, "The default preemptible quota for TPU v5e and v6e is 64 cores" (one TensorCore per chip;
# SOURCES["flex-start"]); on-demand, "Default value: v3-8 and v2-8: 16 TensorCores; All others: 0" (SOURCES["types"]).
DEFAULT_CHIPS = {("preemptible", "v5e"): 64, ("preemptible", "v6e"): 64,
                 **{("onDemand", g): 0 for g in tpu.GENERATIONS if g in ("v5e", "v6e", "v5p", "tpu7x")}}


class QuotaEntry(BaseModel):
    """One region's quota of one TPU generation, in chips (unset: not declared, not checked)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
                              allow_inf_nan=False)

    region: str | None = None  # default: gcp:region
    generation: Literal[tuple(tpu.GENERATIONS)] = "v6e"
    on_demand: int | None = Field(None, ge=0)
    preemptible: int | None = Field(None, ge=0)
    reserved: int | None = Field(None, ge=0)
    # The region's Compute Engine CPUs quota (``CPUS``), in vCPUs: checked against the system pools (cpu_needs).
    cpus: int | None = Field(None, ge=0)


@dataclass
class Need:
    """The chips one quota type must allow in one region for one generation, and the slices that need them."""

    region: str
    generation: str
    quota_type: str  # onDemand, preemptible, reserved
    chips: int = 0
    slices: list[str] = field(default_factory=list)
    declared: int | None = None

    @property
    def short(self) -> int | None:
        """Chips missing from the declared quota (None when none is declared)."""
        return None if self.declared is None else max(0, self.chips - self.declared)


def _option_types(slice_: Any) -> list[str]:
    cap = slice_.capacity
    items = cap if isinstance(cap, list | tuple) else getattr(cap, "options", None) or [cap]
    return [getattr(c, "type", c) for c in items]


def entries(spec: Any) -> dict[tuple[str, str], int]:
    """(region, generation) -> the index of its entry in ``spec.quota``: the last one declaring chips. An entry
    declaring only ``cpus`` (its generation left at the default) stands in only where none declares chips, so a
    region's CPUs entry of its own does not hide its TPU entry."""
    out: dict[tuple[str, str], int] = {}
    for i, e in enumerate(spec.quota):
        key = (e.region or spec.region, e.generation)
        if key not in out or _declares_chips(e) or not _declares_chips(spec.quota[out[key]]):
            out[key] = i
    return out


def _declares_chips(e: QuotaEntry) -> bool:
    return any(v is not None for v in (e.on_demand, e.preemptible, e.reserved))


def needs(spec: Any) -> list[Need]:
    """What every region's slices need of each quota type, in region, generation, type order; with the declared
    quota where there is one."""
    out: dict[tuple[str, str, str], Need] = {}
    for view in spec.region_views():
        for s in view.slices or ():
            gen = s.shape.generation.name
            for qtype in dict.fromkeys(QUOTA_TYPE[t] for t in _option_types(s)):
                n = out.setdefault((view.region, gen, qtype), Need(view.region, gen, qtype))
                n.chips += s.shape.chips
                n.slices.append(s.name)
    declared = entries(spec)
    for (region, gen, qtype), n in out.items():
        e = spec.quota[declared[region, gen]] if (region, gen) in declared else None
        if e is not None:
            n.declared = getattr(e, {"onDemand": "on_demand"}.get(qtype, qtype))
    return list(out.values())


# The system pools' VMs draw on the region's Compute Engine CPUs quota (``CPUS``: the vCPUs of a project's VMs in
# a region; https://cloud.google.com/compute/resource-usage, paraphrased). Only the N1 series' do: the API's regional
# quota metrics list ``CPUS`` ("Guest CPUs") beside a family's own, ``N2_CPUS`` and ``E2_CPUS`` among them
# (https://cloud.google.com/dotnet/docs/reference/Google.Cloud.Compute.V1/latest/Google.Cloud.Compute.V1.Quota.Types.Metric),
# so an n2 or e2 pool is not counted against the declared ``cpus`` (whose family quota it is, unverified here).
# A regional Standard cluster runs each pool in three zones (stackspec.gke.REGIONAL_NODE_ZONES), and so needs more
# of it: "Using regional clusters requires more of your project's regional quotas" and "the default configuration,
# which replicates each node pool across three zones of the control plane's region"
# (https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters, English editions, verbatim).
# TPU hosts are left out: they draw on the TPU quota above, and whether their vCPUs count against CPUS too is not
# stated in a source read here. An Autopilot manager has no pool of the stack's to count.
CPUS_FAMILIES = ("n1-",)


def cpu_needs(spec: Any) -> dict[str, tuple[int, list[str]]]:
    """Region -> the vCPUs of Compute Engine's CPUs quota the stack's system pools hold there (an N1 pool's), and
    what holds them: each region's cluster (zonal: its pool in one zone) and a Standard manager (regional: its pool
    in each of its region's zones)."""
    pools = [(v.region, v.cluster.system_machine_type, v.cluster.system_node_count,
              1 if _is_zone(v.cluster.location or v.zone) else gke.REGIONAL_NODE_ZONES, v.cluster.name)
             for v in spec.region_views()]
    m = spec.manager
    if m is not None and not m.autopilot:
        pools.append((m.region or spec.region, m.system_machine_type, m.system_node_count, gke.REGIONAL_NODE_ZONES,
                      m.name))
    out: dict[str, tuple[int, list[str]]] = {}
    for region, machine, nodes, zones, name in pools:
        if not machine.startswith(CPUS_FAMILIES):
            continue  # its family's own quota, not CPUS (above)
        vcpus = machines.MACHINES[machine].vcpus * nodes * zones
        total, what = out.get(region, (0, []))
        where = f" in each of {zones} zones" if zones > 1 else ""
        out[region] = (total + vcpus, [*what, f"{name}: {nodes} x {machine}{where}, {vcpus} vCPUs"])
    return out


def _is_zone(location: str) -> bool:
    """``us-east5-b`` (a zone), not ``us-east5`` (a region)."""
    return location.count("-") >= 2


def slices_text(n: Need) -> str:
    names = n.slices if len(n.slices) <= 3 else [*n.slices[:2], f"… {n.slices[-1]}"]
    return f"{len(n.slices)} slice{'s' if len(n.slices) != 1 else ''} ({', '.join(names)})"


def rows(spec: Any) -> list[list[str]]:
    """The quota table: region, generation, quota type, chips needed, declared, slices."""
    return [[n.region, n.generation, LABEL[n.quota_type], str(n.chips),
             "not declared" if n.declared is None else str(n.declared) + (f" (short {n.short})" if n.short else ""),
             slices_text(n)] for n in needs(spec)]


HEADER = ["region", "generation", "quota type", "chips needed", "declared", "slices"]


def warnings(spec: Any) -> list[str]:
    """Without a ``quota`` section: one line per region and quota type that nothing checked."""
    if spec.quota:
        return []
    return [f"TPU quota not declared (tpu-multislice:quota): the slices need {n.chips} {n.generation} chips of "
            f"{LABEL[n.quota_type]} quota in {n.region}; check the project's quota ({DOC})"
            for n in needs(spec) if n.quota_type != "reserved"]
