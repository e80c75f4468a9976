"""Local drills under the stack's own warm-spare setting (``unverified.warmSpares``).

A drill starts warm spares only where the stack keeps them (or where its options override that, and the report says
so), and its restart is then served by the spare the job's own training workers asked for
(``maxtext_trainer.keep_warm_spare``), as on the cluster: the node's start-up spare is the first attempt's. The slow
test is a real drill on prod's settings (token auth) with the opt-in on, and must record a restart served by a spare;
with the job's spare request broken it fails (the drill reports the cold restart).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import opt_in

from drills import spares
from drills.local import LocalDrill, LocalDrillOptions, pick_job
from drills.local_train import ROOT
from offline import engine
from stackspec import spec as stack_spec

IMAGE = "tpu-multislice:image"
DIGEST = "sha256:" + "ab" * 32  # a well-formed digest: the stack runs its own image (warmSpares needs it)


def _warm_prod() -> stack_spec.StackSpec:
    config = dict(engine.stack_config("prod"))
    config[IMAGE] = json.dumps(json.loads(config[IMAGE]) | {"digest": DIGEST})
    return stack_spec.load("prod", opt_in(config, "warmSpares"))


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


class _Cluster:
    """What LocalDrill reads of a running cluster before its run (a drill passed one does not start its own)."""

    def __init__(self, spares: int):
        self.spares, self.spares_refused = spares, []

    def live_workers(self):
        return [1, 2]


@pytest.mark.parametrize(("stack", "override", "warm"), [
    ("dev", None, False), ("prod", None, False), ("warm-prod", None, True),
    ("dev", True, True), ("warm-prod", False, False)])
def test_a_drill_keeps_warm_spares_only_where_the_stack_does_or_says_it_was_overridden(tmp_path, stack, override,
                                                                                       warm):
    spec = _warm_prod() if stack == "warm-prod" else _spec(stack)
    drill = LocalDrill(spec, pick_job(spec, None), tmp_path, LocalDrillOptions(warm=override), cluster=_Cluster(1))
    assert drill.warm is warm
    assert ("overridden" in drill.warm_source) is (override is not None)
    # The trainer is told to keep spares exactly when the drill's nodes do (its --warm-workers).
    from workloads.trainer_args import trainer_argv

    argv = trainer_argv(spec, drill.job, local=True, data_dir=str(tmp_path), warm_workers=drill.warm)
    assert ("--warm-workers" in argv) is warm


def test_a_stack_with_spares_drilled_on_a_cluster_without_any_fails_the_drill(tmp_path):
    """The stack keeps spares, the cluster the drill was given has none: not a pass that drilled nothing."""
    spec = _warm_prod()
    drill = LocalDrill(spec, pick_job(spec, None), tmp_path, LocalDrillOptions(), cluster=_Cluster(0))
    assert any("not drilled" in p for p in drill._spare_problems())
    dev = _spec("dev")
    assert LocalDrill(dev, pick_job(dev, None), tmp_path, LocalDrillOptions(), cluster=_Cluster(0)) \
        ._spare_problems() == []


def test_the_nodes_start_one_spare_the_restart_takes_the_jobs_own():
    """One start-up spare per node, the first attempt's: a second would serve the restart whatever the job does, and
    the drill could not see the job's own spare request (keep_warm_spare) break."""
    assert spares.WARM_SPARES == 1


def test_a_restart_in_a_process_ready_before_the_jobs_spare_request_is_not_the_jobs_own_spare():
    """The verdict "restarted on a warm spare" proves keep_warm_spare served the restart only if the process was
    ready after the job's workers asked for it: a process preloaded earlier (a node's start-up spare the first
    attempt left idle, e.g. taken by no actor) would serve the restart with keep_warm_spare a no-op."""
    asked = [100.0]  # the workers' spare request, after the first step
    assert spares.served_by_own_spare(104.0, t_kill=110.0, asked=asked)  # the job's spare, ready before the kill
    assert not spares.served_by_own_spare(50.0, t_kill=110.0, asked=asked)  # the node's start-up spare
    assert not spares.served_by_own_spare(50.0, t_kill=110.0, asked=[])  # no request at all (a no-op)
    assert not spares.served_by_own_spare(112.0, t_kill=110.0, asked=asked)  # started for the restart: cold
    assert not spares.served_by_own_spare(None, t_kill=110.0, asked=asked)  # not preloaded


def _up(rank: int, node: str, t_up: float, ready: float | None) -> dict:
    return {"event": "worker_up", "t_up": t_up, "rank": rank, "node": node, "ready_at": ready, "proc_start": 1.0}


