"""The figures a preemption drill reports, locally or on the cluster, and their pictures.

Besides the JSON (``DrillReport.write``), a local drill draws its timeline (``timeline_png``:
steps over time with the kill, detection, restore and resume marked) and a Markdown summary
for a CI job summary (``markdown``: the table, the recovery phases and a Mermaid Gantt chart of
the same timeline, which GitHub renders without the PNG).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path


class DrillFailed(RuntimeError):
    """The drill could not go on (timeout, a run that ended early): the report says how far."""


# Recovery phases, in order: kill -> failure seen -> new workers running the train function ->
# MaxText imported -> checkpoint restored (the loop's first step chosen) -> first step done.
PHASES = (
    ("detect", "kill -> failure detected"),
    ("standby_up", "failure -> cold standby's cluster up"),
    ("reschedule", "failure -> new workers up"),
    ("process_start", "workers up -> MaxText imported"),
    ("restore", "imported -> checkpoint restored"),
    ("first_step", "restored -> first step done"),
)


def productive_seconds(steps: list[tuple[float, int, int]], starts: list[tuple[float, int, int]]) -> float:
    """Seconds spent on the steps that count: each step's last execution (earlier ones were
    redone after a restore), timed from the step before it in the same attempt. An attempt's
    first step also carries compilation: it is timed as that attempt's median step."""
    attempt_starts = sorted(t for t, _, _ in starts)

    def attempt(t: float) -> int:
        return sum(1 for s in attempt_starts if s <= t)

    by_attempt: dict[int, list[tuple[float, int]]] = {}
    for t, step, _ in sorted(steps):
        by_attempt.setdefault(attempt(t), []).append((t, step))
    durations: dict[tuple[int, int], float] = {}  # (attempt, step) -> seconds
    for a, run in by_attempt.items():
        gaps = [t2 - t1 for (t1, _), (t2, _) in zip(run, run[1:], strict=False)]
        typical = statistics.median(gaps) if gaps else 0.0
        durations[(a, run[0][1])] = typical
        for (t1, _), (t2, step) in zip(run, run[1:], strict=False):
            durations[(a, step)] = t2 - t1
    last_run = {}
    for (a, step) in sorted(durations):
        last_run[step] = a
    return sum(durations[(a, step)] for step, a in last_run.items())


