"""A multi-region stack: the manager, the regions and what spans them, then each region as a single-region view
(its problems named at the region's keys, ``stackspec.regions.rename``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .. import defaults, machine_regions
from .. import regions as places
from ..errors import MISSING, Problem
from ..gke import PROD_RELEASE_CHANNELS
from ..model.regions import RegionSite
from ..model.types import NS, _ns
from .single import single_region

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail, context: dict[str, Any]) -> StackSpec:
    """The manager, the regions and what spans them; then each region as a single-region view, whose
    problems are named at the region's keys (``stackspec.regions.rename``)."""
    m, ns = spec.manager, _ns("regions")
    if m is None:
        return spec  # reported by _one_place
    if spec.prod and not m.deletion_protection:
        fail(_ns("manager.deletionProtection"), False, "a production cluster keeps deletion protection on")
    if spec.prod and m.release_channel not in PROD_RELEASE_CHANNELS:
        fail(_ns("manager.releaseChannel"), m.release_channel, "prod enrols in a release channel with GKE's SLA; "
             f"allowed: {', '.join(PROD_RELEASE_CHANNELS)}")
    if not m.autopilot and (msg := machine_regions.error(m.system_machine_type, m.region)):
        # A Standard manager is regional: its pool's VMs go in the region's zones (cloud rule
        # gce-zone-offers-machine-type).
        fail(_ns("manager.systemMachineType"), m.system_machine_type, msg)
    if len(spec.regions) > places.MAX_REGIONS:
        fail(ns, [r.region for r in spec.regions], f"{len(spec.regions)} regions; a MultiKueueConfig lists at "
             f"most {places.MAX_REGIONS} clusters (Kueue v0.19.2 multikueue_types.go, MaxItems=20)")
    seen_region: dict[str, int] = {}
    seen_cluster = {m.name: _ns("manager.name")}
    for i, r in enumerate(spec.regions):
        if r.region in seen_region:
            fail(f"{ns}[{i}].region", r.region, f"{ns}[{seen_region[r.region]}] is in {r.region} too: one "
                 "cluster per region (list a zone's slices under its region's cluster)")
        seen_region.setdefault(r.region, i)
        if r.cluster.name in seen_cluster:
            fail(f"{ns}[{i}].cluster.name", r.cluster.name, f"{seen_cluster[r.cluster.name]} names this cluster "
                 "too: each cluster's name is unique (its node account, Secrets key and MultiKueueCluster are "
                 "named after it)")
        seen_cluster.setdefault(r.cluster.name, f"{ns}[{i}].cluster.name")
        if r.cluster.control_plane.access != "dns":
            # The manager's token job (workloads/multikueue.py) reaches each worker from its own VPC, through
            # the DNS-based endpoint's publicly trusted certificate and IAM; a private IP endpoint is not routable.
            fail(f"{ns}[{i}].cluster.controlPlane.access", r.cluster.control_plane.access, "a region's cluster is "
                 "reached by the manager's MultiKueue through its DNS endpoint; allowed: dns")
    if m.region in seen_region:
        pass  # a manager beside a worker in one region is fine; the manager is never one of its own workers
    bucket_place(spec, fail)
    jobs_in_regions(spec, fail)
    return build_views(spec, fail, context)


