"""``slicectl train --local``: a real local Ray cluster running the real trainer script and
MaxText on CPU (tiny model). Nothing is mocked."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest

from drills.local_train import ROOT, load_job, parse_line, train_local
from drills.localray import pid_alive


def test_parse_line_reads_progress_through_rays_prefixes():
    line = ('\x1b[36m(RayTrainWorker pid=1)\x1b[0m slicectl-progress {"event": "step", "t": 1.0, '
            '"world": 2, "step": 4}\x1b[32m [repeated 2x across cluster]\x1b[0m')
    assert parse_line(line) == ("progress", {"event": "step", "t": 1.0, "world": 2, "step": 4})
    assert parse_line('slicectl-result {"ok": true}') == ("result", {"ok": True})
    assert parse_line("completed step: 3, seconds: 0.1") is None


@pytest.mark.slow
def test_train_local_dev_two_slices_trains_and_checkpoints():
    spec, job = load_job("dev", None)
    # Short path: Ray's Unix sockets live under the run directory.
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tt-", dir=ROOT / "build"))
    steps, period = 8, 3
    try:
        summary = train_local(spec, job, slices=2, run_dir=run_dir, steps=steps,
                              checkpoint_period=period, timeout=900)
        assert summary["ok"], summary
        assert summary["steps"] == list(range(steps))
        losses = summary["losses"]
        assert sorted(losses) == list(range(steps))
        assert all(math.isfinite(v) for v in losses.values())
        assert losses[steps - 1] < losses[0]  # it learns
        assert summary["checkpoint_step"] == steps - 1
        ckpt = run_dir / "out" / job.run_name / "checkpoints"
        committed = sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit())
        # Every checkpoint_period steps plus the final step, all committed.
        assert committed == sorted(set(range(0, steps, period)) | {steps - 1})
        # Two workers: real multi-process SPMD, one per local slice node.
        assert summary["world_size"] == 2
        assert summary["result"]["ok"] is True
        # Every process the cluster started is gone.
        assert summary["node_pids"] and not any(pid_alive(p) for p in summary["node_pids"])
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
