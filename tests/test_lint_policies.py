"""``slicectl lint`` and ``slicectl preview`` agree on every policy rule that needs only the spec.

Each rule a valid stack file can trip (``Rule.spec`` in policies/registry.py) has a spec edit here that
trips it. Both commands run on the same edited stack file (and pack config), through the CLI: the same
verdict, the same exit code, and every violation on the stack-file line of the key it names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS

from policies.registry import RULES
from slicectl import cli
from slicectl.exits import Exit

ROOT = Path(__file__).resolve().parents[1]
NS = "tpu-multislice"


def _slices(fn):
    def edit(config):
        for s in config[f"{NS}:slices"]:
            fn(s)
    return edit


def _set(section, **values):
    return lambda config: config[f"{NS}:{section}"].update(values)


# rule -> (stack, edit of the config: block, pack config or None)
CASES = {
    # One option whose pools scale from zero (flex-start, opted in): nothing holds the slices, no fallback.
    "compute-class-has-fallback": ("prod", lambda c: (
        _slices(lambda s: s.update(capacity=[{"type": "flex-start"}]))(c),
        c[f"{NS}:unverified"].update(draScaleFromZero=True)), None),
    "dcn-network-mtu": ("prod", _set("network", mtu=1460), None),
    "subnets-no-overlap": ("prod", lambda c: c[f"{NS}:network"]["secondary"][0].update(cidr="10.70.0.0/16"),
                           {"subnets-no-overlap": {"reservedRanges": ["10.70.0.0/20"]}}),
    "gke-release-channel": ("dev", _set("cluster", releaseChannel="RAPID"), None),
    "gke-private-nodes": ("dev", _set("cluster", privateNodes=False), None),
    "gke-shielded-nodes": ("dev", _set("cluster", shieldedNodes=False), None),
    "gke-no-public-control-plane": ("dev", _set("cluster", controlPlane={
        # A public range other than 0.0.0.0/0 (which the spec refuses outside a sandbox: stackspec/rules/gke.py).
        "access": "authorized-networks",
        "authorizedNetworks": [{"cidr": "203.0.113.0/24", "name": "office", "public": True}]}),
        None),
    # A manager two minor versions behind its regions (GKE 1.33 against 1.35).
    "gke-version-skew-across-clusters": ("multi", lambda c: c[f"{NS}:manager"].update(version="1.33.5-gke.1080000"),
                                         None),
    "allowed-locations": ("prod", lambda c: c.update({"gcp:zone": "us-east5-a"}),
                          {"allowed-locations": {"allowedZones": ["us-east5-b"]}}),
}


def test_every_spec_only_rule_has_a_case():
    assert set(CASES) == {r.name for r in RULES if r.spec_only}


def _leaf(key: str) -> str:
    return re.split(r"[.:\]\[]", key.rstrip("]"))[-1]


@pytest.mark.parametrize("rule", sorted(CASES))
def test_lint_and_preview_agree(rule, tmp_path, capsys):
    stack, edit, policy_config = CASES[rule]
    doc = yaml.safe_load((FIXTURE_STACKS / f"Pulumi.{stack}.yaml").read_text())
    edit(doc["config"])
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    path = stacks / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    extra = []
    if policy_config is not None:
        (tmp_path / "policy.json").write_text(json.dumps(policy_config))
        extra = ["--policy-config", str(tmp_path / "policy.json")]

    lint_code = cli.main(["lint", "--stack", stack, "--stacks-dir", str(stacks), "--format", "json", *extra])
    linted = json.loads(capsys.readouterr().out)[0]["policies"]
    out = tmp_path / "out"
    preview_code = cli.main(["preview", "--stack", stack, "--stacks-dir", str(stacks), "--out", str(out), *extra])
    previewed = json.loads((out / "policy.json").read_text())["violations"]
    capsys.readouterr()

    spec_only = {r.name for r in RULES if r.spec_only}
    as_set = lambda vs: {(v["rule"], v["enforcement"], v["key"], v["line"], v["message"]) for v in vs}  # noqa: E731
    assert as_set(linted) == as_set(v for v in previewed if v["rule"] in spec_only)
    assert any(v["rule"] == rule for v in linted), f"the edit did not trip {rule}"
    mandatory = any(v["enforcement"] == "mandatory" for v in previewed)
    assert lint_code == preview_code == (Exit.POLICY_VIOLATION if mandatory else Exit.OK)
    lines = path.read_text().splitlines()
    for v in linted:
        assert v["source"] and v["line"], v
        assert _leaf(v["key"]) in lines[v["line"] - 1], (v["key"], lines[v["line"] - 1])


def test_the_shipped_stacks_pass_lints_policies(capsys):
    assert cli.main(["lint", "--format", "json"]) == Exit.OK
    assert all(not s["policies"] for s in json.loads(capsys.readouterr().out))
