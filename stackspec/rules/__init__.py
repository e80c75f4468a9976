"""The stack spec's rules, one module per system they come from, and their front door.

Where each kind of rule lives:

- a value by itself (a name's length and characters, an image reference, a range): beside its field, in the
  section's model (``stackspec/model/``), with the formats in :mod:`stackspec.limits`;
- GCP's rules across sections (Compute Engine, Cloud Storage, Cloud KMS, IAM, Artifact Registry): :mod:`.gcp`;
- GKE's: :mod:`.gke`; Kueue's: :mod:`.kueue`; KubeRay's: :mod:`.kuberay`; Cloud TPU quota: :mod:`.quota`;
- the spec's own rules across its sections: :mod:`.network`, :mod:`.slices`, :mod:`.jobs`, :mod:`.resources`,
  :mod:`.safety`, a sandbox stack's :mod:`.sandbox`; a region of a multi-region stack: :mod:`.regions`;
- rules across stack files of one repository: :mod:`.across_stacks`;
- every server-side rule the project relies on, with its quoted source and the checks that hold the project to it
  (spec, policy pack, code): the catalogue, :mod:`.catalogue`. The policy pack (``policies/rules/``) checks the
  rendered plan, not the spec.

The front door: :func:`checked` (one stack file) and :func:`across_stacks` (the stacks of one repository). They
run once the sections are valid and report every problem at once: a single-region stack through
:func:`.single.single_region`, a multi-region stack through :func:`.regions.check`, which checks each region as a
single-region view. They read the resolved spec (:mod:`stackspec.defaults`) and never default: :func:`checked`
resolves, then checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import defaults
from ..errors import Problem
from ..model.types import _ns
from . import quota, regions, sandbox
from .across_stacks import check as across_stacks
from .single import single_region

if TYPE_CHECKING:
    from ..model.stack import StackSpec

__all__ = ["across_stacks", "checked"]


def checked(written: StackSpec, context: dict[str, Any]) -> tuple[StackSpec, list[Problem]]:
    """The resolved spec of ``written`` (:func:`stackspec.defaults.resolve`; a multi-region stack with its region
    views) and every problem across its sections. ``context``: ``stack_file`` (the file was read: its own keys are
    checked), ``as_written`` (the workflows' own keys are checked too)."""
    problems: list[Problem] = []
    fail = lambda key, value, msg: problems.append(Problem(key, value, msg))  # noqa: E731
    if written.regions and written.manager is None:
        # The model said so (a multi-region stack needs its manager, model/stack.py); resolving and every region's
        # checks name the stack-wide resources after it, so there is nothing more to check until it is written.
        return written, problems
    spec = defaults.resolve(written)
    if spec.regions:
        spec = regions.check(spec, fail, context)
    elif spec.zone is not None and spec.cluster is not None and spec.slices is not None:
        single_region(spec, fail, context, problems)
    quota.check(spec, fail)  # the declared TPU quota against the slices' chips, every region
    sandbox.check(spec, fail)  # a stack deployed by hand, without the CI bootstrap
    drill = spec.deploy.cluster_drill
    if context.get("as_written") and drill is not None and not any(j.name == drill and j.elastic for j in spec.jobs):
        # The cluster drill preempts a running elastic job and follows it back (drills/cluster.py). Checked on
        # the stack file as written (lint, the workflows' stack lists, the bootstrap), so they answer alike.
        elastic = ", ".join(j.name for j in spec.jobs if j.elastic) or "none is elastic"
        fail(_ns("deploy.clusterDrill"), drill, f"the cluster drill preempts an elastic job of "
             f"{_ns('jobs')} ({elastic})")
    return spec, problems
