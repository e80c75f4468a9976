"""Showing policy results: a readable list for the terminal and ``policy.json`` for tools.

``slicectl preview`` calls :func:`check`: it evaluates the pack on the rendering,
prints the violations, writes ``<out>/policy.json`` and returns the exit code
(1 when a mandatory rule is violated).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .offline import Violation, evaluate
from .registry import RULES

__all__ = ["POLICY_FILE", "Violation", "check", "evaluate", "markdown", "print_violations", "text",
           "write_policy_json"]

POLICY_FILE = "policy.json"


def text(violations: Sequence[Violation]) -> str:
    """Each violation as a linter line (file, line, spec key first), the resource, and how to fix it."""
    mandatory = [v for v in violations if v.mandatory]
    advisory = [v for v in violations if not v.mandatory]
    if not violations:
        return f"Policies: all {len(RULES)} rules pass"
    lines = [f"Policies: {len(mandatory)} mandatory, {len(advisory)} advisory violation(s)"]
    for v in (*mandatory, *advisory):
        where = f"{v.resource_type} {v.resource_name}" if v.resource_type else "the stack"
        at = f"{v.source}:{v.line}: " if v.source and v.line else ""
        lines.append(f"  {at}{v.key + ': ' if v.key else ''}[{v.enforcement}] {v.rule}  ({where})")
        lines.append(f"      {v.message}")
        lines.append(f"      fix: {v.remediation}")
    return "\n".join(lines)


def print_violations(violations: Sequence[Violation], out: TextIO) -> None:
    print(text(violations), file=out)


def policy_document(violations: Sequence[Violation]) -> dict[str, Any]:
    return {
        "passed": not any(v.mandatory for v in violations),
        "mandatory": sum(v.mandatory for v in violations),
        "advisory": sum(not v.mandatory for v in violations),
        "rules": [{"name": r.name, "enforcement": r.enforcement, "kind": r.kind,
                   "description": r.description} for r in RULES],
        "violations": [v.to_json() for v in violations],
    }


def policy_json(violations: Sequence[Violation]) -> str:
    """The policy report's text, as :func:`write_policy_json` writes it."""
    return json.dumps(policy_document(violations), indent=2) + "\n"


def write_policy_json(violations: Sequence[Violation], path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(policy_json(violations))
    return path


def markdown(violations: Sequence[Violation]) -> str:
    """A section for a CI job summary."""
    if not violations:
        return f"### Policies\n\nAll {len(RULES)} rules pass."
    rows = ["| level | rule | where | resource | message | fix |", "|---|---|---|---|---|---|"]
    for v in sorted(violations, key=lambda v: not v.mandatory):
        cell = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        where = f"`{v.source}:{v.line}` `{v.key}`" if v.source and v.line else (f"`{v.key}`" if v.key else "")
        rows.append(f"| {v.enforcement} | `{v.rule}` | {cell(where)} | {cell(v.resource_name or 'stack')} | "
                    f"{cell(v.message)} | {cell(v.remediation)} |")
    return "### Policies\n\n" + "\n".join(rows)


def check(rendering: Any, out_dir: Path | str, stream: TextIO,
          config: Mapping[str, Any] | None = None, as_markdown: bool = False) -> bool:
    """Evaluate, print, write ``<out_dir>/policy.json``; True on a mandatory violation."""
    violations = evaluate(rendering, config)
    if as_markdown:
        print(markdown(violations), file=stream)
    else:
        print_violations(violations, stream)
    write_policy_json(violations, Path(out_dir) / POLICY_FILE)
    return any(v.mandatory for v in violations)
