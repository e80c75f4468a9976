"""The README and the documentation site (``mkdocs.yml``, ``docs/``) speak of the repository as it is.

The README is the short front page; the site holds the rest and builds with ``mkdocs build --strict`` (every
link and anchor resolves). Each page names only paths the repository has and nothing outside it; the tutorial
the example ``prod`` stack reproduces is named, once, by its title. Tests elsewhere hold a documented table or
diagram to the code by its section heading (``conftest.documentation``), wherever that section lives. Nothing
here counts tests, rules or resources: adding one needs no documentation edit.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import DOCS, FIXTURE_STACKS, ROOT, documentation

README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
# The title the documentation gives the tutorial the prod example reproduces (docs/index.md defines "the tutorial").
TUTORIAL = "Multislice and elastic training on TPUs using Ray Train"


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
    """GitHub's anchor for a heading (and the site's: mkdocs.yml's toc slugify is pymdownx's GitHub-like one):
    lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``, ``-1``, ``-2``... after equal ones."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    slug = text.replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    return {anchor(m.group(2), seen) for _, line in _outside_fences(path.read_text().splitlines())
            if (m := re.match(r"^(#{1,6}) (.+)$", line))}


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"the README has {len(lines)} lines: move a section to a page under docs/"


def test_the_readmes_links_reach_a_page_and_a_heading():
    broken = []
    for n, line in _outside_fences(README.read_text().splitlines()):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"https?://", target):
                continue
            path, _, fragment = target.partition("#")
            page = ROOT / path if path else README
            if not page.is_file() or (fragment and fragment not in anchors(page)):
                broken.append((n, target))
    assert not broken, f"README links that reach no page or heading (line, link): {broken}"


def _tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    files = set(out.stdout.split()) if out.returncode == 0 else set()
    if not files:  # not a git checkout: what is on disk
        files = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts}
    return files


def _an_example_as_shipped(path: str) -> bool:
    """``stacks/Pulumi.<name>.yaml`` of an example a team has removed: the pages describe the examples as they
    shipped, which the tests keep as fixtures (``tests/fixtures/stacks/``)."""
    return path.startswith("stacks/Pulumi.") and (FIXTURE_STACKS / path.removeprefix("stacks/")).is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_page_names_is_in_the_repository(page):
    """A path in backticks whose first part is one of the repository's own top-level entries must exist
    (a file, or a directory with tracked files); placeholders (``<stack>``), globs and generated
    output (``build/``, ``site/``) are skipped, and so is an example stack a fork removed. Nothing outside the
    repository is named at all."""
    tracked = _tracked() | {str(page.relative_to(ROOT))}
    dirs = {str(Path(f).parents[i]) for f in tracked for i in range(len(Path(f).parents) - 1)}
    top = {f.split("/", 1)[0] for f in tracked} - {"build", "site"}
    missing, outside = [], []
    for n, line in enumerate(page.read_text().splitlines(), start=1):
        if re.search(r"\.\./|/work/|/tmp/shared|farm-studio|\bshared/", line):
            outside.append((n, line.strip()[:100]))
        for token in re.findall(r"`([^`\s]+)`", line):
            path = token.rstrip("/").split(":", 1)[0]
            if path.split("/", 1)[0] not in top or re.search(r"[<>{}*$]", path):
                continue
            if path not in tracked and path not in dirs and not _an_example_as_shipped(path):
                missing.append((n, token))
    assert not outside, f"{page.name} names something outside the repository (line, text): {outside}"
    assert not missing, f"{page.name} names paths the repository does not have (line, path): {missing}"


