"""The vendored third-party files are the upstream files they were copied from, unchanged, each with its licence.

``vendor/SHA256SUMS`` records each copied file's digest as taken from its source (the repository and commit in
``vendor/README.md``): an edit to a schema or the seed, which would let a test pass against something upstream never
published, fails here. ``tests/reference/SHA256SUMS`` does the same for the escalation catalogues, which stay there
for now. ``vendor/terraform-provider-google`` has its own manifest (``VENDORED.md``, checked by
``tests/test_provider_schema.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import REFERENCE, VENDOR

MANIFESTS = {VENDOR: ("kuberay", "kueue", "seeds", "gmp", "kueue-multikueue"), REFERENCE: ("escalation",)}
COPIED = [(base, directory) for base, dirs in MANIFESTS.items() for directory in dirs]


def _recorded(base: Path) -> dict[str, str]:
    lines = (base / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in lines)}


@pytest.mark.parametrize(("base", "directory"), COPIED, ids=[d for _, d in COPIED])
def test_vendored_copies_are_the_upstream_files(base: Path, directory: str) -> None:
    recorded = _recorded(base)
    ours = sorted(p for p in (base / directory).iterdir() if p.is_file())
    assert ours, f"{base.name}/{directory} is empty"
    for path in ours:
        name = f"{directory}/{path.name}"
        assert name in recorded, f"{name} has no recorded digest: add its source to README.md and SHA256SUMS"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded[name], f"{name} differs from its source"


@pytest.mark.parametrize("base", list(MANIFESTS), ids=[b.name for b in MANIFESTS])
def test_every_recorded_file_is_vendored(base: Path) -> None:
    missing = [name for name in _recorded(base) if not (base / name).is_file()]
    assert not missing, f"recorded in {base.name}/SHA256SUMS but not vendored: {missing}"


def test_every_vendored_directory_is_listed_with_its_licence() -> None:
    """Each directory under vendor/ is a row of its README (source, commit, licence) and every one the manifest checks
    holds a licence file or names the licence of text published without one."""
    readme = (VENDOR / "README.md").read_text()
    dirs = sorted(p.name for p in VENDOR.iterdir() if p.is_dir())
    assert set(dirs) == set(MANIFESTS[VENDOR]) | {"terraform-provider-google"}, (
        f"vendor/ holds {dirs}: give a new directory its digests (SHA256SUMS) and a row in vendor/README.md")
    unlisted = [d for d in dirs if f"| `{d}/` |" not in readme]
    assert not unlisted, f"vendor/README.md has no row for {unlisted}"
    without = [d for d in dirs if not (VENDOR / d / "LICENSE").is_file() and d != "seeds"]
    assert not without, f"no LICENSE beside the copies in {without}"


def test_every_kueue_crd_is_vendored(kueue_validator) -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}
    assert kueue_validator(doc) == []
    doc["spec"]["clusterQeue"] = "typo"
    assert any("clusterQeue" in e for e in kueue_validator(doc))
