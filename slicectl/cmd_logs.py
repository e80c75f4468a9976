"""``slicectl logs``: a job's status and its submitter's logs, from the region it runs in.

    slicectl logs --stack multi JOB [--tail 100] [--kubeconfig FILE]

A multi-region stack's manager runs no pods (MultiKueue: :mod:`slicectl.where`), so the logs are
read in the worker cluster the job's Workload was admitted on: KubeRay's submitter Job, named after
the RayJob, runs ``ray job submit`` and prints the job's driver output.
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
