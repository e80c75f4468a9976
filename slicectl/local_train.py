"""Run the stack's trainer script as a Ray driver against a :class:`LocalRayCluster`.

Shared by ``slicectl train --local`` and the local drill: start the driver in its own
process group, stream its output to a log file, and turn the trainer's
``slicectl-progress`` / ``slicectl-result`` lines into events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slicectl.localray import LocalRayCluster
from workloads.trainer_args import TRAINER_SCRIPT

PROGRESS = "slicectl-progress "
RESULT = "slicectl-result "


def parse_line(line: str) -> tuple[str, dict] | None:
    """``("progress"|"result", payload)`` for a trainer line (Ray prefixes it with the actor)."""
    for kind, mark in (("progress", PROGRESS), ("result", RESULT)):
        i = line.find(mark)
        if i >= 0:
            text = line[i + len(mark):].strip()
            # Ray's log dedup may append " [repeated Nx across cluster]" plus colour codes.
            text = text[: text.rfind("}") + 1]
            try:
                return kind, json.loads(text)
            except json.JSONDecodeError:
                return None
    return None


@dataclass
class DriverRun:
    """The trainer driver process and what it has reported so far."""

    proc: subprocess.Popen
    log: Path
    events: list[dict] = field(default_factory=list)
    result: dict | None = None
    _seen: set = field(default_factory=set)
    _reader: threading.Thread | None = None

    def steps(self) -> list[int]:
        return [e["step"] for e in self.events if e["event"] == "step"]

    def losses(self) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in self.events if e["event"] == "loss"}

    def wait(self, timeout: float | None = None) -> int:
        rc = self.proc.wait(timeout=timeout)
        if self._reader:
            self._reader.join(timeout=10)
        return rc

    def stop(self) -> None:
        """End the driver's process group (the driver and anything it forked)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_driver(
    cluster: LocalRayCluster,
    argv: list[str],
    log: Path,
    on_event: Callable[[dict], None] | None = None,
    echo: bool = False,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
) -> DriverRun:
    """Start ``python maxtext_trainer.py argv`` against ``cluster``; events go to ``on_event``,
    every raw line (Ray's and MaxText's too) to ``on_line``; ``env`` adds variables."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-u", str(TRAINER_SCRIPT), *argv],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=cluster.env | (env or {}) | {"PYTHONUNBUFFERED": "1"}, cwd=cluster.run_dir,
        start_new_session=True, text=True, errors="replace",
    )
    run = DriverRun(proc, log)

    def read() -> None:
        with open(log, "w") as out:
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if echo:
                    sys.stdout.write(line)
                if on_line:
                    on_line(line)
                parsed = parse_line(line)
                if parsed is None:
                    continue
                kind, payload = parsed
                if kind == "result":
                    run.result = payload
                    continue
                # Ray forwards a line once per log monitor; keep each event once.
                key = (payload.get("event"), payload.get("step"), payload.get("t"))
                if key in run._seen:
                    continue
                run._seen.add(key)
                payload["seen_at"] = time.time()
                run.events.append(payload)
                if on_event:
                    on_event(payload)

    run._reader = threading.Thread(target=read, daemon=True)
    run._reader.start()
    return run
