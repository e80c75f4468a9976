"""``slicectl drill --local --scenario region-loss``: region A (its own local Ray cluster) is lost whole mid-run and
the job resumes in region B (this module's cluster) from the shared bucket. Nothing is mocked.

A module of its own, so its cluster and drill run beside ``test_drill_local.py``'s mid-save drill on the other
pytest-xdist worker (``--dist loadfile``, conftest ``LONGEST_FIRST``) instead of after it on one cluster.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from drills.checkpoints import checkpoint_dirs, corrupt_checkpoints
from drills.local import pick_job
from drills.local_train import ROOT
from drills.localray import pid_alive
from offline import engine
from stackspec import spec as stack_spec


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


@pytest.mark.slow
def test_region_loss_drill_resumes_in_another_region_from_the_shared_bucket(local_cluster, jax_cache):
    """``--scenario region-loss``: the job trains in region A (its own local cluster, 2 slices) into the
    shared bucket; region A is lost whole between checkpoints (head, slice nodes and driver SIGKILLed);
    the job is dispatched to region B (the module's cluster) on 1 slice under the same run name and
    resumes from the last committed checkpoint, continuing region A's loss curve to the final step."""
    from drills.regions import Region, RegionLossDrill, RegionLossOptions
    from workloads.trainer_args import RAY_RESULTS_SUBDIR

    dev = _spec("dev")
    job = pick_job(dev, None)
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tr-", dir=ROOT / "build"))
    opts = RegionLossOptions(region_a=Region("region-a", 2), region_b=Region("region-b", 1), steps=20,
                             checkpoint_period=5, step_delay=0.15, timeout_s=600, jax_cache_dir=jax_cache)
    try:
        drill = RegionLossDrill(dev, job, run_dir, opts, cluster_b=local_cluster)
        report = drill.run()
        assert report.ok, report.notes
        committed_at_loss = report.figures["checkpoints committed at the loss"]
        assert report.restored_step == max(committed_at_loss) >= opts.checkpoint_period
        assert 0 < report.steps_lost <= opts.checkpoint_period
        assert report.figures["slices"] == "2 -> 1" and report.figures["region A processes left"] == 0
        assert report.figures["steps both regions ran"] >= 1
        assert report.figures["first step |loss - region A's|"] <= 1e-4
        assert report.final_step == report.target_step == opts.steps - 1
        # One run under one name in the bucket, whichever region wrote it.
        assert [p.name for p in drill.bucket.iterdir() if p.name != RAY_RESULTS_SUBDIR] == [job.run_name]
        committed, _ = checkpoint_dirs(drill.ckpt_dir)
        assert set(committed_at_loss) <= set(committed) and committed[-1] == opts.steps - 1
        assert corrupt_checkpoints(drill.ckpt_dir) == []
        assert 0 <= report.detect_s < report.resume_s and set(report.phases) == {
            "detect", "reschedule", "process_start", "restore", "first_step"}
        assert {lane for lane, *_ in report.lanes} == {"region-a (2 slices)", "region-b (1 slice)"}
        assert {"json", "markdown", "png"} <= set(drill.files)
        # Region A is gone, every process of it; region B (the module's cluster) is whole.
        assert not any(n.alive for n in drill.a.cluster.nodes) and not pid_alive(drill.a.driver.proc.pid)
        assert len(local_cluster.live_workers()) == 2 and not pid_alive(drill.b.driver.proc.pid)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
