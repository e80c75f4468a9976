"""What a MaxText checkpoints directory holds: committed steps, saves in flight, and committed steps without Orbax's
metadata. Read by every local drill's verdict (drills/local.py, drills/regions.py)."""

from __future__ import annotations

from pathlib import Path

# Orbax writes ``<step>.orbax-checkpoint-tmp-<n>`` and renames it to ``<step>`` when
# every host has finished: a bare number is committed, anything else is in flight.
TMP_MARK = ".orbax-checkpoint-tmp"
# Orbax's per-checkpoint metadata file: a committed step without it is corrupt.
CHECKPOINT_METADATA = "_CHECKPOINT_METADATA"


def checkpoint_dirs(path: Path) -> tuple[list[int], list[str]]:
    """(committed steps, names of saves in flight) under a MaxText checkpoints directory."""
    if not path.is_dir():
        return [], []
    committed, in_flight = [], []
    for p in path.iterdir():
        if p.name.isdigit() and p.is_dir():
            committed.append(int(p.name))
        elif TMP_MARK in p.name:
            in_flight.append(p.name)
    return sorted(committed), sorted(in_flight)


def corrupt_checkpoints(path: Path) -> list[int]:
    """Committed steps missing Orbax's metadata (a rename that should never have happened)."""
    committed, _ = checkpoint_dirs(path)
    return [s for s in committed if not (path / str(s) / CHECKPOINT_METADATA).exists()]
