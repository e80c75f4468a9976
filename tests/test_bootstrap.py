"""The bootstrap program (bootstrap/__main__.py) under Pulumi mocks, and the README against it.

Only GCP and the Pulumi engine are replaced (``pulumi.runtime.set_mocks`` through the offline
engine's adapter, ``offline.pulumi_runtime``): the real program runs on the real example stack
file. The mocks answer what only GCP knows (the project number in the pool's name, a service
account's email). GitHub's token exchange is modelled by evaluating the provider's own
attribute mapping and condition on the claims GitHub documents for each kind of job.
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

from offline import pulumi_runtime

ROOT = Path(__file__).resolve().parents[1]
BOOT = ROOT / "bootstrap"
EXAMPLE = BOOT / "Pulumi.example.yaml"
PROJECT_NUMBER = "OFFLINE-PROJECT-NUMBER"

sys.path.insert(0, str(BOOT))
import ci_components as ci  # noqa: E402

sys.path.remove(str(BOOT))


class BootstrapMocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        rid = f"{args.name}-offline-id"
        if args.typ == "gcp:iam/workloadIdentityPool:WorkloadIdentityPool":
            state["name"] = f"projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/" + args.inputs[
                "workloadIdentityPoolId"]
        elif args.typ == "gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider":
            state["name"] = (f"projects/{PROJECT_NUMBER}/locations/global/workloadIdentityPools/"
                             f"{args.inputs['workloadIdentityPoolId']}/providers/"
                             f"{args.inputs['workloadIdentityPoolProviderId']}")
        elif args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = f"{args.inputs['accountId']}@{args.inputs['project']}.iam.gserviceaccount.com"
            state["name"] = f"projects/{args.inputs['project']}/serviceAccounts/{state['email']}"
        elif args.typ == "gcp:kms/keyRing:KeyRing":
            i = args.inputs
            rid = f"projects/{i['project']}/locations/{i['location']}/keyRings/{i['name']}"
        elif args.typ == "gcp:kms/cryptoKey:CryptoKey":
            rid = f"{args.inputs['keyRing']}/cryptoKeys/{args.inputs['name']}"
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


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
        key = key if ":" in key else f"{ci.NAMESPACE}:{key}"
        flat[key] = value if isinstance(value, str) else json.dumps(value)
    return flat


def render(config: dict[str, str]) -> Boot:
    recorded: list[pulumi_runtime.Registration] = []
    mocks = BootstrapMocks()
    monitor = ImportsMonitor(mocks, recorded.append)
    pulumi_runtime.start(mocks, monitor, project="tpu-multislice-bootstrap", stack="admin", config=config)
    path, cwd = list(sys.path), os.getcwd()

    def program():
        sys.path.insert(0, str(BOOT))
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


CFG = example_config()
STATE = CFG[f"{ci.NAMESPACE}:stateBucket"]
REPO = CFG[f"{ci.NAMESPACE}:repository"]


def test_state_bucket_is_versioned_private_and_kept(boot):
    bucket = boot.one("gcp:storage/bucket:Bucket")
    assert bucket.inputs["name"] == STATE
    assert bucket.inputs["versioning"] == {"enabled": True}
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.protect and bucket.retain_on_delete


def test_one_kms_key_is_every_stacks_secrets_provider(boot):
    ring, key = boot.one("gcp:kms/keyRing:KeyRing"), boot.one("gcp:kms/cryptoKey:CryptoKey")
    assert key.inputs["purpose"] == "ENCRYPT_DECRYPT" and key.inputs["rotationPeriod"] == ci.KEY_ROTATION
    assert ring.protect and key.protect and key.retain_on_delete
    provider = f"gcpkms://{key.inputs['keyRing']}/cryptoKeys/{key.inputs['name']}"
    assert boot.exports["secretsprovider"] == provider
    stack_files = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
    assert stack_files
    for f in stack_files:
        doc = yaml.safe_load(f.read_text())
        assert doc.get("secretsprovider") == provider, f"{f.name}: secretsprovider"
        assert "encryptionsalt" not in doc, f"{f.name}: a passphrase provider"
    scanned = [*ROOT.glob(".github/workflows/*.y*ml"), *ROOT.glob("stacks/*.yaml"), ROOT / ".ci/run",
               *(f for f in BOOT.iterdir() if f.is_file())]
    for f in scanned:
        assert "PULUMI_CONFIG_PASSPHRASE" not in f.read_text(), f"{f}: a passphrase"


def test_every_api_the_identities_and_stacks_use_is_enabled(boot):
    enabled = {(r.inputs["project"], r.inputs["service"]) for r in boot.of("gcp:projects/service:Service")}
    projects = json.loads(CFG[f"{ci.NAMESPACE}:stackProjects"])
    assert {(CFG["gcp:project"], s) for s in ci.HOME_SERVICES} <= enabled
    assert {(p, s) for p in projects for s in ci.STACK_SERVICES} <= enabled
    assert all(r.inputs["disableOnDestroy"] is False for r in boot.of("gcp:projects/service:Service"))


def test_pool_admits_only_this_repository_by_name_and_immutable_ids(boot):
    provider = boot.one("gcp:iam/workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")
    assert provider.inputs["oidc"] == {"issuerUri": "https://token.actions.githubusercontent.com"}
    assert provider.inputs["attributeMapping"] == ci.ATTRIBUTE_MAPPING
    cond = provider.inputs["attributeCondition"]
    assert cond == (f"assertion.repository == '{REPO}' && assertion.repository_id == "
                    f"'{CFG[f'{ci.NAMESPACE}:repositoryId']}' && assertion.repository_owner_id == "
                    f"'{CFG[f'{ci.NAMESPACE}:repositoryOwnerId']}'")
    provider_name = boot.exports["GCP_WORKLOAD_IDENTITY_PROVIDER"]
    assert provider_name.endswith("/workloadIdentityPools/github/providers/github-actions")


# --- GitHub's token exchange, modelled ---------------------------------------------------------

def evaluate(expression: str, claims: dict) -> object:
    """The CEL the bootstrap writes: ``assertion.x``, string literals, ``+`` and ``==`` joined by ``&&``.

    A claim the token lacks fails the evaluation (as in CEL): returns None, i.e. not admitted.
    """
    def term(t: str):
        t = t.strip()
        if t.startswith("assertion."):
            return claims.get(t.removeprefix("assertion."))
        m = re.fullmatch(r"""(['"])(.*)\1""", t)
        assert m, f"unsupported CEL term {t!r}"
        return m.group(2)

    def concat(e: str):
        parts = [term(p) for p in e.split(" + ")]
        return None if None in parts else "".join(parts)

    if "==" in expression:
        return all(concat(a) == concat(b) for a, b in (c.split(" == ") for c in expression.split(" && ")))
    return concat(expression)


def claims(event: str, ref: str, workflow: str, environment: str | None = None, repo: str = REPO) -> dict:
    """GitHub's OIDC claims for a job (docs: 'About security hardening with OpenID Connect')."""
    sub = (f"repo:{repo}:environment:{environment}" if environment else
           f"repo:{repo}:pull_request" if event == "pull_request" else f"repo:{repo}:ref:{ref}")
    out = {"sub": sub, "repository": repo, "event_name": event, "ref": ref,
           "workflow_ref": f"{repo}/.github/workflows/{workflow}@{ref}",
           "repository_id": CFG[f"{ci.NAMESPACE}:repositoryId"],
           "repository_owner_id": CFG[f"{ci.NAMESPACE}:repositoryOwnerId"]}
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
    pool = boot.one("gcp:iam/workloadIdentityPool:WorkloadIdentityPool")
    prefix = f"principalSet://iam.googleapis.com/projects/{PROJECT_NUMBER}/locations/global/" \
             f"workloadIdentityPools/{pool.inputs['workloadIdentityPoolId']}/attribute."
    out = set()
    for b in boot.of("gcp:serviceaccount/iAMMember:IAMMember"):
        assert b.inputs["role"] == ci.WORKLOAD_IDENTITY_USER and b.inputs["member"].startswith(prefix)
        attribute, _, value = b.inputs["member"].removeprefix(prefix).partition("/")
        if attrs.get(attribute) == value:
            out.add(b.inputs["serviceAccountId"].rsplit("/", 1)[1].split("@")[0])
    return out


MAIN = "refs/heads/main"


@pytest.mark.parametrize(
    ("what", "token", "expected"),
    [
        # A pull request's code gets a cloud identity only once a reviewer approves its run in the
        # pr-preview environment (it could decrypt the stacks' secrets).
        ("a pull request from a branch, not approved", claims("pull_request", "refs/pull/7/merge", "pr.yml"), set()),
        ("a pull request's preview approved in pr-preview",
         claims("pull_request", "refs/pull/7/merge", "pr.yml", ci.PREVIEW_ENVIRONMENT), {"ci-preview"}),
        ("pr-preview environment on a push to a branch",
         claims("push", "refs/heads/x", "pr.yml", ci.PREVIEW_ENVIRONMENT), set()),
        ("another environment in a pull request",
         claims("pull_request", "refs/pull/7/merge", "pr.yml", "staging"), set()),
        # On main a job may also read (preview): never less trusted than the deploy it runs in.
        ("the deploy job: main, production", claims("push", MAIN, "deploy.yml", "production"),
         {"ci-deploy", "ci-preview"}),
        ("deploy's preview job on main", claims("push", MAIN, "deploy.yml"), {"ci-preview"}),
        ("production environment off main", claims("push", "refs/heads/x", "deploy.yml", "production"), set()),
        ("another environment on main", claims("push", MAIN, "deploy.yml", "staging"), {"ci-preview"}),
        ("a push to another branch", claims("push", "refs/heads/x", "pr.yml"), set()),
        ("the scheduled drills on main", claims("schedule", MAIN, "drills.yml"), {"ci-preview", "ci-drill"}),
        ("drills dispatched on a branch", claims("workflow_dispatch", "refs/heads/x", "drills.yml"), set()),
        ("a renamed copy of drills.yml on main", claims("schedule", MAIN, "drills2.yml"), {"ci-preview"}),
        ("pull_request_target", claims("pull_request_target", MAIN.replace("main", "x"), "pr.yml"), set()),
        ("another repository", claims("pull_request", "refs/pull/1/merge", "pr.yml", repo="evil/tpu"), set()),
        ("same name, other repository id",
         {**claims("push", MAIN, "deploy.yml", "production"), "repository_id": "1"}, set()),
    ],
)
def test_who_can_act_as_which_identity(boot, what, token, expected):
    assert usable(boot, token) == expected, what


# --- the README's table is what the bootstrap grants -------------------------------------------

SCOPES = {
    "gcp:projects/iAMMember:IAMMember": ci.PROJECT,
    "gcp:storage/bucketIAMMember:BucketIAMMember": ci.STATE_BUCKET,
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ci.KEY,
}


def rendered_grants(boot: Boot) -> set[tuple[str, str, str, str]]:
    projects = set(json.loads(CFG[f"{ci.NAMESPACE}:stackProjects"]))
    per_project: dict[tuple, set[str]] = {}
    out = set()
    for type_, scope in SCOPES.items():
        for r in boot.of(type_):
            who = r.inputs["member"].removeprefix("serviceAccount:").split("@")[0]
            cond = r.inputs.get("condition", {}).get("title", "")
            row = (who, r.inputs["role"], scope, cond)
            out.add(row)
            if scope == ci.PROJECT:
                per_project.setdefault(row, set()).add(r.inputs["project"])
    # A project grant is made in every stack project, never in some only.
    assert all(p == projects for p in per_project.values())
    return out


def readme_rows(title: str) -> list[list[str]]:
    """The first table under the README heading ``title``, header and rule left out."""
    lines = (ROOT / "README.md").read_text().split(f"### {title}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[c.strip().strip("`") for c in line.strip().strip("|").split("|")] for line in lines[start + 2:end]]


def test_readme_role_table_is_exactly_what_the_bootstrap_grants(boot):
    rows = readme_rows("Roles the bootstrap grants")
    table = {(who, role, on, cond) for who, role, on, cond, *_ in rows}
    assert len(table) == len(rows), "a row is repeated"
    assert table == rendered_grants(boot)


def test_readme_conditions_are_the_rendered_expressions(boot):
    text = (ROOT / "README.md").read_text()
    for type_ in SCOPES:
        for r in boot.of(type_):
            if "condition" in r.inputs:
                cond = r.inputs["condition"]
                assert f"`{cond['title']}`: `{cond['expression']}`" in text, cond["title"]


def test_readme_lists_who_may_act_as_each_identity(boot):
    rows = readme_rows("Who may act as each identity")
    table = {(who, attribute, value) for who, attribute, value, *_ in rows}
    prefix = "principalSet://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/" \
             "workloadIdentityPools/github/attribute."
    rendered = set()
    for b in boot.of("gcp:serviceaccount/iAMMember:IAMMember"):
        attribute, _, value = b.inputs["member"].removeprefix(prefix).partition("/")
        rendered.add((b.inputs["serviceAccountId"].rsplit("/", 1)[1].split("@")[0], attribute, value))
    assert table == rendered


def test_exports_are_the_workflows_variables(boot):
    workflows = " ".join(p.read_text() for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    used = set(re.findall(r"vars\.([A-Z_]+)", workflows))
    assert used == {k for k in boot.exports if k.isupper()}
    assert boot.exports["GCP_DEPLOY_SERVICE_ACCOUNT"] == "ci-deploy@my-tpu-project.iam.gserviceaccount.com"


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("repository", "not a repo", "repository = 'not a repo': the GitHub repository as owner/name"),
        ("repositoryId", "12ab", "repositoryId = '12ab': GitHub's numeric id"),
        ("stackProjects", '["Bad_Project"]', "stackProjects: 'Bad_Project' is not a GCP project ID"),
        ("stateBucket", "Has Caps", "stateBucket = 'Has Caps': not a valid bucket name"),
        ("keyRing", "a/b", "keyRing = 'a/b': letters, digits"),
    ],
)
def test_bad_config_is_refused_with_every_problem_and_nothing_declared(key, value, message):
    config = {**example_config(), f"{ci.NAMESPACE}:{key}": value, "gcp:project": "X"}
    with pytest.raises(pulumi.RunError) as err:
        render(config)
    assert message in str(err.value)
    assert "gcp:project = 'X'" in str(err.value)  # every problem, not the first


def test_adopting_kms_imports_the_gcloud_made_key_ring_and_key(boot):
    """First run: the key ring and key exist already (the bootstrap's own state needs them)."""
    ring = "projects/my-tpu-project/locations/global/keyRings/pulumi"
    assert boot.imports == {"backend-keyring": ring, "backend-key": f"{ring}/cryptoKeys/state"}
    later = render({**example_config(), f"{ci.NAMESPACE}:adoptKms": "false"})
    assert later.imports == {}
