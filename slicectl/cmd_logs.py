"""``slicectl logs``: a job's status and its submitter's logs, from the region it runs in.

    slicectl logs --stack multi JOB [--tail 100] [--kubeconfig FILE]

A multi-region stack's manager runs no pods (MultiKueue: :mod:`slicectl.where`), so the logs are
read in the worker cluster the job's Workload was admitted on: KubeRay's submitter Job, named after
the RayJob, runs ``ray job submit`` and prints the job's driver output. Once a queued job finished, MultiKueue has
deleted that copy: the command prints the manager's RayJob status and the Cloud Logging query that reads the
driver's output (:func:`finished`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from slicectl.argtypes import integer
from slicectl.exits import Exit, UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("logs", help="a job's status and submitter logs, from the region it runs in")
    p.add_argument("job", help="the stack's job (its RayJob's name)")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--tail", type=integer(1), default=100, help="last lines of the log (default 100)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    return p


def run(args: argparse.Namespace) -> int:
    from slicectl import where
    from stackspec import names
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    job = spec.job(args.job)
    kubectl = where.Kubectl(args.kubeconfig)
    (found,) = where.locate(spec, kubectl, [job])
    if finished_elsewhere(spec, job, found):
        return finished(spec, kubectl, job, found, args.tail)
    if found.place is None:
        raise UsageError(f"job {job.name} runs in no region yet: {found.admission}")
    deployment, status = where.rayjob_status(found.rayjob)
    print(f"job {job.name}: {found.place.region} (cluster {found.place.cluster}, context {found.place.context}); "
          f"{found.admission}; RayJob {deployment}, job status {status}")
    if found.rayjob is None:
        raise UsageError(f"no RayJob {job.name} in namespace {spec.storage.namespace} of cluster "
                         f"{found.place.cluster}")
    text = kubectl.run(found.place, ["logs", f"job/{names.submitter_job(job.name)}", "-n",
                                     spec.storage.namespace, "--tail", str(args.tail)])
    print(text, end="" if text.endswith("\n") else "\n")
    return Exit.OK


# --------------------------------------------------------------------------- a job MultiKueue has finished


def finished_elsewhere(spec, job, found) -> bool:
    """A job queued through the manager whose copy in its region is gone: MultiKueue deletes the worker's RayJob
    (and with it KubeRay's submitter Job and its pods) once the job finished (Kueue v0.19.2
    site/content/en/docs/concepts/multikueue.md, step 4; pkg/controller/admissionchecks/multikueue/workload.go:380-393).
    """
    from slicectl import where

    if where.manager(spec) is None or not where._queued(job):
        return False
    return (found.place is not None and found.rayjob is None) or found.admission.startswith("finished")


def logging_filter(spec, job, cluster: str | None) -> str:
    """The Cloud Logging query for the job's submitter pod (its driver's output) in the cluster that ran it: GKE
    sends containers' stdout and stderr there (resource type k8s_container); KubeRay names the submitter Job
    after the RayJob, and a Job's pods after the Job with a 5-character suffix."""
    from stackspec import names

    parts = ['resource.type="k8s_container"', f'resource.labels.project_id="{spec.project}"',
             f'resource.labels.namespace_name="{spec.storage.namespace}"',
             'resource.labels.container_name="ray-job-submitter"',
             f'resource.labels.pod_name=~"^{names.submitter_job(job.name)}-[a-z0-9]{{5}}$"']
    if cluster:
        parts.insert(2, f'resource.labels.cluster_name="{cluster}"')
    return " AND ".join(parts)


def finished(spec, kubectl, job, found, tail: int) -> int:
    """The manager's RayJob (MultiKueue keeps its status in step with the worker's: rayjob_multikueue_adapter.go),
    and where the logs are: Cloud Logging, as a ready command."""
    from slicectl import where

    mgr = where.manager(spec)
    mine = {r["metadata"]["name"]: r for r in kubectl.items(mgr, where.RAYJOBS, spec.storage.namespace)}
    deployment, status = where.rayjob_status(mine.get(job.name))
    cluster = found.place.cluster if found.place is not None else None
    print(f"job {job.name}: {found.admission}; its copy in {cluster or 'its region'} is gone (MultiKueue deletes it "
          f"once the job finished), the manager's RayJob says: {deployment}, job status {status}")
    print("its driver's output is in Cloud Logging (newest first):\n"
          f"  gcloud logging read '{logging_filter(spec, job, cluster)}' --project={spec.project} --limit={tail} "
          "--format='value(textPayload)'")
    return Exit.OK
