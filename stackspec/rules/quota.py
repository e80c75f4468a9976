"""The declared TPU quota (``tpu-multislice:quota``) against the chips the slices need, region by region.

What the slices need and the quota types are :mod:`stackspec.quota`'s (the preview and cost print them too); Cloud
TPU's quota types and defaults: https://cloud.google.com/tpu/docs/quota (docs/quota.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..quota import DOC, LABEL, NS, cpu_needs, entries, needs, slices_text


def check(spec: Any, fail: Callable[[str, Any, str], None]) -> None:
    """With a ``quota`` section: each region and generation the slices use is declared, and each declared quota type
    covers the chips its slices need (the slices named). Nothing without one (the preview warns instead)."""
    if not spec.quota:
        return
    index = entries(spec)
    seen: set[tuple[str, str]] = set()
    for n in needs(spec):
        i = index.get((n.region, n.generation))
        if i is None:
            if (n.region, n.generation) not in seen:
                fail(f"{NS}:quota", [e.model_dump(by_alias=True, exclude_none=True) for e in spec.quota],
                     f"no entry for {n.generation} in {n.region}, where the slices need it; add one "
                     f"({{region: {n.region}, generation: {n.generation}, ...}}, in chips; {DOC})")
            seen.add((n.region, n.generation))
            continue
        if n.quota_type == "reserved" and n.declared is None:
            continue  # a reservation brings its own capacity: checked only when declared
        if n.declared is None:
            fail(f"{NS}:quota[{i}].{n.quota_type}", None,
                 f"not declared, but {slices_text(n)} in {n.region} may run on {LABEL[n.quota_type]} capacity: "
                 f"{n.chips} {n.generation} chips ({DOC})")
        elif n.short:
            fail(f"{NS}:quota[{i}].{n.quota_type}", n.declared,
                 f"{slices_text(n)} in {n.region} need {n.chips} {n.generation} chips of {LABEL[n.quota_type]} quota, "
                 f"{n.short} more than declared: request an increase ({DOC}) or list fewer slices")
    for region, (vcpus, pools) in cpu_needs(spec).items():
        # Compute Engine's CPUs quota, where the stack declares it (stackspec.quota.cpu_needs quotes the sources: a
        # Standard manager's pool counts in each of its region's three zones).
        for i, e in enumerate(spec.quota):
            if (e.region or spec.region) == region and e.cpus is not None and vcpus > e.cpus:
                fail(f"{NS}:quota[{i}].cpus", e.cpus,
                     f"the system pools in {region} need {vcpus} vCPUs of Compute Engine's CPUs quota "
                     f"({'; '.join(pools)}), {vcpus - e.cpus} more than declared: request an increase ({DOC}) or "
                     "fewer or smaller system nodes")
