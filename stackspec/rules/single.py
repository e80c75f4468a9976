"""A single-region stack, or one region of a multi-region stack seen as one: every rule across its sections."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..model.types import _ns
from . import gcp, gke, jobs, kuberay, kueue, network, resources, safety, slices

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def single_region(spec: StackSpec, fail, context: dict[str, Any], problems: list[Problem]) -> None:
    """A resolved single-region stack (or a region's view: ``context["view"]``)."""
    for j in spec.jobs:
        if j.region is not None and not context.get("view"):
            fail(_ns(f"jobs[{spec.jobs.index(j)}].region"), j.region,
                 f"only in a multi-region stack ({_ns('regions')}); this stack runs in gcp:zone {spec.zone}")
    safety.protection(spec, fail)
    if not context.get("view"):  # a multi-region stack's one bucket holds every region (rules/regions.py)
        gcp.bucket_location(spec, fail)
    gke.control_plane(spec, fail)
    gke.maintenance(spec, fail)
    gcp.image_pusher(spec, fail)
    gcp.trainer_images(spec, fail)
    network.check(spec, fail)
    gcp.nics(spec, fail)
    kueue.worker_groups(spec, fail)
    slices.check(spec, fail)
    if not any(p.key.startswith(_ns("slices")) for p in problems):
        # Jobs are checked against sound slices only: one bad slice gives one error.
        jobs.check(spec, fail)
        jobs.checkpoint(spec, fail)
        jobs.multi_tier(spec, fail)
        kuberay.check(spec, fail)
    resources.check(spec, fail)
    safety.unverified(spec, fail)
    safety.check(spec, fail, stack_file=bool(context.get("stack_file")))
    safety.hardening(spec, fail)
    for d in spec.derived_names():
        if d.name and (msg := d.rule.check(d.name)):
            fail(d.key, d.name, f"{d.how}: {msg}")
