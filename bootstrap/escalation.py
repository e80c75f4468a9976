"""Each identity's effective reach, COMPUTED from a rendering, and every path to more refused.

Input: what the programs declare (the bootstrap's and each stack's registrations, as ``(type, inputs)``), the
stacks' Kubernetes manifests, and the predefined roles' permission lists (``bootstrap/data/iam_roles.json``,
vendored from iann0036/iam-dataset with its commit and each file's sha256). Nothing here reads the access
model's tables: the check sees what a ``pulumi up`` would send GCP, GitHub and the clusters.

Computed per identity (a service account email, or a Kubernetes subject):
- its permissions, as (permission, resource) pairs: every IAM binding's role (predefined: the vendored list;
  custom: the rendered ``IAMCustomRole``'s permissions) on the binding's resource; then the closure through
  ``actAs``/token creation on other accounts (what the other account holds, the holder can reach);
- who can become it: the workload identity principals bound to it, each a workflow file, a ref and a GitHub
  environment, and whether that environment has reviewers;
- its Kubernetes verbs, per namespace or cluster-wide, from the rendered RBAC.

Refused (``check`` returns one finding each):
- project IAM, role, key, pool, attestor or note administration by any CI identity (``FORBIDDEN``);
- ``setIamPolicy`` on anything but what a deploy identity's stack owns (``ALLOWED_SET_IAM``: its checkpoint
  buckets and image repository in its own project, its MultiKueue account);
- token creation on any account, and ``actAs`` on an account that reaches a project or a sensitive
  permission the holder does not have;
- a principal that is not one workflow file at one ref in one declared environment (a branch wildcard, a
  repository-wide set), an environment that lets writes through without a reviewer, an attribute condition
  that drops the repository's immutable ids or admits reusable workflows;
- Kubernetes RBAC that lets a subject we bind create pods or workload objects outside one namespace, or use
  the ``escalate``, ``bind`` or ``impersonate`` verbs, or ``*``;
- a per-stack identity (``ci-<kind>-<stack>``) holding any permission on another stack's resources (its project,
  its checkpoint buckets): one stack's approver reaches no other stack (``stack_scopes``);
- a member of a stack's authoritative IAM policy (its checkpoint bucket's, its repository's) that is not one of
  the stack's own identities: its project's accounts and workload identity principals, its own CI identities,
  the project's basic-role convenience values (``foreign_policy_members``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROLES_FILE = Path(__file__).with_name("data") / "iam_roles.json"
CI_ACCOUNT = re.compile(r"^serviceAccount:(ci-[a-z0-9-]+)@([a-z][-a-z0-9]+)\.iam\.gserviceaccount\.com$")

# Administration no CI identity may hold, anywhere (IAM permission names:
# https://cloud.google.com/iam/docs/permissions-reference).
FORBIDDEN = re.compile(r"^(" + "|".join([
    r"resourcemanager\.(projects|folders|organizations)\.setIamPolicy",
    r"iam\.roles\.(create|update|delete|undelete)",
    r"iam\.serviceAccountKeys\.create",
    r"iam\.serviceAccounts\.(getAccessToken|signBlob|signJwt|implicitDelegation|getOpenIdToken)",
    r"iam\.workloadIdentityPool(s|Providers)\.(create|update|delete|undelete)",
    r"cloudkms\.(cryptoKeys|keyRings|cryptoKeyVersions)\.(create|update|destroy|restore|setIamPolicy)",
    r"cloudkms\.cryptoKeyVersions\.useToSign",  # signing is checked apart: the image identity only
    r"binaryauthorization\.attestors\.(create|update|delete|setIamPolicy)",
    r"containeranalysis\.notes\.(create|update|delete|setIamPolicy)",
]) + r")$")
TOKEN = re.compile(r"^iam\.serviceAccounts\.(getAccessToken|signBlob|signJwt|implicitDelegation|getOpenIdToken)$")
ACT_AS = "iam.serviceAccounts.actAs"
# The setIamPolicy a deploy identity may hold: (permission pattern, the kind of resource it is granted on, why).
ALLOWED_SET_IAM = (
    # What its own stack declares (infra/checkpoints.py, infra/registry.py, workloads/multikueue.py).
    (re.compile(r"storage\.buckets\.setIamPolicy"), "project", "its checkpoint buckets' grants"),
    (re.compile(r"artifactregistry\.repositories\.setIamPolicy"), "project", "its image repository's grants"),
    (re.compile(r"iam\.serviceAccounts\.setIamPolicy"), "multikueue account", "the token job's workload identity"),
    # roles/compute.networkAdmin's resource-level IAM on network objects of its own project: a grant there
    # confers only that object type's permissions, which the role already holds, so the holder gains nothing;
    # it could let another principal in (the stack's IAM-change alert reports any such call).
    (re.compile(r"(compute|networkconnectivity|networksecurity|networkservices)\.[A-Za-z]+\.setIamPolicy"),
     "project", "network objects of its own project (no gain for itself)"),
    # roles/storage.objectAdmin on the state bucket, whose uniform bucket-level access disables object ACLs
    # (https://cloud.google.com/storage/docs/uniform-bucket-level-access: "ACLs ... no longer ... grant access").
    (re.compile(r"storage\.objects\.setIamPolicy"), "bucket", "object ACLs, off under uniform access"),
)
# Signing with a key: the image identity, on its stacks' image signing keys only.
SIGN = "cloudkms.cryptoKeyVersions.useToSign"
# A permission that changes nothing: its verb (the last part) reads, lists, validates or verifies; and two that
# write nothing a caller keeps (a TokenReview answers who a token is; Traffic Director's metrics report).
READ_VERBS = re.compile(r"\.(?:(?:get|list|search|validate|analyze|test|view|query|check|read|watch|export|lookup|"
                        r"explain|connect|stats)[A-Za-z]*|useToDecrypt|useToVerify|usePrivate|use|useReadOnly)$"
                        r"|^container\.tokenReviews\.create$|^trafficdirector\.networks\.reportMetrics$")
# Kubernetes: what lets a subject run code (pods directly, or through a controller that makes them).
WORKLOADS = {"pods", "pods/exec", "pods/attach", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs",
             "cronjobs", "rayclusters", "rayjobs", "rayservices", "replicationcontrollers"}
RBAC_ESCALATION = {"escalate", "bind", "impersonate", "*"}


@dataclass(frozen=True)
class Binding:
    member: str
    role: str
    resource: str  # projects/P, projects/P/serviceAccounts/E, buckets/B, <crypto key id>, projects/P/attestors/A...
    kind: str  # project | account | bucket | key | attestor | note | repository
    condition: str | None = None


@dataclass(frozen=True)
class Finding:
    identity: str
    what: str

    def __str__(self) -> str:
        return f"{self.identity}: {self.what}"


@dataclass
class Reach:
    """One identity's computed reach."""

    member: str
    grants: set[tuple[str, str, str, str | None]] = field(default_factory=set)  # (perm, resource, kind, condition)
    principals: list[str] = field(default_factory=list)
    rbac: set[tuple[str, str, str]] = field(default_factory=set)  # (namespace or '*', resource, verb)

    @property
    def permissions(self) -> set[str]:
        return {p for p, *_ in self.grants}

    @property
    def projects(self) -> set[str]:
        return {r.split("/")[1] for _, r, _, _ in self.grants if r.startswith("projects/")}

    def writes(self) -> set[tuple[str, str, str | None]]:
        return {(p, r, c) for p, r, _, c in self.grants if not READ_VERBS.search(p)}


