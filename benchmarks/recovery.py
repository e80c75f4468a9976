"""Benchmark: recovery at the limit, this checkout side by side with a base commit.

    uv run python benchmarks/recovery.py [--base b296eb0] [--stack dev] [--steps 200] [--region] [--skip-base]

Runs the same real drills (a local Ray cluster, a tiny MaxText on CPU, a real SIGKILL) with this
checkout's code and with the base commit's (a ``git worktree`` this script adds under /tmp and removes
at the end; the base runs with this environment's Python and ``PYTHONPATH`` at the worktree), and prints:

- the preemption drill (``--steps`` steps, one kill): kill -> first resumed step and its phases
  (detection, new workers up, MaxText imported, checkpoint restored, first step), steps lost, the cold
  start (job start -> first step) and time goodput counted from the first step;
- with ``--region``: the region-loss drill, loss -> first step in the other region, with a warm standby
  and a cold one (this checkout; the base ran the warm case only, its standby cluster up).

Fair by construction: every drill (each side, each scenario) starts with an empty JAX compilation cache
directory of its own under the run's work directory (checked empty and printed as "JAX cache at start"), so
neither side loads a compilation the other paid for, and no earlier run's cache is read; what a drill compiles
during its own run (the first attempt's steps, the restart shape's precompile, region A's steps for region B)
is that drill's. ``--pairs N`` runs the base and this checkout N times each, alternating which goes first.

Wall-clock figures move with the machine's load (printed: the 1-minute load average before and after each drill,
and its lowest and highest, sampled every 5 s while the drill ran); the phase breakdown, the steps lost and
the goodput computed from the steps' own timestamps move much less. Asserts nothing: the drills' own pass
criteria are their verdicts (the "result" row).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from drills.report import PHASES, goodput_from_first_step  # noqa: E402

BASE_DIR = Path(f"/tmp/wt-recovery-base-{os.getpid()}")  # one per run: several people benchmark on one machine

# Run inside a child Python whose PYTHONPATH selects the code (this checkout or the base worktree).
PREEMPTION = textwrap.dedent("""
    import sys
    from pathlib import Path
    from drills.local import LocalDrill, LocalDrillOptions
    from offline import engine
    from stackspec import spec as stack_spec
    stack, job, steps, run_dir, cache = sys.argv[1:6]
    spec = stack_spec.load(stack, engine.stack_config(stack))
    # Warm spares on for both sides (the base's default; here an override of the stack's setting, which the report
    # names): the figures compare the recovery path, not the stacks' opt-ins.
    opts = LocalDrillOptions(steps=int(steps), checkpoint_period=5, step_delay=0.5, jax_cache_dir=Path(cache),
                             warm=True)
    LocalDrill(spec, spec.drill_job(job or None), Path(run_dir), opts).run()
""")
REGION = textwrap.dedent("""
    import sys
    from pathlib import Path
    from drills import regions
    from offline import engine
    from stackspec import spec as stack_spec
    stack, job, standby, run_dir, cache = sys.argv[1:6]
    spec = stack_spec.load(stack, engine.stack_config(stack))
    pick = getattr(regions, "pick_job", None)
    j = pick(spec, job or None) if pick else spec.drill_job(job or None)
    a, b = regions.default_regions(spec, j)
    kw = {"standby": standby} if "standby" in regions.RegionLossOptions.__dataclass_fields__ else {}
    opts = regions.RegionLossOptions(region_a=a, region_b=b, jax_cache_dir=Path(cache), **kw)
    regions.RegionLossDrill(spec, j, Path(run_dir), opts).run()
