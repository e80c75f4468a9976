"""A writer lease on one run's checkpoint directory: at most one copy of a job writes its checkpoints.

Why. A multi-region stack's manager re-dispatches a job to another region when the region running it stays
unreachable past Kueue's ``workerLostTimeout`` (kueue v0.19.2 pkg/controller/admissionchecks/multikueue/
workload.go:546-559, "Admitting remote lost"), while the first copy may still be running: the manager only
deletes it once it reaches that worker again (workload.go:573-581). Both copies resume the same run name from the
same bucket (docs/multikueue.md "Two copies of one run"). This lease makes the second copy wait, and makes the
first stop before it writes again once the second has taken over.

How. One small object next to the run's checkpoints, ``<base_output_directory>/<run_name>/.writer-lease``, holding
``{holder, epoch, expires}``, changed only by compare-and-swap on its generation:

- on Cloud Storage (``gs://bucket/path``), the JSON API's ``ifGenerationMatch`` precondition: "Makes the
  operation conditional on whether the object's current generation matches the given value. Setting to 0 makes
  the operation succeed only if there are no live versions of the object", and a failed one answers HTTP 412
  (https://cloud.google.com/storage/docs/request-preconditions; objects.insert ``ifGenerationMatch``);
- on a local directory (``slicectl train --local``, the drills), the same contract emulated with an exclusive
  ``fcntl`` lock around read-compare-write, the generation kept in the object.

The driver takes the lease while its workers restore (waiting up to ``wait_s`` for a live holder's lease to expire
plus the skew: never at once, the previous holder, in a lost region say, may still be writing until then), and
renews it every ``ttl_s / 3``; the first save waits until this copy holds it (:meth:`WriterLease.pending`), so the
wait overlaps the restore instead of adding to it; every checkpoint save first checks the lease is still this
holder's with at least ``save_budget_s`` left (:func:`guarded`). Another copy takes over only after ``expires`` plus
``skew_s``. So two copies never write at once provided a save ends within ``save_budget_s`` of its check and the
hosts' clocks differ by less than ``skew_s`` (GKE nodes keep time with Google's NTP). A save ends when its
checkpoint is committed: with MaxText's default ``async_checkpointing: True`` (maxtext 0.2.1 configs/base.yml) Orbax
goes on writing after the save call returns, so the budget has to cover that background commit, not the call. A copy
that cannot renew (its lease taken over, or unreachable storage past expiry) raises :class:`LeaseLost` at its next
save and its fit fails; the driver then waits for the lease like a new copy and trains again from the latest
checkpoint (``maxtext_trainer.main``), rather than failing the job (a failed copy finishes the job on the manager,
which then deletes every copy).

Transient errors. Cloud Storage's retry strategy (https://cloud.google.com/storage/docs/retry-strategy) names
"HTTP 408, 429, and 5xx response codes" and "Socket timeouts and TCP disconnects" as transient, and an insert with
``ifGenerationMatch`` as conditionally idempotent (safe to retry: a second copy of it cannot overwrite another
writer). So every read and conditional write is retried with exponential backoff and full jitter (1 s doubling to
at most 60 s, the storage client's default: python-storage ``google/cloud/storage/retry.py`` ``DEFAULT_RETRY``,
and "exponential backoff with jitter, starting with a one second backoff and doubling on each attempt", the Rust
client's ``backoff_policy::default``), bounded by what the lease allows: a renewal by the lease's expiry, an
acquisition by its wait, a worker's check by one renewal period (past it the worker stops before writing, as on a
lost lease, and the driver takes the run over again). A retried write whose first attempt did land (the answer
was lost) finds its own body under a new generation and takes it as its own (a 412 is otherwise a refusal). Each
attempt stamps the expiry afresh, so a write that lands after retries still gives a whole lease from then.

Standard library only: the trainer's ConfigMap carries this file beside ``maxtext_trainer.py``.
"""

from __future__ import annotations

import fcntl
import http.client
import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

