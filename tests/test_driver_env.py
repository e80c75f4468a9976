"""The drills' trainer driver runs with Ray's log deduplication off: the drills read their progress from the
driver's output, and Ray folds worker lines that differ only in numbers into one "[repeated Nx across cluster]"
(a restarted worker's step lines were lost that way, 2026-11-28)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from drills import local_train
from workloads.trainer.maxtext_trainer import PROGRESS


def test_the_driver_runs_with_rays_log_deduplication_off(tmp_path, monkeypatch):
    script = tmp_path / "driver.py"
    script.write_text("import json, os\n"
                      f"print({PROGRESS!r} + ' ' + json.dumps({{'event': 'env', 't': 0, "
                      "'dedup': os.environ.get('RAY_DEDUP_LOGS')}))\n")
    monkeypatch.setattr(local_train, "TRAINER_SCRIPT", script)
    cluster = SimpleNamespace(env={**os.environ, "RAY_DEDUP_LOGS": "1"}, run_dir=tmp_path)
    run = local_train.start_driver(cluster, [], tmp_path / "driver.log")
    assert run.wait(timeout=60) == 0
    assert [e["dedup"] for e in run.events if e["event"] == "env"] == ["0"], json.dumps(run.events)
