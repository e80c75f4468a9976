"""``slicectl lint``: check stack files against the spec model and the policies that need only the spec.

    slicectl lint [--stack NAME ...] [--format text|json|github] [--stacks-dir DIR] [--policy-config FILE]
    slicectl lint --schema > stack.schema.json

Every stack in ``stacks/`` by default. A stack the model accepts is then rendered offline and judged by
the policy rules a valid stack file can trip (``Rule.spec`` in policies/registry.py), the same functions
on the same rendering as ``slicectl preview``, each violation on its stack-file line.
``--format github`` prints workflow commands, so a pull request shows each problem on its line;
``--schema`` prints the JSON Schema of a stack file (types, limits, defaults) for editors
(yaml-language-server) and other tools. Exit 0 when every stack is valid, 3 when one is not, 1 when
one violates a mandatory policy, 2 for an unknown stack or a bad ``--policy-config``.
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
    p.add_argument("--policy-config", type=Path, default=None,
                   help="policy pack config JSON (as for slicectl preview and pulumi --policy-pack-config)")
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


def _policies(stack: str, stacks_dir: Path | None, config: dict | None) -> list:
    """The spec-only policy rules' violations, on the offline rendering ``slicectl preview`` judges."""
    from offline import engine  # the Pulumi SDK loads only for a stack the model accepts
    from policies import offline as policy_rules

    return policy_rules.evaluate(engine.render(stack, stacks_dir=stacks_dir), config, spec_only=True)


def run(args: argparse.Namespace) -> int:
    if args.schema:
        print(json.dumps(schema(), indent=2))
        return Exit.OK
    policy_config = None
    if args.policy_config is not None:
        from slicectl.cmd_preview import read_policy_config

        policy_config = read_policy_config(args.policy_config)
    results = []
    for stack in _stacks(args):
        try:
            stack_spec.load_stack(stack, args.stacks_dir)
        except stack_spec.SpecError as e:
            results.append((stack, e, []))
            continue
        results.append((stack, None, _policies(stack, args.stacks_dir, policy_config)))
    if args.format == "json":
        print(json.dumps([{"stack": s, "file": e.source if e else None, "problems": [
            {"line": p.line, "key": p.key, "value": None if p.value is stack_spec.MISSING else p.value,
             "message": p.message} for p in (e.problems if e else [])],
            "policies": [v.to_json() for v in vs]} for s, e, vs in results], indent=2, default=str))
    for stack, e, violations in results:
        if args.format == "text":
            if e is not None:
                print("\n".join(p.render(e.source) for p in e.problems))
                continue
            for v in violations:
                print(v.render())
                print(f"    fix: {v.remediation}")
            if not any(v.mandatory for v in violations):
                print(f"{stack}: ok" + (f" ({len(violations)} advisory)" if violations else ""))
        elif args.format == "github":
            for p in (e.problems if e else []):
                line = f",line={p.line}" if p.line else ""
                print(f"::error file={e.source}{line},title=stack spec::{_escape(p.render())}")
            for v in violations:
                line = f",line={v.line}" if v.line else ""
                kind = "error" if v.mandatory else "warning"
                print(f"::{kind} file={v.source}{line},title=policy {v.rule}::"
                      f"{_escape(f'{v.key}: {v.message} (fix: {v.remediation})')}")
    if any(e for _, e, _ in results):
        return Exit.INVALID_SPEC
    return Exit.POLICY_VIOLATION if any(v.mandatory for _, _, vs in results for v in vs) else Exit.OK


def _escape(message: str) -> str:
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
