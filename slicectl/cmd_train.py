"""``slicectl train --local``: run a stack's job for real on a local CPU Ray cluster.

    slicectl train --local --stack dev [--job NAME] [--slices N] [--steps N]

Starts a head and one worker node per local "slice" (separate ``ray start`` processes),
runs the job's trainer script (``workloads/trainer/maxtext_trainer.py --local``, the
same script the RayJob runs on TPUs) with a tiny MaxText, prints steps and losses, and
ends every process it started, also on Ctrl-C or failure.

Mapping: one local slice node per slice, one Ray Train worker (one JAX process, one CPU
device) per node, so ``--hosts-per-slice 1``. The job's mode (multislice or elastic),
slice counts, steps, checkpoint period and run name come from the stack spec.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from slicectl import spec as stack_spec
from slicectl.spec import Job, StackSpec

ROOT = Path(__file__).resolve().parents[1]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("train", help="run a stack's training job (--local: on this machine)")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--job", help="the stack's job to run (default: its first)")
    p.add_argument("--local", action="store_true",
                   help="run on a local CPU Ray cluster (the cluster runs jobs as RayJobs)")
    p.add_argument("--slices", type=int, default=None,
                   help="local slice nodes (default: the job's slices, its maximum if elastic, "
                        "and at least 2 so the multi-process SPMD path runs)")
    p.add_argument("--steps", type=int, default=None, help="training steps (default: the job's)")
    p.add_argument("--checkpoint-period", type=int, default=None,
                   help="steps between checkpoints (default: the job's)")
    p.add_argument("--step-delay", type=float, default=None, help="seconds to sleep per step")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where the cluster, logs and checkpoints go (default: build/<stack>/...)")
    p.add_argument("-v", "--verbose", action="store_true", help="echo the whole driver log")
    return p


def load_job(stack: str, job_name: str | None) -> tuple[StackSpec, Job]:
    from slicectl import engine
    from workloads.trainer_args import find_job

    spec = stack_spec.load(stack, engine.stack_config(stack))
    return spec, find_job(spec, job_name)


def default_run_dir(stack: str, prefix: str) -> Path:
    # Short: Ray's Unix socket paths live under it.
    return ROOT / "build" / stack / f"{prefix}-{time.strftime('%H%M%S')}"


def run(args: argparse.Namespace) -> int:
    if not args.local:
        print("slicectl train runs --local only: on GKE a job runs as its RayJob "
              "(slicectl preview shows it; pulumi up applies it)")
        return 2
    try:
        spec, job = load_job(args.stack, args.job)
    except (stack_spec.SpecError, ValueError) as e:
        print(e)
        return 2
    # One local node per slice and one worker per node: a one-slice job (dev's, two hosts
    # on TPU) still trains on two processes here, as its hosts do on the slice.
    slices = args.slices or max(job.slices, 2)
    if slices < 1:
        print("--slices must be at least 1")
        return 2
    result = train_local(spec, job, slices=slices, steps=args.steps,
                         checkpoint_period=args.checkpoint_period, step_delay=args.step_delay,
                         run_dir=args.run_dir or default_run_dir(args.stack, "train"),
                         verbose=args.verbose)
    return 0 if result["ok"] else 1


def train_local(spec: StackSpec, job: Job, *, slices: int, run_dir: Path,
                steps: int | None = None, checkpoint_period: int | None = None,
                step_delay: float | None = None, verbose: bool = False,
                timeout: float = 1800.0) -> dict:
    """Run ``job`` on ``slices`` local slice nodes; a summary dict (also run_dir/summary.json)."""
    from slicectl.local_train import start_driver
    from slicectl.localray import LocalRayCluster
    from workloads.trainer_args import trainer_argv

    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    data_dir = run_dir / "out"
    argv = trainer_argv(spec, job, local=True, data_dir=str(data_dir), local_slices=slices,
                        steps=steps, step_delay=step_delay, checkpoint_period=checkpoint_period)
    t0 = time.time()

    def say(msg: str) -> None:
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    def on_event(e: dict) -> None:
        if e["event"] == "imported":
            say(f"workers up: MaxText imported in {e['import_s']} s, compiling")
        elif e["event"] == "start":
            say(f"training started on {e['world']} worker(s) at step {e['start_step']}")
        elif e["event"] == "loss":
            say(f"step {e['step']:>4}  loss {e['loss']:.4f}")
        elif e["event"] == "done":
            say(f"done: final step {e['final_step']}, checkpoint {e['checkpoint_step']}")

    say(f"job {job.name} ({job.mode}) from {stack_spec.stack_file(spec.stack)}: "
        f"{slices} local slice node(s), 1 worker each; run dir {run_dir}")
    summary: dict = {"job": job.name, "mode": job.mode, "slices": slices, "run_dir": str(run_dir),
                     "argv": argv, "ok": False}
    driver = cluster = None
    try:
        cluster = LocalRayCluster(run_dir, slices=slices)
        with cluster:
            summary["cluster_start_s"] = round(time.time() - t0, 1)
            summary["node_pids"] = [n.pid for n in cluster.nodes]
            say(f"local Ray cluster up at {cluster.address}: head + {slices} slice node(s) "
                f"(pids {[n.pid for n in cluster.nodes]})")
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
                    "driver_log": str(driver.log)}
        starts = [e for e in driver.events if e["event"] == "start"]
        steps_first = [e for e in driver.events if e["event"] == "step"]
        if starts and steps_first:
            summary["first_step_after_start_s"] = round(steps_first[0]["t"] - starts[0]["t"], 1)
        ok = summary.get("rc") == 0 and bool(driver.result and driver.result.get("ok"))
        summary["ok"] = ok
        # Ray Train V2 keeps only checkpointed reports in Result.metrics: use rank 0's line.
        done = [e for e in driver.events if e["event"] == "done"]
        metrics = done[-1] if done else {}
        ok = ok and bool(done)
        summary["ok"] = ok
        summary["peak_rss_mb"] = cluster.peak_rss_mb()
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
        if not ok:
            print(f"FAILED (driver exit {summary.get('rc')}); see {driver.log}")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary
