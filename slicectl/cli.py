"""slicectl: the project's command line. Each subcommand lives in its own module.

Exit codes (slicectl/exits.py): 0 clean, 1 policy violation, 2 usage or file
error, 3 invalid stack spec, 4 a run or drill that did not pass, 124 a job wait timed out, 125 a waited job
finished unsuccessfully, 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# pydantic looks for plugins (``pydantic`` entry points) when the first model is built, reading the metadata of
# every installed distribution: 20 ms of each command here, for plugins (logfire's validation tracing) that have
# nothing to observe in the stack spec. A user who sets the variable keeps their value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from slicectl.exits import Exit, UsageError  # noqa: E402
from stackspec.spec import SpecError, StackFileError, UnknownName  # noqa: E402

# slicectl/cmd_<name>.py defines add_parser(subparsers) and run(args) -> exit code.
COMMANDS = ("preview", "lint", "drill", "train", "cost", "lifecycle", "jobs", "logs", "stacks", "new", "submit",
            "bootstrap")


class _Version(argparse.Action):
    """``--version``, its distribution metadata read only when asked: ``argparse``'s own version action takes the
    string up front, and ``importlib.metadata.version`` scans the installed distributions on every command."""

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.metadata  # noqa: PLC0415 (only ``--version`` reads the metadata)

        sys.stdout.write(f"slicectl {importlib.metadata.version('slicectl')}\n")  # as argparse's action: stdout
        parser.exit()


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with ``only``, just that command's module is imported (the others stay
    names: a preview need not import the drills' Kubernetes and Ray clients)."""
    p = argparse.ArgumentParser(prog="slicectl", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name)
            continue
        module = importlib.import_module(f"slicectl.cmd_{name}")
        sp = module.add_parser(sub)
        sp.set_defaults(_run=module.run)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = argv[0] if argv and argv[0] in COMMANDS else None
    try:
        args = parser(only).parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return int(e.code or 0)
    try:
        return int(args._run(args))
    except SpecError as e:
        # One line per problem, file and line first, as a linter prints them.
        for problem in e.problems:
            print(f"error: {problem.render(e.source)}", file=sys.stderr)
        print(f"{len(e.problems)} problem(s) in the stack spec; nothing was rendered", file=sys.stderr)
        return Exit.INVALID_SPEC
    except (UsageError, StackFileError, UnknownName) as e:
        print(f"error: {e}", file=sys.stderr)
        return Exit.USAGE
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return Exit.USAGE
    except UnicodeDecodeError as e:  # a file given on the command line that is not text
        print(f"error: a file given is not UTF-8 text ({e.reason} at byte {e.start})", file=sys.stderr)
        return Exit.USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return Exit.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
