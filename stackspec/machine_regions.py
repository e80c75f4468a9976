"""Where each machine type is offered: the vendored ``gcloud compute machine-types list`` export
(``data/machine_regions.csv``; its source, commit and digests in ``data/README.md``).

GKE creates a node pool's VMs in its zones with the pool's machine type; Compute Engine refuses a machine type its
zone does not list (cloud rule ``gce-zone-offers-machine-type``). The export lists, per machine type, the regions
with at least one zone offering it: a region it does not list offers it in no zone, which the spec refuses (system
pools, a Standard manager's pool, TPU pools) before ``up`` would fail at the pool. A machine type the export does not
list at all (``ct4p``: its account cannot see it) and a zone it cannot see (AI zones) are not checked. This module is
the one place that reads the table; ``slicectl new`` picks the system machine type from it too.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

from .gke import REGIONAL_NODE_ZONES
from .limits import REGION
from .zones import ZONE, region_of

DATA = Path(__file__).with_name("data") / "machine_regions.csv"
TABLE_FILE = "stackspec/data/machine_regions.csv"
# The same repository's last per-zone export (tools/machinetypezone.csv, no longer committed after this one): where it
# lists a machine type in some zones of a region and not in another zone it lists, that zone is refused, and a
# regional pool (three zones) needs three of them. Where it cannot say (a zone or region it predates), the region
# export above decides.
ZONE_DATA = Path(__file__).with_name("data") / "machine_zones.csv"
ZONE_TABLE_FILE = "stackspec/data/machine_zones.csv"
ZONE_SOURCE = ("Cyclenerd/google-cloud-pricing-cost-calculator@4ed73c63446f:tools/machinetypezone.csv, "
               "gcloud compute machine-types list of 2023-05-02")
SOURCE = ("Cyclenerd/google-cloud-pricing-cost-calculator@8bf3293a3561:tools/machinetyperegion.csv, "
          "gcloud compute machine-types list of 2026-08-17")
# The seed's system machine type (its cluster create), kept where its region offers it; else the same vCPUs on N2
# (cluster-toolkit's gke-tpu-v6e system pool is N2: n2-standard-8; xpk's dry run in us-east5 uses e2-standard-16),
# with more memory than N1's. n1-standard-4 (a Standard manager's default) has no N2 twin in the machine table.
SEED_SYSTEM = "n1-standard-16"
N2_FOR = {"n1-standard-4": "n2-standard-8", "n1-standard-8": "n2-standard-8", "n1-standard-16": "n2-standard-16",
          "n1-standard-32": "n2-standard-32"}


@cache
def table() -> dict[str, tuple[str, ...]]:
    """Machine type -> the regions that offer it (sorted); deprecated rows count as offered (still creatable)."""
    out: dict[str, set[str]] = {}
    with DATA.open(newline="") as f:
        for row in csv.DictReader(f, delimiter=";"):
            out.setdefault(row["NAME"], set()).add(row["ZONE"])
    return {name: tuple(sorted(regions)) for name, regions in out.items()}


@cache
def zone_table() -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """(machine type -> the zones the per-zone export lists it in, region -> the zones that export knows)."""
    by_machine: dict[str, set[str]] = {}
    by_region: dict[str, set[str]] = {}
    with ZONE_DATA.open(newline="") as f:
        for row in csv.DictReader(f, delimiter=";"):
            by_machine.setdefault(row["NAME"], set()).add(row["ZONE"])
            by_region.setdefault(region_of(row["ZONE"]) or row["ZONE"], set()).add(row["ZONE"])
    return ({k: frozenset(v) for k, v in by_machine.items()}, {k: frozenset(v) for k, v in by_region.items()})


def zones_offering(machine: str, region: str) -> tuple[str, ...] | None:
    """The zones of ``region`` the per-zone export lists ``machine`` in; None when it cannot say (it lists the
    machine in no zone of the region: a region it predates, or a type it does not hold)."""
    by_machine, _ = zone_table()
    here = sorted(z for z in by_machine.get(machine, ()) if region_of(z) == region)
    return tuple(here) or None


def _zone_gap(machine: str, location: str) -> bool:
    """Whether the per-zone export says ``machine`` is missing where a pool at ``location`` puts nodes: a zone it
    knows without the type, or a region with fewer than the three zones a regional pool takes."""
    region = region_of(location) or location
    here = zones_offering(machine, region)
    if here is None:
        return False
    if ZONE.fullmatch(location):
        return location in zone_table()[1].get(region, ()) and location not in here
    return len(here) < REGIONAL_NODE_ZONES


def regions(machine: str) -> tuple[str, ...] | None:
    """The regions offering ``machine``, or None when the export does not list it (not checked)."""
    return table().get(machine)


def offered(machine: str, location: str) -> bool | None:
    """Whether ``machine`` is offered in ``location`` (a zone or a region); None when the table cannot say."""
    listed, original = regions(machine), location
    if ZONE.fullmatch(location):
        if location.rsplit("-", 1)[1].startswith("ai"):
            return None  # an AI zone: the export's account sees none
        location = region_of(location)
    elif not REGION.fullmatch(location):
        return None  # not a zone or region name: the zone rules say so, once
    if listed is None:
        return None
    if location not in listed:
        return False
    return not _zone_gap(machine, original)


def error(machine: str, location: str) -> str | None:
    """Why a pool of ``machine`` cannot be created in ``location`` (a zone or, for a regional cluster, a region),
    naming the regions that offer it; None when it is offered or the table cannot say."""
    if offered(machine, location) is not False:
        return None
    here = region_of(location) or location
    if here in (regions(machine) or ()):  # the region offers it, not where this pool's nodes go
        zones = ", ".join(zones_offering(machine, here) or ())
        where = (f"{location} is not one of them" if ZONE.fullmatch(location) else
                 f"a regional cluster's pool takes {REGIONAL_NODE_ZONES} zones of {here} (GKE regional clusters, "
                 "https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters)")
        return (f"{machine} is not offered in {location}: Compute Engine lists it in {zones} only, and {where} "
                f"({ZONE_SOURCE}; {ZONE_TABLE_FILE})")
    return (f"{machine} is not offered in {location}: Compute Engine lists it in no zone of {here}; regions whose "
            f"zones offer it: {', '.join(regions(machine) or ())} ({SOURCE}; {TABLE_FILE})")


def system_default(location: str, default: str = SEED_SYSTEM) -> str:
    """The system pool's machine type where a stack names none: ``default`` (the model's) where ``location`` offers
    it, else its N2 twin (the resolve step, :mod:`stackspec.defaults`, and ``slicectl new``)."""
    return default if offered(default, location) is not False else N2_FOR.get(default, default)