LEASE_NAME = ".writer-lease"
TTL_S = 300.0  # a lease lives 5 minutes unless renewed (every TTL_S / 3)
SAVE_BUDGET_S = 120.0  # a checkpoint save starts only with at least this much lease left
SKEW_S = 30.0  # a taker waits this long past expiry (clock difference between hosts)
# A copy waits for the holder's lease this long: the RayJob's activeDeadlineSeconds (4 h) ends it first. Failing
# sooner would finish the job on the manager, which then deletes every copy, the running one included
# (workload.go:380-393).
WAIT_S = 4 * 3600.0
# Backoff between attempts of one read or write (module docstring): full jitter over min(initial x 2^n, maximum).
BACKOFF_INITIAL_S, BACKOFF_MULTIPLIER, BACKOFF_MAX_S = 1.0, 2.0, 60.0
REQUEST_TIMEOUT_S = 20.0  # one HTTP exchange; a socket timeout is transient, the next attempt starts over
# HTTP statuses Cloud Storage's retry strategy calls transient (besides every 5xx).
TRANSIENT_STATUS = frozenset({408, 429})
# Where Google's storage clients send requests instead of Cloud Storage, without credentials, when set (the
# variable python-storage reads, google/cloud/storage/_helpers.py ``STORAGE_EMULATOR_ENV_VAR``): the tests' emulator.
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
METADATA_TOKEN = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
# A pending save checks this often whether its driver's own wait for the lease ended in an error (a permanent
# storage error, a 403 say): the workers then fail at once with it instead of waiting out the job's deadline.
DRIVER_CHECK_S = 1.0
ERROR_CHARS = 300  # Cloud Storage's own message for a refused request, carried in the error


class LeaseError(RuntimeError):
    """The lease cannot be had or kept; the message says who holds it and until when."""


class LeaseHeld(LeaseError):
    """Another copy holds a live lease on this run."""


class LeaseLost(LeaseError):
    """This copy's lease was taken over or expired: it must not write the run's checkpoints any more."""


class PreconditionFailed(Exception):
    """The object's generation is not the one the write was conditional on (GCS: HTTP 412)."""


class TransientError(LeaseError):
    """A request that may succeed if sent again (HTTP 408, 429, 5xx, a socket timeout, a dropped connection)."""


