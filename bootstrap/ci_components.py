"""The bootstrap's pieces: its config, the role tables, and three components.

The role tables below are the whole of what the CI identities may do; the README's table is
checked against the IAM resources the program declares from them (tests/test_bootstrap.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp

from infra.cluster import NODE_SA_ROLE
from stackspec.names import CI_ACCOUNTS

NAMESPACE = "tpu-multislice-bootstrap"
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
DEFAULT_BRANCH = "refs/heads/main"
DEPLOY_ENVIRONMENT = "production"
# A pull request's cloud preview runs the branch's own Pulumi program as ci-preview, which can
# decrypt the stacks' secrets: its job is bound to this environment, whose required reviewers
# approve a run after reading the change, so unreviewed code never gets a cloud identity.
PREVIEW_ENVIRONMENT = "pr-preview"
DRILL_WORKFLOW = ".github/workflows/drills.yml"
IMAGE_WORKFLOW = ".github/workflows/image.yml"
KEY_ROTATION = "7776000s"  # 90 days

REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$")
RESOURCE_ID = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
NUMERIC = re.compile(r"^[0-9]{1,20}$")

# Claims GitHub puts in every job's OIDC token (``environment`` is absent from jobs without one,
# so the deploy gate reads it from ``sub``, which is ``repo:<owner>/<name>:environment:<env>``
# exactly when the job is bound to an environment).
ATTRIBUTE_MAPPING = {
    "google.subject": "assertion.sub",
    "attribute.repository": "assertion.repository",
    "attribute.event_name": "assertion.event_name",
    "attribute.ref": "assertion.ref",
    "attribute.workflow_ref": "assertion.workflow_ref",
    "attribute.sub_ref": 'assertion.sub + "@" + assertion.ref',
    "attribute.sub_event": 'assertion.sub + "@" + assertion.event_name',
}


class ConfigError(Exception):
    """Every problem in the bootstrap's stack config, one per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class BootstrapConfig:
    project: str
    repository: str
    repository_id: str | None = None
    repository_owner_id: str | None = None
    stack_projects: tuple[str, ...] = ()
    state_bucket: str = ""
    state_location: str = ""
    kms_location: str = "global"
    key_ring: str = "pulumi"
    crypto_key: str = "state"
    adopt_kms: bool = False

    @property
    def key_ring_id(self) -> str:
        return f"projects/{self.project}/locations/{self.kms_location}/keyRings/{self.key_ring}"

    @property
    def crypto_key_id(self) -> str:
        return f"{self.key_ring_id}/cryptoKeys/{self.crypto_key}"

    @property
    def secrets_provider(self) -> str:
        """What every stack file carries as ``secretsprovider``."""
        return f"gcpkms://{self.crypto_key_id}"


def read_config(cfg: pulumi.Config, gcp_cfg: pulumi.Config) -> BootstrapConfig:
    """The bootstrap's config, checked; every problem reported at once."""
    problems: list[str] = []
    project = gcp_cfg.get("project") or ""
    if not PROJECT_ID.match(project):
        problems.append(f"gcp:project = {project!r}: a GCP project ID (6-30 lowercase letters, digits, hyphens)")
    repository = cfg.get("repository") or ""
    if not REPOSITORY.match(repository):
        problems.append(f"{NAMESPACE}:repository = {repository!r}: the GitHub repository as owner/name")
    ids = {}
    for key in ("repositoryId", "repositoryOwnerId"):
        value = cfg.get(key)
        if value is not None and not NUMERIC.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: GitHub's numeric id, as a string of digits")
        ids[key] = value
    try:
        stack_projects = tuple(cfg.get_object("stackProjects") or [project])
    except Exception:  # noqa: BLE001 (pulumi raises a bare ConfigTypeError on bad JSON)
        stack_projects = ()
        problems.append(f"{NAMESPACE}:stackProjects: a list of GCP project IDs")
    for p in stack_projects:
        if not isinstance(p, str) or not PROJECT_ID.match(p):
            problems.append(f"{NAMESPACE}:stackProjects: {p!r} is not a GCP project ID")
    state_bucket = cfg.get("stateBucket") or f"{project}-pulumi-state"
    if not BUCKET.match(state_bucket) or "goog" in state_bucket:
        problems.append(f"{NAMESPACE}:stateBucket = {state_bucket!r}: not a valid bucket name")
    state_location = cfg.get("stateLocation") or gcp_cfg.get("region") or ""
    if not state_location:
        problems.append(f"{NAMESPACE}:stateLocation: set it (or gcp:region) to the state bucket's location")
    names = {k: cfg.get(k) or d for k, d in (("kmsLocation", "global"), ("keyRing", "pulumi"), ("cryptoKey", "state"))}
    for key, value in names.items():
        if not RESOURCE_ID.match(value):
            problems.append(f"{NAMESPACE}:{key} = {value!r}: letters, digits, '-' and '_' only (at most 63)")
    try:
        adopt = bool(cfg.get_bool("adoptKms"))
    except Exception:  # noqa: BLE001
        adopt = False
        problems.append(f"{NAMESPACE}:adoptKms: true or false")
    if problems:
        raise ConfigError(problems)
    return BootstrapConfig(
        project=project,
        repository=repository,
        repository_id=ids["repositoryId"],
        repository_owner_id=ids["repositoryOwnerId"],
        stack_projects=tuple(dict.fromkeys(stack_projects)),
        state_bucket=state_bucket,
        state_location=state_location,
        kms_location=names["kmsLocation"],
        key_ring=names["keyRing"],
        crypto_key=names["cryptoKey"],
        adopt_kms=adopt,
    )


