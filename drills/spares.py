"""Warm spares in the local drills: how many each warm slice node starts, how long a drill waits for them, and the
verdicts on whether a restart ran in one (every restarted rank judged by its own process's start and preload)."""

from __future__ import annotations

import time

from drills.report import DrillFailed

# Idle processes each warm slice node starts with: one, for the first attempt's worker (Ray prestarts a job's workers
# itself as the job starts; this one has MaxText imported). Every restart is served by the spare the job's own
# training workers ask for after each attempt's first step (maxtext_trainer.keep_warm_spare, the trainer's
# --warm-workers), as on the cluster under unverified.warmSpares: a drill whose restart started cold fails.
WARM_SPARES = 1
# How long a warm drill waits, before its kill, for the spares the workers asked for to finish importing MaxText. A
# preemption of a real run comes minutes or hours after an attempt's first step; the drill kills seconds after it.
SPARE_READY_TIMEOUT_S = 240.0


def served_by_own_spare(ready: float | None, t_kill: float, asked: list[float]) -> bool:
    """Whether the restarted worker's process was a spare the job asked for (``asked``: when its workers' spare
    requests were sent) and ready before the kill (``ready``: when its MaxText preload finished, None: never).

    Ready before the kill alone does not prove it: a node's start-up spare (WARM_SPARES) that the first attempt left
    idle is ready long before, and would serve the restart with keep_warm_spare a no-op. A requested spare's
    preload ends after the request (importing MaxText takes seconds; the drill's wait for spares uses the same
    mark, ``_wait_for_spares``); both times are this machine's clock."""
    return ready is not None and bool(asked) and min(asked) <= ready < t_kill


def _every_rank(ups: list[dict], world: int, since: float, until: float, after: str,
                judge) -> tuple[bool | None, list[str]]:
    """The verdict over every rank of a worker group that started between ``since`` and ``until``: each rank by its
    last ``worker_up`` in that window (an earlier failed start's workers are not this group), ``judge(e)`` giving
    (served, how it started). True when all were served, False when one was not, None when a rank's line is
    missing and none failed (nobody can call it warm); one line per rank."""
    group: dict[int, dict] = {}
    for e in sorted(ups, key=lambda e: e["t_up"]):
        if since <= e["t_up"] <= until:
            group[int(e.get("rank", 0))] = e
    lines, verdict = [], True
    for rank in range(world):
        e = group.get(rank)
        if e is None:
            lines.append(f"rank {rank}: no worker_up line after the {after}")
            verdict = None if verdict is not False else False
            continue
        served, how = judge(e)
        lines.append(f"rank {rank}: {how}")
        if not served:
            verdict = False
    return verdict, lines


def restart_on_own_spares(ups: list[dict], world: int, t_kill: float, t_start: float,
                          asked: list[tuple[float, str | None]]) -> tuple[bool | None, list[str]]:
    """Whether every rank of the worker group that restarted after ``t_kill`` (and started training at
    ``t_start``, on ``world`` workers) ran in a spare its own node was asked for (:func:`served_by_own_spare`).

    ``ups``: the workers' ``worker_up`` events (every rank reports its own, with its node); ``asked``: (when, node)
    of each spare request. (True/False, or None when some rank's line is missing: :func:`_every_rank`.)"""

    def judge(e: dict) -> tuple[bool, str]:
        # A rank that did not say its node (None) has no spare of its own: None must not match another's None.
        own = [t for t, node in asked if node is not None and node == e.get("node")]
        served = served_by_own_spare(e.get("ready_at"), t_kill, own)
        return served, ("its node's spare" if served else
                        "a cold process" if e.get("ready_at") is None or e["ready_at"] >= t_kill else
                        "a process its node's spare request did not start")

    return _every_rank(ups, world, t_kill, t_start, "kill", judge)


def restart_on_standby_spares(ups: list[dict], world: int, t_loss: float, t_dispatch: float,
                              t_start: float) -> tuple[bool | None, list[str]]:
    """Whether every rank of region B's first worker group (dispatched at ``t_dispatch``, training from
    ``t_start`` on ``world`` workers) ran in a standby spare: a process of region B started, and done preloading
    MaxText (warm_worker's READY_AT, its ``ready_at``), before the loss at ``t_loss``. No job ran in B before, so
    any such process is the standby's own.

    A process started before the loss but still preloading at it is not a warm spare: Ray runs a worker's
    preload before its main loop (Ray 2.60 ``_private/workers/default_worker.py``: ``try_import_each_module``,
    then ``worker.main_loop()``), so the job's actor waited for the rest of the import. (True/False, or None when
    a rank's ``worker_up`` line is missing: :func:`_every_rank`.)"""

    def judge(e: dict) -> tuple[bool, str]:
        ready, started = e.get("ready_at"), e.get("proc_start")
        if ready is not None and ready < t_loss:
            return True, f"a standby spare, ready {t_loss - ready:.1f} s before the loss"
        if started is not None and started < t_loss:
            still = "not preloaded" if ready is None else f"ready {ready - t_loss:.1f} s after it"
            return False, f"a standby process still preloading at the loss ({still})"
        return False, "a process started after the loss (cold)"

    return _every_rank(ups, world, t_dispatch, t_start, "dispatch", judge)