def load_roles(path: Path = ROLES_FILE) -> dict[str, frozenset[str]]:
    doc = json.loads(path.read_text())
    return {name: frozenset(r["permissions"]) for name, r in doc["roles"].items()}


def _members(inputs: dict) -> list[str]:
    if "members" in inputs:
        return list(inputs["members"] or [])
    return [inputs["member"]] if inputs.get("member") else []


def bindings(resources: Iterable[tuple[str, dict]]) -> tuple[list[Binding], dict[str, frozenset[str]]]:
    """Every IAM binding the registrations declare (members and bindings alike), and the custom roles."""
    out, custom = [], {}
    for typ, i in resources:
        if typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
            custom[f"projects/{i['project']}/roles/{i['roleId']}"] = frozenset(i.get("permissions", []))
    for typ, i in resources:
        base = typ.split(":")[1] if typ.count(":") == 2 else ""
        kind = resource = None
        if base.startswith("projects/iAM") and "role" in i:
            kind, resource = "project", f"projects/{i['project']}"
        elif base.startswith("serviceaccount/iAM"):
            kind, resource = "account", i["serviceAccountId"]
        elif base.startswith("storage/bucketIAM"):
            kind, resource = "bucket", f"buckets/{i['bucket']}"
        elif base.startswith("kms/cryptoKeyIAM"):
            kind, resource = "key", i["cryptoKeyId"]
        elif base.startswith("binaryauthorization/attestorIam"):
            kind, resource = "attestor", f"projects/{i['project']}/attestors/{i['attestor']}"
        elif base.startswith("containeranalysis/noteIam"):
            kind, resource = "note", f"projects/{i['project']}/notes/{i['note']}"
        elif base.startswith("artifactregistry/repositoryIam"):
            kind, resource = "repository", f"projects/{i['project']}/locations/{i['location']}/repositories/" \
                                           f"{i['repository']}"
        if kind is None:
            continue
        if base.endswith(("IAMPolicy", "IamPolicy")) and i.get("policyData"):
            # An authoritative policy: every binding of its policy data (the JSON the provider's getIAMPolicy
            # data source makes: {"bindings": [{"role", "members", "condition"?}]}).
            for b in json.loads(i["policyData"]).get("bindings") or []:
                cond = (b.get("condition") or {}).get("expression")
                out += [Binding(m, b["role"], resource, kind, cond) for m in b.get("members") or []]
            continue
        if "role" not in i:
            continue
        cond = (i.get("condition") or {}).get("expression")
        for m in _members(i):
            out.append(Binding(m, i["role"], resource, kind, cond))
    return out, custom


