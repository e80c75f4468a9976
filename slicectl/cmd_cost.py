"""``slicectl cost``: a stack's cost table (no render needed), and its change against a base.

``--base`` is, in this order: a file (a ``cost.json``, or a stack file priced with this
checkout's code and table); a stack name (``--base prod``: ``stacks/Pulumi.prod.yaml``); or a git
ref (``--base main``, ``--base HEAD~1``: the same stack file at that commit, ``git show
REF:stacks/Pulumi.<stack>.yaml``, priced with this checkout's table). Anything else, a base that
cannot be read, or a base without this stack exits 2 with one line; ``--base-may-be-missing``
makes a base that does not exist mean "a new stack" (every row is added) instead.

The pull-request workflow runs the default branch's own code for the base (``--json`` there),
so a change of the price table shows too, and this command with ``--base`` on the pull request's.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from pathlib import Path

from slicectl.exits import Exit, UsageError
from slicectl.tables import cost_markdown, cost_text, indent, md_table, text_table
from stackspec import cost
from stackspec import quota as tpu_quota
from stackspec import spec as stack_spec
from stackspec.loader import STACKS_DIR
from stackspec.spec import SpecError, StackFileError

V1_SCHEMA_ID = "tpu-multislice/cost/v1"  # the default branch's documents before v2: still read as a base
ACCEPTED = ("--base takes a cost.json or stack file path, a stack name under stacks/ (prod) "
            "or a git ref (main, HEAD~1)")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("cost", help="a stack's cost (capacity options, what stays up, job runs); --base: the change")
    p.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    p.add_argument("--stacks-dir", type=Path, default=None, help="where stack files live (default: stacks/)")
    p.add_argument("--base", default=None,
                   help="what to compare with: a cost.json or stack file, a stack name (prod) or a git ref "
                        "(main, HEAD~1: the same stack file at that commit)")
    p.add_argument("--base-may-be-missing", action="store_true",
                   help="a --base file, or the stack file at a --base ref, that does not exist is a new stack "
                        "(every row is added) instead of an error")
    p.add_argument("--json", type=Path, default=None, dest="json_out", help="also write the cost document here")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    return p


class _Missing(UsageError):
    """A base that does not exist (``--base-may-be-missing`` turns it into a new stack)."""


def _cost_json(path: Path, stack: str) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
        raise UsageError(f"--base {path}: not a cost.json ({getattr(e, 'strerror', None) or e}); {ACCEPTED}") from None
    if not isinstance(doc, dict) or doc.get("schema") not in (*cost.SAME_TOTALS, V1_SCHEMA_ID):
        raise UsageError(f"--base {path}: not a {cost.SCHEMA_ID} (or v1 to v3) document; {ACCEPTED}")
    if doc.get("stack") != stack:
        raise UsageError(f"--base {path}: the cost of stack {doc.get('stack')!r}, not {stack!r}")
    return doc


def _priced(stack: str, stacks_dir: Path, shown: str) -> dict:
    """The cost document of a base stack file; its problems are a usage error naming ``shown``."""
    try:
        return cost.compute(stack_spec.load_stack(stack, stacks_dir))
    except SpecError as e:
        first = e.problems[0].render(shown)
        raise UsageError(f"--base: {shown} is not a valid stack spec ({len(e.problems)} problem(s); {first})") from None
    except StackFileError as e:
        raise UsageError(f"--base: {shown}: {e}") from None


def _stack_file(path: Path, stack: str) -> dict:
    # Pulumi.<name>.yaml is that stack (its own rules apply); any other file name is the same stack.
    name = m[1] if (m := re.fullmatch(r"Pulumi\.(.+)\.ya?ml", path.name)) else stack
    with tempfile.TemporaryDirectory() as tmp:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--base {path}: cannot read the stack file "
                             f"({getattr(e, 'strerror', None) or e}); {ACCEPTED}") from None
        (Path(tmp) / f"Pulumi.{name}.yaml").write_text(text)
        return _priced(name, Path(tmp), str(path))


def _git(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, timeout=60)
    except OSError as e:  # no git on this machine
        raise UsageError(f"--base: cannot run git ({e.strerror or e}); {ACCEPTED}") from None


def _at_ref(ref: str, stack: str, stacks_dir: Path) -> dict:
    top = _git("rev-parse", "--show-toplevel", cwd=stacks_dir) if stacks_dir.is_dir() else None
    if top is None or top.returncode != 0:
        raise UsageError(f"--base {ref}: not a file or a stack, and {stacks_dir} is not in a git repository; "
                         f"{ACCEPTED}")
    rel = (stacks_dir.resolve() / f"Pulumi.{stack}.yaml").relative_to(Path(top.stdout.strip()).resolve())
    if _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=stacks_dir).returncode:
        raise UsageError(f"--base {ref}: not a file, a stack under {stacks_dir.name}/ or a git commit; {ACCEPTED}")
    shown = f"{ref}:{rel.as_posix()}"
    got = _git("show", f"{ref}:{rel.as_posix()}", cwd=top.stdout.strip())
    if got.returncode != 0:
        raise _Missing(f"--base {ref}: {ref} has no {rel.as_posix()} (the stack {stack!r} is new there); "
                       f"give --base-may-be-missing to show every row as added")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / f"Pulumi.{stack}.yaml").write_text(got.stdout)
        return _priced(stack, Path(tmp), shown)


def read_base(base: str, stack: str, stacks_dir: Path | None) -> tuple[dict, str]:
    """The base's cost document and how the summary names it; :class:`UsageError` otherwise."""
    stacks_dir = stacks_dir or STACKS_DIR
    path = Path(base)
    if path.is_dir():
        raise UsageError(f"--base {base}: a directory; {ACCEPTED}")
    if path.is_file():
        if path.suffix == ".json":
            return _cost_json(path, stack), f"`{base}`"
        if path.suffix in (".yaml", ".yml"):
            return _stack_file(path, stack), f"`{base}` (priced with this checkout's table)"
        raise UsageError(f"--base {base}: neither a .json cost document nor a .yaml stack file; {ACCEPTED}")
    if path.suffix in (".json", ".yaml", ".yml"):
        raise _Missing(f"--base {base}: no such file; {ACCEPTED}")
    if (stacks_dir / f"Pulumi.{base}.yaml").is_file():
        return _priced(base, stacks_dir, f"{stacks_dir.name}/Pulumi.{base}.yaml"), f"the stack `{base}`"
    return _at_ref(base, stack, stacks_dir), f"`{base}` (its stack file, priced with this checkout's table)"


