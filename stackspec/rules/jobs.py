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
