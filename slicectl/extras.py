"""The ``train`` extra (pyproject.toml): what local runs need beyond the light default install.

preview, lint and cost need only the default dependencies; ``train --local``, ``drill --local``
(and its timeline picture) and reading job logs through ``--ray-address`` need Ray, MaxText/JAX
and matplotlib. Without them the command says which install brings them, in one line (exit 2).
"""

from __future__ import annotations

import importlib.util

from slicectl.exits import UsageError

INSTALL = "uv sync --extra train"
# Top-level modules of the train extra: ray[default,train], maxtext[tpu] (brings jax), matplotlib.
TRAIN = ("ray", "maxtext", "jax")
PICTURES = ("matplotlib",)


def missing(modules: tuple[str, ...]) -> list[str]:
    """The modules that cannot be imported here (found without importing them)."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install, or an import hook that refuses it
            found = False
        if not found:
            out.append(name)
    return out


def require(command: str, modules: tuple[str, ...] = TRAIN) -> None:
    """:class:`UsageError` (one line, exit 2) naming the install command when ``modules`` are missing."""
    if gone := missing(modules):
        raise UsageError(f"{command} needs the train extra ({', '.join(gone)} not installed): run `{INSTALL}`")
