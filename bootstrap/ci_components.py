"""The bootstrap's pieces: its config, the role tables, the GitHub settings, and the components.

The tables below are the whole of what the CI identities may do and who may act as them; the
README's threat table and role tables are checked against the IAM resources the program declares
from them (tests/test_bootstrap.py).

Where things live: the CI identities, their workload identity pool, the stacks' state bucket and
the secrets keys sit in a CI project of their own (``ciProject``), in which no CI identity holds a
project-level role: nothing that runs in CI can change who may act as whom. The bootstrap's own
state bucket and key sit there too, and no CI identity can read either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pulumi
import pulumi_gcp as gcp
import pulumi_github as github

from infra.cluster import NODE_SA_ROLE, node_roles
from stackspec import names, spec
from stackspec.loader import STACKS_DIR
from workloads import multikueue as mk

NAMESPACE = "tpu-multislice-bootstrap"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
MAIN = "main"
DEFAULT_BRANCH = f"refs/heads/{MAIN}"
KEY_ROTATION = "7776000s"  # 90 days

REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$")
RESOURCE_ID = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
NUMERIC = re.compile(r"^[0-9]{1,20}$")
GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
TEAM_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


# --- GitHub: the environments and the branch protection ----------------------------------------


@dataclass(frozen=True)
class Environment:
    name: str
    main_only: bool  # deployments from main only (a custom branch policy naming main)
    why: str
    stack: str | None = None  # the stack it acts on (its reviewers may be the stack's own: stackReviewers)


# Every environment: required reviewers, prevent-self-review (the author of a run never approves
# it), administrators cannot bypass. GitHub creates an environment a job names without any
# protection, so the workflows check these settings before they authenticate (.github/scripts/).
# A pull request's cloud preview runs the branch's own Pulumi program as ci-preview, which
# decrypts the stacks' secrets: a reviewer approves each run after reading the change.
PR_PREVIEW = Environment("pr-preview", False, "pr.yml's cloud preview of a pull request (ci-preview)")


def deploy_environment(stack: str) -> Environment:
    """deploy.yml's `pulumi up` of one stack (a stack with tpu-multislice:deploy.onPush)."""
    return Environment(names.deploy_environment(stack), True,
                       f"deploy.yml's `pulumi up --stack {stack}` ({names.deploy_account_id(stack)})", stack)


def drill_environment(stack: str) -> Environment:
    """drills.yml's cluster drill of one stack (a stack with tpu-multislice:deploy.clusterDrill)."""
    return Environment(names.drill_environment(stack), True,
                       f"drills.yml's cluster drill: deletes pods and a node under {stack} (ci-drill)", stack)


def environments(c: BootstrapConfig) -> tuple[Environment, ...]:
    """pr-preview, then each deploying stack's deploy-<stack> and each drilled stack's drill-<stack>."""
    return (PR_PREVIEW, *(deploy_environment(s.name) for s in c.stacks if s.deploy_on_push),
            *(drill_environment(s.name) for s in c.stacks if s.cluster_drill))
# The pr.yml jobs every pull request must pass (no matrix, never skipped): branch protection of
# main requires them by job name (tests/test_workflows.py checks pr.yml has them, unskippable).
REQUIRED_CHECKS = ("stacks", "check", "cost")


def workflow(file: str) -> str:
    return f".github/workflows/{file}"


# --- the token exchange ---------------------------------------------------------------------------

# GitHub's OIDC claims (docs.github.com/en/actions/reference/security/oidc): ``sub`` is
# ``repo:<owner>/<name>:environment:<env>`` exactly when the job names an environment, else
# ``repo:<owner>/<name>:ref:<ref>`` (``repo:...:pull_request`` in a pull request); ``job_workflow_ref``
# is ``<owner>/<name>/.github/workflows/<file>@<ref>``. Each identity trusts a workflow file and an
# environment (in ``sub``), never a branch alone. ``extract('{workflow}@')`` keeps what precedes the
# first ``@`` (attribute mapping functions: cloud.google.com/iam/docs/workload-identity-federation-
# with-other-clouds, the ``extract`` example), so a pull request's runs, whose ref is
# ``refs/pull/<n>/merge``, share one value.
ATTRIBUTE_MAPPING = {
    "google.subject": "assertion.sub",
    "attribute.repository": "assertion.repository",
    # A job on main: the workflow file at refs/heads/main, and its environment (or its ref).
    "attribute.workflow_env": "assertion.job_workflow_ref + '@' + assertion.sub",
    # A job of a pull request: the event, the workflow file (any PR ref), and its environment.
    "attribute.pr_workflow_env": ("assertion.event_name + '@' + assertion.job_workflow_ref.extract('{workflow}@')"
                                  " + '@' + assertion.sub"),
}


def on_main(file: str, environment: Environment | None = None) -> tuple[str, str]:
    """The ``workflow_env`` of a job of ``file`` run on main, in ``environment`` (or none)."""
    where = f"environment:{environment.name}" if environment else f"ref:{DEFAULT_BRANCH}"
    return "workflow_env", f"{{repository}}/{workflow(file)}@{DEFAULT_BRANCH}@repo:{{repository}}:{where}"


def in_pull_request(file: str, environment: Environment) -> tuple[str, str]:
    """The ``pr_workflow_env`` of a job of ``file`` in a pull request, in ``environment``."""
    return ("pr_workflow_env",
            f"pull_request@{{repository}}/{workflow(file)}@repo:{{repository}}:environment:{environment.name}")


class ConfigError(Exception):
    """Every problem in the bootstrap's stack config, one per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Stack:
    """What the bootstrap needs of one ``stacks/Pulumi.<stack>.yaml``."""

    name: str
    project: str
    cluster: str
    region: str = ""  # where the cluster's Secrets key lives (GKE asks for the cluster's location)
    # The node account's project roles (infra.cluster.node_roles: with image streaming, Service Usage Consumer too).
    node_roles: tuple[str, ...] = (NODE_SA_ROLE,)
    ci_project: str | None = None  # the stack file's tpu-multislice:ciProject (its CI emails are built from it)
    # A multi-region stack's region clusters (name, region): each gets its node account and Secrets key too
    # (``cluster`` is then its manager).
    extra_clusters: tuple[tuple[str, str], ...] = ()
    deploy_on_push: bool = False  # tpu-multislice:deploy.onPush: deploy.yml applies it (its own deploy identity)
    cluster_drill: str | None = None  # tpu-multislice:deploy.clusterDrill: drills.yml drills it (ci-drill)
    image: bool = False  # a tpu-multislice:image section: image.yml pushes and signs its worker image
    # A multi-region stack's MultiKueue token job: its Google service account (names.multikueue_account_id of the
    # manager) and that account's (project, role) grants on the workers' projects (workloads/multikueue.iam_grants).
    multikueue_account: str | None = None
    multikueue_grants: tuple[tuple[str, str], ...] = ()

    @property
    def node_account_id(self) -> str:
        return names.node_service_account_id(self.cluster)


@dataclass(frozen=True)
class BootstrapConfig:
    ci_project: str
    repository: str
    repository_id: str
    repository_owner_id: str
    stacks: tuple[Stack, ...]
    reviewer_teams: tuple[str, ...] = ()
    reviewer_users: tuple[str, ...] = ()
    # A stack's own reviewers for its deploy-<stack> and drill-<stack> environments (a team approves its own
    # deploys); the stacks not named here get reviewerTeams / reviewerUsers.
    stack_reviewers: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    state_bucket: str = ""
    bootstrap_state_bucket: str = ""
    state_location: str = ""
    kms_location: str = names.STACK_KEYS_LOCATION
    key_ring: str = names.STACK_KEY_RING
    bootstrap_key_ring: str = "bootstrap"
    adopt_kms: bool = False

    @property
    def owner(self) -> str:
        return self.repository.split("/")[0]

    @property
    def repository_name(self) -> str:
        return self.repository.split("/")[1]

    def stack(self, name: str) -> Stack:
        return next(s for s in self.stacks if s.name == name)

    def reviewers(self, env: Environment) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(teams, users) who approve a run in ``env``."""
        return self.stack_reviewers.get(env.stack or "", (self.reviewer_teams, self.reviewer_users))

    def key_ring_id(self, ring: str) -> str:
        return f"projects/{self.ci_project}/locations/{self.kms_location}/keyRings/{ring}"

    @property
    def bootstrap_key_id(self) -> str:
        return f"{self.key_ring_id(self.bootstrap_key_ring)}/cryptoKeys/state"

    def stack_key_id(self, stack: str) -> str:
        return names.stack_key_id(self.ci_project, stack, self.kms_location, self.key_ring)

    def secrets_provider(self, stack: str) -> str:
        """What ``stacks/Pulumi.<stack>.yaml`` carries as ``secretsprovider``: its own key."""
        return names.stack_secrets_provider(self.ci_project, stack, self.kms_location, self.key_ring)


