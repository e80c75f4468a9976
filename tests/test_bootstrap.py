"""The bootstrap program (bootstrap/__main__.py) under Pulumi mocks, and the README against it.

Only GCP, GitHub and the Pulumi engine are replaced (``pulumi.runtime.set_mocks`` through the
offline engine's adapter, ``offline.pulumi_runtime``): the real program runs on the real example
stack file and the real stack files. The mocks answer what only GCP and GitHub know (the project
number in the pool's name, a service account's email, a team's or user's id). GitHub's token
exchange is modelled by evaluating the provider's own attribute mapping and condition on the
claims GitHub documents for each kind of job.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pytest
import yaml
from conftest import FIXTURE_STACKS, documentation, rendered, stack_files

from bootstrap import access as ci
from bootstrap import config as bcfg
from bootstrap import environments
from bootstrap import workflow_scan as scan
from bootstrap.escalation.gcp import load_roles
from infra.cluster import NODE_SA_ROLE
from offline import pulumi_runtime
from slicectl import bootstrap_preview as bp
from slicectl import cmd_stacks
from stackspec import names, spec

ROOT = Path(__file__).resolve().parents[1]
BOOT = ROOT / "bootstrap"
EXAMPLE = BOOT / "Pulumi.example.yaml"
WORKFLOWS = ROOT / ".github" / "workflows"
# The bootstrap program's mocks are the product's (``slicectl bootstrap --preview`` renders under them): GCP's and
# GitHub's answers shaped as the providers return them, the key version's public half a parameter.
PROJECT_NUMBER = bp.OFFLINE_NUMBER
BootstrapMocks = bp.Mocks


class ImportsMonitor(pulumi_runtime.RecordingMonitor):
    """Also keeps each registration's ``import`` id (the adapter does not need it)."""

    def __init__(self, mocks, on_register):
        super().__init__(mocks, on_register)
        self.imports: dict[str, str] = {}

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method name)
        if request.importId:
            self.imports[request.name] = request.importId
        return super().RegisterResource(request)


@dataclass
class Boot:
    resources: list[pulumi_runtime.Registration]
    exports: dict
    imports: dict[str, str]

    def of(self, type_: str) -> list[pulumi_runtime.Registration]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> pulumi_runtime.Registration:
        (r,) = self.of(type_)
        return r


def example_config() -> dict[str, str]:
    """The example stack file as the flat config map Pulumi hands the program."""
    flat = {}
    for key, value in yaml.safe_load(EXAMPLE.read_text())["config"].items():
        key = key if ":" in key else f"{bcfg.NAMESPACE}:{key}"
        flat[key] = value if isinstance(value, str) else json.dumps(value)
    return flat


def render(config: dict[str, str], mocks: BootstrapMocks | None = None) -> Boot:
    recorded: list[pulumi_runtime.Registration] = []
    mocks = mocks or BootstrapMocks()
    monitor = ImportsMonitor(mocks, recorded.append)
    pulumi_runtime.start(mocks, monitor, project="tpu-multislice-bootstrap", stack="admin", config=config)
    path, cwd = list(sys.path), os.getcwd()

    def program():
        runpy.run_path(str(BOOT / "__main__.py"), run_name="__main__")

    try:
        os.chdir(BOOT)
        exports = pulumi_runtime.run(program)
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    return Boot([r for r in recorded if r.type != "pulumi:pulumi:Stack"], exports, monitor.imports)


@pytest.fixture(scope="module")
def boot() -> Boot:
    return render(example_config())


@pytest.fixture(scope="module")
def ci_multi():
    """The multi-region stack's program (offline.engine.render)."""
    return rendered("multi")


CFG = example_config()
NS = bcfg.NAMESPACE
CI_PROJECT = CFG[f"{NS}:ciProject"]
STATE = CFG[f"{NS}:stateBucket"]
BOOT_STATE = CFG[f"{NS}:bootstrapStateBucket"]
REPO = CFG[f"{NS}:repository"]
STACKS = {p.name.removeprefix("Pulumi.").removesuffix(".yaml"): spec.load_stack(
    p.name.removeprefix("Pulumi.").removesuffix(".yaml")) for p in sorted(FIXTURE_STACKS.glob("Pulumi.*.yaml"))}
PROD_PROJECT = STACKS["prod"].project
# The bootstrap's config as the program reads it (for the declared environments).
CONFIG = bcfg.BootstrapConfig(ci_project=CI_PROJECT, repository=REPO, repository_id=CFG[f"{NS}:repositoryId"],
                            repository_owner_id=CFG[f"{NS}:repositoryOwnerId"], stacks=tuple(bcfg.read_stacks()[0]))
PROD_DEPLOY = names.deploy_account_id("prod")  # ci-deploy-prod
# The CI accounts the example renders: per stack a reader, a deploy identity when it deploys on push, a drill
# identity when drilled, an image identity when it has an image section.
IMAGE_STACKS = [k for k, s in STACKS.items() if s.image is not None]
CI_ACCOUNTS = [*(names.preview_account_id(k) for k in STACKS),
               *(names.deploy_account_id(k) for k, s in STACKS.items() if s.deploy.on_push),
               *(names.drill_account_id(k) for k, s in STACKS.items() if s.deploy.cluster_drill),
               *(names.image_account_id(k) for k in IMAGE_STACKS)]


def _clusters(s) -> list[tuple[str, str]]:
    """(cluster, region) of every cluster a stack runs: a multi-region stack's manager and regions."""
    if s.multi_region:
        return [(s.manager.name, s.manager.region), *((v.cluster.name, v.region) for v in s.region_views())]
    return [(s.cluster.name, s.region)]


# (stack, project, cluster, region) of every cluster of every stack.
CLUSTERS = [(k, s.project, c, r) for k, s in STACKS.items() for c, r in _clusters(s)]


def member_id(member: str) -> str:
    """``serviceAccount:ci-deploy-prod@p.iam...`` -> ``ci-deploy-prod``."""
    return member.removeprefix("serviceAccount:").split("@")[0]


# --- state and keys ----------------------------------------------------------------------------


def test_two_state_buckets_in_the_ci_project_versioned_private_and_kept(boot):
    buckets = {r.inputs["name"]: r for r in boot.of("gcp:storage/bucket:Bucket")}
    assert set(buckets) == {STATE, BOOT_STATE}
    for b in buckets.values():
        assert b.inputs["project"] == CI_PROJECT
        assert b.inputs["versioning"] == {"enabled": True}
        assert b.inputs["uniformBucketLevelAccess"] is True
        assert b.inputs["publicAccessPrevention"] == "enforced"
        assert b.inputs["forceDestroy"] is False
        assert b.protect and b.retain_on_delete
    assert boot.exports["PULUMI_STATE_BUCKET"] == STATE and boot.exports["bootstrapStateBucket"] == BOOT_STATE


def in_ci_project(r) -> bool:
    """A key or key ring of the CI project (the stacks' Secrets keys live in their own projects)."""
    ring = r.inputs.get("keyRing", "")
    return r.inputs.get("project") == CI_PROJECT or ring.startswith(f"projects/{CI_PROJECT}/")


