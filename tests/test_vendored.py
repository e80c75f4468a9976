"""The vendored reference material is what ../shared holds, where ../shared is present (CI)."""

from __future__ import annotations

import pytest
from conftest import REFERENCE, SHARED

PAIRS = [("kuberay", "kuberay-crds"), ("kueue", "kueue-crds"), ("seeds", "seeds")]


@pytest.mark.parametrize(("vendored", "shared"), PAIRS)
def test_vendored_copies_match_shared(vendored: str, shared: str) -> None:
    ours = sorted((REFERENCE / vendored).iterdir())
    assert ours, f"tests/reference/{vendored} is empty"
    if not (SHARED / shared).is_dir():
        # A clone elsewhere: the vendored copy is all there is, and all the tests need.
        return
    for path in ours:
        assert path.read_bytes() == (SHARED / shared / path.name).read_bytes(), f"{path} differs from ../shared"


def test_every_kueue_crd_is_vendored(kueue_validator) -> None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
           "metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}
    assert kueue_validator(doc) == []
    doc["spec"]["clusterQeue"] = "typo"
    assert any("clusterQeue" in e for e in kueue_validator(doc))
