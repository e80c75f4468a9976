"""The stacks in ``stacks/``, whatever it holds: each lints clean, previews with no policy refusing it, and prices.

This is the one suite that reads ``stacks/``. Its cases come from the files found there (parametrised by discovery),
so a team that adds its own stack gets these checks for it, and one that removes the examples runs none of them and
breaks nothing else: the code's own tests read their fixtures (``tests/fixtures/stacks/``). Each stack goes through
the deploy journey (``offline/journey.py``), and the commands a pull request's CI runs (``slicectl lint``,
``preview``, ``cost``), in this process (``slicectl.cli.main``), against their documented contracts: the exit codes
of ``slicectl/exits.py``, the policy report and ``cost.json``'s published schema (``tests/reference/``).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import EXAMPLE_STACKS, REFERENCE

from offline import journey
from slicectl import cli
from slicectl.exits import Exit

EXAMPLES = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in EXAMPLE_STACKS.glob("Pulumi.*.yaml"))
IN_EXAMPLES = ["--stacks-dir", str(EXAMPLE_STACKS)]


def _sandbox(stack: str) -> bool:
    """A sandbox stack (docs/sandbox.md): deployed by hand with any secrets provider, in no workflow list."""
    doc = yaml.safe_load((EXAMPLE_STACKS / f"Pulumi.{stack}.yaml").read_text()) or {}
    return (doc.get("config") or {}).get("tpu-multislice:sandbox") is True


SANDBOXES = [s for s in EXAMPLES if _sandbox(s)]
CI_STACKS = [s for s in EXAMPLES if s not in SANDBOXES]
COST_SCHEMA = REFERENCE / "cost.schema.json"


@pytest.fixture(scope="module")
def previewed(tmp_path_factory) -> dict[str, tuple[int, Path, str]]:
    """Each stack's preview, once per module: (exit code, its output directory, what it printed)."""
    return {}


def preview(previewed, tmp_path_factory, stack: str, capsys) -> tuple[int, Path, str]:
    if stack not in previewed:
        out = tmp_path_factory.mktemp(f"preview-{stack}")
        capsys.readouterr()
        code = cli.main(["preview", "--stack", stack, *IN_EXAMPLES, "--out", str(out)])
        previewed[stack] = (code, out, capsys.readouterr().out)
    return previewed[stack]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_it_lints_clean(stack, capsys):
    assert cli.main(["lint", "--stack", stack, *IN_EXAMPLES]) == Exit.OK, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines() == [f"{stack}: ok"]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_it_deploys_through_ci_on_day_0_and_plans_nothing_on_day_1(stack):
    """`preview --save-plan` then `up --plan` by Pulumi's rules (offline/journey.py, tests/test_journey.py): the
    first deploy applies the plan the reviewer approved, and the next one plans no step."""
    from test_journey import check_day0

    check_day0(journey.render(stack, stacks_dir=EXAMPLE_STACKS))


@pytest.mark.parametrize("stack", EXAMPLES)
def test_it_previews_and_no_mandatory_policy_refuses_it(stack, previewed, tmp_path_factory, capsys):
    code, out, printed = preview(previewed, tmp_path_factory, stack, capsys)
    report = json.loads((out / "policy.json").read_text())
    assert code == Exit.OK and report["passed"] and report["mandatory"] == 0, (code, report["violations"],
                                                                               printed[-2000:])
    assert (out / "resources.json").is_file() and any((out / "manifests").rglob("*.yaml"))
    # libyaml's safe loader (the same YAML 1.1 safe schema as yaml.safe_load_all): the pure-Python parser took
    # about 14 s of CPU for multi's 341 files; the check reads every document of every file, as before.
    for manifest in (out / "manifests").rglob("*.yaml"):
        for doc in yaml.load_all(manifest.read_text(), Loader=yaml.CSafeLoader):  # noqa: S506
            assert doc is None or {"apiVersion", "kind", "metadata"} <= set(doc), manifest


@pytest.mark.parametrize("stack", EXAMPLES)
def test_its_cost_document_keeps_the_published_schema(stack, previewed, tmp_path_factory, capsys):
    _, out, _ = preview(previewed, tmp_path_factory, stack, capsys)
    schema = json.loads(COST_SCHEMA.read_text())
    written = json.loads((out / "cost.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(schema).iter_errors(written)]
    assert not errors and written["stack"] == stack, errors
    assert cli.main(["cost", "--stack", stack, *IN_EXAMPLES, "--format", "json"]) == Exit.OK
    assert json.loads(capsys.readouterr().out)["stack"] == stack


@pytest.mark.parametrize("stack", CI_STACKS)
def test_it_keeps_its_secrets_in_a_key_not_a_passphrase(stack):
    doc = yaml.safe_load((EXAMPLE_STACKS / f"Pulumi.{stack}.yaml").read_text())
    assert "encryptionsalt" not in doc and str(doc.get("secretsprovider", "")).startswith("gcpkms://"), stack


def test_every_stack_reaches_the_workflows_lists(capsys):
    """``slicectl stacks`` (the workflows' first job) lists exactly the stack files found: the CI stacks in ``all``,
    the sandbox stacks apart (no workflow acts on them)."""
    assert cli.main(["stacks", *IN_EXAMPLES, "--format", "json"]) == Exit.OK
    listed = json.loads(capsys.readouterr().out)
    assert listed["all"] == CI_STACKS and listed["sandbox"] == SANDBOXES
