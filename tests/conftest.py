"""Shared test helpers: the read-only reference material next to the repository.

``<repo>/../shared`` holds the seed tutorial and the KubeRay CRDs. Tests that need
it skip, saying why, only where it is absent (a bare clone elsewhere).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SEED = SHARED / "seeds" / "gke-multislice-elastic-ray-train-tutorial.txt"
KUBERAY_CRDS = SHARED / "kuberay-crds"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}


def _strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it: unknown fields are not kept.

    A structural schema prunes fields it does not declare, so a misspelt field would
    silently vanish on apply; here it fails validation instead. ``x-kubernetes-*``
    markers are left as they are: jsonschema ignores unknown keywords, and
    int-or-string fields already carry an ``anyOf`` of both types.
    """
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def crd_schema(kind: str, version: str = "v1") -> dict[str, Any]:
    # The CRDs are large (2 MB): libyaml's loader reads them in a second.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load((KUBERAY_CRDS / CRD_FILES[kind]).read_text(), Loader=loader)  # noqa: S506
    served = next(v for v in doc["spec"]["versions"] if v["name"] == version)
    return _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))


@pytest.fixture(scope="session")
def seed_text() -> str:
    if not SEED.exists():
        pytest.skip(f"the seed tutorial is not here ({SEED}); it lives in <repo>/../shared")
    return SEED.read_text()


@pytest.fixture(scope="session")
def kuberay_validator() -> Callable[[dict[str, Any]], list[str]]:
    """``validate(doc)`` -> the schema errors of a RayCluster/RayJob document (empty: valid)."""
    if not KUBERAY_CRDS.is_dir():
        pytest.skip(f"the KubeRay CRDs are not here ({KUBERAY_CRDS}); they live in <repo>/../shared")
    validators = {kind: jsonschema.Draft7Validator(crd_schema(kind)) for kind in CRD_FILES}

    def validate(doc: dict[str, Any]) -> list[str]:
        v = validators[doc["kind"]]
        return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in v.iter_errors(doc)]

    return validate
