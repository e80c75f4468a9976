"""``slicectl jobs``: a stack's jobs and one-off runs, where each runs and its status; wait for one; delete one-offs.

    slicectl jobs --stack S [--kubeconfig FILE] [--context CTX]                 list
    slicectl jobs --stack S --wait NAME [--timeout SECONDS] [--interval SECONDS]
    slicectl jobs delete NAME [NAME ...] --stack S

Through the kubernetes Python client (:mod:`slicectl.kubeapi`), in the contexts ``gcloud container clusters
get-credentials`` writes (``--context`` another, ``current`` the kubeconfig's own). On a multi-region stack the
manager's Workloads say which region admitted each queued job (:mod:`slicectl.where`).

``--wait NAME`` follows the RayJob (a job of the stack or a one-off of ``slicectl submit --apply``) until Kueue would
call it finished (:func:`slicectl.kubeapi.finished`), printing each change of its state, and exits like xpk's
``workload list --wait-for-job-completion``, or until Kueue finishes its Workload (a single-region stack's; xpk waits
on that condition): 0 succeeded, 125 finished without success, 124 the timeout came first
(default a week, as xpk's; ``--timeout 0`` reads it once); 2 when there is no such RayJob or no cluster to ask.

``delete`` removes one-off RayJobs only (``slicectl submit``'s label): their RayCluster and Kueue Workload follow
through owner references. The stack's own RayJobs are Pulumi's: remove the job from the stack file instead.
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path

from slicectl.argtypes import integer
from slicectl.exits import Exit, UsageError

# xpk's default wait, "the max value, 1 week" (a duration, not a limit of GCP's: not a fact stackspec holds).
WEEK = int(timedelta(weeks=1).total_seconds())


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("jobs", help="list a stack's jobs and one-off runs, wait for one (--wait), delete one-offs")
    p.add_argument("action", nargs="?", choices=("list", "delete"), default="list",
                   help="list (default), or delete the one-off RayJobs named")
    p.add_argument("names", nargs="*", help="delete: the one-off RayJobs (slicectl submit --apply)")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", default=None,
                   help="kube context (default: the stack's cluster's, as get-credentials names it; 'current': the "
                        "kubeconfig's current context)")
    p.add_argument("--wait", metavar="NAME", default=None,
                   help="wait for this RayJob to finish: exit 0 succeeded, 125 failed, 124 timed out")
    p.add_argument("--timeout", type=integer(0), default=WEEK, help="seconds --wait waits (default a week; 0: once)")
    p.add_argument("--interval", type=integer(1), default=15, help="seconds between --wait's reads (default 15)")
    return p


def run(args: argparse.Namespace) -> int:
    from slicectl.kubeapi import KubeApi
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    if args.context and spec.multi_region:
        raise UsageError("--context: a multi-region stack's clusters each have their own context (get-credentials "
                         "names them); drop --context")
    if args.action == "delete" and args.wait:
        raise UsageError("--wait: not with delete")
    if args.action == "list" and args.names:
        raise UsageError(f"unexpected {' '.join(args.names)}: only `jobs delete` takes names")
    api = KubeApi(args.kubeconfig, args.context)
    if args.action == "delete":
        return delete(spec, api, args.names)
    if args.wait:
        return wait(spec, api, args.wait, args.timeout, args.interval)
    return listing(spec, api)


# --------------------------------------------------------------------------- list


def queue_state(workload: dict | None) -> str:
    """A single-region job's Kueue Workload in a few words (its conditions, kueue.x-k8s.io/v1beta2 Workload)."""
    if workload is None:
        return "no Workload"
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}

    def true(t: str) -> dict | None:
        c = conditions.get(t)
        return c if c and c.get("status") == "True" else None

    if c := true("Finished"):
        return f"finished: {c.get('message') or c.get('reason')}"
    if c := true("Evicted"):
        # Requeued only when Kueue says so: its Requeued condition is true on preemption or node failure, false for a
        # deactivated Workload (spec.active false), which is never admitted again until reactivated (kueue v0.19.2
        # pkg/controller/jobframework/reconciler.go step 6; apis/kueue/v1beta2/workload_types.go Active).
        if (workload.get("spec") or {}).get("active") is False:
            return f"evicted ({c.get('reason')}), deactivated: not admitted again until spec.active is true"
        return f"evicted ({c.get('reason')}), " + ("requeued" if true("Requeued") else "not requeued yet")
    if true("Admitted"):
        return "admitted"
    if c := conditions.get("QuotaReserved"):
        return "quota reserved" if c.get("status") == "True" else f"queued: {c.get('message') or c.get('reason')}"
    return "queued"


