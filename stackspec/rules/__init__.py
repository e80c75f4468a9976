"""Rules across the spec's sections, as functions of the spec (each section's own rules are its validators).

They run once the sections are valid and report every problem at once: a single-region stack through
:func:`single_region`, a multi-region stack through :func:`stackspec.rules.regions.check`, which checks each region
as a single-region view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationInfo

from .. import names
from ..errors import Problem
from ..model.types import _ns
from . import jobs, network, regions, resources, safety, slices

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, info: ValidationInfo) -> list[Problem]:
    """Every problem across the sections of ``spec``."""
    problems: list[Problem] = []
    fail = lambda key, value, msg: problems.append(Problem(key, value, msg))  # noqa: E731
    if spec.regions:
        regions.check(spec, fail, info)
    elif spec.zone is not None and spec.cluster is not None and spec.slices is not None:
        single_region(spec, fail, info, problems)
    drill = spec.deploy.cluster_drill
    if (info.context or {}).get("as_written") and drill is not None and not any(
            j.name == drill and j.elastic for j in spec.jobs):
        # The cluster drill preempts a running elastic job and follows it back (drills/cluster.py). Checked on
        # the stack file as written (lint, the workflows' stack lists, the bootstrap), so they answer alike.
        elastic = ", ".join(j.name for j in spec.jobs if j.elastic) or "none is elastic"
        fail(_ns("deploy.clusterDrill"), drill, f"the cluster drill preempts an elastic job of "
             f"{_ns('jobs')} ({elastic})")
    return problems


def single_region(spec: StackSpec, fail, info: ValidationInfo, problems: list[Problem]) -> None:
    for j in spec.jobs:
        if j.region is not None and not (info.context or {}).get("view"):
            fail(_ns(f"jobs[{spec.jobs.index(j)}].region"), j.region,
                 f"only in a multi-region stack ({_ns('regions')}); this stack runs in gcp:zone {spec.zone}")
    defaults_(spec, fail)
    network.check(spec, fail)
    slices.check(spec, fail)
    if not any(p.key.startswith(_ns("slices")) for p in problems):
        # Jobs are checked against sound slices only: one bad slice gives one error.
        jobs.check(spec, fail)
        jobs.checkpoint(spec, fail)
        jobs.kuberay_fields(spec, fail)
    resources.check(spec, fail)
    safety.unverified(spec, fail)
    safety.check(spec, fail, stack_file=bool((info.context or {}).get("stack_file")))
    safety.hardening(spec, fail)
    for d in spec.derived_names():
        if d.name and (msg := d.rule.check(d.name)):
            fail(d.key, d.name, f"{d.how}: {msg}")


def defaults_(spec: StackSpec, fail) -> None:
    prod = spec.prod
    spec.cluster.__dict__["location"] = spec.zone
    if spec.cluster.deletion_protection is None:
        object.__setattr__(spec.cluster, "deletion_protection", prod)
    elif prod and not spec.cluster.deletion_protection:
        fail(_ns("cluster.deletionProtection"), False, "a production cluster keeps deletion protection on")
    if spec.storage.location is None:
        object.__setattr__(spec.storage, "location", spec.region)
    if spec.storage.protected is None:
        object.__setattr__(spec.storage, "protected", prod)
    elif prod and not spec.storage.protected:
        fail(_ns("storage.protected"), False, "production checkpoints must be protected from deletion")
    if spec.image is not None:
        if spec.image.location is None:
            object.__setattr__(spec.image, "location", spec.region)
        if spec.image.pusher is None:
            object.__setattr__(spec.image, "pusher",
                               names.ci_account_email("image", spec.ci_project))
    primary = spec.network.primary
    if primary.network is None:
        object.__setattr__(primary, "network", names.cluster_network(spec.cluster.name))
    if primary.subnet is None:
        object.__setattr__(primary, "subnet", names.cluster_subnet(spec.cluster.name))
    for i, net in enumerate(spec.networks, start=1):
        if net.network is None:
            object.__setattr__(net, "network", names.network_name(spec.cluster.name, i))
