"""What a trainer driver has said during a local drill, with the times its workers stamped on it: the trainer's
``slicectl-progress`` events (steps, starts, each rank's ``worker_up``, spares, the precompile, the lease) and Ray
Train's failure-policy lines. Shared by the preemption drills (drills/local.py) and the region-loss drill
(drills/regions.py, one per region)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from drills.train_log import FAILURE

# The controller's lines for a failure it retries, and for one it gives up on (Ray Train 2.60).
RETRY = "[FailurePolicy] RETRY"
RAISE = "[FailurePolicy] RAISE"


@dataclass
class Timeline:
    """What the driver has said, with the times the workers stamped on it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    steps: list[tuple[float, int, int]] = field(default_factory=list)  # (t, step, world)
    starts: list[tuple[float, int, int]] = field(default_factory=list)  # (t, start_step, world)
    failures: list[float] = field(default_factory=list)  # seen_at of failure-policy lines
    retries: int = 0  # failures Ray Train retried: each one spends one of max_failures
    raised: int = 0  # failures Ray Train gave up on
    done: dict | None = None
    ups: list[float] = field(default_factory=list)  # a worker group's train function entered
    imported: list[float] = field(default_factory=list)  # ... and MaxText imported
    # Every rank's worker_up (t_up, its process's start, when its MaxText preload was done or None, rank, node):
    # was each a spare, ready before?
    warm_ups: list[dict] = field(default_factory=list)
    losses: dict[int, float] = field(default_factory=dict)  # step -> loss (last run of it)
    reads: list[tuple[float, float]] = field(default_factory=list)  # (t, seconds) of each checkpoint read
    spares_requested: int = 0  # spares the training workers asked their raylet for (maxtext_trainer.keep_warm_spare)
    spares_refused: list[str] = field(default_factory=list)  # ... and the raylets' refusals (auth, ...)
    spare_requested_at: list[float] = field(default_factory=list)  # when (each rank's request)
    spare_asked: list[tuple[float, str | None]] = field(default_factory=list)  # (when, the asking rank's node)
    # The restart shape's train step compiled into the persistent cache (the trainer's precompile_restart_shape)
    precompile_started: bool = False
    precompiled_s: float | None = None
    precompile_error: str | None = None  # its process's exit code and the end of its stderr (precompile_failed)

    def on_event(self, e: dict) -> None:
        with self.lock:
            if e["event"] == "step":
                self.steps.append((e["t"], e["step"], e["world"]))
            elif e["event"] == "worker_up":
                self.ups.append(e["t_up"])
                self.warm_ups.append(e)
            elif e["event"] == "imported":
                self.imported.append(e["t"])
            elif e["event"] == "loss":
                self.losses[e["step"]] = e["loss"]
            elif e["event"] == "checkpoint_read":
                self.reads.append((e["t"], e["read_s"]))
            elif e["event"] == "start":
                self.starts.append((e["t"], e["start_step"], e["world"]))
            elif e["event"] == "spare_requested":
                self.spares_requested += 1
                self.spare_requested_at.append(e["t"])
                self.spare_asked.append((e["t"], e.get("node")))
            elif e["event"] == "precompile_started":
                self.precompile_started = True
            elif e["event"] == "precompiled":
                self.precompiled_s = e["s"]
            elif e["event"] == "precompile_failed":
                self.precompile_error = f"exit {e.get('rc')}: {e.get('error') or '(no stderr)'}"
            elif e["event"] == "spare_refused":
                self.spares_refused.append(e.get("error", "?"))
            elif e["event"] == "done":
                self.done = e

    def on_line(self, line: str) -> None:
        if FAILURE.search(line):
            with self.lock:
                self.failures.append(time.time())
                self.retries += RETRY in line
                self.raised += RAISE in line

    def last_step(self) -> int | None:
        with self.lock:
            return self.steps[-1][1] if self.steps else None

    def starts_after(self, t: float) -> list[tuple[float, int, int]]:
        with self.lock:
            return [s for s in self.starts if s[0] >= t]

    def steps_after(self, t: float) -> list[tuple[float, int, int]]:
        with self.lock:
            return [s for s in self.steps if s[0] >= t]

    def last_step_before(self, t: float) -> int | None:
        """The last step a worker stamped before ``t`` (its line may reach the driver later)."""
        with self.lock:
            return max((s for ts, s, _ in self.steps if ts <= t), default=None)

    def steps_before(self, t: float) -> list[tuple[float, int, int]]:
        with self.lock:
            return [s for s in self.steps if s[0] < t]

    def failure_after(self, t: float) -> float | None:
        with self.lock:
            return next((f for f in self.failures if f >= t), None)

    def first_after(self, name: str, t: float) -> float | None:
        with self.lock:
            return next((x for x in getattr(self, name) if x >= t), None)
