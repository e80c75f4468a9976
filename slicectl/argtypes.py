"""argparse types for numbers with a floor: a value below it (or not a finite number) is a usage
error (exit 2) naming the flag, not a silent fallback to the default or a traceback later."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def integer(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below {minimum} (allowed: {minimum} or more)")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def seconds(minimum: float = 0.0, *, above: bool = False) -> Callable[[str], float]:
    """Seconds >= ``minimum`` (> with ``above``), finite."""
    floor = f"more than {minimum:g}" if above else f"{minimum:g} or more"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < minimum or (above and value == minimum):
            raise argparse.ArgumentTypeError(f"{text} seconds: allowed {floor}")
        return value

    parse.__name__ = f"seconds ({floor})"
    return parse