""")


def load() -> float:
    return os.getloadavg()[0]


# A drill whose local cluster could not start (Ray gives a node 30 s to register; the base commit does not try
# again) is run again, up to this many times in all: the figures are the recovery's, not the machine's.
ATTEMPTS = 3


class LoadSampler:
    """The 1-minute load average every ``period`` seconds while a drill runs (a thread): its lowest and highest."""

    def __init__(self, period: float = 5.0):
        self.period, self.samples = period, [load()]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.samples.append(load())

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(load())


def empty_cache(cache: Path) -> Path:
    """A new, empty JAX compilation cache directory for one drill (fails loudly if anything is in it)."""
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    if any(cache.iterdir()):
        raise SystemExit(f"recovery.py: {cache} is not empty: the run would not be fair")
    return cache


def run_drill(code_dir: Path, script: str, args: list[str], run_dir: Path, label: str) -> dict:
    """One drill in a child process with ``code_dir`` first on its path, with an empty JAX cache of its own (a
    sibling of ``run_dir``); its drill.json plus the load and the cache's state before and after."""
    # RAY_DEDUP_LOGS=0 for both sides: a checkout whose drill driver leaves Ray's log deduplication on (the base
    # before 885169d) would count its steps from folded lines (drills.train_log.FOLDED); its drivers inherit this.
    env = os.environ | {"PYTHONPATH": str(code_dir), "RAY_DEDUP_LOGS": "0"}
    env.pop("VIRTUAL_ENV", None)
    cache = run_dir.parent / f"{run_dir.name}-jax-cache"
    for attempt in range(1, ATTEMPTS + 1):
        before = load()
        print(f"== {label}: {run_dir} (load {before:.1f}, attempt {attempt}, empty JAX cache {cache})", flush=True)
        shutil.rmtree(run_dir, ignore_errors=True)
        empty_cache(cache)
        with LoadSampler() as sampler, open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
            rc = subprocess.run([sys.executable, "-c", script, *args, str(run_dir), str(cache)], env=env,
                                cwd=code_dir, stdout=log, stderr=subprocess.STDOUT).returncode
        report = run_dir / "drill.json"
        started = report.exists() and json.loads(report.read_text()).get("steps_run")
        if started or "timed out during startup" not in (run_dir.parent / f"{run_dir.name}.log").read_text():
            break
    out = json.loads(report.read_text()) if report.exists() else {"ok": False, "notes": [f"no report (exit {rc})"]}
    out["_load"] = f"{before:.1f} -> {load():.1f}"
    out["_load_range"] = f"{min(sampler.samples):.1f} - {max(sampler.samples):.1f}"
    out["_cache"] = f"empty, own dir ({sum(1 for _ in cache.iterdir())} entries after)"
    out["_dir"] = str(run_dir)
    return out


def figures(r: dict) -> dict[str, str]:
    def s(v, unit=" s"):
        return "-" if v is None else f"{v:.1f}{unit}" if isinstance(v, float) else f"{v}{unit}"

    steps = [tuple(x) for x in r.get("step_times") or []]
    g = goodput_from_first_step(steps) if r.get("final_step") is not None else None
    cold = None if g is None else g[0]  # step_times are seconds from the job's start
    after = None if g is None or not g[2] else g[1] / g[2]
    rows = {"result": "passed" if r.get("ok") else "FAILED",
            "loss/kill -> first step after resume": s(r.get("resume_s"))}
    phases = r.get("phases") or {}
    rows |= {f"  {label}": s(phases.get(key)) for key, label in PHASES if key in phases}
    rows |= {
        "restarted on a warm spare (ready before the kill)": {True: "yes", False: "no"}.get(
            (r.get("figures") or {}).get("restarted on a warm spare"), "-"),
        "local cluster start (before the job)": s((r.get("figures") or {}).get("cluster start (s)")),
        "step restored": s(r.get("restored_step"), ""),
        "steps lost": s(r.get("steps_lost"), ""),
        "cold start (job start -> first step)": s(cold),
        "time goodput from the first step": "-" if after is None else f"{after:.1%}",
        "time goodput from job start": "-" if r.get("time_goodput") is None else f"{r['time_goodput']:.1%}",
        "goodput (steps)": "-" if r.get("goodput") is None else f"{r['goodput']:.1%}",
        "steps run / final step": f"{r.get('steps_run')} / {r.get('final_step')}",
        "load (1 min, before -> after)": r["_load"],
        "load (1 min, lowest - highest during)": r.get("_load_range", "-"),
        "JAX cache at start": r.get("_cache", "-"),
        "timeline": str(Path(r["_dir"]) / "timeline.png"),
    }
    return rows


