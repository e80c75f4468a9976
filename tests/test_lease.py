"""The writer lease (workloads/trainer/lease.py): two copies of one run never both write its checkpoints.

Locally: two writer processes racing on one directory (the local store's lock), a takeover after expiry that
stops the old holder before its next save, a waiting copy that starts once the first releases. Against Cloud
Storage's semantics: a stand-in HTTP server answering the JSON API calls the store makes, with the documented
precondition rule and nothing else ("ifGenerationMatch: Makes the operation conditional on whether the object's
current generation matches the given value. Setting to 0 makes the operation succeed only if there are no live
versions of the object"; a failed precondition is HTTP 412 Precondition Failed;
https://cloud.google.com/storage/docs/request-preconditions). It is a fake: it shows the store speaks that
contract, not that Cloud Storage behaves so (the docs say it does).
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


# --------------------------------------------------------------------------- Cloud Storage's contract


class FakeGcs(BaseHTTPRequestHandler):
    """objects.get (alt=media, generation in ``x-goog-generation``) and objects.insert (uploadType=media) with
    ``ifGenerationMatch``, one lock per call: the documented precondition, nothing else."""

    objects: dict[str, tuple[bytes, int]] = {}
    lock = threading.Lock()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes = b"{}", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urllib.parse.urlparse(self.path)
        name = urllib.parse.unquote(path.path.split("/o/", 1)[1])
        with self.lock:
            found = self.objects.get(name)
        if found is None:
            return self._send(404)
        self._send(200, found[0], {"x-goog-generation": str(found[1])})

    def do_POST(self) -> None:
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        name, match = q["name"][0], int(q["ifGenerationMatch"][0])
        data = self.rfile.read(int(self.headers["Content-Length"]))
        with self.lock:
            current = self.objects.get(name, (b"", 0))[1]
            if current != match:
                return self._send(412, b'{"error": {"code": 412, "message": "Precondition Failed"}}')
            self.objects[name] = (data, current + 1000)  # generations need not be consecutive
        self._send(200, json.dumps({"name": name, "generation": str(current + 1000)}).encode())


@pytest.fixture
def gcs():
    FakeGcs.objects = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_on_cloud_storage_semantics_two_racing_copies_one_wins(gcs):
    key = "llama3-70b-multislice-cbb2a674/.writer-lease"
    barrier = threading.Barrier(8)
    results: dict[str, str] = {}

    def race(holder: str) -> None:
        lease = wl.WriterLease(f"gs://b/{key}", holder, store=(wl.GcsStore("b", lambda: "t", gcs), key))
        barrier.wait()
        try:
            lease.acquire()
            results[holder] = "won"
        except wl.LeaseHeld:
            results[holder] = "held"

    threads = [threading.Thread(target=race, args=(f"copy-{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results.values()) == ["held"] * 7 + ["won"], results
    body, generation = json.loads(FakeGcs.objects[key][0]), FakeGcs.objects[key][1]
    assert results[body["holder"]] == "won" and generation >= 1000


def test_on_cloud_storage_semantics_the_old_holder_is_refused(gcs):
    clock = Clock()
    key = "run/.writer-lease"

    def lease(holder: str) -> wl.WriterLease:
        return wl.WriterLease(f"gs://b/{key}", holder, clock=clock, sleep=clock.sleep,
                              store=(wl.GcsStore("b", lambda: "t", gcs), key))

    first, second = lease("east5"), lease("east1")
    first.acquire()
    clock.t += wl.TTL_S + wl.SKEW_S
    assert second.acquire().epoch == 2
    with pytest.raises(wl.LeaseLost):
        first.renew()


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