def read_stacks(stacks_dir: Path | None = None) -> tuple[list[Stack], list[str]]:
    """Every stack file's project and cluster (the facts the stacks own, read, never retyped)."""
    stacks_dir = stacks_dir or STACKS_DIR
    stacks, problems = [], []
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        try:
            s = spec.load_stack(name, stacks_dir)
        except spec.SpecError as err:
            problems.append(f"stacks/{path.name}: not a valid stack spec (`slicectl preview --stack {name}` "
                            f"lists why): {str(err).splitlines()[0]}")
            continue
        streaming = s.image is not None and s.image.streaming
        common = {"name": name, "project": s.project, "node_roles": node_roles(streaming), "ci_project": s.ci_project,
                  "deploy_on_push": s.deploy.on_push, "cluster_drill": s.deploy.cluster_drill,
                  "image": s.image is not None}
        cluster, region = s.home  # a multi-region stack's manager
        extra = tuple((v.cluster.name, v.region) for v in s.region_views()) if s.multi_region else ()
        if s.multi_region:
            manager = mk.manager_of(s)
            grants = mk.iam_grants(manager, s.region_views())
            common |= {"multikueue_account": manager.google_service_account_id,
                       "multikueue_grants": tuple((g.project, g.role) for g in grants)}
        stacks.append(Stack(cluster=cluster, region=region, extra_clusters=extra, **common))
    if not stacks and not problems:
        problems.append(f"{stacks_dir}: no Pulumi.<stack>.yaml")
    return stacks, problems


def _names(cfg: pulumi.Config, key: str, pattern: re.Pattern, what: str, problems: list[str]) -> tuple[str, ...]:
    try:
        value = cfg.get_object(key) or []
    except Exception:  # noqa: BLE001 (pulumi raises a bare ConfigTypeError on bad JSON)
        value = None
    if not isinstance(value, list):
        problems.append(f"{NAMESPACE}:{key}: a list of {what}")
        return ()
    for v in value:
        if not isinstance(v, str) or not pattern.match(v):
            problems.append(f"{NAMESPACE}:{key}: {v!r} is not {what}")
    return tuple(v for v in value if isinstance(v, str))


def _stack_reviewers(cfg: pulumi.Config, stacks: list[Stack], problems: list[str]) -> dict:
    try:
        value = cfg.get_object("stackReviewers") or {}
    except Exception:  # noqa: BLE001 (pulumi raises a bare ConfigTypeError on bad JSON)
        value = None
    key = f"{NAMESPACE}:stackReviewers"
    if not isinstance(value, dict):
        problems.append(f"{key}: a map of stack name to {{teams: [...], users: [...]}}")
        return {}
    out, known = {}, {s.name for s in stacks}
    for stack, entry in value.items():
        if stacks and stack not in known:
            problems.append(f"{key}.{stack}: no stacks/Pulumi.{stack}.yaml; stacks: {', '.join(sorted(known))}")
        if not isinstance(entry, dict) or set(entry) - {"teams", "users"}:
            problems.append(f"{key}.{stack}: {{teams: [team slugs], users: [GitHub logins]}}")
            continue
        teams, users = entry.get("teams") or [], entry.get("users") or []
        for v, pattern, what in [*((t, TEAM_SLUG, "a GitHub team slug") for t in teams),
                                 *((u, GITHUB_LOGIN, "a GitHub login") for u in users)]:
            if not isinstance(v, str) or not pattern.match(v):
                problems.append(f"{key}.{stack}: {v!r} is not {what}")
        if not teams and not users or len(teams) + len(users) > 6:
            problems.append(f"{key}.{stack}: one to six reviewers (GitHub's limit per environment)")
        out[stack] = (tuple(t for t in teams if isinstance(t, str)), tuple(u for u in users if isinstance(u, str)))
    return out


