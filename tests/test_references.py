"""Everything a stack's resources name exists: each service account, Cloud KMS key, Binary Authorization attestor,
network, bucket and image repository a rendered resource (Google Cloud or Kubernetes) references is declared by that
stack or by the bootstrap that serves it (bootstrap/). A name nothing declares is a ``pulumi up`` that fails at the
resource naming it (review B1: a sandbox cluster named the bootstrap's key and node account, with no bootstrap).

For every stack kind: the tests' own single-region (dev, prod, team-eu), multi-region (multi) and sandbox (sbx)
stacks, and whatever ``stacks/`` holds. The CI stacks are served by the bootstrap rendered over their directory
(bootstrap/Pulumi.example.yaml made to serve their CI project, as tests/test_escalation.py does); a sandbox stack by
nothing: the bootstrap skips it (B2), so it must declare all it names itself.

What is not anyone's to declare here: Google's service agents (``service-<number>@gcp-sa-*`` and
``*@container-engine-robot``: "Google creates and manages service agents", https://cloud.google.com/iam/docs/service-agents),
and images of public registries (Docker Hub, registry.k8s.io, GKE's).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE_STACKS, FIXTURE_STACKS, ROOT

import bootstrap.config as bcfg
from offline import engine

SANDBOX_STACKS = ROOT / "tests" / "fixtures" / "sandbox"

ACCOUNT = re.compile(r"\b([a-z][a-z0-9-]{4,28}[a-z0-9])@([a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com\b")
KMS_KEY = re.compile(r"projects/([^/\s\"]+)/locations/([^/\s\"]+)/keyRings/([^/\s\"]+)/cryptoKeys/([^/\s\"]+)")
ATTESTOR = re.compile(r"projects/([^/\s\"]+)/attestors/([^/\s\"]+)")
GS_URL = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])")
# Artifact Registry's Docker hosts: <location>-docker.pkg.dev/<project>/<repository>/<image>
REGISTRY = re.compile(r"\b([a-z0-9-]+)-docker\.pkg\.dev/([a-z][a-z0-9-]{4,28}[a-z0-9])/([a-z0-9-]+)/")
# Input keys that hold a name (or the provider's id, "<name>-offline-id" under the mocks, or a path ending in it).
NETWORK_KEYS = {"network", "subnetwork", "vpc", "vpcSubnet"}
BUCKET_KEYS = {"bucket", "bucketName"}
REPOSITORY_KEYS = {"repository"}
OFFLINE_ID = "-offline-id"


def _google_agent(account: str, project: str) -> bool:
    return project.startswith("gcp-sa-") or project in {"container-engine-robot", "cloudservices"}


def _name(value: str) -> str:
    return value.removesuffix(OFFLINE_ID).rsplit("/", 1)[-1]


@dataclass
class Names:
    """Names by kind: what resources declare, or what they reference (with where)."""

    accounts: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    attestors: dict[str, str] = field(default_factory=dict)
    networks: dict[str, str] = field(default_factory=dict)
    buckets: dict[str, str] = field(default_factory=dict)
    repositories: dict[str, str] = field(default_factory=dict)

    KINDS = ("accounts", "keys", "attestors", "networks", "buckets", "repositories")

    def missing(self, declared: Names) -> list[str]:
        return [f"{kind[:-1]} {name} (named by {where})" for kind in self.KINDS
                for name, where in getattr(self, kind).items() if name not in getattr(declared, kind)]


def _walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)
    else:
        yield key, value


def references(resources: list[tuple[str, str, dict]]) -> Names:
    """What the (type, name, inputs) of rendered resources name."""
    out = Names()
    for type_, name, inputs in resources:
        where = f"{type_} {name}"
        for key, value in _walk(inputs):
            if not isinstance(value, str) or key.endswith(".py"):  # a script's source (a ConfigMap's), not a name
                continue
            for account, project in ACCOUNT.findall(value):
                if not _google_agent(account, project):
                    out.accounts.setdefault(f"{account}@{project}", where)
            for m in KMS_KEY.finditer(value):
                out.keys.setdefault(m.group(0), where)
            for m in ATTESTOR.finditer(value):
                out.attestors.setdefault(m.group(0), where)
            for bucket in GS_URL.findall(value):
                out.buckets.setdefault(bucket, where)
            for location, project, repo in REGISTRY.findall(value):
                out.repositories.setdefault(f"{location}/{project}/{repo}", where)
            if not type_.startswith(("gcp:", "kubernetes:")) or value.startswith("<") or not value:
                continue
            if key in NETWORK_KEYS and type_.startswith("gcp:") or key in {"vpc", "vpcSubnet"}:
                out.networks.setdefault(_name(value), where)
            if key in BUCKET_KEYS:
                out.buckets.setdefault(_name(value), where)
            if key in REPOSITORY_KEYS and type_.startswith("gcp:"):
                out.repositories.setdefault(_name(value), where)
    return out


def declarations(resources: list[tuple[str, str, dict]]) -> Names:
    """What the (type, name, inputs) of rendered resources create, under every name a reference may use."""
    out = Names()
    rings = {}
    for type_, name, i in resources:
        if type_ == "gcp:kms/keyRing:KeyRing":
            rings[f"{name}{OFFLINE_ID}"] = f"projects/{i['project']}/locations/{i['location']}/keyRings/{i['name']}"
    for type_, name, i in resources:
        where = f"{type_} {name}"
        if type_ == "gcp:serviceaccount/account:Account":
            out.accounts[f"{i['accountId']}@{i['project']}"] = where
        elif type_ == "gcp:kms/cryptoKey:CryptoKey":
            out.keys[f"{rings.get(i['keyRing'], i['keyRing'])}/cryptoKeys/{i['name']}"] = where
        elif type_ == "gcp:binaryauthorization/attestor:Attestor":
            out.attestors[f"projects/{i['project']}/attestors/{i['name']}"] = where
        elif type_ in ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork"):
            out.networks[i["name"]] = where
        elif type_ == "gcp:storage/bucket:Bucket":
            out.buckets[i["name"]] = where
        elif type_ == "gcp:artifactregistry/repository:Repository":
            out.repositories[i["repositoryId"]] = where
            out.repositories[f"{i['location']}/{i['project']}/{i['repositoryId']}"] = where
        elif type_ == "kubernetes:networking.gke.io/v1:Network":  # a GKE Network names its own parameter set
            out.networks[i["metadata"]["name"]] = where
    return out


def _merged(*names: Names) -> Names:
    out = Names()
    for n in names:
        for kind in Names.KINDS:
            getattr(out, kind).update(getattr(n, kind))
    return out


def stack_resources(stack: str, stacks_dir: Path) -> list[tuple[str, str, dict]]:
    r = engine.render(stack, stacks_dir=stacks_dir)
    return [(x.type, x.name, x.inputs) for x in r.resources if x.custom]


def bootstrap_resources(stacks_dir: Path) -> list[tuple[str, str, dict]]:
    """The bootstrap program serving ``stacks_dir`` (tests/test_bootstrap.py's render, under its mocks)."""
    from test_bootstrap import render
    from test_escalation import bootstrap_config_for

    saved, bcfg.STACKS_DIR = bcfg.STACKS_DIR, stacks_dir
    try:
        boot = render(bootstrap_config_for(stacks_dir))
    finally:
        bcfg.STACKS_DIR = saved
    return [(r.type, r.name, r.inputs) for r in boot.resources if r.custom]


def _stacks(d: Path) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in d.glob("Pulumi.*.yaml"))