def attempts_from_steps(step_times: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """The attempt starts a timeline implies: its first step, and every step whose number does not exceed the
    one before it (a restart from a checkpoint redoes steps) or whose worker count changed. Lets a report
    written without its starts (an older drill's JSON) be measured the same way."""
    out, prev = [], None
    for t, step, world in sorted(step_times):
        if prev is None or step <= prev[1] or world != prev[2]:
            out.append((t - 1e-6, step, world))
        prev = (t, step, world)
    return out


def goodput_from_first_step(step_times: list[tuple[float, int, int]],
                            starts: list[tuple[float, int, int]] | None = None) -> tuple[float, float, float] | None:
    """(cold start, productive seconds, wall seconds) counted from the first step: the time before it (cluster,
    imports, compilation) is the cold start, reported apart; after it, each step's last execution counts
    (productive_seconds) and everything else (recovery, steps redone) does not. Only step timestamps: the
    figure does not move with how long the machine took to start the job."""
    if len(step_times) < 2:
        return None
    ordered = sorted(step_times)
    t_first = ordered[0][0]
    starts = starts if starts is not None else attempts_from_steps(ordered)
    after = [s for s in ordered if s[0] > t_first]
    # The first step itself ran before the clock starts: drop it, keep the attempt boundaries.
    productive = productive_seconds(ordered, starts) - _first_step_share(ordered, starts)
    return t_first, productive, ordered[-1][0] - t_first if after else 0.0


def _first_step_share(ordered: list[tuple[float, int, int]], starts: list[tuple[float, int, int]]) -> float:
    """The seconds productive_seconds gives the very first step (its attempt's median, when that step's
    last run is its first one)."""
    t0, step0, _ = ordered[0]
    later = [t for t, s, _ in ordered[1:] if s == step0]
    if later:
        return 0.0  # redone later: its first run counts nothing already
    first_attempt = [t for t, _, _ in ordered if not any(t0 < st <= t for st, _, _ in starts)]
    gaps = [b - a for a, b in zip(first_attempt, first_attempt[1:], strict=False)]
    return statistics.median(gaps) if gaps else 0.0


@dataclass
class DrillReport:
    target: str  # "local:<stack>/<job>" or "cluster:<stack>/<job>"
    job: str
    elastic: bool
    scenario: str = "preemption"
    killed: str = ""  # what was killed: node / pod / replica names
    kill_step: int | None = None  # last step seen before the kill
    detect_s: float | None = None  # kill -> failure detected
    resume_s: float | None = None  # kill -> first step after resume
    restored_step: int | None = None  # the checkpoint step training resumed from
    steps_lost: int | None = None  # steps trained before the kill and redone after it
    scale_up_s: float | None = None  # replacement node started -> job back at full size
    final_step: int | None = None
    target_step: int | None = None
    steps_run: int = 0  # every step executed, including ones redone
    wall_s: float = 0.0
    ok: bool = False
    notes: list[str] = field(default_factory=list)
    # Recovery phases (seconds, PHASES' keys) of the first recovery.
    phases: dict[str, float] = field(default_factory=dict)
    # Seconds from the job's start (its driver) to its last step, and of those the training
    # that counts (productive_seconds): time-based goodput.
    job_wall_s: float | None = None
    productive_s: float | None = None
    # The timeline, seconds from the job's start: (t, step, world) and (label, t).
    step_times: list[tuple[float, int, int]] = field(default_factory=list)
    marks: list[tuple[str, float]] = field(default_factory=list)
    figures: dict = field(default_factory=dict)  # scenario-specific figures
    # Bars on named lanes (a region each in the region-loss drill), seconds from the job's start:
    # (lane, label, start, end). The picture draws them under the steps, Mermaid as sections.
    lanes: list[tuple[str, str, float, float]] = field(default_factory=list)
    # Job start -> first step (cluster, imports, compilation), and time goodput from the first step on.
    cold_start_s: float | None = None
    goodput_after_start: float | None = None

    @property
    def goodput(self) -> float | None:
        """Useful steps / steps run."""
        if not self.steps_run or self.final_step is None:
            return None
        return min(1.0, (self.final_step + 1) / self.steps_run)

    @property
    def time_goodput(self) -> float | None:
        """Productive training time / wall time from the job's start."""
        if not self.job_wall_s or self.productive_s is None:
            return None
        return min(1.0, self.productive_s / self.job_wall_s)

    def measure_from_first_step(self, steps: list[tuple[float, int, int]], starts: list[tuple[float, int, int]],
                                t_job: float) -> None:
        """Cold start and time goodput from the first step, from the steps' own timestamps (absolute)."""
        g = goodput_from_first_step(steps, starts)
        if g is None or self.final_step is None:
            return
        t_first, productive, wall = g
        self.cold_start_s = round(t_first - t_job, 1)
        self.goodput_after_start = round(min(1.0, productive / wall), 4) if wall > 0 else None

    def to_json(self) -> dict:
        return asdict(self) | {"goodput": self.goodput, "time_goodput": self.time_goodput}

    def write(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def table(self) -> list[tuple[str, str]]:
        def f(v, unit=""):
            return "-" if v is None else (f"{v:.1f}{unit}" if isinstance(v, float) else f"{v}{unit}")

        def pct(v):
            return "-" if v is None else f"{v:.1%}"

        rows = [
            ("scenario", self.scenario),
            ("job", self.job),
            ("elastic", str(self.elastic)),
            ("killed", self.killed or "-"),
            ("kill -> detected", f(self.detect_s, " s")),
            ("kill -> first step after resume", f(self.resume_s, " s")),
        ]
        rows += [(f"  {label}", f(self.phases.get(key), " s")) for key, label in PHASES if key in self.phases]
        rows += [
            ("step restored", f(self.restored_step)),
            ("steps lost", f(self.steps_lost)),
            ("scale back up", f(self.scale_up_s, " s")),
            ("final step", f(self.final_step)),
            ("steps run", f(self.steps_run)),
            ("goodput (steps)", pct(self.goodput)),
            ("cold start (job start -> first step)", f(self.cold_start_s, " s")),
            ("goodput (time, from the first step)", pct(self.goodput_after_start)),
            ("goodput (time, from job start)", pct(self.time_goodput)),
            ("wall time", f(self.wall_s, " s")),
        ]
        rows += [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in self.figures.items()]
        rows.append(("result", ("passed" if self.scenario != "preemption" else "recovered") if self.ok
                     else "FAILED"))
        return rows

    # ------------------------------------------------------------------ pictures

    def timeline_png(self, path: str | Path) -> Path | None:
        """Steps over time, by worker count, with the drill's marks. None without steps."""
        if not self.step_times:
            return None
        import matplotlib

        matplotlib.use("Agg")  # no display: CI and drills write files
        import matplotlib.pyplot as plt

        if self.lanes:
            names = list(dict.fromkeys(lane for lane, *_ in self.lanes))
            fig, (ax, lx) = plt.subplots(2, 1, figsize=(9, 4.2 + 0.45 * len(names)), dpi=110, sharex=True,
                                         gridspec_kw={"height_ratios": [4.2, 0.45 * len(names) + 0.3]})
            self._draw_lanes(lx, names)
        else:
            fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
        worlds = sorted({w for _, _, w in self.step_times})
        for w in worlds:
            pts = [(t, s) for t, s, ww in self.step_times if ww == w]
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=10, label=f"step on {w} worker(s)")
        colours = {"kill": "red", "region lost": "red", "detected": "orange", "workers up": "purple",
                   "restored": "blue", "resumed": "green", "save in flight": "brown", "job failed": "black"}
        top = max(s for _, s, _ in self.step_times)
        for i, (label, t) in enumerate(self.marks):
            base = label.split(" #")[0]
            ax.axvline(t, color=colours.get(base, "grey"), linestyle="--", linewidth=1)
            ax.text(t, top * (0.95 - 0.08 * (i % 6)), f" {label}", fontsize=7, color=colours.get(base, "grey"))
        ax.set_xlim(left=0)  # the cold start before the first step is part of the picture
        (lx if self.lanes else ax).set_xlabel("seconds from job start")
        ax.set_ylabel("training step")
        gp = self.time_goodput
        title = f"{self.scenario}: {self.job}"
        if self.resume_s is not None:
            title += f" - {'loss' if self.lanes else 'kill'} to first resumed step {self.resume_s:.1f} s"
        if self.goodput_after_start is not None:
            since_job = "" if gp is None else f"; {gp:.0%} from job start"
            steps = "" if self.goodput is None else f", {self.goodput:.0%} of steps run useful"
            title += (f"\ntime goodput {self.goodput_after_start:.0%} from the first step "
                      f"(cold start {self.cold_start_s or 0:.1f} s apart{since_job}){steps}")
        elif gp is not None:
            title += f", goodput {gp:.0%} (time) / {self.goodput:.0%} (steps)"
        ax.set_title(title, fontsize=9)
        ax.legend(loc="lower right", fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out)
        plt.close(fig)
        return out

    def _draw_lanes(self, lx, names: list[str]) -> None:
        colours = {"training": "tab:green", "lost": "tab:red", "restore": "tab:blue", "standby": "lightgrey"}
        for lane, label, start, end in self.lanes:
            y = len(names) - 1 - names.index(lane)
            colour = next((c for k, c in colours.items() if label.startswith(k)), "tab:grey")
            lx.barh(y, max(end - start, 0.3), left=start, height=0.6, color=colour, alpha=0.8)
            lx.text(start + 0.3, y, label, va="center", fontsize=7)
        lx.set_yticks(range(len(names)), list(reversed(names)), fontsize=8)
        lx.set_ylim(-0.6, len(names) - 0.4)
        lx.grid(alpha=0.3, axis="x")

    def mermaid(self) -> str:
        """A Mermaid Gantt chart of the timeline (training attempts, recovery phases)."""
        lines = ["gantt", f"    title {self.scenario}: {self.job}", "    dateFormat X", "    axisFormat %M:%S"]
        # Training attempts: runs of steps with no gap longer than a recovery.
        spans: list[tuple[float, float, int, int]] = []  # (start, end, first step, last step)
        for t, step, _ in sorted(self.step_times):
            if spans and t - spans[-1][1] < 5.0 and step >= spans[-1][3]:
                spans[-1] = (spans[-1][0], t, spans[-1][2], step)
            else:
                spans.append((t, t, step, step))
        lines.append("    section training")
        for i, (a, b, s0, s1) in enumerate(spans):
            lines.append(f"    steps {s0}-{s1} :t{i}, {int(a)}, {max(int(b), int(a) + 1)}")
        for lane in dict.fromkeys(lane for lane, *_ in self.lanes):
            lines.append(f"    section {lane}")
            for i, (name, label, a, b) in enumerate(x for x in self.lanes if x[0] == lane):
                tag = "".join(ch for ch in f"{name}{i}" if ch.isalnum())
                lines.append(f"    {label} :{tag}, {int(a)}, {max(int(b), int(a) + 1)}")
        marks = dict(self.marks)
        kill = marks.get("kill")
        if kill is not None and self.phases:
            lines.append("    section recovery")
            t = kill
            for key, _label in PHASES:
                if key in self.phases:
                    end = t + self.phases[key]
                    lines.append(f"    {key} {self.phases[key]:.1f}s :{key}, {int(t)}, {max(int(end), int(t) + 1)}")
                    t = end
        return "\n".join(lines)

    def markdown(self, png: str | None = None) -> str:
        """A job summary: verdict, table, the PNG if given, the Mermaid timeline."""
        out = [f"### Drill `{self.scenario}` on `{self.target}`: {'PASSED' if self.ok else 'FAILED'}", "",
               "| figure | value |", "|---|---|"]
        out += [f"| {_cell(k.strip())} | {_cell(v)} |" for k, v in self.table()]
        if png:
            out += ["", f"![timeline]({png})"]
        if self.step_times:
            out += ["", "```mermaid", self.mermaid(), "```"]
        if self.notes:
            out += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def publish(self, run_dir: str | Path) -> dict[str, Path]:
        """drill.json, timeline.png and summary.md in ``run_dir``."""
        run_dir = Path(run_dir)
        self.write(run_dir / "drill.json")
        png = self.timeline_png(run_dir / "timeline.png")
        md = run_dir / "summary.md"
        md.write_text(self.markdown("timeline.png" if png else None))
        return {"json": run_dir / "drill.json", "markdown": md} | ({"png": png} if png else {})


def _cell(text: str) -> str:
    """A Markdown table cell: a ``|`` in it (``max |loss - region A's|``) would end the cell (GFM: escape it)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def side_by_side(reports: list[DrillReport]) -> str:
    rows = [dict(r.table()) for r in reports]
    keys = list(dict.fromkeys(k for r in reports for k, _ in r.table()))
    width = max(len(k) for k in keys) + 2
    cols = [max(len(v) for v in t.values()) + 2 for t in rows]
    return "\n".join(key.ljust(width) + "".join(t.get(key, "-").ljust(c) for t, c in zip(rows, cols, strict=True))
                     for key in keys)
