"""Stacks apart: a per-stack identity reaches no other stack, and a stack's authoritative policies hold its own only.

A stack's scope is read from its rendering (every GCP resource names its project; its checkpoint buckets): a
per-stack CI identity (``ci-<kind>-<stack>``) holding any permission inside another stack's scope is one stack's
approver acting on another. An authoritative IAM policy (the stack's bucket's, its repository's) is what the next
``up`` makes the resource's whole IAM, so each of its members is a grant the stack keeps in place: it must be the
stack's own (its project's accounts and workload identity principals, its own CI identities, the project's basic
role convenience values GCS gives a new bucket).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from .finding import Finding
from .gcp import CI_ACCOUNT, Reaches

# Pulumi's file ("diy") backend keeps a stack's files under .pulumi/: stacks/<project>/<stack>.json, history/,
# backups/ and locks/<project>/<stack>/, beside the backend's meta.yaml (pulumi/pulumi, pkg/backend/diy).
STATE_KINDS = {"stacks": "{s}.json", "history": "{s}/{s}-1.history.json", "backups": "{s}/{s}.1.json",
               "locks": "{s}/lock.json"}


def state_objects(bucket: str, project: str, stacks: Iterable[str]) -> dict[str, dict[str, tuple[str | None, str]]]:
    """The state bucket's representative objects, each with its owner: {bucket: {CEL resource name: (stack or None,
    kind)}}: the bucket itself (its listing), the backend's meta.yaml and an object outside any stack's files, and
    one object of each kind per stack. A conditional grant on the bucket counts on the ones its condition admits."""
    base = f"projects/_/buckets/{bucket}"
    out: dict[str, tuple[str | None, str]] = {base: (None, "listing"), f"{base}/objects/other": (None, "other"),
                                              f"{base}/objects/.pulumi/meta.yaml": (None, "meta")}
    for s in stacks:
        for kind, leaf in STATE_KINDS.items():
            out[f"{base}/objects/.pulumi/{kind}/{project}/{leaf.format(s=s)}"] = (s, kind)
    return {bucket: out}


def stack_scopes(stacks: dict[str, Iterable[tuple[str, dict]]], objects: dict[str, tuple[str | None, str]] = None,
                 keys: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Each stack's own resources, as resource-name prefixes, from its rendering: its project(s) and its checkpoint
    buckets (a stack's registrations name its project in every GCP resource's ``project`` input); and, in the CI
    project, its objects of the state bucket (``objects``: ``Reaches.objects``) and its state key (``keys``)."""
    out: dict[str, set[str]] = {}
    for resource, (stack, _) in (objects or {}).items():
        if stack in stacks:
            out.setdefault(stack, set()).add(resource)
    for stack, key in (keys or {}).items():
        if stack in stacks:
            out.setdefault(stack, set()).add(key)
    for stack, resources in stacks.items():
        scope = out.setdefault(stack, set())
        for typ, i in resources:
            if typ.startswith("gcp:") and isinstance(i.get("project"), str):
                scope.add(f"projects/{i['project']}/")
            if typ == "gcp:storage/bucket:Bucket" and i.get("name"):
                scope.add(f"buckets/{i['name']}")
    return out


def stack_of(who: str, scopes: dict[str, set[str]]) -> str | None:
    """The stack of a per-stack CI account (``ci-<kind>-<stack>``), the longest stack name that fits."""
    fits = [s for s in scopes if re.fullmatch(rf"ci-[a-z]+-{re.escape(s)}", who)]
    return max(fits, key=len) if fits else None


def _in(resource: str, scope: set[str]) -> bool:
    return any(resource.startswith(p) or resource + "/" == p for p in scope)


def cross_stack(reach: Reaches, scopes: dict[str, set[str]]) -> list[Finding]:
    """A per-stack CI identity holding anything in another stack's scope (and not in its own): one finding each."""
    out = []
    for member, r in sorted(reach.items()):
        ci = CI_ACCOUNT.match(member)
        own = ci and stack_of(ci.group(1), scopes)
        if not own:
            continue
        by_resource: dict[str, set[str]] = {}
        for p, res, _, _ in r.grants:
            by_resource.setdefault(res, set()).add(p)
        outside = {res: ps for res, ps in by_resource.items() if not _in(res, scopes[own])}
        for other, scope in sorted(scopes.items()):
            if other == own:
                continue
            foreign = sorted({(p, res) for res, ps in outside.items() if _in(res, scope) for p in ps})
            if foreign:
                out.append(Finding(ci.group(1), f"reaches the {other} stack's {foreign[0][1]} ({foreign[0][0]}, "
                                                f"{len(foreign)} permissions): one stack's identity acts on its own"))
    return out


def foreign_policy_members(stacks: dict[str, Iterable[tuple[str, dict]]]) -> list[Finding]:
    """Every member of a stack's authoritative policies that is not the stack's own: one finding each."""
    scopes = stack_scopes(stacks)
    out = []
    for stack, resources in sorted(stacks.items()):
        projects = {p.split("/")[1] for p in scopes[stack] if p.startswith("projects/")}
        for typ, i in resources:
            base = typ.split(":")[1] if typ.count(":") == 2 else ""
            if not base.endswith(("IAMPolicy", "IamPolicy")) or not isinstance(i.get("policyData"), str):
                continue
            where = i.get("bucket") or i.get("repository") or base
            for b in json.loads(i["policyData"]).get("bindings") or []:
                for m in b.get("members") or []:
                    if not _own_member(m, stack, projects, scopes):
                        out.append(Finding(f"{stack} {where}", f"{b['role']} for {m}, not one of the stack's own "
                                                               "identities (kept by its authoritative policy)"))
    return out


def _own_member(member: str, stack: str, projects: set[str], scopes: dict[str, set[str]]) -> bool:
    kind, _, rest = member.partition(":")
    if kind in ("projectOwner", "projectEditor", "projectViewer"):
        return rest in projects
    if kind == "serviceAccount":
        if m := CI_ACCOUNT.match(member):
            return stack_of(m.group(1), scopes) == stack
        return rest.rsplit("@", 1)[-1].removesuffix(".iam.gserviceaccount.com") in projects
    if kind == "principal":
        pool = re.search(r"/workloadIdentityPools/([^/]+)\.svc\.id\.goog/", member)
        return bool(pool) and pool.group(1) in projects
    return False
