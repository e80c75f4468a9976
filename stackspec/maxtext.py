"""What MaxText (the pinned release) accepts: its model names and its config keys.

MaxText refuses a key its ``base.yml`` does not declare (``pyconfig``: "'x' not in ...")
and a ``model_name`` without a ``configs/models/<name>.yml``, but only when the job starts
on the slices. The spec checks both up front from this table, generated from the installed
release (``data/maxtext.json``; ``tests/test_maxtext_facts.py`` keeps it in sync).
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("data") / "maxtext.json"
# MaxText's own model name for a custom shape given key by key (the local tiny model).
DEFAULT_MODEL = "default"


@cache
def facts() -> dict:
    return json.loads(DATA.read_text())


def version() -> str:
    return facts()["version"]


def models() -> frozenset[str]:
    return frozenset(facts()["models"]) | {DEFAULT_MODEL}


def keys() -> frozenset[str]:
    return frozenset(facts()["keys"])


def model_error(name: str) -> str | None:
    if name in models():
        return None
    close = difflib.get_close_matches(name, sorted(models()), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"MaxText {version()} has no model {name!r}{hint} (see maxtext/configs/models/)"


def key_error(key: str) -> str | None:
    if key in keys():
        return None
    close = difflib.get_close_matches(key, sorted(keys()), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"MaxText {version()} has no config key {key!r}{hint}; it would refuse the job when it starts"