def table(columns: dict[str, dict]) -> str:
    rows = {name: figures(r) for name, r in columns.items()}
    keys = list(dict.fromkeys(k for f in rows.values() for k in f))
    width = max(len(k) for k in keys) + 2
    cols = {n: max(len(n), *(len(v) for v in f.values())) + 2 for n, f in rows.items()}
    out = ["".ljust(width) + "".join(n.ljust(cols[n]) for n in rows)]
    out += [k.ljust(width) + "".join(rows[n].get(k, "-").ljust(cols[n]) for n in rows) for k in keys]
    return "\n".join(out)


def add_base(commit: str) -> None:
    if BASE_DIR.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(BASE_DIR)], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "add", "--detach", str(BASE_DIR), commit], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def remove_base() -> None:
    subprocess.run(["git", "worktree", "remove", "--force", str(BASE_DIR)], cwd=ROOT, check=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", default="b296eb0",
                   help="the commit to compare with (default: the previous round's last, before token auth in drills)")
    p.add_argument("--stack", default="dev")
    p.add_argument("--job", default="", help="default: the stack's drill job")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--region", action="store_true", help="also the region-loss drill, warm and cold standby")
    p.add_argument("--standbys", default="warm,cold", help="region loss: which standbys to drill (warm, cold)")
    p.add_argument("--region-stack", default="dev", help="stack for the region-loss drill (multi: its regions)")
    p.add_argument("--skip-base", action="store_true", help="this checkout only")
    p.add_argument("--base-only", action="store_true", help="the base commit only")
    p.add_argument("--skip-preemption", action="store_true")
    p.add_argument("--pairs", type=int, default=1,
                   help="preemption drills per side, alternating which side runs first (paired runs)")
    p.add_argument("--from-json", nargs="+", type=Path, default=None, metavar="RESULTS",
                   help="print the tables of earlier runs' results (build/bench-recovery/*.json) side by side, "
                        "running nothing")
    args = p.parse_args()
    if args.from_json:
        merged: dict[str, dict[str, dict]] = {}
        for path in args.from_json:
            for drill, cols in json.loads(path.read_text()).items():
                merged.setdefault(drill, {}).update(cols)
        for name, cols in merged.items():
            if cols:
                print(f"### {name} (2 cores, shared)")
                print(table(cols))
                print()
        return
    # Short run directories: the base commit kept Ray's sockets under its run directory (50 characters).
    work = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
    results: dict[str, dict[str, dict]] = {"preemption": {}, "region-loss": {}}
    try:
        if not args.skip_base:
            add_base(args.base)
        if not args.skip_preemption:
            pre = [args.stack, args.job, str(args.steps)]
            for i in range(1, args.pairs + 1):
                sides = [] if args.skip_base else [("base", BASE_DIR, "pb", f"base {args.base}")]
                sides += [] if args.base_only else [("this checkout", ROOT, "pn", "this checkout")]
                if i % 2 == 0:  # alternate the order: neither side always runs on the machine the other left
                    sides.reverse()
                for label, code, short, column in sides:
                    tag = f" #{i}" if args.pairs > 1 else ""
                    results["preemption"][column + tag] = run_drill(
                        code, PREEMPTION, pre, work / f"{short}{i}", f"preemption, {label}{tag}")
        if args.region:
            if not args.skip_base:
                # The base drills dev's stand-ins only (a multi-region spec failed in its trainer arguments).
                results["region-loss"][f"base {args.base} (standby up)"] = run_drill(
                    BASE_DIR, REGION, ["dev", "", "warm"], work / "rb", "region-loss, base")
            for standby in () if args.base_only else args.standbys.split(","):
                results["region-loss"][f"{standby} standby"] = run_drill(
                    ROOT, REGION, [args.region_stack, "", standby], work / f"r{standby[0]}",
                    f"region-loss, {standby} standby")
    finally:
        if not args.skip_base:
            remove_base()
    print()
    for name, cols in results.items():
        if cols:
            print(f"### {name} ({args.steps if name == 'preemption' else 'default'} steps; 2 cores, shared)")
            print(table(cols))
            print()
    print(f"run directories (logs, drill.json, timeline.png): {work}")
    keep = ROOT / "build" / "bench-recovery"
    keep.mkdir(parents=True, exist_ok=True)
    (keep / f"results-{time.strftime('%H%M%S')}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