def test_every_restarted_rank_must_run_in_its_own_nodes_spare():
    """A restart of two ranks: each is judged by the spare its own node was asked for, not rank 0's alone. The
    drill's default victim is the last slice, so rank 0 survives and its node's spare serves it whatever happens on
    the other ranks: one rank restarting cold (or in a spare asked for on another node, or silent) fails the
    verdict."""
    asked = [(100.0, "n0"), (101.0, "n1")]
    both = [_up(0, "n0", 112.0, 104.0), _up(1, "n1", 112.5, 105.0)]
    assert spares.restart_on_own_spares(both, 2, t_kill=110.0, t_start=120.0, asked=asked)[0] is True
    cold = [_up(0, "n0", 112.0, 104.0), _up(1, "n1", 112.5, None)]
    verdict, how = spares.restart_on_own_spares(cold, 2, t_kill=110.0, t_start=120.0, asked=asked)
    assert verdict is False and how == ["rank 0: its node's spare", "rank 1: a cold process"]
    # Rank 1's process ready after n0's request, but its own node n1 never asked: not its own spare.
    other = [_up(0, "n0", 112.0, 104.0), _up(1, "n1", 112.5, 105.0)]
    assert spares.restart_on_own_spares(other, 2, 110.0, 120.0, asked=[(100.0, "n0")])[0] is False
    # Ranks that did not report their node are served by no one's request (not any other None-node request).
    nameless = [_up(0, None, 112.0, 104.0), _up(1, None, 112.5, 105.0)]
    assert spares.restart_on_own_spares(nameless, 2, 110.0, 120.0, asked=[(100.0, None)])[0] is False
    # Rank 1 silent: unknown, never a pass; a failed start's workers before the restart are not the restart.
    assert spares.restart_on_own_spares(both[:1], 2, 110.0, 120.0, asked)[0] is None
    late = [_up(0, "n0", 112.0, 104.0), _up(1, "n1", 125.0, 105.0)]
    assert spares.restart_on_own_spares(late, 2, 110.0, 120.0, asked)[0] is None
    # The same events through the drill's timeline: one cold rank fails the drill.
    drill = LocalDrill(_warm_prod(), pick_job(_warm_prod(), None), Path(tempfile.mkdtemp()), LocalDrillOptions(),
                       cluster=_Cluster(1))
    for t, node in asked:
        drill.timeline.on_event({"event": "spare_requested", "t": t, "world": 2, "rank": int(node[1]), "node": node})
    for e in cold:
        drill.timeline.on_event(e)
    drill._judge_restart(t_kill=110.0, t_start=120.0, world=2)
    assert drill.report.figures["restarted on a warm spare"] is False
    assert any("rank 1: a cold process" in p for p in drill._spare_problems())
    drill.timeline.warm_ups[1]["ready_at"] = 105.0  # rank 1 in its node's spare too: no problem
    drill._judge_restart(t_kill=110.0, t_start=120.0, world=2)
    assert drill.report.figures["restarted on a warm spare"] is True and drill._spare_problems() == []


@pytest.mark.slow
def test_a_drill_under_the_stacks_warm_spares_restarts_on_the_jobs_own_spare(jax_cache):
    """prod's settings (Ray token auth) with unverified.warmSpares on: the training workers ask their raylet for a
    spare after their first step, the drill kills once it is ready, and the elastic restart runs in that process
    (started and done importing MaxText before the kill). Breaking keep_warm_spare (a no-op, or a raw gRPC channel
    the raylet refuses under token auth) fails this test: the restart starts cold, or the refusal is reported."""
    spec = _warm_prod()
    assert spec.ray.auth == "token"
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tw-", dir=ROOT / "build"))  # short: Ray's sockets
    # Steps enough for the spare the workers ask for after their first step to import MaxText on a loaded machine.
    opts = LocalDrillOptions(steps=120, checkpoint_period=5, step_delay=0.5, timeout_s=1500, jax_cache_dir=jax_cache)
    try:
        drill = LocalDrill(spec, pick_job(spec, None), run_dir, opts)
        report = drill.run()
        assert report.figures["warm spares"] == "on (the stack's unverified.warmSpares)"
        assert report.figures["ray auth"] == "token"
        assert report.figures["spares requested by the workers"] >= 1
        assert report.figures["spare requests refused"] == 0
        assert report.figures["restarted on a warm spare"] is True, report.notes
        # The restart shape's real precompile (maxtext_trainer._precompile on the tiny CPU model) finished and said
        # so before the kill (the drill waits for its "precompiled" line); a failed one fails the report.
        assert isinstance(report.figures["restart shape's train step precompiled (s)"], float), report.figures
        assert report.ok, report.notes
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_resume_whose_restart_reported_nothing_fails_a_drill_with_spares(tmp_path):
    """Spares on, the job resumed, but the restarted rank 0 never said how its process started: the drill cannot
    call the restart warm, so it fails rather than pass by silence; without spares the same silence is no problem."""
    spec = _warm_prod()
    drill = LocalDrill(spec, pick_job(spec, None), tmp_path, LocalDrillOptions(), cluster=_Cluster(1))
    assert drill._spare_problems() == []
    drill.restart_unseen = True
    assert any("unknown" in p for p in drill._spare_problems())
    dev = _spec("dev")
    cold = LocalDrill(dev, pick_job(dev, None), tmp_path, LocalDrillOptions(), cluster=_Cluster(0))
    cold.restart_unseen = True
    assert cold._spare_problems() == []
