"""The vendored reference material is the upstream files it was copied from, unchanged.

``tests/reference/SHA256SUMS`` records each copied file's digest as taken from its source (the repository
and commit in ``tests/reference/README.md``): an edit to a schema or the seed, which would let a test
pass against something upstream never published, fails here.
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import REFERENCE

SUMS = REFERENCE / "SHA256SUMS"
COPIED = ("kuberay", "kueue", "seeds", "gmp", "kueue-multikueue", "escalation")


def _recorded() -> dict[str, str]:
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in SUMS.read_text().splitlines())}


@pytest.mark.parametrize("directory", COPIED)
def test_vendored_copies_are_the_upstream_files(directory: str) -> None:
    recorded = _recorded()
    ours = sorted(p for p in (REFERENCE / directory).iterdir() if p.is_file())
    assert ours, f"tests/reference/{directory} is empty"
    for path in ours:
        name = f"{directory}/{path.name}"
        assert name in recorded, f"{name} has no recorded digest: add its source to README.md and SHA256SUMS"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded[name], f"{name} differs from its source"


def test_every_recorded_file_is_vendored() -> None:
    missing = [name for name in _recorded() if not (REFERENCE / name).is_file()]
    assert not missing, f"recorded in SHA256SUMS but not vendored: {missing}"


def test_every_kueue_crd_is_vendored(kueue_validator) -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}
    assert kueue_validator(doc) == []
    doc["spec"]["clusterQeue"] = "typo"
    assert any("clusterQeue" in e for e in kueue_validator(doc))
