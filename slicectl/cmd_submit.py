"""``slicectl submit``: a one-off run of one of a stack's jobs, as a RayJob written out or created (``--apply``).

    slicectl submit --stack S --job J [--name N] [--steps N] [--out FILE] [--stacks-dir DIR]
    slicectl submit --stack S --job J --apply [--kubeconfig FILE] [--context CTX]

Writes the RayJob of the job as the stack declares it (its slices, trainer, checkpoints and Kueue queue: a
dedicated job is queued and admitted whole like any other), under a name of its own (``--name``, default
``<job>-<UTC time>``) so it neither replaces nor is replaced by the RayJob Pulumi manages, with a fresh run (its
own run name: it starts from step 0, not from the job's checkpoints) and, with ``--steps``, another step count.
The name and settings go through the spec model first (name limits, slices, checkpoint period), as for a job of the
file. ``--apply`` creates it in the stack's cluster through the kubernetes client (:mod:`slicectl.kubeapi`, the
context get-credentials writes); without it, apply it with ``kubectl apply -f``. It is not in Pulumi's state: watch it
with ``slicectl jobs --wait`` and delete it with ``slicectl jobs delete`` when done (a dedicated job's cluster goes
with it). A shared-cluster job is submitted to the stack's shared RayCluster.
Single-region stacks (a multi-region stack's queued jobs are the manager's to dispatch).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

from slicectl.argtypes import integer
from slicectl.exits import Exit, UsageError
from stackspec import kube, loader
from stackspec import spec as stack_spec

ONE_OFF_LABEL = "tpu-multislice/one-off"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("submit", help="a one-off run of a stack's job: its RayJob under a name of its own")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--job", required=True, help="the stack's job to run once")
    p.add_argument("--name", default=None, help="the RayJob's name (default: <job>-<UTC time>)")
    p.add_argument("--steps", type=integer(1), default=None, help="training steps (default: the job's)")
    p.add_argument("--out", type=Path, default=None, help="write the RayJob here (default: stdout)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--apply", action="store_true",
                   help="create the RayJob in the stack's cluster (its kube context) instead of printing it")
    p.add_argument("--kubeconfig", help="--apply: kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", default=None,
                   help="--apply: kube context (default: the stack's cluster's; 'current': the kubeconfig's current)")
    return p


def one_off(stack: str, job: str, name: str | None, steps: int | None, stacks_dir: Path | None) -> dict:
    """The one-off RayJob: the stack file's job under ``name`` with a run of its own, checked by the spec model."""
    spec = stack_spec.load_stack(stack, stacks_dir)
    if spec.multi_region:
        raise UsageError(f"{spec.stack_file}: a multi-region stack's queued jobs are dispatched by its manager; "
                         "submit to a region's cluster by adding the job to the file")
    spec.job(job)  # an unknown job: its names, exit 2
    config, doc = loader.stack_config(stack, stacks_dir)
    key = f"{stack_spec.PROJECT}:jobs"
    jobs = json.loads(config[key])
    (entry,) = [j for j in jobs if j.get("name") == job]
    name = name or f"{job}-{time.strftime('%m%d-%H%M%S', time.gmtime())}"
    entry = {**entry, "name": name, "rerun": name, "suspend": False} | ({"steps": steps} if steps else {})
    # The one-off alone: the model checks its name, slices and period as for any job of the file.
    edited = loader.load(stack, {**config, key: json.dumps([entry])}, doc, spec.stack_file)
    from workloads import manifests

    body = manifests.ray_job(edited, edited.job(name))
    labels = body["metadata"].setdefault("labels", {})
    labels[ONE_OFF_LABEL] = "true"
    labels[kube.MANAGED_BY_LABEL] = "slicectl"  # applied by hand, not in Pulumi's state
    return body


def run(args: argparse.Namespace) -> int:
    if not args.apply and (args.kubeconfig or args.context):
        raise UsageError("--kubeconfig/--context: only with --apply")
    body = one_off(args.stack, args.job, args.name, args.steps, args.stacks_dir)
    text = yaml.safe_dump(body, sort_keys=False)
    if args.apply:
        return apply(args, body, text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    where = args.out or "<the RayJob above>"
    print(f"one-off RayJob {body['metadata']['name']} (namespace {body['metadata']['namespace']}); apply it in the "
          f"stack's cluster: kubectl apply -f {where} (or submit --apply); delete it when done: slicectl jobs delete "
          f"{body['metadata']['name']} --stack {args.stack}", file=sys.stderr)
    return Exit.OK


def apply(args: argparse.Namespace, body: dict, text: str) -> int:
    """Creates the one-off in the stack's cluster and says how to follow and remove it."""
    from slicectl import where
    from slicectl.kubeapi import KubeApi

    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    api = KubeApi(args.kubeconfig, args.context)
    place = where.workers(spec)[0]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    made = api.create(place, where.RAYJOBS, body)
    name, ns = made["metadata"]["name"], made["metadata"]["namespace"]
    at = f" --stacks-dir {args.stacks_dir}" if args.stacks_dir else ""
    print(f"created RayJob {ns}/{name} in cluster {place.cluster} (context {api.context_of(place)}); Kueue admits it "
          f"whole when its slices are free\n"
          f"  watch:  slicectl jobs --stack {args.stack}{at} --wait {name}"
          "   (exit 0 succeeded, 125 failed, 124 timed out)\n"
          f"  delete: slicectl jobs delete {name} --stack {args.stack}{at}")
    return Exit.OK
