"""The drills' trainer driver runs with Ray's log deduplication off: the drills read their progress from the
driver's output, and Ray folds worker lines that differ only in numbers into one "[repeated Nx across cluster]"
(a restarted worker's step lines were lost that way, 2026-11-28)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from drills import local_train
from workloads.trainer.maxtext_trainer import PROGRESS


def driver(tmp_path, monkeypatch, code: str, **env: str) -> local_train.DriverRun:
    """A real driver process through ``start_driver``, running ``code`` as the trainer script, to its end."""
    script = tmp_path / "driver.py"
    script.write_text(code)
    monkeypatch.setattr(local_train, "TRAINER_SCRIPT", script)
    run = local_train.start_driver(SimpleNamespace(env=os.environ | env, run_dir=tmp_path), [],
                                   tmp_path / "driver.log")
    assert run.wait(timeout=60) == 0
    return run


def test_the_driver_runs_with_rays_log_deduplication_off(tmp_path, monkeypatch):
    run = driver(tmp_path, monkeypatch, "import json, os\n"
                 f"print({PROGRESS!r} + ' ' + json.dumps({{'event': 'env', 't': 0, "
                 "'dedup': os.environ.get('RAY_DEDUP_LOGS')}))\n", RAY_DEDUP_LOGS="1")
    assert [e["dedup"] for e in run.events if e["event"] == "env"] == ["0"], json.dumps(run.events)


def rays_folded_output(lines: list[str]) -> list[str]:
    """What Ray 2.60's driver prints for ``lines`` coming from two worker processes (a worker and its restarted
    replacement) within its 5 s window, with deduplication on: Ray's own LogDeduplicator and its print path's
    formatting, not ours (ray/_private/ray_logging/__init__.py, ray/_private/worker.py print_worker_logs)."""
    from ray._private import ray_logging

    clock = iter(float(t) for t in range(1000))
    dedup = ray_logging.LogDeduplicator(5, None, None, _timesource=lambda: next(clock))
    out = []
    for i, line in enumerate(lines):
        for batch in dedup.deduplicate({"ip": "10.0.0.1", "pid": 100 + (i > 0), "job": "01", "is_err": False,
                                        "lines": [line], "actor_name": "RayTrainWorker", "task_name": None}):
            out += [f"(RayTrainWorker pid={batch['pid']}) {x}" for x in batch["lines"]]
    return out


def test_a_folded_progress_stream_is_refused_by_name(tmp_path, monkeypatch):
    """A progress line Ray folded ("[repeated Nx across cluster]") stands for lines the driver never printed: the
    run records it and its verdict line names the cause and RAY_DEDUP_LOGS=0 (the drills fail on it)."""
    from ray._private import ray_logging

    monkeypatch.setattr(ray_logging, "RAY_DEDUP_LOGS", True)  # Ray's default, whatever this process was given
    steps = [f"{PROGRESS} " + json.dumps({"event": "step", "t": 1000.0 + s, "world": 1, "rank": 0, "step": s})
             for s in range(12)]
    printed = rays_folded_output(steps)
    assert len(printed) < len(steps) and any("repeated" in p for p in printed)  # Ray did fold them
    run = driver(tmp_path, monkeypatch, f"for line in {printed!r}:\n    print(line)\n")
    assert len(run.steps()) < len(steps) and run.folded
    problem = run.folded_problem()
    assert problem and "folded" in problem and "RAY_DEDUP_LOGS=0" in problem and str(run.log) in problem


def test_an_unfolded_stream_has_no_problem(tmp_path, monkeypatch):
    run = driver(tmp_path, monkeypatch, "import json\n"
                 f"for s in range(12):\n    print({PROGRESS!r} + ' ' + json.dumps({{'event': 'step', "
                 "'t': 1000.0 + s, 'world': 1, 'rank': 0, 'step': s}))\n")
    assert run.steps() == list(range(12)) and run.folded == [] and run.folded_problem() is None


def test_the_cluster_drills_log_refuses_folded_lines():
    """The cluster drill reads the RayJob's driver log (drills.cluster): Ray's folded lines there are recorded."""
    from ray._private import ray_logging

    from drills.train_log import TrainLog

    steps = [f"completed step: {s}, seconds: 0.5, loss: 10.8" for s in range(12)]
    saved = ray_logging.RAY_DEDUP_LOGS
    ray_logging.RAY_DEDUP_LOGS = True
    try:
        printed = rays_folded_output(steps)
    finally:
        ray_logging.RAY_DEDUP_LOGS = saved
    log = TrainLog()
    log.feed("".join(p + "\n" for p in printed))
    assert log.folded and log.steps_run < len(steps)
    clean = TrainLog()
    clean.feed("".join(s + "\n" for s in steps))
    assert clean.folded == [] and clean.steps_run == len(steps)


def test_a_local_drill_fails_on_a_driver_stream_ray_folded(tmp_path, monkeypatch):
    """The local drill's verdict (LocalDrill.run's end) takes every driver's folded lines as a problem, named."""
    from ray._private import ray_logging

    from drills.local import LocalDrill, LocalDrillOptions, pick_job
    from offline import engine
    from stackspec import spec as stack_spec

    monkeypatch.setattr(ray_logging, "RAY_DEDUP_LOGS", True)
    steps = [f"{PROGRESS} " + json.dumps({"event": "step", "t": 1000.0 + s, "world": 1, "rank": 0, "step": s})
             for s in range(12)]
    script = tmp_path / "driver.py"
    script.write_text(f"for line in {rays_folded_output(steps)!r}:\n    print(line)\n")
    monkeypatch.setattr(local_train, "TRAINER_SCRIPT", script)
    spec = stack_spec.load("dev", engine.stack_config("dev"))
    # What LocalDrill reads of a running cluster before its run (a drill passed one does not start its own).
    cluster = SimpleNamespace(spares=0, spares_refused=[], live_workers=lambda: [1, 2], env=dict(os.environ),
                              run_dir=tmp_path)
    drill = LocalDrill(spec, pick_job(spec, None), tmp_path, LocalDrillOptions(), cluster=cluster)
    assert drill._folded_problems() == []
    drill.drivers.append(local_train.start_driver(cluster, [], tmp_path / "driver-0.log"))
    assert drill.drivers[0].wait(timeout=60) == 0
    problems = drill._folded_problems()
    assert len(problems) == 1 and "RAY_DEDUP_LOGS=0" in problems[0] and "driver-0.log" in problems[0]


