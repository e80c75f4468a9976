"""Benchmark: the same local preemption drill against prod's elastic and multislice jobs.

Run: ``uv run python benchmarks/drill.py [--stack prod] [--scale-up]``. Each drill is real
(a local Ray cluster, MaxText on CPU, one slice node SIGKILLed after the same step);
prints both reports side by side and writes them to ``build/bench-drill/``. Asserts
nothing: these are the figures the elastic design has to beat.

The multislice job cannot shrink: the kill fails it and the drill resubmits it on a
replacement node, at once by default, which is its best case (on GKE it waits for the
whole slice's capacity to come back: ``--capacity-back-after SECONDS`` models that). The
elastic job pays one worker-group start that waits for the dead node (Ray's resource view
lags) and a MaxText cold start, but never waits for capacity.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from drills.local import LocalDrill, LocalDrillOptions, default_steps
from drills.report import side_by_side
from offline import engine
from stackspec import spec as stack_spec
from workloads.trainer_args import find_job

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--stack", default="prod")
    p.add_argument("--elastic-job", default="llama3-8b-elastic")
    p.add_argument("--multislice-job", default="llama3-8b-multislice")
    p.add_argument("--steps", type=int, default=0, help="default: the drill's")
    p.add_argument("--checkpoint-period", type=int, default=5)
    p.add_argument("--step-delay", type=float, default=0.5)
    p.add_argument("--scale-up", action="store_true", help="elastic: also time the scale-up")
    p.add_argument("--capacity-back-after", type=float, default=0.0,
                   help="multislice: seconds until the lost slice's capacity returns and the job "
                        "is resubmitted (default 0: its best case)")
    args = p.parse_args()
    spec = stack_spec.load(args.stack, engine.stack_config(args.stack))
    reports = []
    for name, scale_up in ((args.elastic_job, args.scale_up), (args.multislice_job, False)):
        job = find_job(spec, name)
        # Both jobs run the same number of steps, so steps run and goodput compare.
        steps = args.steps or default_steps(args.scale_up)
        opts = LocalDrillOptions(steps=steps, checkpoint_period=args.checkpoint_period,
                                 step_delay=args.step_delay, scale_up=scale_up,
                                 resubmit_delay_s=args.capacity_back_after)
        run_dir = ROOT / "build" / "bench-drill" / ("e" if job.elastic else "m")
        drill = LocalDrill(spec, job, run_dir, opts)
        reports.append(drill.run())
        print()
    print(side_by_side(reports))
    for r in reports:
        for note in r.notes:
            print(f"note ({r.job}): {note}")


if __name__ == "__main__":
    main()
