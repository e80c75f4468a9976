"""``slicectl jobs``: where each of a stack's jobs runs and its RayJob's status there.

    slicectl jobs --stack multi [--kubeconfig FILE]

On a multi-region stack the manager's Workloads say which region admitted each queued job
(:mod:`slicectl.where`); the RayJob's status is read in that region's cluster. Over ``kubectl``,
with the contexts ``gcloud container clusters get-credentials`` writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from slicectl.exits import Exit


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("jobs", help="where each job runs (its region on a multi-region stack) and its status")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    return p


def run(args: argparse.Namespace) -> int:
    from slicectl import where
    from slicectl.tables import text_table
    from stackspec import spec as stack_spec

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    jobs = [j for j in spec.jobs if not j.suspend]
    found = where.locate(spec, where.Kubectl(args.kubeconfig), jobs)
    rows = []
    for f in found:
        deployment, status = where.rayjob_status(f.rayjob) if f.place else ("-", "-")
        rows.append([f.job, f.place.region if f.place else "-", f.place.cluster if f.place else "-",
                     deployment, status, f.admission])
    print(text_table(["job", "region", "cluster", "deployment", "job status", "placement"], rows))
    suspended = [j.name for j in spec.jobs if j.suspend]
    if suspended:
        print(f"suspended (not submitted): {', '.join(suspended)}")
    return Exit.OK
