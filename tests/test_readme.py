"""The README speaks of the repository as it is: its contents table, its counts, the paths it names.

Each figure the README states that the code can count is counted here (resources, manifests and policy
rules of prod's preview, the policy pack's rules, the cloud rules, the tests); measured figures (seconds,
megabytes) are stated with how they were measured and are not checked. A failing check prints the line
to write.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

README = ROOT / "README.md"
TOC_BEGIN, TOC_END = "<!-- contents -->", "<!-- /contents -->"


def _lines() -> list[str]:
    return README.read_text().splitlines()


def _outside_fences(lines: list[str]) -> list[tuple[int, str]]:
    """(line number, line) for the lines outside fenced code blocks."""
    out, fenced = [], False
    for n, line in enumerate(lines, start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, line))
    return out


def anchor(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``,
    and ``-1``, ``-2``... after the first of equal ones."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    slug = text.replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def contents() -> list[str]:
    """The contents table the README's headings make: every ``##`` and ``###`` below the title."""
    seen: dict[str, int] = {}
    out = []
    for _, line in _outside_fences(_lines()):
        m = re.match(r"^(#{2,3}) (.+)$", line)
        if m:
            level, title = len(m.group(1)), m.group(2).strip()
            out.append(f"{'  ' * (level - 2)}- [{title}](#{anchor(title, seen)})")
    return out


def test_the_contents_table_lists_every_heading():
    text = README.read_text()
    assert TOC_BEGIN in text and TOC_END in text, f"the README needs a contents table between {TOC_BEGIN} and {TOC_END}"
    written = text.split(TOC_BEGIN, 1)[1].split(TOC_END, 1)[0].strip().splitlines()
    expected = contents()
    assert written == expected, "the README's contents table is stale; write:\n" + "\n".join(expected)


def test_every_link_to_a_heading_reaches_one():
    seen: dict[str, int] = {}
    anchors = {anchor(m.group(2), seen) for _, line in _outside_fences(_lines())
               if (m := re.match(r"^(#{1,6}) (.+)$", line))}
    broken = [(n, a) for n, line in _outside_fences(_lines()) for a in re.findall(r"\]\(#([^)]+)\)", line)
              if a not in anchors]
    assert not broken, f"links to no heading (line, anchor): {broken}"


def _tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    files = set(out.stdout.split()) if out.returncode == 0 else set()
    if not files:  # not a git checkout: what is on disk
        files = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts}
    return files


def test_every_path_the_readme_names_is_in_the_repository():
    """A path in backticks whose first part is one of the repository's own top-level entries must exist
    (a file, or a directory with tracked files); placeholders (``<stack>``), globs and generated
    output (``build/``) are skipped. Nothing outside the repository is named at all."""
    tracked = _tracked()
    dirs = {str(Path(f).parents[i]) for f in tracked for i in range(len(Path(f).parents) - 1)}
    top = {f.split("/", 1)[0] for f in tracked} - {"build"}
    missing, outside = [], []
    for n, line in enumerate(_lines(), start=1):
        if re.search(r"\.\./|/work/|/tmp/shared|farm-studio", line):
            outside.append((n, line.strip()[:100]))
        for token in re.findall(r"`([^`\s]+)`", line):
            path = token.rstrip("/").split(":", 1)[0]
            if path.split("/", 1)[0] not in top or re.search(r"[<>{}*$]", path):
                continue
            if path not in tracked and path not in dirs:
                missing.append((n, token))
    assert not outside, f"the README names something outside the repository (line, text): {outside}"
    assert not missing, f"the README names paths the repository does not have (line, path): {missing}"


def _readme_figure(pattern: str) -> tuple[int, ...]:
    m = re.search(pattern, README.read_text())
    assert m, f"the README no longer states /{pattern}/: update this test with it"
    return tuple(int(g.replace(",", "")) for g in m.groups())


def test_the_preview_figures_are_prods(prod):
    from policies import registry

    resources = sum(1 for r in prod.resources if r.custom)
    stated = _readme_figure(r"process \(([\d,]+) resources, ([\d,]+) manifests, ([\d,]+) rules\)")
    actual = (resources, len(prod.manifests), len(registry.RULES))
    assert stated == actual, f"write: process ({actual[0]} resources, {actual[1]} manifests, {actual[2]} rules)"


def test_the_rule_counts_are_the_modules():
    from policies import registry
    from stackspec import cloud_rules

    (pack,) = _readme_figure(r"([\d,]+) rules in `policies/registry.py`")
    assert pack == len(registry.RULES), f"write: {len(registry.RULES)} rules in `policies/registry.py`"
    (cloud,) = _readme_figure(r"([\d,]+) rules in `stackspec/cloud_rules.py`")
    assert cloud == len(cloud_rules.RULES), f"write: {len(cloud_rules.RULES)} rules in `stackspec/cloud_rules.py`"


def test_the_test_counts_are_what_pytest_collects(collected):
    files, total, slow = collected
    every = {str(p) for p in (ROOT / "tests").glob("test_*.py")}
    if not every <= set(files):
        pytest.skip("only part of the suite was collected; the README counts the whole of it")
    stated = _readme_figure(r"runs everything: ([\d,]+) tests, ([\d,]+) of them `slow`")
    assert stated == (total, slow), f"write: runs everything: {total:,} tests, {slow} of them `slow`"


def test_the_deployment_diagram_shows_every_workflow_identity_and_environment():
    """The one deployment diagram (a Mermaid flowchart under "The real deployment path") names every workflow
    file, every kind of CI identity and every kind of environment the bootstrap makes."""
    from stackspec import names

    section = README.read_text().split("## The real deployment path", 1)[1].split("\n## ", 1)[0]
    assert "```mermaid" in section, "the deployment diagram is missing"
    diagram = section.split("```mermaid", 1)[1].split("```", 1)[0].replace("&lt;", "<").replace("&gt;", ">")
    workflows = sorted(p.name for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    identities = [names.CI_ACCOUNTS[k] for k in ("preview", "drill", "image")] + [names.deploy_account_id("<stack>")]
    environments = ["pr-preview", names.deploy_environment("<stack>"), names.drill_environment("<stack>")]
    missing = [x for x in workflows + identities + environments if x not in diagram]
    assert not missing, f"the deployment diagram does not show: {missing}"


REGIONS_BEGIN, REGIONS_END = "<!-- regions: slicectl preview --stack multi --format markdown -->", "<!-- /regions -->"


def test_the_regions_diagram_is_what_the_preview_renders_for_multi():
    """The README's regions picture (under "Regions") is the preview's "Regions and dispatch order" section of
    ``stacks/Pulumi.multi.yaml`` as ``slicectl preview --format markdown`` renders it today: its Mermaid diagram
    and the dispatch order with each region's reason."""
    from offline import engine
    from slicectl import cmd_preview

    text = README.read_text()
    section = text.split("## Regions: a manager and regional TPU clusters", 1)[1].split("\n## ", 1)[0]
    assert REGIONS_BEGIN in section and REGIONS_END in section, \
        f"the Regions section needs the diagram between {REGIONS_BEGIN} and {REGIONS_END}"
    written = section.split(REGIONS_BEGIN, 1)[1].split(REGIONS_END, 1)[0].strip()
    rendered = cmd_preview.markdown(engine.render("multi"))
    heading = "### Regions and dispatch order\n"
    assert heading in rendered, "the preview no longer renders the regions section: update this test"
    expected = rendered.split(heading, 1)[1].split("\n### ", 1)[0].strip()
    assert "```mermaid" in expected
    assert written == expected, f"the README's regions diagram is stale; write between the markers:\n{expected}"
