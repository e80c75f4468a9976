"""The local drills' figures across scheduled runs: one Markdown table, newest run first.

Run: ``uv run python benchmarks/drill_history.py DIR [--json OUT]``. ``DIR`` holds one folder
per workflow run (``<run id>/drill-<name>/drill.json``, as ``gh run download`` lays out the
``drill-<name>`` artifacts of .github/workflows/drills.yml). Prints, per drill, kill to first
resumed step with its phases, goodput by time and by steps, wall time and the verdict, so a
regression in recovery time shows week to week; ``--json`` also writes the rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drills.report import PHASES

COLUMNS = ["run", "drill", "scenario", "result", "kill -> resumed (s)", *[k for k, _ in PHASES],
           "goodput (time)", "goodput (steps)", "wall (s)"]


def rows(root: Path) -> list[dict]:
    out = []
    for path in sorted(root.glob("*/drill-*/drill.json")):
        try:
            r = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            out.append({"run": path.parts[-3], "drill": path.parent.name[len("drill-"):], "result": f"unreadable: {e}"})
            continue
        pct = lambda v: None if v is None else round(100 * v, 1)  # noqa: E731
        out.append({"run": path.parts[-3], "drill": path.parent.name[len("drill-"):],
                    "scenario": r.get("scenario"), "result": "passed" if r.get("ok") else "FAILED",
                    "kill -> resumed (s)": r.get("resume_s"), **(r.get("phases") or {}),
                    "goodput (time)": pct(r.get("time_goodput")), "goodput (steps)": pct(r.get("goodput")),
                    "wall (s)": r.get("wall_s")})
    # Newest run first (run ids grow), drills in name order within a run.
    return sorted(out, key=lambda row: (-int(row["run"]) if str(row["run"]).isdigit() else 0, row["drill"]))


def markdown(table: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in table:
        lines.append("| " + " | ".join("-" if row.get(c) is None else str(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("root", type=Path, help="one folder per run, each with drill-<name>/drill.json")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args()
    table = rows(args.root)
    print("## Local drills across runs (newest first)\n")
    print(markdown(table) if table else "No drill reports found.\n")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()
