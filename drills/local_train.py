"""Run the stack's trainer script as a Ray driver against a :class:`LocalRayCluster`.

Shared by ``slicectl train --local`` and the local drill: start the driver in its own
process group, stream its output to a log file, and turn the trainer's
``slicectl-progress`` / ``slicectl-result`` lines into events.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from drills.localray import LocalRayCluster, deferred_interrupts
from drills.train_log import folded_problem, is_folded
from stackspec import spec as stack_spec
from stackspec.spec import Job, StackSpec
from workloads.manifests import DRIVER_ENV
from workloads.trainer.maxtext_trainer import PROGRESS as _PROGRESS
from workloads.trainer.maxtext_trainer import RESULT as _RESULT
from workloads.trainer_args import TRAINER_SCRIPT, trainer_argv

ROOT = Path(__file__).resolve().parents[1]
# One persistent JAX compilation cache for every local run on this machine (MaxText's
# jax_cache_dir): a restarted or repeated run loads its compiled steps instead of compiling.
JAX_CACHE_DIR = ROOT / "build" / "jax-cache"

# The trainer owns its protocol: its line markers, followed by one space and JSON.
PROGRESS = _PROGRESS + " "
RESULT = _RESULT + " "


def parse_line(line: str) -> tuple[str, dict] | None:
    """``("progress"|"result", payload)`` for a trainer line (Ray prefixes it with the actor)."""
    for kind, mark in (("progress", PROGRESS), ("result", RESULT)):
        i = line.find(mark)
        if i >= 0:
            text = line[i + len(mark):].strip()
            # A line Ray's log deduplication folded ends in " [repeated Nx across cluster]" plus colour codes: it
            # is read (DriverRun.folded records it, and the drills' verdicts refuse the run's counts).
            text = text[: text.rfind("}") + 1]
            try:
                return kind, json.loads(text)
            except json.JSONDecodeError:
                return None
    return None


@dataclass
class DriverRun:
    """The trainer driver process and what it has reported so far."""

    proc: subprocess.Popen
    log: Path
    events: list[dict] = field(default_factory=list)
    result: dict | None = None
    _seen: set = field(default_factory=set)
    _reader: threading.Thread | None = None
    # Progress and result lines Ray's log deduplication folded (drills.train_log.is_folded): each stood for lines
    # that never reached this stream, so nothing counted from it is the run's (folded_problem).
    folded: list[str] = field(default_factory=list)

    def folded_problem(self) -> str | None:
        return folded_problem(self.folded, f"the driver's output ({self.log})")

    def steps(self) -> list[int]:
        return [e["step"] for e in self.events if e["event"] == "step"]

    def losses(self) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in self.events if e["event"] == "loss"}

    def wait(self, timeout: float | None = None) -> int:
        rc = self.proc.wait(timeout=timeout)
        if self._reader:
            self._reader.join(timeout=10)
        return rc

    def stop(self) -> None:
        """End the driver's process group (the driver and anything it forked)."""
        with deferred_interrupts():
            self._stop()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_driver(
    cluster: LocalRayCluster,
    argv: list[str],
    log: Path,
    on_event: Callable[[dict], None] | None = None,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> DriverRun:
    """Start ``python maxtext_trainer.py argv`` against ``cluster``; events go to ``on_event``,
    every raw line (Ray's and MaxText's too) to ``on_line``; ``env`` adds variables."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-u", str(TRAINER_SCRIPT), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        # DRIVER_ENV (RAY_DEDUP_LOGS=0), as the RayJob's head gives its driver: the driver folds lines from its
        # workers that differ only in numbers within 5 s into one "[repeated Nx across cluster]" (Ray's log
        # deduplication, on by default): the progress lines read here are exactly such lines, and a restarted
        # worker's step lines were folded (37 of about 175 reached the drill, 2026-11-28).
        env=cluster.env | (env or {}) | {"PYTHONUNBUFFERED": "1"} | DRIVER_ENV, cwd=cluster.run_dir,
        start_new_session=True, text=True, errors="replace",
    )
    run = DriverRun(proc, log)

    def read() -> None:
        with open(log, "w") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if echo:
                    sys.stdout.write(line)
                if on_line:
                    on_line(line)
                parsed = parse_line(line)
                if parsed is None:
                    continue
                kind, payload = parsed
                if is_folded(line):
                    run.folded.append(line)
                if kind == "result":
                    run.result = payload
                    continue
                # Ray forwards a line once per log monitor; keep each event once.
                key = (payload.get("event"), payload.get("step"), payload.get("t"), payload.get("rank"))
                if key in run._seen:
                    continue
                run._seen.add(key)
                payload["seen_at"] = time.time()
                run.events.append(payload)
                if on_event:
                    on_event(payload)

    run._reader = threading.Thread(target=read, daemon=True)
    run._reader.start()
    return run


def load_job(stack: str, job_name: str | None, stacks_dir: Path | None = None) -> tuple[StackSpec, Job]:
    spec = stack_spec.load_stack(stack, stacks_dir)
    return spec, spec.job(job_name)


def default_run_dir(stack: str, prefix: str) -> Path:
    """build/<stack>/<prefix>-<time>, whatever the checkout's path and the stack name's length: Ray's
    Unix sockets live in a short temp dir of their own (drills.localray.short_temp_dir)."""
    return ROOT / "build" / stack / f"{prefix}-{time.strftime('%H%M%S')}"


def train_local(spec: StackSpec, job: Job, *, slices: int, run_dir: Path,
                steps: int | None = None, checkpoint_period: int | None = None,
                step_delay: float | None = None, verbose: bool = False,
                timeout: float = 1800.0, jax_cache_dir: Path | None = JAX_CACHE_DIR,
                cluster: LocalRayCluster | None = None) -> dict:
    """Run ``job`` on ``slices`` local slice nodes; a summary dict (also run_dir/summary.json).
    ``jax_cache_dir=None`` compiles from scratch (a cache inside the run directory).
    ``cluster``: a running local cluster with at least ``slices`` slice nodes to use (and leave
    running) instead of starting one."""
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data_dir = run_dir / "out"
    argv = trainer_argv(spec, job, local=True, data_dir=str(data_dir), local_slices=slices,
                        steps=steps, step_delay=step_delay, checkpoint_period=checkpoint_period,
                        jax_cache_dir=str(jax_cache_dir) if jax_cache_dir else None)
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    def on_event(e: dict) -> None:
        if e["event"] == "imported" and e.get("script"):  # a job's own trainer (custom_trainer.py)
            say(f"workers up: {e['script']} loaded")
        elif e["event"] == "imported":
            say(f"workers up: MaxText imported in {e['import_s']} s, compiling")
        elif e["event"] == "start":
            say(f"training started on {e['world']} worker(s) at step {e['start_step']}")
        elif e["event"] == "loss":
            say(f"step {e['step']:>4}  loss {e['loss']:.4f}")
        elif e["event"] == "done":
            say(f"done: final step {e['final_step']}, checkpoint {e['checkpoint_step']}")

    say(f"job {job.name} ({job.mode}) from {spec.stack_file}: "
        f"{slices} local slice node(s), 1 worker each; run dir {run_dir}")
    summary: dict = {"job": job.name, "mode": job.mode, "slices": slices, "run_dir": str(run_dir),
                     "argv": argv, "ok": False}
    driver = None
    own = cluster is None
    if not own and len(cluster.live_workers()) < slices:
        raise ValueError(f"the cluster has {len(cluster.live_workers())} live slice node(s), "
                         f"{slices} asked for")
    try:
        if own:
            cluster = LocalRayCluster(run_dir, slices=slices, auth=spec.ray.auth)
        else:
            cluster.peaks.clear()  # this run's processes only
        with cluster if own else contextlib.nullcontext():
            summary["cluster_start_s"] = round(time.time() - t0, 1) if own else 0.0
            summary["node_pids"] = [n.pid for n in cluster.nodes]
            summary["ray_temp_dir"] = str(cluster.temp_dir)
            say(f"local Ray cluster {'up' if own else 'in use'} at {cluster.address}: head + "
                f"{slices} slice node(s) (pids {[n.pid for n in cluster.nodes]})")
            driver = start_driver(cluster, argv, run_dir / "driver.log", on_event, echo=verbose)
            try:
                rc = driver.wait(timeout=timeout)
            except BaseException:
                driver.stop()
                raise
            summary["rc"] = rc
    except KeyboardInterrupt:
        say("interrupted: local cluster shut down")
        summary["error"] = "interrupted"
    finally:
        if driver is not None:
            driver.stop()
    summary["wall_s"] = round(time.time() - t0, 1)
    if driver is not None:
        losses = driver.losses()
        steps_seen = driver.steps()
        summary |= {"steps": steps_seen, "losses": losses, "result": driver.result,
                    "driver_log": str(driver.log), "driver_pid": driver.proc.pid}
        starts = [e for e in driver.events if e["event"] == "start"]
        steps_first = [e for e in driver.events if e["event"] == "step"]
        if starts and steps_first:
            summary["first_step_after_start_s"] = round(steps_first[0]["t"] - starts[0]["t"], 1)
        ok = summary.get("rc") == 0 and bool(driver.result and driver.result.get("ok"))
        if problem := driver.folded_problem():  # the steps run printed below would not be the run's
            summary["error"] = problem
            ok = False
        summary["ok"] = ok
        # Ray Train V2 keeps only checkpointed reports in Result.metrics: use rank 0's line.
        done = [e for e in driver.events if e["event"] == "done"]
        metrics = done[-1] if done else {}
        ok = ok and bool(done)
        summary["ok"] = ok
        summary["peak_rss_mb"] = cluster.peak_rss_mb() if cluster is not None else None
        summary["checkpoint_step"] = metrics.get("checkpoint_step")
        summary["world_size"] = metrics.get("world_size")
        imported = [e for e in driver.events if e["event"] == "imported"]
        summary["import_s"] = imported[0]["import_s"] if imported else None
        print()
        print(f"{'step':>6}  loss")
        for step in sorted(losses):
            print(f"{step:>6}  {losses[step]:.4f}")
        print(f"steps run: {len(steps_seen)}; final step {metrics.get('final_step')}; "
              f"last committed checkpoint {metrics.get('checkpoint_step')}; "
              f"wall {summary['wall_s']} s (cluster start {summary.get('cluster_start_s')} s); "
              f"peak RSS per process {summary['peak_rss_mb']} MB")
        if summary.get("error") == "interrupted":
            print(f"interrupted; driver log {driver.log}")
        elif not ok:
            print(f"FAILED (driver exit {summary.get('rc')}){'; ' + summary['error'] if summary.get('error') else ''}; "
                  f"see {driver.log}")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary
