"""The writer lease (workloads/trainer/lease.py): two copies of one run never both write its checkpoints.

Locally: two writer processes racing on one directory (the local store's lock), a takeover after expiry that
stops the old holder before its next save, a waiting copy that starts once the first releases; the guard on
MaxText's save call, where MaxText makes it. Against a storage server someone else wrote, with injected faults:
tests/test_lease_emulator.py.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import sys
from pathlib import Path

import maxtext_standin
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
import lease as wl  # noqa: E402 (the trainer's own import path: the module sits beside the script)


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _race(location: str, holder: str, start, out) -> None:
    start.wait()
    try:
        wl.WriterLease(location, holder).acquire()
        out.put((holder, "won"))
    except wl.LeaseHeld:
        out.put((holder, "held"))


def test_two_writer_processes_one_wins(tmp_path):
    """Two processes acquire the same run's lease at the same moment: exactly one holds it."""
    location = str(tmp_path / "run" / wl.LEASE_NAME)
    ctx = multiprocessing.get_context("fork")
    for _ in range(5):
        Path(location).unlink(missing_ok=True)
        start, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(location, h, start, out)) for h in ("east5", "east1")]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(30)
        results = dict(out.get(timeout=5) for _ in procs)
        assert sorted(results.values()) == ["held", "won"], results
        winner = next(h for h, r in results.items() if r == "won")
        assert json.loads(Path(location).read_text())["body"]["holder"] == winner


def test_a_takeover_after_expiry_stops_the_old_copy_before_it_writes(tmp_path):
    clock = Clock()
    location = str(tmp_path / "run" / wl.LEASE_NAME)
    first = wl.WriterLease(location, "east5", clock=clock, sleep=clock.sleep)
    token = first.acquire()
    writes: list[str] = []
    save = wl.guarded(lambda step: writes.append(f"east5:{step}"), token, now=clock)
    save(1)
    # The second copy (re-dispatched to east1) waits while the first's lease is live ...
    second = wl.WriterLease(location, "east1", clock=clock, sleep=clock.sleep)
    with pytest.raises(wl.LeaseHeld, match="held by east5"):
        second.acquire(wait_s=60, poll_s=10)
    # ... the first stops renewing (its worker unreachable, or deleted by the manager); past expiry and the
    # skew margin the second takes over with the next epoch.
    clock.t += wl.TTL_S + wl.SKEW_S
    token2 = second.acquire()
    assert (token.epoch, token2.epoch) == (1, 2)
    save2 = wl.guarded(lambda step: writes.append(f"east1:{step}"), token2, now=clock)
    save2(2)
    # The first copy comes back: its next save and its renewal both refuse.
    with pytest.raises(wl.LeaseLost, match="taken over by east1"):
        save(3)
    with pytest.raises(wl.LeaseLost, match="renewal refused"):
        first.renew()
    assert writes == ["east5:1", "east1:2"]


def test_a_copy_that_was_not_renewed_stops_before_its_lease_runs_out(tmp_path):
    clock = Clock()
    lease = wl.WriterLease(str(tmp_path / "l"), "east5", clock=clock, sleep=clock.sleep)
    token = lease.acquire()
    token.check(now=clock)  # fresh: a full lease left
    clock.t += wl.TTL_S - wl.SAVE_BUDGET_S + 1  # less than a save's budget left, no renewal since
    with pytest.raises(wl.LeaseLost, match="not renewed in time"):
        token.check(now=clock)
    lease.renew()
    token.check(now=clock)


def test_a_waiting_copy_starts_once_the_first_releases(tmp_path):
    clock = Clock()
    location = str(tmp_path / wl.LEASE_NAME)
    first = wl.WriterLease(location, "east5", clock=clock, sleep=clock.sleep)
    first.acquire()
    first.release()
    token = wl.WriterLease(location, "east1", clock=clock, sleep=clock.sleep).acquire()
    assert token.epoch == 2 and token.holder == "east1"


def test_the_token_pickles_for_the_training_workers(tmp_path):
    token = wl.WriterLease(str(tmp_path / wl.LEASE_NAME), "east5").acquire()
    again = pickle.loads(pickle.dumps(token))
    again.check()
    assert again == token


def test_bad_settings_and_locations_are_refused():
    with pytest.raises(ValueError, match="save budget"):
        wl.WriterLease("/tmp/x", ttl_s=60, save_budget_s=50)
    with pytest.raises(ValueError, match="gs://<bucket>/<path>"):
        wl.store_for("gs://bucket-only")
    assert wl.location_for("/data/", "run-1", "b") == "gs://b/run-1/.writer-lease"
    assert wl.location_for("/tmp/out", "run-1") == "/tmp/out/run-1/.writer-lease"


def test_the_workers_check_the_lease_without_a_copy_of_the_module(tmp_path):
    """The driver ships the guard to Ray's training workers pickled by value (ray.cloudpickle
    register_pickle_by_value): a process where ``lease`` is not importable unpickles it and refuses a save once
    the lease is another's, as the trainer's hook does."""
    import functools
    import subprocess

    import ray.cloudpickle

    location = str(tmp_path / wl.LEASE_NAME)
    ray.cloudpickle.register_pickle_by_value(wl)
    try:
        blob = ray.cloudpickle.dumps(functools.partial(wl.guarded, lease=wl.WriterLease(location, "east5").acquire()))
    finally:
        ray.cloudpickle.unregister_pickle_by_value(wl)
    code = ("import pickle, sys\n"
            "guard = pickle.loads(sys.stdin.buffer.read())\n"
            "save = guard(lambda step: print('saved', step))\n"
            "for step in (1, 2):\n"
            "    try:\n        save(step)\n    except Exception as e:\n        print(type(e).__name__)\n")
    run = functools.partial(subprocess.run, [sys.executable, "-c", code], input=blob, capture_output=True,
                            cwd=tmp_path, timeout=60)
    first = run()
    assert first.stdout.decode().splitlines() == ["saved 1", "saved 2"], first.stderr.decode()
    # Another copy takes over (the lease rewritten for east1): the worker's next save refuses.
    store, key = wl.store_for(location)
    body, gen = store.read(key)
    store.write(key, {**body, "holder": "east1", "epoch": body["epoch"] + 1}, gen)
    second = run()
    assert second.stdout.decode().split() == ["LeaseLost", "LeaseLost"], second.stderr.decode()


def test_queued_jobs_of_a_multi_region_stack_hold_the_lease_on_their_bucket():
    """The RayJob the manager dispatches runs the trainer with --lease beside its checkpoints, on the bucket its
    pods mount; a single-region stack's jobs and a job pinned to one region hold none; the trainer takes it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    from stackspec import spec as stack_spec
    from workloads import manifests, trainer_args

    s = stack_spec.load_stack("multi")
    for view in s.region_views():
        for job in view.jobs:
            doc = manifests.ray_job(view, job)
            argv = trainer_args.trainer_argv(view, job)
            pods = [doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]]
            [bucket] = {v["csi"]["volumeAttributes"]["bucketName"] for p in pods for v in p["volumes"] if "csi" in v}
            if job.region is None:
                lease = argv[argv.index("--lease") + 1]
                assert lease == wl.location_for("/data/", job.run_name, bucket)
                assert f"run_name={job.run_name}" in argv and "base_output_directory=/data/" in argv
                assert manifests.trainer_configmap(view)["data"]["lease.py"] == Path(wl.__file__).read_text()
                args, _ = maxtext_trainer.parse_args(argv)
                assert args.lease == lease
            else:
                assert "--lease" not in argv
    prod = stack_spec.load_stack("prod")
    assert not any("--lease" in trainer_args.trainer_argv(prod, j) for j in prod.jobs)


def test_a_copy_that_lost_the_lease_takes_it_over_again_instead_of_failing(tmp_path, monkeypatch):
    """A copy whose lease another copy took over does not fail its job: a failed copy finishes the job on the
    manager, which then deletes every copy (kueue v0.19.2 multikueue/workload.go:380-393, 396-438), and at
    reconnection the manager keeps the copy admitted first (bestMatchByCondition, :140-155, :566-581), which may
    be this one. The trainer waits for the lease like a new copy and trains again from the latest checkpoint;
    a failure that is not the lease's ends the job as before."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    location = str(tmp_path / wl.LEASE_NAME)
    store, key = wl.store_for(location)
    fits: list[int] = []

    def epoch() -> int:
        return store.read(key)[0]["epoch"]

    class Result:
        error, metrics, path = None, {"final_step": 9}, None

    class Trainer:
        def fit(self):
            fits.append(epoch())
            if len(fits) == 1:
                # Another copy took the run over and has since stopped (released): this copy's save refuses.
                body, gen = store.read(key)
                store.write(key, {**body, "holder": "east1", "epoch": body["epoch"] + 1, "expires": 0.0}, gen)
                raise RuntimeError("Training failed due to worker errors: lease.LeaseLost: taken over by east1")
            if len(fits) == 2:
                return Result()
            raise AssertionError("fit once more than needed")

    monkeypatch.setattr(maxtext_trainer, "build_trainer", lambda *a: Trainer())
    argv = ["--mode", "multislice", "--slices", "2", "--hosts-per-slice", "1", "--chips-per-host", "1",
            "--topology", "1x1", "--accelerator-type", "v6e", "--name", "r", "--storage-path", str(tmp_path),
            "--lease", location]
    assert maxtext_trainer.main(argv) == 0
    assert fits == [1, 3]  # the second fit under the lease taken over again (epoch 2 was east1's)
    assert store.read(key)[0]["expires"] == 0.0  # released at the end

    # A failure that is not the lease's: one fit, the job fails.
    fits.clear()

    class Failing:
        def fit(self):
            fits.append(epoch())
            raise RuntimeError("worker OOM")

    monkeypatch.setattr(maxtext_trainer, "build_trainer", lambda *a: Failing())
    assert maxtext_trainer.main(argv) == 1
    assert len(fits) == 1


# --------------------------------------------------------------------------- the guard on MaxText's save call


def _maxtext_train_source() -> tuple[str, str]:
    import importlib.util

    # maxtext is a namespace package (no __init__.py): its files are read, not imported (JAX is slow to import).
    root = Path(importlib.util.find_spec("maxtext").submodule_search_locations[0])
    path = root / "trainers" / "pre_train" / "train.py"
    return str(path), path.read_text()


def test_maxtext_saves_through_the_module_attribute_the_guard_replaces():
    """The trainer guards saves by replacing ``checkpointing.maybe_save_checkpoint`` on MaxText's module
    (maxtext_trainer.train_loop_per_worker). That guards nothing unless MaxText's train loop calls it through that
    attribute of that module, as maxtext 0.2.1's train.py does: an upgrade that moves the call fails here."""
    import ast

    path, source = _maxtext_train_source()
    tree = ast.parse(source)
    imported = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "maxtext.common"
                and any(a.name == "checkpointing" and a.asname is None for a in n.names)]
    assert imported, f"{path}: no module-level `from maxtext.common import checkpointing`"
    calls = {fn.name: [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and n.func.attr == "maybe_save_checkpoint"]
             for fn in tree.body if isinstance(fn, ast.FunctionDef)}
    through_module = [c for c in calls.get("train_loop", [])
                      if isinstance(c.func.value, ast.Name) and c.func.value.id == "checkpointing"]
    assert len(through_module) >= 2, f"{path}: train_loop's saves (each step's, the final one) moved: {calls}"
    bare = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "maybe_save_checkpoint"]
    assert not bare, f"{path}: maybe_save_checkpoint called by a bare name (line {bare[0].lineno}): unguarded"


def _maxtext_standins(tmp_path, monkeypatch, main=None):
    """MaxText's modules replaced by stand-ins (tests/maxtext_standin.py) whose ``main`` saves as MaxText's train
    loop does (``checkpointing.maybe_save_checkpoint(...)`` through the module); (the saves that ran, checkpointing,
    train, MaxText's save and initialize as installed)."""
    import types

    def save_once(argv):
        cfg = types.SimpleNamespace(steps=1, base_output_directory=str(tmp_path), run_name="r",
                                    enable_checkpointing=True, save_checkpoint_on_completion=True)
        manager = types.SimpleNamespace(should_save=lambda step: True)  # step 0 is a checkpoint's step
        sys.modules["maxtext.common"].checkpointing.maybe_save_checkpoint(manager, None, cfg, None, 0)

    s = maxtext_standin.install(monkeypatch, main or save_once)
    return s.saved, s.checkpointing, s.train, s.original_save, s.original_initialize


def test_the_trainer_refuses_maxtexts_save_once_the_lease_is_lost(tmp_path, monkeypatch):
    """train_loop_per_worker with the lease guard, MaxText's modules replaced by stand-ins whose ``main`` saves as
    MaxText's train loop does (``checkpointing.maybe_save_checkpoint(...)`` through the module): a lease another
    copy took over refuses the save before it runs, the worker's fit fails with LeaseLost, and MaxText's own
    function is put back."""
    import functools

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    location = str(tmp_path / wl.LEASE_NAME)
    token = wl.WriterLease(location, "east5").acquire()
    store, key = wl.store_for(location)
    body, gen = store.read(key)
    store.write(key, {**body, "holder": "east1", "epoch": body["epoch"] + 1}, gen)  # taken over

    saved, checkpointing, train, original_save, original_initialize = _maxtext_standins(tmp_path, monkeypatch)
    config = {"base_yml": str(tmp_path / "base.yml"), "settings": {}, "local": False, "step_delay": 0,
              "hosts_per_slice": 1, "save_commit_delay": None, "warm_workers": False,
              "lease_guard": functools.partial(wl.guarded, lease=token)}
    with pytest.raises(wl.LeaseLost, match="taken over by east1"):
        maxtext_trainer.train_loop_per_worker(config)
    assert saved == []
    assert checkpointing.maybe_save_checkpoint is original_save and train.initialize is original_initialize
    # Without a lease (a single-region job) the same call saves.
    with pytest.raises(RuntimeError):  # the stand-in's run ends before its last step: the trainer says so
        maxtext_trainer.train_loop_per_worker(config | {"lease_guard": None})
    assert len(saved) == 1


def test_the_trainer_restores_while_its_lease_is_pending_and_its_first_save_waits_for_it(tmp_path, monkeypatch):
    """The hook as the driver installs it for a copy whose lease is still another's (hold_lease: a pending token,
    MaxText's own save decision): the steps that write nothing run at once (the restore and the first steps do not
    wait), the first save that writes waits for the lease and, the lease still east5's when the wait runs out,
    refuses before MaxText's save runs."""
    import functools
    import types

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    location = str(tmp_path / wl.LEASE_NAME)
    wl.WriterLease(location, "east5").acquire()  # the lost region's copy: its lease still live
    token = wl.WriterLease(location, "east1").pending(wait_s=0.5, poll_s=0.1)

    class Manager:  # Orbax's CheckpointManager as MaxText's save path asks it (should_save)
        def should_save(self, step: int) -> bool:
            return step % 5 == 0

    def main(argv):
        cfg = types.SimpleNamespace(steps=11, base_output_directory=str(tmp_path), run_name="r",
                                    enable_checkpointing=True, save_checkpoint_on_completion=True)
        for step in (6, 7, 10):
            sys.modules["maxtext.common"].checkpointing.maybe_save_checkpoint(Manager(), None, cfg, None, step)

    saved, *_ = _maxtext_standins(tmp_path, monkeypatch, main)
    config = {"base_yml": str(tmp_path / "base.yml"), "settings": {}, "local": False, "step_delay": 0,
              "hosts_per_slice": 1, "save_commit_delay": None, "warm_workers": False,
              "lease_guard": functools.partial(wl.guarded, lease=token)}
    with pytest.raises(wl.LeaseHeld, match="held by east5"):
        maxtext_trainer.train_loop_per_worker(config)
    assert [a[-1] for a in saved] == [6, 7]  # the steps ran; step 10's save never did


def test_orbax_asked_again_inside_its_save_cannot_write_past_the_lease(tmp_path, monkeypatch):
    """Orbax's ``should_save`` is not a pure function of the step (it reads whether an async save is still in
    progress, the time, the preemption sync point: orbax checkpoint_manager.py ``should_save``), and MaxText's
    ``maybe_save_checkpoint`` leaves the decision to Orbax's ``save`` (``if not force and not
    self.should_save(step)``). A manager that answers "no" to the trainer's question and "yes" inside its own save
    (the async save finished in between) must not write while another copy holds the lease: the trainer's decision
    is the one Orbax's save gets."""
    import functools
    import types

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    location = str(tmp_path / wl.LEASE_NAME)
    wl.WriterLease(location, "east5").acquire()  # the other region's copy: its lease live
    token = wl.WriterLease(location, "east1").pending(wait_s=0.3, poll_s=0.1)
    written: list[int] = []

    class Manager:  # Orbax's CheckpointManager: save asks should_save again unless forced
        def __init__(self):
            self.asked = 0

        def should_save(self, step: int) -> bool:
            self.asked += 1
            return self.asked > 1  # "a save is in progress" first, finished by the second asking

        def save(self, step, args=None, force=False):
            if not force and not self.should_save(step):
                return False
            written.append(step)
            return True

    def maybe_save_checkpoint(checkpoint_manager, state, config, data_iterator, step=None):
        # maxtext 0.2.1 common/checkpointing.py:714-732 -> save_checkpoint's checkpoint_manager.save(step, ..., force)
        actual = int(state.step) - 1 if step is None else int(step)
        force = step is None and actual != -1 and actual % config.checkpoint_period != 0
        return checkpoint_manager.save(actual, args=None, force=force)

    def main(argv):
        cfg = types.SimpleNamespace(steps=11, base_output_directory=str(tmp_path), run_name="r",
                                    enable_checkpointing=True, save_checkpoint_on_completion=True,
                                    checkpoint_period=5)
        manager = Manager()
        sys.modules["maxtext.common"].checkpointing.maybe_save_checkpoint(manager, None, cfg, None, 5)
        assert "should_save" not in vars(manager)  # the pinned decision lasts one call
        sys.modules["maxtext.common"].checkpointing.maybe_save_checkpoint(manager, None, cfg, None, 6)

    _, checkpointing, *_ = _maxtext_standins(tmp_path, monkeypatch, main)
    checkpointing.maybe_save_checkpoint = maybe_save_checkpoint
    config = {"base_yml": str(tmp_path / "base.yml"), "settings": {}, "local": False, "step_delay": 0,
              "hosts_per_slice": 1, "save_commit_delay": None, "warm_workers": False,
              "lease_guard": functools.partial(wl.guarded, lease=token)}
    with pytest.raises(wl.LeaseHeld, match="held by east5"):  # step 6's save: Orbax says yes, the lease no
        maxtext_trainer.train_loop_per_worker(config)
    assert written == []  # step 5 was decided "no" once, and Orbax's save got that answer