def _is_sandbox(stack: str, d: Path) -> bool:
    return engine.stack_config(stack, d).get("tpu-multislice:sandbox") == "true"


@pytest.fixture(scope="module")
def together(tmp_path_factory) -> Path:
    """The tests' CI stacks and the sandbox fixture in one directory, as a team's stacks/ would hold them."""
    d = tmp_path_factory.mktemp("stacks")
    for src in (FIXTURE_STACKS, SANDBOX_STACKS):
        for p in src.glob("Pulumi.*.yaml"):
            shutil.copy(p, d / p.name)
    return d


@pytest.fixture(scope="module")
def served(together) -> Names:
    return declarations(bootstrap_resources(together))


@pytest.mark.parametrize("stack", [*_stacks(FIXTURE_STACKS), *_stacks(SANDBOX_STACKS)])
def test_everything_a_stack_names_is_declared_by_it_or_its_bootstrap(stack, together, served):
    resources = stack_resources(stack, together)
    own = declarations(resources)
    sandbox = _is_sandbox(stack, together)
    # A sandbox stack has no bootstrap behind it: only what it declares itself counts.
    declared = own if sandbox else _merged(own, served)
    missing = references(resources).missing(declared)
    assert not missing, missing


def test_the_sandbox_names_its_own_node_account_and_no_key(together):
    """The sandbox's cluster and pools run as an account the stack creates, and name no Cloud KMS key (GKE's default
    encryption at rest: infra/sandbox.py); the check above is not vacuous for it."""
    resources = stack_resources("sbx", together)
    refs = references(resources)
    assert refs.accounts and set(refs.accounts) <= set(declarations(resources).accounts)
    assert not refs.keys
    (cluster,) = [i for t, _, i in resources if t == "gcp:container/cluster:Cluster"]
    assert "databaseEncryption" not in cluster


