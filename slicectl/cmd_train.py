"""``slicectl train --local``: run a stack's job for real on a local CPU Ray cluster.

    slicectl train --local --stack dev [--job NAME] [--slices N] [--steps N]

Starts a head and one worker node per local "slice" (separate ``ray start`` processes),
runs the job's trainer script (``workloads/trainer/maxtext_trainer.py --local``, the
same script the RayJob runs on TPUs) with a tiny MaxText, or the job's own trainer script
(``jobs[].trainer``, docs/trainers.md), prints steps and losses, and
ends every process it started, also on Ctrl-C or failure.

Mapping: one local slice node per slice, one Ray Train worker (one JAX process, one CPU
device) per node, so ``--hosts-per-slice 1``. The job's mode (multislice or elastic),
slice counts, steps, checkpoint period and run name come from the stack spec.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drills.local_train import default_run_dir, load_job, train_local
from slicectl import extras
from slicectl.argtypes import integer, seconds
from slicectl.exits import Exit, UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("train", help="run a stack's training job (--local: on this machine)")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--job", help="the stack's job to run (default: its first)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--local", action="store_true",
                   help="run on a local CPU Ray cluster (the cluster runs jobs as RayJobs)")
    p.add_argument("--slices", type=integer(1), default=None,
                   help="local slice nodes (default: the job's slices, its maximum if elastic, "
                        "and at least 2 so the multi-process SPMD path runs)")
    p.add_argument("--steps", type=integer(1), default=None, help="training steps (default: the job's)")
    p.add_argument("--checkpoint-period", type=integer(1), default=None,
                   help="steps between checkpoints (default: the job's)")
    p.add_argument("--step-delay", type=seconds(), default=None, help="seconds to sleep per step")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where the cluster, logs and checkpoints go (default: build/<stack>/...)")
    p.add_argument("-v", "--verbose", action="store_true", help="echo the whole driver log")
    return p


def run(args: argparse.Namespace) -> int:
    if not args.local:
        print("slicectl train runs --local only: on GKE a job runs as its RayJob "
              "(slicectl preview shows it; pulumi up applies it)")
        return Exit.USAGE
    extras.require("slicectl train --local")
    spec, job = load_job(args.stack, args.job, args.stacks_dir)
    # One local node per slice and one worker per node: a one-slice job (dev's, two hosts
    # on TPU) still trains on two processes here, as its hosts do on the slice.
    slices = args.slices or max(job.slices, 2)
    if slices < 1:
        raise UsageError("--slices must be at least 1")
    result = train_local(spec, job, slices=slices, steps=args.steps,
                         checkpoint_period=args.checkpoint_period, step_delay=args.step_delay,
                         run_dir=args.run_dir or default_run_dir(args.stack, "train"),
                         verbose=args.verbose)
    if result.get("error") == "interrupted":
        return Exit.INTERRUPTED  # Ctrl-C: every process it started has been ended
    return Exit.OK if result["ok"] else Exit.FAILED
