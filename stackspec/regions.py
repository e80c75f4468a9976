"""Facts a multi-region stack rests on: where one checkpoint bucket can serve every region, MultiKueue's limits,
and how a region's problems are named in the stack file.

A multi-region stack (``tpu-multislice:regions``) is checked region by region: each region becomes a single-region
view of the stack (``StackSpec.region_views``) that every single-region rule runs on; this module renames the keys of
a view's problems to the region's place in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# MultiKueueConfig.spec.clusters holds 1 to 20 clusters (kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go,
# +kubebuilder:validation:MaxItems=20; the vendored CRD's maxItems): a manager dispatches to at most 20 regions.
MAX_REGIONS = 20
DISPATCH = ("cost", "listed")

# Cloud Storage locations (https://cloud.google.com/storage/docs/locations, read 2026-11-23).
# A dual-region stores every object in both regions and reads from either region carry no data transfer charge;
# a multi-region's reads always carry one; writes to either are charged inter-region replication.
# Predefined dual-regions (the page's "Predefined dual-regions" table).
PREDEFINED_DUAL_REGIONS = {
    "NAM4": ("us-central1", "us-east1"),
    "EUR4": ("europe-north1", "europe-west4"),
    "ASIA1": ("asia-northeast1", "asia-northeast2"),
}
# Configurable dual-regions (the bucket's location code plus customPlacementConfig.dataLocations): two regions the
# page's table lists under one location code, "The following regions are available when creating a configurable
# dual-region bucket" (docs.cloud.google.com/storage/docs/locations, as stored 2026-04), not every region of the
# continent: ASIA offers Taiwan and Singapore only (no asia-northeast1), US no us-central2. Both names must be under
# the location the stack names, or GCS refuses the bucket.
CONFIGURABLE_DUAL_REGIONS = {
    "ASIA": ("asia-east1", "asia-southeast1"),
    "AU": ("australia-southeast1", "australia-southeast2"),
    "CA": ("northamerica-northeast1", "northamerica-northeast2"),
    "DE": ("europe-west3", "europe-west10"),
    "EU": ("europe-central2", "europe-north1", "europe-southwest1", "europe-west1", "europe-west3", "europe-west4",
           "europe-west8", "europe-west9", "europe-west10", "europe-west12"),
    "IN": ("asia-south1", "asia-south2"),
    "IT": ("europe-west8", "europe-west12"),
    "US": ("us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3",
           "us-west4"),
}
# The table's notes: "The EUROPE-NORTH1 and EUROPE-WEST4 dual-region pairing is only available as a predefined
# dual-region" (EUR4) and "The US-CENTRAL1 and US-EAST1 dual-region pairing is only available as a predefined
# dual-region" (NAM4): as dataLocations they are refused.
PREDEFINED_ONLY = (frozenset(PREDEFINED_DUAL_REGIONS["EUR4"]), frozenset(PREDEFINED_DUAL_REGIONS["NAM4"]))
# Multi-regions: US holds data in US regions, EU in European Union member regions, ASIA in Asian regions.
_MULTI_REGION = (
    ("US", re.compile(r"us-[a-z]+\d+")),
    ("EU", re.compile(r"europe-(west1|west3|west4|west8|west9|north1|central2|southwest1)")),
    ("ASIA", re.compile(r"asia-[a-z]+\d+")),
)
MULTI_REGIONS = tuple(code for code, _ in _MULTI_REGION)


def multi_region_of(region: str) -> str | None:
    """The multi-region (US, EU, ASIA) whose data centres include ``region``, if any."""
    return next((code for code, pattern in _MULTI_REGION if pattern.fullmatch(region)), None)


@dataclass(frozen=True)
class BucketPlace:
    """Where a bucket every region reads can live: ``location`` plus, for a configurable dual-region, its two
    ``data_locations``; ``kind`` is dual-region or multi-region."""

    location: str
    data_locations: tuple[str, ...] = ()
    kind: str = "dual-region"

    def contains(self, region: str) -> bool:
        if self.data_locations:
            return region in self.data_locations
        if self.location in PREDEFINED_DUAL_REGIONS:
            return region in PREDEFINED_DUAL_REGIONS[self.location]
        return multi_region_of(region) == self.location

    def describe(self) -> str:
        if self.data_locations:
            return f"location {self.location} with dataLocations {list(self.data_locations)} (a dual-region)"
        return f"location {self.location} (a {self.kind})"


def dual_region_error(location: str, data_locations: tuple[str, ...]) -> str | None:
    """Why GCS refuses ``location`` with ``data_locations`` as a configurable dual-region (None: it accepts it)."""
    code, pair = location.upper(), frozenset(data_locations)
    offered = CONFIGURABLE_DUAL_REGIONS.get(code)
    if offered is None:
        codes = [c for c, rs in CONFIGURABLE_DUAL_REGIONS.items() if pair <= set(rs)]
        return (f"location {location} is not a configurable dual-region's location code; allowed: "
                f"{', '.join(codes or CONFIGURABLE_DUAL_REGIONS)} (https://cloud.google.com/storage/docs/locations)")
    if not pair <= set(offered):
        return (f"{location} offers configurable dual-regions of {', '.join(offered)} only, not "
                f"{', '.join(sorted(pair - set(offered)))} (https://cloud.google.com/storage/docs/locations)")
    if pair in PREDEFINED_ONLY:
        name = next(c for c, p in PREDEFINED_DUAL_REGIONS.items() if frozenset(p) == pair)
        return (f"{' and '.join(sorted(pair))} pair only as the predefined dual-region {name}: location {name}, no "
                "dataLocations (https://cloud.google.com/storage/docs/locations)")
    return None


def bucket_places(regions: list[str]) -> list[BucketPlace]:
    """Every location holding all ``regions``, best first: a dual-region (reads from either region free) before a
    multi-region (reads always charged)."""
    wanted = sorted(set(regions))
    out: list[BucketPlace] = []
    if len(wanted) <= 2:
        for code, pair in PREDEFINED_DUAL_REGIONS.items():
            if set(wanted) <= set(pair):
                out.append(BucketPlace(code))
        if len(wanted) == 2:
            # A country's own code (IT, DE) before the continent's that also lists the pair.
            out += [BucketPlace(code, tuple(wanted)) for code in sorted(CONFIGURABLE_DUAL_REGIONS,
                                                                        key=lambda c: len(CONFIGURABLE_DUAL_REGIONS[c]))
                    if dual_region_error(code, tuple(wanted)) is None]
    codes = {multi_region_of(r) for r in wanted}
    if len(codes) == 1 and None not in codes:
        out.append(BucketPlace(codes.pop(), kind="multi-region"))
    return out


def place_of(location: str, data_locations: tuple[str, ...]) -> BucketPlace:
    """The place a stack names (``storage.location``, ``storage.dataLocations``)."""
    location = location.upper()
    if data_locations:
        return BucketPlace(location, tuple(sorted(data_locations)))
    if location in PREDEFINED_DUAL_REGIONS:
        return BucketPlace(location)
    if location in MULTI_REGIONS:
        return BucketPlace(location, kind="multi-region")
    return BucketPlace(location.lower(), kind="region")


def rename(key: str, index: int, own: tuple[str, ...], jobs: dict[int, int], ns: str) -> str:
    """A view's problem key as the stack file names it: the region's own sections under ``regions[index]``,
    the view's ``jobs[k]`` as the file's ``jobs[n]``."""
    where = f"{ns}:regions[{index}]"
    if key == "gcp:zone":
        return f"{where}.zone"
    if key == "gcp:region":
        return f"{where}.region"
    for section in own:
        prefix = f"{ns}:{section}"
        if key == prefix or key.startswith((prefix + ".", prefix + "[")):
            return where + "." + key.removeprefix(f"{ns}:")
    if m := re.match(rf"{re.escape(ns)}:jobs\[(\d+)\]", key):
        return f"{ns}:jobs[{jobs.get(int(m[1]), int(m[1]))}]" + key[m.end():]
    return key
