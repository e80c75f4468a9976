"""The driver's hold on the run's writer lease (``lease.py``): taken at once or waited for in the background while
the workers restore, a failed wait told to the workers, and whether a failed fit lost the lease. Shipped beside
``maxtext_trainer.py`` in the trainer ConfigMap."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from progress_lines import PROGRESS

# A copy that lost its run's writer lease takes it over again at most this often (main): more is a fault of this
# copy (a worker whose clock runs minutes ahead refuses every save), not a takeover, and ends the job.
LEASE_RETAKES = 3


class DriverVerdict:
    """How a driver whose background wait for the lease ended in an error tells its workers at once: the error
    under a key of this holder's in Ray's key-value store (the GCS's internal KV, which every process of the cluster
    reads), which the workers' pending token reads while their first save waits (lease.Lease.driver_error).

    Ray Train gives the driver no way to reach running workers, and only the driver writes the lease, so without it
    a driver that gave up (say Cloud Storage answered 403 to its insert) left its workers waiting out the job's
    deadline, then refusing with LeaseHeld. The error may come before the fit has connected this driver to Ray:
    it is then put by a thread that waits for the connection (the fit's own ``ray.init``; this never starts one).
    Ray's own libraries hand values between a job's processes the same way (ray 2.60
    ``ray/util/collective/collective_group/torch_gloo_collective_group.py``: the rendezvous address put by rank 0
    with ``internal_kv._internal_kv_put`` and polled by the others with ``_internal_kv_get``; ``ray/tune/registry.py``).
    Underscored in Ray, so tests/test_lease_emulator.py runs it on a real Ray instance."""

    NAMESPACE = "tpu-multislice-writer-lease"

    def __init__(self, holder: str):
        self.key = f"driver-error/{holder}".encode()

    def publish(self, error: BaseException) -> threading.Thread:
        from ray.experimental import internal_kv

        text = f"{type(error).__name__}: {error}".encode()

        def put() -> None:
            while not internal_kv._internal_kv_initialized():
                time.sleep(0.1)
            internal_kv._internal_kv_put(self.key, text, overwrite=True, namespace=self.NAMESPACE)

        thread = threading.Thread(target=put, name="writer-lease-verdict", daemon=True)
        thread.start()
        return thread

    def __call__(self) -> str | None:
        """The driver's error, if it published one (read on a training worker, connected to Ray by Ray Train)."""
        from ray.experimental import internal_kv

        found = internal_kv._internal_kv_get(self.key, namespace=self.NAMESPACE)
        return None if found is None else found.decode()


def hold_lease(args: argparse.Namespace):
    """--lease: hold the run's writer lease (lease.py) for the whole fit; each worker's saves check it."""
    if not args.lease:
        return None
    import functools

    import lease as writer_lease  # beside this script: the trainer ConfigMap carries both
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(writer_lease)  # the workers have no copy of the module
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # DriverVerdict, in the workers' token
    ttl = args.lease_ttl or writer_lease.TTL_S  # a drill's shorter lease keeps the stack's proportions
    lease = writer_lease.WriterLease(args.lease, ttl_s=ttl, save_budget_s=ttl * writer_lease.SAVE_BUDGET_S /
                                     writer_lease.TTL_S, skew_s=ttl * writer_lease.SKEW_S / writer_lease.TTL_S)
    started = time.time()

    verdict = DriverVerdict(lease.holder)

    def report(error, waited_s: float) -> None:
        # A progress line of the driver's (the drills' lease figures and their check that no save ran without it).
        line = {"event": "lease", "t": round(time.time(), 3), "world": 0, "holder": lease.holder,
                "state": "failed" if error else "acquired", "epoch": lease.epoch, "waited_s": round(waited_s, 3),
                "expires": round(lease.expires, 3), "ttl_s": ttl, "skew_s": lease.skew_s}
        print(f"{PROGRESS} {json.dumps(line | ({'error': str(error)} if error else {}))}", flush=True)
        if error:
            print(f"writer lease: {error}", file=sys.stderr, flush=True)
            verdict.publish(error)  # the workers' first save stops with it at once (DriverVerdict)

    # The new holder restores while it waits: the workers' first save that writes waits for the lease (a pending
    # token), the restore does not. Taken at once when free or released (one read, one conditional write).
    if lease.try_acquire():
        lease.start_renewing()
        report(None, time.time() - started)
        token = lease.token()
    else:
        token = lease.pending(writer_lease.WAIT_S, driver_error=verdict)
        lease.acquire_in_background(writer_lease.WAIT_S, report)
    # The workers check it before each save that writes (train_loop_per_worker's hook, save_decided_once).
    args.lease_guard = functools.partial(writer_lease.guarded, lease=token)
    return lease


def lease_lost(lease, error: BaseException) -> bool:
    """Whether a failed fit failed because this copy lost the run's writer lease: the renewer saw it taken over, a
    worker's save refused (``LeaseLost`` in Ray Train's error, which carries the workers' tracebacks), or the
    lease now names another holder."""
    import lease as writer_lease

    if lease.epoch == 0:
        return False  # never held (the wait for it ran out or failed, or the fit failed while waiting): the job's error
    if lease.lost is not None or "LeaseLost" in f"{type(error).__name__}: {error}":
        return True
    try:
        lease.token().check()
    except writer_lease.LeaseLost:
        return True
    except (writer_lease.LeaseError, OSError):
        return False
    return False