def workload_finished(workload: dict | None) -> dict | None:
    """The Workload's ``Finished`` condition when true. Kueue also finishes a Workload whose job it cannot start
    (reason ``FailedToStart``: kueue v0.19.2 pkg/controller/jobframework/reconciler.go, step 7), leaving the RayJob
    ``Suspended`` for ever; xpk's wait is this condition (AI-Hypercomputer/xpk@367c838 src/xpk/core/workload.py
    ``wait_for_job_completion``: ``kubectl wait --for=condition=Finished workload ...``)."""
    c = {c.get("type"): c for c in ((workload or {}).get("status") or {}).get("conditions") or []}.get("Finished")
    return c if c and c.get("status") == "True" else None


def listing(spec, api) -> int:
    from slicectl import where
    from slicectl.cmd_submit import ONE_OFF_LABEL
    from slicectl.tables import text_table

    ns = spec.storage.namespace
    jobs = [j for j in spec.jobs if not j.suspend]
    found = where.locate(spec, api, jobs)
    single = where.manager(spec) is None
    workloads = api.items(where.workers(spec)[0], where.WORKLOADS, ns) if single else []
    rows = []
    for f in found:
        deployment, status = where.rayjob_status(f.rayjob) if f.place else ("-", "-")
        queue = queue_state(where.workload_of(workloads, f.job)) if single else f.admission
        rows.append([f.job, f.place.region if f.place else "-", f.place.cluster if f.place else "-",
                     deployment, status, queue])
    if single:  # one-off runs (slicectl submit: single-region stacks only)
        place = where.workers(spec)[0]
        for rj in api.items(place, where.RAYJOBS, ns, label_selector=f"{ONE_OFF_LABEL}=true"):
            name = rj["metadata"]["name"]
            deployment, status = where.rayjob_status(rj)
            rows.append([f"{name} (one-off)", place.region, place.cluster, deployment, status,
                         queue_state(where.workload_of(workloads, name))])
    print(text_table(["job", "region", "cluster", "deployment", "job status", "queue / placement"], rows))
    suspended = [j.name for j in spec.jobs if j.suspend]
    if suspended:
        print(f"suspended (not submitted): {', '.join(suspended)}")
    return Exit.OK


# --------------------------------------------------------------------------- wait


def _place_of(spec, name: str):
    """Where a RayJob's status is read: a single-region stack's cluster; on a multi-region stack, the manager for a
    queued job (MultiKueue keeps the manager's copy's status in step with the worker's:
    kueue v0.19.2 pkg/controller/jobs/rayjob/rayjob_multikueue_adapter.go), the job's region for a pinned one."""
    from slicectl import where

    mgr = where.manager(spec)
    if mgr is None:
        return where.workers(spec)[0]
    job = next((j for j in spec.jobs if j.name == name), None)
    if job is None:
        raise UsageError(f"no job {name!r} in {spec.stack_file} (one-off runs are single-region); jobs: "
                         f"{', '.join(j.name for j in spec.jobs)}")
    if job.region is None:
        return mgr
    return next(p for p in where.workers(spec) if p.region == job.region)


