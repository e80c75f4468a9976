"""``slicectl drill``: rehearse a preemption, on the cluster or (``--local``) on this machine.

    slicectl drill --stack prod --job llama3-8b-elastic [--target pod|replica|node]
                   [--deadline SECONDS] [--report PATH]
    slicectl drill --local --stack dev [...]   (drills.local)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from drills.cluster import TARGETS
from drills.local import SCENARIOS
from drills.regions import SCENARIO as REGION_LOSS
from slicectl import extras
from slicectl.argtypes import integer, seconds
from slicectl.exits import Exit, UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("drill", help="preemption drill: kill part of a running job, "
                                     "check that it recovers")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--job", help="the stack's job to drill (default: its first running elastic job)")
    p.add_argument("--report", type=Path, help="also write the report as JSON here")
    p.add_argument("--stacks-dir", type=Path, default=None,
                   help="where stack files live (default: stacks/)")
    p.add_argument("--deadline", type=seconds(above=True), default=None,
                   help="seconds from the kill for training to resume and progress "
                        "(cluster default 1800)")

    local = p.add_argument_group("local drill (--local): a local Ray cluster on this machine")
    local.add_argument("--local", action="store_true",
                       help="drill on a local Ray cluster, not the cluster")
    local.add_argument("--scenario", choices=(*SCENARIOS, REGION_LOSS), default="preemption",
                       help="preemption: kill one slice node, training resumes from the last checkpoint; "
                            "mid-save: kill while a checkpoint is being written, the previous one is used; "
                            "repeated: kill max_failures times, then once more, which must fail the job; "
                            "reshard: a checkpoint written by N workers restores on 1 and back on N, "
                            "with the reference run's loss curve; region-loss: two local clusters stand in for "
                            "two regions sharing the checkpoint bucket, the first is lost whole and the job "
                            "resumes in the second (default: preemption)")
    local.add_argument("--max-failures", type=integer(0), default=None,
                       help="repeated: the job's failure budget for this drill (default: the job's)")
    local.add_argument("--reference-run", type=Path, default=None,
                       help="reshard: a finished `slicectl train --local` run directory of the same "
                            "job, steps and period to compare with (default: train one)")
    local.add_argument("--scale-up", action="store_true",
                       help="start a replacement node and check scale-up")
    local.add_argument("--kill-after-step", type=integer(0), default=None,
                       help="kill once this step has run; mid-save: at the first save at or "
                            "after it (default: half a period past the first checkpoint after 0)")
    local.add_argument("--kill-node", type=integer(0), default=None, help="which local slice node to kill")
    local.add_argument("--kill-during-save", action="store_true",
                       help="kill while a checkpoint is being saved")
    local.add_argument("--step-delay", type=seconds(), default=None,
                       help="seconds per step (local only), a window to kill in (default 0.5)")
    local.add_argument("--slices", type=integer(2), default=None,
                       help="local slice nodes, one of them killed (default 2)")
    local.add_argument("--steps", type=integer(1), default=None,
                       help="training steps (default 40; 150 with --scale-up)")
    local.add_argument("--checkpoint-period", type=integer(1), default=None,
                       help="steps between checkpoints (default 5)")
    local.add_argument("--timeout", type=seconds(above=True), default=None,
                       help="seconds for the whole local drill (default 1800)")
    local.add_argument("--run-dir", type=Path, default=None,
                       help="cluster, logs and checkpoints (default build/<stack>/drill-<time>)")
    local.add_argument("--capacity-back-after", type=seconds(), default=0.0,
                       help="multislice job: seconds until the lost slice returns and the job is "
                            "resubmitted (default 0)")
    local.add_argument("--resume-slices", type=integer(1), default=None,
                       help="region-loss: slices in the region the job resumes in (default: the stack's "
                            "second region's, else 1); --slices is the first region's (default: its own, else 2)")
    local.add_argument("--worker-lost-timeout", type=seconds(), default=0.0,
                       help="region-loss: seconds from the lost region detected to the job dispatched again "
                            "(Kueue's multiKueue.workerLostTimeout, 15 min by default on a manager; default 0)")
    local.add_argument("--standby", choices=("warm", "up", "cold"), default=None,
                       help="region-loss: the other region before the loss; up: its cluster up (default); warm: "
                            "up, with idle processes ready (MaxText on its slice nodes, Ray Train on its head); "
                            "cold: started once the loss is seen")
    local.add_argument("--warm-workers", action=argparse.BooleanOptionalAction, default=None,
                       help="slice nodes keep idle worker processes with MaxText imported, which a restarted worker "
                            "group takes (default: the stack's unverified.warmSpares; either flag overrides it and "
                            "the report says so; docs/recovery.md)")
    local.add_argument("--lease", action=argparse.BooleanOptionalAction, default=None,
                       help="the run's copies hold the stack's writer lease on a Cloud Storage emulator (default: "
                            "the stack's own, its queued jobs' --lease; either flag overrides it and the report says "
                            "so; docs/drills.md)")
    local.add_argument("-v", "--verbose", action="store_true", help="print every step")

    cluster = p.add_argument_group("cluster drill (default)")
    cluster.add_argument("--target", choices=TARGETS, default="pod",
                         help="delete one worker pod, every pod of one slice replica, or a node "
                              "of the slice's node pool (default: pod)")
    cluster.add_argument("--replica", type=integer(0), default=None,
                         help="slice replica to hit (ray.io/worker-group-replica-index; "
                              "default: the highest)")
    cluster.add_argument("--wait", type=seconds(above=True), default=3600.0,
                         help="seconds to wait for the job to run past a checkpoint "
                              "before the kill")
    cluster.add_argument("--poll", type=seconds(), default=5.0, help="seconds between polls")
    cluster.add_argument("--until-done", action="store_true",
                         help="follow until the job's final step, not just the first progress")
    cluster.add_argument("--get-credentials", action="store_true",
                         help="first run `gcloud container clusters get-credentials` for the "
                              "stack's cluster (CI)")
    cluster.add_argument("--context", help="kube context (default: the one get-credentials writes "
                                           "for the stack's cluster)")
    cluster.add_argument("--kubeconfig",
                         help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    cluster.add_argument("--ray-address", help="Ray dashboard address to read job logs from "
                                               "(default: through the API server's service proxy)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.local:
        # The local cluster, the trainer and the report's timeline picture.
        extras.require("slicectl drill --local", extras.TRAIN + extras.PICTURES)
        return run_local(args)
    if args.ray_address:  # job logs through Ray's job client (else the API server's proxy: no Ray needed)
        extras.require("slicectl drill --ray-address", ("ray",))
    return run_cluster(args)


def run_cluster(args: argparse.Namespace) -> int:
    from drills import cluster as dc
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    plan = dc.plan(spec, spec.drill_job(args.job).name)
    opts = dc.DrillOptions(
        target=args.target, replica=args.replica,
        deadline_s=args.deadline if args.deadline is not None else dc.DrillOptions.deadline_s,
        wait_s=args.wait, poll_s=args.poll, until_done=args.until_done,
    )
    if args.get_credentials:
        argv = dc.get_credentials_argv(spec)
        print("+ " + " ".join(argv), file=sys.stderr)
        if subprocess.run(argv).returncode != 0:
            raise UsageError("get-credentials failed (is gcloud installed and logged in?)")
    try:
        kube = dc.load_kube(args.context or plan.kube_context, args.kubeconfig)
        logs = None
        if args.ray_address:
            logs = lambda status: dc.RayJobClientLogs(args.ray_address, status["jobId"])  # noqa: E731
        report = dc.run_drill(kube, plan, opts, logs=logs)
    except dc.DrillError as e:
        raise UsageError(str(e)) from None
    except Exception as e:
        # An unreachable, refusing or forbidding API server: one line, not a traceback.
        if (message := dc.api_failure(e)) is None:
            raise
        raise UsageError(message) from None
    return finish(report, args.report)


def finish(report, path: Path | None) -> int:
    width = max(len(k) for k, _ in report.table())
    print("\n".join(f"{k.ljust(width)}  {v}" for k, v in report.table()))
    for note in report.notes:
        print(f"note: {note}")
    if path:
        report.write(path)
        print(f"report written to {path}", file=sys.stderr)
    return Exit.OK if report.ok else Exit.FAILED


def run_local(args: argparse.Namespace) -> int:
    """``slicectl drill --local``: a local Ray cluster, a real SIGKILL."""
    from drills.local import LocalDrill, LocalDrillOptions, pick_job
    from drills.local_train import default_run_dir
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    if args.scenario == REGION_LOSS:
        from drills import regions

        try:
            job = regions.pick_job(spec, args.job)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return run_region_loss(args, spec, job)
    job = pick_job(spec, args.job)
    if args.resume_slices is not None or args.worker_lost_timeout or args.standby:
        raise UsageError("--resume-slices, --worker-lost-timeout and --standby are for --scenario region-loss")
    defaults = LocalDrillOptions()
    opts = LocalDrillOptions(
        slices=args.slices if args.slices is not None else defaults.slices,
        steps=args.steps or 0,  # 0: the scenario's default
        checkpoint_period=args.checkpoint_period if args.checkpoint_period is not None
        else defaults.checkpoint_period,
        step_delay=args.step_delay if args.step_delay is not None else defaults.step_delay,
        kill_after_step=args.kill_after_step, kill_node=args.kill_node,
        kill_during_save=args.kill_during_save, scale_up=args.scale_up,
        timeout_s=args.timeout if args.timeout is not None else defaults.timeout_s, verbose=args.verbose,
        resubmit_delay_s=args.capacity_back_after,
        scenario=args.scenario, max_failures=args.max_failures, reference_dir=args.reference_run,
        warm=args.warm_workers, lease=args.lease,
    )
    try:
        if args.step_delay is None and args.scenario == "reshard":
            opts = replace(opts, step_delay=0.0)  # no kill to time: train at full speed
        if args.max_failures is not None and args.scenario != "repeated":
            raise ValueError("--max-failures is for --scenario repeated")
        if args.reference_run is not None and args.scenario != "reshard":
            raise ValueError("--reference-run is for --scenario reshard")
        if args.reference_run is not None and not (args.reference_run / "summary.json").is_file():
            raise ValueError(f"--reference-run {args.reference_run}: no summary.json (a `slicectl train "
                             "--local` run directory)")
        drill = LocalDrill(spec, job, args.run_dir or default_run_dir(args.stack, "drill"), opts)
    except ValueError as e:
        raise UsageError(str(e)) from None
    report = drill.run()
    print()
    code = finish(report, args.report)
    for kind, path in getattr(drill, "files", {}).items():
        print(f"{kind}: {path}")
    return code



def run_region_loss(args: argparse.Namespace, spec, job) -> int:
    """``slicectl drill --local --scenario region-loss``: two local clusters, one lost whole."""
    from drills import regions
    from drills.local_train import default_run_dir

    for flag, value in (("--scale-up", args.scale_up), ("--kill-node", args.kill_node is not None),
                        ("--kill-during-save", args.kill_during_save),
                        ("--max-failures", args.max_failures is not None),
                        ("--reference-run", args.reference_run is not None),
                        ("--capacity-back-after", args.capacity_back_after)):
        if value:
            raise UsageError(f"{flag} is not for --scenario region-loss (a whole region is lost)")
    a, b = regions.default_regions(spec, job)
    a = replace(a, slices=args.slices) if args.slices is not None else a
    b = replace(b, slices=args.resume_slices) if args.resume_slices is not None else b
    defaults = regions.RegionLossOptions()
    opts = regions.RegionLossOptions(
        region_a=a, region_b=b, steps=args.steps or defaults.steps,
        checkpoint_period=args.checkpoint_period or defaults.checkpoint_period,
        step_delay=args.step_delay if args.step_delay is not None else defaults.step_delay,
        kill_after_step=args.kill_after_step, worker_lost_timeout_s=args.worker_lost_timeout,
        timeout_s=args.timeout or defaults.timeout_s, verbose=args.verbose,
        standby=args.standby or defaults.standby, lease=args.lease)
    try:
        drill = regions.RegionLossDrill(spec, job, args.run_dir or default_run_dir(args.stack, "region"), opts)
    except ValueError as e:
        raise UsageError(str(e)) from None
    report = drill.run()
    print()
    code = finish(report, args.report)
    for kind, path in drill.files.items():
        print(f"{kind}: {path}")
    return code
