"""Rules across stack files: what two stacks of one repository must not both declare.

A GCP project has one Binary Authorization policy: "A policy specifies the attestors that must attest to a container
image, before the project is allowed to deploy that image. There is at most one policy per project."
(https://cloud.google.com/binary-authorization/docs/reference/rest/v1beta1/projects/getPolicy). Every stack declares
its project's policy (infra/cluster_security.py, ``gcp.binaryauthorization.Policy``), so two stacks in one project
would each overwrite the other's on every ``pulumi up``, and the first ``destroy`` would remove the other's. ``slicectl
lint`` refuses that, at each stack's ``gcp:project`` line: give each stack its own project.
"""

from __future__ import annotations

from typing import Any

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
