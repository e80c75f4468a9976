"""The figures a preemption drill reports, locally or on the cluster."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class DrillReport:
    target: str  # "local:<stack>/<job>" or "cluster:<stack>/<job>"
    job: str
    elastic: bool
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

    @property
    def goodput(self) -> float | None:
        """Useful steps / steps run."""
        if not self.steps_run or self.final_step is None:
            return None
        return min(1.0, (self.final_step + 1) / self.steps_run)

    def to_json(self) -> dict:
        return asdict(self) | {"goodput": self.goodput}

    def write(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def table(self) -> list[tuple[str, str]]:
        def f(v, unit=""):
            return "-" if v is None else (f"{v:.1f}{unit}" if isinstance(v, float) else f"{v}{unit}")

        return [
            ("job", self.job),
            ("elastic", str(self.elastic)),
            ("killed", self.killed or "-"),
            ("kill -> detected", f(self.detect_s, " s")),
            ("kill -> first step after resume", f(self.resume_s, " s")),
            ("step restored", f(self.restored_step)),
            ("steps lost", f(self.steps_lost)),
            ("scale back up", f(self.scale_up_s, " s")),
            ("final step", f(self.final_step)),
            ("steps run", f(self.steps_run)),
            ("goodput", "-" if self.goodput is None else f"{self.goodput:.1%}"),
            ("wall time", f(self.wall_s, " s")),
            ("result", "recovered" if self.ok else "FAILED"),
        ]


def side_by_side(reports: list[DrillReport]) -> str:
    rows = [r.table() for r in reports]
    width = max(len(k) for k, _ in rows[0]) + 2
    cols = [max(len(v) for _, v in t) + 2 for t in rows]
    out = []
    for i, (key, _) in enumerate(rows[0]):
        out.append(key.ljust(width) + "".join(t[i][1].ljust(c) for t, c in zip(rows, cols, strict=True)))
    return "\n".join(out)
