"""The reshard scenario of ``slicectl drill --local``: a checkpoint written by N workers restores on M, both ways, and
the loss curve goes on as an uninterrupted run's.

:class:`Reshard` holds the scenario's steps; :class:`drills.local.LocalDrill` runs them with its options
(``opts``), report, drivers (``_start_driver``), waits (``_wait``) and run directory.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from drills.checkpoints import checkpoint_dirs
from drills.report import DrillFailed

# reshard: short runs (no kill window needed): checkpoints 0, 5, 10, 15, 19 at the default period.
RESHARD_STEPS = 20
# reshard: how far a resharded run's losses may stray from the reference run's.
# The first step after the restore runs on the restored state itself, compared with the run that
# wrote the checkpoint: only the reduction order of one forward pass differs between N and M
# workers (measured: ~2e-6). Later steps add each
# update's rounding, which Adam amplifies where a gradient entry is near zero (measured: ~1e-4
# after one step, ~6e-4 after 10); a restore that lost the optimizer state or the step (learning-rate schedule)
# or reloaded an older checkpoint strays by the loss change of a whole period, which the report
# shows beside the tolerance.
FIRST_STEP_LOSS_TOL = 1e-4
CONTINUATION_LOSS_TOL = 2e-3


class Reshard:
    """The reshard scenario's steps, mixed into :class:`drills.local.LocalDrill`."""

    def _run_to_end(self, name: str, slices: int, data_dir: Path, deadline: float):
        driver = self._start_driver(slices=slices, data_dir=data_dir, name=name)
        self._wait(f"the {name} run to end", lambda: driver.proc.poll() is not None, deadline,
                   driver_may_exit=True)
        driver.wait(timeout=10)
        if driver.proc.returncode != 0 or not (driver.result or {}).get("ok"):
            raise DrillFailed(f"the {name} run failed (driver exit {driver.proc.returncode}); see {driver.log}")
        return driver

    def _reference(self, deadline: float) -> tuple[dict[int, float], Path, int]:
        """(losses by step, checkpoints directory, workers) of an uninterrupted run."""
        o = self.opts
        if o.reference_dir is not None:
            ref = Path(o.reference_dir)
            summary = json.loads((ref / "summary.json").read_text())
            losses = {int(k): v for k, v in summary["losses"].items()}
            if not summary.get("ok") or max(losses, default=-1) != o.steps - 1:
                raise DrillFailed(f"reference run {ref} is not a finished {o.steps}-step run")
            self.say(f"reference: {ref} ({summary['world_size']} workers, {len(losses)} steps)")
            return losses, ref / "out" / self.job.run_name / "checkpoints", summary["world_size"]
        driver = self._run_to_end("reference", o.slices, self.run_dir / "reference", deadline)
        self.say(f"reference run done on {o.slices} workers")
        return driver.losses(), self.run_dir / "reference" / self.job.run_name / "checkpoints", o.slices

    def _resharded(self, name: str, src: Path, src_losses: dict[int, float], step: int, workers: int,
                   ref: dict[int, float], deadline: float) -> tuple[Path, dict[int, float], list[str]]:
        """Restore checkpoint ``step`` of ``src`` on ``workers`` workers and train to the end. Its
        first step runs on the restored state: compared with the run that wrote the checkpoint
        (``src_losses``, same state, other worker count); every step is compared with the
        uninterrupted ``ref``. (its checkpoints directory, its losses, problems)."""
        o, r = self.opts, self.report
        data_dir = self.run_dir / name
        ckpt = data_dir / self.job.run_name / "checkpoints"
        ckpt.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src / str(step), ckpt / str(step))  # the latest there: MaxText restores it
        t = time.time()
        driver = self._run_to_end(name, workers, data_dir, deadline)
        r.marks.append((f"{name} run", t))
        starts = [e for e in driver.events if e["event"] == "start"]
        losses = driver.losses()
        problems = []
        if not starts or starts[0]["start_step"] != step + 1 or starts[0]["world"] != workers:
            got = (starts[0]["start_step"], starts[0]["world"]) if starts else None
            problems.append(f"{name}: expected to resume at step {step + 1} on {workers} worker(s), got "
                            f"(step, workers) {got}")
        compared = sorted(s for s in losses if s > step and s in ref)
        if compared != list(range(step + 1, o.steps)):
            problems.append(f"{name}: losses for steps {compared}, expected {step + 1}..{o.steps - 1}")
        diffs = {s: abs(losses[s] - ref[s]) for s in compared}
        nxt = step + 1
        first = abs(losses[nxt] - src_losses[nxt]) if nxt in losses and nxt in src_losses else None
        worst = max(diffs.values(), default=None)
        # What a wrong restore would look like: the reference's loss change over one period.
        scale = min((abs(ref[s] - ref[s - o.checkpoint_period]) for s in compared
                     if s - o.checkpoint_period in ref), default=None)
        r.figures[f"{name}: restored step"] = step
        r.figures[f"{name}: workers"] = f"{self._writers[src]} -> {workers}"
        r.figures[f"{name}: first step |loss - writer's|"] = None if first is None else float(f"{first:.2e}")
        r.figures[f"{name}: max |loss - ref|"] = None if worst is None else float(f"{worst:.2e}")
        r.figures[f"{name}: one period's loss change"] = None if scale is None else round(scale, 4)
        if first is not None and first > FIRST_STEP_LOSS_TOL:
            problems.append(f"{name}: first step after the restore has loss {losses[nxt]:.6f}, the run that "
                            f"wrote the checkpoint {src_losses[nxt]:.6f} (tolerance {FIRST_STEP_LOSS_TOL})")
        if worst is not None and worst > CONTINUATION_LOSS_TOL:
            s = max(diffs, key=diffs.get)
            problems.append(f"{name}: step {s} loss {losses[s]:.6f}, the reference {ref[s]:.6f} "
                            f"(tolerance {CONTINUATION_LOSS_TOL})")
        self.say(f"{name}: checkpoint {step} restored on {workers} worker(s); first step |diff| {first}, "
                 f"max {worst} over {len(diffs)} step(s)")
        self._writers[ckpt] = workers
        return ckpt, losses, problems

    def _reshard(self, deadline: float) -> None:
        """A checkpoint written by N workers restores on M, both ways, and the loss curve goes on
        as an uninterrupted run's: reference on N, then N -> 1 (down) from its first checkpoint
        past 0, then 1 -> N (up) from a checkpoint the down run wrote."""
        o, r = self.opts, self.report
        if o.slices < 2:
            raise DrillFailed("the reshard drill needs at least 2 workers for its N")
        ref, ref_ckpt, n = self._reference(deadline)
        self._writers = {ref_ckpt: n}
        committed, _ = checkpoint_dirs(ref_ckpt)
        down_from = next((c for c in committed if c > 0), None)
        if down_from is None or down_from >= o.steps - 2:
            raise DrillFailed(f"the reference run has no checkpoint to restore early enough: {committed}")
        down_ckpt, down_losses, problems = self._resharded("down", ref_ckpt, ref, down_from, 1, ref, deadline)
        written, _ = checkpoint_dirs(down_ckpt)
        up_from = next((c for c in written if c > down_from), None)
        if up_from is None or up_from >= o.steps - 1:
            raise DrillFailed(f"the down run wrote no checkpoint to restore from: {written}")
        _, _, more = self._resharded("up", down_ckpt, down_losses, up_from, n, ref, deadline)
        problems += more
        r.figures["tolerance (first step, later steps)"] = f"{FIRST_STEP_LOSS_TOL}, {CONTINUATION_LOSS_TOL}"
        r.final_step = o.steps - 1
        r.notes += problems
        r.ok = not problems