def test_each_stack_has_its_own_key_and_its_stack_file_names_it(boot):
    keys = {r.inputs["name"]: r for r in boot.of("gcp:kms/cryptoKey:CryptoKey") if in_ci_project(r)}
    rings = {r.inputs["name"]: r for r in boot.of("gcp:kms/keyRing:KeyRing") if in_ci_project(r)}
    assert set(rings) == {"pulumi", "bootstrap"} and all(r.inputs["project"] == CI_PROJECT for r in rings.values())
    assert set(keys) == {"state", *STACKS}
    for k in keys.values():
        assert k.inputs["purpose"] == "ENCRYPT_DECRYPT" and k.inputs["rotationPeriod"] == ci.KEY_ROTATION
        assert k.protect and k.retain_on_delete
    assert keys["state"].inputs["keyRing"].endswith("/keyRings/bootstrap")
    providers = boot.exports["secretsproviders"]
    assert set(providers) == set(STACKS)
    for stack, s in STACKS.items():
        key = keys[stack]
        assert providers[stack] == f"gcpkms://{key.inputs['keyRing']}/cryptoKeys/{stack}"
        assert s.secrets_provider == providers[stack], f"stacks/Pulumi.{stack}.yaml: secretsprovider"
        doc = yaml.safe_load((FIXTURE_STACKS / f"Pulumi.{stack}.yaml").read_text())
        assert "encryptionsalt" not in doc, f"{stack}: a passphrase provider"
    scanned = [*WORKFLOWS.glob("*.y*ml"), *FIXTURE_STACKS.glob("*.yaml"), ROOT / ".ci/run",
               *(f for f in BOOT.iterdir() if f.is_file())]
    for f in scanned:
        assert "PULUMI_CONFIG_PASSPHRASE" not in f.read_text(), f"{f}: a passphrase"


def test_no_ci_identity_can_reach_the_bootstraps_own_state_or_key(boot):
    for r in boot.of("gcp:storage/bucketIAMMember:BucketIAMMember"):
        assert r.inputs["bucket"] == STATE
    boot_key = f"projects/{CI_PROJECT}/locations/global/keyRings/bootstrap/cryptoKeys/state"
    secrets_keys = {names.secrets_key_id(p, r, c) for _, p, c, r in CLUSTERS}
    for r in boot.of("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"):
        if r.inputs["cryptoKeyId"] in secrets_keys:  # a cluster's Secrets key: GKE's service agent only
            assert "@container-engine-robot.iam.gserviceaccount.com" in r.inputs["member"], r.name
            continue
        if r.inputs["cryptoKeyId"].endswith("-image-signer"):  # a stack's image signing key: its own ci-image signs
            (stack,) = [k for k in IMAGE_STACKS if r.inputs["cryptoKeyId"].endswith(
                f"/cryptoKeys/{names.image_signing_key(_clusters(STACKS[k])[0][0])}")
                and f"projects/{STACKS[k].project}/" in r.inputs["cryptoKeyId"]]
            assert member_id(r.inputs["member"]) == names.image_account_id(stack), r.name
            assert r.inputs["role"] == "roles/cloudkms.signerVerifier", r.name
            continue
        assert r.inputs["cryptoKeyId"] != boot_key and r.inputs["cryptoKeyId"].split("/")[-1] in STACKS


