"""The access model, as data: who may act as each CI identity (the token exchange), what each holds
(roles on resources, with conditions), the custom roles, the GitHub environments and the checks main
requires. Pure: no Pulumi import, so the components (``bootstrap.components``), the escalation check
(``bootstrap.escalation``) and the generated threat tables (docs/threat-model.md) read one model.

Where things live: the CI identities, their workload identity pool, the stacks' state bucket and
the secrets keys sit in a CI project of their own (``ciProject``), in which no CI identity holds a
project-level role: nothing that runs in CI can change who may act as whom. The bootstrap's own
state bucket and key sit there too, and no CI identity can read either.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bootstrap.config import BootstrapConfig, Stack
from bootstrap.environments import (
    DEFAULT_BRANCH,
    Environment,
    deploy_environment,
    drill_environment,
    image_environment,
    pr_preview_environment,
    read_environment,
    workflow,
)
from stackspec import limits, names

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
KEY_ROTATION = limits.KEY_ROTATION


def environments(c: BootstrapConfig) -> tuple[Environment, ...]:
    """Each stack's pr-preview-<stack>; each deploying stack's read-<stack> and deploy-<stack>; each drilled
    stack's drill-<stack>; each stack with an image section's image-<stack>."""
    return (*(pr_preview_environment(s.name) for s in c.stacks),
            *(read_environment(s.name) for s in c.stacks if s.deploy_on_push),
            *(deploy_environment(s.name) for s in c.stacks if s.deploy_on_push),
            *(drill_environment(s.name) for s in c.stacks if s.cluster_drill),
            *(image_environment(s.name) for s in c.stacks if s.image))


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
IMAGE_STACK = "the image's stack"  # in IMAGE_GRANTS: the stack of ci-image-<stack>
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
    # roles/monitoring.editor also holds serviceusage.consumerpolicy.update (a consumer policy's enable rules define
    # the usable services: editing it disables APIs), serviceusage.services.enable, every metric, uptime check,
    # group and snooze of the project (bootstrap/data/iam_roles.json). The stack's monitoring resources call only
    # create/get/patch/delete/list on projects.alertPolicies, projects.notificationChannels and projects.dashboards
    # (terraform-provider-google google/services/monitoring/resource_monitoring_{alert_policy,notification_channel}
    # .go and resource_monitoring_dashboard.go; patch is the `update` permission, cloud.google.com/monitoring/
    # access-control#permissions).
    CustomRole("tpuMultisliceMonitoring", "tpu-multislice: alert policies, notification channels, dashboards",
               tuple(f"monitoring.{kind}.{v}" for kind in ("alertPolicies", "notificationChannels", "dashboards")
                     for v in ("create", "delete", "get", "list", "update")),
               "roles/monitoring.editor"),
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
    "gcp:storage/bucketIAMPolicy:BucketIAMPolicy": custom("tpuMultisliceBuckets"),
    "gcp:artifactregistry/repository:Repository": custom("tpuMultisliceRegistry"),
    "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy": custom("tpuMultisliceRegistry"),
    "gcp:logging/metric:Metric": custom("tpuMultisliceLogMetrics"),
    "gcp:monitoring/alertPolicy:AlertPolicy": custom("tpuMultisliceMonitoring"),
    "gcp:monitoring/dashboard:Dashboard": custom("tpuMultisliceMonitoring"),
    "gcp:monitoring/notificationChannel:NotificationChannel": custom("tpuMultisliceMonitoring"),
    "gcp:projects/service:Service": custom("tpuMultisliceServices"),
    "gcp:pubsub/topic:Topic": custom("tpuMultisliceTopics"),
    # The project's one policy: get and update it, nothing else (no attestors).
    "gcp:binaryauthorization/policy:Policy": "roles/binaryauthorization.policyEditor",
}
# Resource types the stack declares today that move to the bootstrap (the stack looks them up).
MOVED_TO_BOOTSTRAP = {
    "gcp:serviceaccount/account:Account": "the node service account and the MultiKueue token account (StackProject)",
    "gcp:projects/iAMMember:IAMMember": ("the node service account's project roles, the MultiKueue account's "
                                         "roles on the workers' projects (StackProject)"),
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
    # The Actions variable holding its email: a repository variable, or one of these environments' own
    # (deploy.yml's `up` reads vars.GCP_DEPLOY_SERVICE_ACCOUNT in deploy-<stack>: each stack's own identity).
    environments: tuple[str, ...] = ()
    stack: str | None = None  # the one stack it acts on

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

# What a stack's reader may read in the state bucket: its own stack's files (ONE_STACKS_STATE's prefixes), the
# backend's meta.yaml, and the bucket's listing (names, not contents: objects.list is checked on the bucket,
# whose resource name is projects/_/buckets/<bucket>; https://cloud.google.com/storage/docs/access-control/iam#conditions).
ONE_STACKS_READ = Condition(
    title="one-stacks-state-read",
    expression=" || ".join([
        'resource.name == "projects/_/buckets/{state_bucket}"',
        f'resource.name == "{_OBJECTS}/meta.yaml"',
        *(f'resource.name.startsWith("{_OBJECTS}/{p}")'
          for p in ("stacks/{project}/{stack}.json", "history/{project}/{stack}/", "backups/{project}/{stack}/",
                    "locks/{project}/{stack}/"))]),
    description="The state, history, backups and locks of one stack, the backend's meta.yaml, the listing",
)
ONE_STACKS_LOCKS = Condition(
    title="one-stacks-locks-only",
    expression=f'resource.name.startsWith("{_OBJECTS}/locks/{{project}}/{{stack}}/")',
    description="Pulumi's lock files of one stack only: a preview writes no state",
)
# A stack's reader (ci-preview-<stack>): its grants below, on that stack alone (``of`` is filled in).
PREVIEW_GRANTS = (
    Grant("roles/compute.networkViewer", PROJECT, DEPLOYED_STACK, why="networks and subnets"),
    Grant("roles/container.viewer", PROJECT, DEPLOYED_STACK,
          why="clusters, node pools, Kubernetes objects (no Secrets)"),
    Grant("roles/iam.serviceAccountViewer", PROJECT, DEPLOYED_STACK, why="the node service account"),
    Grant("roles/iam.securityReviewer", PROJECT, DEPLOYED_STACK, why="IAM policies the stacks add members to"),
    Grant("roles/storage.bucketViewer", PROJECT, DEPLOYED_STACK, why="the checkpoint buckets (not their objects)"),
    Grant(custom("tpuMultisliceRegistryViewer"), PROJECT, DEPLOYED_STACK,
          why="the worker image repository and its IAM"),
    Grant("roles/monitoring.viewer", PROJECT, DEPLOYED_STACK, why="alert policies, dashboards, notification channels"),
    Grant(custom("tpuMultisliceLogMetricsViewer"), PROJECT, DEPLOYED_STACK, why="the log-based metrics (not the logs)"),
    Grant("roles/serviceusage.serviceUsageViewer", PROJECT, DEPLOYED_STACK, why="the APIs the stacks enable"),
    Grant("roles/pubsub.viewer", PROJECT, DEPLOYED_STACK, why="the security bulletins topic (not its messages)"),
    Grant("roles/binaryauthorization.policyViewer", PROJECT, DEPLOYED_STACK, why="the Binary Authorization policy"),
    Grant("roles/storage.objectViewer", STATE_BUCKET, DEPLOYED_STACK, ONE_STACKS_READ, why="read the stack's state"),
    Grant("roles/storage.objectUser", STATE_BUCKET, DEPLOYED_STACK, ONE_STACKS_LOCKS,
          why="take and release the stack's lock"),
    Grant("roles/cloudkms.cryptoKeyDecrypter", KEY, DEPLOYED_STACK, why="decrypt the stack's secrets for the plan"),
)


def preview_identity(stack: str, deploys: bool) -> Identity:
    """ci-preview-<stack>: reads one stack, from pr.yml in pr-preview-<stack> (a reviewer approved the pull
    request's run) and, for a stack CI deploys, from deploy.yml's preview and drills.yml's drift on main in
    read-<stack>. The state of one stack, whose providers a refresh or an orphan's delete runs, can act as no
    other stack's reader."""
    pr_env = pr_preview_environment(stack)
    main_env = read_environment(stack)
    return Identity(
        key=f"preview-{stack}",
        description=f"CI preview of {stack}: reads its project and state, changes nothing",
        grants=tuple(replace(g, of=stack) for g in PREVIEW_GRANTS),
        principals=(in_pull_request("pr.yml", pr_env),
                    *((on_main("deploy.yml", main_env), on_main("drills.yml", main_env)) if deploys else ())),
        account=names.preview_account_id(stack),
        environments=(pr_env.name, *((main_env.name,) if deploys else ())),
        stack=stack,
    )


# A deploying stack's own identity (ci-deploy-<stack>): its grants below, on that stack alone (``of`` is filled in).
DEPLOY_GRANTS = (
    Grant("roles/container.admin", PROJECT, DEPLOYED_STACK,
          why="clusters, node pools, the objects applied in them"),
    Grant("roles/compute.networkAdmin", PROJECT, DEPLOYED_STACK, why="the networks, subnets, router and NAT"),
    Grant(custom("tpuMultisliceBuckets"), PROJECT, DEPLOYED_STACK, why="the checkpoint bucket and its IAM"),
    Grant(custom("tpuMultisliceRegistry"), PROJECT, DEPLOYED_STACK, why="the worker image repository and its IAM"),
    Grant(custom("tpuMultisliceMonitoring"), PROJECT, DEPLOYED_STACK, why="alert policies, the dashboard, channels"),
    Grant(custom("tpuMultisliceLogMetrics"), PROJECT, DEPLOYED_STACK, why="the log-based metrics the alerts read"),
    Grant(custom("tpuMultisliceFirewalls"), PROJECT, DEPLOYED_STACK, why="the DCN networks' ingress rules"),
    Grant(custom("tpuMultisliceServices"), PROJECT, DEPLOYED_STACK, why="enable the APIs the stack uses"),
    Grant(custom("tpuMultisliceTopics"), PROJECT, DEPLOYED_STACK, why="the security bulletins topic"),
    Grant("roles/binaryauthorization.policyEditor", PROJECT, DEPLOYED_STACK,
          why="the project's Binary Authorization policy"),
    Grant("roles/iam.serviceAccountUser", NODE_ACCOUNT, DEPLOYED_STACK,
          why="run each cluster's nodes as its node account (GKE checks actAs)"),
    # Workload identity names the manager cluster's pool, which exists only once the stack made the cluster (cloud
    # rule iam-wi-pool-exists): the stack binds it on this one account (getIamPolicy/setIamPolicy on it). The account
    # holds only roles/container.clusterViewer on the stack's project, less than container.admin there.
    Grant("roles/iam.serviceAccountAdmin", MULTIKUEUE_ACCOUNT, DEPLOYED_STACK,
          why="bind the token job's Kubernetes service account to it (workload identity)"),
    Grant("roles/storage.objectViewer", STATE_BUCKET, DEPLOYED_STACK, ONE_STACKS_READ, why="read the stack's state"),
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
        environments=(env.name,),
        stack=stack,
    )


def drill_identity(stack: str) -> Identity:
    """ci-drill-<stack>: reads one drilled stack's cluster; its in-cluster RBAC (workloads/security.py, which names
    this account) does the rest. One per stack: a drill-<stack> approver reaches no other stack's cluster."""
    env = drill_environment(stack)
    return Identity(
        key=f"drill-{stack}",
        description=f"CI drill of {stack}: reads its cluster; Kubernetes RBAC in the workload namespace does the rest",
        grants=(Grant("roles/container.clusterViewer", PROJECT, stack,
                      why="get-credentials; no Kubernetes object access"),),
        principals=(on_main("drills.yml", env),),
        account=names.drill_account_id(stack),
        environments=(env.name,),
        stack=stack,
    )


# Pushes the worker image (roles/artifactregistry.writer on the stack's own repository, which the stack gives it,
# infra/registry.py) and signs the digest it pushed: an attestation Binary Authorization admits the workers by
# (infra/cluster_security.py). The roles gcloud's `container binauthz attestations sign-and-create` needs, each on
# the one resource (https://cloud.google.com/binary-authorization/docs/making-attestations): sign with the key,
# read the attestor (its note), attach an occurrence to the note, create the occurrence in the project.
# Each on the image's own stack only (``of`` is filled in): one stack's signer attests for no other stack's attestor.
IMAGE_GRANTS = (
    Grant("roles/cloudkms.signerVerifier", SIGNING_KEY, IMAGE_STACK, why="sign the pushed image's digest"),
    Grant("roles/binaryauthorization.attestorsViewer", ATTESTOR, IMAGE_STACK, why="the attestor's note"),
    Grant("roles/containeranalysis.notes.attacher", NOTE, IMAGE_STACK, why="attach the attestation to the note"),
    Grant(custom("tpuMultisliceAttestations"), PROJECT, IMAGE_STACK, why="create the attestation occurrence"),
)


def image_identity(stack: str) -> Identity:
    """ci-image-<stack>: pushes one stack's worker image and signs its digest, from image.yml on main in
    image-<stack> only. One per stack, as the drill and preview identities: an image-<stack> approver (or a
    compromised build of one stack) can neither push to another stack's repository nor sign for its attestor."""
    env = image_environment(stack)
    return Identity(
        key=f"image-{stack}",
        description=f"CI image of {stack}: pushes its worker image and signs the digest for Binary Authorization",
        grants=tuple(replace(g, of=stack) for g in IMAGE_GRANTS),
        principals=(on_main("image.yml", env),),
        account=names.image_account_id(stack),
        environments=(env.name,),
        stack=stack,
    )


def identities(c: BootstrapConfig) -> tuple[Identity, ...]:
    """Per stack: ci-preview-<stack>, ci-deploy-<stack> when it deploys on push, ci-drill-<stack> when drilled,
    ci-image-<stack> when it has an image section."""
    return (*(preview_identity(s.name, s.deploy_on_push) for s in c.stacks),
            *(deploy_identity(s.name) for s in c.stacks if s.deploy_on_push),
            *(drill_identity(s.name) for s in c.stacks if s.cluster_drill),
            *(image_identity(s.name) for s in c.stacks if s.image))


WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"


def stacks_of(c: BootstrapConfig, of: str) -> tuple[Stack, ...]:
    return c.stacks if of == EVERY else (c.stack(of),)


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
SECRETS_KEY_ROTATION = limits.KEY_ROTATION
# The worker image's signing key: asymmetric, EC P-256 with SHA-256, one of the algorithms Binary Authorization's
# PKIX attestors verify (https://cloud.google.com/binary-authorization/docs/creating-attestors-cli, Cloud KMS keys).
IMAGE_SIGNING_ALGORITHM = "EC_SIGN_P256_SHA256"


