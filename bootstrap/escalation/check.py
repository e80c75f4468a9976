"""Every identity's closed reach, and every path to more than its row refused (``check``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from stackspec.names import MULTIKUEUE_MANAGER_KSA

from .finding import Finding
from .gcp import (
    BECOME,
    BINAUTHZ_POLICY,
    CI_ACCOUNT,
    FORBIDDEN,
    SIGN,
    WORKLOAD_IDENTITY,
    Reach,
    Reaches,
    account_email,
    compute_gcp,
    federated,
    gke_principal,
    load_roles,
)
from .kubernetes import (
    add_gke,
    cluster_project,
    compute_rbac,
    ksa_parts,
    link_principals,
    link_secrets,
    runs,
    split_ns,
)
from .kubernetes import findings as kubernetes_findings
from .pool import GITHUB_POOL, Environments, condition_problems, minted_by
from .stacks import cross_stack, stack_of

# Object ACLs: granted with roles/storage.objectAdmin on a bucket or on one object.
_OBJECT_ACLS = re.compile(r"storage\.objects\.setIamPolicy")

# The setIamPolicy a deploy identity may hold: (permission, the kind of resource it is granted on, why).
ALLOWED_SET_IAM = (
    # What its own stack declares (infra/checkpoints.py, infra/registry.py, workloads/multikueue.py).
    (re.compile(r"storage\.buckets\.setIamPolicy"), "project", "its checkpoint buckets' grants"),
    (re.compile(r"artifactregistry\.repositories\.setIamPolicy"), "project", "its image repository's grants"),
    # The token job's workload identity: full control of who may act as that account, so it is also an edge of
    # the closure (gcp.BECOME): the account's whole reach counts as the holder's, and must be no more.
    (re.compile(r"iam\.serviceAccounts\.setIamPolicy"), "multikueue account", "the token job's workload identity"),
    # roles/compute.networkAdmin's resource-level IAM on the network objects it manages: a grant there confers
    # only that object type's use, which the role already holds (the stack's IAM-change alert reports any call).
    # Named one by one: compute.instances.setIamPolicy (instance admin -> setMetadata -> root on a node) is not one.
    (re.compile(r"compute\.(subnetworks|backendBuckets|backendServices|regionBackendBuckets|regionBackendServices|"
                r"networkAttachments|serviceAttachments)\.setIamPolicy|networkconnectivity\.(internalRanges|"
                r"policyBasedRoutes)\.setIamPolicy|networksecurity\.(addressGroups|authorizationPolicies|authzPolicies|"
                r"clientTlsPolicies|serverTlsPolicies)\.setIamPolicy|networkservices\.httpfilters\.setIamPolicy"),
     "project", "network objects of its own project (no gain for itself)"),
    # roles/storage.objectAdmin on the state bucket, whose uniform bucket-level access disables object ACLs
    # (https://cloud.google.com/storage/docs/uniform-bucket-level-access: "ACLs ... no longer ... grant access").
    *((_OBJECT_ACLS, scope, "object ACLs, off under uniform access") for scope in ("bucket", "object")),
)
# Paths the design accepts, each for one identity pattern and only behind a reviewed, main-only environment (for a
# CI account) or in one namespace (for the MultiKueue manager). ``check`` still reports them, marked accepted, so
# the threat model lists them; any other identity holding the same is refused.
DEPLOYER = re.compile(r"^ci-deploy-[a-z0-9-]+$")
ACCEPTED = {
    "gke": ("the deployer applies the stack's Kubernetes objects (roles/container.admin: cluster-admin in every "
            "cluster of its stack's project, by design); the deploy-<stack> environment's reviewer is the guard"),
    "binauthz": ("the deployer applies the stack's Binary Authorization policy (infra/cluster_security.py), so it can "
                 "switch attestation off for its project; the deploy-<stack> environment's reviewer is the guard"),
    "token job": ("the token job (workloads/multikueue.py) mints the tokens its targets declare, as its Kubernetes "
                  "service account or the Google account that account signs in as, into the Secrets Kueue reads"),
    "multikueue": ("the MultiKueue manager creates the admitted Ray jobs in the workers' job namespace "
                   "(workloads/multikueue.py): a namespace with a Kueue LocalQueue, not cluster-wide"),
    "kueue": ("Kueue's own controller, as its release manifest grants it (workloads/kueue_install.py): it suspends, "
              "admits and resumes jobs in every namespace, its cert rotator updates its own two webhook "
              "configurations (resourceNames) with their CA bundle, and on the MultiKueue manager it reads the "
              "worker kubeconfig Secrets the token job fills (and its release manifest's update on Secrets of "
              "kueue-system, for its webhook certificate, reaches them: its own input, nothing it lacks)"),
}
# Kueue's controller and the MultiKueue manager, in any one cluster (``kubernetes.qualify``: kueue-system@<cluster>).
KUEUE_CONTROLLER = re.compile(r"^k8s:ServiceAccount:kueue-system(@[^/]+)?/kueue-controller-manager$")
KUEUE_CONTROLLER_PATHS = re.compile(r"^Kubernetes (patch|update) of pod-making kinds|^Kubernetes admission control "
                                    r"writes|^Kubernetes the Secrets Kueue reads \(")
MULTIKUEUE_MANAGER = re.compile(r"^k8s:ServiceAccount:kueue-system(@[^/]+)?/[a-z0-9-]*multikueue$")
MULTIKUEUE_KINDS = {"rayjobs", "rayclusters", "workloads"}
# What an account reaching more than its holder means: a project the holder does not reach, or a sensitive permission.
SENSITIVE = re.compile(FORBIDDEN.pattern[:-2] + r"|.*\.setIamPolicy|" + re.escape(BINAUTHZ_POLICY) + r")$")


def compute(resources: Iterable[tuple[str, dict]], manifests: Iterable[dict] = (),
            roles: dict[str, frozenset[str]] | None = None,
            objects: dict[str, dict[str, tuple[str | None, str]]] | None = None,
            cluster: str | None = None) -> Reaches:
    """Every identity's own reach and edges: IAM bindings (GCP; a conditional bucket grant on the ``objects`` its
    condition admits, ``stacks.state_objects``), RBAC (the manifests, all of one cluster: ``cluster``, its
    ``kubernetes.cluster_id``), GKE IAM as Kubernetes."""
    reach = Reaches()
    compute_gcp(list(resources), roles if roles is not None else load_roles(), reach, objects)
    compute_rbac(manifests, reach, cluster=cluster)
    add_gke(reach)
    return reach


def _short(member: str) -> str:
    m = CI_ACCOUNT.match(member)
    return m.group(1) if m else member.removeprefix("serviceAccount:")


def _kueue_path(member: str, first_edge: str, more: set[str], routine: bool, reach: Reaches) -> str | None:
    """Kueue's controller reaching a pod's account by patching its job (suspend, admit, resume: the release
    manifest's cluster-wide patch/update of pod-making kinds, accepted by name as its RBAC finding is). Past the
    manager's token job it also reaches what that job mints, the MultiKueue account's project read (get-credentials)
    and its jobs in the workers: the worker kubeconfigs the controller reads by design give it those already.
    On the MultiKueue manager it reads the worker kubeconfig Secrets the token job fills (declared in its ConfigMap,
    in the controller's own cluster): the workers' MultiKueue accounts, whose Kubernetes powers are the Ray jobs.
    Anything else past the edge (a sensitive permission, a project other than its own cluster's) is refused."""
    if not KUEUE_CONTROLLER.match(member):
        return None
    mine = (ksa_parts(member) or ("", None, ""))[1]
    read = re.match(r"^(get|list|watch) secret (\S+) in (\S+) \(", first_edge)
    if read and (read.group(3), read.group(2)) in reach.secret_tokens and split_ns(read.group(3))[1] == mine:
        return ACCEPTED["kueue"] if routine else None
    if not re.match(r"^(patch|update) \S+ in \S+ ", first_edge):
        return None
    token_job = first_edge.endswith(f"/{MULTIKUEUE_MANAGER_KSA}") or f"[kueue-system/{MULTIKUEUE_MANAGER_KSA}]" in \
        first_edge
    own = cluster_project(mine)
    if routine or (token_job and own and all(m.startswith(("data ", "kubernetes ")) or m == f"project {own}"
                                             for m in more)):
        return ACCEPTED["kueue"]
    return None


def _first(more: set[str]) -> list[str]:
    """Five of what a path reaches, a project or a sensitive permission before the routine data and jobs."""
    return sorted(more, key=lambda m: (m.startswith(("data ", "kubernetes ")), m))[:5]


def _manager_job(reach: Reaches, source: str, edge: str) -> bool:
    """The MultiKueue manager's accepted edge: Ray jobs (and so the trainer's account) in a job namespace."""
    m = re.match(r"^(create|update|patch|\*) (\S+) in (\S+)$", edge)
    return bool(m and MULTIKUEUE_MANAGER.match(source) and m.group(2) in MULTIKUEUE_KINDS
                and m.group(3) in reach.job_namespaces)


def closure(reach: Reaches, member: str, through_manager: bool = True,
            root_too: bool = False) -> dict[str, list[str]]:
    """Every identity ``member`` can become, directly or through others, with the path (breadth first).
    ``through_manager=False`` stops at the MultiKueue manager's accepted edge (its jobs' account is the design's:
    an identity that becomes the manager is judged by the manager's own reach, not the jobs'); from ``member``
    itself too when ``root_too``."""
    paths: dict[str, list[str]] = {}
    queue = [(member, [])]
    while queue:
        who, path = queue.pop(0)
        for target, edge in sorted(reach[who].becomes.items()):
            if not through_manager and (root_too or who != member) and _manager_job(reach, who, edge):
                continue
            if target != member and target not in paths and target in reach:
                paths[target] = [*path, f"{edge} {_short(target)}"]
                queue.append((target, paths[target]))
    return paths


def _closed(reach: Reaches, member: str, paths: dict[str, list[str]]) -> set[tuple[str, str, str, str | None]]:
    """What ``member`` and every identity in ``paths`` hold, less the grants that are edges to an account (actAs,
    tokens, keys, setIamPolicy on it): the closure already stands for those by the account's own reach."""
    out = set()
    for who in (member, *paths):
        out |= {g for g in reach[who].grants if not (g[0] in BECOME and g[2] == "account")}
    return out


def _projects(grants: set) -> set[str]:
    # An account grant's resource name (projects/P/serviceAccounts/E) reaches that account, not project P.
    return {r.split("/")[1] for _, r, k, _ in grants if r.startswith("projects/") and k != "account"}


# Data: what a bucket, an object or a repository grant reaches (checkpoints, state, images).
DATA_KINDS = ("bucket", "object", "repository")
PUBLIC = ("allUsers", "allAuthenticatedUsers")
# Kubernetes' own public subjects. "system:authenticated ... includes any user with a Google account" on GKE, and
# "Avoid default roles and groups": bind nothing to system:authenticated, system:unauthenticated or system:anonymous
# (https://cloud.google.com/kubernetes-engine/docs/best-practices/rbac#default-roles-groups; the groups are
# Kubernetes', https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects). Any verb,
# reads included: what anyone can read is public data.
K8S_PUBLIC = re.compile(r"^k8s:(Group:[^/]*/system:(unauthenticated|authenticated)|User:[^/]*/system:anonymous)$")


def _data(grants: set) -> set[str]:
    return {r for _, r, k, _ in grants if k in DATA_KINDS}


def _k8s_runs(reach: Reaches, members) -> set[str]:
    """The pod-making Kubernetes powers (RBAC) of ``members``: becoming the MultiKueue manager is its job creation."""
    return {f"kubernetes {verb} {res} in {ns}" for m in members for ns, res, verb, _ in reach[m].rbac
            if runs(res, verb)}


def _more(grants: set, holder: set, k8s: set[str] = frozenset(), held_k8s: set[str] = frozenset()) -> set[str]:
    extra = {f"project {p}" for p in _projects(grants) - _projects(holder)} | (k8s - held_k8s)
    extra |= {f"data {r}" for r in _data(grants) - _data(holder)}
    held = {p for p, *_ in holder}
    extra |= {p for p, *_ in grants if SENSITIVE.match(p) and p not in held}
    return extra


def _accepted_path(member: str, who: str, gated: bool, edge: str, reach: Reaches) -> str | None:
    """The design's reason for a path to more, by its first edge: the reviewed deployer's pods (GKE IAM), the
    MultiKueue manager's Ray jobs in a job namespace (RBAC)."""
    if gated and DEPLOYER.match(who) and ("(GKE IAM) " in edge or edge.startswith(("actAs ", "setIamPolicy "))):
        return ACCEPTED["gke"]  # its pods, and its clusters' nodes (GKE checks actAs on the node account)
    m = re.match(r"^(create|update|patch|\*) (\S+) in (\S+) ", edge)
    if m and MULTIKUEUE_MANAGER.match(member) and m.group(2) in MULTIKUEUE_KINDS and m.group(3) in \
            reach.job_namespaces:
        return ACCEPTED["multikueue"]
    return None


def _minted(reach: Reaches, target: str, path: list[str]) -> str | None:
    """A token the token job mints by design: every edge workload identity or a TokenRequest, to an account its
    ConfigMap's targets declare (workloads/multikueue.py writes it into the Secret Kueue reads)."""
    declared = {t for ts in reach.secret_tokens.values() for t in ts}
    if target in declared and all(e.startswith(WORKLOAD_IDENTITY + " ") or " serviceaccounts/token in " in e
                                  for e in path):
        return ACCEPTED["token job"]
    return None


def _principal_problems(member: str, r: Reach, reach: Reaches) -> list[str]:
    """A non-CI account's workload identity principals: each one Kubernetes service account of the account's own
    project's clusters that the stacks' manifests bind to it (``iam.gke.io/gcp-service-account``,
    https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity): a foreign cluster's, a namespace's
    or an unannotated one is refused."""
    email = member.removeprefix("serviceAccount:")
    project = email.split("@")[1].removesuffix(".iam.gserviceaccount.com")
    out = []
    for p in r.principals:
        g = gke_principal(p)
        bound = g and any(e == email and (parts := ksa_parts(k)) and parts[0] == g[1] and parts[2] == g[2]
                          and cluster_project(parts[1]) in (None, g[0]) for k, e in reach.ksa_accounts.items())
        if not g or g[0] != project or not bound:
            out.append(f"workload identity principal that is not a Kubernetes service account of {project}'s "
                       f"clusters bound to it: {p}")
    return out


def _gated(r: Reach, envs: Environments) -> bool:
    """Every principal is one workflow on main in a reviewed, main-only environment."""
    ok = bool(r.principals)
    for p in r.principals:
        minted = minted_by(p)
        ok = ok and minted is not None and minted[1] == "main" and envs.reviewed.get(minted[2] or "", False) \
            and envs.main_only.get(minted[2] or "", False)
    return ok


def _own_stack(who: str, r: Reach, stack_projects: dict[str, str]) -> bool:
    """A deployer whose project-level grants all sit in its own stack's project (``stack_projects``, from the
    bootstrap's exports), or, without that map, in one project: a deployer granted roles on another stack's
    project loses its acceptance there and everywhere."""
    mine = {res.split("/")[1] for _, res, kind, _ in r.grants if kind == "project"}
    stack = who.removeprefix("ci-deploy-")
    home = {stack_projects[stack]} if stack in stack_projects else (mine if len(mine) == 1 else set())
    return bool(mine) and mine <= home


def check(reach: Reaches, envs: Environments, attribute_condition: str,
          signing_keys: set[str] = frozenset(), multikueue_accounts: set[str] = frozenset(),
          stack_projects: dict[str, str] | None = None, scopes: dict[str, set[str]] | None = None) -> list[Finding]:
    """Every path to more than an identity's row: one finding each (none unaccepted: nothing escalates).

    ``stack_projects``: each stack's project (its node account's), so a deployer's accepted paths hold in its own
    stack's project only. ``scopes``: each stack's own resources (``stacks.stack_scopes``): a per-stack identity
    holding anything in another's is refused (``stacks.cross_stack``)."""
    out = [Finding("pool", p) for p in condition_problems(attribute_condition)]
    out += [Finding("registration", f"an access grant the check cannot read, refused (fail closed): {u}")
            for u in getattr(reach, "unparsed", [])]
    out += [Finding("kubernetes", f"a binding to an unknown role, refused (fail closed): {u}")
            for u in getattr(reach, "unknown_roles", [])]
    out += [Finding("kubernetes", f"an admission webhook answered outside the cluster, refused: {u} (whoever serves it "
                                  "sees every object it matches, and a mutating one rewrites pods)")
            for u in getattr(reach, "webhook_urls", [])]
    if not isinstance(reach, Reaches):
        reach = Reaches(reach)
    if scopes:
        out += cross_stack(reach, scopes)
    add_gke(reach)  # again: a GKE principal may come from another rendering's Reaches (absorb)
    link_principals(reach)
    link_secrets(reach)
    for member, r in sorted(reach.items()):
        if member.startswith("unknown:"):
            continue
        who = _short(member)
        ci = CI_ACCOUNT.match(member)
        gated = _gated(r, envs) and bool(DEPLOYER.match(who)) and _own_stack(who, r, stack_projects or {})
        # Its own grants.
        # Only the grants a branch below reports (a sorted subset keeps the order of all grants sorted): the rest
        # add nothing, and sorting every grant of every member was a fifth of a check.
        reported = [g for g in r.grants if FORBIDDEN.match(g[0]) or g[0] == BINAUTHZ_POLICY
                    or g[0].endswith(".setIamPolicy")]
        for perm, resource, kind, _ in sorted(reported, key=str):
            if perm in BECOME and kind == "account" and r.becomes.get(
                    f"serviceAccount:{account_email(resource)}") == WORKLOAD_IDENTITY:
                continue  # a federated principal signing in as its account: judged below as that account
            if perm == SIGN and kind == "key" and resource in signing_keys and who.startswith("ci-image"):
                continue  # its own stack's key only: another stack's is refused by cross_stack
            if FORBIDDEN.match(perm):
                out.append(Finding(who, f"{perm} on {resource}"))
            elif perm == BINAUTHZ_POLICY:
                ok = DEPLOYER.match(who) and gated
                out.append(Finding(who, f"{perm} on {resource} (can switch Binary Authorization off)",
                                   ACCEPTED["binauthz"] if ok else None))
            elif perm.endswith(".setIamPolicy"):
                kind_ = "multikueue account" if kind == "account" and account_email(
                    resource) in multikueue_accounts else kind
                if not (DEPLOYER.match(who) and any(pat.fullmatch(perm) and k == kind_
                                                    for pat, k, _ in ALLOWED_SET_IAM)):
                    out.append(Finding(who, f"{perm} on {resource} (changes who may act on it)"))
        # A workload identity federation principal of the GitHub pool acts only through one CI account.
        if GITHUB_POOL.match(member):
            for role, resource, kind in sorted(r.roles):
                account = f"serviceAccount:{account_email(resource)}"
                if not (role == "roles/iam.workloadIdentityUser" and kind == "account" and CI_ACCOUNT.match(account)
                        and account in reach.accounts):
                    out.append(Finding(who, f"direct resource access for a federated principal: {role} on {resource}"))
        # The closure: every identity it can become, and whether that reaches more than it holds itself.
        # A GitHub principal is judged as the CI account it signs in as (its other grants are refused above); a
        # Kubernetes service account, its GKE principal and the account that principal uses are one workload:
        # what that workload holds is its own, and only what it reaches beyond it counts.
        paths = {} if GITHUB_POOL.match(member) else closure(reach, member, False)
        same = {t for t, path in paths.items() if all(e.startswith(WORKLOAD_IDENTITY + " ") for e in path)}
        home = _closed(reach, member, same)
        for target, path in sorted(paths.items()):
            if target in same and not target.startswith("unknown:"):
                continue
            if target.startswith("unknown:"):
                out.append(Finding(who, f"{' -> '.join(path)}: counted stronger (fail closed)"))
                continue
            # What the target reaches, its own (and the MultiKueue manager's jobs only when the holder is the manager).
            reached = closure(reach, target, MULTIKUEUE_MANAGER.match(member) is not None, root_too=True)
            more = _more(_closed(reach, target, reached), home, _k8s_runs(reach, {target, *reached}),
                         _k8s_runs(reach, {member, *same}))
            if more:
                # Accepted only for what the design hands over (the jobs' data, their Kubernetes powers): a project
                # or a sensitive permission past an accepted first edge is refused all the same.
                routine = all(m.startswith(("data ", "kubernetes ")) for m in more)
                ok = (_accepted_path(member, who, gated, path[0], reach) or _minted(reach, target, path)
                      or _kueue_path(member, path[0], more, routine, reach)) \
                    if routine or KUEUE_CONTROLLER.match(member) else None
                out.append(Finding(who, f"{' -> '.join(path)}, which reaches more: {_first(more)}", ok))
        # Kubernetes.
        for source, ns, what in kubernetes_findings(member, r, reach):
            ok = None
            if source == "GKE IAM" and DEPLOYER.match(who) and gated:
                ok = ACCEPTED["gke"]
            elif source == "RBAC" and MULTIKUEUE_MANAGER.match(member) and ns in reach.job_namespaces and set(
                    what.rsplit(": ", 1)[1].split(", ")) <= MULTIKUEUE_KINDS and "pod-making" in what:
                ok = ACCEPTED["multikueue"]
            elif source == "RBAC" and KUEUE_CONTROLLER.match(member) and KUEUE_CONTROLLER_PATHS.match(what):
                ok = ACCEPTED["kueue"]
            out.append(Finding(who, what, ok))
        if member in PUBLIC and r.grants:
            out.append(Finding(member, f"public access: {len(r.grants)} permissions, e.g. "
                                       f"{sorted(r.grants, key=str)[0][0]} on {sorted(r.grants, key=str)[0][1]}"))
        if K8S_PUBLIC.match(member) and r.rbac:
            ns, res, verb, names = sorted(r.rbac)[0]
            out.append(Finding(member, f"public Kubernetes access: {len(r.rbac)} RBAC rules, e.g. {verb} {res} in "
                                       f"{ns}{f' ({names})' if names else ''}"))
        if not ci:
            if member in reach.accounts:
                out += [Finding(who, p) for p in _principal_problems(member, r, reach)]
            continue
        # Who can become a CI account, and whether a reviewer stands between a writer and the token.
        # Its own stack's lock objects, as the CEL evaluation of its conditions found them, are not writes; any
        # other object (a state, another stack's lock) or a grant not narrowed to objects is.
        own = stack_of(who, scopes) if scopes else None
        writes = {w for w in r.writes() if reach.objects.get(w[1]) != (own, "locks") or own is None}
        if r.grants and not r.principals:
            out.append(Finding(who, "no workload identity principal: nothing in CI can use it"))
        for p in r.principals:
            minted = minted_by(p)
            if minted is None:
                out.append(Finding(who, f"principal that is not one workflow file on main (or one pull request "
                                        f"workflow) in one environment: {p}"))
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
    return out


__all__ = ["ACCEPTED", "ALLOWED_SET_IAM", "BECOME", "Finding", "check", "closure", "compute", "federated",
           "gke_principal"]
