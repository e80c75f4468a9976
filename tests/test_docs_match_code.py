"""The pages name only what the code makes: every CI identity and GitHub environment a page names is one the
rendered bootstrap creates, every workflow file is in ``.github/workflows/``, every ``slicectl`` command and flag is
one the CLI parses.

The bootstrap is rendered under the tests' mocks (``tests/test_bootstrap.py``) over the tests' own stacks
(``tests/fixtures/stacks/``), so the names hold for any team's stacks: a page writes a per-stack name with ``<stack>``
(``ci-preview-<stack>``) or with one of those stacks (``ci-deploy-prod``).
"""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
WORKFLOWS = {p.name for p in (ROOT / ".github" / "workflows").glob("*.yml")}
# A workflow's jobs (a page names them: "drills.yml's drill-history job").
JOBS = {job for p in (ROOT / ".github" / "workflows").glob("*.yml")
        for job in (yaml.safe_load(p.read_text()) or {}).get("jobs", {})}
ACTION_FILE = "action.yml"  # a GitHub Action's own definition file (an upstream action's, as a page quotes it)

# A CI identity (service account ID) or a GitHub environment as a page writes it: the kinds the bootstrap makes.
IDENTITY = re.compile(r"(?<![\w>.-])ci-(?:preview|deploy|drill|image)(?:-(?:<stack>|[a-z0-9][a-z0-9-]*))?(?![\w.-])")
ENVIRONMENT = re.compile(r"(?:pr-preview|read|deploy|drill|image)(?:-(?:<stack>|[a-z0-9][a-z0-9-]*))?")
WORKFLOW = re.compile(r"(?<![\w/.-])([a-z][\w-]*\.yml)\b")
COMMAND = re.compile(r"(?<![\w/.-])slicectl\s+([^`\n|;&#]*)")


@pytest.fixture(scope="module")
def rendered() -> tuple[set[str], set[str], set[str]]:
    """The service account IDs and GitHub environments the bootstrap renders, and the stacks it serves: over the
    tests' stacks and over the repository's own (the generated pages, docs/threat-model.md and docs/ci-trust.md,
    name those)."""
    import test_bootstrap

    from bootstrap import config as bcfg

    accounts, environments, stacks = set(), set(), set()
    for where in (FIXTURE_STACKS, bcfg.STACKS_DIR):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bcfg, "STACKS_DIR", where)
            boot = test_bootstrap.render(test_bootstrap.example_config())
        accounts |= {r.inputs["accountId"] for r in boot.of("gcp:serviceaccount/account:Account")}
        environments |= {r.inputs["environment"]
                         for r in boot.of("github:index/repositoryEnvironment:RepositoryEnvironment")}
        stacks |= {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in where.glob("Pulumi.*.yaml")}
    return accounts, environments, stacks


def _made(token: str, names: set[str], stacks: set[str]) -> bool:
    """``token`` is a name the bootstrap renders for some stack: as rendered, with its stack written ``<stack>``,
    or for a stack that does not (yet) turn the feature on (``deploy-team-eu`` once team-eu deploys on push)."""
    if token in names:
        return True
    for s in (*stacks, "<stack>"):
        if token.endswith(f"-{s}"):
            kind = token.removesuffix(s)
            return any(n.startswith(kind) and n.removeprefix(kind) in stacks for n in names)
    return False


def _code_spans(text: str) -> list[str]:
    """Inline code spans and fenced blocks: where a page names a command, a flag, an identity or an environment."""
    fences = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M))
    return [*fences, *inline]


