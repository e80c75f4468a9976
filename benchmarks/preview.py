"""Benchmark: how long and how much memory the offline engine takes per stack.

Run: ``uv run python benchmarks/preview.py [--repeat N]``. Prints figures; asserts nothing.
The first render in a process pays for importing pulumi_gcp (thousands of generated
classes); later renders reuse the imported modules.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from offline import engine


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    t0 = time.perf_counter()
    engine.render("dev")
    print(f"first render (with imports): {time.perf_counter() - t0:.2f} s")
    for stack in ("dev", "prod"):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = engine.render(stack)
            times.append(time.perf_counter() - t)
        print(
            f"{stack:5s} {len(r.resources):3d} resources, {len(r.manifests):2d} manifests: "
            f"median {statistics.median(times) * 1000:.0f} ms over {args.repeat}"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {rss:.0f} MiB")


if __name__ == "__main__":
    main()
