"""One region of a multi-region stack (``tpu-multislice:regions``): its zone, cluster, networks, slices, prices."""

from __future__ import annotations

from pydantic import Field, model_validator

from .. import zones
from .cluster import Cluster
from .network import Network
from .options import Prices
from .slices import Slice
from .types import Region, Section, Zone, at


class RegionSite(Section):
    """One region of a multi-region stack: a cluster in a zone, its networks, its slices and its prices."""

    region: Region
    zone: Zone
    cluster: Cluster
    network: Network = Field(default_factory=Network)
    slices: tuple[Slice, ...]
    prices: Prices | None = None  # this region's own prices; unset: tpu-multislice:prices

    @model_validator(mode="after")
    def _zone(self) -> RegionSite:
        if not self.zone.startswith(self.region + "-"):
            gens = sorted({s.generation for s in self.slices})
            hint = "; ".join(zones.suggestion(self.region, g) for g in gens) or f"e.g. {self.region}-b"
            raise at("zone", f"must be a zone of region {self.region} ({hint})")
        return self
