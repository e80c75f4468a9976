"""Benchmark: how long ``slicectl preview`` takes, as a user runs it and inside one process.

Run: ``uv run python benchmarks/preview.py [--stack prod] [--runs 5] [--repeat 3]``. Prints figures;
asserts nothing.

- Whole process: ``slicectl preview --stack <stack>`` as a subprocess, wall time from start to
  exit and CPU time. The first run is reported on its own (a fresh process, nothing of this benchmark imported
  yet; the OS file cache may be warm, and a truly fresh install cannot be recreated here), then
  ``--runs`` more with median, min and max. Peak RSS is the largest of those processes.
- In process: the first render (paying the provider imports), then each stack's render again.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLICECTL = Path(sys.executable).parent / "slicectl"


def whole_process(stack: str, out: Path) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one ``slicectl preview`` process.

    Exit 0 and 1 both count (1 is a policy verdict). The CPU figure moves less than the wall
    one when other work shares the machine.
    """
    command = [str(SLICECTL), "preview", "--stack", stack, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def in_process(repeat: int) -> None:
    from offline import engine  # imported here: the whole-process runs above stay unaffected

    t0 = time.perf_counter()
    engine.render("prod")
    print(f"in process, first render (prod, with imports): {time.perf_counter() - t0:.2f} s")
    for stack in ("dev", "prod"):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            r = engine.render(stack)
            times.append(time.perf_counter() - t)
        print(
            f"in process, {stack:4s} {len(r.resources):3d} resources, {len(r.manifests):2d} manifests: "
            f"median {statistics.median(times) * 1000:.0f} ms over {repeat}"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"in process, peak RSS: {rss:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stack", default="prod", help="stack for the whole-process runs (default: prod)")
    p.add_argument("--runs", type=int, default=5, help="whole-process runs after the first (default: 5)")
    p.add_argument("--repeat", type=int, default=3, help="in-process renders per stack (default: 3)")
    args = p.parse_args()
    if not SLICECTL.exists():
        sys.exit(f"no {SLICECTL}: run `uv sync` first")
    print(f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu = whole_process(args.stack, Path(tmp) / "first")
        print(f"whole process, first run: slicectl preview --stack {args.stack}: {wall:.2f} s wall, {cpu:.2f} s CPU")
        runs = [whole_process(args.stack, Path(tmp) / f"run{i}") for i in range(args.runs)]
    if runs:
        for label, values in (("wall", [w for w, _ in runs]), ("CPU", [c for _, c in runs])):
            print(
                f"whole process, {len(runs)} more runs, {label}: median {statistics.median(values):.2f} s, "
                f"min {min(values):.2f} s, max {max(values):.2f} s"
            )
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"whole process, peak RSS: {rss:.0f} MiB")
    in_process(args.repeat)


if __name__ == "__main__":
    main()