def stack_scopes(stacks: dict[str, Iterable[tuple[str, dict]]]) -> dict[str, set[str]]:
    """Each stack's own resources, as resource-name prefixes, from its rendering: its project(s) and its checkpoint
    buckets. A stack's registrations name its project in every GCP resource's ``project`` input."""
    out: dict[str, set[str]] = {}
    for stack, resources in stacks.items():
        scope = out.setdefault(stack, set())
        for typ, i in resources:
            if typ.startswith("gcp:") and isinstance(i.get("project"), str):
                scope.add(f"projects/{i['project']}/")
            if typ == "gcp:storage/bucket:Bucket" and i.get("name"):
                scope.add(f"buckets/{i['name']}")
    return out


def _account_email(resource: str) -> str:
    return resource.rsplit("/", 1)[1]


def compute(resources: Iterable[tuple[str, dict]], manifests: Iterable[dict] = (),
            roles: dict[str, frozenset[str]] | None = None) -> dict[str, Reach]:
    """Every service account's and bound Kubernetes subject's reach, closed over actAs and token creation."""
    resources = list(resources)
    roles = roles if roles is not None else load_roles()
    binds, custom = bindings(resources)
    reach: dict[str, Reach] = {}
    unknown = set()
    for b in binds:
        perms = custom.get(b.role) if b.role.startswith("projects/") else roles.get(b.role)
        if perms is None:
            unknown.add(b.role)
            continue
        r = reach.setdefault(b.member, Reach(b.member))
        if b.member.startswith("principal"):
            continue
        for p in perms:
            r.grants.add((p, b.resource, b.kind, b.condition))
        if b.role == "roles/iam.workloadIdentityUser" and b.kind == "account":
            acct = reach.setdefault(f"serviceAccount:{_account_email(b.resource)}",
                                    Reach(f"serviceAccount:{_account_email(b.resource)}"))
            acct.principals.append(b.member)
    for b in binds:
        if b.role == "roles/iam.workloadIdentityUser" and b.kind == "account" and b.member.startswith("principal"):
            acct = reach.setdefault(f"serviceAccount:{_account_email(b.resource)}",
                                    Reach(f"serviceAccount:{_account_email(b.resource)}"))
            if b.member not in acct.principals:
                acct.principals.append(b.member)
    if unknown:
        raise KeyError(f"roles not vendored in {ROLES_FILE.name} (add them with their source): {sorted(unknown)}")
    for doc in manifests:
        _rbac(doc, manifests, reach)
    return reach


def _rules_of(manifests: Iterable[dict], kind: str, name: str, namespace: str | None) -> list[dict]:
    for d in manifests:
        md = d.get("metadata", {})
        if d.get("kind") == kind and md.get("name") == name and (kind == "ClusterRole" or md.get("namespace") ==
                                                                 namespace):
            return d.get("rules") or []
    return []


def _rbac(doc: dict, manifests: Iterable[dict], reach: dict[str, Reach]) -> None:
    if doc.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
        return
    ref = doc.get("roleRef", {})
    ns = doc.get("metadata", {}).get("namespace") if doc["kind"] == "RoleBinding" else "*"
    rules = _rules_of(manifests, ref.get("kind", ""), ref.get("name", ""), ns)
    for subject in doc.get("subjects") or []:
        who = (f"serviceAccount:{subject['name']}" if subject.get("kind") == "User" and "@" in subject.get("name", "")
               else f"k8s:{subject.get('kind')}:{subject.get('namespace', ns)}/{subject.get('name')}")
        r = reach.setdefault(who, Reach(who))
        for rule in rules:
            for res in rule.get("resources") or []:
                for verb in rule.get("verbs") or []:
                    r.rbac.add((ns, res, verb))


