"""docs/architecture.md "Where each kind of rule lives" names the one place of each kind of rule: every path it names
exists, and every rule module (``stackspec/rules/*.py``, ``policies/rules/*.py``) is in it, so a module added, moved
or renamed without the table fails here, and a newcomer can read the places from the docs and trust them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
HEADING = "## Where each kind of rule lives"
RULE_PACKAGES = ("stackspec/rules", "policies/rules")


def section() -> str:
    text = PAGE.read_text()
    assert HEADING in text, f"docs/architecture.md has no section {HEADING!r}"
    return text.split(HEADING, 1)[1].split("\n## ", 1)[0]


def named_paths(text: str) -> set[str]:
    """The repository paths the section names (each in backticks, with a slash)."""
    return {p for p in re.findall(r"`([\w./-]+/[\w./-]*)`", text)}


def test_every_place_the_table_names_exists():
    missing = sorted(p for p in named_paths(section()) if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names places that are gone: {missing}"


def test_every_rule_module_is_in_the_table():
    named = named_paths(section())
    modules = {p.relative_to(ROOT).as_posix() for package in RULE_PACKAGES for p in (ROOT / package).glob("*.py")}
    unnamed = sorted(modules - named)
    assert not unnamed, f"rule modules docs/architecture.md does not place: {unnamed} (add each to its row)"


def test_the_check_reads_the_table():
    """Not vacuous: the section names the rule modules by the paths the tree holds."""
    named = named_paths(section())
    assert {"stackspec/rules/gke.py", "policies/registry.py", "bootstrap/escalation/"} <= named
    assert named_paths("`stackspec/rules/gone.py` and `x`") == {"stackspec/rules/gone.py"}