def test_the_tutorial_is_defined_once_and_seed_is_not_a_term():
    """"The seed" was used without being defined; the documentation says "the tutorial", defined on the site's
    front page by its title (the README names the title too)."""
    used = [(p.name, n) for p in PAGES for n, line in _outside_fences(p.read_text().splitlines())
            if re.search(r"\bseed\b", line, re.I)]
    assert not used, f"'seed' as a term (page, line): {used}"
    defined = [p.name for p in PAGES if re.search(rf"\*\*The tutorial\.\*\* GKE's tutorial \*{TUTORIAL}\*",
                                                  p.read_text())]
    assert defined == ["index.md"]
    assert f"*{TUTORIAL}*" in README.read_text()


def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: every page in the nav exists, every link and anchor between pages resolves."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    config = load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    build(config)
    assert (tmp_path / "site" / "index.html").is_file()
    nav_pages = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)
    assert nav_pages and all((DOCS / p).is_file() for p in nav_pages)


def test_the_deployment_diagram_shows_every_workflow_identity_and_environment():
    """The one deployment diagram (a Mermaid flowchart under "The real deployment path") names every workflow
    file, every kind of CI identity and every kind of environment the bootstrap makes."""
    from stackspec import names

    section = documentation().split("## The real deployment path", 1)[1].split("\n## ", 1)[0]
    assert "```mermaid" in section, "the deployment diagram is missing"
    diagram = section.split("```mermaid", 1)[1].split("```", 1)[0].replace("&lt;", "<").replace("&gt;", ">")
    workflows = sorted(p.name for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    identities = [names.CI_ACCOUNTS[k] for k in ("preview", "drill", "image")] + [names.deploy_account_id("<stack>")]
    environments = ["pr-preview", names.deploy_environment("<stack>"), names.drill_environment("<stack>")]
    missing = [x for x in workflows + identities + environments if x not in diagram]
    assert not missing, f"the deployment diagram does not show: {missing}"


REGIONS_BEGIN, REGIONS_END = "<!-- regions: slicectl preview --stack multi --format markdown -->", "<!-- /regions -->"


def test_the_regions_diagram_is_what_the_preview_renders_for_multi(multi):
    """The regions picture (under "Regions") is the preview's "Regions and dispatch order" section of the
    two-region ``multi`` stack (the tests' copy) as ``slicectl preview --format markdown`` renders it today: its
    Mermaid diagram and the dispatch order with each region's reason."""
    from slicectl import cmd_preview

    section = documentation().split("## Regions: a manager and regional TPU clusters", 1)[1].split("\n## ", 1)[0]
    assert REGIONS_BEGIN in section and REGIONS_END in section, \
        f"the Regions section needs the diagram between {REGIONS_BEGIN} and {REGIONS_END}"
    written = section.split(REGIONS_BEGIN, 1)[1].split(REGIONS_END, 1)[0].strip()
    rendered = cmd_preview.markdown(multi)
    heading = "### Regions and dispatch order\n"
    assert heading in rendered, "the preview no longer renders the regions section: update this test"
    expected = rendered.split(heading, 1)[1].split("\n### ", 1)[0].strip()
    assert "```mermaid" in expected
    assert written == expected, f"the regions diagram is stale; write between the markers:\n{expected}"


# Pages about the sandbox road: a sandbox stack has no CI and no bootstrap, its operator runs `up` (ci-trust.md).
SANDBOX_ROAD = {"sandbox.md", "teardown.md"}


def test_no_page_tells_anyone_but_ci_to_run_up_on_a_stack():
    """ci-trust.md's operator rule: `pulumi up` on a stack the bootstrap serves runs in CI only (deploy.yml's `up`,
    behind the stack's reviewer), day 0 included. A page that tells an administrator to run it by hand, with their
    own credentials, contradicts it (and leaves a state whose providers ran as a project owner)."""
    bad = []
    for page in PAGES:
        if page.name in SANDBOX_ROAD:
            continue
        for n, line in enumerate(page.read_text().splitlines(), 1):
            # A line about the sandbox road (the README's Deploy table) names its own `up`.
            if re.search(r"pulumi up (--stack|-s)\b", line) and "deploy.yml" not in line and \
                    "sandbox" not in line.lower():
                bad.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()}")
    assert bad == []