def read_config(cfg: pulumi.Config, gcp_cfg: pulumi.Config, stacks_dir: Path | None = None) -> BootstrapConfig:
    """The bootstrap's config, checked; every problem reported at once."""
    problems: list[str] = []
    ci_project = cfg.get("ciProject") or ""
    if not PROJECT_ID.match(ci_project):
        problems.append(f"{NAMESPACE}:ciProject = {ci_project!r}: required, the GCP project ID (6-30 lowercase "
                        "letters, digits, hyphens) of the CI identities, their pool, the state and the keys")
    repository = cfg.get("repository") or ""
    if not REPOSITORY.match(repository):
        problems.append(f"{NAMESPACE}:repository = {repository!r}: the GitHub repository as owner/name")
    ids = {}
    for key in ("repositoryId", "repositoryOwnerId"):
        value = cfg.get(key)
        if value is None or not NUMERIC.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: required, GitHub's numeric id as a string of digits "
                            "(a deleted and re-created repository of the same name gets nothing)")
        ids[key] = value or ""
    teams = _names(cfg, "reviewerTeams", TEAM_SLUG, "a GitHub team slug", problems)
    users = _names(cfg, "reviewerUsers", GITHUB_LOGIN, "a GitHub login", problems)
    if not teams and not users:
        problems.append(f"{NAMESPACE}:reviewerTeams / reviewerUsers: at least one reviewer for the environments "
                        "(pr-preview, deploy-<stack>, drill-<stack>)")
    elif len(teams) + len(users) > 6:
        problems.append(f"{NAMESPACE}:reviewerTeams + reviewerUsers: at most 6 (GitHub's limit per environment)")
    stacks, stack_problems = read_stacks(stacks_dir)
    problems += stack_problems
    for s in stacks:
        if s.ci_project is not None and s.ci_project != ci_project:
            problems.append(f"stacks/Pulumi.{s.name}.yaml: tpu-multislice:ciProject = {s.ci_project!r}, but the "
                            f"bootstrap's ciProject is {ci_project!r}: the stack's image pusher and drill user "
                            "would name accounts that do not exist")
        if s.project == ci_project:
            problems.append(f"{NAMESPACE}:ciProject = {ci_project!r}: the {s.name} stack deploys into it "
                            f"(stacks/Pulumi.{s.name}.yaml gcp:project); the CI project holds no stack")
    stack_reviewers = _stack_reviewers(cfg, stacks, problems)
    state_bucket = cfg.get("stateBucket") or f"{ci_project}-pulumi-state"
    boot_bucket = cfg.get("bootstrapStateBucket") or f"{ci_project}-bootstrap-state"
    for key, bucket in (("stateBucket", state_bucket), ("bootstrapStateBucket", boot_bucket)):
        if not BUCKET.match(bucket) or "goog" in bucket:
            problems.append(f"{NAMESPACE}:{key} = {bucket!r}: not a valid bucket name")
    if state_bucket == boot_bucket:
        problems.append(f"{NAMESPACE}:stateBucket = bootstrapStateBucket = {state_bucket!r}: the stacks' state "
                        "and the bootstrap's are separate buckets")
    state_location = cfg.get("stateLocation") or gcp_cfg.get("region") or ""
    if not state_location:
        problems.append(f"{NAMESPACE}:stateLocation: set it (or gcp:region) to the state buckets' location")
    defaults = (("kmsLocation", names.STACK_KEYS_LOCATION), ("keyRing", names.STACK_KEY_RING),
                ("bootstrapKeyRing", "bootstrap"))
    rings = {k: cfg.get(k) or d for k, d in defaults}
    for key, value in rings.items():
        if not RESOURCE_ID.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: letters, digits, '-' and '_' only (at most 63)")
    if rings["keyRing"] == rings["bootstrapKeyRing"]:
        problems.append(f"{NAMESPACE}:keyRing = bootstrapKeyRing = {rings['keyRing']!r}: separate key rings")
    try:
        adopt = bool(cfg.get_bool("adoptKms"))
    except Exception:  # noqa: BLE001
        adopt = False
        problems.append(f"{NAMESPACE}:adoptKms: true or false")
    if problems:
        raise ConfigError(problems)
    return BootstrapConfig(
        ci_project=ci_project,
        repository=repository,
        repository_id=ids["repositoryId"],
        repository_owner_id=ids["repositoryOwnerId"],
        stacks=tuple(stacks),
        reviewer_teams=teams,
        reviewer_users=users,
        stack_reviewers=stack_reviewers,
        state_bucket=state_bucket,
        bootstrap_state_bucket=boot_bucket,
        state_location=state_location,
        kms_location=rings["kmsLocation"],
        key_ring=rings["keyRing"],
        bootstrap_key_ring=rings["bootstrapKeyRing"],
        adopt_kms=adopt,
    )


def attribute_condition(c: BootstrapConfig) -> str:
    """Admission to the pool: this repository by name and immutable ids, no reusable workflow.

    ``workflow_ref == job_workflow_ref``: the job runs the workflow file it was triggered in, so a
    workflow cannot borrow another file's identity by calling it as a reusable workflow.
    """
    return " && ".join([
        f"assertion.repository == '{c.repository}'",
        f"assertion.repository_id == '{c.repository_id}'",
        f"assertion.repository_owner_id == '{c.repository_owner_id}'",
        "assertion.workflow_ref == assertion.job_workflow_ref",
    ])


# --- the role tables ---------------------------------------------------------------------------

# Where a grant applies: a stack's project, its node service account (created here), the stacks'
# state bucket, or a stack's secrets key; ``of`` is EVERY stack or one stack's name.
PROJECT, NODE_ACCOUNT, STATE_BUCKET, KEY = "project", "node account", "state bucket", "state key"
# A multi-region stack's MultiKueue token account (created here); a stack without one gets no such grant.
MULTIKUEUE_ACCOUNT = "multikueue account"
# The worker image's signing: the stack's image signing key, its attestor's note and the attestor (made here).
SIGNING_KEY, NOTE, ATTESTOR = "signing key", "attestor note", "attestor"
EVERY = "every stack"
IMAGE_STACKS = "every stack with an image"  # in IMAGE_GRANTS: each stack with a tpu-multislice:image section
DEPLOYED_STACK = "the deployed stack"  # in DEPLOY_GRANTS: the stack of ci-deploy-<stack>


@dataclass(frozen=True)
class CustomRole:
    """A project custom role: the permissions the stack's resources of one kind need, no more."""

    id: str
    title: str
    permissions: tuple[str, ...]
    replaces: str  # the predefined role that is broader than what the stacks manage


# The deploy roles below replace predefined roles that reach past what the stack manages (read off
# a prod rendering: build/prod/resources.json). Permission names: cloud.google.com/iam/docs/permissions-reference.
CUSTOM_ROLES = {r.id: r for r in (
    # roles/logging.configWriter also writes sinks (export or silence the project's logs), exclusions, views.
    CustomRole("tpuMultisliceLogMetrics", "tpu-multislice: log-based metrics",
               tuple(f"logging.logMetrics.{v}" for v in ("create", "delete", "get", "list", "update")),
               "roles/logging.configWriter"),
    CustomRole("tpuMultisliceLogMetricsViewer", "tpu-multislice: read log-based metrics",
               ("logging.logMetrics.get", "logging.logMetrics.list"), "roles/logging.viewer"),
    # roles/artifactregistry.admin also writes and deletes images in every repository.
    CustomRole("tpuMultisliceRegistry", "tpu-multislice: the worker image repository",
               tuple(f"artifactregistry.repositories.{v}" for v in (
                   "create", "delete", "get", "list", "update", "getIamPolicy", "setIamPolicy")),
               "roles/artifactregistry.admin"),
    CustomRole("tpuMultisliceRegistryViewer", "tpu-multislice: read the worker image repository",
               tuple(f"artifactregistry.repositories.{v}" for v in ("get", "list", "getIamPolicy")),
               "roles/artifactregistry.reader"),
    # roles/storage.admin also reads, writes and deletes every object of every bucket.
    CustomRole("tpuMultisliceBuckets", "tpu-multislice: the checkpoint buckets (not their objects)",
               tuple(f"storage.buckets.{v}" for v in (
                   "create", "delete", "get", "list", "update", "getIamPolicy", "setIamPolicy")),
               "roles/storage.admin"),
    # roles/compute.securityAdmin also writes firewall policies, SSL certificates and security policies.
    CustomRole("tpuMultisliceFirewalls", "tpu-multislice: the DCN networks' firewall rules",
               (*(f"compute.firewalls.{v}" for v in ("create", "delete", "get", "list", "update")),
                "compute.networks.updatePolicy"),
               "roles/compute.securityAdmin"),
    # roles/pubsub.editor also publishes and consumes every topic and subscription of the project.
    CustomRole("tpuMultisliceTopics", "tpu-multislice: the security bulletins topic",
               tuple(f"pubsub.topics.{v}" for v in ("create", "delete", "get", "list", "update")),
               "roles/pubsub.editor"),
    # roles/containeranalysis.occurrences.editor also updates and deletes every occurrence of the project (the
    # scanner's vulnerability findings included): attaching an attestation needs occurrences.create only.
    CustomRole("tpuMultisliceAttestations", "tpu-multislice: attach the worker image's attestations",
               ("containeranalysis.occurrences.create",), "roles/containeranalysis.occurrences.editor"),
    # roles/serviceusage.serviceUsageAdmin also disables APIs (stopping everything that uses them) and sets quotas.
    CustomRole("tpuMultisliceServices", "tpu-multislice: enable the stack's APIs",
               ("serviceusage.services.enable", "serviceusage.services.get", "serviceusage.services.list",
                "serviceusage.operations.get"),
               "roles/serviceusage.serviceUsageAdmin"),
)}
CUSTOM = "custom:"