def refusal(status: int, body: bytes) -> str:
    """``HTTP <status>`` and Cloud Storage's own message for it (the JSON API's ``{"error": {"code", "message"}}``,
    https://cloud.google.com/storage/docs/json_api/v1/status-codes): a 403 says which permission is missing."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace").strip()
    return f"HTTP {status}" + (f": {message[:ERROR_CHARS]}" if message else "")


def transient_status(status: int) -> bool:
    return status in TRANSIENT_STATUS or 500 <= status <= 599


def backoff_delays(rng: Callable[[], float] = random.random):
    """Seconds to wait before each retry: uniform in [0, min(initial x multiplier^n, maximum)] (full jitter)."""
    ceiling = BACKOFF_INITIAL_S
    while True:
        yield rng() * ceiling
        ceiling = min(ceiling * BACKOFF_MULTIPLIER, BACKOFF_MAX_S)


def retrying(op: Callable[[], Any], deadline: float, what: str, clock: Callable[[], float] = time.time,
             sleep: Callable[[float], None] = time.sleep) -> Any:
    """``op()`` again after each :class:`TransientError`, with :func:`backoff_delays`, until it succeeds or the
    next attempt would start past ``deadline``: then the last error, as a :class:`TransientError` saying so."""
    attempts = 0
    for delay in backoff_delays():
        attempts += 1
        try:
            return op()
        except TransientError as e:
            if clock() + delay >= deadline:
                raise TransientError(f"{what}: gave up after {attempts} attempt(s), the last: {e}") from e
            sleep(delay)
    raise AssertionError("unreachable")


class Store(Protocol):
    def read(self, key: str) -> tuple[dict[str, Any], int] | None: ...

    def write(self, key: str, body: dict[str, Any], if_generation_match: int) -> int: ...


class LocalStore:
    """A directory with GCS's conditional-write contract, emulated: generation 0 means "absent"; each write under
    an exclusive ``fcntl`` lock compares the stored generation and replaces the file atomically (``os.replace``)."""

    def __init__(self, root: str):
        self.root = root

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key)

    def read(self, key: str) -> tuple[dict[str, Any], int] | None:
        try:
            with open(self._path(key)) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        return doc["body"], int(doc["generation"])

    def write(self, key: str, body: dict[str, Any], if_generation_match: int) -> int:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.read(key)
            generation = current[1] if current else 0
            if generation != if_generation_match:
                raise PreconditionFailed(f"{path}: generation {generation}, not {if_generation_match}")
            tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            with open(tmp, "w") as f:
                json.dump({"generation": generation + 1, "body": body}, f)
            os.replace(tmp, path)
            return generation + 1


class GcsStore:
    """An object in a Cloud Storage bucket through the JSON API, every write conditional on the generation.

    Writes are multipart uploads (``uploadType=multipart``: the object's metadata and its data in one request),
    a form Cloud Storage's objects.insert takes with ``ifGenerationMatch`` like any other
    (https://cloud.google.com/storage/docs/json_api/v1/objects/insert; multipart upload:
    https://cloud.google.com/storage/docs/uploading-objects#uploading-an-object) and the one form whose
    precondition the fake-gcs-server emulator enforces too (it ignores it on ``uploadType=media``;
    tests/test_lease_emulator.py shows both)."""

    BOUNDARY = "writer-lease-boundary"

    def __init__(self, bucket: str, token: Callable[[], str | None] | None = None,
                 endpoint: str = "https://storage.googleapis.com", timeout_s: float | None = None):
        self.bucket, self.endpoint = bucket, endpoint.rstrip("/")
        self.timeout_s = timeout_s or REQUEST_TIMEOUT_S
        self.token = token or metadata_token

    def _request(self, method: str, url: str, data: bytes | None = None,
                 content_type: str = "application/json") -> tuple[int, bytes, Any]:
        """(status, body, headers); a transient failure raises :class:`TransientError`."""
        try:
            req = urllib.request.Request(url, data=data, method=method)
            if (token := self.token()) is not None:
                req.add_header("Authorization", f"Bearer {token}")
            if data is not None:
                req.add_header("Content-Type", content_type)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 (https, or a test's)
                    status, body, headers = resp.status, resp.read(), resp.headers
            except urllib.error.HTTPError as e:
                status, body, headers = e.code, e.read(), e.headers
        except (TimeoutError, ConnectionError, http.client.HTTPException, urllib.error.URLError) as e:
            # A socket timeout, a refused/reset/dropped connection, a reply cut short (retry strategy: "Socket
            # timeouts and TCP disconnects"); also the metadata server's token on the way.
            raise TransientError(f"{method} {url.split('?')[0]}: {type(e).__name__}: {e}") from e
        if transient_status(status):
            raise TransientError(f"{method} {url.split('?')[0]}: HTTP {status}")
        return status, body, headers

    def read(self, key: str) -> tuple[dict[str, Any], int] | None:
        name = urllib.parse.quote(key, safe="")
        status, body, headers = self._request("GET", f"{self.endpoint}/storage/v1/b/{self.bucket}/o/{name}?alt=media")
        if status == 404:
            return None
        if status != 200:
            raise LeaseError(f"gs://{self.bucket}/{key}: read answered {refusal(status, body)}")
        try:
            return json.loads(body), int(headers["x-goog-generation"])
        except (ValueError, KeyError, TypeError) as e:  # a reply cut short mid-body
            raise TransientError(f"gs://{self.bucket}/{key}: unreadable reply ({e})") from e

    def write(self, key: str, body: dict[str, Any], if_generation_match: int) -> int:
        query = urllib.parse.urlencode({"uploadType": "multipart", "ifGenerationMatch": if_generation_match})
        meta = json.dumps({"name": key, "contentType": "application/json"})
        b = self.BOUNDARY
        data = (f"--{b}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
                f"--{b}\r\nContent-Type: application/json\r\n\r\n{json.dumps(body)}\r\n--{b}--\r\n").encode()
        status, raw, _ = self._request("POST", f"{self.endpoint}/upload/storage/v1/b/{self.bucket}/o?{query}",
                                       data, content_type=f"multipart/related; boundary={b}")
        if status == 412:
            raise PreconditionFailed(f"gs://{self.bucket}/{key}: generation is not {if_generation_match}")
        if status != 200:
            raise LeaseError(f"gs://{self.bucket}/{key}: write answered {refusal(status, raw)}")
        return int(json.loads(raw)["generation"])


def write_retrying(store: Store, key: str, body: Callable[[], dict[str, Any]], if_generation_match: int,
                   deadline: float, clock: Callable[[], float] = time.time,
                   sleep: Callable[[float], None] = time.sleep) -> tuple[int, dict[str, Any]]:
    """A conditional write, retried as :func:`retrying` says: (the generation written, the body that landed).

    Each attempt writes a fresh ``body()``: a lease's expiry runs from when its write is sent, not from the first
    attempt's time (after a minute of retries, a renewal stamped with its first attempt's expiry would leave less
    than a save's budget before the next renewal is due). An attempt that landed but whose answer was lost makes
    the next attempt's precondition fail (Cloud Storage's retry strategy: a conditionally idempotent request is
    judged by re-reading the object): the object then holds exactly one of the bodies sent (each stamped by its
    ``renewed`` time), which counts as this write's success; any other 412 is a refusal."""
    sent: list[dict[str, Any]] = []

    def attempt() -> tuple[int, dict[str, Any]]:
        sent.append(body())
        try:
            return store.write(key, sent[-1], if_generation_match), sent[-1]
        except PreconditionFailed:
            if len(sent) == 1:
                raise
            found = store.read(key)
            if found is not None and found[0] in sent:
                return found[1], found[0]
            raise

    return retrying(attempt, deadline, f"write {key}", clock, sleep)


def metadata_token() -> str:
    """The pod's Google access token (workload identity: the GKE metadata server)."""
    req = urllib.request.Request(METADATA_TOKEN, headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 (the metadata server)
        return json.loads(resp.read())["access_token"]


def store_for(location: str, emulator: str | None = None) -> tuple[Store, str]:
    """``gs://bucket/dir/.writer-lease`` or a local path -> (store, key); ``emulator``: a storage emulator's endpoint
    (default: ``STORAGE_EMULATOR_HOST``, when set)."""
    if location.startswith("gs://"):
        bucket, _, key = location[len("gs://"):].partition("/")
        if not bucket or not key:
            raise ValueError(f"lease location {location!r}: expected gs://<bucket>/<path>")
        if emulator := emulator or os.environ.get(EMULATOR_ENV):
            return GcsStore(bucket, lambda: None, emulator), key  # an emulator takes no credentials
        return GcsStore(bucket), key
    root, key = os.path.split(os.path.abspath(location))
    return LocalStore(root), key


def default_holder() -> str:
    """Who this copy is: the pod (hostname), the process and a random part (a restarted driver is a new holder)."""
    return f"{os.environ.get('TPU_MULTISLICE_CLUSTER', '')}/{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


@dataclass
class Lease:
    """This copy's hold on a run: what :func:`guarded` checks before each save (picklable: Ray ships it to the
    training workers, which check it against the store themselves)."""

    location: str
    holder: str
    # None: pending. The driver takes the lease in the background while the workers restore (a restart's or a
    # re-dispatched copy's setup does not wait for it); the first save that writes waits until the lease names
    # this holder (:meth:`_await_holder`), then holds that epoch.
    epoch: int | None
    save_budget_s: float = SAVE_BUDGET_S
    # The expiry last read as ours: no other copy can take over before it (plus the skew), so until a save's
    # budget before it no read is needed (MaxText calls the save hook every step, on every worker).
    known_expires: float = field(default=0.0, compare=False)
    # A read failing transiently is retried this long (one renewal period of the default lease); no save runs
    # meanwhile. Past it the copy stops as if it had lost the lease (the driver then takes the run over again)
    # rather than failing the job on storage that did not answer.
    read_retry_s: float = TTL_S / 3
    # The driver's storage endpoint when it is an emulator (its STORAGE_EMULATOR_HOST): the workers reach the same
    # server whatever their own environment holds.
    emulator: str | None = None
    wait_until: float = 0.0  # pending: a save waits for the driver's lease until then (the driver's own wait)
    poll_s: float = 10.0  # pending: how often that wait reads the lease
    # Pending: the driver's error when its own wait for the lease ended in one (None meanwhile), read every
    # DRIVER_CHECK_S of the wait. Only the driver writes the lease, so a driver that gave up (a permanent storage
    # error: no permission to write, say) would otherwise leave its workers reading a lease that never becomes
    # theirs until the deadline, then refusing with LeaseHeld, which names the wrong cause.
    driver_error: Callable[[], str | None] | None = field(default=None, compare=False)

    def _driver_gave_up(self) -> None:
        if self.driver_error is not None and (error := self.driver_error()):
            raise LeaseError(f"{self.location}: this copy's driver could not take the lease ({error}): no save "
                             "without it")

    def _await_holder(self, now: Callable[[], float], sleep: Callable[[float], None]) -> None:
        """Pending: wait until the lease names this holder (the driver took it), then hold its epoch. Never a write:
        only the driver writes the lease; a save waits here, before anything of the checkpoint is written."""
        store, key = store_for(self.location, self.emulator)
        while True:
            try:
                found = retrying(lambda: store.read(key), now() + self.read_retry_s, f"read {self.location}", now,
                                 sleep)
            except TransientError:
                found = None  # storage did not answer: still waiting, as long as the driver does
            if found is not None and found[0]["holder"] == self.holder:
                self.epoch = found[0]["epoch"]
                return
            self._driver_gave_up()
            if now() >= self.wait_until:
                held = found[0] if found is not None else {}
                raise LeaseHeld(f"{self.location}: still held by {held.get('holder', '?')} (epoch "
                                f"{held.get('epoch')}); this copy's driver did not take it in time: no save without it")
            next_read = now() + self.poll_s
            while (left := next_read - now()) > 0:
                sleep(min(left, DRIVER_CHECK_S))
                self._driver_gave_up()

    def check(self, now: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        if self.epoch is None:
            self._await_holder(now, sleep)
        if now() <= self.known_expires - self.save_budget_s:
            return
        store, key = store_for(self.location, self.emulator)
        try:
            found = retrying(lambda: store.read(key), now() + self.read_retry_s, f"read {self.location}", now, sleep)
        except TransientError as e:
            raise LeaseLost(f"{self.location}: the lease could not be read ({e}); this copy stops before "
                            "writing") from e
        if found is None:
            raise LeaseLost(f"{self.location}: no lease any more (this copy was epoch {self.epoch})")
        body, _ = found
        if body["holder"] != self.holder or body["epoch"] != self.epoch:
            raise LeaseLost(f"{self.location}: taken over by {body['holder']} (epoch {body['epoch']}); this copy "
                            f"(epoch {self.epoch}) stops before writing")
        if body["expires"] - now() < self.save_budget_s:
            raise LeaseLost(f"{self.location}: {body['expires'] - now():.0f} s of lease left, less than a save's "
                            f"{self.save_budget_s:.0f} s: not renewed in time, this copy stops before writing")
        self.known_expires = body["expires"]


class WriterLease:
    """The driver's side: acquire, renew in the background, release."""

    def __init__(self, location: str, holder: str | None = None, *, ttl_s: float = TTL_S,
                 save_budget_s: float = SAVE_BUDGET_S, skew_s: float = SKEW_S,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 store: tuple[Store, str] | None = None):
        if save_budget_s >= ttl_s * 2 / 3:
            raise ValueError(f"save budget {save_budget_s} s must be under two thirds of the lease's {ttl_s} s "
                             "(renewals come every third)")
        self.location, self.holder = location, holder or default_holder()
        self.ttl_s, self.save_budget_s, self.skew_s = ttl_s, save_budget_s, skew_s
        self.clock, self.sleep = clock, sleep
        self.store, self.key = store or store_for(location)
        self.generation, self.epoch = 0, 0
        self.expires = 0.0  # this copy's lease as last written: renewals retry until it
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: LeaseError | None = None

    def token(self) -> Lease:
        return Lease(self.location, self.holder, self.epoch, self.save_budget_s, read_retry_s=self.ttl_s / 3,
                     emulator=os.environ.get(EMULATOR_ENV))

    def pending(self, wait_s: float, poll_s: float | None = None,
                driver_error: Callable[[], str | None] | None = None) -> Lease:
        """The workers' token before this copy holds the lease (:meth:`acquire_in_background`): their first save
        that writes waits until the lease names this holder, at most ``wait_s`` from now, or until
        ``driver_error()`` names the error that ended the driver's wait (the driver publishes it from
        ``acquire_in_background``'s ``on_done``; the trainer passes it through Ray)."""
        return Lease(self.location, self.holder, None, self.save_budget_s, read_retry_s=self.ttl_s / 3,
                     emulator=os.environ.get(EMULATOR_ENV), wait_until=self.clock() + wait_s,
                     poll_s=poll_s if poll_s is not None else min(10.0, self.ttl_s / 10), driver_error=driver_error)

    def acquire_in_background(self, wait_s: float, on_done: Callable[[LeaseError | None, float], None],
                              poll_s: float | None = None) -> threading.Thread:
        """Wait for the lease (:meth:`acquire`) in a daemon thread, then renew it; ``on_done(error or None, seconds
        waited)``. Meanwhile the workers restore and train, their saves waiting on :meth:`pending`'s token: the wait
        for the previous holder's expiry (a copy in a lost region may still be writing until then, so never a
        takeover before it) overlaps the restore instead of adding to it."""
        started = self.clock()

        def run() -> None:
            try:
                self.acquire(wait_s, poll_s if poll_s is not None else min(10.0, self.ttl_s / 10))
            except (LeaseError, OSError) as e:
                if self._stop.is_set():
                    return  # released meanwhile (the fit ended): nothing to report
                self.lost = e if isinstance(e, LeaseError) else LeaseError(str(e))
                on_done(self.lost, self.clock() - started)
                return
            self.start_renewing()
            on_done(None, self.clock() - started)

        thread = threading.Thread(target=run, name="writer-lease-acquire", daemon=True)
        thread.start()
        return thread

    def _body(self, epoch: int, expires: float) -> dict[str, Any]:
        return {"holder": self.holder, "epoch": epoch, "expires": expires, "renewed": self.clock()}

    def try_acquire(self, deadline: float | None = None) -> bool:
        """One attempt: True if this copy now holds the lease; False if a live lease is another's. Transient
        storage errors are retried until ``deadline`` (default: one renewal period)."""
        if deadline is None:
            deadline = self.clock() + self.ttl_s / 3
        found = retrying(lambda: self.store.read(self.key), deadline, f"read {self.location}", self.clock, self.sleep)
        if found is None:
            body, generation, epoch = None, 0, 1
        else:
            body, generation = found
            if body["holder"] == self.holder:
                epoch = body["epoch"]
            elif body["expires"] + self.skew_s <= self.clock():
                epoch = body["epoch"] + 1  # the previous holder's lease is over: take over
            else:
                self._held_by = body
                return False
        try:
            self.generation, body = write_retrying(self.store, self.key, lambda: self._body(epoch, self.clock()
                                                   + self.ttl_s), generation, deadline, self.clock, self.sleep)
        except PreconditionFailed:
            return False  # another copy wrote first: read again
        self.epoch, self.expires = epoch, body["expires"]
        return True

    def acquire(self, wait_s: float = 0.0, poll_s: float = 10.0) -> Lease:
        deadline = self.clock() + wait_s
        while not self.try_acquire(max(deadline, self.clock() + self.ttl_s / 3)):
            if self.clock() >= deadline:
                held = getattr(self, "_held_by", {})
                raise LeaseHeld(f"{self.location}: held by {held.get('holder', '?')} (epoch {held.get('epoch')}) "
                                f"until {held.get('expires', 0):.0f}, waited {wait_s:.0f} s: another copy of this "
                                "run is writing its checkpoints")
            self.sleep(poll_s)
            if self._stop.is_set():  # released while waiting (acquire_in_background): never take it now
                raise LeaseError(f"{self.location}: released while waiting for the lease")
        return self.token()

    def renew(self) -> None:
        """Extend the lease by its TTL; transient errors retried until the lease as last written expires (a
        renewal after it could meet another copy's takeover, which the precondition refuses anyway)."""
        try:
            self.generation, body = write_retrying(self.store, self.key, lambda: self._body(
                self.epoch, self.clock() + self.ttl_s), self.generation, self.expires, self.clock, self.sleep)
        except PreconditionFailed as e:
            raise LeaseLost(f"{self.location}: renewal refused, another copy took over ({e})") from None
        except TransientError as e:
            raise LeaseLost(f"{self.location}: not renewed before the lease expired ({e})") from e
        self.expires = body["expires"]

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.lost is None:
            try:
                write_retrying(self.store, self.key, lambda: {**self._body(self.epoch, 0.0), "released": True},
                               self.generation, min(self.expires, self.clock() + self.ttl_s / 3), self.clock,
                               self.sleep)
            except (PreconditionFailed, LeaseError, OSError):
                pass  # taken over meanwhile, or unreachable: the lease then runs out by itself

    def start_renewing(self) -> None:
        """Renew every third of the lease in a daemon thread (each renewal retrying transient errors until the
        lease expires); a lease lost is kept in ``lost`` (the next save's check stops the run)."""
        def loop() -> None:
            while not self._stop.wait(self.ttl_s / 3):
                try:
                    self.renew()
                except (LeaseError, OSError) as e:
                    self.lost = e if isinstance(e, LeaseError) else LeaseLost(str(e))
                    print(f"writer lease: {self.lost}", flush=True)
                    return
        self._thread = threading.Thread(target=loop, name="writer-lease", daemon=True)
        self._thread.start()


def guarded(save: Callable[..., Any], lease: Lease | None, now: Callable[[], float] = time.time,
            sleep: Callable[[float], None] = time.sleep,
            writes: Callable[..., bool] | None = None) -> Callable[..., Any]:
    """``save`` that first checks ``lease`` (None: unguarded). A failed check raises :class:`LeaseLost` before
    MaxText's save runs, so MaxText's own handler (``maybe_save_checkpoint`` turns a failed save into
    StopTraining) never sees it and its train loop, which catches StopTraining only, fails: the fit fails without
    writing (maxtext 0.2.1 common/checkpointing.py maybe_save_checkpoint, trainers/pre_train/train.py)."""
    if lease is None:
        return save

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # ``writes(...)``: whether this call writes anything (MaxText calls its save hook every step and saves every
        # checkpoint_period): a call that writes nothing needs no lease, so it never waits for a pending one.
        if writes is None or writes(*args, **kwargs):
            lease.check(now, sleep)
        return save(*args, **kwargs)

    return wrapper


def location_for(base_output_directory: str, run_name: str, bucket: str | None = None) -> str:
    """Where a run's lease lives: beside its checkpoints, on the bucket itself when the output directory is the
    bucket's FUSE mount (``bucket`` given)."""
    if bucket:
        return f"gs://{bucket}/{run_name}/{LEASE_NAME}"
    return os.path.join(base_output_directory, run_name, LEASE_NAME)
