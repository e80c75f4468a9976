"""Jobs against the worker groups, their meshes and their checkpoint period."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import tpu
from ..errors import MISSING
from ..model.types import _ns

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def check(spec: StackSpec, fail) -> None:
    available = {g.name: g.replicas for g in spec.groups}
    seen: set[str] = set()
    for i, j in enumerate(spec.jobs):
        k = f"{_ns('jobs')}[{i}]"
        if j.name in seen:
            fail(f"{k}.name", j.name, "job names must be unique")
        seen.add(j.name)
        if j.group not in available:
            fail(f"{k}.group", MISSING if j.group is None else j.group,
                 f"{'required with several worker groups' if j.group is None else 'no such worker group'}; "
                 f"allowed: {', '.join(available)}")
            continue
        n = available[j.group]
        key = "maxSlices" if j.elastic else "slices"
        high, low = j.slices, j.min_slices  # resolved: (stackspec.defaults)
        if high > n:
            fail(f"{k}.{key}", high, f"worker group {j.group} has only {n} slice(s); allowed: 1..{n}")
            continue
        if low > high:
            fail(f"{k}.minSlices", low, f"must be at most maxSlices ({high})")
            continue
        shape = spec.group(j.group).shape
        if msg := tpu.mesh_error("ici", dict(j.ici), shape.chips):
            fail(f"{k}.ici", dict(j.ici), f"ICI mesh must tile the {shape.chips} chips of a {shape.pod_type} "
                 f"slice: {msg}")
        for count in sorted({low, high}):
            if msg := tpu.mesh_error("dcn", dict(j.dcn), count):
                fail(f"{k}.dcn", dict(j.dcn), f"DCN mesh must tile {count} slice(s): {msg}")
        if not j.elastic and spec.group(j.group).spot:
            fail(f"{k}.mode", j.mode, f"worker group {j.group} runs on Spot capacity: jobs there must be "
                 "elastic; allowed: elastic")
        if j.elastic and j.maxtext.get("enable_checkpointing", "true").lower() in ("false", "0"):
            # Ray Train restarts an elastic job from its latest checkpoint after a preemption or a resize
            # (workloads/trainer/maxtext_trainer.py): without checkpoints every restart begins at step 0.
            fail(f"{k}.maxtext.enable_checkpointing", j.maxtext["enable_checkpointing"], "an elastic job resumes "
                 "from its checkpoints after each preemption or resize: without them it restarts at step 0; "
                 "drop the key, or run the job as multislice")
        period = j.checkpoint_plan.period
        if spec.group(j.group).spot and period >= j.steps:
            # The policy pack's rayjob-spot-elastic refuses the rendered RayJob alike (policies/rules/stack.py):
            # checked here too, so lint answers as preview does.
            fail(f"{k}.checkpointPeriod", period, f"worker group {j.group} runs on Spot capacity and the job saves "
                 f"its first checkpoint at step {period}, at or after its last ({j.steps} steps): nothing is saved "
                 "before a preemption; set checkpointPeriod below steps")
    # Running jobs on the shared cluster would queue for the same slices while their
    # activeDeadlineSeconds ticks: the slices they ask for together must exist.
    for group, n in available.items():
        running = [(i, j) for i, j in enumerate(spec.jobs)
                   if j.group == group and j.cluster == "shared" and not j.suspend]
        if running and sum(j.slices or 0 for _, j in running) > n:
            i, _ = running[-1]
            fail(f"{_ns('jobs')}[{i}].suspend", False,
                 f"jobs {[j.name for _, j in running]} together ask for "
                 f"{sum(j.slices or 0 for _, j in running)} slice(s) of worker group {group}, which has {n}; "
                 "suspend all but what fits (suspend: true)")


def checkpoint(spec: StackSpec, fail) -> None:
    """An elastic job's checkpoint period comes from Young/Daly's rule (:func:`stackspec.defaults.checkpoint_plan`):
    it needs the save time, the preemption interval and the step time, unless checkpointPeriod is set."""
    for i, j in enumerate(spec.jobs):
        if j.group not in {g.name for g in spec.groups} or j.checkpoint_how is not None:
            continue
        missing = [key for key, v in (("checkpointSaveSeconds", j.checkpoint_save_seconds),
                                      ("expectedPreemptionIntervalMinutes", j.expected_preemption_interval_minutes),
                                      ("expectedStepSeconds", spec.step_time(j))) if v is None]
        if missing:
            fail(f"{_ns('jobs')}[{i}].{missing[0]}", MISSING,
                 f"an elastic job's checkpoint period comes from Young/Daly's rule: set "
                 f"{', '.join(missing)} (MaxText logs each save's and step's seconds), or checkpointPeriod")


# Multi-tier checkpointing's MaxText keys (workloads/multitier.py). MaxText saves locally where
# ``step % config.local_checkpoint_period == 0`` (AI-Hypercomputer/maxtext src/MaxText/checkpointing.py,
# maybe_save_checkpoint), so a period of 0 divides by zero at the first step, and its configs/types.py
# (EmergencyCheckpointing, maxtext 0.2.1) takes both the local period and the replicator's backup interval as
# positive. GKE's replicator ("Train large-scale machine learning models on GKE with Multi-Tier Checkpointing",
# https://cloud.google.com/kubernetes-engine/docs/how-to/machine-learning/training/multi-tier-checkpointing) copies
# each slice's local checkpoint to a peer slice, so a job of one slice has no peer to restore from but the bucket.
MULTI_TIER_POSITIVE = ("local_checkpoint_period", "multi_tier_checkpointing_backup_interval_minutes")


def _positive_int(value: str) -> bool:
    try:
        return int(value) > 0
    except ValueError:
        return False


def multi_tier(spec: StackSpec, fail) -> None:
    """Under unverified.multiTierCheckpointing: the bucket has hierarchical namespace, each job spans two slices or
    more, its local period and backup interval (when the maxtext passthrough sets them) are positive."""
    if not spec.unverified.multi_tier_checkpointing:
        return
    if not spec.storage.hierarchical_namespace:
        # GKE's multi-tier how-to (URL above), "Before you begin", verbatim: "Create a Cloud Storage bucket, if you
        # don't have one for your project. Make sure you enable hierarchical namespace, otherwise backups will
        # fail." Cloud Storage's "Create and manage buckets with hierarchical namespace enabled"
        # (https://cloud.google.com/storage/docs/create-hns-bucket), verbatim: "You cannot enable hierarchical
        # namespace in an existing bucket."
        fail(_ns("storage.hierarchicalNamespace"), False,
             "multi-tier checkpointing backs up to a bucket with hierarchical namespace (GKE's multi-tier "
             "checkpointing how-to); set it true (a new bucket: GCS turns it on only at creation) or leave "
             f"{_ns('unverified.multiTierCheckpointing')} off")
    for i, j in enumerate(spec.jobs):
        for key in MULTI_TIER_POSITIVE:
            v = j.maxtext.get(key)  # the passthrough keeps values as MaxText's command line takes them: strings
            if v is not None and not _positive_int(v):
                fail(f"{_ns('jobs')}[{i}].maxtext.{key}", v,
                     f"multi-tier checkpointing needs a positive {key} (MaxText saves at step % period == 0); "
                     "drop it to take the planned one")
        most = j.max_slices or j.slices or 1
        if most < 2:
            fail(f"{_ns('jobs')}[{i}].{'maxSlices' if j.elastic else 'slices'}", most,
                 "multi-tier checkpointing copies each slice's local checkpoint to a peer slice (GKE's replicator): "
                 "a job of one slice has none; give it two slices or more, or leave "
                 f"{_ns('unverified.multiTierCheckpointing')} off")