@dataclass(frozen=True)
class Environments:
    """The GitHub side: each declared environment's protection, as the bootstrap renders it."""

    reviewed: dict[str, bool]  # name -> required reviewers with prevent-self-review and no admin bypass
    main_only: dict[str, bool]

    @classmethod
    def from_resources(cls, resources: Iterable[tuple[str, dict]]) -> Environments:
        reviewed, main_only = {}, {}
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


def minted_by(principal: str) -> tuple[str, str, str | None] | None:
    """(workflow file, 'main' or 'pull request', environment) of a principal, or None for any wider set."""
    m = PRINCIPAL.match(principal)
    if not m:
        return None
    if m.group("prfile"):
        return m.group("prfile"), "pull request", m.group("prenv")
    return m.group("file"), "main", m.group("env")


def foreign_policy_members(stacks: dict[str, Iterable[tuple[str, dict]]]) -> list[Finding]:
    """Every member of a stack's authoritative policies that is not the stack's own: one finding each. The policy
    is what the next `up` makes the resource's whole IAM, so a member here is a grant the stack keeps in place."""
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
            return _own_stack(m.group(1), scopes) == stack
        return rest.rsplit("@", 1)[-1].removesuffix(".iam.gserviceaccount.com") in projects
    if kind == "principal":
        pool = re.search(r"/workloadIdentityPools/([^/]+)\.svc\.id\.goog/", member)
        return bool(pool) and pool.group(1) in projects
    return False


def _own_stack(who: str, scopes: dict[str, set[str]]) -> str | None:
    """The stack of a per-stack CI account (``ci-<kind>-<stack>``), the longest stack name that fits."""
    fits = [s for s in scopes if re.fullmatch(rf"ci-[a-z]+-{re.escape(s)}", who)]
    return max(fits, key=len) if fits else None


def _in(resource: str, scope: set[str]) -> bool:
    return any(resource.startswith(p) or resource + "/" == p for p in scope)


def check(reach: dict[str, Reach], envs: Environments, attribute_condition: str,
          signing_keys: set[str] = frozenset(), multikueue_accounts: set[str] = frozenset(),
          scopes: dict[str, set[str]] | None = None) -> list[Finding]:
    """Every path to more than an identity's row: one finding each (empty: nothing escalates). ``scopes``: each
    stack's own resources (:func:`stack_scopes`); a per-stack identity may hold nothing in another's."""
    out: list[Finding] = []
    for cond in ("assertion.repository_id ==", "assertion.repository_owner_id ==",
                 "assertion.workflow_ref == assertion.job_workflow_ref"):
        if cond not in attribute_condition:
            out.append(Finding("pool", f"the attribute condition lacks `{cond}`: {attribute_condition}"))
    ci = {m: r for m, r in reach.items() if CI_ACCOUNT.match(m)}
    scopes = scopes or {}
    for member, r in sorted(ci.items()):
        who = CI_ACCOUNT.match(member).group(1)
        own = _own_stack(who, scopes)
        if own is not None:
            for other, scope in sorted(scopes.items()):
                if other == own:
                    continue
                foreign = sorted({(p, res) for p, res, _, _ in r.grants
                                  if _in(res, scope) and not _in(res, scopes[own])})
                if foreign:
                    out.append(Finding(who, f"reaches the {other} stack's {foreign[0][1]} ({foreign[0][0]}, "
                                            f"{len(foreign)} permissions): one stack's identity acts on its own"))
        for perm, resource, kind, _ in sorted(r.grants, key=str):
            if perm == SIGN and kind == "key" and resource in signing_keys and who.startswith("ci-image"):
                continue
            if FORBIDDEN.match(perm):
                out.append(Finding(who, f"{perm} on {resource}"))
            elif perm.endswith(".setIamPolicy"):
                kind_ = "multikueue account" if kind == "account" and _account_email(
                    resource) in multikueue_accounts else kind
                if not (who.startswith("ci-deploy-") and any(
                        pat.fullmatch(perm) and k == kind_ for pat, k, _ in ALLOWED_SET_IAM)):
                    out.append(Finding(who, f"{perm} on {resource} (changes who may act on it)"))
            elif perm == ACT_AS:
                target = reach.get(f"serviceAccount:{_account_email(resource)}")
                if target is not None and _stronger(target, r):
                    out.append(Finding(who, f"actAs {_account_email(resource)}, which reaches more: "
                                            f"{sorted(_more(target, r))[:5]}"))
        # Who can become it, and whether a reviewer stands between a writer and the token.
        writes = {w for w in r.writes() if not (w[2] and "/locks/" in w[2])}
        if r.grants and not r.principals:
            out.append(Finding(who, "no workload identity principal: nothing in CI can use it"))
        for p in r.principals:
            minted = minted_by(p)
            if minted is None:
                out.append(Finding(who, f"principal wider than one workflow file at one ref in one environment: {p}"))
                continue
            file, ref, env = minted
            if env is None:
                out.append(Finding(who, f"{file} on {ref} without an environment: no per-stack subject, no review"))
            elif env not in envs.reviewed:
                out.append(Finding(who, f"environment {env} is not declared (GitHub would create it bare)"))
            elif writes and not envs.reviewed[env]:
                out.append(Finding(who, f"writes ({len(writes)}) behind {env}, which has no required reviewer"))
            elif ref == "main" and not envs.main_only.get(env):
                out.append(Finding(who, f"environment {env} is not limited to main"))
    for member, r in sorted(reach.items()):
        for ns, res, verb in sorted(r.rbac):
            who = member.removeprefix("serviceAccount:")
            if verb in RBAC_ESCALATION:
                out.append(Finding(who, f"Kubernetes verb {verb!r} on {res} ({'cluster-wide' if ns == '*' else ns})"))
            elif ns == "*" and res in WORKLOADS and verb in ("create", "update", "patch"):
                out.append(Finding(who, f"Kubernetes {verb} {res} cluster-wide (runs pods in any namespace)"))
    return out


