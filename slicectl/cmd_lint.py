"""``slicectl lint``: check stack files against the spec model and the policies that need only the spec.

    slicectl lint [--stack NAME ...] [--format text|json|github|markdown] [--stacks-dir DIR] [--policy-config FILE]
    slicectl lint --schema > stack.schema.json

Every stack in ``stacks/`` by default. A stack the model accepts is then rendered offline and judged by
the policy rules a valid stack file can trip (``Rule.spec`` in policies/registry.py), the same functions
on the same rendering as ``slicectl preview``, each violation on its stack-file line.
``--format github`` prints workflow commands, so a pull request shows each problem on its line, and appends
the Markdown summary (``--format markdown``: each stack's verdict and every problem, file:line, key, value) to
``$GITHUB_STEP_SUMMARY`` when the workflow sets it, so an invalid stack leaves a job summary that says why;
``--schema`` prints the JSON Schema of a stack file (types, limits, defaults) for editors
(yaml-language-server) and other tools. Exit 0 when every stack is valid, 3 when one is not, 1 when
one violates a mandatory policy, 2 for an unknown stack or a bad ``--policy-config``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from slicectl.exits import Exit
from stackspec import loader, rules
from stackspec import quota as tpu_quota
from stackspec import spec as stack_spec
from stackspec.errors import Problem


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("lint", help="check stack files against the spec model and the policies a stack file can "
                                    "trip (renders offline)")
    p.add_argument("--stack", action="append", help="a stack to check (repeatable; default: every stack)")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--format", choices=("text", "json", "github", "markdown"), default="text",
                   help="github: workflow commands that annotate the pull request (and the job summary); "
                        "markdown: a summary")
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
    return loader.stack_names(args.stacks_dir, some=True)  # a directory that is not there: exit 2, naming it


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
    results, specs = [], {}
    for stack in _stacks(args):
        try:
            specs[stack] = stack_spec.load_stack(stack, args.stacks_dir)
        except stack_spec.SpecError as e:
            results.append((stack, e, []))
            continue
        results.append((stack, None, _policies(stack, args.stacks_dir, policy_config)))
    results = _across(results, specs, args.stacks_dir)
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
                line = (f",line={p.line}" if p.line else "") + (f",col={p.column}" if p.column else "")
                print(f"::error file={e.source}{line},title=stack spec::{_escape(p.render())}")
            if e is None and stack in specs:  # what nothing checked: the TPU quota, when none is declared
                for w in tpu_quota.warnings(specs[stack]):
                    print(f"::warning file={specs[stack].stack_file},title=TPU quota::{_escape(w)}")
            for v in violations:
                line = f",line={v.line}" if v.line else ""
                kind = "error" if v.mandatory else "warning"
                print(f"::{kind} file={v.source}{line},title=policy {v.rule}::"
                      f"{_escape(f'{v.key}: {v.message} (fix: {v.remediation})')}")
    if args.format == "markdown":
        print(markdown(results))
    elif args.format == "github" and os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as summary:
            summary.write(markdown(results) + "\n")
    if any(e for _, e, _ in results):
        return Exit.INVALID_SPEC
    return Exit.POLICY_VIOLATION if any(v.mandatory for _, _, vs in results for v in vs) else Exit.OK


def _across(results: list, specs: dict, stacks_dir: Path | None) -> list:
    """What two stack files must not both declare (stackspec/rules/across_stacks.py), judged over every valid stack
    of the directory, the ones not asked for too: a stack checked alone still meets the others."""
    others = []
    for name in loader.stack_names(stacks_dir) if stacks_dir is None or stacks_dir.is_dir() else []:
        if name not in specs:
            try:
                others.append(stack_spec.load_stack(name, stacks_dir))
            except (stack_spec.SpecError, stack_spec.StackFileError):
                continue
    problems = rules.across_stacks([*specs.values(), *others])
    out = []
    for stack, e, violations in results:
        if stack in problems:
            s = specs[stack]
            doc = stack_spec.stack_config(stack, stacks_dir)[1] if s.source else None
            e = stack_spec.SpecError(s.stack_file, [Problem(p.key, p.value, p.message,
                                                            (doc and doc.line(loader.key_path(p.key))) or None)
                                                    for p in problems[stack]])
        out.append((stack, e, violations))
    return out


def _cell(text: object) -> str:
    """A Markdown table cell: ``|`` escaped (it would end the cell), one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: list) -> str:
    """The job summary: one line per stack (valid, invalid, policy violations), then every problem as a table row
    with its file and line, key, value and what is allowed."""
    out = ["### Stack lint", "", "| stack | result |", "|---|---|"]
    for stack, e, violations in results:
        mandatory = sum(v.mandatory for v in violations)
        verdict = (f"**invalid**: {len(e.problems)} problem(s) in `{e.source}`" if e else
                   f"**{mandatory} mandatory policy violation(s)**" if mandatory else
                   "ok" + (f" ({len(violations)} advisory)" if violations else ""))
        out.append(f"| `{stack}` | {_cell(verdict)} |")
    rows = [(f"{e.source}:{p.line}" + (f":{p.column}" if p.column else "") if p.line else e.source, p.key,
             "" if p.value is stack_spec.MISSING else json.dumps(p.value, default=str), p.message)
            for _, e, _ in results if e for p in e.problems]
    rows += [(f"{v.source}:{v.line}" if v.line else str(v.source), v.key, f"policy {v.rule}",
              f"{v.message} (fix: {v.remediation})") for _, _, vs in results for v in vs]
    if rows:
        out += ["", "| where | key | value | problem |", "|---|---|---|---|"]
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _escape(message: str) -> str:
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