# What only the CI road has (bootstrap/, .github/workflows/, docs/ci-trust.md): its identities' ids, its workflow
# files and the page on them. A sandbox's resources tell their reader to check a change against none of them.
CI_ONLY = re.compile(r"\bci-(?:image|deploy|preview|drill|bootstrap)\b|\b[a-z-]+\.yml\b|docs/ci-trust\.md")


def test_a_sandbox_points_its_reader_at_nothing_of_ci(together):
    """What a sandbox's resources say (a policy's description, an alert's runbook) names no CI identity, workflow or
    CI page: there is no ci-image signing its images and no deploy.yml run to match an IAM change to."""
    hits = [f"{t} {n}: {m.group(0)}" for t, n, i in stack_resources("sbx", together)
            for m in CI_ONLY.finditer(str(i)) if not t.startswith("kubernetes:core/v1:ConfigMap")]
    assert not hits, hits


def test_the_bootstrap_provisions_nothing_for_a_sandbox(together):
    """B2: an administrator's bootstrap over a directory holding a sandbox stack creates no API, identity, key,
    role or environment for it, and touches nothing in its project."""
    project = engine.stack_config("sbx", together)["gcp:project"]
    hits = [f"{t} {n}" for t, n, i in bootstrap_resources(together) if "sbx" in n.split("-")
            or project in str(i)]
    assert not hits, hits


EXAMPLES = [s for s in _stacks(EXAMPLE_STACKS)]


@pytest.fixture(scope="module")
def served_examples() -> Names:
    return declarations(bootstrap_resources(EXAMPLE_STACKS)) if EXAMPLES else Names()


@pytest.mark.parametrize("stack", EXAMPLES)
def test_what_stacks_holds_names_only_what_is_declared(stack, served_examples):
    """The same, for the stacks a team keeps in stacks/ (whatever it holds)."""
    resources = stack_resources(stack, EXAMPLE_STACKS)
    own = declarations(resources)
    declared = own if _is_sandbox(stack, EXAMPLE_STACKS) else _merged(own, served_examples)
    missing = references(resources).missing(declared)
    assert not missing, missing


def test_the_sandbox_road_from_new_to_a_self_contained_plan(tmp_path, capsys):
    """``slicectl new --sandbox`` as docs/sandbox.md gives it, then lint and preview: the plan declares everything it
    names (nothing from a bootstrap), defaults to Spot, and ``new`` printed the quota and cost lines."""
    from slicectl import cli

    assert cli.main(["new", "road", "--project", "road-own-project", "--region", "us-east5", "--zone", "us-east5-b",
                     "--slice-shape", "v6e-16", "--slices", "2", "--gke-version", "1.35", "--sandbox",
                     "--stacks-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "quota: 32 v6e chips of preemptible (spot, flex-start) quota in us-east5" in out
    assert "a new project's default is 64" in out
    # A figure, or (the cited catalogue has no v6e Spot price: docs/cost.md) the keys that would give one.
    assert re.search(r"cost: .*\$[\d,.]+.* a month while it is up", out) or re.search(
        r"cost: unknown .* a month while it is up .*tpu-multislice:prices\.v6e\.spot", out), out
    assert f"--stacks-dir {tmp_path}" in out  # the next steps keep where the file is
    assert cli.main(["lint", "--stack", "road", "--stacks-dir", str(tmp_path)]) == 0
    assert cli.main(["preview", "--stack", "road", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "p")]) == 0
    resources = stack_resources("road", tmp_path)
    assert all(s.capacity[0].type == "spot" for s in engine.render("road", stacks_dir=tmp_path).spec.slices)
    assert references(resources).missing(declarations(resources)) == []
    assert bcfg.read_stacks(tmp_path)[0] == []  # the bootstrap serves it nothing


def test_a_sandbox_is_single_region(tmp_path, capsys):
    """A multi-region stack's MultiKueue account and its grants are the bootstrap's: a sandbox refuses regions, in
    ``new`` and in the spec (lint and preview), with the key and docs/sandbox.md."""
    from slicectl import cli
    from stackspec import spec as stack_spec

    assert cli.main(["new", "wide", "--project", "wide-own-project", "--region", "us-east5", "--regions",
                     "us-east5:us-east5-b,us-east1:us-east1-d", "--slice-shape", "v6e-16", "--slices", "1",
                     "--gke-version", "1.35", "--sandbox", "--stacks-dir", str(tmp_path)]) == 2
    assert "--regions: a sandbox stack is single-region" in capsys.readouterr().err
    config = {**engine.stack_config("multi"), "tpu-multislice:sandbox": "true"}
    config.pop("tpu-multislice:ciProject", None)
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load("multi", config)
    assert any(p.key == "tpu-multislice:regions" and "single-region" in p.message for p in e.value.problems)
