"""A team's own JAX trainer (``trainers/tiny_jax.py``, issue 27) under ``slicectl train --local``: a real local Ray
cluster, nothing mocked. Its own module, not ``tests/test_train_local.py``'s: that module's runs go in order (the
trained run, then the reshard drill that reads it), and this run needs neither, so scheduled by file it can run on the
other worker beside them. It runs on that worker's cluster (``conftest.local_cluster``, one per pytest process)."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest

from drills.local_train import ROOT, load_job, train_local

FIXTURES = ROOT / "tests" / "fixtures" / "rough"  # Pulumi.own.yaml: job tiny-own runs trainers/tiny_jax.py


@pytest.mark.slow
def test_a_teams_own_jax_trainer_trains_checkpoints_and_resumes_locally(local_cluster, jax_cache):
    """``trainers/tiny_jax.py`` under the real JaxTrainer on the local Ray cluster (two slice nodes, two
    workers): every step reported, the loss falls, rank 0's checkpoints land in Ray Train's storage, and a second run
    of the same job with more steps resumes after the last checkpoint instead of starting over."""
    spec, job = load_job("own", "tiny-own", FIXTURES)
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="to-", dir=ROOT / "build"))
    steps, period = 12, 4
    try:
        first = train_local(spec, job, slices=2, run_dir=run_dir, steps=steps, checkpoint_period=period,
                            timeout=900, cluster=local_cluster, jax_cache_dir=jax_cache)
        assert first["ok"], first
        assert first["steps"] == list(range(steps)) and first["world_size"] == 2
        losses = first["losses"]
        assert all(math.isfinite(v) for v in losses.values()) and losses[steps - 1] < losses[0]
        assert first["checkpoint_step"] == steps - 1
        # Ray Train's checkpoint directories (beside them it keeps checkpoint_manager_snapshot.json).
        stored = [p for p in (run_dir / "out" / "ray-results" / job.run_name).glob("checkpoint_*") if p.is_dir()]
        assert len(stored) == steps // period  # steps 3, 7, 11
        second = train_local(spec, job, slices=2, run_dir=run_dir, steps=steps + 4, checkpoint_period=period,
                             timeout=900, cluster=local_cluster, jax_cache_dir=jax_cache)
        assert second["ok"], second
        assert second["steps"] == list(range(steps, steps + 4)), second["steps"]  # resumed, not restarted
        assert second["losses"][steps] < losses[steps - 1]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