def jobs_in_regions(spec: StackSpec, fail) -> None:
    """Where each job runs: a region of the stack, or queued through the manager, which may run it twice after a
    re-dispatch, so only what holds the run's writer lease goes that way."""
    ns = _ns("regions")
    listed = [r.region for r in spec.regions]
    for k, j in enumerate(spec.jobs):
        key = _ns(f"jobs[{k}].region")
        if j.region is not None and j.region not in listed:
            fail(key, j.region, f"not a region of {ns}; allowed: {', '.join(listed)}")
        elif j.region is None and j.elastic:
            # Kueue v0.19.2 site/content/en/docs/concepts/elastic_workload.md:84 "No Multikueue support".
            fail(key, MISSING, "an elastic job stays in one region: MultiKueue does not dispatch elastic "
                 "workloads (Kueue's elastic workload docs: \"No Multikueue support\"); name the region whose "
                 f"cluster runs it; allowed: {', '.join(listed)}")
        elif j.region is None and not j.queued:
            fail(key, MISSING, "only a queued job (cluster: dedicated, not suspended) goes through the manager: "
                 "a job on a shared RayCluster or held outside Kueue is created in one region; name it; allowed: "
                 f"{', '.join(listed)}")
        elif through_manager(j) and j.trainer is not None:
            # Queued through the manager: after a re-dispatch a second copy of the run may start in another region
            # while the first still writes (docs/multikueue.md, "Two copies of one run"). The run's writer lease is
            # held by MaxText's trainer alone (workloads/trainer/lease.py, around MaxText's save call); a team's own
            # loop saves through ray.train.report, which nothing guards, so two copies could write one run's
            # checkpoints. Refused rather than run unguarded.
            fail(_ns(f"jobs[{k}].trainer.script"), j.trainer.script, "a job queued through the multi-region "
                 "manager may run twice after a re-dispatch, and only MaxText's trainer holds the run's writer lease; "
                 f"name the region whose cluster runs it (allowed: {', '.join(listed)}), or run MaxText")
    queued = [k for k, j in enumerate(spec.jobs) if through_manager(j) and j.trainer is None]
    if spec.unverified.multi_tier_checkpointing and queued:
        # The writer lease guards MaxText's save call with Orbax's own decision, taken once and pinned for that
        # call (workloads/trainer/lease.py save_decided_once). Under enable_multi_tier_checkpointing MaxText saves
        # through Orbax's ReplicatorCheckpointManager instead (maxtext 0.2.1 utils/train_utils.py:43), which hands
        # the save to an inner manager that decides again (orbax-checkpoint 0.12.8,
        # orbax/checkpoint/experimental/emergency/multi_tier_checkpointing/replicator_checkpoint_manager.py:403
        # "if not force and not self.should_save(step): return False", then :425 "saved = self._impl.save(", _impl
        # an orbax CheckpointManager (:323) whose save asks should_save again, checkpoint_manager.py:1417); Orbax's
        # emergency CheckpointManager likewise hands it to its persistent and local managers
        # (experimental/emergency/checkpoint_manager.py:807, :825). And the bucket is written by GKE's replicator,
        # not the trainer: "This class assumes that an independent service is responsible for reflecting any
        # checkpoints saved in local storage (e.g. RAMFS) to a persistent global storage (e.g. GCS)"
        # (replicator_checkpoint_manager.py:774-776), outside any lease of ours. So after a re-dispatch two copies
        # could write one run's checkpoints: refused for a job the manager queues, as a team's own trainer is.
        jobs_ = ", ".join(f"{spec.jobs[k].name} ({_ns(f'jobs[{k}]')})" for k in queued)
        fail(_ns("unverified.multiTierCheckpointing"), True, "multi-tier checkpointing saves outside the run's "
             "writer lease (Orbax's replicator manager decides each save again and GKE's replicator backs up to "
             f"the bucket), and {jobs_} {'is' if len(queued) == 1 else 'are'} queued through the multi-region "
             "manager, which may run a job twice after a re-dispatch; allowed: false, or name the region whose "
             f"cluster runs each ({_ns('jobs[].region')}: {', '.join(listed)})")


def through_manager(job) -> bool:
    """The manager's MultiKueue dispatches this job (and may re-dispatch it): queued, no region named, not elastic
    (an elastic job without a region is refused above)."""
    return job.region is None and job.queued and not job.elastic


