"""``slicectl cost``: a stack's cost table (no render needed), and its change against a base cost.json.

The pull-request workflow runs the default branch's own code for the base (``--json`` there)
and this command with ``--base`` on the pull request's, and appends the Markdown to the job
summary. A missing base file means the default branch had no cost for the stack: every row is new.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from slicectl.exits import Exit, UsageError
from slicectl.tables import cost_markdown, cost_text
from stackspec import cost
from stackspec import spec as stack_spec


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("cost", help="a stack's cost (capacity options, what stays up, job runs); --base: the change")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--base", type=Path, default=None,
                   help="the default branch's cost.json to compare with (missing file: every row is new)")
    p.add_argument("--json", type=Path, default=None, dest="json_out", help="also write the cost document here")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    return p


def read_base(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
        raise UsageError(f"--base {path}: not a cost.json ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != cost.SCHEMA_ID:
        raise UsageError(f"--base {path}: not a {cost.SCHEMA_ID} document")
    return doc


def run(args: argparse.Namespace) -> int:
    if args.json_out and (args.json_out.suffix != ".json" or args.json_out.is_dir()):
        raise UsageError(f"--json {args.json_out}: give a .json file path (it is written over)")
    base = read_base(args.base)  # before loading the stack: a bad flag fails fast
    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    doc = cost.compute(spec)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.base is not None:
        print(cost.diff_markdown(args.stack, base, doc) if args.format != "json" else
              json.dumps({"base": base, "head": doc}, indent=2))
    elif args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(cost_markdown(doc) if args.format == "markdown" else cost_text(doc))
    return Exit.OK