def run(args: argparse.Namespace) -> int:
    if args.json_out and (args.json_out.suffix != ".json" or args.json_out.is_dir()):
        raise UsageError(f"--json {args.json_out}: give a .json file path (it is written over)")
    if args.json_out and not args.json_out.parent.is_dir():
        # A typo in a path must not leave directories behind: the directory is the caller's to make.
        raise UsageError(f"--json {args.json_out}: no such directory {args.json_out.parent}")
    base, against = None, "the base"
    if args.base is not None:  # before the stack: a bad flag fails fast
        try:
            base, against = read_base(args.base, args.stack, args.stacks_dir)
        except _Missing:
            if not args.base_may_be_missing:
                raise
            against = f"`{args.base}`"
    spec = stack_spec.load_stack(args.stack, args.stacks_dir)
    doc = cost.compute(spec)
    if args.json_out:
        args.json_out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.base is not None:
        print(cost.diff_markdown(args.stack, base, doc, against) if args.format != "json" else
              json.dumps({"base": base, "head": doc, "changes": cost.changes(base, doc)}, indent=2))
    elif args.format == "json":
        print(json.dumps(doc, indent=2))
    else:
        print(cost_markdown(doc) if args.format == "markdown" else cost_text(doc))
        # The chips the capacity above draws from each TPU quota, per region (stackspec/quota.py).
        if args.format == "markdown":
            print("\n#### TPU quota (chips each quota type must allow; docs/quota.md)\n")
            print(md_table(tpu_quota.HEADER, tpu_quota.rows(spec)))
        else:
            print("\nTPU quota (chips each quota type must allow; docs/quota.md):")
            print(indent(text_table(tpu_quota.HEADER, tpu_quota.rows(spec))))
        for w in tpu_quota.warnings(spec):
            print(f"warning: {w}")
    return Exit.OK