def attribute_condition(c: BootstrapConfig) -> str:
    """Admission to the pool: tokens of this repository only (by its immutable ids when given)."""
    terms = [f"assertion.repository == '{c.repository}'"]
    if c.repository_id:
        terms.append(f"assertion.repository_id == '{c.repository_id}'")
    if c.repository_owner_id:
        terms.append(f"assertion.repository_owner_id == '{c.repository_owner_id}'")
    return " && ".join(terms)


# --- the role tables ---------------------------------------------------------------------------

# Where a grant applies: every stack project, the state bucket, or the secrets key.
PROJECT, STATE_BUCKET, KEY = "stack project", "state bucket", "secrets key"


@dataclass(frozen=True)
class Condition:
    title: str
    expression: str  # may hold {state_bucket}
    description: str


@dataclass(frozen=True)
class Grant:
    role: str
    on: str
    condition: Condition | None = None
    why: str = ""


@dataclass(frozen=True)
class Identity:
    key: str  # preview | deploy | drill
    account_id: str
    description: str
    grants: tuple[Grant, ...]
    # (attribute, value template) pairs: who may act as the account ({repository} filled in).
    principals: tuple[tuple[str, str], ...] = field(default=())


NOT_STATE = Condition(
    title="not-the-state-bucket",
    expression='!resource.name.startsWith("projects/_/buckets/{state_bucket}")',
    description="Buckets the stacks own; never the Pulumi state bucket (deploy reaches it through its bucket grant)",
)
NODE_ROLE_ONLY = Condition(
    title="node-service-account-role-only",
    expression=f"api.getAttribute('iam.googleapis.com/modifiedGrantsByRole', []).hasOnly(['{NODE_SA_ROLE}'])",
    description="Project IAM changes limited to granting or revoking the GKE node service account role",
)
LOCKS_ONLY = Condition(
    title="state-locks-only",
    expression='resource.name.startsWith("projects/_/buckets/{state_bucket}/objects/.pulumi/locks/")',
    description="Pulumi's lock files only: a preview writes no state",
)