def _where(page: Path, text: str, token: str) -> str:
    bounded = re.compile(rf"(?<![\w<>.-]){re.escape(token)}(?![\w<>.-])")
    line = next((i for i, s in enumerate(text.splitlines(), 1) if bounded.search(s)), 0)
    return f"{page.relative_to(ROOT)}:{line}: {token}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_identity_and_environment_a_page_names_is_one_the_bootstrap_renders(page, rendered):
    accounts, environments, stacks = rendered
    text = page.read_text()
    wrong = [_where(page, text, t) for t in dict.fromkeys(IDENTITY.findall(text)) if not _made(t, accounts, stacks)]
    for span in _code_spans(text):
        for token in re.split(r"[\s,()]+", span.replace("&lt;", "<").replace("&gt;", ">")):
            if ENVIRONMENT.fullmatch(token) and not token.endswith("-") and "-" in token.replace("pr-preview", "pr"):
                if not _made(token, environments, stacks) and token not in JOBS:
                    wrong.append(_where(page, text, token))
            elif token == "pr-preview":  # the old shared environment: the bootstrap makes one per stack
                wrong.append(_where(page, text, token))
    assert not wrong, "names the rendered bootstrap does not make (per stack: write <stack>):\n" + "\n".join(wrong)


@functools.cache
def _yml_names() -> frozenset[str]:
    """The names of the repository's ``.yml`` files, walked once per test process (the walk, through the build
    directory and the virtualenv, took about half a second a page)."""
    return frozenset(p.name for p in ROOT.rglob("*.yml") if ".venv" not in p.parts and "node_modules" not in p.parts)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_workflow_a_page_names_exists(page):
    text = page.read_text()
    known = WORKFLOWS | _yml_names() | {ACTION_FILE}
    missing = [_where(page, text, w) for w in dict.fromkeys(WORKFLOW.findall(text)) if w not in known]
    assert not missing, "workflow files not in .github/workflows/:\n" + "\n".join(missing)


def _options(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = {name: {o for a in p._actions for o in a.option_strings} for name, p in sub.choices.items()}
    out[""] = {o for a in parser._actions for o in a.option_strings}
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_slicectl_command_and_flag_a_page_names_is_parsed(page):
    from slicectl import cli

    options = _options(cli.parser())
    text = page.read_text()
    wrong = []
    for span in _code_spans(text):
        for m in COMMAND.finditer(span):
            words = m.group(1).split()
            command = words[0] if words and not words[0].startswith("-") else ""
            if command and command not in options:
                if re.fullmatch(r"[a-z][a-z-]*", command):  # a command name, not prose after the word
                    wrong.append(_where(page, text, f"slicectl {command}"))
                continue
            for flag in (w.split("=", 1)[0] for w in words if w.startswith("--")):
                flag = flag.rstrip(".,:;)")
                if flag not in options[command] and flag not in options[""]:
                    wrong.append(_where(page, text, f"slicectl {command} {flag}".replace("  ", " ")))
    assert not wrong, "commands or flags the CLI does not parse:\n" + "\n".join(wrong)


def test_the_index_links_every_page_and_the_readme_the_first_ones():
    """docs/index.md is the site's table of contents (and a GitHub reader's); the README links the pages a new user
    needs first: the sandbox, their own trainer, quota, and slicectl (submit)."""
    index = (ROOT / "docs" / "index.md").read_text()
    linked = set(re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]*)?\)", index))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")} - {"index.md"}
    assert not pages - linked, f"docs/index.md does not link: {sorted(pages - linked)}"
    readme = (ROOT / "README.md").read_text()
    for page in ("docs/sandbox.md", "docs/trainers.md", "docs/quota.md", "docs/cli.md"):
        assert f"]({page}" in readme, page
    deploy = readme.split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    for item in ("Projects", "Billing", "TPU quota per type", "Roles", "CLI"):
        assert f"**{item}**" in deploy, item


def test_the_stack_spec_page_lists_every_key_of_a_stack_file():
    """docs/stack-spec.md's table of keys holds every top-level key the model reads (a key missing there is one a
    user cannot find)."""
    from stackspec.model import StackSpec

    text = (ROOT / "docs" / "stack-spec.md").read_text()
    table = text.split("## The stack spec\n", 1)[1].split("\nChecked before", 1)[0]
    rows = [row.split("|")[1] for row in table.splitlines() if row.startswith("| `")]
    listed = {k for row in rows for k in re.findall(r"`(\w+)`", row)}
    keys = {f.alias.split(":", 1)[1] for f in StackSpec.model_fields.values()
            if f.alias and f.alias.startswith("tpu-multislice:") and not f.exclude}
    assert not keys - listed, f"docs/stack-spec.md does not list: {sorted(keys - listed)}"