def test_the_rayjobs_driver_on_the_cluster_runs_with_rays_log_deduplication_off():
    """The cluster drill reads the RayJob's driver log, and refuses it folded: the driver must run with
    RAY_DEDUP_LOGS=0 there too. Ray 2.60's JobSupervisor (a worker process the head's raylet starts from the head
    container's environment) runs the entrypoint with a copy of its own environment (job_supervisor.py:
    ``env = os.environ.copy()``); that environment, as each stack renders it (every RayJob: its own cluster's head or
    the shared RayCluster's), given to a real Python importing Ray's constants, must read deduplication off. Not
    through the RayJob's runtime env: every actor without one of its own inherits it, and the warm spares serve
    only workers with none."""
    import subprocess
    import sys

    from offline import engine
    from stackspec import spec as stack_spec
    from workloads import manifests

    heads = {}
    for stack in ("dev", "prod", "multi", "team-eu"):
        spec = stack_spec.load(stack, engine.stack_config(stack))
        for view, job in [(v, j) for v in spec.region_views() for j in v.jobs]:
            rayjob = manifests.ray_job(view, job)
            assert "runtimeEnvYAML" not in rayjob["spec"], (stack, job.name)
            cluster = rayjob["spec"].get("rayClusterSpec") or manifests.ray_cluster(view)["spec"]
            [head] = cluster["headGroupSpec"]["template"]["spec"]["containers"]
            env = tuple(sorted((e["name"], e["value"]) for e in head.get("env", [])))
            heads.setdefault(env, []).append(f"{stack}/{job.name}")
    for env, jobs in heads.items():
        ours = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # Ray's default where unset
        read = subprocess.run([sys.executable, "-c", "from ray._private import ray_constants as c\n"
                               "print(c.RAY_DEDUP_LOGS)"], env=ours | dict(env), capture_output=True, text=True,
                              check=True, timeout=120)
        assert read.stdout.strip() == "False", (jobs, env, read.stdout)


def test_only_rays_own_mark_at_a_lines_end_is_a_fold():
    """Ray appends its mark at the end of the line it prints for several (DedupState.formatted: the line, then
    " [repeated Nx across cluster]", its one-time hint and colour codes). The same words inside a line, e.g. the
    error text a progress event carries (spare_refused, precompile_failed) quoting another log, are not a fold:
    the verdict would blame Ray's deduplication for a run it did not touch."""
    from ray._private.ray_logging import DedupState

    from drills.train_log import is_folded

    step = f'{PROGRESS} {{"event": "step", "step": 3, "t": 1.0, "rank": 0}}'
    for hint in (True, False):  # Ray's hint comes with the first folded line only (log_once)
        from ray._private import ray_logging

        ray_logging.log_once = (lambda _key, on=hint: on)
        try:
            assert is_folded(f"(RayTrainWorker pid=7) {DedupState(0, 3, step, {}, set()).formatted()}\n")
        finally:
            from ray.util.debug import log_once

            ray_logging.log_once = log_once
    quoted = json.dumps({"event": "spare_refused", "t": 1.0, "rank": 0,
                         "error": "UNAVAILABLE: (raylet) worker died [repeated 2x across cluster] at start"})
    assert not is_folded(f"(RayTrainWorker pid=7) {PROGRESS} {quoted}")
    assert not is_folded("completed step: 4, note: [repeated 2x across cluster] is Ray's mark, loss: 7.1")
