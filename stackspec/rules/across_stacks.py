"""Rules across stack files: what two stacks of one repository must not both declare (:func:`check`).

A GCP project has one Binary Authorization policy: "A policy specifies the attestors that must attest to a container
image, before the project is allowed to deploy that image. There is at most one policy per project."
(https://cloud.google.com/binary-authorization/docs/reference/rest/v1beta1/projects/getPolicy). Every stack declares
its project's policy (infra/cluster_security.py, ``gcp.binaryauthorization.Policy``), so two stacks in one project
would each overwrite the other's on every ``pulumi up``, and the first ``destroy`` would remove the other's. ``slicectl
lint`` refuses that, at each stack's ``gcp:project`` line: give each stack its own project.
"""

from __future__ import annotations

import re
from typing import Any

from .. import names
from ..errors import Problem

POLICY_SOURCE = "https://cloud.google.com/binary-authorization/docs/reference/rest/v1beta1/projects/getPolicy"


def shared_project(specs: list[Any]) -> dict[str, list[Problem]]:
    """Stack name -> its problems: each stack sharing its project with another (both own the project's Binary
    Authorization policy)."""
    by_project: dict[str, list[Any]] = {}
    for s in specs:
        by_project.setdefault(s.project, []).append(s)
    out: dict[str, list[Problem]] = {}
    for project, stacks in by_project.items():
        if len(stacks) < 2:
            continue
        for s in stacks:
            others = ", ".join(f"{o.stack} ({o.stack_file})" for o in stacks if o is not s)
            out[s.stack] = [Problem("gcp:project", project, (
                f"also the project of {others}: each stack declares the project's Binary Authorization policy, and "
                f"\"There is at most one policy per project\" ({POLICY_SOURCE}); give each stack its own project"))]
    return out


def _key_parts(provider: str) -> tuple[str, str, str, str] | None:
    """``gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K`` as (P, L, R, K); None for any other form (the
    stack's own rules say what is wrong with it)."""
    m = re.fullmatch(r"gcpkms://projects/([^/]+)/locations/([^/]+)/keyRings/([^/]+)/cryptoKeys/([^/?]+)", provider)
    return (m[1], m[2], m[3], m[4]) if m else None


def foreign_key(specs: list[Any]) -> dict[str, list[Problem]]:
    """Stack name -> its problems: a stack keeping its secrets with another stack's Cloud KMS key. The bootstrap
    makes one key per stack, named after it, in its kmsLocation and keyRing (stackspec/names.py stack_key_id;
    bootstrap/Pulumi.example.yaml), and lets each stack's identities use their own only (bootstrap/access.py), so CI
    could neither decrypt this stack's state with it nor keep the two stacks apart. Whatever location and ring the
    bootstrap uses, a key of the CI project named after another stack is that stack's."""
    out: dict[str, list[Problem]] = {}
    for s in specs:
        parts = _key_parts(s.secrets_provider) if s.secrets_provider is not None else None
        if parts is None or s.ci_project is None:
            continue
        project, location, ring, key = parts
        for o in specs:
            if o is s or o.ci_project is None:
                continue
            if project == o.ci_project and key == o.stack:
                own = names.stack_secrets_provider(s.ci_project, s.stack, location, ring)
                out.setdefault(s.stack, []).append(Problem("secretsprovider", s.secrets_provider, (
                    f"the Cloud KMS key of stack {o.stack} ({o.stack_file}): the bootstrap gives each stack its own "
                    f"key and grants each stack's identities that key only; use {own}")))
                break
    return out


def check(specs: list[Any]) -> dict[str, list[Problem]]:
    """Every rule across stack files: stack name -> its problems."""
    out: dict[str, list[Problem]] = {}
    for rule in (shared_project, foreign_key):
        for stack, problems in rule(specs).items():
            out.setdefault(stack, []).extend(problems)
    return out
