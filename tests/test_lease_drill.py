"""The stack's writer lease in the local drills (drills/writer_lease.py).

Fast: which drills hold it (the stack's own setting, or an override the report names), the trainer's arguments for
it, and the verdict, which fails a drill whose copy saved before it held the lease or took it before the lost
copy's expiry plus the skew. Slow: the region-loss drill on the lease, against the emulator; with the trainer's
guard not waiting for the lease (the mutation it exists for), the same drill fails.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from drills import writer_lease
from drills.writer_lease import drill_lease, lease_problems
from offline import engine
from stackspec import spec as stack_spec


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


def _lease(t: float, holder: str = "b", epoch: int = 2, waited: float = 0.0, skew: float = 2.0) -> dict:
    return {"event": "lease", "state": "acquired", "t": t, "holder": holder, "epoch": epoch, "waited_s": waited,
            "skew_s": skew}


def _saving(t: float, step: int) -> dict:
    return {"event": "saving", "t": t, "step": step}


def test_drills_hold_the_lease_where_the_stack_does_or_say_it_was_overridden():
    multi = _spec("multi")
    queued = [j for v in multi.region_views() for j in v.jobs if j.region is None]
    assert queued, "multi has a job its manager queues"
    on, why = drill_lease(multi, queued[0], None)
    assert on and "the stack's" in why
    dev = _spec("dev")
    job = dev.drill_job(None)
    assert drill_lease(dev, job, None) == (False, "off (the stack's: its cluster's trainer runs without --lease)")
    assert drill_lease(dev, job, True) == (True, "on (overridden; the stack's is off)")
    from drills import image_settings

    answer = dict((n, how) for n, _, how in image_settings.image_settings(multi, queued[0]))["--lease"]
    assert answer.startswith("applied") and "emulator" in answer


def test_a_local_drills_trainer_holds_the_lease_on_the_emulators_bucket():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    from workloads.trainer_args import trainer_argv

    dev = _spec("dev")
    job = dev.drill_job(None)
    where = writer_lease.location(job.run_name)
    argv = trainer_argv(dev, job, local=True, data_dir="/tmp/run", lease=where, lease_ttl=writer_lease.DRILL_TTL_S)
    args, _ = maxtext_trainer.parse_args(argv)
    assert args.lease == where == f"gs://{writer_lease.BUCKET}/{job.run_name}/.writer-lease"
    assert args.lease_ttl == writer_lease.DRILL_TTL_S
    cluster = trainer_argv(dev, job)
    cut = cluster.index("--")
    with pytest.raises(SystemExit):  # a scaled lease is a local drill's only
        maxtext_trainer.parse_args(cluster[:cut] + ["--lease", where, "--lease-ttl", "20"] + cluster[cut:])


def test_a_save_before_its_copy_held_the_lease_fails_the_drill():
    ok = [("region-a", [_lease(10.0, "a", 1), _saving(11.0, 0), _saving(20.0, 5)]),
          ("region-b", [_lease(45.0, "b", 2, waited=12.0), _saving(46.0, 10)])]
    previous = {"holder": "a", "epoch": 1, "expires": 42.5}
    problems, figures = lease_problems(ok, previous)
    assert problems == []
    assert figures["region-b: lease waited (s)"] == 12.0 and figures["region-b: saves under the lease"] == 1
    # Region B's first save before its driver held the lease (a guard that does not wait).
    early = ok[:1] + [("region-b", [_saving(40.0, 10), _lease(45.0, "b", 2)])]
    problems, _ = lease_problems(early, previous)
    assert any("save of step 10" in p and "before this copy held" in p for p in problems)
    # A save by a copy that never held it at all.
    problems, figures = lease_problems([("copy 1", [_saving(1.0, 0)])])
    assert figures["copy 1: lease"] == "never acquired" and "without the writer lease" in problems[0]


def test_a_takeover_before_the_lost_copys_expiry_plus_skew_fails_the_drill():
    previous = {"holder": "a", "epoch": 1, "expires": 42.5}
    a = ("region-a", [_lease(10.0, "a", 1)])
    problems, _ = lease_problems([a, ("region-b", [_lease(30.0, "b", 2)])], previous)
    assert any("before the lost copy's lease ran out" in p for p in problems)
    # The same holder as the lost copy: a takeover at once.
    problems, _ = lease_problems([a, ("region-b", [_lease(30.0, "a", 1)])], previous)
    assert any("same-holder takeover" in p for p in problems)
    # A lease the first copy released (a failed job's driver does) may be taken at once.
    problems, _ = lease_problems([a, ("region-b", [_lease(30.0, "b", 2)])], previous | {"released": True})
    assert problems == []
    failed = {"event": "lease", "state": "failed", "t": 5.0, "error": "LeaseHeld: held by a"}
    problems, _ = lease_problems([("copy 1", [failed])])
    assert any("not taken: LeaseHeld" in p for p in problems)


def test_a_drill_whose_trainer_ignored_the_lease_fails():
    """With the lease on, a copy that finished its run reports the lease it held and its saves (its last step's at
    least): a trainer that ran without the lease (no lease line, no saving line) must not pass a verdict that then
    judged nothing."""
    done = {"event": "done", "t": 30.0, "world": 2}
    problems, _ = lease_problems([("copy 1", [done])])
    assert any("finished without ever reporting the writer lease" in p for p in problems)
    assert any("judged nothing" in p for p in problems)
    # The lease held but no save reported (the saving line lost): still fails.
    problems, _ = lease_problems([("copy 1", [_lease(1.0, "a", 1), done])])
    assert problems == ["no save was reported under the writer lease: the verdict judged nothing"]
    # Held, saved under it, finished: passes.
    assert lease_problems([("copy 1", [_lease(1.0, "a", 1), _saving(2.0, 0), done])])[0] == []


def test_the_lost_copys_lease_is_kept_alive_until_region_b_resumes_on_the_emulator():
    """The region-loss drill's stand-in for a partitioned region A: on the emulator, A's lease is renewed as A's
    holder while B waits (B cannot take it), and stops when told; the lease as last written is what B is judged
    against. A lease taken over meanwhile is left alone (a refused conditional write)."""
    import threading
    import time

    from drills.writer_lease import Emulator, LostCopyRenewer
    from workloads.trainer import lease as wl

    run = "r-1a2b3c4d"
    with Emulator() as em:
        store = wl.store_for(writer_lease.location(run), em.url)

        def copy(holder: str) -> wl.WriterLease:
            return wl.WriterLease(writer_lease.location(run), holder, ttl_s=writer_lease.DRILL_TTL_S, save_budget_s=8,
                                  skew_s=2, store=store)

        copy("a").acquire()
        stop = threading.Event()
        renewer = LostCopyRenewer(em, run, stop.is_set).start()
        deadline = time.time() + 20
        while renewer.renewals < 1 and time.time() < deadline:
            time.sleep(0.05)
        assert renewer.renewals >= 1 and not copy("b").try_acquire()
        stop.set()
        renewer.join()
        assert renewer.error is None and renewer.last["holder"] == "a"
        assert em.read(run)["expires"] == renewer.last["expires"] > time.time()


@pytest.mark.slow
def test_the_region_loss_drill_holds_the_lease_and_region_b_takes_it_before_its_first_save(local_cluster):
    """dev's region-loss drill with the lease on (an override: dev's jobs hold none), on the emulator: region A
    holds it from its start; after the loss region B restores while it waits, resumes before it holds the lease
    (kill -> first step does not wait for it), takes it only past A's expiry plus the skew, and saves only under it.
    The guard's mutation (no wait for the lease) fails this drill: tests/test_lease_drill.py's module docstring."""
    from drills.local_train import ROOT
    from drills.regions import Region, RegionLossDrill, RegionLossOptions

    dev = _spec("dev")
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tl-", dir=ROOT / "build"))
    opts = RegionLossOptions(region_a=Region("region-a", 2), region_b=Region("region-b", 1), steps=20,
                             checkpoint_period=5, step_delay=0.15, timeout_s=600, lease=True)
    try:
        drill = RegionLossDrill(dev, dev.drill_job(None), run_dir, opts, cluster_b=local_cluster)
        report = drill.run()
        assert report.ok, report.notes
        f = report.figures
        assert f["writer lease"] == "on (overridden; the stack's is off)"
        assert f["region-a: lease epoch"] == 1 and f["region-b: lease epoch"] == 2
        assert f["region-b: saves under the lease"] >= 1
        # Region B resumed before it held the lease: the wait overlapped its restore and first steps.
        assert f["region-b: lease acquired (s from the loss)"] > report.resume_s, (f, report.resume_s)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_local_drill_on_a_stack_whose_jobs_hold_the_lease_reports_it_and_fails_a_save_without_it(tmp_path):
    """The preemption drill of a queued job of multi holds the lease (the stack's own setting): its figures say so and
    when each copy took it; a copy's save before its lease fails the drill's report."""
    import types

    from drills.local import LocalDrill, LocalDrillOptions

    multi = _spec("multi")
    job = next(j for j in multi.jobs if j.region is None)  # a multislice job its manager queues
    cluster = types.SimpleNamespace(spares=0, spares_refused=[], live_workers=lambda: [1, 2])
    drill = LocalDrill(multi, job, tmp_path, LocalDrillOptions(), cluster=cluster)
    assert drill.lease
    drill._lease_server()  # (not entered: no server needed to judge)
    assert drill.report.figures["writer lease"].startswith("on (the stack's")
    drill.t_job = 100.0
    drill.drivers = [types.SimpleNamespace(events=[_lease(101.5, "a", 1), _saving(103.0, 0)])]
    assert drill._lease_problems() == []
    assert drill.report.figures["copy 1: lease acquired (s from the job's start)"] == 1.5
    drill.drivers.append(types.SimpleNamespace(events=[_saving(200.0, 5), _lease(201.0, "b", 2)]))
    assert any("copy 2: save of step 5" in p for p in drill._lease_problems())