PREVIEW = Identity(
    key="preview",
    account_id=CI_ACCOUNTS["preview"],
    description="CI preview: reads the stacks' projects and the state, changes nothing",
    grants=(
        Grant("roles/compute.networkViewer", PROJECT, why="networks and subnets"),
        Grant("roles/container.viewer", PROJECT, why="clusters, node pools, Kubernetes objects (no Secrets)"),
        Grant("roles/iam.serviceAccountViewer", PROJECT, why="the node service account"),
        Grant("roles/iam.securityReviewer", PROJECT, why="IAM policies the stacks add members to"),
        Grant("roles/storage.bucketViewer", PROJECT, why="the checkpoint buckets"),
        Grant("roles/storage.objectViewer", STATE_BUCKET, why="read the state"),
        Grant("roles/storage.objectUser", STATE_BUCKET, LOCKS_ONLY, why="take and release the stack lock"),
        Grant("roles/cloudkms.cryptoKeyDecrypter", KEY, why="decrypt stack secrets for the plan"),
        Grant("roles/artifactregistry.reader", PROJECT, why="the worker image repository and its IAM"),
        Grant("roles/monitoring.viewer", PROJECT, why="alert policies, dashboards, notification channels"),
        Grant("roles/logging.viewer", PROJECT, why="the log-based metrics the alerts read"),
        Grant("roles/serviceusage.serviceUsageViewer", PROJECT, why="the APIs the stacks enable"),
    ),
    # A pull request's job approved in the pr-preview environment, or any workflow on main (merged,
    # reviewed code; never less trusted than the deploy it runs in).
    principals=(("sub_event", f"repo:{{repository}}:environment:{PREVIEW_ENVIRONMENT}@pull_request"),
                ("ref", DEFAULT_BRANCH)),
)
DEPLOY = Identity(
    key="deploy",
    account_id=CI_ACCOUNTS["deploy"],
    description="CI deploy: changes what the stacks own, from main in the production environment only",
    grants=(
        Grant("roles/container.admin", PROJECT, why="clusters, node pools and the objects applied in them"),
        Grant("roles/compute.networkAdmin", PROJECT, why="the DCN networks and subnets"),
        Grant("roles/iam.serviceAccountAdmin", PROJECT, why="create the node service account"),
        Grant("roles/iam.serviceAccountUser", PROJECT, why="act as the node service account (created by the stack)"),
        Grant("roles/storage.admin", PROJECT, NOT_STATE, why="the checkpoint buckets and their IAM"),
        Grant("roles/resourcemanager.projectIamAdmin", PROJECT, NODE_ROLE_ONLY, why="the node account's one role"),
        Grant("roles/storage.objectAdmin", STATE_BUCKET, why="write the state"),
        Grant("roles/cloudkms.cryptoKeyEncrypterDecrypter", KEY, why="encrypt and decrypt stack secrets"),
        Grant("roles/artifactregistry.admin", PROJECT, why="the worker image repository and its reader/writer IAM"),
        Grant("roles/monitoring.editor", PROJECT, why="alert policies, the dashboard, notification channels"),
        Grant("roles/logging.configWriter", PROJECT, why="the log-based metrics the alerts read"),
        Grant("roles/serviceusage.serviceUsageAdmin", PROJECT, why="enable the APIs the stacks use"),
    ),
    principals=(("sub_ref", f"repo:{{repository}}:environment:{DEPLOY_ENVIRONMENT}@{DEFAULT_BRANCH}"),),
)
DRILL = Identity(
    key="drill",
    account_id=CI_ACCOUNTS["drill"],
    description="CI drill: reads the cluster; Kubernetes RBAC in the workload namespace does the rest",
    grants=(Grant("roles/container.clusterViewer", PROJECT, why="get-credentials; no Kubernetes object access"),),
    principals=(("workflow_ref", f"{{repository}}/{DRILL_WORKFLOW}@{DEFAULT_BRANCH}"),),
)
# Pushes the worker image: its only grant is roles/artifactregistry.writer on the stack's own
# repository, which the stack gives it (infra/registry.py); nothing here.
IMAGE = Identity(
    key="image",
    account_id=CI_ACCOUNTS["image"],
    description="CI image: pushes the worker image to the stacks' Artifact Registry repositories",
    grants=(),
    principals=(("workflow_ref", f"{{repository}}/{IMAGE_WORKFLOW}@{DEFAULT_BRANCH}"),),
)
IDENTITIES = (PREVIEW, DEPLOY, DRILL, IMAGE)
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"


# --- components --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateBackendArgs:
    config: BootstrapConfig


