"""The restart shape's precompile (``maxtext_trainer.precompile_restart_shape``, warm local runs).

A two-slice local job that loses one slice restarts on one worker; while the first attempt trains, rank 0 compiles
MaxText's train step for that one-worker shape in a process of its own, into the persistent compilation cache the
restart reads. Its errors must reach the drill's report, not only the worker's log: the trainer turns a failed
precompile into a ``precompile_failed`` progress event (``watch_precompile``), which fails the drill and shows in
its figures. The slow test runs the real compile on the tiny CPU model into an empty cache.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
import maxtext_trainer as mt  # noqa: E402 (the trainer's own import path)


def _argv(tmp_path: Path, base: str, **extra: str) -> list[str]:
    settings = mt.local_settings({"base_output_directory": str(tmp_path / "out"), "run_name": "pc", "steps": "3",
                                  "jax_cache_dir": str(tmp_path / "jax-cache")} | extra)
    return ["maxtext_trainer.py", base] + [f"{k}={v}" for k, v in settings.items()]


def _watch(proc) -> list[tuple[int, str]]:
    failures: list[tuple[int, str]] = []
    mt.watch_precompile(proc, lambda rc, error: failures.append((rc, error))).join(timeout=600)
    return failures


def test_a_failed_precompile_is_reported_with_its_error(tmp_path):
    """The real precompile process, on a MaxText config that is not there: it exits non-zero and the watcher hands
    its exit code and the end of its stderr to the trainer's progress event; only the one-worker shape is made."""
    proc = mt.precompile_restart_shape(_argv(tmp_path, str(tmp_path / "no-base.yml")), 1)
    failures = _watch(proc)
    assert len(failures) == 1, failures
    rc, error = failures[0]
    assert rc != 0 and "no MaxText config at" in error and "no-base.yml" in error
    with pytest.raises(ValueError, match="one-worker shape"):
        mt.precompile_restart_shape([], 2)


def test_a_failed_precompile_fails_the_drill_and_shows_in_its_figures(tmp_path):
    """The drill reads the event: the figure says failed and why, a problem fails the report, and the wait for the
    spares before the kill does not wait for a compile that will never end."""
    import types

    from drills.local import LocalDrill, LocalDrillOptions, pick_job
    from offline import engine
    from stackspec import spec as stack_spec

    spec = stack_spec.load("dev", engine.stack_config("dev"))
    cluster = types.SimpleNamespace(spares=1, spares_refused=[], live_workers=lambda: [1, 2])
    drill = LocalDrill(spec, pick_job(spec, None), tmp_path, LocalDrillOptions(), cluster=cluster)
    assert drill._precompile_problems() == []  # none started: nothing to say
    drill.timeline.on_event({"event": "precompile_started", "t": 1.0, "world": 2, "shape": 1})
    assert drill._precompile_problems() == []
    assert drill.report.figures["restart shape's train step precompiled (s)"] is None  # not done: said so
    drill.timeline.on_event({"event": "precompile_failed", "t": 2.0, "world": 2, "shape": 1, "rc": 1,
                             "error": "SystemExit: precompile_restart_shape: no MaxText config at /x"})
    problems = drill._precompile_problems()
    assert problems and "no MaxText config at /x" in problems[0]
    assert drill.report.figures["restart shape's train step precompiled (s)"].startswith("failed (exit 1: ")


@pytest.mark.slow
def test_the_precompile_fills_the_cache_the_one_worker_restart_reads(tmp_path, capfd):
    """The real thing on the tiny CPU model: the process compiles the one-worker train step, says so on its progress
    line and leaves entries in the run's persistent compilation cache; it exits 0, so the watcher reports nothing.
    The warm-spare drill runs this precompile too, but into the session's shared cache, which earlier runs filled:
    only here does an empty cache show what the precompile itself wrote. (Mutation, 2026-11-28: the precompile's
    argv without the run's jax_cache_dir, so it compiles into MaxText's default cache: this test fails, while the
    drill, whose figure is only the compile's time, would still pass with a restart that finds nothing.)"""
    base = os.path.join(importlib.util.find_spec("maxtext").submodule_search_locations[0], "configs", "base.yml")
    proc = mt.precompile_restart_shape(_argv(tmp_path, base), 1)
    assert _watch(proc) == [] and proc.returncode == 0
    assert f'{mt.PROGRESS} {{"event": "precompiled"' in capfd.readouterr().out
    assert any((tmp_path / "jax-cache").iterdir()), "nothing written to the persistent compilation cache"
