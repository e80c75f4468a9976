"""What your own identity needs to ``pulumi up`` a sandbox (docs/sandbox.md), as ``slicectl bootstrap --preview``
lists it: for each Google Cloud resource type the sandbox declares, the role the bootstrap would give a CI deploy
identity for it (bootstrap/access.py MANAGED_BY; a custom role there is the predefined role it narrows, since a
sandbox has no bootstrap to make custom roles), and for what the bootstrap would have made (the node account and
its project role) the roles to create, grant and act as it. Checked against Google's published permissions of each
role (bootstrap/data/iam_roles.json, from IAM's roles.get), not against our own list.
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURE_STACKS, ROOT

from offline import engine
from slicectl import cli

SANDBOX = ROOT / "tests" / "fixtures" / "sandbox"
CATALOGUE = json.loads((ROOT / "bootstrap" / "data" / "iam_roles.json").read_text())["roles"]
# What Google checks for the steps a sandbox takes that a CI stack leaves to its bootstrap
# (https://cloud.google.com/iam/docs/permissions-reference): enable an API, create the node account, grant it its
# project role, run nodes as it (GKE checks actAs on a node pool's service account).
BOOTSTRAP_STEPS = ("serviceusage.services.enable", "iam.serviceAccounts.create", "iam.serviceAccounts.delete",
                   "resourcemanager.projects.setIamPolicy", "iam.serviceAccounts.actAs")


@pytest.fixture(scope="module")
def listed(tmp_path_factory) -> list[dict]:
    d = tmp_path_factory.mktemp("stacks")
    shutil.copy(SANDBOX / "Pulumi.sbx.yaml", d / "Pulumi.sbx.yaml")
    shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", d / "Pulumi.dev.yaml")  # the bootstrap serves a CI stack
    out = tmp_path_factory.mktemp("out") / "preview.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(["bootstrap", "--preview", "--stacks-dir", str(d), "--format", "json"]) == 0
    out.write_text(buf.getvalue())
    return json.loads(out.read_text())["sandboxRoles"]["sbx"]


def _permissions(roles) -> set[str]:
    return {p for r in roles for p in CATALOGUE[r]["permissions"]}


def test_every_resource_type_of_the_sandbox_has_a_role_that_can_manage_it(listed):
    from bootstrap.access import CUSTOM, CUSTOM_ROLES, MANAGED_BY

    types = {x.type for x in engine.render("sbx", stacks_dir=SANDBOX).resources
             if x.custom and x.type.startswith("gcp:")}
    covered = {t for r in listed for t in r["for"]}
    assert types <= covered, types - covered
    roles = [r["role"] for r in listed]
    assert all(r in CATALOGUE for r in roles), [r for r in roles if r not in CATALOGUE]
    assert not {"roles/owner", "roles/editor"} & set(roles)  # least privilege, not a basic role
    have = _permissions(roles)
    for t in types & set(MANAGED_BY):
        if MANAGED_BY[t].startswith(CUSTOM):  # what the bootstrap's custom role allows, the listed roles allow
            missing = set(CUSTOM_ROLES[MANAGED_BY[t].removeprefix(CUSTOM)].permissions) - have
            assert not missing, (t, missing)


def test_the_bootstraps_own_steps_are_covered(listed):
    missing = set(BOOTSTRAP_STEPS) - _permissions(r["role"] for r in listed)
    assert not missing, missing


def test_docs_sandbox_names_each_role(listed):
    page = (ROOT / "docs" / "sandbox.md").read_text()
    assert [r["role"] for r in listed if f"`{r['role']}`" not in page] == []
