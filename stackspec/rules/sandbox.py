"""A sandbox stack (``tpu-multislice:sandbox: true``): previewed and deployed by hand, without the CI bootstrap.

The bootstrap (bootstrap/) makes what CI needs: the CI project's identities, their federation, the state bucket, each
stack's Cloud KMS key, the worker image's attestor and pusher. A sandbox stack needs none of it: it is deployed from a
developer's machine with their own credentials into a project of their own (``pulumi login --local`` or any state
backend, a passphrase or any secrets provider), and CI never acts on it. So it:

- names no ``ciProject`` (it may; nothing of it is used), and the drill RBAC for the CI drill user is not declared;
- is ``environment: dev`` (prod's rules want the bootstrap's key and identities);
- has no ``image`` section (the prebuilt image's repository is pushed by CI and admitted by the bootstrap's
  attestor): the workers run ``ray.image`` and install MaxText at start;
- is not deployed on push nor drilled by CI (``deploy.onPush``, ``deploy.clusterDrill``), and ``slicectl stacks``
  lists it apart (``sandbox``), out of the workflows' matrices; the bootstrap and the example suite skip it;
- is single-region (a multi-region stack's MultiKueue token account and its grants on the workers' projects are the
  bootstrap's);
- creates its project's APIs and its nodes' service account itself, and keeps GKE's default encryption of Secrets
  instead of the bootstrap's Cloud KMS key (infra/sandbox.py says why).

docs/sandbox.md is the walk-through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NS = "tpu-multislice"
DOC = "docs/sandbox.md"


def check(spec: Any, fail: Callable[[str, Any, str], None]) -> None:
    """What a sandbox stack may not have, and the CI project every other stack needs."""
    if not spec.sandbox:
        if spec.ci_project is None:
            fail(f"{NS}:ciProject", None, "required: the bootstrap's CI project (bootstrap/); a stack deployed by hand "
                 f"without the bootstrap sets {NS}:sandbox: true instead ({DOC})")
        return
    if spec.environment != "dev":
        fail(f"{NS}:environment", spec.environment, f"a sandbox stack is dev (prod needs the bootstrap's key and "
             f"identities); allowed: dev ({DOC})")
    if spec.image is not None:
        fail(f"{NS}:image", spec.image.model_dump(by_alias=True, exclude_none=True),
             "a sandbox stack has no image section: CI pushes the image and the bootstrap's attestor admits it; the "
             f"workers run ray.image and install MaxText at start ({DOC})")
    if spec.deploy.on_push:
        fail(f"{NS}:deploy.onPush", True, f"CI never deploys a sandbox stack (its identity is the bootstrap's) ({DOC})")
    if spec.multi_region:
        fail(f"{NS}:regions", [r.region for r in spec.regions],
             "a sandbox stack is single-region: a multi-region stack's MultiKueue token account and its grants on the "
             f"workers' projects are made by the CI bootstrap; drop regions/manager, or deploy it through CI ({DOC})")
    if spec.deploy.cluster_drill is not None:
        fail(f"{NS}:deploy.clusterDrill", spec.deploy.cluster_drill,
             f"CI never drills a sandbox stack; run `slicectl drill` against it by hand ({DOC})")
