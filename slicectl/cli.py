"""``slicectl``: the project's command line. Each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import importlib
import sys

# slicectl/cmd_<name>.py defines add_parser(subparsers) and run(args) -> exit code.
COMMANDS = ("preview", "drill", "train")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="slicectl", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"slicectl.cmd_{name}")
        sp = module.add_parser(sub)
        sp.set_defaults(_run=module.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args._run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
