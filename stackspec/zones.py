"""Where each TPU generation can be had: the dated zone table (``data/tpu_zones.json``) and the zone names GCE uses.

GKE refuses a TPU node pool in a zone that does not offer its generation; the spec refuses it first
(cloud rule ``tpu-zone-offers-generation``), and a zone/region mismatch suggests a zone that does.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from .limits import REGION

DATA = Path(__file__).with_name("data") / "tpu_zones.json"
TABLE_FILE = "stackspec/data/tpu_zones.json"
# GCE zone names: <region>-<letter a-f>, or an AI zone such as us-central1-ai1 / us-south1-ai1b
# (https://cloud.google.com/compute/docs/regions-zones; AI zones: https://docs.cloud.google.com/tpu/docs/types-zones).
ZONE = re.compile(rf"{REGION.pattern}-(?:[a-f]|ai\d+[a-z]?)")


def region_of(location: str) -> str | None:
    """The region of a zone (``us-central1-ai1`` -> ``us-central1``); None when ``location`` is not a zone."""
    return location.rsplit("-", 1)[0] if ZONE.fullmatch(location) else None


@cache
def table() -> dict:
    return json.loads(DATA.read_text())


def zones(generation: str) -> tuple[tuple[str, ...], bool]:
    """The zones listed for ``generation`` and whether the list is complete (so checked)."""
    entry = table()["generations"].get(generation)
    return (tuple(entry["zones"]), bool(entry["complete"])) if entry else ((), False)


def source() -> str:
    t = table()
    return f"{t['source']} (published {t['published']}, read {t['read']}; {TABLE_FILE})"


def in_region(region: str, generation: str) -> list[str]:
    return [z for z in zones(generation)[0] if z.startswith(region + "-")]


def suggestion(region: str, generation: str) -> str:
    """What to say a zone should be: the region's zones that offer the generation, else every such zone."""
    listed, _ = zones(generation)
    here = in_region(region, generation)
    if here:
        return f"{generation} zones of {region}: {', '.join(here)}"
    if listed:
        return f"{region} offers no {generation} zone in the table; {generation} zones: {', '.join(listed)}"
    return f"e.g. {region}-b"


def single_tenant(generation: str) -> tuple[str, ...]:
    """Zones the page lists for ``generation`` as single-tenant: not refused, never suggested."""
    return tuple(table()["generations"].get(generation, {}).get("singleTenant", ()))


def zone_error(zone: str, generation: str) -> str | None:
    """Why ``zone`` cannot hold a ``generation`` slice, or None (unchecked generations and single-tenant zones pass).
    A region where Compute Engine lists the hosts but the page names no zone is refused saying so."""
    listed, complete = zones(generation)
    if complete and zone not in listed and zone not in single_tenant(generation):
        region = zone.rsplit("-", 1)[0]
        unlisted = {r["region"]: r for r in table()["generations"][generation].get("unlistedRegions", ())}
        also = (f"; Compute Engine lists {generation} hosts in {region} ({unlisted[region]['source']}) but no "
                "zone of it is on the TPU page: ask Google which zone holds your capacity"
                if region in unlisted else "")
        return f"offers no {generation} TPUs; {suggestion(region, generation)}{also} (from {source()})"
    return None
