"""``offline/data/provider_schema.json``: the ForceNew and Computed attributes ``slicectl lifecycle`` reads, written by
``offline/tools/gen_forcenew.py`` from terraform-provider-google's Go source at a pinned commit.

The file is checked against its own digest and the pulumi-gcp the lock installs; the reader is checked on Go
literals written as the provider writes them (terraform-plugin-sdk v2's schema idioms); with a clone of the
provider at hand (``TERRAFORM_PROVIDER_GOOGLE_GIT_DIR``), the file is regenerated and compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "offline" / "data" / "provider_schema.json"
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


def test_the_reader_reads_the_providers_schema_idioms(tmp_path):
    """A function-valued field, a package variable merged with MergeSchemas, a block list, a set of strings, a
    brace inside a string, a CustomizeDiff ForceNew: read as terraform-plugin-sdk v2 means them."""
    repo = tmp_path / "repo"
    (repo / "google/services/container").mkdir(parents=True)
    (repo / "google/services/container/resource_thing.go").write_text(GO)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "schema"], check=True)
    saved = gen_forcenew.RESOURCES
    gen_forcenew.RESOURCES = {"test:index:Thing": ("google_thing", [
        ("google/services/container/resource_thing.go", "ResourceThing")])}
    try:
        data = gen_forcenew.generate(str(repo / ".git"), "HEAD")
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


@pytest.mark.skipif(not os.environ.get("TERRAFORM_PROVIDER_GOOGLE_GIT_DIR"),
                    reason="set TERRAFORM_PROVIDER_GOOGLE_GIT_DIR to a clone of terraform-provider-google")
def test_the_vendored_schema_is_what_the_generator_reads_at_its_commit():
    vendored = json.loads(SCHEMA.read_text())
    fresh = gen_forcenew.generate(os.environ["TERRAFORM_PROVIDER_GOOGLE_GIT_DIR"], vendored["commit"])
    assert fresh["sha256"] == vendored["sha256"] and fresh["files"] == vendored["files"]