SENSITIVE = re.compile(FORBIDDEN.pattern[:-2] + r"|.*\.setIamPolicy)$")


def _more(target: Reach, holder: Reach) -> set[str]:
    extra = {f"project {p}" for p in target.projects - holder.projects}
    extra |= {p for p in target.permissions if SENSITIVE.match(p) and p not in holder.permissions}
    return extra


def _stronger(target: Reach, holder: Reach) -> bool:
    return bool(_more(target, holder))


# --- the threat tables (docs/threat-model.md), generated from the computation ---------------------------------


def _service(perm: str) -> str:
    return perm.split(".")[0]


def threat_tables(reach: dict[str, Reach], envs: Environments) -> str:
    """Markdown: per CI identity, who can become it and what it reaches; per Kubernetes subject, its verbs."""
    lines = ["| identity | who can become it | reaches | writes (by service) | refused paths |",
             "|---|---|---|---|---|"]
    for member, r in sorted(reach.items()):
        m = CI_ACCOUNT.match(member)
        if not m or not (r.grants or r.principals):
            continue  # not a CI account (or one only a stack's RBAC names, for a stack not drilled)
        who = []
        for p in r.principals:
            minted = minted_by(p)
            if minted:
                file, ref, env = minted
                gate = "reviewed" if envs.reviewed.get(env or "") else "no reviewer"
                who.append(f"`{file}` on {ref} in `{env}` ({gate})")
        scopes = sorted({f"{k} `{res}`" for _, res, k, _ in r.grants})
        writes: dict[str, int] = {}
        for p, _, c in r.writes():
            key = _service(p) + (" (locks only)" if c and "/locks/" in c else "")
            writes[key] = writes.get(key, 0) + 1
        held = {p for p in r.permissions}
        refused = ("no project IAM, role, key, pool or attestor administration; no token creation"
                   if not any(FORBIDDEN.match(p) and p != SIGN for p in held) else "SEE FINDINGS")
        lines.append(f"| `{m.group(1)}` | {'; '.join(who) or 'nobody'} | {len(held)} permissions on "
                     f"{', '.join(scopes)} | {', '.join(f'{k} {v}' for k, v in sorted(writes.items())) or 'none'} "
                     f"| {refused} |")
    k8s = ["", "| Kubernetes subject | namespace | writes |", "|---|---|---|"]
    for member, r in sorted(reach.items()):
        if not r.rbac:
            continue
        by_ns: dict[str, set[str]] = {}
        for ns, res, verb in r.rbac:
            if verb not in ("get", "list", "watch"):
                by_ns.setdefault(ns, set()).add(f"{verb} {res}")
        for ns, verbs in sorted(by_ns.items()):
            k8s.append(f"| `{member.removeprefix('serviceAccount:')}` | "
                       f"{'cluster-wide' if ns == '*' else f'`{ns}`'} | {', '.join(sorted(verbs))} |")
    return "\n".join(lines + k8s) + "\n"
