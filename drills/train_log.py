"""What a training job's log says about its progress: steps, checkpoints, failures, resumes.

Reads the text a Ray job's driver prints (its own output and every Ray Train worker's,
prefixed by Ray) and turns it into events. The strings are those MaxText 0.2.1 and
Ray Train 2.60 print (checked in their installed sources):

- MaxText ``common/metric_logger.py``: ``completed step: N, seconds: ...``;
- MaxText ``common/checkpointing.py``: ``Saved a checkpoint at step N.`` (synchronous),
  ``Started an asynchronous checkpoint save for step N`` (asynchronous, the default),
  ``restoring from this run's directory step N`` (a restart resuming from checkpoint N);
- Ray Train V2 controller: ``[FailurePolicy] RETRY``/``RAISE``, ``Training failed due to
  worker errors``, ``Replacing failing replica groups``, ``Preemption detected on ranks``;
- the project's trainer (``workloads/trainer/maxtext_trainer.py``):
  ``slicectl-progress {"event": "start"|"step", ...}`` lines from rank 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from workloads.trainer.maxtext_trainer import PROGRESS

STEP = re.compile(r"completed step: (\d+)")
SAVED = re.compile(r"saved a checkpoint at step (\d+)", re.IGNORECASE)
ASYNC_SAVE = re.compile(r"Started an asynchronous checkpoint save for step (\d+)")
RESTORE = re.compile(r"restoring from this run's directory step (\d+)")
FAILURE = re.compile(
    r"\[FailurePolicy\]|Training failed due to (worker|controller) error"
    r"|Replacing failing replica groups|Preemption detected on ranks"
)
PROGRESS_PREFIX = PROGRESS + " "  # the trainer owns its protocol
# Ray's log deduplication, in the driver process that prints its workers' lines (Ray 2.60
# ray/_private/worker.py print_to_stdstream -> ray/_private/ray_logging/__init__.py LogDeduplicator): a line
# whose words without digits match one another process printed within RAY_DEDUP_LOGS_AGG_WINDOW_S (5 s) is held
# back, and every 5 s one of them is printed with DedupState.formatted's " [repeated Nx across cluster]" (in
# colour). Every trainer step line is such a line, so a stream carrying the mark lost lines it would count.
# Only RAY_DEDUP_LOGS=0 in the driver's environment turns it off (ray/_private/ray_constants.py, read at import).
# The mark ends the line (DedupState.formatted: the line + _color(mark + _warn_once()), the hint only the first
# time): the same words inside a line (an event's error text quoting another log) are not a fold.
FOLDED = re.compile(r" \[repeated \d+x across cluster\]"
                    r"(?: \(Ray deduplicates logs by default\.[^\n]*\))?(?:\x1b\[[0-9;]*m)*\s*$")


def is_folded(text: str) -> bool:
    """Whether ``text`` is a line Ray's log deduplication printed for several it held back."""
    return FOLDED.search(text) is not None


def folded_problem(lines: list[str], where: str) -> str | None:
    """The verdict's line for a log whose counted lines Ray folded (:func:`is_folded`), or None."""
    if not lines:
        return None
    return (f"Ray's log deduplication folded {len(lines)} counted line(s) of {where} (e.g. "
            f"{lines[0].strip()[-160:]!r}): the steps counted are not the run's; the driver must run with "
            "RAY_DEDUP_LOGS=0")


@dataclass(frozen=True)
class Event:
    kind: str  # step | save-started | saved | restore | start | failure
    step: int | None
    line: int  # 0-based line number in the log


def parse_line(text: str, line: int) -> Event | None:
    if (i := text.find(PROGRESS_PREFIX)) >= 0:
        body = text[i + len(PROGRESS_PREFIX):]
        try:
            doc = json.loads(body[: body.rfind("}") + 1])  # a folded line has Ray's mark after the JSON
        except ValueError:
            doc = {}
        if doc.get("event") == "step":
            return Event("step", int(doc["step"]), line)
        if doc.get("event") == "start":
            # The first step to run; the checkpoint it restored is the one before.
            start = int(doc.get("start_step") or 0)
            return Event("start", start - 1 if start > 0 else None, line)
        return None
    for kind, pattern in (("step", STEP), ("saved", SAVED), ("save-started", ASYNC_SAVE),
                          ("restore", RESTORE)):
        if m := pattern.search(text):
            return Event(kind, int(m.group(1)), line)
    if FAILURE.search(text):
        return Event("failure", None, line)
    return None


@dataclass
class TrainLog:
    """Events of one job's log, fed incrementally (the whole text each time is fine)."""

    events: list[Event] = field(default_factory=list)
    _lines: int = 0  # complete lines consumed
    _pending_async: int | None = None
    committed: list[int] = field(default_factory=list)  # checkpoint steps known committed
    attempts: int = 1  # one per (re)start of the training function
    _run: set[tuple[int, int]] = field(default_factory=set)  # (attempt, step) executed
    _stepped: bool = False  # a step ran since the last (re)start
    # Lines Ray's log deduplication folded (``is_folded``) that would have been events: each stands for lines lost
    # to the counts (steps run, the last step, attempts), so a drill must not judge from this log.
    folded: list[str] = field(default_factory=list)

    def feed(self, text: str) -> list[Event]:
        """Parse the lines of ``text`` not seen yet; returns the new events."""
        lines = text.split("\n")[:-1]  # a trailing partial line waits for the next call
        new = []
        for n in range(self._lines, len(lines)):
            if (e := parse_line(lines[n], n)) is not None:
                new.append(e)
                self._apply(e)
                if is_folded(lines[n]):
                    self.folded.append(lines[n])
        self._lines = max(self._lines, len(lines))
        self.events += new
        return new

    def _apply(self, e: Event) -> None:
        if e.kind == "saved":
            self._commit(e.step)
        elif e.kind == "save-started":
            # Orbax finishes the previous asynchronous save before starting the next one,
            # so a save that started proves the one before it committed.
            if self._pending_async is not None:
                self._commit(self._pending_async)
            self._pending_async = e.step
        elif e.kind in ("restore", "start"):
            # A restart. MaxText's restore line and the trainer's start line both open
            # it; whichever comes second (no step in between) is the same attempt.
            if self._stepped:
                self.attempts += 1
                self._stepped = False
            self._pending_async = None  # an unfinished async save may be lost
            if e.step is not None:
                self._commit(e.step)  # a restored step is committed
        elif e.kind == "step":
            self._run.add((self.attempts, e.step))
            self._stepped = True

    def _commit(self, step: int | None) -> None:
        if step is not None and step not in self.committed:
            self.committed.append(step)
            self.committed.sort()

    @property
    def last_step(self) -> int | None:
        steps = [e.step for e in self.events if e.kind == "step"]
        return steps[-1] if steps else None

    @property
    def max_step(self) -> int | None:
        return max((e.step for e in self.events if e.kind == "step"), default=None)

    @property
    def steps_run(self) -> int:
        """Every step executed, counting redone steps once per attempt (hosts print alike)."""
        return len(self._run)

    @property
    def latest_checkpoint(self) -> int | None:
        return self.committed[-1] if self.committed else None