def bucket_place(spec: StackSpec, fail) -> None:
    """One checkpoint bucket every region reads: a dual-region or multi-region holding them all."""
    st, regions_ = spec.storage, [r.region for r in spec.regions]
    ways = places.bucket_places(regions_)
    shown = "; ".join(w.describe() for w in ways)
    if st.location is None and not ways:
        fail(_ns("storage.location"), MISSING, f"no dual-region or multi-region holds all of {regions_} "
             "(https://cloud.google.com/storage/docs/locations): jobs resume only from a bucket every "
             "region reads; pick regions of one continent")
        return
    if st.location is None:
        # Day 2: derived from the regions, the place would change when a region is added or removed, and a bucket's
        # location and customPlacementConfig.dataLocations are ForceNew (terraform-provider-google
        # resource_storage_bucket.go: "If any of the data_locations changes, it will recreate the bucket"): the
        # protected checkpoint bucket would be refused or replaced. So the stack names it, once.
        best = ways[0]
        fail(_ns("storage.location"), MISSING, "required in a multi-region stack: a bucket's location and "
             "dataLocations cannot change once it exists (ForceNew), so they are named once, not derived from the "
             f"regions, and kept when a region is added or removed; holding all of {regions_}: {shown} (e.g. "
             f"location: {best.location}" + (f", dataLocations: {list(best.data_locations)}" if best.data_locations
                                              else "") + ")")
        return
    place = places.place_of(st.location, st.data_locations)
    missing = [r for r in regions_ if not place.contains(r)]
    if missing:
        fail(_ns("storage.location"), st.location, f"{place.describe()} does not hold {missing}: a job resumes "
             f"in whichever region admits it, from one bucket every region reads; allowed: {shown or 'none'}")


def build_views(spec: StackSpec, fail, context: dict[str, Any]) -> StackSpec:
    """Each region as a resolved single-region view (:func:`stackspec.defaults.view`) running its own jobs and the
    queued ones it fits, checked as a single-region stack; ``spec`` holding them."""
    queued = [k for k, j in enumerate(spec.jobs) if through_manager(j)]
    misfit: dict[int, list[tuple[int, Problem]]] = {k: [] for k in queued}

    def view(i: int, r: RegionSite, ks: list[int]) -> tuple[StackSpec | None, list[tuple[int | None, Problem]]]:
        sink: list[Problem] = []
        try:
            v, sink = defaults.view(spec, i, ks, context)
            local = lambda key, value, msg: sink.append(Problem(key, value, msg))  # noqa: E731
            single_region(v, local, {"stack_file": context.get("stack_file"), "view": True}, sink)
        except ValueError as e:  # the sections were checked already: only a bug lands here
            sink.append(Problem(f"{ns}[{i}]", r.region, str(e)))
            v = None
        own = ("cluster", "network", "slices") + (("prices",) if r.prices else ())
        out = []
        for p in sink:
            mk = re.match(rf"{re.escape(NS)}:jobs\[(\d+)\]", p.key)
            k = ks[int(mk[1])] if mk and int(mk[1]) < len(ks) else None
            out.append((k, Problem(places.rename(p.key, i, own, dict(enumerate(ks)), NS), p.value, p.message)))
        return v, out

    ns = _ns("regions")
    views: list[StackSpec] = []
    fits: dict[str, tuple[int, ...]] = {}
    for i, r in enumerate(spec.regions):
        ks = sorted({k for k, j in enumerate(spec.jobs) if j.region == r.region} | set(queued))
        v, found = view(i, r, ks)
        bad = {k for k, _ in found if k in misfit}
        for k, p in found:
            if k in misfit:
                misfit[k].append((i, p))
        if bad:  # the region's view without the queued jobs it cannot run
            v, found = view(i, r, [k for k in ks if k not in bad])
        for _, p in found:
            fail(p.key, p.value, p.message)
        if v is not None:
            views.append(v)
        for k in queued:
            if k not in bad:
                fits.setdefault(spec.jobs[k].name, ())
                fits[spec.jobs[k].name] += (i,)
    for k in queued:
        if spec.jobs[k].name not in fits:
            for i, p in misfit[k]:
                fail(p.key, p.value, f"fits no region; in {spec.regions[i].region} ({spec.regions[i].cluster.name})"
                                     f": {p.message}")
    return defaults.with_views(spec, tuple(views), fits)