class SpareChecks:
    """A local drill's warm-spare steps and checks, mixed into :class:`drills.local.LocalDrill` (its ``warm``,
    ``cluster``, ``timeline``, ``report``, ``opts``, ``_wait`` and ``restart_unseen``)."""

    def _wait_for_spares(self, deadline: float) -> None:
        """With warm spares: wait until every live slice node has a spare that the job's workers asked for
        (after their first step) and that is done importing MaxText (warm_worker's ready mark, written after the
        request). Bounded by SPARE_READY_TIMEOUT_S: past it the drill kills anyway, and a restart that then starts
        cold fails the drill (``_spare_problems``)."""
        if not (self.warm and self.cluster.spares):
            return
        t = time.time()
        self._wait("the workers' spare requests", lambda: self.timeline.spare_requested_at or
                   self.timeline.spares_refused, deadline)
        with self.timeline.lock:
            if not self.timeline.spare_requested_at:
                return  # refused: reported and failed on by _spare_problems
            asked = self.timeline.spare_requested_at[0]
        nodes = [n.name for n in self.cluster.live_workers()]
        # The kill must leave a restart to see: past this step the drill kills whether the spares are ready or not.
        last_kill = self.opts.steps - 2 * self.opts.checkpoint_period - 1

        def ready():
            marks = self.cluster.spare_ready_marks()
            tl = self.timeline  # a failed precompile ends the wait too (reported by _precompile_problems)
            compiled = not tl.precompile_started or tl.precompiled_s is not None or tl.precompile_error is not None
            if compiled and all(any(at >= asked for at in marks.get(n, ())) for n in nodes):
                return "ready"
            step = self.timeline.last_step()
            return "run ending" if step is not None and step >= last_kill else None

        try:
            why = self._wait("the workers' spares to be ready", ready,
                             min(deadline, time.time() + SPARE_READY_TIMEOUT_S))
        except DrillFailed:
            why = f"not ready {SPARE_READY_TIMEOUT_S:.0f} s after their request"
        if why != "ready":
            self.report.notes.append(f"the workers' spares: {why}; killed anyway (use more --steps)")
        self.report.figures["waited for the workers' spares before the kill (s)"] = round(time.time() - t, 1)

    def _judge_restart(self, t_kill: float, t_start: float, world: int) -> None:
        """The restart's figures: how each restarted rank's process started, and whether all ran in their own
        node's spare (``restart_on_own_spares``; ``_spare_problems`` fails the drill on a cold or silent rank)."""
        r, tl = self.report, self.timeline
        with tl.lock:
            ups, asked = list(tl.warm_ups), list(tl.spare_asked)
        # A spare served the restart only if every restarted rank's process was started, and its MaxText preload done,
        # before the kill, after its own node was asked for a spare: on a warm node a process started for the restart
        # preloads too (after it).
        served, how = restart_on_own_spares(ups, world, t_kill, t_start, asked)
        r.figures["restarted ranks"] = "; ".join(how)
        if served is None:
            # Resumed, but a restarted rank never said how its process started: with spares on, that is a restart
            # nobody can call warm, never a pass by silence (_spare_problems).
            self.restart_unseen = True
        else:
            r.figures["restarted on a warm spare"] = served
        starts = [e["proc_start"] for e in ups if t_kill <= e["t_up"] <= t_start and e.get("proc_start")]
        if starts:
            r.figures["restarted process started (s from the kill)"] = round(max(starts) - t_kill, 1)

    def _spare_problems(self) -> list[str]:
        """Warm spares that did not serve: a node's or a worker's spare request refused (e.g. Ray's token auth),
        or, with spares on, a restart that started a cold process. Each fails the drill: a spare that silently
        stops serving restarts is the failure this check exists for."""
        r, tl = self.report, self.timeline
        with tl.lock:
            refused, requested = list(tl.spares_refused), tl.spares_requested
        refused += [f"node {n}: {e}" for n, e in self.cluster.spares_refused]
        if not self.cluster.spares:
            return ["the stack keeps warm spares (unverified.warmSpares), this drill's cluster none: not drilled"
                    ] if self.warm else []
        r.figures["spares requested by the workers"] = requested
        r.figures["spare requests refused"] = len(refused)
        problems = [f"warm spare refused: {e}" for e in refused[:3]]
        if r.figures.get("restarted on a warm spare") is False:
            problems.append("warm spares on, but a restarted rank did not run in its node's spare: "
                            f"{r.figures.get('restarted ranks', '?')}")
        elif self.restart_unseen:
            problems.append("warm spares on, but a restarted rank reported no worker_up line: whether a spare "
                            f"served the restart is unknown ({r.figures.get('restarted ranks', '?')})")
        return problems
