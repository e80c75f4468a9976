"""The resolve step: from the stack file as written to the spec the program, the policies and the CLI read.

One pure step, as Kueue's webhooks keep ``Default`` apart from ``Validate``: every default a stack leaves unset is
filled in *new* objects (``model_copy(update=...)``); nothing here writes into an object it was handed, so a section
one view shares with another, or with the stack it came from, is the same whichever view was resolved first. The
checks (:mod:`stackspec.rules`) run on the result and never default.

- a single-region stack: the cluster's location and deletion protection, the bucket's location and protection, the
  image's location and pusher, the VPC, subnet and DCN network names, each slice's worker group and reservation
  affinity, each job's group, slice counts, failure budget and checkpoint period;
- a multi-region stack: what is stack-wide first (the manager's region and deletion protection, the bucket's place
  and protection, the image's location in the stack's *home* region, the manager's), then each region as a
  single-region view (:func:`view`) holding its own copies of everything it reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from . import checkpoints, machine_regions, names
from . import regions as places
from .errors import Problem
from .model.jobs import Job
from .model.regions import RegionSite
from .model.slices import Slice
from .model.stack import StackSpec
from .model.types import _ns
from .tpu import SliceShape

_SEED_HOW = ("the tutorial's (it sets none: MaxText's default, 10000), so a run saves at step 0 and its last "
             "step")


def _new(model: BaseModel, **changes: Any) -> Any:
    """``model`` with ``changes``, as a new object (``model`` is left as it was); ``model`` itself when nothing
    changes, so an object a stack sets in full is not copied for nothing."""
    changes = {k: v for k, v in changes.items() if getattr(model, k) != v}
    return model.model_copy(update=changes) if changes else model


def resolve(written: StackSpec) -> StackSpec:
    """The resolved spec of ``written`` (a new object; ``written`` is unchanged). A stack missing what it must name
    (reported by the model's ``_one_place``) comes back as written."""
    if written.regions:
        return _stack_wide(written)
    if written.zone is None or written.cluster is None or written.slices is None:
        return written
    return _single_region(written)


def _single_region(s: StackSpec) -> StackSpec:
    prod, region = s.prod, s.home[1]
    c = s.cluster
    cluster = _new(c, location=s.zone, deletion_protection=prod if c.deletion_protection is None else
                   c.deletion_protection, system_machine_type=_system_machine(c, s.zone))
    storage = _new(s.storage, location=s.storage.location or s.region,
                   protected=prod if s.storage.protected is None else s.storage.protected)
    primary = s.network.primary
    network = _new(s.network, primary=_new(primary, network=primary.network or names.cluster_network(c.name),
                                           subnet=primary.subnet or names.cluster_subnet(c.name)),
                   secondary=tuple(_new(n, network=n.network or names.network_name(c.name, i))
                                   for i, n in enumerate(s.network.secondary, start=1)))
    slices = tuple(_slice(x) for x in s.slices)
    groups: dict[str, tuple[SliceShape, int]] = {}
    for x in slices:
        shape, n = groups.get(x.group, (x.shape, 0))
        groups[x.group] = (shape, n + 1)
    return _new(s, cluster=cluster, storage=storage, image=_image(s, region), network=network, slices=slices,
                jobs=tuple(_job(j, groups) for j in s.jobs))


def _system_machine(section: BaseModel, location: str) -> str:
    """The system pool's machine type: as written, else the model's default where ``location`` offers it, else its
    N2 twin (the seed's n1-standard-16 is offered in no zone of us-east5: stackspec/data/machine_regions.csv)."""
    if "system_machine_type" in section.model_fields_set:
        return section.system_machine_type
    return machine_regions.system_default(location, type(section).model_fields["system_machine_type"].default)


def _image(s: StackSpec, home_region: str):
    """The worker image's repository is stack-wide: in the stack's home region (a multi-region stack's manager's)."""
    if s.image is None:
        return None
    return _new(s.image, location=s.image.location or home_region,
                pusher=s.image.pusher or names.image_account_email(s.stack, s.ci_project))


def _slice(x: Slice) -> Slice:
    """A slice's worker group (one per shape by default) and each reservation's affinity (SPECIFIC by default)."""
    capacity = tuple(_new(c, affinity=c.affinity or "SPECIFIC") if c.type == "reservation" else c
                     for c in x.capacity)
    return _new(x, group=x.group or x.shape.group_name, capacity=capacity)


def _job(j: Job, groups: dict[str, tuple[SliceShape, int]]) -> Job:
    """A job's failure budget, its group (the only one), its slice counts (its group's slices by default) and its
    checkpoint period (:func:`checkpoint_plan`)."""
    max_failures = (3 if j.max_failures is None else j.max_failures) if j.elastic else (j.max_failures or 0)
    group = j.group if j.group is not None or len(groups) != 1 else next(iter(groups))
    if group not in groups:
        return _new(j, max_failures=max_failures, group=group)  # the rules name the group
    shape, n = groups[group]
    high = (j.max_slices if j.elastic else j.slices) or n
    low = (j.min_slices or 1) if j.elastic else high
    sized = _new(j, max_failures=max_failures, group=group, slices=high, min_slices=low)
    plan = checkpoint_plan(sized, shape)
    if plan is None:
        return sized  # an elastic job missing an input of Young/Daly's rule: the rules say which
    return _new(sized, checkpoint_period=plan.period, checkpoint_how=plan.how)


def checkpoint_plan(job: Job, shape: SliceShape) -> checkpoints.Plan | None:
    """A job's checkpoint period: as set, the seed's (multislice) or Young/Daly's (elastic); None when an elastic
    job lacks an input of that rule."""
    if job.checkpoint_period is not None:
        return checkpoints.Plan(job.checkpoint_period, "checkpointPeriod in the stack file")
    if not job.elastic:
        return checkpoints.Plan(checkpoints.SEED_CHECKPOINT_PERIOD, _SEED_HOW)
    step = checkpoints.job_step_seconds(job, shape.pod_type)
    if job.checkpoint_save_seconds is None or job.expected_preemption_interval_minutes is None or step is None:
        return None
    return checkpoints.elastic_period(job.checkpoint_save_seconds, job.expected_preemption_interval_minutes,
                                      step[0], step[1], job.steps)


# --------------------------------------------------------------------------- several regions


def _stack_wide(s: StackSpec) -> StackSpec:
    """A multi-region stack's stack-wide sections; its regions become views in :func:`view`."""
    prod, m = s.prod, s.manager
    manager = m if m is None else _new(m, region=m.region or s.region, deletion_protection=prod if
                                       m.deletion_protection is None else m.deletion_protection,
                                       system_machine_type=_system_machine(m, m.region or s.region))
    st = s.storage
    place = bucket_place(s)
    storage = _new(st, location=place.location if place else st.location,
                   data_locations=place.data_locations if place and st.location is None else st.data_locations,
                   protected=prod if st.protected is None else st.protected)
    resolved = _new(s, manager=manager, storage=storage)
    return _new(resolved, image=_image(resolved, resolved.home[1]))


def bucket_place(s: StackSpec) -> places.BucketPlace | None:
    """Where a multi-region stack's one bucket lives: the place ``storage.location`` names (normalised). Never derived
    from the regions: adding or removing one would move the bucket, and its location and ``dataLocations`` are
    ForceNew (None: unset; the rules name the places that hold every region)."""
    st = s.storage
    return places.place_of(st.location, st.data_locations) if st.location is not None else None


def view(s: StackSpec, index: int, jobs: list[int], context: dict[str, Any]) -> tuple[StackSpec | None,
                                                                                     list[Problem]]:
    """Region ``index`` of the resolved multi-region stack ``s`` as a resolved single-region stack running the jobs
    at ``jobs``: its own zone, cluster, networks, slices and prices, and its own copies of every stack-wide section
    (nothing it holds is held by ``s`` or another view). Problems of the model's raw-key checks come back with it."""
    r: RegionSite = s.regions[index]
    skip = {"manager", "regions", "dispatch", "zone", "cluster", "network", "slices", "jobs", "prices", "region",
            "source", "site", "site_index", "views", "fits"}
    own = lambda x: x.model_copy(deep=True) if isinstance(x, BaseModel) else x  # noqa: E731
    data = {f.alias or n: own(getattr(s, n)) for n, f in type(s).model_fields.items() if n not in skip}
    data |= {"gcp:region": r.region, "gcp:zone": r.zone, _ns("cluster"): own(r.cluster),
             _ns("network"): own(r.network), _ns("slices"): tuple(own(x) for x in r.slices),
             _ns("prices"): own(r.prices or s.prices), _ns("jobs"): tuple(own(s.jobs[k]) for k in jobs)}
    sink: list[Problem] = []
    written = StackSpec.model_validate(data, context={"problems": sink, "stack_file": context.get("stack_file"),
                                                      "view": True})
    return _new(resolve(written), site=own(r), site_index=index), sink


def with_views(s: StackSpec, views: tuple[StackSpec, ...], fits: dict[str, tuple[int, ...]]) -> StackSpec:
    """The multi-region stack ``s`` holding its region views and where each queued job fits."""
    return _new(s, views=views, fits=fits)