def test_each_cluster_gets_its_secrets_key_in_its_region_with_gkes_agent_on_it(boot, prod):
    """Application-layer Secrets encryption (cloud rule gke-secrets-kms-key): the key the prod cluster names is
    made here, in the cluster's region and project, before any stack runs, with GKE's service agent on it."""
    keys = {f"{r.inputs['keyRing']}/cryptoKeys/{r.inputs['name']}": r for r in boot.of("gcp:kms/cryptoKey:CryptoKey")}
    rings = {f"projects/{r.inputs['project']}/locations/{r.inputs['location']}/keyRings/{r.inputs['name']}": r
             for r in boot.of("gcp:kms/keyRing:KeyRing")}
    (cluster,) = prod.by_type("gcp:container/cluster:Cluster")
    assert cluster.inputs["databaseEncryption"]["state"] == "ENCRYPTED"
    named = cluster.inputs["databaseEncryption"]["keyName"]
    for _, project, c, region in CLUSTERS:
        key_id = names.secrets_key_id(project, region, c)
        key = keys[key_id]
        assert key.inputs["keyRing"] in rings and key.protect and key.retain_on_delete
        assert key.inputs["rotationPeriod"] == ci.SECRETS_KEY_ROTATION
        (grant,) = [r for r in boot.of("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
                    if r.inputs["cryptoKeyId"] == key_id]
        assert grant.inputs["role"] == "roles/cloudkms.cryptoKeyEncrypterDecrypter"
        assert grant.inputs["member"].startswith("serviceAccount:service-")
        assert grant.inputs["member"].endswith("@container-engine-robot.iam.gserviceaccount.com")
    assert named == names.secrets_key_id(STACKS["prod"].project, STACKS["prod"].region, STACKS["prod"].cluster.name)
    assert named in keys
    # No CI identity holds anything on a Secrets key (the deploy identity needs no Cloud KMS admin).
    assert not [r for r in boot.of("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
                if r.inputs["cryptoKeyId"] == named and "container-engine-robot" not in r.inputs["member"]]


def test_every_api_the_identities_and_stacks_use_is_enabled(boot):
    enabled = {(r.inputs["project"], r.inputs["service"]) for r in boot.of("gcp:projects/service:Service")}
    assert {(CI_PROJECT, s) for s in ci.HOME_SERVICES} <= enabled
    assert {(s.project, api) for s in STACKS.values() for api in ci.STACK_SERVICES} <= enabled
    assert all(r.inputs["disableOnDestroy"] is False for r in boot.of("gcp:projects/service:Service"))


def test_adopting_kms_imports_only_the_bootstraps_gcloud_made_key(boot):
    """First run: the bootstrap's key ring and key exist already (its own state needs them)."""
    ring = f"projects/{CI_PROJECT}/locations/global/keyRings/bootstrap"
    assert boot.imports == {"backend-bootstrap-keyring": ring, "backend-bootstrap-key": f"{ring}/cryptoKeys/state"}
    later = render({**example_config(), f"{NS}:adoptKms": "false"})
    assert later.imports == {}


# --- the stack projects --------------------------------------------------------------------------


def test_the_node_service_account_of_each_stack_is_made_here_with_its_roles(boot):
    accounts = {(r.inputs["project"], r.inputs["accountId"]) for r in boot.of("gcp:serviceaccount/account:Account")}
    for _, project, c, _ in CLUSTERS:
        assert (project, names.node_service_account_id(c)) in accounts
    for stack, s in STACKS.items():
        first = _clusters(s)[0][0]  # a multi-region stack's: its manager's
        email = f"{names.node_service_account_id(first)}@{s.project}.iam.gserviceaccount.com"
        assert boot.exports["nodeServiceAccounts"][stack] == email
    node_roles = [r for r in boot.of("gcp:projects/iAMMember:IAMMember") if r.inputs["role"] == NODE_SA_ROLE]
    assert {(r.inputs["project"], r.inputs["member"]) for r in node_roles} == {
        (p, f"serviceAccount:{names.node_service_account_email(c, p)}") for _, p, c, _ in CLUSTERS}
    # Image streaming (a stack with its own image, prod) also needs Service Usage Consumer on the node account.
    streaming = [r for r in boot.of("gcp:projects/iAMMember:IAMMember")
                 if r.inputs["role"] == "roles/serviceusage.serviceUsageConsumer"]
    assert {(r.inputs["project"], r.inputs["member"]) for r in streaming} == {
        (p, f"serviceAccount:{names.node_service_account_email(c, p)}") for k, p, c, _ in CLUSTERS
        if STACKS[k].image is not None and STACKS[k].image.streaming}
    assert streaming and all(r.name.endswith("-nodes-serviceusageconsumer") for r in streaming)
    # The CI accounts live in the CI project, nowhere else.
    ci_accounts = {r.inputs["accountId"]: r.inputs["project"] for r in boot.of("gcp:serviceaccount/account:Account")
                   if r.inputs["accountId"].startswith("ci-")}
    assert ci_accounts == {a: CI_PROJECT for a in CI_ACCOUNTS}


def test_the_multikueue_token_account_of_a_multi_region_stack_is_made_here_with_its_viewer_role(boot, ci_multi):
    """A multi-region stack's token job runs as <manager>-multikueue (stackspec.names, which the stack's binding
    names too), made here with roles/container.clusterViewer on the workers' projects (workloads/multikueue.py
    iam_grants): the stack program creates neither (no deploy identity may)."""
    from workloads import multikueue as mk

    multi_region = {k: s for k, s in STACKS.items() if s.multi_region}
    assert multi_region, "no multi-region stack ships"
    accounts = {(r.inputs["project"], r.inputs["accountId"]) for r in boot.of("gcp:serviceaccount/account:Account")}
    assert boot.exports["multikueueServiceAccounts"] == {
        k: names.multikueue_account_email(s.manager.name, s.project) for k, s in multi_region.items()}
    # Every account beside the CI and node ones is a multi-region stack's MultiKueue account: single-region stacks
    # get none.
    others = {(p, a) for p, a in accounts if a not in CI_ACCOUNTS} - {
        (p, names.node_service_account_id(c)) for _, p, c, _ in CLUSTERS}
    assert others == {(s.project, names.multikueue_account_id(s.manager.name)) for s in multi_region.values()}
    members = {f"serviceAccount:{a}@{p}.iam.gserviceaccount.com" for p, a in others}
    viewers = {(r.inputs["project"], r.inputs["role"], r.inputs["member"]) for r in boot.of(
        "gcp:projects/iAMMember:IAMMember") if r.inputs["member"] in members}
    want = set()
    for s in multi_region.values():
        m = mk.manager_of(s)
        assert m.google_service_account == names.multikueue_account_email(s.manager.name, s.project)
        want |= {(g.project, g.role, g.member) for g in mk.iam_grants(m, s.region_views())}
    assert viewers == want and {role for _, role, _ in want} == {"roles/container.clusterViewer"}
    # The multi stack's program binds workload identity on this account only.
    [wi] = ci_multi.by_type("gcp:serviceaccount/iAMMember:IAMMember")
    multi = STACKS["multi"]
    assert wi.inputs["serviceAccountId"] == (
        f"projects/{multi.project}/serviceAccounts/{boot.exports['multikueueServiceAccounts']['multi']}")
    assert not ci_multi.by_type("gcp:projects/iAMMember:IAMMember")


def test_custom_roles_are_made_where_granted_and_replace_the_broad_predefined_ones(boot):
    made = {(r.inputs["project"], r.inputs["roleId"]): r for r in boot.of("gcp:projects/iAMCustomRole:IAMCustomRole")}
    granted = {(r.inputs["project"], r.inputs["role"].rsplit("/", 1)[1])
               for r in boot.of("gcp:projects/iAMMember:IAMMember") if "/roles/" in r.inputs["role"]}
    assert set(made) == granted
    for (_, rid), r in made.items():
        assert r.inputs["permissions"] == list(ci.CUSTOM_ROLES[rid].permissions)
        assert all(re.fullmatch(r"[a-z]+(\.[a-zA-Z]+){2}", p) for p in r.inputs["permissions"]), "no wildcard"
    replaced = {r.replaces for r in ci.CUSTOM_ROLES.values()}
    assert {"roles/logging.configWriter", "roles/artifactregistry.admin", "roles/storage.admin",
            "roles/serviceusage.serviceUsageAdmin"} <= replaced
    for type_ in SCOPES:
        for r in boot.of(type_):
            assert r.inputs["role"] not in replaced, r.name


def test_no_ci_identity_can_widen_its_own_power(boot):
    """No role that creates service accounts, changes a project's IAM policy, mints tokens for
    another account, or touches the CI project; acting as an account only on prod's node account."""
    ci_members = {f"serviceAccount:{a}@{CI_PROJECT}.iam.gserviceaccount.com" for a in CI_ACCOUNTS}
    forbidden = {"roles/iam.serviceAccountAdmin", "roles/resourcemanager.projectIamAdmin", "roles/owner",
                 "roles/editor", "roles/iam.serviceAccountTokenCreator", "roles/iam.securityAdmin",
                 "roles/iam.workloadIdentityPoolAdmin", "roles/cloudkms.admin", "roles/storage.admin"}
    for r in boot.of("gcp:projects/iAMMember:IAMMember"):
        if r.inputs["member"] in ci_members:
            assert r.inputs["project"] != CI_PROJECT
            assert r.inputs["role"] not in forbidden | {"roles/iam.serviceAccountUser"}, r.name
    acts_as = [r for r in boot.of("gcp:serviceaccount/iAMMember:IAMMember") if r.inputs["member"] in ci_members]
    prod_nodes = boot.exports["nodeServiceAccounts"]["prod"]
    assert [(member_id(r.inputs["member"]), r.inputs["role"], r.inputs["serviceAccountId"]) for r in acts_as] == [
        (PROD_DEPLOY, "roles/iam.serviceAccountUser", f"projects/{PROD_PROJECT}/serviceAccounts/{prod_nodes}")]
    # Who may act as the CI accounts: the pool's principal sets only.
    for r in boot.of("gcp:serviceaccount/iAMMember:IAMMember"):
        if r.inputs["member"] not in ci_members:
            assert r.inputs["role"] == ci.WORKLOAD_IDENTITY_USER and r.inputs["member"].startswith("principalSet://")


def test_deploy_and_drill_hold_nothing_outside_the_stack_they_act_on(boot):
    for r in boot.of("gcp:projects/iAMMember:IAMMember"):
        if member_id(r.inputs["member"]) in (PROD_DEPLOY, "ci-drill"):
            assert r.inputs["project"] == PROD_PROJECT, r.name
    deploy_keys = {r.inputs["cryptoKeyId"].rsplit("/", 1)[1] for r in boot.of(
        "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember") if member_id(r.inputs["member"]) == PROD_DEPLOY}
    assert deploy_keys == {"prod"}
    (write,) = [r for r in boot.of("gcp:storage/bucketIAMMember:BucketIAMMember")
                if member_id(r.inputs["member"]) == PROD_DEPLOY and r.inputs["role"] == "roles/storage.objectAdmin"]
    expr = write.inputs["condition"]["expression"]
    objects = f"projects/_/buckets/{STATE}/objects/.pulumi"
    # Pulumi's file backend layout for project-scoped stacks; dev's objects stay out of reach.
    p = names.PROJECT
    for path in (f"stacks/{p}/prod.json", f"history/{p}/prod/", f"backups/{p}/prod/", f"locks/{p}/prod/"):
        assert f'resource.name.startsWith("{objects}/{path}")' in expr
    assert "/dev" not in expr


def test_every_resource_type_prod_declares_is_covered_by_a_deploy_role(prod, ci_multi):
    """The custom roles list what the stack's resources need: a new resource type in the stack
    program fails here until bootstrap/access.py MANAGED_BY (and a role's permissions) cover it."""
    deploy_roles = {g.role for g in ci.DEPLOY_GRANTS if g.on == ci.PROJECT}
    # The multi stack's one service-account binding: workload identity on the bootstrap's MultiKueue account,
    # which its deploy identity administers (that account only).
    multi_types = {r.type for r in ci_multi.resources if r.type.startswith("gcp:")}
    assert not sorted(multi_types - set(ci.MANAGED_BY) - set(ci.MOVED_TO_BOOTSTRAP)
                      - {"gcp:serviceaccount/iAMMember:IAMMember"})
    assert [g.role for g in ci.DEPLOY_GRANTS if g.on == ci.MULTIKUEUE_ACCOUNT] == ["roles/iam.serviceAccountAdmin"]
    for r in ci_multi.resources:
        if r.type == "gcp:projects/iAMMember:IAMMember":
            assert r.inputs["role"] == NODE_SA_ROLE, r.name
    types = {r.type for r in prod.resources if r.type.startswith("gcp:")}
    missing = sorted(types - set(ci.MANAGED_BY) - set(ci.MOVED_TO_BOOTSTRAP))
    assert not missing, f"bootstrap/access.py MANAGED_BY: no deploy role for {missing}"
    assert {ci.MANAGED_BY[t] for t in types if t in ci.MANAGED_BY} <= deploy_roles
    # The stack's own service accounts and project IAM grants are the node account's (made here).
    for r in prod.resources:
        if r.type == "gcp:serviceaccount/account:Account":
            assert r.inputs["accountId"] == names.node_service_account_id(STACKS["prod"].cluster.name)
        if r.type == "gcp:projects/iAMMember:IAMMember":
            assert r.inputs["role"] == NODE_SA_ROLE


# --- the pool ---------------------------------------------------------------------------------------


def test_pool_admits_only_this_repository_by_name_and_immutable_ids(boot):
    provider = boot.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert provider.inputs["project"] == CI_PROJECT
    assert provider.inputs["oidc"] == {"issuerUri": "https://token.actions.githubusercontent.com"}
    assert provider.inputs["attributeMapping"] == ci.ATTRIBUTE_MAPPING
    assert provider.inputs["attributeCondition"] == (
        f"assertion.repository == '{REPO}' && assertion.repository_id == '{CFG[f'{NS}:repositoryId']}' && "
        f"assertion.repository_owner_id == '{CFG[f'{NS}:repositoryOwnerId']}' && "
        "assertion.workflow_ref == assertion.job_workflow_ref")
    assert boot.exports["GCP_WORKLOAD_IDENTITY_PROVIDER"].endswith(
        "/workloadIdentityPools/github/providers/github-actions")


# --- GitHub's token exchange, modelled ---------------------------------------------------------


def evaluate(expression: str, claims: dict) -> object:
    """The CEL the bootstrap writes: ``assertion.x``, ``.extract('{name}suffix')``, string literals,
    ``+``, and ``==`` joined by ``&&``. A claim the token lacks fails the evaluation (as in CEL): None.
    """
    def term(t: str):
        t = t.strip()
        m = re.fullmatch(r"assertion\.(\w+)(?:\.extract\('\{\w+\}([^']*)'\))?", t)
        if m:
            value = claims.get(m.group(1))
            if value is None or m.group(2) is None:
                return value
            return value.split(m.group(2), 1)[0] if m.group(2) in value else ""
        m = re.fullmatch(r"""(['"])(.*)\1""", t)
        assert m, f"unsupported CEL term {t!r}"
        return m.group(2)

    def concat(e: str):
        parts = [term(p) for p in e.split(" + ")]
        return None if None in parts else "".join(parts)

    if "==" in expression:
        return all(concat(a) == concat(b) for a, b in (c.split(" == ") for c in expression.split(" && ")))
    return concat(expression)


MAIN = ci.DEFAULT_BRANCH
PR_REF = "refs/pull/7/merge"


def claims(event: str, ref: str, workflow: str, environment: str | None = None, repo: str = REPO,
           caller: str | None = None) -> dict:
    """GitHub's OIDC claims for a job (docs.github.com/en/actions/reference/security/oidc)."""
    sub = (f"repo:{repo}:environment:{environment}" if environment else
           f"repo:{repo}:pull_request" if event == "pull_request" else f"repo:{repo}:ref:{ref}")
    job_ref = f"{repo}/.github/workflows/{workflow}@{ref}"
    out = {"sub": sub, "repository": repo, "event_name": event, "ref": ref, "job_workflow_ref": job_ref,
           "workflow_ref": f"{repo}/.github/workflows/{caller}@{ref}" if caller else job_ref,
           "repository_id": CFG[f"{NS}:repositoryId"], "repository_owner_id": CFG[f"{NS}:repositoryOwnerId"]}
    if environment:
        out["environment"] = environment
    return out


def usable(boot: Boot, token: dict) -> set[str]:
    """The CI identities a job with ``token`` can impersonate."""
    provider = boot.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    if not evaluate(provider.inputs["attributeCondition"], token):
        return set()
    attrs = {k.removeprefix("attribute."): evaluate(v, token)
             for k, v in provider.inputs["attributeMapping"].items() if k.startswith("attribute.")}
    out = set()
    for attribute, value, account in principals(boot):
        if attrs.get(attribute) == value:
            out.add(account)
    return out


def principals(boot: Boot) -> set[tuple[str, str, str]]:
    pool = boot.one("gcp:iam/workloadIdentityPool:WorkloadIdentityPool")
    prefix = (f"principalSet://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/"
              f"workloadIdentityPools/{pool.inputs['workloadIdentityPoolId']}/attribute.")
    out = set()
    for b in boot.of("gcp:serviceaccount/iAMMember:IAMMember"):
        if b.inputs["role"] != ci.WORKLOAD_IDENTITY_USER:
            continue
        assert b.inputs["member"].startswith(prefix)
        attribute, _, value = b.inputs["member"].removeprefix(prefix).partition("/")
        out.add((attribute, value, b.inputs["serviceAccountId"].rsplit("/", 1)[1].split("@")[0]))
    return out


@pytest.mark.parametrize(
    ("what", "token", "expected"),
    [
        # A pull request's code gets a cloud identity only once a reviewer approves its run in pr-preview.
        ("a pull request, no environment", claims("pull_request", PR_REF, "pr.yml"), set()),
        ("pr.yml's preview approved in pr-preview-prod", claims("pull_request", PR_REF, "pr.yml", "pr-preview-prod"),
         {"ci-preview-prod"}),
        ("pr.yml's preview approved in pr-preview-dev", claims("pull_request", PR_REF, "pr.yml", "pr-preview-dev"),
         {"ci-preview-dev"}),
        ("the old shared pr-preview", claims("pull_request", PR_REF, "pr.yml", "pr-preview"), set()),
        ("a new workflow file of a pull request in pr-preview",
         claims("pull_request", PR_REF, "evil.yml", "pr-preview"), set()),
        ("deploy.yml edited in a pull request to run in pr-preview",
         claims("pull_request", PR_REF, "deploy.yml", "pr-preview"), set()),
        ("a pull request in production (GitHub's branch rule refuses it too)",
         claims("pull_request", PR_REF, "deploy.yml", "deploy-prod"), set()),
        ("pr-preview on a push to a branch", claims("push", "refs/heads/x", "pr.yml", "pr-preview"), set()),
        ("pull_request_target", claims("pull_request_target", MAIN, "pr.yml", "pr-preview"), set()),
        # Main: each job gets its own identity only.
        ("deploy.yml's up: main, production", claims("push", MAIN, "deploy.yml", "deploy-prod"), {"ci-deploy-prod"}),
        ("deploy.yml's preview job of prod", claims("push", MAIN, "deploy.yml", "read-prod"), {"ci-preview-prod"}),
        ("deploy.yml on main without an environment", claims("push", MAIN, "deploy.yml"), set()),
        ("a stack CI does not deploy, read on main", claims("push", MAIN, "deploy.yml", "read-dev"), set()),
        # A stack that does not deploy on push has no deploy environment GCP trusts, nor an identity.
        ("deploy.yml on main in a stack's environment that is not deployed",
         claims("push", MAIN, "deploy.yml", "deploy-dev"), set()),
        ("the old shared production environment", claims("push", MAIN, "deploy.yml", "production"), set()),
        ("a stack's deploy environment from drills.yml", claims("schedule", MAIN, "drills.yml", "deploy-prod"), set()),
        ("production off main", claims("push", "refs/heads/x", "deploy.yml", "deploy-prod"), set()),
        ("production from another workflow on main", claims("push", MAIN, "image.yml", "deploy-prod"), set()),
        ("deploy.yml on main in another environment", claims("push", MAIN, "deploy.yml", "staging"), set()),
        ("the image build on main, approved in image-prod", claims("push", MAIN, "image.yml", "image-prod"),
         {"ci-image-prod"}),
        ("the image build in another workflow's environment", claims("push", MAIN, "image.yml", "deploy-prod"),
         set()),
        ("the image build on main without its environment", claims("push", MAIN, "image.yml"), set()),
        ("the image build dispatched on a branch", claims("workflow_dispatch", "refs/heads/x", "image.yml"), set()),
        ("drills.yml's drift job of prod on main", claims("schedule", MAIN, "drills.yml", "read-prod"),
         {"ci-preview-prod"}),
        ("drills.yml on main without an environment", claims("schedule", MAIN, "drills.yml"), set()),
        ("drills.yml's cluster drill, approved in drill", claims("schedule", MAIN, "drills.yml", "drill-prod"),
         {"ci-drill-prod"}),
        ("the cluster drill dispatched on a branch",
         claims("workflow_dispatch", "refs/heads/x", "drills.yml", "drill-prod"), set()),
        ("drill environment from deploy.yml", claims("push", MAIN, "deploy.yml", "drill-prod"), set()),
        ("a renamed copy of drills.yml on main", claims("schedule", MAIN, "drills2.yml", "drill-prod"), set()),
        ("a push to another branch", claims("push", "refs/heads/x", "pr.yml"), set()),
        ("any other workflow on main", claims("push", MAIN, "other.yml"), set()),
        # deploy.yml called as a reusable workflow from another file: job_workflow_ref is deploy.yml's.
        ("deploy.yml reused by another workflow",
         claims("push", MAIN, "deploy.yml", "deploy-prod", caller="other.yml"), set()),
        ("another repository", claims("push", MAIN, "deploy.yml", "deploy-prod", repo="evil/tpu"), set()),
        ("same name, other repository id",
         {**claims("push", MAIN, "deploy.yml", "deploy-prod"), "repository_id": "1"}, set()),
        ("same name, other owner id",
         {**claims("push", MAIN, "deploy.yml", "deploy-prod"), "repository_owner_id": "1"}, set()),
    ],
)
def test_who_can_act_as_which_identity(boot, what, token, expected):
    assert usable(boot, token) == expected, what


# --- GitHub: environments, branch protection, variables ----------------------------------------------


def test_environments_require_a_reviewer_who_is_not_the_author_and_main_where_declared(boot):
    envs = {r.inputs["environment"]: r for r in boot.of("github:index/repositoryEnvironment:RepositoryEnvironment")}
    declared = ci.environments(CONFIG)
    assert set(envs) == {e.name for e in declared} == {
        *(names.pr_preview_environment(k) for k in STACKS), "read-prod", "deploy-prod", "drill-prod",
        *(names.image_environment(k) for k in IMAGE_STACKS)}
    policies = {(r.inputs["environment"], r.inputs["branchPattern"]) for r in boot.of(
        "github:index/repositoryEnvironmentDeploymentPolicy:RepositoryEnvironmentDeploymentPolicy")}
    teams = json.loads(CFG[f"{NS}:reviewerTeams"])
    for env in declared:
        r = envs[env.name].inputs
        assert r["repository"] == REPO.split("/")[1]
        assert r["canAdminsBypass"] is False
        if env.reviewed:
            assert r["preventSelfReview"] is True
            assert r["reviewers"] == [{"teams": [1000 + len(t) for t in teams], "users": []}]
        else:  # read-<stack>: its OIDC subject names the stack; main's code, admitted for main only
            assert env.main_only and "reviewers" not in r
        if env.main_only:
            assert r["deploymentBranchPolicy"] == {"protectedBranches": False, "customBranchPolicies": True}
            assert (env.name, "main") in policies
        else:
            assert "deploymentBranchPolicy" not in r
    assert {e for e, _ in policies} == {e.name for e in declared if e.main_only}
    assert all("pulumi:providers:github::repository-provider::" in r.provider for r in envs.values())


def test_required_checks_can_be_satisfied_only_by_github_actions(boot):
    """A required check bound to no app is satisfied by a commit status any writer posts under its name;
    each one is bound to GitHub Actions (app 15368), on main, with no bypass."""
    (r,) = boot.of("github:index/repositoryRuleset:RepositoryRuleset")
    r = r.inputs
    assert r["repository"] == REPO.split("/")[1] and r["target"] == "branch" and r["enforcement"] == "active"
    assert not r.get("bypassActors")
    assert r["conditions"]["refName"] == {"includes": ["refs/heads/main"], "excludes": []}
    checks = r["rules"]["requiredStatusChecks"]
    assert checks["strictRequiredStatusChecksPolicy"] is True
    assert checks["requiredChecks"] == [{"context": c, "integrationId": 15368} for c in environments.REQUIRED_CHECKS]


def test_main_is_protected(boot):
    p = boot.one("github:index/branchProtection:BranchProtection").inputs
    assert p["pattern"] == "main" and p["repositoryId"] == REPO.split("/")[1]
    assert p["enforceAdmins"] is True and p["allowsForcePushes"] is False and p["allowsDeletions"] is False
    assert "requiredStatusChecks" not in p  # classic contexts cannot name an app: the ruleset holds the checks
    (reviews,) = p["requiredPullRequestReviews"]
    assert reviews["requiredApprovingReviewCount"] >= 1 and reviews["dismissStaleReviews"] is True
    assert reviews["requireLastPushApproval"] is True
    (provider,) = boot.of("pulumi:providers:github")
    assert provider.inputs["owner"] == REPO.split("/")[0]


def test_actions_variables_are_the_exports_the_workflows_read(boot):
    workflows = " ".join(p.read_text() for p in WORKFLOWS.glob("*.yml"))
    used = set(re.findall(r"vars\.([A-Z_]+)", workflows))
    exported = {k for k in boot.exports if k.isupper()}
    variables = {r.inputs["variableName"]: r.inputs["value"]
                 for r in boot.of("github:index/actionsVariable:ActionsVariable")}
    scoped = {(r.inputs["environment"], r.inputs["variableName"]): r.inputs["value"]
              for r in boot.of("github:index/actionsEnvironmentVariable:ActionsEnvironmentVariable")}
    assert used == exported | {v for _, v in scoped} and exported == set(variables)
    assert variables == {k: boot.exports[k] for k in exported}
    # Each stack's identities are variables of its own environments: one expression per kind
    # (`vars.GCP_DEPLOY_SERVICE_ACCOUNT`, ...) is the stack's own account there, and nothing outside them.
    per_stack = {"GCP_DEPLOY_SERVICE_ACCOUNT", "GCP_PREVIEW_SERVICE_ACCOUNT", "GCP_DRILL_SERVICE_ACCOUNT",
                 "GCP_IMAGE_SERVICE_ACCOUNT"}
    assert not per_stack & set(variables)
    email = "{}@" + CI_PROJECT + ".iam.gserviceaccount.com"
    want = {}
    for k, s in STACKS.items():
        want[(names.pr_preview_environment(k), "GCP_PREVIEW_SERVICE_ACCOUNT")] = email.format(
            names.preview_account_id(k))
        if s.deploy.on_push:
            want[(names.read_environment(k), "GCP_PREVIEW_SERVICE_ACCOUNT")] = email.format(names.preview_account_id(k))
            want[(f"deploy-{k}", "GCP_DEPLOY_SERVICE_ACCOUNT")] = email.format(names.deploy_account_id(k))
        if s.deploy.cluster_drill:
            want[(f"drill-{k}", "GCP_DRILL_SERVICE_ACCOUNT")] = email.format(names.drill_account_id(k))
        if s.image is not None:
            want[(f"image-{k}", "GCP_IMAGE_SERVICE_ACCOUNT")] = email.format(names.image_account_id(k))
    assert scoped == want
    by_env: dict = {}
    for (e, v), x in scoped.items():
        by_env.setdefault(e, {})[v] = x
    assert boot.exports["environmentVariables"] == by_env


# --- the README's tables are what the bootstrap grants -------------------------------------------

SCOPES = {
    "gcp:projects/iAMMember:IAMMember": ci.PROJECT,
    "gcp:serviceaccount/iAMMember:IAMMember": ci.NODE_ACCOUNT,  # or the MultiKueue account (by its name, below)
    "gcp:storage/bucketIAMMember:BucketIAMMember": ci.STATE_BUCKET,
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ci.KEY,  # or the signing key (by its name, below)
    "gcp:containeranalysis/noteIamMember:NoteIamMember": ci.NOTE,
    "gcp:binaryauthorization/attestorIamMember:AttestorIamMember": ci.ATTESTOR,
}


def readme_rows(title: str) -> list[list[str]]:
    """The first table under the README heading ``title``, header and rule left out."""
    lines = documentation().split(f"### {title}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines[start + 2:end]]


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_readme_custom_roles_are_the_rendered_ones(boot):
    rows = {role.strip("`"): (ticked(perms), replaces.strip("`"))
            for role, perms, replaces, *_ in readme_rows("Custom roles")}
    made = {r.inputs["roleId"]: r.inputs["permissions"] for r in boot.of("gcp:projects/iAMCustomRole:IAMCustomRole")}
    assert {k.removeprefix(ci.CUSTOM) for k in rows} == set(made)
    for role, (perms, replaces) in rows.items():
        rid = role.removeprefix(ci.CUSTOM)
        assert perms == made[rid] and replaces == ci.CUSTOM_ROLES[rid].replaces, role


def workflow_jobs() -> dict[tuple[str, str], dict]:
    out = {}
    for path in sorted(WORKFLOWS.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for job_id, job in doc["jobs"].items():
            out[(path.name, job_id)] = job
    return out


def job_token(workflow: str, job: dict, stack: str | None = None) -> dict | None:
    """The token a job of ``workflow`` gets on its usual trigger (None: it may not request one); a matrix
    job's environment (``deploy-${{ matrix.stack }}``) is that of ``stack``."""
    if job.get("permissions", {}).get("id-token") != "write":
        return None
    env = job.get("environment")
    if env and stack is not None:
        env = re.sub(r"\$\{\{ matrix\.[\w.]+ \}\}", stack, env)
    if workflow == "pr.yml":
        return claims("pull_request", PR_REF, workflow, env)
    return claims("push", MAIN, workflow, env)


def matrix_stacks(job: dict) -> list[str] | None:
    """The stacks a job's matrix runs over (the list its ``stacks`` job emits: ``slicectl stacks``), or None."""
    matrix = json.dumps(job.get("strategy", {}).get("matrix", {}))
    m = re.search(r"fromJSON\(needs\.stacks\.outputs\.(\w+)\)", matrix)
    if not m:
        return None
    return [x if isinstance(x, str) else x["stack"] for x in cmd_stacks.lists()[m.group(1)]]


def test_each_job_mints_exactly_its_stacks_identity(boot):
    """Every job that may request a token, with the token GitHub gives it on its trigger (per matrix stack), can
    become exactly one identity: its stack's own of its kind (the workflow's job, the environment it names)."""
    want_kind = {("pr.yml", "preview"): names.preview_account_id, ("deploy.yml", "preview"): names.preview_account_id,
                 ("deploy.yml", "up"): names.deploy_account_id, ("drills.yml", "drift"): names.preview_account_id,
                 ("drills.yml", "cluster-drill"): names.drill_account_id,
                 ("image.yml", "build"): names.image_account_id}
    seen = set()
    for (workflow, job_id), job in workflow_jobs().items():
        for stack in matrix_stacks(job) or [None]:
            token = job_token(workflow, job, stack)
            if token is None:
                continue
            seen.add((workflow, job_id))
            assert usable(boot, token) == {want_kind[(workflow, job_id)](stack)}, (workflow, job_id, stack)
    assert seen == set(want_kind)


# --- bad config ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("ciProject", "my-tpu-project", "ciProject = 'my-tpu-project': the prod stack deploys into it"),
        # The stacks name the CI project their CI emails come from: the bootstrap must be that project.
        ("ciProject", "other-ci-project", "tpu-multislice:ciProject = 'my-tpu-ci', but the bootstrap's ciProject "
                                          "is 'other-ci-project'"),
        ("repository", "not a repo", "repository = 'not a repo': the GitHub repository as owner/name"),
        ("repositoryId", "12ab", "repositoryId = '12ab': required, GitHub's numeric id"),
        ("reviewerTeams", '["Bad Team"]', "reviewerTeams: 'Bad Team' is not a GitHub team slug"),
        ("stateBucket", "Has Caps", "stateBucket = 'Has Caps': not a valid bucket name"),
        ("bootstrapStateBucket", "my-tpu-ci-pulumi-state", "the stacks' state and the bootstrap's are separate"),
        ("keyRing", "a/b", "keyRing = 'a/b': letters, digits"),
    ],
)
def test_bad_config_is_refused_with_every_problem_and_nothing_declared(key, value, message):
    config = {**example_config(), f"{NS}:{key}": value, f"{NS}:repositoryOwnerId": "x"}
    with pytest.raises(pulumi.RunError) as err:
        render(config)
    assert message in str(err.value)
    assert "repositoryOwnerId = 'x'" in str(err.value)  # every problem, not the first


@pytest.mark.parametrize("key", ["ciProject", "repositoryId", "repositoryOwnerId"])
def test_required_keys(key):
    config = {k: v for k, v in example_config().items() if k != f"{NS}:{key}"}
    with pytest.raises(pulumi.RunError) as err:
        render(config)
    assert f"{key} = None: required" in str(err.value) or f"{key} = '': required" in str(err.value)


def test_no_reviewer_is_refused():
    config = {**example_config(), f"{NS}:reviewerTeams": "[]", f"{NS}:reviewerUsers": "[]"}
    with pytest.raises(pulumi.RunError) as err:
        render(config)
    assert "at least one reviewer" in str(err.value)


# --- a team's stack that opts in ------------------------------------------------------------------


def test_a_stack_that_opts_in_gets_its_own_deploy_identity_environments_and_reviewers(monkeypatch, tmp_path):
    """team-eu with deploy.onPush and a cluster drill: its own ci-deploy-team-eu, holding roles in team-eu's
    project, key and state only, usable from deploy.yml on main in deploy-team-eu only; its drill-team-eu
    environment; both approved by the team's own reviewers (stackReviewers)."""
    stacks = stack_files(tmp_path / "stacks")
    team = stacks / "Pulumi.team-eu.yaml"
    text = team.read_text()
    assert "    onPush: false\n" in text
    team.write_text(text.replace("    onPush: false\n", "    onPush: true\n    clusterDrill: llama3-8b-elastic\n"))
    monkeypatch.setattr(bcfg, "STACKS_DIR", stacks)
    b = render({**example_config(), f"{NS}:stackReviewers": json.dumps({"team-eu": {"teams": ["team-eu-leads"]}})})
    team_project = spec.load_stack("team-eu", stacks).project
    mine = names.deploy_account_id("team-eu")
    for r in b.of("gcp:projects/iAMMember:IAMMember"):
        if member_id(r.inputs["member"]) == mine:
            assert r.inputs["project"] == team_project, r.name
        if member_id(r.inputs["member"]) == PROD_DEPLOY:
            assert r.inputs["project"] == PROD_PROJECT, r.name
    keys = {member_id(r.inputs["member"]): r.inputs["cryptoKeyId"].rsplit("/", 1)[1]
            for r in b.of("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember") if "ci-deploy" in r.inputs["member"]}
    assert keys == {mine: "team-eu", PROD_DEPLOY: "prod"}
    (write,) = [r for r in b.of("gcp:storage/bucketIAMMember:BucketIAMMember")
                if member_id(r.inputs["member"]) == mine and r.inputs["role"] == "roles/storage.objectAdmin"]
    assert f"/{names.PROJECT}/team-eu" in write.inputs["condition"]["expression"]
    assert "/prod" not in write.inputs["condition"]["expression"]
    # One drill identity per stack: team-eu's drill approvers reach team-eu's cluster only.
    drill_projects = {member_id(r.inputs["member"]): r.inputs["project"] for r in b.of(
        "gcp:projects/iAMMember:IAMMember") if member_id(r.inputs["member"]).startswith("ci-drill")}
    assert drill_projects == {"ci-drill-prod": PROD_PROJECT, "ci-drill-team-eu": team_project}
    # Who may act as whom: each stack's environment yields its own identity, nothing else.
    assert usable(b, claims("push", MAIN, "deploy.yml", "deploy-team-eu")) == {mine}
    assert usable(b, claims("push", MAIN, "deploy.yml", "deploy-prod")) == {PROD_DEPLOY}
    assert usable(b, claims("push", "refs/heads/x", "deploy.yml", "deploy-team-eu")) == set()
    assert usable(b, claims("schedule", MAIN, "drills.yml", "drill-team-eu")) == {"ci-drill-team-eu"}
    assert usable(b, claims("schedule", MAIN, "drills.yml", "read-team-eu")) == {"ci-preview-team-eu"}
    assert usable(b, claims("schedule", MAIN, "drills.yml", "deploy-team-eu")) == set()
    # The environments, main only, the team's reviewers on its own; the identity as its environment's variable.
    envs = {r.inputs["environment"]: r.inputs
            for r in b.of("github:index/repositoryEnvironment:RepositoryEnvironment")}
    assert set(envs) == {*(names.pr_preview_environment(k) for k in STACKS), "read-prod", "read-team-eu",
                         "deploy-prod", "drill-prod", "deploy-team-eu", "drill-team-eu",
                         *(names.image_environment(k) for k in IMAGE_STACKS)}
    team_id, default = 1000 + len("team-eu-leads"), [1000 + len(t) for t in json.loads(CFG[f"{NS}:reviewerTeams"])]
    for name, env in envs.items():
        if name.startswith("read-"):
            continue  # no reviewer: its OIDC subject names the stack
        want = [team_id] if name.endswith("team-eu") else default
        assert env["reviewers"] == [{"teams": want, "users": []}], name
    assert b.exports["environmentVariables"]["deploy-team-eu"] == {
        "GCP_DEPLOY_SERVICE_ACCOUNT": f"{mine}@{CI_PROJECT}.iam.gserviceaccount.com"}


def test_a_multi_region_stack_that_deploys_administers_its_multikueue_account_only(monkeypatch, tmp_path):
    """multi with deploy.onPush: its ci-deploy-multi also holds roles/iam.serviceAccountAdmin on the MultiKueue token
    account alone (the stack binds workload identity on it once the manager's pool exists); no other account, no
    project IAM role; the README says so beside the role table and in the threat table."""
    stacks = stack_files(tmp_path / "stacks")
    multi = stacks / "Pulumi.multi.yaml"
    text = multi.read_text()
    assert "tpu-multislice:deploy:" not in text
    deploy = "\n  tpu-multislice:deploy:\n    onPush: true\nsecretsprovider:"
    multi.write_text(text.replace("\nsecretsprovider:", deploy))
    monkeypatch.setattr(bcfg, "STACKS_DIR", stacks)
    b = render(example_config())
    mine, project = names.deploy_account_id("multi"), STACKS["multi"].project
    email = names.multikueue_account_email(STACKS["multi"].manager.name, project)
    on_accounts = sorted((r.inputs["role"], r.inputs["serviceAccountId"]) for r in b.of(
        "gcp:serviceaccount/iAMMember:IAMMember") if member_id(r.inputs["member"]) == mine)
    nodes = b.exports["nodeServiceAccounts"]["multi"]
    # actAs on every node account a pool of the stack runs as: the manager's and each region cluster's (a region's
    # pools would be refused by GKE's actAs check on push otherwise).
    regions = [names.node_service_account_email(r.cluster.name, project) for r in STACKS["multi"].regions]
    assert len(regions) == 2 and nodes not in regions
    assert on_accounts == sorted([("roles/iam.serviceAccountAdmin", f"projects/{project}/serviceAccounts/{email}"),
                                  *(("roles/iam.serviceAccountUser", f"projects/{project}/serviceAccounts/{a}")
                                    for a in (nodes, *regions))])
    # prod (single-region) gets no such grant; no deploy identity holds a project-level IAM admin role.
    assert not [r for r in b.of("gcp:serviceaccount/iAMMember:IAMMember")
                if r.inputs["role"] == "roles/iam.serviceAccountAdmin" and member_id(r.inputs["member"]) != mine]
    for r in b.of("gcp:projects/iAMMember:IAMMember"):
        if member_id(r.inputs["member"]) == mine:
            assert r.inputs["project"] == project and "iam" not in r.inputs["role"].lower(), r.name
    text = documentation()
    (grant,) = [g for g in ci.DEPLOY_GRANTS if g.on == ci.MULTIKUEUE_ACCOUNT]
    assert f"`{grant.role}` on its MultiKueue account" in text.split("### Roles the bootstrap grants", 1)[1]
    assert f"`{grant.role}` on its MultiKueue account" in text.split("### Threat table: each identity", 1)[1]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"nope": {"teams": ["a"]}}', "stackReviewers.nope: no stacks/Pulumi.nope.yaml"),
        ('{"team-eu": {"teams": []}}', "stackReviewers.team-eu: one to six reviewers"),
        ('{"team-eu": {"teams": ["Bad Team"]}}', "stackReviewers.team-eu: 'Bad Team' is not a GitHub team slug"),
        ('["team-eu"]', "stackReviewers: a map of stack name"),
    ],
)
def test_bad_stack_reviewers_are_refused(value, message):
    with pytest.raises(pulumi.RunError) as err:
        render({**example_config(), f"{NS}:stackReviewers": value})
    assert message in str(err.value)


