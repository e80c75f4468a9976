"""``offline/data/provider_schema.json``: the ForceNew and Computed attributes ``slicectl lifecycle`` reads, written by
``offline/tools/gen_forcenew.py`` from terraform-provider-google's Go source at a pinned commit.

The file is checked against its own digest and the pulumi-gcp the lock installs; the reader is checked on Go
literals written as the provider writes them (terraform-plugin-sdk v2's schema idioms); the file is regenerated
from the provider's files vendored at that commit (``vendor/terraform-provider-google``, each checked against
the sha256 the file records) and compared. Against a clone of the provider, the maintainers' check is
``gen_forcenew.py --git-dir <clone> --check``.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "offline" / "data" / "provider_schema.json"
VENDORED = ROOT / "vendor" / "terraform-provider-google"
sys.path.insert(0, str(ROOT / "offline" / "tools"))
import gen_forcenew  # noqa: E402
from conftest import FIXTURE_STACKS  # noqa: E402


def test_the_vendored_schema_is_whole_and_for_the_locked_pulumi_gcp():
    from offline import engine

    data = json.loads(SCHEMA.read_text())
    body = {"resources": data["resources"], "unresolved": data["unresolved"]}
    assert hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() == data["sha256"]
    assert re.fullmatch(r"[0-9a-f]{40}", data["commit"]) and data["unresolved"] == []
    (locked,) = re.findall(r'name = "pulumi-gcp"\nversion = "([^"]+)"', (ROOT / "uv.lock").read_text())
    assert data["pulumiGcp"] == locked, "pulumi-gcp moved: regenerate offline/data/provider_schema.json"
    # Every GCP resource type a shipped stack renders has its table.
    stacks = [p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in FIXTURE_STACKS.glob("Pulumi.*.yaml")]
    rendered = {r.type for s in stacks for r in engine.render(s).resources if r.custom and r.type.startswith("gcp:")}
    assert rendered <= set(data["resources"]), sorted(rendered - set(data["resources"]))


GO = '''
package container

var schemaShared = map[string]*schema.Schema{
	"cluster": {
		Type:     schema.TypeString,
		Required: true,
		ForceNew: true,
	},
}

func ResourceThing() *schema.Resource {
	return &schema.Resource{
		CustomizeDiff: customdiff.All(
			customdiff.ForceNewIfChange("size_gb", isShrinking),
		),
		Schema: tpgresource.MergeSchemas(
			schemaShared,
			map[string]*schema.Schema{
				"node_config": schemaNodeConfig(),
				"size_gb": {Type: schema.TypeInt, Optional: true, Computed: true},
				"networks": {
					Type:     schema.TypeList,
					Optional: true,
					ForceNew: true, // blocks: replaced when one is added or removed
					Elem: &schema.Resource{Schema: map[string]*schema.Schema{
						"subnetwork": {Type: schema.TypeString, Required: true, ForceNew: true},
						"note": {Type: schema.TypeString, Optional: true, Description: "a { brace, in \\"text\\""},
					}},
				},
			}),
	}
}

func schemaNodeConfig() *schema.Schema {
	return &schema.Schema{
		Type:     schema.TypeList,
		Optional: true,
		Computed: true,
		ForceNew: true,
		MaxItems: 1,
		Elem: &schema.Resource{
			Schema: map[string]*schema.Schema{
				"max_run_duration": {Type: schema.TypeString, Optional: true, ForceNew: true},
				"labels": {Type: schema.TypeMap, Optional: true, Elem: &schema.Schema{Type: schema.TypeString}},
				"oauth_scopes": {
					Type:     schema.TypeSet,
					Optional: true,
					Computed: true,
					ForceNew: true,
					Elem:     &schema.Schema{Type: schema.TypeString},
				},
			},
		},
	}
}
'''


@pytest.mark.parametrize("source", ["git", "vendored"])
def test_the_reader_reads_the_providers_schema_idioms(tmp_path, source):
    """A function-valued field, a package variable merged with MergeSchemas, a block list, a set of strings, a
    brace inside a string, a CustomizeDiff ForceNew: read as terraform-plugin-sdk v2 means them, from a clone or
    from the files vendored from it (``--vendor-to``, then ``--source-dir``)."""
    repo = tmp_path / "repo"
    (repo / "google/services/container").mkdir(parents=True)
    (repo / "google/services/container/resource_thing.go").write_text(GO)
    (repo / "google/services/container/resource_other.go").write_text("package container\n")
    (repo / "LICENSE").write_text("Mozilla Public License Version 2.0\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "schema"], check=True)
    saved = gen_forcenew.RESOURCES
    gen_forcenew.RESOURCES = {"test:index:Thing": ("google_thing", [
        ("google/services/container/resource_thing.go", "ResourceThing")])}
    try:
        data = gen_forcenew.generate(str(repo / ".git"), "HEAD")
        if source == "vendored":
            tree = tmp_path / "vendored"
            gen_forcenew.vendor(str(repo / ".git"), data, tree)
            assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == [
                "LICENSE", "VENDORED.md", "google/services/container/resource_thing.go"]  # only the file read
            again = gen_forcenew.generate(source_dir=tree)
            assert again == data
            data = again
    finally:
        gen_forcenew.RESOURCES = saved
    thing = data["resources"]["test:index:Thing"]
    assert {(f["path"], f["on"]) for f in thing["forceNew"]} == {
        ("cluster", "value"), ("networks", "count"), ("networks.subnetwork", "value"), ("nodeConfig", "count"),
        ("nodeConfig.maxRunDuration", "value"), ("nodeConfig.oauthScopes", "value")}
    assert {f["path"] for f in thing["computed"]} == {"sizeGb", "nodeConfig", "nodeConfig.oauthScopes"}
    assert [(c["terraform"], c["how"]) for c in thing["conditional"]] == [("size_gb", "ForceNewIfChange")]
    assert data["unresolved"] == []
    line = next(f["line"] for f in thing["forceNew"] if f["path"] == "nodeConfig.maxRunDuration")
    want = GO[:GO.index('"max_run_duration"')].count("\n") + 1
    assert line == f"google/services/container/resource_thing.go:{want}"


GO_VAR_GROUP = '''
package container

var (
	urlPattern = regexp.MustCompile(fmt.Sprintf("projects/(%s)/zones", verify.ProjectRegex))

	authorizedNetworks = &schema.Resource{
		Schema: map[string]*schema.Schema{
			"cidr_blocks": {Type: schema.TypeSet, Optional: true, Elem: cidrBlock},
			"public_access": {Type: schema.TypeBool, Optional: true, Computed: true},
		},
	}
	cidrBlock = &schema.Resource{
		Schema: map[string]*schema.Schema{
			"cidr_block": {Type: schema.TypeString, Required: true, ForceNew: true},
		},
	}

	keys = []string{"a.0.b", "a.0.c"}
)

func ResourceThing() *schema.Resource {
	return &schema.Resource{
		Schema: map[string]*schema.Schema{
			"authorized": {
				Type: schema.TypeList, Optional: true, Computed: true, MaxItems: 1, Elem: authorizedNetworks,
			},
			"elsewhere": {Type: schema.TypeList, Optional: true, Elem: notDefinedAnywhere},
		},
	}
}
'''


def test_a_var_group_member_is_followed_and_an_unknown_elem_is_listed(tmp_path):
    """A field whose ``Elem`` is a member of a ``var ( ... )`` group is read like a single ``var`` (its sub-fields
    kept: resource_container_cluster.go's master_authorized_networks_config was dropped silently, GCP review G5-7), and
    an ``Elem`` the reader cannot follow is listed under ``unresolved``, never dropped."""
    tree = tmp_path / "tree"
    (tree / "google/services/container").mkdir(parents=True)
    (tree / "google/services/container/resource_thing.go").write_text(GO_VAR_GROUP)
    (tree / gen_forcenew.MANIFEST).write_text(f"Source: {gen_forcenew.REPOSITORY}\nCommit: {'0' * 40}\n")
    saved = gen_forcenew.RESOURCES
    gen_forcenew.RESOURCES = {"test:index:Thing": ("google_thing", [
        ("google/services/container/resource_thing.go", "ResourceThing")])}
    try:
        data = gen_forcenew.generate(source_dir=tree)
    finally:
        gen_forcenew.RESOURCES = saved
    thing = data["resources"]["test:index:Thing"]
    assert {(f["path"], f["on"]) for f in thing["forceNew"]} == {("authorized.cidrBlocks.cidrBlock", "value")}
    assert {f["path"] for f in thing["computed"]} == {"authorized", "authorized.publicAccess"}
    assert len(data["unresolved"]) == 1 and data["unresolved"][0].startswith("elsewhere.Elem (")
    # The real table: the cluster's authorized networks block is read through.
    real = json.loads(SCHEMA.read_text())["resources"]["gcp:container/cluster:Cluster"]["computed"]
    assert {"masterAuthorizedNetworksConfig.gcpPublicCidrsAccessEnabled",
            "masterAuthorizedNetworksConfig.privateEndpointEnforcementEnabled"} <= {c["path"] for c in real}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_vendored_provider_files_are_those_recorded():
    """Each vendored file is the one provider_schema.json records (its sha256), only those are vendored, with the
    provider's licence (MPL-2.0), and VENDORED.md names the repository, the commit and each file's sha256."""
    data = json.loads(SCHEMA.read_text())
    for path, digest in data["files"].items():
        assert _sha256(VENDORED / path) == digest, f"{path}: not the file read at {data['commit']}"
    on_disk = {p.relative_to(VENDORED).as_posix() for p in VENDORED.rglob("*") if p.is_file()}
    assert on_disk == {*data["files"], "LICENSE", "VENDORED.md"}
    manifest = (VENDORED / "VENDORED.md").read_text()
    assert f"Source: {data['source']}\nCommit: {data['commit']}\nLicense: MPL-2.0\n" in manifest
    listed = {path: digest for digest, path in re.findall(r"^([0-9a-f]{64})  (\S+)$", manifest, re.M)}
    assert listed == {"LICENSE": _sha256(VENDORED / "LICENSE"), **data["files"]}
    assert "Mozilla Public License Version 2.0" in (VENDORED / "LICENSE").read_text()
    for path in data["files"]:
        assert "SPDX-License-Identifier: MPL-2.0" in (VENDORED / path).read_text()[:500], path


def test_the_vendored_schema_is_what_the_generator_reads_from_the_vendored_files():
    vendored = json.loads(SCHEMA.read_text())
    fresh = gen_forcenew.generate(source_dir=VENDORED)
    assert fresh == {key: vendored[key] for key in fresh}  # all but what the command line records (pulumiGcp, note)
    assert fresh["unresolved"] == []


