"""Benchmark: how long ``slicectl preview`` takes, as a user runs it, beside xpk, at scale, and in process.

Run: ``uv run python benchmarks/preview.py [--stack prod] [--runs 5] [--repeat 3] [--xpk PATH] [--scale 2,64,1024]``.
Prints figures; asserts nothing.

- Whole process: ``slicectl preview --stack <stack>`` as a subprocess, wall time from start to
  exit and CPU time. The first run is reported on its own (a fresh process, nothing of this benchmark imported
  yet; the OS file cache may be warm, and a truly fresh install cannot be recreated here), then
  ``--runs`` more with median, min and max. Peak RSS is the largest of those processes.
- Side by side: prod's plan (two v6e-16 slices) as ``slicectl preview --stack prod`` and as xpk's
  ``xpk cluster create --dry-run --tpu-type v6e-16 --num-slices 2`` (same project, zone and cluster name;
  ``--project-number`` so xpk asks gcloud nothing), alternated, ``--runs`` each, medians of wall time.
  xpk (``XPK_VERSION``) cannot share this project's environment (it pins packaging 24.2, pulumi needs 26;
  google-api-core 2.24.1, MaxText needs 2.28.1), so it comes from its own virtualenv: ``--xpk PATH`` or
  ``$XPK``, e.g. ``uv venv /tmp/xpk && uv pip install -p /tmp/xpk xpk==1.16.0 && python -m compileall -q
  /tmp/xpk/lib``, then ``--xpk /tmp/xpk/bin/xpk``. Without it this part is skipped, saying so.
- Scale: ``benchmarks/scale.py``'s run, once per size (``--scale``): prod with 2, 64 and 1,024 slices, each
  with three capacity options (three node pools), one whole ``slicectl preview`` process each.
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

import scale

ROOT = Path(__file__).resolve().parents[1]
SLICECTL = Path(sys.executable).parent / "slicectl"
XPK_VERSION = "1.16.0"


def _timed(command: list[str], ok=(0,)) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(command)} exited {proc.returncode}:\n{proc.stderr[-2000:]}{proc.stdout[-2000:]}")
    return elapsed


def xpk_command(xpk: str, stack: str = "prod") -> list[str]:
    """xpk's dry run of the stack's plan: its first slice's TPU type, as many slices, same project/zone/cluster."""
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(stack)
    shape = spec.slices[0].shape
    return [xpk, "cluster", "create", "--dry-run", "--cluster", spec.cluster.name, "--tpu-type",
            f"{shape.generation.name}-{shape.chips}", "--num-slices", str(len(spec.slices)), "--project",
            spec.project, "--project-number", "123456789012", "--zone", spec.zone, "--on-demand"]


def side_by_side(xpk: str | None, runs: int, out: Path) -> None:
    if not xpk:
        print(f"side by side: skipped (no xpk: give --xpk PATH or XPK=PATH to an xpk {XPK_VERSION} install)")
        return
    version = subprocess.run([xpk, "version"], capture_output=True, text=True).stdout + \
        subprocess.run([xpk, "version"], capture_output=True, text=True).stderr
    if XPK_VERSION not in version:
        sys.exit(f"{xpk} is not xpk {XPK_VERSION}: {version.strip()[:200]}")
    ours = [str(SLICECTL), "preview", "--stack", "prod"]
    theirs = xpk_command(xpk)
    _timed([*ours, "--out", str(out / "warm")], ok=(0, 1))  # both once first: the OS file cache warm for each
    _timed(theirs)
    preview, dry_run = [], []
    for i in range(runs):
        preview.append(_timed([*ours, "--out", str(out / f"side{i}")], ok=(0, 1)))
        dry_run.append(_timed(theirs))
    p, x = statistics.median(preview), statistics.median(dry_run)
    print(f"side by side, median of {runs}: slicectl preview --stack prod {p:.2f} s, "
          f"xpk {XPK_VERSION} cluster create --dry-run (2x v6e-16) {x:.2f} s: preview {x / p:.2f}x as fast")


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
    p.add_argument("--xpk", default=os.environ.get("XPK"), help=f"an xpk {XPK_VERSION} executable (default: $XPK)")
    p.add_argument("--scale", default="2,64,1024", help="slice counts for the scale runs (default: 2,64,1024)")
    args = p.parse_args()
    if not SLICECTL.exists():
        sys.exit(f"no {SLICECTL}: run `uv sync` first")
    print(f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}, a fixed 2,000,000-step Python loop "
          f"{scale.machine_speed():.0f} ms; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    with tempfile.TemporaryDirectory() as tmp:
        wall, cpu = whole_process(args.stack, Path(tmp) / "first")
        print(f"whole process, first run: slicectl preview --stack {args.stack}: {wall:.2f} s wall, {cpu:.2f} s CPU")
        runs = [whole_process(args.stack, Path(tmp) / f"run{i}") for i in range(args.runs)]
        for label, values in (("wall", [w for w, _ in runs]), ("CPU", [c for _, c in runs])) if runs else ():
            print(
                f"whole process, {len(runs)} more runs, {label}: median {statistics.median(values):.2f} s, "
                f"min {min(values):.2f} s, max {max(values):.2f} s"
            )
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"whole process, peak RSS: {rss:.0f} MiB")
        side_by_side(args.xpk, max(args.runs, 1), Path(tmp))
        scale.run([int(n) for n in args.scale.split(",") if n], 1, True, Path(tmp))
    in_process(args.repeat)


if __name__ == "__main__":
    main()
