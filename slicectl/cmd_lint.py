"""``slicectl lint``: check stack files against the spec model, fast, without rendering anything.

    slicectl lint [--stack NAME ...] [--format text|json|github] [--stacks-dir DIR]
    slicectl lint --schema > stack.schema.json

Every stack in ``stacks/`` by default. ``--format github`` prints workflow commands, so a
pull request shows each problem on its line; ``--schema`` prints the JSON Schema of a stack
file (types, limits, defaults) for editors (yaml-language-server) and other tools.
Exit 0 when every stack is valid, 3 when one is not, 2 for an unknown stack.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from slicectl.exits import Exit
from stackspec import loader
from stackspec import spec as stack_spec


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("lint", help="check stack files against the spec model (no render)")
    p.add_argument("--stack", action="append", help="a stack to check (repeatable; default: every stack)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--format", choices=("text", "json", "github"), default="text",
                   help="github: workflow commands that annotate the pull request")
    p.add_argument("--schema", action="store_true", help="print the stack file's JSON Schema and exit")
    return p


def schema() -> dict:
    """The JSON Schema of a stack file: its config block is the spec model's input."""
    config = stack_spec.StackSpec.model_json_schema(by_alias=True, mode="validation")
    config["properties"].pop("stack", None)
    for key in ("secretsprovider", "encryptionsalt", "encryptedkey"):
        config["properties"].pop(key, None)
    config["required"] = [r for r in config.get("required", []) if r != "stack"]
    config["additionalProperties"] = True  # other providers' keys (gcp:*, kubernetes:*) pass through
    defs = config.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tpu-multislice stack file (stacks/Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {"config": config, "secretsprovider": {"type": "string"}, "encryptedkey": {"type": "string"},
                       "encryptionsalt": {"type": "string"}},
        "required": ["config"],
        "additionalProperties": False,
        "$defs": defs,
    }


def _stacks(args: argparse.Namespace) -> list[str]:
    if args.stack:
        return args.stack
    stacks_dir = args.stacks_dir or loader.STACKS_DIR
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml"))


def run(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(schema(), indent=2))
        return Exit.OK
    results = []
    for stack in _stacks(args):
        try:
            stack_spec.load_stack(stack, args.stacks_dir)
            results.append((stack, None))
        except stack_spec.SpecError as e:
            results.append((stack, e))
    if args.format == "json":
        print(json.dumps([{"stack": s, "file": e.source if e else None, "problems": [
            {"line": p.line, "key": p.key, "value": None if p.value is stack_spec.MISSING else p.value,
             "message": p.message} for p in (e.problems if e else [])]} for s, e in results], indent=2, default=str))
    for stack, e in results:
        if args.format == "text":
            print(f"{stack}: ok" if e is None else "\n".join(p.render(e.source) for p in e.problems))
        elif args.format == "github" and e is not None:
            for p in e.problems:
                line = f",line={p.line}" if p.line else ""
                message = p.render().replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
                print(f"::error file={e.source}{line},title=stack spec::{message}")
    return Exit.INVALID_SPEC if any(e for _, e in results) else Exit.OK