class StateBackend(pulumi.ComponentResource):
    """The Pulumi state bucket and the Cloud KMS key every stack's secrets provider uses."""

    bucket: gcp.storage.Bucket
    key_ring: gcp.kms.KeyRing
    crypto_key: gcp.kms.CryptoKey

    def __init__(self, name: str, args: StateBackendArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:StateBackend", name, None, opts)
        c = args.config
        # Losing the state or the key loses track of every deployed resource: both are
        # protected and kept on delete.
        keep = {"parent": self, "protect": True, "retain_on_delete": True}
        self.bucket = gcp.storage.Bucket(
            f"{name}-state",
            gcp.storage.BucketArgs(
                name=c.state_bucket,
                project=c.project,
                location=c.state_location,
                versioning=gcp.storage.BucketVersioningArgs(enabled=True),
                uniform_bucket_level_access=True,
                public_access_prevention="enforced",
                force_destroy=False,
            ),
            opts=pulumi.ResourceOptions(**keep),
        )
        # Adopted on the first run: the bootstrap's own state needs the key before it exists.
        self.key_ring = gcp.kms.KeyRing(
            f"{name}-keyring",
            gcp.kms.KeyRingArgs(name=c.key_ring, location=c.kms_location, project=c.project),
            opts=pulumi.ResourceOptions(**keep, import_=c.key_ring_id if c.adopt_kms else None),
        )
        self.crypto_key = gcp.kms.CryptoKey(
            f"{name}-key",
            gcp.kms.CryptoKeyArgs(
                name=c.crypto_key,
                key_ring=self.key_ring.id,
                purpose="ENCRYPT_DECRYPT",
                rotation_period=KEY_ROTATION,
            ),
            opts=pulumi.ResourceOptions(**keep, import_=c.crypto_key_id if c.adopt_kms else None),
        )
        self.register_outputs({"bucket": self.bucket.name, "cryptoKey": self.crypto_key.id})


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
                project=c.project,
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
                project=c.project,
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


class CiIdentity(pulumi.ComponentResource):
    """One CI service account: its grants from the role table, and who may act as it."""

    account: gcp.serviceaccount.Account

    def __init__(self, name: str, args: CiIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:CiIdentity", name, None, opts)
        c, ident = args.config, args.identity
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            gcp.serviceaccount.AccountArgs(
                account_id=ident.account_id, project=c.project, display_name=ident.description
            ),
            opts=child,
        )
        member = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        for grant in ident.grants:
            slug = grant.role.removeprefix("roles/").replace(".", "-")
            if grant.on == PROJECT:
                for project in c.stack_projects:
                    gcp.projects.IAMMember(
                        f"{name}-{project}-{slug}",
                        gcp.projects.IAMMemberArgs(
                            project=project, role=grant.role, member=member,
                            condition=_condition(gcp.projects.IAMMemberConditionArgs, grant, c),
                        ),
                        opts=child,
                    )
            elif grant.on == STATE_BUCKET:
                gcp.storage.BucketIAMMember(
                    f"{name}-state-{slug}",
                    gcp.storage.BucketIAMMemberArgs(
                        bucket=args.backend.bucket.name, role=grant.role, member=member,
                        condition=_condition(gcp.storage.BucketIAMMemberConditionArgs, grant, c),
                    ),
                    opts=child,
                )
            elif grant.on == KEY:
                gcp.kms.CryptoKeyIAMMember(
                    f"{name}-key-{slug}",
                    gcp.kms.CryptoKeyIAMMemberArgs(
                        crypto_key_id=args.backend.crypto_key.id, role=grant.role, member=member,
                        condition=_condition(gcp.kms.CryptoKeyIAMMemberConditionArgs, grant, c),
                    ),
                    opts=child,
                )
            else:
                raise ValueError(f"{ident.key}: {grant.role} on {grant.on!r}: no such scope")
        for attribute, template in ident.principals:
            gcp.serviceaccount.IAMMember(
                f"{name}-wif-{attribute.replace('_', '-')}",
                gcp.serviceaccount.IAMMemberArgs(
                    service_account_id=self.account.name,
                    role=WORKLOAD_IDENTITY_USER,
                    member=args.federation.principal_set(attribute, template.format(repository=c.repository)),
                ),
                opts=child,
            )
        self.register_outputs({"email": self.account.email})


def _condition(cls, grant: Grant, c: BootstrapConfig):
    if grant.condition is None:
        return None
    cond = grant.condition
    return cls(title=cond.title, description=cond.description,
               expression=cond.expression.format(state_bucket=c.state_bucket))


# APIs the identities and the stacks call (kept enabled on destroy: other things may use them).
HOME_SERVICES = ("iam.googleapis.com", "iamcredentials.googleapis.com", "sts.googleapis.com",
                 "cloudkms.googleapis.com", "storage.googleapis.com", "cloudresourcemanager.googleapis.com")
STACK_SERVICES = ("container.googleapis.com", "compute.googleapis.com", "storage.googleapis.com",
                  "iam.googleapis.com", "cloudresourcemanager.googleapis.com")
