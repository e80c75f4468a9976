"""Rules across the spec's sections, as functions of the spec (each section's own rules are its validators).

They run once the sections are valid and report every problem at once: a single-region stack through
:func:`single_region`, a multi-region stack through :func:`stackspec.rules.regions.check`, which checks each region
as a single-region view. They read the resolved spec (:mod:`stackspec.defaults`) and never default: :func:`checked`
resolves, then checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import defaults, sandbox
from .. import quota as tpu_quota
from ..errors import Problem
from ..model.types import _ns
from . import regions
from .single import single_region

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def checked(written: StackSpec, context: dict[str, Any]) -> tuple[StackSpec, list[Problem]]:
    """The resolved spec of ``written`` (:func:`stackspec.defaults.resolve`; a multi-region stack with its region
    views) and every problem across its sections. ``context``: ``stack_file`` (the file was read: its own keys are
    checked), ``as_written`` (the workflows' own keys are checked too)."""
    problems: list[Problem] = []
    fail = lambda key, value, msg: problems.append(Problem(key, value, msg))  # noqa: E731
    spec = defaults.resolve(written)
    if spec.regions:
        spec = regions.check(spec, fail, context)
    elif spec.zone is not None and spec.cluster is not None and spec.slices is not None:
        single_region(spec, fail, context, problems)
    tpu_quota.check(spec, fail)  # the declared TPU quota against the slices' chips, every region
    sandbox.rules(spec, fail)  # a stack deployed by hand, without the CI bootstrap (stackspec/sandbox.py)
    drill = spec.deploy.cluster_drill
    if context.get("as_written") and drill is not None and not any(j.name == drill and j.elastic for j in spec.jobs):
        # The cluster drill preempts a running elastic job and follows it back (drills/cluster.py). Checked on
        # the stack file as written (lint, the workflows' stack lists, the bootstrap), so they answer alike.
        elastic = ", ".join(j.name for j in spec.jobs if j.elastic) or "none is elastic"
        fail(_ns("deploy.clusterDrill"), drill, f"the cluster drill preempts an elastic job of "
             f"{_ns('jobs')} ({elastic})")
    return spec, problems
