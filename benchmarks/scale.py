"""Benchmark: what one more slice costs the whole ``slicectl preview`` process.

Run: ``uv run python benchmarks/scale.py [--slices 2,64,256,1024] [--runs 3] [--on-demand-only] [--compare DIR]
[--xpk build/xpk-venv/bin/xpk]``.
Prints figures; asserts nothing.

The stack is prod with ``n`` copies of its first slice (``v6e-16-<i>``), each with three capacity options
(a reservation, flex-start, on-demand: three node pools per slice, so 1,024 slices are 3,072 node pools;
``--on-demand-only`` keeps prod's one). Each size runs ``--runs`` whole ``slicectl preview`` processes; per
size it prints the resources, the median wall and CPU (user + system) seconds, milliseconds of wall time per
resource, the marginal cost of a resource over the smallest stack, and the processes' peak RSS.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Wide enough for a node's /24 pod range at 4,096 TPU hosts (1,024 slices of 4), clear of the DCN subnets.
SCALED_POD_CIDR = "10.128.0.0/10"
SCALED_NODE_CIDR = "10.0.0.0/16"
# What a preview process imports of a checkout (with its __main__.py).
PACKAGES = ("stackspec", "infra", "workloads", "policies", "offline", "slicectl")
# The capacity fallbacks a slice can list (README "Capacity"): each its own node pool.
FALLBACKS = ({"type": "reservation", "reservation": "v6e-res"},
             {"type": "flex-start", "maxRunDuration": "7d"},
             {"type": "on-demand"})


def scaled_stack(slices: int, stacks_dir: Path, stack: str = "prod", fallbacks: bool = False,
                 source: Path | None = None) -> Path:
    """``Pulumi.<stack>.yaml`` of ``source`` (default: the stacks directory, ``stacks/``) with ``slices`` copies of
    its first slice (``v6e-16-<i>``), in ``stacks_dir``.

    ``fallbacks``: each slice lists :data:`FALLBACKS` (opted in to pools that scale from zero, which they need).
    """
    import yaml

    from stackspec import loader

    doc = yaml.safe_load(((source or loader.STACKS_DIR) / f"Pulumi.{stack}.yaml").read_text())
    config = doc["config"]
    first = config["tpu-multislice:slices"][0]
    if fallbacks:
        first = {**first, "capacity": [dict(c) for c in FALLBACKS]}
        config.setdefault("tpu-multislice:unverified", {})["draScaleFromZero"] = True
    config["tpu-multislice:slices"] = [{**first, "name": f"v6e-16-{i}"} for i in range(slices)]
    config["tpu-multislice:cluster"]["podCidr"] = SCALED_POD_CIDR
    # The nodes' subnet holds every host (4 per slice): a /16 at 1,024 slices.
    config["tpu-multislice:network"].setdefault("primary", {})["cidr"] = SCALED_NODE_CIDR
    stacks_dir.mkdir(parents=True, exist_ok=True)
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def preview_process(root: Path, stacks_dir: Path, out: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MiB) of one ``slicectl preview`` of the
    ``prod`` stack in ``stacks_dir``, run from the checkout ``root`` (its code first on the path)."""
    command = [sys.executable, "-m", "slicectl.cli", "preview", "--stack", "prod", "--stacks-dir", str(stacks_dir),
               "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    # A child of its own, so the RSS figure is this process's (RUSAGE_CHILDREN keeps the largest child so far).
    proc = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    stderr = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # 1 is a policy verdict
        sys.exit(f"{' '.join(command)} exited {code}:\n{stderr[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def machine_speed() -> float:
    """Milliseconds a fixed pure-Python loop takes here now (best of 5): this machine's speed varies with its
    neighbours by a third in an hour, so a figure is read beside it (and a comparison made with ``--compare``)."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.perf_counter() - started)
    return best * 1000


def compiled(checkout: Path) -> None:
    """The checkout's own modules compiled to bytecode first, as after a first run, so no process pays for it (where
    ``PYTHONDONTWRITEBYTECODE`` is set, as on this project's machines, every process would recompile what it
    imports; a fresh worktree given to ``--compare`` would pay more than this one)."""
    for package in PACKAGES:
        if (checkout / package).is_dir():
            compileall.compile_dir(checkout / package, quiet=1)
    compileall.compile_file(checkout / "__main__.py", quiet=1)


def xpk_process(xpk: Path, slices: int, stack: str = "prod") -> tuple[float, float]:
    """Wall and CPU seconds of xpk's ``cluster create --dry-run`` of ``slices`` slices of ``stack``'s first slice's
    TPU type (its project, zone and cluster; ``--project-number`` so xpk asks gcloud nothing), as
    ``benchmarks/preview.py`` runs it (whose ``--install-xpk`` makes ``build/xpk-venv``)."""
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(stack)
    shape = spec.slices[0].shape
    command = [str(xpk), "cluster", "create", "--dry-run", "--cluster", spec.cluster.name, "--tpu-type",
               f"{shape.generation.name}-{shape.chips}", "--num-slices", str(slices), "--project", spec.project,
               "--project-number", "123456789012", "--zone", spec.zone, "--on-demand"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} exited {os.waitstatus_to_exitcode(status)}:\n{proc.stderr.read()[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def run(counts: list[int], runs: int, fallbacks: bool, tmp: Path, root: Path = ROOT,
        compare: Path | None = None, xpk: Path | None = None) -> list[tuple]:
    """For each slice count: (slices, resources, median wall s, median CPU s, peak RSS MiB); printed as they come.

    ``compare``: another checkout, run alternately with ``root`` (this run, that run, ...), so both meet the
    same machine; its figures print on a line of their own with the ratio of the medians. ``xpk``: an xpk executable,
    its dry run of the same number of slices run after each of ours (CPU and wall ratios of the medians)."""
    rows = []
    for checkout in filter(None, (root, compare)):
        compiled(checkout)
    for n in counts:
        stacks_dir = scaled_stack(n, tmp / f"stacks-{n}", fallbacks=fallbacks).parent
        out = tmp / f"out-{n}"
        figures, other, theirs = [], [], []
        for _ in range(runs):
            figures.append(preview_process(root, stacks_dir, out))
            if compare is not None:
                other.append(preview_process(compare, stacks_dir, tmp / f"out-{n}-compare"))
            if xpk is not None:
                theirs.append(xpk_process(xpk, n))
        if other:
            wall, cpu = statistics.median(f[0] for f in other), statistics.median(f[1] for f in other)
            ratio = wall / statistics.median(f[0] for f in figures)
            print(f"compare, {n:5d} slices, {compare}: whole process median of {runs}: {wall:.2f} s wall, "
                  f"{cpu:.2f} s CPU; {ratio:.2f}x the wall time of {root}", flush=True)
        resources = len(json.loads((out / "resources.json").read_text()))
        wall = statistics.median(f[0] for f in figures)
        cpu = statistics.median(f[1] for f in figures)
        rss = max(f[2] for f in figures)
        rows.append((n, resources, wall, cpu, rss))
        marginal = ""
        if len(rows) > 1 and resources > rows[0][1]:
            marginal = f", {(wall - rows[0][2]) / (resources - rows[0][1]) * 1000:.2f} ms per added resource"
        print(f"scale, {n:5d} slices ({n * (3 if fallbacks else 1):5d} TPU node pools): {resources:5d} resources, "
              f"whole process median of {runs}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
              f"{wall / resources * 1000:.2f} ms per resource{marginal}; peak RSS {rss:.0f} MiB", flush=True)
        if theirs:
            xwall, xcpu = statistics.median(f[0] for f in theirs), statistics.median(f[1] for f in theirs)
            print(f"xpk,   {n:5d} slices, dry run median of {runs}: {xwall:.2f} s wall, {xcpu:.2f} s CPU; ours / xpk: "
                  f"wall {wall / xwall:.2f}, CPU {cpu / xcpu:.2f} (load {os.getloadavg()[0]:.1f})", flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--slices", default="2,64,256,1024", help="slice counts (default: 2,64,256,1024)")
    p.add_argument("--runs", type=int, default=3, help="whole-process runs per size (default: 3)")
    p.add_argument("--on-demand-only", action="store_true", help="prod's one capacity option per slice")
    p.add_argument("--root", type=Path, default=ROOT,
                   help="the checkout whose slicectl runs (default: this one)")
    p.add_argument("--compare", type=Path, default=None,
                   help="another checkout (say a worktree of an older commit), its runs alternated with --root's")
    p.add_argument("--xpk", type=Path, default=None,
                   help="an xpk executable (benchmarks/preview.py --install-xpk makes build/xpk-venv/bin/xpk): its dry "
                        "run of each size beside ours")
    args = p.parse_args()
    print(f"{os.cpu_count()} CPU(s), load average {os.getloadavg()[0]:.2f}, "
          f"a fixed 2,000,000-step Python loop {machine_speed():.0f} ms; {args.root}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        run([int(n) for n in args.slices.split(",") if n], args.runs, not args.on_demand_only, Path(tmp),
            args.root.resolve(), args.compare.resolve() if args.compare else None, args.xpk)


if __name__ == "__main__":
    main()
