"""``slicectl bootstrap --preview``: what the CI bootstrap (bootstrap/) would create, per stack, offline.

    slicectl bootstrap --preview [--config bootstrap/Pulumi.<stack>.yaml] [--stacks-dir DIR] [--stack S]
                                 [--format text|json]

Renders the bootstrap program under Pulumi's mocks (:mod:`slicectl.bootstrap_preview`) on its stack file (default:
the one ``bootstrap/Pulumi.*.yaml`` an administrator made, else ``bootstrap/Pulumi.example.yaml``) over the stack
files it serves, and prints per stack the APIs it enables in the stack's project, the identities with each role and
where it holds it, the Cloud KMS keys, custom roles, attestor and GitHub environments. Sandbox stacks are listed
apart: the bootstrap creates nothing for them (docs/sandbox.md); for each, the roles your own identity needs to
deploy it. No credentials, nothing contacted; applying it is
``cd bootstrap && pulumi up`` (docs/deployment.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from slicectl.exits import Exit, UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("bootstrap", help="what the CI bootstrap would create per stack: identities, keys, "
                                         "environments, roles (offline, --preview)")
    p.add_argument("--preview", action="store_true", required=True,
                   help="render the bootstrap offline and list what it creates (apply it with `cd bootstrap && "
                        "pulumi up`)")
    p.add_argument("--config", type=Path, default=None,
                   help="the bootstrap's stack file (default: bootstrap/Pulumi.<yours>.yaml, else the example)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--stack", default=None, help="only this stack")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def default_config() -> Path:
    from slicectl.bootstrap_preview import BOOT, EXAMPLE

    own = sorted(p for p in BOOT.glob("Pulumi.*.yaml") if p != EXAMPLE)
    return own[0] if len(own) == 1 else EXAMPLE


def run(args: argparse.Namespace) -> int:
    from bootstrap.config import ConfigError
    from slicectl import bootstrap_preview as bp
    from stackspec import loader

    path = args.config or default_config()
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file")
    stacks_dir = args.stacks_dir or loader.STACKS_DIR
    if not stacks_dir.is_dir():
        raise UsageError(f"--stacks-dir {stacks_dir}: no such stacks directory")
    try:
        rendered = bp.render(bp.flat_config(path), stacks_dir)
    except ConfigError as e:
        for problem in e.problems:
            print(f"error: {path}: {problem}")
        return Exit.USAGE
    doc = bp.summary(rendered)
    doc["config"] = str(path)
    doc["sandbox"] = sandboxes(stacks_dir)
    doc["sandboxRoles"] = {name: own_roles(name, stacks_dir) for name in doc["sandbox"]}
    if args.stack is not None:
        if args.stack not in doc["stacks"]:
            raise UsageError(f"--stack {args.stack}: the bootstrap serves " + (", ".join(doc["stacks"]) or "none")
                             + (f"; sandbox stacks get nothing: {', '.join(doc['sandbox'])}" if doc["sandbox"] else ""))
        doc["stacks"] = {args.stack: doc["stacks"][args.stack]}
    if args.format == "json":
        print(json.dumps(doc, indent=2))
        return Exit.OK
    print(text(doc))
    return Exit.OK


def sandboxes(stacks_dir: Path) -> list[str]:
    from stackspec import spec as stack_spec

    out = []
    for p in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        name = p.name.removeprefix("Pulumi.").removesuffix(".yaml")
        try:
            if stack_spec.load_stack(name, stacks_dir).sandbox:
                out.append(name)
        except stack_spec.SpecError:
            continue  # the render above reported it
    return out


def own_roles(stack: str, stacks_dir: Path) -> list[dict]:
    """The roles your identity needs to deploy sandbox ``stack`` (:func:`slicectl.bootstrap_preview.sandbox_roles`),
    from the Google Cloud resource types its offline rendering declares."""
    from offline import engine
    from slicectl.bootstrap_preview import sandbox_roles

    rendering = engine.render(stack, stacks_dir=stacks_dir)
    return sandbox_roles({x.type for x in rendering.resources if x.custom and x.type.startswith("gcp:")})


def text(doc: dict) -> str:
    lines = [f"bootstrap preview (offline, nothing contacted): {doc['config']}, {doc['resources']} resources; "
             f"CI project {doc['ciProject']}"]
    if doc["sandbox"]:
        lines.append(f"sandbox stacks, which the bootstrap creates nothing for: {', '.join(doc['sandbox'])}")
        for name, roles in doc.get("sandboxRoles", {}).items():
            lines.append(f"  {name}: deployed with your own identity, which needs in its project (or roles/owner):")
            lines += [f"    {r['role']}  ({', '.join(t.split('/')[-1].split(':')[-1] for t in r['for'])})"
                      for r in roles]
    for name, s in doc["stacks"].items():
        lines += ["", f"stack {name} (project {s['project']})", f"  APIs enabled: {', '.join(s['apis']) or '-'}",
                  "  identities:"]
        for ident in s["identities"]:
            env = f" [environments: {', '.join(ident['environments'])}]" if ident.get("environments") else ""
            lines.append(f"    {ident['email']}{env}")
            lines += [f"      {role}" for role in ident["roles"]]
        lines.append("  Cloud KMS keys:")
        lines += [f"    {k}" for k in s["keys"]]
        lines.append(f"  custom roles: {', '.join(r.rsplit('/', 1)[-1] for r in s['customRoles']) or '-'}")
        lines.append(f"  attestors: {', '.join(s['attestors']) or '-'}")
        lines.append(f"  GitHub environments: {', '.join(s['environments']) or '-'}")
    return "\n".join(lines)
