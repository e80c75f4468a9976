"""Reading a stack file: YAML with every node's line, duplicate keys refused.

PyYAML keeps the last of two equal keys without a word; a stack file that sets
``topology`` twice would deploy the second silently. Here the document is composed
node by node, so each key path knows its line and a repeated key is a problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import MISSING, Problem

Path_ = tuple[str | int, ...]
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class StackDocument:
    """A stack file as data, plus the line of every key path (``("config", key, ...)``)."""

    data: dict[str, Any]
    source: str = ""  # the file's path as messages show it
    lines: dict[Path_, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def line(self, path: Path_) -> int | None:
        """The line of ``path`` or of its nearest ancestor present in the file."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None


def _construct(node: yaml.Node, path: Path_, doc: StackDocument) -> Any:
    doc.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _construct(key_node, (*path, "<key>"), doc)
            if isinstance(key, list | dict):
                doc.problems.append(Problem(_render_path(path) or "(top level)", key, "a key must be a scalar",
                                            key_node.start_mark.line + 1))
                continue
            if key in out:
                first = doc.lines.get((*path, key))
                doc.problems.append(Problem(_render_path((*path, key)), _plain(value_node),
                                            f"duplicate key (first set on line {first}); YAML would keep only "
                                            "the last: remove one", key_node.start_mark.line + 1))
                continue
            doc.lines[(*path, key)] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, (*path, key), doc)
        doc.lines.pop((*path, "<key>"), None)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, (*path, i), doc) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    # SafeConstructor: the same tags and types yaml.safe_load gives.
    return yaml.constructor.SafeConstructor().construct_object(node, deep=True)


def _plain(node: yaml.Node) -> Any:
    try:
        return _scalar(node)
    except yaml.YAMLError:
        return None


def _render_path(path: Path_) -> str:
    """``("config", "tpu-multislice:slices", 0, "topology")`` -> ``tpu-multislice:slices[0].topology``."""
    parts = list(path[1:] if path and path[0] == "config" else path)
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse(text: str, source: str) -> StackDocument:
    """The stack file's data and lines; YAML errors and duplicate keys land in ``problems``."""
    doc = StackDocument({}, source)
    try:
        node = yaml.compose(text, Loader=_Loader)  # noqa: S506 (compose builds nodes only)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        doc.problems.append(Problem("(yaml)", MISSING, f"not valid YAML: {e.problem or e}", line, column))
        return doc
    except yaml.YAMLError as e:
        doc.problems.append(Problem("(yaml)", MISSING, f"not valid YAML: {e}"))
        return doc
    if node is None:
        doc.problems.append(Problem("config", MISSING, "the stack file is empty; it needs a config: block "
                                    "(`slicectl new` writes one; docs/stack-spec.md lists its keys)", 1))
        return doc
    data = _construct(node, (), doc)
    if not isinstance(data, Mapping):
        doc.problems.append(Problem("(top level)", data, "a stack file is a mapping with a config: block", 1))
        return doc
    doc.data = dict(data)
    return doc


def read(path: Path, shown: str | None = None) -> StackDocument:
    """Parse the stack file at ``path``; OSError (missing, unreadable) propagates to the caller."""
    return parse(path.read_text(), shown or str(path))
