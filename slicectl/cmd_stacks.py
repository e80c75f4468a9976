"""``slicectl stacks``: the stacks under ``stacks/`` and what the GitOps workflows do with each.

    slicectl stacks [--format text|json|github] [--stacks-dir DIR]

The workflows' first job runs ``slicectl stacks --format github >> "$GITHUB_OUTPUT"`` and builds its
matrices from the lists (``fromJSON``), so a stack file added under ``stacks/`` is previewed, costed and,
when its ``tpu-multislice:deploy`` says so, deployed and drilled, with nothing retyped in a workflow:

- ``all``: every stack (pr.yml's previews and cost);
- ``deploy``: the stacks with ``deploy.onPush: true`` (deploy.yml, drift detection in drills.yml);
- ``drill``: ``{"stack", "job"}`` for each stack with ``deploy.clusterDrill`` (drills.yml's cluster drill);
- ``image``: ``{"stack", "registry", "image", "attestor", "keyversion"}`` for each stack with an ``image``
  section: the stack's own Artifact Registry repository, the image (without digest) image.yml pushes there, and
  what it signs the digest with (:func:`image_target`);
- ``sandbox``: the sandbox stacks (``tpu-multislice:sandbox: true``, docs/sandbox.md), in no other list: they are
  deployed by hand, without the CI bootstrap.

Every stack file must be valid (exit 3 with every problem otherwise; exit 2 for a ``clusterDrill`` that
names no elastic job): a workflow never acts on a list it could only partly read. ``--skip-invalid`` (pr.yml
only, whose previews change nothing) leaves an invalid stack out of the lists with an error annotation, so one
bad stack does not skip the others' previews; pr.yml's ``lint`` job fails on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from stackspec import loader, names
from stackspec import spec as stack_spec


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("stacks", help="the stacks and what CI does with each (the workflows' matrices)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--format", choices=("text", "json", "github"), default="text",
                   help="github: name=JSON lines for $GITHUB_OUTPUT")
    p.add_argument("--skip-invalid", action="store_true",
                   help="leave invalid stack files out of the lists (an error annotation each, on stderr)")
    return p


def image_target(s: stack_spec.StackSpec) -> dict[str, str]:
    """What image.yml needs for a stack with an image section: its own Artifact Registry repository (the only one
    whose images the signing step signs), its worker image there (without a digest), and the attestor and signing
    key version it signs the pushed digest with (the bootstrap's, named after the stack's home cluster)."""
    cluster, region = s.home
    return {"stack": s.stack,
            "registry": names.repository_path(s.image.location, s.project, s.image.repository),
            "image": names.image_path(s.image.location, s.project, s.image.repository, s.image.name),
            "attestor": names.image_attestor_id(s.project, cluster),
            "keyversion": names.image_signing_key_version_id(s.project, region, cluster)}


def stack_names(stacks_dir: Path | None = None) -> list[str]:
    return loader.stack_names(stacks_dir)  # a directory that is not there: exit 2, naming it


def lists(stacks_dir: Path | None = None, skip_invalid: bool = False) -> dict[str, list]:
    """The workflows' lists, from the stack files (each one loaded and checked as written: a clusterDrill naming
    no elastic job is a spec problem, as in ``lint``)."""
    loaded = []
    for n in stack_names(stacks_dir):
        try:
            loaded.append(stack_spec.load_stack(n, stacks_dir))
        except stack_spec.SpecError as err:
            if not skip_invalid:
                raise
            first = str(err).splitlines()[0] if str(err) else "invalid"
            print(f"::error file={names.stack_file(n)}::left out of the lists: {first} "
                  f"(slicectl lint --stack {n})", file=sys.stderr)
    specs = [s for s in loaded if not s.sandbox]  # sandbox stacks are deployed by hand: no workflow acts on them
    return {
        "all": [s.stack for s in specs],
        "deploy": [s.stack for s in specs if s.deploy.on_push],
        "drill": [{"stack": s.stack, "job": s.deploy.cluster_drill} for s in specs if s.deploy.cluster_drill],
        "image": [image_target(s) for s in specs if s.image is not None],
        "sandbox": [s.stack for s in loaded if s.sandbox],  # docs/sandbox.md
    }


def run(args: argparse.Namespace) -> int:
    out = lists(args.stacks_dir, args.skip_invalid)
    if args.format == "json":
        print(json.dumps(out, indent=2))
    elif args.format == "github":
        for key, value in out.items():
            print(f"{key}={json.dumps(value, separators=(',', ':'))}")
    else:
        drills = {d["stack"]: d["job"] for d in out["drill"]}
        images = {i["stack"]: i["image"] for i in out["image"]}
        width = max((len(s) for s in out["all"]), default=5)
        print(f"{'stack':<{width}}  deploy on push  cluster drill        image")
        for s in out["all"]:
            print(f"{s:<{width}}  {'yes' if s in out['deploy'] else 'no':<14}  {drills.get(s, '-'):<19}  "
                  f"{images.get(s, '-')}")
        if out["sandbox"]:
            print(f"sandbox (deployed by hand, in no workflow; docs/sandbox.md): {', '.join(out['sandbox'])}")
    return 0
