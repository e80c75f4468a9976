"""The GCP half: every IAM binding the registrations declare, each identity's own permissions, and who can become
whom (the edges the closure in ``check`` follows).

Fail closed: a registration whose type names IAM or an ACL and that this module cannot read is returned as
``unparsed`` (``check`` refuses it), and an account the rendering does not create counts as stronger than anyone.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .conditions import admits

DATA = Path(__file__).resolve().parents[1] / "data"
ROLES_FILE = DATA / "iam_roles.json"
CI_ACCOUNT = re.compile(r"^serviceAccount:(ci-[a-z0-9-]+)@([a-z][-a-z0-9]+)\.iam\.gserviceaccount\.com$")

# Administration no identity may hold, anywhere (IAM permission names:
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
    # Rhino Security Labs' GCP IAM privilege-escalation methods (tests/reference/escalation/): an organization
    # policy lifted (e.g. the one that forbids service account keys), and API keys made or read.
    r"orgpolicy\.policy\.set",
    r"serviceusage\.apiKeys\.(create|list|getKeyString|update)",
    r"apikeys\.keys\.(create|getKeyString|update|undelete)",
    # A log sink exports the project's logs (audit logs included) anywhere, or an exclusion silences them
    # (https://cloud.google.com/logging/docs/export/configure_export_v2).
    r"logging\.sinks\.(create|update)",
    r"logging\.exclusions\.(create|update)",
]) + r")$")
ACT_AS = "iam.serviceAccounts.actAs"
# Holding one of these on an account (or on the project/folder/organization above it: IAM inherits downwards,
# https://cloud.google.com/iam/docs/service-account-permissions) is becoming that account: actAs attaches it to a
# resource that runs code, the token family mints its credentials, a key is a credential, and setIamPolicy on it
# grants any of these to oneself (https://cloud.google.com/iam/docs/service-accounts-actas).
BECOME = {ACT_AS, "iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.signBlob", "iam.serviceAccounts.signJwt",
          "iam.serviceAccounts.implicitDelegation", "iam.serviceAccounts.getOpenIdToken",
          "iam.serviceAccounts.setIamPolicy", "iam.serviceAccountKeys.create"}
# Holding one of these on a project (or above) is running code as an account of it, one the holder names with actAs
# or, named none, the service's default one (Compute Engine's, App Engine's, Cloud Build's: accounts the rendering
# does not create): Rhino Security Labs' methods (tests/reference/escalation/: Cloud Build, Deployment Manager,
# Cloud Functions, Cloud Run, Compute Engine, Cloud Scheduler), the other services that run code as an account
# (Dataproc, Composer, Dataflow, Workflows, Vertex AI, Notebooks, Cloud Tasks), a shell on a VM (SSH keys in
# instance or project metadata, OS Login: https://cloud.google.com/compute/docs/connect/add-ssh-keys), and an HMAC
# key, which is storage access as any account of the project (https://cloud.google.com/storage/docs/authentication/hmackeys).
RUNS_CODE = re.compile(r"^(" + "|".join([
    r"cloudbuild\.builds\.(create|update|approve)",
    r"deploymentmanager\.deployments\.(create|update)",
    r"cloudfunctions\.functions\.(create|update|sourceCodeSet)",
    r"run\.(services|jobs)\.(create|update)|run\.jobs\.runWithOverrides",
    r"compute\.instances\.(create|setMetadata|setServiceAccount|osLogin|osAdminLogin)",
    r"compute\.projects\.setCommonInstanceMetadata",
    # A group's update points it at an instance template; a template that runs other code needs
    # compute.instanceTemplates.create, which no role here holds (roles/compute.networkAdmin holds update, for the
    # node pools' named ports): create alone makes instances.
    r"compute\.instanceGroupManagers\.create",
    r"cloudscheduler\.jobs\.(create|update)",
    r"cloudtasks\.tasks\.create",
    r"dataproc\.(clusters|jobs|batches|sessions)\.create|dataproc\.workflowTemplates\.instantiate(Inline)?",
    r"composer\.environments\.(create|update)",
    r"dataflow\.jobs\.create",
    r"workflows\.workflows\.(create|update)",
    r"aiplatform\.(customJobs|pipelineJobs|trainingPipelines)\.create",
    r"notebooks\.(instances|runtimes)\.create",
    r"storage\.hmacKeys\.create",
]) + r")$")
# Signing with a key: the image identity, on its stacks' image signing keys only.
SIGN = "cloudkms.cryptoKeyVersions.useToSign"
# Switching Binary Authorization off: the project policy's defaultAdmissionRule ALWAYS_ALLOW or an
# admissionWhitelistPatterns entry admits any image whatever the attestor says
# (https://cloud.google.com/binary-authorization/docs/policy-yaml-reference).
BINAUTHZ_POLICY = "binaryauthorization.policy.update"
# Reads that hand out secrets are not reads: a Kubernetes Secret's value (the MultiKueue kubeconfig tokens, the Kueue
# webhook key) or a Secret Manager version's payload.
SECRET_READS = re.compile(r"^container\.secrets\.(get|list|watch)$|^secretmanager\.versions\.access$")
# A permission that changes nothing: its verb (the last part) reads, lists, validates or verifies; and two that
# write nothing a caller keeps (a TokenReview answers who a token is; Traffic Director's metrics report).
READ_VERBS = re.compile(r"\.(?:(?:get|list|search|validate|analyze|test|view|query|check|read|watch|export|lookup|"
                        r"explain|connect|stats)[A-Za-z]*|useToDecrypt|useToVerify|usePrivate|use|useReadOnly)$"
                        r"|^container\.tokenReviews\.create$|^trafficdirector\.networks\.reportMetrics$")


@functools.cache  # a pure function of the name, asked for every grant of every check (tests/test_escalation.py)
def is_read(perm: str) -> bool:
    return bool(READ_VERBS.search(perm)) and not SECRET_READS.match(perm)


# Workload identity federation for GKE: a Kubernetes service account as an IAM member, in both spellings
# (https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity#principal-identifiers, and the older
# serviceAccount:PROJECT.svc.id.goog[NS/KSA] member).
GKE_PRINCIPAL = re.compile(r"^principal(?:Set)?://iam\.googleapis\.com/projects/[^/]+/locations/global/"
                           r"workloadIdentityPools/(?P<project>[^/]+)\.svc\.id\.goog/"
                           r"(?:subject/ns/(?P<ns>[^/]+)/sa/(?P<sa>[^/]+)|namespace/(?P<nsall>[^/]+)|.*)$"
                           r"|^serviceAccount:(?P<lproject>[^.]+)\.svc\.id\.goog\[(?P<lns>[^/]+)/(?P<lsa>[^\]]+)\]$")


def federated(member: str) -> bool:
    """A workload identity federation member: a GitHub pool's principal(Set), or a GKE workload's."""
    return member.startswith(("principal://", "principalSet://")) or bool(GKE_PRINCIPAL.match(member))


WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
WORKLOAD_IDENTITY = "workload identity"  # the edge label of a federated principal's use of its account


def gke_principal(member: str) -> tuple[str, str, str] | None:
    """(project, namespace or '*', service account or '*') of a GKE workload identity member."""
    m = GKE_PRINCIPAL.match(member)
    if not m:
        return None
    if m.group("lproject"):
        return m.group("lproject"), m.group("lns"), m.group("lsa")
    return m.group("project"), m.group("ns") or m.group("nsall") or "*", m.group("sa") or "*"


@dataclass(frozen=True)
class Binding:
    member: str
    role: str
    resource: str  # projects/P, projects/P/serviceAccounts/E, buckets/B, <crypto key id>, organizations/O ...
    kind: str  # organization | folder | project | account | bucket | key ring | key | attestor | note | repository
    condition: str | None = None


@dataclass
class Reach:
    """One identity's own reach, and its edges to identities it can become."""

    member: str
    grants: set[tuple[str, str, str, str | None]] = field(default_factory=set)  # (perm, resource, kind, condition)
    roles: set[tuple[str, str, str]] = field(default_factory=set)  # (role, resource, kind): the bindings themselves
    principals: list[str] = field(default_factory=list)
    # (namespace or '*', resource, verb, resourceNames joined or ''): from the manifests' RBAC
    rbac: set[tuple[str, str, str, str]] = field(default_factory=set)
    # the same, from GKE IAM (container.* on a project: every cluster in it; see kubernetes.gke_rbac)
    gke: set[tuple[str, str, str, str]] = field(default_factory=set)
    becomes: dict[str, str] = field(default_factory=dict)  # identity -> the edge ("actAs", "pods in maxtext", ...)

    @property
    def permissions(self) -> set[str]:
        return {p for p, *_ in self.grants}

    @property
    def projects(self) -> set[str]:
        # An account grant's resource name (projects/P/serviceAccounts/E) reaches that account, not project P.
        return {r.split("/")[1] for _, r, k, _ in self.grants if r.startswith("projects/") and k != "account"}

    def writes(self) -> set[tuple[str, str, str | None]]:
        return {(p, r, c) for p, r, _, c in self.grants if not is_read(p)}


