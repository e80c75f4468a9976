"""The dated list-price table (``data/prices.json``) and how a stack's own prices override it.

Each figure in the table names its page, the date it was published (transcribed) and the
date it was read. What the table lacks (flex-start TPU prices, system machine types in most
regions) is an input: ``tpu-multislice:prices`` in the stack file gives it, and until then
the cost table says "unknown" for it and names the key to set. Nothing here guesses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("data") / "prices.json"
TABLE_FILE = "stackspec/data/prices.json"
# Capacity types (stackspec.model.CAPACITY_TYPES) and their camelCase override keys.
OVERRIDE_KEYS = {"on-demand": "onDemand", "spot": "spot", "flex-start": "flexStart", "reservation": "reservation"}


@dataclass(frozen=True)
class Price:
    """One unit price and where it came from: ``table`` (its page and dates), ``spec`` or ``missing``."""

    usd: float | None
    origin: str  # "table", "spec" or "missing"
    source: str  # the page's URL, the spec key that set it, or what the table lacks and the key to set
    key: str  # the override key, e.g. prices.v6e.spot
    published: str | None = None  # table only: the date the page's figure was transcribed
    read: str | None = None  # table only: the date the page was read

    def as_json(self) -> dict:
        return {"usd": self.usd, "from": self.origin, "source": self.source, "published": self.published,
                "read": self.read, "key": self.key}

    @property
    def known(self) -> bool:
        return self.usd is not None


@cache
def table() -> dict:
    return json.loads(DATA.read_text())


def hours_per_month() -> float:
    return float(table()["hoursPerMonth"]["value"])


def table_date() -> str:
    """The newest date a figure of the table was read."""
    t = table()
    return max(e["read"] for section in ("tpu", "storage", "machines") for e in t[section])


def _cited(usd: float, entry: dict, key: str) -> Price:
    return Price(float(usd), "table", entry["source"], key, entry["published"], entry["read"])


def tpu(generation: str, capacity: str, region: str, overrides: dict | None = None) -> Price:
    """USD per chip-hour of a TPU generation on one capacity type in a region."""
    key = f"prices.{generation}.{OVERRIDE_KEYS[capacity]}"
    given = ((overrides or {}).get(generation) or {}).get(OVERRIDE_KEYS[capacity])
    if given is not None:
        return Price(float(given), "spec", key, key)
    for e in table()["tpu"]:
        if (e["generation"], e["capacity"], e["region"]) == (generation, capacity, region):
            return _cited(e["usdPerChipHour"], e, key)
    return Price(None, "missing", f"no {generation} {capacity} price for {region} in {TABLE_FILE}: set {key}", key)


def machine(name: str, region: str, overrides: dict | None = None) -> Price:
    """USD per hour of one general-purpose machine (the system node pool)."""
    key = f"prices.machines.{name}"
    given = (overrides or {}).get(name)
    if given is not None:
        return Price(float(given), "spec", key, key)
    for e in table()["machines"]:
        if (e["machineType"], e["region"]) == (name, region):
            return _cited(e["usdPerHour"], e, key)
    return Price(None, "missing", f"no {name} price for {region} in {TABLE_FILE}: set {key}", key)


def storage(storage_class: str, region: str, override: float | None = None) -> Price:
    """USD per GB-month of Cloud Storage of one class in a region."""
    key = "prices.storageGbMonth"
    if override is not None:
        return Price(float(override), "spec", key, key)
    for e in table()["storage"]:
        if (e["storageClass"], e["region"]) == (storage_class, region):
            return _cited(e["usdPerGbMonth"], e, key)
    return Price(None, "missing", f"no {storage_class} storage price for {region} in {TABLE_FILE}: set {key}", key)


def manager(autopilot: bool, machine_type: str, nodes: int, region: str, overrides) -> Price:
    """USD per hour of a multi-region stack's manager cluster: ``prices.managerPerHour``, else for a Standard
    manager its system pool from the table; Autopilot bills its pods' requests, which the table does not hold."""
    key = "prices.managerPerHour"
    if overrides.manager_per_hour is not None:
        return Price(float(overrides.manager_per_hour), "spec", key, key)
    if not autopilot:
        p = machine(machine_type, region, overrides.machines)
        return Price(None if p.usd is None else p.usd * nodes, p.origin, p.source, p.key, p.published, p.read)
    return Price(None, "missing", f"Autopilot bills the manager's pod requests, not in {TABLE_FILE}: set {key}", key)


def replication(location: str, dual: bool) -> Price:
    """USD per GB written to a dual-region or multi-region bucket (inter-region replication)."""
    key = "prices.replicationGb"
    kind = "dual-region" if dual or len(location) > 4 else "multi-region"
    for e in table().get("replication", []):
        if e["kind"] == kind:
            return _cited(e["usdPerGb"], e, key)
    return Price(None, "missing", f"no {kind} replication price in {TABLE_FILE}: set {key}", key)


def cross_region_note(location: str, dual: bool) -> str:
    """Who pays to read the checkpoints from another region (https://cloud.google.com/storage/docs/locations)."""
    if dual:
        return (f"reads from either region of the dual-region {location} carry no data transfer charge; every GB "
                "written is charged inter-region replication")
    return (f"reads from the multi-region {location} always carry a data transfer charge, and every GB written is "
            "charged inter-region replication")