def custom(role_id: str) -> str:
    assert role_id in CUSTOM_ROLES, role_id
    return CUSTOM + role_id


# What the deploy identity needs for each GCP resource type the stack declares (the roles of its
# table below, by name): tests/test_bootstrap.py renders prod and fails on a type missing here.
MANAGED_BY = {
    "gcp:container/cluster:Cluster": "roles/container.admin",
    "gcp:container/nodePool:NodePool": "roles/container.admin",
    "gcp:compute/network:Network": "roles/compute.networkAdmin",
    "gcp:compute/subnetwork:Subnetwork": "roles/compute.networkAdmin",
    "gcp:compute/router:Router": "roles/compute.networkAdmin",
    "gcp:compute/routerNat:RouterNat": "roles/compute.networkAdmin",
    # compute.networkAdmin excludes firewall rules; compute.securityAdmin also writes firewall policies and SSL.
    "gcp:compute/firewall:Firewall": custom("tpuMultisliceFirewalls"),
    "gcp:storage/bucket:Bucket": custom("tpuMultisliceBuckets"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": custom("tpuMultisliceBuckets"),
    "gcp:artifactregistry/repository:Repository": custom("tpuMultisliceRegistry"),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": custom("tpuMultisliceRegistry"),
    "gcp:logging/metric:Metric": custom("tpuMultisliceLogMetrics"),
    "gcp:monitoring/alertPolicy:AlertPolicy": "roles/monitoring.editor",
    "gcp:monitoring/dashboard:Dashboard": "roles/monitoring.editor",
    "gcp:monitoring/notificationChannel:NotificationChannel": "roles/monitoring.editor",
    "gcp:projects/service:Service": custom("tpuMultisliceServices"),
    "gcp:pubsub/topic:Topic": custom("tpuMultisliceTopics"),
    # The project's one policy: get and update it, nothing else (no attestors).
    "gcp:binaryauthorization/policy:Policy": "roles/binaryauthorization.policyEditor",
}
# Resource types the stack declares today that move to the bootstrap (the stack looks them up).
MOVED_TO_BOOTSTRAP = {
    "gcp:serviceaccount/account:Account": "the node service account and the MultiKueue token account (StackProject)",
    "gcp:projects/iAMMember:IAMMember": (f"the node service account's {NODE_SA_ROLE}, the MultiKueue account's "
                                         f"{mk.WORKER_PROJECT_ROLE} (StackProject)"),
}


@dataclass(frozen=True)
class Condition:
    title: str
    expression: str  # may hold {state_bucket}, {project} (the Pulumi project) and {stack}
    description: str


@dataclass(frozen=True)
class Grant:
    role: str  # roles/... or custom:<id>
    on: str
    of: str = EVERY
    condition: Condition | None = None
    why: str = ""


@dataclass(frozen=True)
class Identity:
    key: str  # preview | deploy-<stack> | drill | image
    description: str
    grants: tuple[Grant, ...]
    # (attribute, value template) pairs: who may act as the account ({repository} filled in).
    principals: tuple[tuple[str, str], ...] = field(default=())
    account: str = ""  # the account id; names.CI_ACCOUNTS[key] when empty
    # The Actions variable holding its email: a repository variable, or one of this environment's own
    # (deploy.yml's `up` reads vars.GCP_DEPLOY_SERVICE_ACCOUNT in deploy-<stack>: each stack's own identity).
    environment: str | None = None

    @property
    def account_id(self) -> str:
        return self.account or names.CI_ACCOUNTS[self.key]

    @property
    def variable(self) -> str:
        return f"GCP_{self.key.split('-')[0].upper()}_SERVICE_ACCOUNT"


_OBJECTS = "projects/_/buckets/{state_bucket}/objects/.pulumi"
LOCKS_ONLY = Condition(
    title="state-locks-only",
    expression=f'resource.name.startsWith("{_OBJECTS}/locks/")',
    description="Pulumi's lock files only: a preview writes no state",
)
# Pulumi's file ("diy") backend keeps a stack's files under these paths (pulumi/pulumi,
# pkg/backend/diy: stacks/<project>/<stack>.json, history/, backups/ and locks/<project>/<stack>/).
ONE_STACKS_STATE = Condition(
    title="one-stacks-state-only",
    expression=" || ".join(
        f'resource.name.startsWith("{_OBJECTS}/{p}")'
        for p in ("stacks/{project}/{stack}.json", "history/{project}/{stack}/", "backups/{project}/{stack}/",
                  "locks/{project}/{stack}/")),
    description="The state, history, backups and locks of the deployed stack only",
)

PREVIEW = Identity(
    key="preview",
    description="CI preview: reads the stacks' projects and state, changes nothing",
    grants=(
        Grant("roles/compute.networkViewer", PROJECT, why="networks and subnets"),
        Grant("roles/container.viewer", PROJECT, why="clusters, node pools, Kubernetes objects (no Secrets)"),
        Grant("roles/iam.serviceAccountViewer", PROJECT, why="the node service account"),
        Grant("roles/iam.securityReviewer", PROJECT, why="IAM policies the stacks add members to"),
        Grant("roles/storage.bucketViewer", PROJECT, why="the checkpoint buckets (not their objects)"),
        Grant(custom("tpuMultisliceRegistryViewer"), PROJECT, why="the worker image repository and its IAM"),
        Grant("roles/monitoring.viewer", PROJECT, why="alert policies, dashboards, notification channels"),
        Grant(custom("tpuMultisliceLogMetricsViewer"), PROJECT, why="the log-based metrics (not the logs)"),
        Grant("roles/serviceusage.serviceUsageViewer", PROJECT, why="the APIs the stacks enable"),
        Grant("roles/pubsub.viewer", PROJECT, why="the security bulletins topic (not its messages)"),
        Grant("roles/binaryauthorization.policyViewer", PROJECT, why="the Binary Authorization policy"),
        Grant("roles/storage.objectViewer", STATE_BUCKET, why="read the state"),
        Grant("roles/storage.objectUser", STATE_BUCKET, condition=LOCKS_ONLY, why="take and release a stack lock"),
        Grant("roles/cloudkms.cryptoKeyDecrypter", KEY, why="decrypt stack secrets for the plan"),
    ),
    principals=(
        in_pull_request("pr.yml", PR_PREVIEW),  # a reviewer approved this pull request's run
        on_main("deploy.yml"),  # deploy's preview job
        on_main("drills.yml"),  # drift detection
    ),
)
# A deploying stack's own identity (ci-deploy-<stack>): its grants below, on that stack alone (``of`` is filled in).
DEPLOY_GRANTS = (
    Grant("roles/container.admin", PROJECT, DEPLOYED_STACK,
          why="clusters, node pools, the objects applied in them"),
    Grant("roles/compute.networkAdmin", PROJECT, DEPLOYED_STACK, why="the networks, subnets, router and NAT"),
    Grant(custom("tpuMultisliceBuckets"), PROJECT, DEPLOYED_STACK, why="the checkpoint bucket and its IAM"),
    Grant(custom("tpuMultisliceRegistry"), PROJECT, DEPLOYED_STACK, why="the worker image repository and its IAM"),
    Grant("roles/monitoring.editor", PROJECT, DEPLOYED_STACK, why="alert policies, the dashboard, channels"),
    Grant(custom("tpuMultisliceLogMetrics"), PROJECT, DEPLOYED_STACK, why="the log-based metrics the alerts read"),
    Grant(custom("tpuMultisliceFirewalls"), PROJECT, DEPLOYED_STACK, why="the DCN networks' ingress rules"),
    Grant(custom("tpuMultisliceServices"), PROJECT, DEPLOYED_STACK, why="enable the APIs the stack uses"),
    Grant(custom("tpuMultisliceTopics"), PROJECT, DEPLOYED_STACK, why="the security bulletins topic"),
    Grant("roles/binaryauthorization.policyEditor", PROJECT, DEPLOYED_STACK,
          why="the project's Binary Authorization policy"),
    Grant("roles/iam.serviceAccountUser", NODE_ACCOUNT, DEPLOYED_STACK,
          why="run the nodes as the node account (GKE checks actAs)"),
    # Workload identity names the manager cluster's pool, which exists only once the stack made the cluster (cloud
    # rule iam-wi-pool-exists): the stack binds it on this one account (getIamPolicy/setIamPolicy on it). The account
    # holds only roles/container.clusterViewer on the stack's project, less than container.admin there.
    Grant("roles/iam.serviceAccountAdmin", MULTIKUEUE_ACCOUNT, DEPLOYED_STACK,
          why="bind the token job's Kubernetes service account to it (workload identity)"),
    Grant("roles/storage.objectViewer", STATE_BUCKET, why="read the state (list needs the bucket)"),
    Grant("roles/storage.objectAdmin", STATE_BUCKET, DEPLOYED_STACK, ONE_STACKS_STATE, why="write the stack's state"),
    Grant("roles/cloudkms.cryptoKeyEncrypterDecrypter", KEY, DEPLOYED_STACK, why="the stack's secrets"),
)


def deploy_identity(stack: str) -> Identity:
    """ci-deploy-<stack>: changes what one stack owns, from deploy.yml on main in deploy-<stack> only."""
    env = deploy_environment(stack)
    return Identity(
        key=f"deploy-{stack}",
        description=f"CI deploy of {stack}: from main in its environment {env.name} only",
        grants=tuple(replace(g, of=stack) if g.of == DEPLOYED_STACK else g for g in DEPLOY_GRANTS),
        principals=(on_main("deploy.yml", env),),
        account=names.deploy_account_id(stack),
        environment=env.name,
    )


def drill_identity(stacks: list[str]) -> Identity:
    """ci-drill: reads the drilled stacks' clusters (one account: the stacks' in-cluster RBAC names it); each
    stack's drill runs in its own drill-<stack> environment."""
    return Identity(
        key="drill",
        description="CI drill: reads the drilled stacks' clusters; Kubernetes RBAC in the workload namespace does "
                    "the rest",
        grants=tuple(Grant("roles/container.clusterViewer", PROJECT, s,
                           why="get-credentials; no Kubernetes object access") for s in stacks),
        principals=tuple(on_main("drills.yml", drill_environment(s)) for s in stacks),
    )


# Pushes the worker image (roles/artifactregistry.writer on the stack's own repository, which the stack gives it,
# infra/registry.py) and signs the digest it pushed: an attestation Binary Authorization admits the workers by
# (infra/cluster_security.py). The roles gcloud's `container binauthz attestations sign-and-create` needs, each on
# the one resource (https://cloud.google.com/binary-authorization/docs/making-attestations): sign with the key,
# read the attestor (its note), attach an occurrence to the note, create the occurrence in the project.
IMAGE_GRANTS = (
    Grant("roles/cloudkms.signerVerifier", SIGNING_KEY, IMAGE_STACKS, why="sign the pushed image's digest"),
    Grant("roles/binaryauthorization.attestorsViewer", ATTESTOR, IMAGE_STACKS, why="the attestor's note"),
    Grant("roles/containeranalysis.notes.attacher", NOTE, IMAGE_STACKS, why="attach the attestation to the note"),
    Grant(custom("tpuMultisliceAttestations"), PROJECT, IMAGE_STACKS, why="create the attestation occurrence"),
)


def image_identity(stacks: list[str]) -> Identity:
    """ci-image: one workflow builds one image for every stack with an image section, so one account, whose
    signing grants name each of those stacks' key, attestor and note only."""
    return Identity(
        key="image",
        description="CI image: pushes the worker image and signs its digest for Binary Authorization",
        grants=tuple(replace(g, of=s) for s in stacks for g in IMAGE_GRANTS),
        principals=(on_main("image.yml"),),
    )


def identities(c: BootstrapConfig) -> tuple[Identity, ...]:
    """ci-preview, one ci-deploy-<stack> per deploying stack, ci-drill when a stack is drilled, ci-image."""
    drilled = [s.name for s in c.stacks if s.cluster_drill]
    return (PREVIEW, *(deploy_identity(s.name) for s in c.stacks if s.deploy_on_push),
            *([drill_identity(drilled)] if drilled else []), image_identity([s.name for s in c.stacks if s.image]))


WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"


def stacks_of(c: BootstrapConfig, of: str) -> tuple[Stack, ...]:
    return c.stacks if of == EVERY else (c.stack(of),)


def role_name(role: str, project: str) -> str:
    return f"projects/{project}/roles/{role.removeprefix(CUSTOM)}" if role.startswith(CUSTOM) else role


# APIs the identities and the stacks call (kept enabled on destroy: other things may use them).
# The CI project: the token exchange, the state and keys, and the APIs a caller's own project
# serves (Service Usage and Resource Manager bill the caller's project).
HOME_SERVICES = ("iam.googleapis.com", "iamcredentials.googleapis.com", "sts.googleapis.com",
                 "cloudkms.googleapis.com", "storage.googleapis.com", "cloudresourcemanager.googleapis.com",
                 "serviceusage.googleapis.com")
STACK_SERVICES = ("container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                  "iam.googleapis.com", "cloudresourcemanager.googleapis.com", "cloudkms.googleapis.com",
                  "binaryauthorization.googleapis.com", "containeranalysis.googleapis.com")
# GKE's service agent encrypts and decrypts the cluster's Secrets with the key made here
# (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets; cloud rule gke-secrets-kms-key).
GKE_SECRETS_KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
# Rotated every 90 days (CIS Google Cloud Foundations 1.10); old versions stay and still decrypt.
SECRETS_KEY_ROTATION = f"{90 * 86400}s"
# The worker image's signing key: asymmetric, EC P-256 with SHA-256, one of the algorithms Binary Authorization's
# PKIX attestors verify (https://cloud.google.com/binary-authorization/docs/creating-attestors-cli, Cloud KMS keys).
IMAGE_SIGNING_ALGORITHM = "EC_SIGN_P256_SHA256"


# --- components --------------------------------------------------------------------------------


def _keep(parent: pulumi.Resource) -> dict:
    # Losing a state bucket or a key loses track of every deployed resource: protected, kept on delete.
    return {"parent": parent, "protect": True, "retain_on_delete": True}


def _state_bucket(name: str, bucket: str, c: BootstrapConfig, parent: pulumi.Resource) -> gcp.storage.Bucket:
    return gcp.storage.Bucket(
        name,
        gcp.storage.BucketArgs(
            name=bucket,
            project=c.ci_project,
            location=c.state_location,
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=False,
        ),
        opts=pulumi.ResourceOptions(**_keep(parent)),
    )


@dataclass(frozen=True)
class StateBackendArgs:
    config: BootstrapConfig


class StateBackend(pulumi.ComponentResource):
    """Two state buckets and two key rings in the CI project: the bootstrap's (no CI identity may
    touch them) and the stacks' (one bucket, one key per stack: a stack's secrets open with its key)."""

    bootstrap_bucket: gcp.storage.Bucket
    bootstrap_key: gcp.kms.CryptoKey
    bucket: gcp.storage.Bucket
    keys: dict[str, gcp.kms.CryptoKey]

    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:StateBackend", name, None, opts)
        c = args.config
        keep = _keep(self)
        self.bootstrap_bucket = _state_bucket(f"{name}-bootstrap-state", c.bootstrap_state_bucket, c, self)
        # Adopted on the first run: the bootstrap's own state needs its key before it exists.
        adopt = c.adopt_kms
        boot_ring = gcp.kms.KeyRing(
            f"{name}-bootstrap-keyring",
            gcp.kms.KeyRingArgs(name=c.bootstrap_key_ring, location=c.kms_location, project=c.ci_project),
            opts=pulumi.ResourceOptions(**keep, import_=c.key_ring_id(c.bootstrap_key_ring) if adopt else None),
        )
        self.bootstrap_key = gcp.kms.CryptoKey(
            f"{name}-bootstrap-key",
            gcp.kms.CryptoKeyArgs(name="state", key_ring=boot_ring.id, purpose="ENCRYPT_DECRYPT",
                                  rotation_period=KEY_ROTATION),
            opts=pulumi.ResourceOptions(**keep, import_=c.bootstrap_key_id if adopt else None),
        )
        # The stacks' state: one bucket (Pulumi logs in to one backend URL; the workflows preview
        # every stack from it) whose writes IAM conditions split per stack, and one key per stack.
        self.bucket = _state_bucket(f"{name}-state", c.state_bucket, c, self)
        ring = gcp.kms.KeyRing(
            f"{name}-keyring",
            gcp.kms.KeyRingArgs(name=c.key_ring, location=c.kms_location, project=c.ci_project),
            opts=pulumi.ResourceOptions(**keep),
        )
        self.keys = {
            s.name: gcp.kms.CryptoKey(
                f"{name}-key-{s.name}",
                gcp.kms.CryptoKeyArgs(name=s.name, key_ring=ring.id, purpose="ENCRYPT_DECRYPT",
                                      rotation_period=KEY_ROTATION),
                opts=pulumi.ResourceOptions(**keep),
            )
            for s in c.stacks
        }
        self.register_outputs({"bucket": self.bucket.name, "bootstrapBucket": self.bootstrap_bucket.name})


@dataclass(frozen=True)
class StackProjectArgs:
    config: BootstrapConfig
    stack: Stack
    custom_roles: tuple[str, ...]  # CUSTOM_ROLES ids granted in this project


class StackProject(pulumi.ComponentResource):
    """What a stack's project gets from the bootstrap: the node service account with its one role,
    a multi-region stack's MultiKueue token account with its cluster viewer role, and the custom roles
    the CI identities hold there. The stack looks the accounts up; no CI identity can create service
    accounts or change the project's IAM policy."""

    node_account: gcp.serviceaccount.Account
    multikueue_account: gcp.serviceaccount.Account | None
    roles: dict[str, gcp.projects.IAMCustomRole]
    secrets_key: gcp.kms.CryptoKey
    signing_key: gcp.kms.CryptoKey
    note: gcp.containeranalysis.Note
    attestor: gcp.binaryauthorization.Attestor

    def __init__(self, name: str, args: StackProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:StackProject", name, None, opts)
        s = args.stack
        child = pulumi.ResourceOptions(parent=self)
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            gcp.serviceaccount.AccountArgs(account_id=s.node_account_id, project=s.project,
                                           display_name=f"GKE nodes of {s.cluster} (stack {s.name})"),
            opts=child,
        )
        member = self.node_account.email.apply(lambda e: f"serviceAccount:{e}")
        for role in s.node_roles:
            gcp.projects.IAMMember(
                f"{name}-nodes-role" if role == NODE_SA_ROLE else f"{name}-nodes-{role.split('.')[-1].lower()}",
                gcp.projects.IAMMemberArgs(project=s.project, role=role, member=member),
                opts=child,
            )
        # A multi-region stack's MultiKueue token job runs as this account (workload identity, which the stack binds
        # once the manager's cluster exists) and needs roles/container.clusterViewer on the workers' projects
        # (workloads/multikueue.py WORKER_PROJECT_ROLE); made here so the deploy identity grants no project role.
        self.multikueue_account = None
        if s.multikueue_account is not None:
            self.multikueue_account = gcp.serviceaccount.Account(
                f"{name}-multikueue",
                gcp.serviceaccount.AccountArgs(
                    account_id=s.multikueue_account, project=s.project,
                    display_name=f"MultiKueue token minter of {s.cluster} (stack {s.name}, one-hour worker tokens)"),
                opts=child,
            )
            mk_member = self.multikueue_account.email.apply(lambda e: f"serviceAccount:{e}")
            for project, role in s.multikueue_grants:
                gcp.projects.IAMMember(
                    f"{name}-multikueue-{project}-{role.split('.')[-1].lower()}",
                    gcp.projects.IAMMemberArgs(project=project, role=role, member=mk_member),
                    opts=child,
                )
        self.roles = {
            rid: gcp.projects.IAMCustomRole(
                f"{name}-{rid}",
                gcp.projects.IAMCustomRoleArgs(
                    project=s.project, role_id=rid, title=CUSTOM_ROLES[rid].title,
                    description=f"Replaces {CUSTOM_ROLES[rid].replaces} for the CI identities (bootstrap/)",
                    permissions=list(CUSTOM_ROLES[rid].permissions), stage="GA",
                ),
                opts=child,
            )
            for rid in args.custom_roles
        }
        # The cluster's Secrets key, in its region, and GKE's service agent on it: made here so the deploy identity
        # needs no Cloud KMS admin; the stack names it (stackspec.names.secrets_key_id).
        ring = gcp.kms.KeyRing(
            f"{name}-gke-ring",
            gcp.kms.KeyRingArgs(name=names.secrets_key_ring(s.cluster), location=s.region, project=s.project),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        self.secrets_key = gcp.kms.CryptoKey(
            f"{name}-gke-secrets",
            gcp.kms.CryptoKeyArgs(name=names.secrets_key(s.cluster), key_ring=ring.id, purpose="ENCRYPT_DECRYPT",
                                  rotation_period=SECRETS_KEY_ROTATION),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        # The agent exists once the Kubernetes Engine API is on; ServiceIdentity makes sure and names it.
        agent = gcp.projects.ServiceIdentity(
            f"{name}-gke-agent",
            gcp.projects.ServiceIdentityArgs(project=s.project, service="container.googleapis.com"),
            opts=child,
        )
        number = gcp.organizations.get_project_output(project_id=s.project).number
        gcp.kms.CryptoKeyIAMMember(
            f"{name}-gke-secrets-agent",
            gcp.kms.CryptoKeyIAMMemberArgs(
                crypto_key_id=self.secrets_key.id, role=GKE_SECRETS_KEY_ROLE,
                member=number.apply(lambda n: f"serviceAccount:{names.gke_service_agent(n)}")),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[agent]),
        )
        # The worker image's signing key (beside the Secrets key), the attestor's note and the attestor holding the
        # key's public half: Binary Authorization admits the workers' image only with its attestation, which only
        # ci-image can make (its grants, above). Made here so no deploy identity holds an attestor or a key role.
        self.signing_key = gcp.kms.CryptoKey(
            f"{name}-image-signer",
            gcp.kms.CryptoKeyArgs(
                name=names.image_signing_key(s.cluster), key_ring=ring.id, purpose="ASYMMETRIC_SIGN",
                version_template=gcp.kms.CryptoKeyVersionTemplateArgs(algorithm=IMAGE_SIGNING_ALGORITHM)),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        self.note = gcp.containeranalysis.Note(
            f"{name}-image-note",
            gcp.containeranalysis.NoteArgs(
                name=names.image_attestor(s.cluster), project=s.project,
                attestation_authority=gcp.containeranalysis.NoteAttestationAuthorityArgs(
                    hint=gcp.containeranalysis.NoteAttestationAuthorityHintArgs(
                        human_readable_name=f"worker image of {s.cluster}, signed by image.yml (ci-image)"))),
            opts=child,
        )
        version = gcp.kms.get_kms_crypto_key_version_output(crypto_key=self.signing_key.id,
                                                            version=names.IMAGE_SIGNING_KEY_VERSION)
        self.attestor = gcp.binaryauthorization.Attestor(
            f"{name}-image-attestor",
            gcp.binaryauthorization.AttestorArgs(
                name=names.image_attestor(s.cluster), project=s.project,
                attestation_authority_note=gcp.binaryauthorization.AttestorAttestationAuthorityNoteArgs(
                    note_reference=self.note.name,
                    public_keys=[gcp.binaryauthorization.AttestorAttestationAuthorityNotePublicKeyArgs(
                        # A Cloud KMS key's id is its version's resource name with this prefix (provider docs).
                        id=version.id.apply(lambda v: f"//cloudkms.googleapis.com/v1/{v}"),
                        pkix_public_key=gcp.binaryauthorization.AttestorAttestationAuthorityNotePublicKeyPkixPublicKeyArgs(
                            public_key_pem=version.public_keys[0].pem,
                            signature_algorithm=version.public_keys[0].algorithm))])),
            opts=child,
        )
        # A multi-region stack's region clusters: the same node account, roles and Secrets key each.
        for cluster, region in s.extra_clusters:
            n = f"{name}-{cluster}"
            account = gcp.serviceaccount.Account(
                f"{n}-nodes",
                gcp.serviceaccount.AccountArgs(account_id=names.node_service_account_id(cluster), project=s.project,
                                               display_name=f"GKE nodes of {cluster} (stack {s.name})"),
                opts=child,
            )
            for role in s.node_roles:
                gcp.projects.IAMMember(
                    f"{n}-nodes-{role.split('.')[-1].lower()}",
                    gcp.projects.IAMMemberArgs(project=s.project, role=role,
                                               member=account.email.apply(lambda e: f"serviceAccount:{e}")),
                    opts=child,
                )
            ring_ = gcp.kms.KeyRing(
                f"{n}-gke-ring",
                gcp.kms.KeyRingArgs(name=names.secrets_key_ring(cluster), location=region, project=s.project),
                opts=pulumi.ResourceOptions(**_keep(self)),
            )
            key = gcp.kms.CryptoKey(
                f"{n}-gke-secrets",
                gcp.kms.CryptoKeyArgs(name=names.secrets_key(cluster), key_ring=ring_.id, purpose="ENCRYPT_DECRYPT",
                                      rotation_period=SECRETS_KEY_ROTATION),
                opts=pulumi.ResourceOptions(**_keep(self)),
            )
            gcp.kms.CryptoKeyIAMMember(
                f"{n}-gke-secrets-agent",
                gcp.kms.CryptoKeyIAMMemberArgs(
                    crypto_key_id=key.id, role=GKE_SECRETS_KEY_ROLE,
                    member=number.apply(lambda n_: f"serviceAccount:{names.gke_service_agent(n_)}")),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[agent]),
            )
        self.register_outputs({"nodeAccount": self.node_account.email, "secretsKey": self.secrets_key.id,
                               "attestor": self.attestor.name,
                               "multikueueAccount": self.multikueue_account and self.multikueue_account.email})


@dataclass(frozen=True)
class GitHubFederationArgs:
    config: BootstrapConfig


class GitHubFederation(pulumi.ComponentResource):
    """A workload identity pool admitting GitHub Actions tokens of one repository only."""

    pool: gcp.iam.WorkloadIdentityPool
    provider: gcp.iam.WorkloadIdentityPoolProvider

    def __init__(self, name: str, args: GitHubFederationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:GitHubFederation", name, None, opts)
        c = args.config
        self.pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            gcp.iam.WorkloadIdentityPoolArgs(
                workload_identity_pool_id="github",
                project=c.ci_project,
                display_name="GitHub Actions",
                description=f"CI of {c.repository}",
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-provider",
            gcp.iam.WorkloadIdentityPoolProviderArgs(
                workload_identity_pool_id=self.pool.workload_identity_pool_id,
                workload_identity_pool_provider_id="github-actions",
                project=c.ci_project,
                display_name="GitHub Actions OIDC",
                attribute_mapping=ATTRIBUTE_MAPPING,
                attribute_condition=attribute_condition(c),
                oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(issuer_uri=GITHUB_ISSUER),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"provider": self.provider.name})

    def principal_set(self, attribute: str, value: str) -> pulumi.Output[str]:
        return self.pool.name.apply(lambda pool: f"principalSet://iam.googleapis.com/{pool}/attribute.{attribute}/{value}")


@dataclass(frozen=True)
class CiIdentityArgs:
    config: BootstrapConfig
    identity: Identity
    federation: GitHubFederation
    backend: StateBackend
    projects: dict[str, StackProject]  # by stack name


class CiIdentity(pulumi.ComponentResource):
    """One CI service account in the CI project: its grants from the role table, and who may act as it."""

    account: gcp.serviceaccount.Account

    def __init__(self, name: str, args: CiIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:CiIdentity", name, None, opts)
        c, ident = args.config, args.identity
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            gcp.serviceaccount.AccountArgs(
                account_id=ident.account_id, project=c.ci_project, display_name=ident.description
            ),
            opts=child,
        )
        member = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        for grant in ident.grants:
            slug = grant.role.removeprefix("roles/").removeprefix(CUSTOM).replace(".", "-")
            for s in stacks_of(c, grant.of):
                cond = _condition(grant, c, s)
                where = args.projects[s.name]
                if grant.on == PROJECT:
                    custom_role = where.roles.get(grant.role.removeprefix(CUSTOM))
                    gcp.projects.IAMMember(
                        f"{name}-{s.name}-{slug}",
                        gcp.projects.IAMMemberArgs(
                            project=s.project,
                            role=custom_role.name if custom_role else grant.role,
                            member=member,
                            condition=cond and gcp.projects.IAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                elif grant.on == NODE_ACCOUNT:
                    gcp.serviceaccount.IAMMember(
                        f"{name}-{s.name}-nodes-{slug}",
                        gcp.serviceaccount.IAMMemberArgs(
                            service_account_id=where.node_account.name, role=grant.role, member=member,
                            condition=cond and gcp.serviceaccount.IAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                elif grant.on == MULTIKUEUE_ACCOUNT:
                    if where.multikueue_account is None:
                        continue  # a single-region stack: no MultiKueue
                    gcp.serviceaccount.IAMMember(
                        f"{name}-{s.name}-multikueue-{slug}",
                        gcp.serviceaccount.IAMMemberArgs(
                            service_account_id=where.multikueue_account.name, role=grant.role, member=member,
                            condition=cond and gcp.serviceaccount.IAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                elif grant.on == STATE_BUCKET:
                    gcp.storage.BucketIAMMember(
                        f"{name}-state-{slug}" + ("" if grant.of == EVERY else f"-{s.name}"),
                        gcp.storage.BucketIAMMemberArgs(
                            bucket=args.backend.bucket.name, role=grant.role, member=member,
                            condition=cond and gcp.storage.BucketIAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                    if grant.of == EVERY:
                        break  # one bucket: one binding for every stack
                elif grant.on == SIGNING_KEY:
                    gcp.kms.CryptoKeyIAMMember(
                        f"{name}-{s.name}-signing-{slug}",
                        gcp.kms.CryptoKeyIAMMemberArgs(crypto_key_id=where.signing_key.id, role=grant.role,
                                                       member=member),
                        opts=child,
                    )
                elif grant.on == NOTE:
                    gcp.containeranalysis.NoteIamMember(
                        f"{name}-{s.name}-note-{slug}",
                        gcp.containeranalysis.NoteIamMemberArgs(project=s.project, note=where.note.name,
                                                                role=grant.role, member=member),
                        opts=child,
                    )
                elif grant.on == ATTESTOR:
                    gcp.binaryauthorization.AttestorIamMember(
                        f"{name}-{s.name}-attestor-{slug}",
                        gcp.binaryauthorization.AttestorIamMemberArgs(project=s.project, attestor=where.attestor.name,
                                                                      role=grant.role, member=member),
                        opts=child,
                    )
                elif grant.on == KEY:
                    gcp.kms.CryptoKeyIAMMember(
                        f"{name}-key-{s.name}-{slug}",
                        gcp.kms.CryptoKeyIAMMemberArgs(
                            crypto_key_id=args.backend.keys[s.name].id, role=grant.role, member=member,
                            condition=cond and gcp.kms.CryptoKeyIAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                else:
                    raise ValueError(f"{ident.key}: {grant.role} on {grant.on!r}: no such scope")
        for i, (attribute, template) in enumerate(ident.principals):
            gcp.serviceaccount.IAMMember(
                f"{name}-wif-{i}",
                gcp.serviceaccount.IAMMemberArgs(
                    service_account_id=self.account.name,
                    role=WORKLOAD_IDENTITY_USER,
                    member=args.federation.principal_set(attribute, template.format(repository=c.repository)),
                ),
                opts=child,
            )
        self.register_outputs({"email": self.account.email})


def _condition(grant: Grant, c: BootstrapConfig, s: Stack) -> dict | None:
    if grant.condition is None:
        return None
    cond = grant.condition
    return {"title": cond.title, "description": cond.description,
            "expression": cond.expression.format(state_bucket=c.state_bucket, project=names.PROJECT, stack=s.name)}


@dataclass(frozen=True)
class GitHubRepositoryArgs:
    config: BootstrapConfig
    variables: dict[str, pulumi.Input[str]]  # the repository's Actions variables the workflows read
    # An environment's own variables (deploy-<stack>: its deploy identity's email), by environment name.
    environment_variables: dict[str, dict[str, pulumi.Input[str]]] = field(default_factory=dict)


class GitHubRepository(pulumi.ComponentResource):
    """The repository's side of the trust, as code: the environments every cloud job runs in,
    the protection of main, and the Actions variables (none is a secret; there are no secrets)."""

    environments: dict[str, github.RepositoryEnvironment]
    protection: github.BranchProtection

    def __init__(self, name: str, args: GitHubRepositoryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:GitHubRepository", name, None, opts)
        c = args.config
        provider = github.Provider(f"{name}-provider", github.ProviderArgs(owner=c.owner),
                                   opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        invoke = pulumi.InvokeOutputOptions(parent=self, provider=provider)
        teams = {t: github.get_team_output(slug=t, summary_only=True, opts=invoke).id.apply(int)
                 for t in dict.fromkeys([*c.reviewer_teams, *(x for t, _ in c.stack_reviewers.values() for x in t)])}
        users = {u: github.get_user_output(username=u, opts=invoke).id.apply(int)
                 for u in dict.fromkeys([*c.reviewer_users, *(x for _, u in c.stack_reviewers.values() for x in u)])}
        self.environments = {}
        for env in environments(c):
            env_teams, env_users = c.reviewers(env)
            reviewers = github.RepositoryEnvironmentReviewerArgs(teams=[teams[t] for t in env_teams],
                                                                 users=[users[u] for u in env_users])
            # docs.github.com/en/actions/reference/workflows-and-actions/deployments-and-environments
            self.environments[env.name] = github.RepositoryEnvironment(
                f"{name}-env-{env.name}",
                github.RepositoryEnvironmentArgs(
                    repository=c.repository_name,
                    environment=env.name,
                    reviewers=[reviewers],
                    prevent_self_review=True,
                    can_admins_bypass=False,
                    deployment_branch_policy=github.RepositoryEnvironmentDeploymentBranchPolicyArgs(
                        protected_branches=False, custom_branch_policies=True) if env.main_only else None,
                ),
                opts=child,
            )
            if env.main_only:
                github.RepositoryEnvironmentDeploymentPolicy(
                    f"{name}-env-{env.name}-main",
                    github.RepositoryEnvironmentDeploymentPolicyArgs(
                        repository=c.repository_name, environment=env.name, branch_pattern=MAIN),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                                depends_on=[self.environments[env.name]]),
                )
        self.protection = github.BranchProtection(
            f"{name}-main",
            github.BranchProtectionArgs(
                repository_id=c.repository_name,
                pattern=MAIN,
                enforce_admins=True,
                allows_force_pushes=False,
                allows_deletions=False,
                require_conversation_resolution=True,
                required_status_checks=[github.BranchProtectionRequiredStatusCheckArgs(
                    strict=True, contexts=list(REQUIRED_CHECKS))],
                required_pull_request_reviews=[github.BranchProtectionRequiredPullRequestReviewArgs(
                    required_approving_review_count=1,
                    dismiss_stale_reviews=True,
                    require_last_push_approval=True,
                )],
            ),
            opts=child,
        )
        for var, value in args.variables.items():
            github.ActionsVariable(
                f"{name}-var-{var.lower().replace('_', '-')}",
                github.ActionsVariableArgs(repository=c.repository_name, variable_name=var, value=value),
                opts=child,
            )
        for env_name, variables in args.environment_variables.items():
            for var, value in variables.items():
                github.ActionsEnvironmentVariable(
                    f"{name}-env-{env_name}-var-{var.lower().replace('_', '-')}",
                    github.ActionsEnvironmentVariableArgs(repository=c.repository_name, environment=env_name,
                                                          variable_name=var, value=value),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                                depends_on=[self.environments[env_name]]),
                )
        self.register_outputs({"environments": list(self.environments)})
