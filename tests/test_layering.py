"""The floors of docs/architecture.md, kept true: each room imports only rooms on lower floors (stackspec imports
nothing of the project; infra, workloads and policies only stackspec), and no two rooms import each other, directly
or through others (no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Room -> floor, as docs/architecture.md draws them.
FLOORS = {
    "stackspec": 1,
    "infra": 2, "workloads": 2, "policies": 2,
    "offline": 3, "drills": 3, "__main__": 3, "bootstrap": 3,
    "slicectl": 4, "benchmarks": 4,
}
# Rooms of one floor that may import each other's modules: none.
ALLOWED_SIDEWAYS: set[tuple[str, str]] = set()


def _room_files(room: str) -> list[Path]:
    p = ROOT / f"{room}.py" if room == "__main__" else ROOT / room
    return [p] if p.is_file() else sorted(x for x in p.rglob("*.py") if "venv" not in x.parts)


def imports() -> dict[str, set[str]]:
    """Room -> the other rooms its modules import (at any depth: deferred imports count)."""
    out: dict[str, set[str]] = {}
    for room in FLOORS:
        found: set[str] = set()
        for path in _room_files(room):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
                found |= {n.split(".")[0] for n in names if n.split(".")[0] in FLOORS}
        out[room] = found - {room}
    return out


def test_no_room_imports_a_room_above_or_beside_it():
    wrong = [f"{a} (floor {FLOORS[a]}) imports {b} (floor {FLOORS[b]})" for a, bs in imports().items() for b in bs
             if FLOORS[b] > FLOORS[a] or (FLOORS[b] == FLOORS[a] and (a, b) not in ALLOWED_SIDEWAYS)]
    assert not wrong, wrong


def test_stackspec_imports_nothing_of_the_project_and_the_second_floor_only_stackspec():
    got = imports()
    assert got["stackspec"] == set()
    for room in ("infra", "workloads", "policies"):
        assert got[room] <= {"stackspec"}, (room, got[room])


def test_no_import_cycle_between_rooms():
    graph = imports()
    seen: dict[str, int] = {}

    def visit(room: str, path: list[str]) -> None:
        seen[room] = 1
        for nxt in graph[room]:
            assert seen.get(nxt) != 1, f"import cycle: {' -> '.join([*path, nxt])}"
            if nxt not in seen:
                visit(nxt, [*path, nxt])
        seen[room] = 2

    for room in graph:
        if room not in seen:
            visit(room, [room])


def test_stackspec_modules_import_downward_too():
    """Inside stackspec: the model never imports the rules or the resolve step (they read the model); the loader
    ties them together."""
    above = {"stackspec.rules", "stackspec.defaults", "stackspec.loader", "stackspec.spec"}
    for path in sorted((ROOT / "stackspec" / "model").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                target = "stackspec." + (node.module or "") if node.level == 2 else "stackspec.model"
                assert not any(target == a or target.startswith(a + ".") for a in above), (path.name, target)
                if node.level == 2 and node.module is None:
                    assert not {a.name for a in node.names} & {"rules", "defaults", "loader", "spec"}, path.name
