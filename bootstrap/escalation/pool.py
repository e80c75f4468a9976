"""The GitHub side: the pool's admission condition, parsed (not substring-matched), the environments' protection,
and what a workload identity principal admits."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# CEL as the attribute condition uses it (https://cloud.google.com/iam/docs/workload-identity-federation#conditions):
# the condition must be a plain conjunction of equalities, so no `||`, `!`, ternary or call can widen it.
_TOKEN = re.compile(r"\s*(?:(?P<str>'[^'\\]*'|\"[^\"\\]*\")|(?P<ident>[A-Za-z_][A-Za-z0-9_.]*)|(?P<op>&&|==)"
                    r"|(?P<bad>\S))")
REQUIRED = (("assertion.repository_id", "literal"), ("assertion.repository_owner_id", "literal"),
            ("assertion.workflow_ref", "assertion.job_workflow_ref"))


def condition_problems(cel: str) -> list[str]:
    """Why the condition admits more than this repository's own workflows run as themselves (empty: nothing)."""
    tokens, pos = [], 0
    while pos < len(cel.rstrip()):
        m = _TOKEN.match(cel, pos)
        if not m or m.group("bad"):
            return [f"not a plain conjunction of equalities (at {cel[pos:pos + 20]!r}): {cel}"]
        tokens.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    atoms, i = [], 0
    while i < len(tokens):
        if len(tokens) < i + 3 or tokens[i + 1] != ("op", "==") or tokens[i][0] == "op" or tokens[i + 2][0] == "op":
            return [f"not a plain conjunction of equalities: {cel}"]
        atoms.append((tokens[i][1], tokens[i + 2]))
        i += 3
        if i < len(tokens):
            if tokens[i] != ("op", "&&"):
                return [f"not a plain conjunction of equalities: {cel}"]
            i += 1
    out = []
    for left, want in REQUIRED:
        ok = any(a == left and (kind == "str" and re.fullmatch(r"['\"]\d+['\"]", val) if want == "literal"
                                else (kind, val) == ("ident", want)) for a, (kind, val) in atoms)
        if not ok:
            out.append(f"the attribute condition lacks `{left} == {'<numeric id>' if want == 'literal' else want}`: "
                       f"{cel}")
    return out


@dataclass(frozen=True)
class Environments:
    """The GitHub side: each declared environment's protection, as the bootstrap renders it."""

    reviewed: dict[str, bool]  # name -> required reviewers with prevent-self-review and no admin bypass
    main_only: dict[str, bool]

    @classmethod
    def from_resources(cls, resources: Iterable[tuple[str, dict]]) -> Environments:
        reviewed, main_only = {}, {}
        resources = list(resources)
        policies = {i["environment"] for t, i in resources
                    if t == "github:index/repositoryEnvironmentDeploymentPolicy:RepositoryEnvironmentDeploymentPolicy"
                    and i.get("branchPattern") == "main"}
        for t, i in resources:
            if t == "github:index/repositoryEnvironment:RepositoryEnvironment":
                people = [x for r in i.get("reviewers") or [] for x in (r.get("teams") or []) + (r.get("users") or [])]
                reviewed[i["environment"]] = bool(people) and i.get("preventSelfReview") is True and i.get(
                    "canAdminsBypass") is False
                main_only[i["environment"]] = i["environment"] in policies
        return cls(reviewed, main_only)


PRINCIPAL = re.compile(
    r"^principalSet://iam\.googleapis\.com/projects/[^/]+/locations/global/workloadIdentityPools/[^/]+/attribute\."
    r"(?:workflow_env/(?P<repo>[^/]+/[^/]+)/\.github/workflows/(?P<file>[^@/]+)@refs/heads/main@repo:(?P=repo):"
    r"(?:environment:(?P<env>[^:@]+)|ref:refs/heads/main)"
    r"|pr_workflow_env/pull_request@(?P<prrepo>[^/]+/[^/]+)/\.github/workflows/(?P<prfile>[^@/]+)@repo:(?P=prrepo):"
    r"environment:(?P<prenv>[^:@]+))$")
# Any member of a GitHub workload identity pool (not GKE's PROJECT.svc.id.goog pools).
GITHUB_POOL = re.compile(r"^principal(?:Set)?://iam\.googleapis\.com/projects/[^/]+/locations/global/"
                         r"workloadIdentityPools/(?![^/]+\.svc\.id\.goog/)[^/]+/")


def minted_by(principal: str) -> tuple[str, str, str | None] | None:
    """(workflow file, 'main' or 'pull request', environment) of a principal, or None for anything else."""
    m = PRINCIPAL.match(principal)
    if not m:
        return None
    if m.group("prfile"):
        return m.group("prfile"), "pull request", m.group("prenv")
    return m.group("file"), "main", m.group("env")
