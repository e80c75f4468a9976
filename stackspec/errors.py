"""Problems in a stack file, reported the way a linter does: one line each, file and key first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class Problem:
    key: str  # the config key path, e.g. tpu-multislice:slices[0].topology
    value: Any
    message: str  # what is wrong and what is allowed
    line: int | None = None  # 1-based line in the stack file, where known
    column: int | None = None  # 1-based column, where known (a YAML syntax error)

    def render(self, source: str | None = None) -> str:
        shown = "(missing)" if self.value is MISSING else json.dumps(self.value, default=str)
        at = f"{self.line}:{self.column}" if self.column else f"{self.line}"
        where = f"{source}:{at}: " if source and self.line else (f"{source}: " if source else "")
        if self.key == "(yaml)":  # the file could not be read: no key, no value
            return f"{where}{self.message}"
        return f"{where}{self.key} = {shown}: {self.message}"


class SpecError(ValueError):
    """Every problem of a stack file at once. Nothing is declared when this is raised."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = sorted(problems, key=lambda p: (p.line or 0, p.key))
        lines = [f"{len(self.problems)} problem(s) in {source}:"]
        lines += [p.render(source) for p in self.problems]
        super().__init__("\n".join(lines))


class StackFileError(OSError):
    """The stack file cannot be read at all (missing, a directory, not readable)."""


class UnknownName(LookupError):
    """A name asked for (a job, a stack) that the stack spec does not have; says what it has."""