def wait(spec, api, name: str, timeout: int, interval: int) -> int:
    from slicectl import where
    from slicectl.kubeapi import KubeError, finished

    ns = spec.storage.namespace
    place = _place_of(spec, name)
    clock, sleep = time.monotonic, time.sleep  # looked up per call: a test replaces them
    start, last, down = clock(), None, None
    while True:
        try:
            rj = api.get(place, where.RAYJOBS, ns, name)
            wl = None if where.manager(spec) else where.workload_of(api.items(place, where.WORKLOADS, ns), name)
        except KubeError as e:
            if not e.transient:
                raise
            elapsed = clock() - start
            if down is None:  # once per outage: the API server is not the job (kubeapi.TRANSIENT)
                print(f"[{elapsed:7.0f}s] {name}: {e}; retrying every {interval} s until --timeout", flush=True)
                down = elapsed
            if elapsed >= timeout:
                print(f"{name}: not finished after {timeout} s (the API server unavailable since {down:.0f} s); "
                      f"exit {int(Exit.JOB_TIMEOUT)}")
                return Exit.JOB_TIMEOUT
            sleep(min(interval, max(0.0, timeout - elapsed)))
            continue
        if down is not None:
            print(f"[{clock() - start:7.0f}s] {name}: the API server answers again", flush=True)
            down = None
        elapsed = clock() - start
        if rj is None:
            what = "was deleted while waiting" if last else "does not exist"
            raise UsageError(f"RayJob {ns}/{name} in cluster {place.cluster} {what} (`slicectl jobs --stack "
                             f"{spec.stack}` lists them)")
        deployment, status = where.rayjob_status(rj)
        line = f"{deployment}, job status {status}" + ("" if where.manager(spec) else f", Kueue: {queue_state(wl)}")
        if line != last:
            print(f"[{elapsed:7.0f}s] {name}: {line}", flush=True)
            last = line
        done, ok = finished(rj)
        message = (rj.get("status") or {}).get("message")
        if not done and (c := workload_finished(wl)):  # Kueue ended it without KubeRay's say (FailedToStart)
            done, ok = True, c.get("reason") == "Succeeded"
            message = f"Kueue: {c.get('reason')}: {c.get('message')}"
        if done:
            print(f"{name}: {'succeeded' if ok else 'finished without success'}"
                  + (f" ({message})" if message else ""))
            return Exit.OK if ok else Exit.JOB_FAILED
        if elapsed >= timeout:
            print(f"{name}: not finished after {timeout} s (still {deployment}); exit {int(Exit.JOB_TIMEOUT)}")
            return Exit.JOB_TIMEOUT
        sleep(min(interval, max(0.0, timeout - elapsed)))


# --------------------------------------------------------------------------- delete


def delete(spec, api, names: list[str]) -> int:
    from slicectl import where
    from slicectl.cmd_submit import ONE_OFF_LABEL

    if not names:
        raise UsageError("jobs delete: name the one-off RayJobs to delete (`slicectl jobs --stack "
                         f"{spec.stack}` lists them)")
    if spec.multi_region:
        raise UsageError("jobs delete: a multi-region stack's RayJobs are all the stack's (Pulumi's); one-off runs "
                         "are single-region")
    ns, place = spec.storage.namespace, where.workers(spec)[0]
    problems = []
    for name in names:
        rj = api.get(place, where.RAYJOBS, ns, name)
        if rj is None:
            problems.append(f"no RayJob {ns}/{name} in cluster {place.cluster}")
        elif ((rj.get("metadata") or {}).get("labels") or {}).get(ONE_OFF_LABEL) != "true":
            problems.append(f"RayJob {ns}/{name} is the stack's (Pulumi manages it): remove the job from "
                            f"{spec.stack_file} and deploy, or `pulumi destroy`")
        else:
            gone = api.delete(place, where.RAYJOBS, ns, name)
            # The API server answers with the object while finalizers hold it (KubeRay's ray.io/rayjob-finalizer,
            # removed once it has stopped the Ray job), with a Success Status once it is gone.
            if ((gone or {}).get("metadata") or {}).get("deletionTimestamp"):
                print(f"RayJob {ns}/{name} in cluster {place.cluster} is being deleted: KubeRay stops its Ray job, "
                      "then it, its RayCluster and its Kueue Workload go (`slicectl jobs` shows it until then)")
            else:
                print(f"deleted RayJob {ns}/{name} in cluster {place.cluster} (its RayCluster and Kueue Workload "
                      "follow)")
    if problems:
        raise UsageError("; ".join(problems))
    return Exit.OK
