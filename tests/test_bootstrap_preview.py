"""``slicectl bootstrap --preview``: the bootstrap program rendered offline (slicectl/bootstrap_preview.py), per stack.

Its rendering is held equal to the bootstrap tests' own (tests/test_bootstrap.py, whose mocks model GCP and GitHub),
and its per-stack lists to the access model (bootstrap/access.py) and the stack files: every CI account, the node
account, the Secrets key, the state key and the environments of each stack; a sandbox stack gets nothing (B2).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURE_STACKS, ROOT

from bootstrap import access
from slicectl import bootstrap_preview as bp
from slicectl import cli
from slicectl.exits import Exit
from stackspec import names
from stackspec import spec as stack_spec

SANDBOX = ROOT / "tests" / "fixtures" / "sandbox" / "Pulumi.sbx.yaml"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory):
    """The tests' CI stacks and the sandbox fixture, as a team's stacks/ would hold them."""
    d = tmp_path_factory.mktemp("stacks")
    for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"):
        shutil.copy(p, d / p.name)
    shutil.copy(SANDBOX, d / SANDBOX.name)
    return d


@pytest.fixture(scope="module")
def preview(stacks):
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = cli.main(["bootstrap", "--preview", "--config", str(bp.EXAMPLE), "--stacks-dir", str(stacks),
                         "--format", "json"])
    assert code == Exit.OK
    return json.loads(buf.getvalue())


def test_the_rendering_is_the_bootstrap_tests_own():
    from test_bootstrap import example_config, render

    mine = bp.render(bp.flat_config(bp.EXAMPLE))
    theirs = render(example_config())
    assert sorted((r.type, r.name, json.dumps(r.inputs, sort_keys=True)) for r in mine.resources) == \
        sorted((r.type, r.name, json.dumps(r.inputs, sort_keys=True)) for r in theirs.resources)


def test_each_stack_lists_its_identities_keys_and_environments(preview, stacks):
    config = bp.render(bp.flat_config(bp.EXAMPLE), stacks).config
    assert set(preview["stacks"]) == {s.name for s in config.stacks}
    for ident in access.identities(config):
        if ident.stack is None:
            continue
        listed = preview["stacks"][ident.stack]
        email = f"{ident.account_id}@{config.ci_project}.iam.gserviceaccount.com"
        (got,) = [i for i in listed["identities"] if i["email"] == email]
        assert got["roles"] and set(ident.environments) <= set(listed["environments"])
    for s in config.stacks:
        listed = preview["stacks"][s.name]
        spec = stack_spec.load_stack(s.name, stacks)
        node = names.node_service_account_email(s.cluster, s.project)
        assert any(i["email"] == node and any("defaultNodeServiceAccount" in r for r in i["roles"])
                   for i in listed["identities"]), s.name
        assert any(k.startswith(names.secrets_key_id(s.project, s.region, s.cluster)) for k in listed["keys"])
        assert any(k.startswith(config.stack_key_id(s.name)) for k in listed["keys"])
        assert set(listed["apis"]) == set(access.STACK_SERVICES) and spec.project == listed["project"]


def test_a_sandbox_stack_gets_nothing(preview):
    assert preview["sandbox"] == ["sbx"] and "sbx" not in preview["stacks"]
    assert "sbx-own-project" not in json.dumps(preview["stacks"])


def test_text_and_a_bad_config_are_answered(stacks, tmp_path, capsys):
    assert cli.main(["bootstrap", "--preview", "--config", str(bp.EXAMPLE), "--stacks-dir", str(stacks),
                     "--stack", "prod"]) == Exit.OK
    out = capsys.readouterr().out
    assert "stack prod (project" in out and "ci-deploy-prod@" in out and "GitHub environments:" in out
    bad = tmp_path / "Pulumi.bad.yaml"
    bad.write_text("config:\n  tpu-multislice-bootstrap:ciProject: X\n")
    assert cli.main(["bootstrap", "--preview", "--config", str(bad), "--stacks-dir", str(stacks)]) == Exit.USAGE
    assert "ciProject = 'X'" in capsys.readouterr().out
    assert cli.main(["bootstrap", "--preview", "--config", str(bp.EXAMPLE), "--stacks-dir", str(stacks),
                     "--stack", "sbx"]) == Exit.USAGE
    assert "sandbox stacks get nothing: sbx" in capsys.readouterr().err
