"""Benchmark: ``slicectl preview`` as a user runs it, beside xpk's dry run of the same plan, paired, in one run.

Run: ``uv run python benchmarks/preview.py [--pairs 7] [--xpk PATH | --install-xpk] [--slices 1024]
[--first] [--scale 2,64,1024] [--repeat 3]``. Prints figures; asserts nothing.

- **Side by side** (the default): for prod's plan (two v6e-16 slices) and for ``--slices`` copies of its first slice
  (``benchmarks/scale.py``'s stack with prod's one on-demand option per slice), ``slicectl preview`` as a whole
  process beside ``xpk cluster create --dry-run --tpu-type v6e-16 --num-slices N`` (same project, zone and cluster
  name; ``--project-number`` so xpk asks gcloud nothing), each once to warm the OS file cache, then ``--pairs``
  rounds, xpk first in one round and last in the next, so all meet the same machine. Ours runs three ways per
  round: in CI's light install (``build/light-venv``: ``uv sync --locked --no-default-groups --compile-bytecode``,
  made offline from uv's cache, as ``.github/workflows/deploy.yml`` installs the preview) into a fresh, empty
  output folder: the headline, the first preview a user or CI runs, with nothing left by an earlier one (xpk's
  dry run keeps no folder); the same install again into the previous run's folder (its unchanged manifests are
  not rewritten); and this environment (the dev install, whose test and training packages add start-up hooks)
  into a fresh folder. Per size: the median wall and CPU (user + system) time of each, their ratios (ours / xpk),
  and the median of the per-round wall ratios. The machine is shared: each size's line carries the load average
  before and after it and a fixed Python loop's time. Without uv, ours runs in this environment only.
- xpk (``XPK_VERSION``) cannot share this project's environment (it pins packaging 24.2, pulumi needs 26;
  google-api-core 2.24.1, MaxText needs 2.28.1), so it runs from its own virtualenv: ``--xpk PATH`` or ``$XPK`` (an
  xpk executable), else ``build/xpk-venv/bin/xpk`` if it exists; ``--install-xpk`` makes that virtualenv
  (``python -m venv build/xpk-venv`` and its pip installs ``xpk==XPK_VERSION`` from PyPI, then compiles it to
  bytecode, as ``uv sync --compile-bytecode`` does ours). Without one it says xpk is absent and prints ours alone.
- ``--first``: one fresh process first, reported on its own (nothing of this benchmark imported yet).
- ``--scale``: ``benchmarks/scale.py``'s run (three capacity options per slice), one process per size.
- ``--repeat``: in process, the first render (paying the imports), then prod's and dev's renders again.
- ``--profile N``: where prod's preview spends its CPU, in fresh processes: ``python -X importtime`` (the N
  slowest top-level imports, cumulative, and the N slowest modules by their own time), then cProfile of the CLI in
  process (self time by package or project folder, N rows). cProfile's overhead inflates many small calls (the
  ``typing`` module's), so its shares rank; the side-by-side figures measure.
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import scale

ROOT = Path(__file__).resolve().parents[1]
SLICECTL = Path(sys.executable).parent / "slicectl"
XPK_VERSION = "1.16.0"


DEFAULT_XPK_VENV = ROOT / "build" / "xpk-venv"
DEFAULT_LIGHT_VENV = ROOT / "build" / "light-venv"


def install_xpk(venv: Path = DEFAULT_XPK_VENV) -> Path:
    """xpk ``XPK_VERSION`` in a virtualenv of its own (made if missing), compiled to bytecode; its executable."""
    xpk = venv / "bin" / "xpk"
    if not xpk.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"xpk=={XPK_VERSION}"], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", str(venv / "lib")], check=False)
    return xpk


def find_xpk(given: str | None) -> Path | None:
    """The xpk to run (``--xpk``, ``$XPK``, else ``build/xpk-venv``), checked to be ``XPK_VERSION``; None if absent."""
    xpk = Path(given) if given else DEFAULT_XPK_VENV / "bin" / "xpk"
    if not xpk.exists():
        return None
    proc = subprocess.run([str(xpk), "version"], capture_output=True, text=True)
    if XPK_VERSION not in proc.stdout + proc.stderr:
        sys.exit(f"{xpk} is not xpk {XPK_VERSION}: {(proc.stdout + proc.stderr).strip()[:200]}")
    return xpk


def measured(command: list[str], ok=(0,), env: dict | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process (its own rusage: ``os.wait4``)."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    stderr = proc.stderr.read() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) not in ok:
        sys.exit(f"{' '.join(command)} exited {os.waitstatus_to_exitcode(status)}:\n{stderr[-2000:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def xpk_command(xpk: Path, spec, slices: int) -> list[str]:
    """xpk's dry run of the plan: the spec's first slice's TPU type, ``slices`` of them, same project/zone/cluster."""
    shape = spec.slices[0].shape
    return [str(xpk), "cluster", "create", "--dry-run", "--cluster", spec.cluster.name, "--tpu-type",
            f"{shape.generation.name}-{shape.chips}", "--num-slices", str(slices), "--project",
            spec.project, "--project-number", "123456789012", "--zone", spec.zone, "--on-demand"]


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def light_venv(venv: Path = DEFAULT_LIGHT_VENV) -> Path | None:
    """CI's light install (``.github/workflows/deploy.yml``: ``uv sync --locked --no-default-groups``, no test,
    training or bootstrap tools, so none of their ``.pth`` start-up hooks) in ``build/light-venv``, made or brought
    up to date offline from uv's cache, compiled to bytecode; its ``slicectl``. None (and why) if uv cannot."""
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv)}
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(["uv", "sync", "--locked", "--no-default-groups", "--compile-bytecode", "--offline",
                           "--quiet"], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        print(f"light install: uv sync failed, so ours in this environment only: {proc.stderr.strip()[-300:]}")
        return None
    return venv / "bin" / "slicectl"


class Ours(NamedTuple):
    """One way of running our preview: a label, the command without ``--out``, and whether each run gets a fresh,
    empty output folder (the first preview a user or CI runs) or the folder of the previous run (a re-preview,
    where manifests holding their text already are left unwritten: xpk's dry run has no such folder)."""

    label: str
    command: list[str]
    fresh: bool


def paired(label: str, ours: list[Ours], theirs: list[str] | None, pairs: int, tmp: Path) -> None:
    """``pairs`` rounds of (each of ``ours``, xpk), alternating whether xpk runs first or last; one line each, the
    first of ``ours`` the headline (its ratio to xpk first)."""
    before, speed = load(), scale.machine_speed()
    runs = iter(range(10**9))

    def command(o: Ours, i: int) -> list[str]:
        out = tmp / (f"fresh-{next(runs)}" if o.fresh else f"again-{i}")
        return [*o.command, "--out", str(out)]

    for i, o in enumerate(ours):  # each once first: the OS file cache warm for all, the re-preview folders made
        measured(command(o, i), ok=(0, 1))
    if theirs:
        measured(theirs)
    a: list[list[tuple[float, float]]] = [[] for _ in ours]
    b = []
    for n in range(pairs):
        if theirs and n % 2:
            b.append(measured(theirs))
        for i, o in enumerate(ours):
            a[i].append(measured(command(o, i), ok=(0, 1)))  # 1 is a policy verdict
        if theirs and not n % 2:
            b.append(measured(theirs))
    print(f"{label}  [medians of {pairs} rounds; load {before} -> {load()}, loop {speed:.0f} ms]", flush=True)
    if theirs:
        xwall, xcpu = statistics.median(w for w, _ in b), statistics.median(c for _, c in b)
        print(f"  xpk {XPK_VERSION} dry run: {xwall:.2f} s wall, {xcpu:.2f} s CPU")
    for o, runs_of in zip(ours, a, strict=True):
        wall, cpu = statistics.median(w for w, _ in runs_of), statistics.median(c for _, c in runs_of)
        line = f"  ours, {o.label}: {wall:.2f} s wall, {cpu:.2f} s CPU"
        if theirs:
            per_pair = statistics.median(x[0] / y[0] for x, y in zip(runs_of, b, strict=True))
            line += f"; ours / xpk: wall {wall / xwall:.2f} (per round {per_pair:.2f}), CPU {cpu / xcpu:.2f}"
        print(line, flush=True)


def side_by_side(xpk: Path | None, pairs: int, slices: int, tmp: Path, light: Path | None) -> None:
    from stackspec import spec as stack_spec

    if xpk is None:
        print(f"xpk: ABSENT, so ours alone below (give --xpk PATH or XPK=PATH to an xpk {XPK_VERSION}, or "
              f"--install-xpk to make {DEFAULT_XPK_VENV.relative_to(ROOT)})")
    else:
        print(f"xpk: {xpk} ({XPK_VERSION})")
    prod = stack_spec.load_stack("prod")
    args = ["preview", "--stack", "prod"]
    for size, extra, theirs in ((f"prod ({len(prod.slices)} slices)", [], len(prod.slices)),
                                *(((f"{slices:,} slices", ["--stacks-dir", str(scale.scaled_stack(
                                    slices, tmp / f"stacks-{slices}").parent)], slices),) if slices else ())):
        ours = [Ours("light install (CI's), fresh output folder [the headline]", [str(light), *args, *extra], True),
                Ours("light install, again into the last run's folder", [str(light), *args, *extra], False),
                Ours("dev install (this venv: ray/jax start-up hooks), fresh output folder",
                     [str(SLICECTL), *args, *extra], True)] if light else [
                Ours("this venv, fresh output folder [the headline]", [str(SLICECTL), *args, *extra], True),
                Ours("this venv, again into the last run's folder", [str(SLICECTL), *args, *extra], False)]
        paired(size, ours, xpk and xpk_command(xpk, prod, theirs), pairs, tmp / size.split()[0])


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


CLI = "import sys; from slicectl.cli import main; sys.exit(main())"


def profile(top: int, tmp: Path) -> None:
    """Prod's preview profiled (see ``--profile`` above)."""
    argv = ["preview", "--stack", "prod", "--out", str(tmp / "profile")]
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", CLI, *argv], cwd=ROOT, capture_output=True,
                          text=True)
    rows = [(int(m[1]), int(m[2]), len(m[3]), m[4]) for m in
            re.finditer(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$", proc.stderr, re.MULTILINE)]
    total = sum(own for own, _, _, _ in rows)
    print(f"imports (python -X importtime, load {load()}): {total / 1e3:.0f} ms in {len(rows)} modules")
    tops = sorted(((cum, name) for _, cum, depth, name in rows if depth == 0), reverse=True)[:top]
    print("  slowest top-level imports (cumulative): " + ", ".join(f"{n} {c / 1e3:.0f} ms" for c, n in tops))
    owns = sorted(((own, name) for own, _, _, name in rows), reverse=True)[:top]
    print("  slowest modules (own time): " + ", ".join(f"{n} {o / 1e3:.0f} ms" for o, n in owns))
    stats = tmp / "preview.prof"
    code = f"import cProfile, sys; from slicectl.cli import main; cProfile.run('main()', {str(stats)!r})"
    subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, check=False)
    by: collections.Counter[str] = collections.Counter()
    for (path, _, name), (_, _, own, _, _) in pstats.Stats(str(stats)).stats.items():
        if "site-packages/" in path:
            key = path.split("site-packages/")[1].split("/")[0].removesuffix(".py")
        elif path.startswith(str(ROOT)):
            key = "ours: " + Path(path).relative_to(ROOT).parts[0]
        elif path == "~":
            key = "builtin " + name.strip("<>").removeprefix("built-in method ").split(" of ")[0]
        else:
            key = "stdlib " + Path(path).stem.strip("<>")
        by[key] += own
    whole = sum(by.values())
    print(f"cProfile of the CLI in process, own time by package ({whole:.2f} s under the profiler): "
          + ", ".join(f"{k} {v / whole:.0%}" for k, v in by.most_common(top)))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=7, help="side-by-side pairs per size (default: 7; 0: none)")
    p.add_argument("--slices", type=int, default=1024, help="the large plan's slices (default: 1024; 0: none)")
    p.add_argument("--xpk", default=os.environ.get("XPK"),
                   help=f"an xpk {XPK_VERSION} executable (default: $XPK, else build/xpk-venv/bin/xpk)")
    p.add_argument("--install-xpk", action="store_true", help="make build/xpk-venv with xpk from PyPI if missing")
    p.add_argument("--first", action="store_true", help="one fresh process first, reported apart")
    p.add_argument("--scale", default="", help="benchmarks/scale.py's slice counts, e.g. 2,64,1024 (default: none)")
    p.add_argument("--repeat", type=int, default=0, help="in-process renders per stack (default: 0, none)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="profile prod's preview (imports, cProfile), N rows each (default: 0, none)")
    args = p.parse_args()
    xpk = install_xpk() if args.install_xpk and not args.xpk else None
    xpk = find_xpk(str(xpk) if xpk else args.xpk)
    scale.compiled(ROOT)  # our modules as bytecode, as xpk's (where PYTHONDONTWRITEBYTECODE is set)
    print(f"{os.cpu_count()} CPU(s), load average {load()}, a fixed 2,000,000-step Python loop "
          f"{scale.machine_speed():.0f} ms; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.first:
            wall, cpu = whole_process("prod", Path(tmp) / "first")
            print(f"whole process, first run (this environment, a fresh folder): slicectl preview --stack prod: "
                  f"{wall:.2f} s wall, {cpu:.2f} s CPU")
        if args.profile:
            profile(args.profile, Path(tmp))
        if args.pairs:
            side_by_side(xpk, args.pairs, args.slices, Path(tmp), light_venv())
        if args.scale:
            scale.run([int(n) for n in args.scale.split(",") if n], 1, True, Path(tmp))
    if args.repeat:
        in_process(args.repeat)


if __name__ == "__main__":
    main()