# --- the layout: a pure access model, no path edits --------------------------------------------


def test_the_access_model_and_config_import_without_pulumi():
    """bootstrap.access and bootstrap.config are data: a bare interpreter imports them without loading any
    Pulumi module (the escalation check and the docs read them)."""
    import subprocess

    code = ("import sys, bootstrap.access, bootstrap.config; "
            "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_program_edits_sys_path():
    """The bootstrap and the policy pack import the project as installed (pyproject's packages.find)."""
    for path in [*BOOT.rglob("*.py"), ROOT / "policies" / "__main__.py"]:
        assert "sys.path" not in path.read_text(), path


# --- the repository's settings ---------------------------------------------------------------------------


def test_repository_settings_are_managed(boot):
    """Actions' token reads by default and never approves a pull request; only the actions the workflows pin,
    by SHA; GitHub's default OIDC subject (the principals' format); code owners review the trust paths."""
    (wf,) = [r.inputs for r in boot.of("github:index/workflowRepositoryPermissions:WorkflowRepositoryPermissions")]
    assert wf["defaultWorkflowPermissions"] == "read" and wf["canApprovePullRequestReviews"] is False
    (actions,) = [r.inputs for r in boot.of("github:index/actionsRepositoryPermissions:ActionsRepositoryPermissions")]
    assert actions["allowedActions"] == "selected" and actions["shaPinningRequired"] is True
    config = actions["allowedActionsConfig"]
    assert config["githubOwnedAllowed"] is False and config.get("verifiedAllowed") is False
    used = {s["uses"].split("#")[0].strip() for p in WORKFLOWS.glob("*.yml")
            for job in yaml.safe_load(p.read_text())["jobs"].values() for s in job.get("steps", []) if "uses" in s}
    assert set(config["patternsAlloweds"]) == used and all(re.search(r"@[0-9a-f]{40}$", u) for u in used)
    (oidc,) = [r.inputs for r in boot.of(
        "github:index/actionsRepositoryOidcSubjectClaimCustomizationTemplate:"
        "ActionsRepositoryOidcSubjectClaimCustomizationTemplate")]
    assert oidc["useDefault"] is True and "includeClaimKeys" not in oidc
    (reviews,) = boot.one("github:index/branchProtection:BranchProtection").inputs["requiredPullRequestReviews"]
    assert reviews["requireCodeOwnerReviews"] is True


def test_codeowners_is_the_bootstraps(boot):
    teams = tuple(json.loads(CFG[f"{NS}:reviewerTeams"]))
    users = tuple(json.loads(CFG.get(f"{NS}:reviewerUsers", "[]")))
    want = scan.codeowners(bcfg.BootstrapConfig(**{**CONFIG.__dict__, "reviewer_teams": teams,
                                                    "reviewer_users": users}))
    assert (ROOT / ".github" / "CODEOWNERS").read_text() == want
    for path in ("/.github/", "/bootstrap/", "/uv.lock", "/pyproject.toml", "/stacks/"):
        assert f"\n{path} @{REPO.split('/')[0]}/" in "\n" + want


# Permissions that switch an API off for the whole project (everything using it stops): Service Usage's
# services.disable, and consumerpolicy.update (a consumer policy's enable rules define the usable services, so an
# edit that drops one disables it). roles/monitoring.editor and roles/serviceusage.serviceUsageAdmin hold them.
DISABLES_APIS = ("serviceusage.services.disable", "serviceusage.consumerpolicy.update")


def test_no_ci_identity_can_disable_an_api():
    predefined = load_roles()
    held = {}
    for identity in ci.identities(CONFIG):
        for g in identity.grants:
            rid = g.role.removeprefix(ci.CUSTOM)
            perms = ci.CUSTOM_ROLES[rid].permissions if g.role.startswith(ci.CUSTOM) else predefined[g.role]
            for p in set(perms) & set(DISABLES_APIS):
                held.setdefault(identity.key, set()).add((g.role, p))
    assert held == {}
    # The monitoring resources' role is the custom one, and it is narrower than the predefined role it replaces.
    mon = ci.CUSTOM_ROLES["tpuMultisliceMonitoring"]
    assert set(mon.permissions) < predefined[mon.replaces]
    assert {ci.MANAGED_BY[t] for t in ci.MANAGED_BY if t.startswith("gcp:monitoring/")} == {ci.custom(mon.id)}