class Reaches(dict):
    """identity -> Reach, plus what the parser refused to guess: registrations it cannot read, roles it does not
    know, and the accounts each project holds that the rendering creates."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.unparsed: list[str] = []
        self.unknown_roles: list[str] = []  # Kubernetes roleRefs no manifest defines and nothing vendors
        self.accounts: set[str] = set()  # serviceAccount:<email> the rendering creates
        self.job_namespaces: set[str] = set()  # Kubernetes namespaces with a Kueue LocalQueue
        # (namespace, service account, ConfigMaps its pods mount): a pod template the manifests declare
        self.pod_templates: set[tuple[str, str, frozenset[str]]] = set()
        # (namespace, Secret) -> the Kubernetes service accounts whose tokens a token job writes there
        self.secret_tokens: dict[tuple[str, str], set[str]] = {}
        # A bucket's representative objects (stacks.state_objects): grant resource -> (stack or None, kind)
        self.objects: dict[str, tuple[str | None, str]] = {}
        # Kubernetes service account -> the Google service account it is annotated with (workload identity)
        self.ksa_accounts: dict[str, str] = {}
        # (namespace, Service) an admission webhook the manifests declare calls (its clientConfig.service)
        self.webhook_services: set[tuple[str, str]] = set()
        # Declared admission webhooks that call a URL (clientConfig.url): a server outside the model answers them
        self.webhook_urls: list[str] = []
        # Kubernetes service accounts whose pods run a token job (mount a ConfigMap holding targets.json)
        self.token_jobs: set[str] = set()

    def get_or_add(self, member: str) -> Reach:
        return self.setdefault(member, Reach(member))

    def absorb(self, other: Reaches) -> None:
        """Add another rendering's Kubernetes side (one stack's manifests) to this one."""
        for member, r in other.items():
            mine = self.get_or_add(member)
            mine.rbac |= r.rbac
            for k, v in r.becomes.items():
                mine.becomes.setdefault(k, v)
        self.unparsed += other.unparsed
        self.unknown_roles += other.unknown_roles
        self.accounts |= other.accounts
        self.job_namespaces |= other.job_namespaces
        self.pod_templates |= other.pod_templates
        self.objects |= other.objects
        self.ksa_accounts |= other.ksa_accounts
        self.webhook_services |= other.webhook_services
        self.webhook_urls += other.webhook_urls
        self.token_jobs |= other.token_jobs
        for k, v in other.secret_tokens.items():
            self.secret_tokens.setdefault(k, set()).update(v)


def load_roles(path: Path = ROLES_FILE) -> dict[str, frozenset[str]]:
    """The vendored roles: role -> its permissions. Read once per process and file (the check reads them per
    cluster); each caller gets its own dict (the sets are frozen)."""
    return dict(_roles(path, path.stat().st_mtime_ns))


@functools.cache
def _roles(path: Path, _mtime_ns: int) -> dict[str, frozenset[str]]:
    doc = json.loads(path.read_text())
    return {name: frozenset(r["permissions"]) for name, r in doc["roles"].items()}


def _members(inputs: dict) -> list[str]:
    if "members" in inputs:
        return list(inputs["members"] or [])
    return [inputs["member"]] if inputs.get("member") else []


# The IAM resource families the parser reads: (type prefix after the module, kind, resource name from inputs).
# Type tokens: https://www.pulumi.com/registry/packages/gcp/api-docs/ (each family has IAMMember, IAMBinding and
# IAMPolicy; the Policy carries policyData, the JSON of a full policy: {"bindings": [{role, members, condition}]}).
FAMILIES = (
    ("organizations/iAM", "organization", lambda i: f"organizations/{i['orgId']}"),
    ("folder/iAM", "folder", lambda i: i["folder"] if i["folder"].startswith("folders/") else f"folders/{i['folder']}"),
    ("projects/iAM", "project", lambda i: f"projects/{i['project']}"),
    ("serviceaccount/iAM", "account", lambda i: i["serviceAccountId"]),
    ("storage/bucketIAM", "bucket", lambda i: f"buckets/{i['bucket'].removeprefix('b/')}"),
    ("kms/keyRingIAM", "key ring", lambda i: i["keyRingId"]),
    ("kms/cryptoKeyIAM", "key", lambda i: i["cryptoKeyId"]),
    ("binaryauthorization/attestorIam", "attestor", lambda i: f"projects/{i['project']}/attestors/{i['attestor']}"),
    ("containeranalysis/noteIam", "note", lambda i: f"projects/{i['project']}/notes/{i['note']}"),
    ("artifactregistry/repositoryIam", "repository",
     lambda i: f"projects/{i['project']}/locations/{i['location']}/repositories/{i['repository']}"),
)
# A type token that grants access: its resource name says IAM, ACL or access (storage/bucketACL,
# storage/defaultObjectAccessControl, secretmanager/secretIamMember, compute/instanceIAMMember,
# bigquery/datasetAccess, ...).
ACCESS_TYPE = re.compile(r"(?i)iam(member|binding|policy|auditconfig)$|acl$|accesscontrol$|access$")


def bindings(resources: Iterable[tuple[str, dict]]) -> tuple[list[Binding], dict[str, frozenset[str]], list[str]]:
    """Every IAM binding the registrations declare (members, bindings and policies alike), the custom roles, and
    every access-granting registration the parser cannot read (``check`` refuses each)."""
    out, custom, unparsed = [], {}, []
    resources = list(resources)
    for typ, i in resources:
        if typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
            custom[f"projects/{i['project']}/roles/{i['roleId']}"] = frozenset(i.get("permissions", []))
    for typ, i in resources:
        base = typ.split(":")[1] if typ.count(":") == 2 else ""
        name = base.rsplit("/", 1)[-1]
        if not ACCESS_TYPE.search(name):  # IAMCustomRole defines a role (read above), grants nothing
            continue
        family = next(((kind, where) for prefix, kind, where in FAMILIES
                       if base.startswith(prefix) and typ.startswith("gcp:")), None)
        if family is None or name.lower().endswith("auditconfig"):
            unparsed.append(f"{typ} ({json.dumps(i, sort_keys=True, default=str)[:120]})")
            continue
        kind, where = family
        try:
            resource = where(i)
            if name.lower().endswith("policy"):
                data = i.get("policyData", i.get("policy_data"))
                policy = json.loads(data) if isinstance(data, str) else data
                entries = [(b["role"], b.get("members") or [], (b.get("condition") or {}).get("expression"))
                           for b in policy.get("bindings") or []]
            else:
                entries = [(i["role"], _members(i), (i.get("condition") or {}).get("expression"))]
        except (KeyError, TypeError, ValueError, AttributeError):
            unparsed.append(f"{typ} (unreadable inputs: {json.dumps(i, sort_keys=True, default=str)[:120]})")
            continue
        for role, members, cond in entries:
            for m in members:
                out.append(Binding(m, role, resource, kind, cond))
    return out, custom, unparsed


def account_email(resource: str) -> str:
    return resource.rsplit("/", 1)[1]


def unknown_accounts(where: str) -> str:
    """The pseudo-identity for the accounts under ``where`` that the rendering does not create."""
    return f"unknown:accounts the rendering does not create under {where}"


def _applies_to(b: Binding, objects: dict[str, dict[str, tuple[str | None, str]]]) -> list[tuple[str, str]]:
    """(resource, kind) a binding applies to: on a bucket whose objects are known, the bucket itself and each
    representative object its condition admits (CEL, evaluated: ``conditions.admits``); else the resource whole."""
    bucket = b.resource.removeprefix("buckets/") if b.kind == "bucket" else None
    if bucket not in objects:
        return [(b.resource, b.kind)]
    out = []
    for name in objects[bucket]:
        if admits(b.condition, name):
            obj = name.partition("/objects/")[2]
            out.append((f"buckets/{bucket}/objects/{obj}", "object") if obj else (b.resource, b.kind))
    return out


def compute_gcp(resources: list[tuple[str, dict]], roles: dict[str, frozenset[str]], reach: Reaches,
                objects: dict[str, dict[str, tuple[str | None, str]]] | None = None) -> None:
    """Each member's own grants, and its IAM edges: the accounts it can become. ``objects``: each bucket's
    representative object names (full CEL resource names) and their owner, so a conditional bucket grant counts
    on exactly the objects its condition admits."""
    objects = objects or {}
    reach.objects = {f"buckets/{b}/objects/{n.partition('/objects/')[2]}": owner for b, names in objects.items()
                     for n, owner in names.items() if "/objects/" in n}
    binds, custom, reach.unparsed = bindings(resources)
    reach.accounts = {f"serviceAccount:{i['accountId']}@{i['project']}.iam.gserviceaccount.com"
                      for t, i in resources if t == "gcp:serviceaccount/account:Account"}
    unknown = set()
    for b in binds:
        perms = custom.get(b.role) if b.role.startswith(("projects/", "organizations/")) else roles.get(b.role)
        if perms is None:
            unknown.add(b.role)
            continue
        r = reach.get_or_add(b.member)
        r.roles.add((b.role, b.resource, b.kind))
        for resource, kind in _applies_to(b, objects):
            for p in perms:
                r.grants.add((p, resource, kind, b.condition))
        if b.role == WORKLOAD_IDENTITY_USER and b.kind == "account":
            acct = reach.get_or_add(f"serviceAccount:{account_email(b.resource)}")
            if b.member not in acct.principals:
                acct.principals.append(b.member)
    if unknown:
        raise KeyError(f"roles not vendored in {ROLES_FILE.name} (add them with their source): {sorted(unknown)}")
    for member, r in list(reach.items()):
        # Only the grants that are edges, in the order of all grants sorted (a sorted subset keeps that order; the
        # first edge to a target names it): sorting every grant of every member was most of this loop.
        edges = [g for g in r.grants if g[0] in BECOME or (g[2] in ("project", "folder", "organization")
                                                           and RUNS_CODE.match(g[0]))]
        for perm, resource, kind, _ in sorted(edges, key=str):
            if kind == "account":
                target = f"serviceAccount:{account_email(resource)}"
                if target not in reach.accounts:
                    target = unknown_accounts(target.removeprefix("serviceAccount:"))
                # A federated principal's workload identity use of an account: the same workload, signed in.
                wi = (WORKLOAD_IDENTITY_USER, resource, kind) in r.roles and federated(member)
                r.becomes.setdefault(target, WORKLOAD_IDENTITY if wi else perm.rsplit(".", 1)[1])
            elif kind in ("project", "folder", "organization"):
                # IAM inherits downwards: every account in the project (or under the folder or organization),
                # those the rendering creates and those it does not (the Compute Engine default account, service
                # agents, an operator's): the latter are counted stronger than anyone (fail closed).
                project = resource.split("/")[1] if kind == "project" else None
                for acct in reach.accounts:
                    if project is None or acct.endswith(f"@{project}.iam.gserviceaccount.com"):
                        r.becomes.setdefault(acct, f"{perm.rsplit('.', 1)[1]} on {resource}")
                r.becomes.setdefault(unknown_accounts(resource), f"{perm.rsplit('.', 1)[1]} on {resource}")
    for u in {t for r in reach.values() for t in r.becomes if t.startswith("unknown:")}:
        reach.get_or_add(u)
