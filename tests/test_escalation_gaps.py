"""Skeptic's review (REVIEW-trust.md): widenings the escalation check (bootstrap/escalation.py) does NOT catch.

Each test mutates the real rendering (tests/test_escalation.py's ``rendered`` fixture) the way a reviewed-looking
change could, and asserts that the check reports something new. Every test here FAILS on this branch: each is a
path to more privilege that the computed model does not represent. Run:

    uv run pytest tests/test_escalation_gaps.py -q
"""

from __future__ import annotations

import json

import pytest
from test_escalation import rendered  # noqa: F401  (the module-scoped fixture)

from bootstrap import escalation as esc

DEPLOY = "serviceAccount:ci-deploy-prod@my-tpu-ci.iam.gserviceaccount.com"
POOL = "principalSet://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/workloadIdentityPools/github"
GKE_POOL = "principal://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/workloadIdentityPools"


def _new_findings(rendered, mutate):  # noqa: F811
    x = rendered.copy()
    before = {str(f) for f in x.findings()}
    mutate(x)
    return [str(f) for f in x.findings() if str(f) not in before]


def _add_boot(typ, inputs):
    return lambda x: x.boot.append((typ, inputs))


def _add_manifests(*docs):
    def mutate(x):
        _, manifests = x.stacks["prod"]
        manifests.extend(json.loads(json.dumps(docs)))
    return mutate


# --- GCP IAM --------------------------------------------------------------------------------------------------

GCP_GAPS = {
    # roles/iam.serviceAccountUser on the PROJECT is actAs on every service account in it (the default compute
    # account, which GCP grants roles/editor by default, and every account a stack or an operator adds).
    # escalation.check looks the target up as reach["serviceAccount:" + "my-tpu-project"]: None, so no finding.
    "project-level actAs (serviceAccountUser on the project)": _add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/iam.serviceAccountUser", "member": DEPLOY}),
    # actAs on an account the rendering does not create (the Compute Engine default account): target is None,
    # so the check assumes it is weaker.
    "actAs on an account the rendering does not know": _add_boot(
        "gcp:serviceaccount/iAMMember:IAMMember",
        {"serviceAccountId": "projects/my-tpu-project/serviceAccounts/123456789012-compute@developer."
                             "gserviceaccount.com", "role": "roles/iam.serviceAccountUser", "member": DEPLOY}),
    # An authoritative project policy (IAMPolicy carries policyData, not role/member): skipped by bindings().
    "projects.IAMPolicy granting project IAM admin": _add_boot(
        "gcp:projects/iAMPolicy:IAMPolicy",
        {"project": "my-tpu-project", "policyData": json.dumps({"bindings": [
            {"role": "roles/resourcemanager.projectIamAdmin", "members": [DEPLOY]}]})}),
    # IAM types outside the seven prefixes bindings() knows are skipped silently.
    "organization-level IAMMember": _add_boot(
        "gcp:organizations/iAMMember:IAMMember",
        {"orgId": "123456789", "role": "roles/resourcemanager.projectIamAdmin", "member": DEPLOY}),
    "folder-level IAMMember": _add_boot(
        "gcp:folder/iAMMember:IAMMember",
        {"folder": "folders/123", "role": "roles/resourcemanager.projectIamAdmin", "member": DEPLOY}),
    # Cloud KMS admin on the key RING that holds every stack's state key (cloudkms.keyRings.setIamPolicy ->
    # decrypt every other stack's secrets).
    "KMS key ring admin on the state keys' ring": _add_boot(
        "gcp:kms/keyRingIAMMember:KeyRingIAMMember",
        {"keyRingId": "projects/my-tpu-ci/locations/global/keyRings/pulumi", "role": "roles/cloudkms.admin",
         "member": DEPLOY}),
    # Workload identity federation's direct resource access: a principalSet granted a role itself, not through an
    # account. compute() skips every member starting with "principal"; check() looks at ci-* accounts only.
    "a repository-wide principalSet granted project IAM admin directly": _add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/resourcemanager.projectIamAdmin",
         "member": f"{POOL}/attribute.repository/my-org/tpu-multislice"}),
    # GKE workload identity: the trainer's Kubernetes service account (maxtext/maxtext-ksa) gets project IAM admin.
    # Who can run a pod as that KSA: the MultiKueue manager (create rayclusters/rayjobs in maxtext, shipped RBAC)
    # and ci-deploy-<stack> (roles/container.admin: container.pods.create in every namespace). No finding.
    "the trainer's KSA principal granted project IAM admin": _add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/resourcemanager.projectIamAdmin",
         "member": f"{GKE_POOL}/my-tpu-project.svc.id.goog/subject/ns/maxtext/sa/maxtext-ksa"}),
    # The ALLOWED_SET_IAM pattern for network objects admits ANY compute.<type>.setIamPolicy, instances included:
    # an instance-level grant of roles/compute.instanceAdmin.v1 on a GKE node -> setMetadata (ssh-keys) -> root on
    # the node (its kubelet credentials, every pod's tokens there).
    "compute.instances.setIamPolicy in a deploy custom role": lambda x: [
        i.__setitem__("permissions", [*i["permissions"], "compute.instances.setIamPolicy"])
        for t, i in x.boot if t == "gcp:projects/iAMCustomRole:IAMCustomRole" and i["roleId"] ==
        "tpuMultisliceFirewalls"],
    # The pool admission check is a substring test: any disjunction keeps the substrings and admits everyone.
    "attribute condition with `|| true` appended": lambda x: [
        i.__setitem__("attributeCondition", i["attributeCondition"] + " || true")
        for t, i in x.boot if t.endswith("workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")],
}


def _transitive(x):
    """ci-deploy-prod holds actAs on its node account (shipped). Give the node account actAs on ci-image: the
    node account is not "stronger" than ci-deploy-prod by _more() (its resources sit in projects ci-deploy-prod
    already reaches: the stack's and the CI project), and the node account is not a ci-* account, so its own
    actAs is never checked. ci-deploy-prod -> nodes -> ci-image (signs images for every stack)."""
    x.boot.append(("gcp:serviceaccount/iAMMember:IAMMember", {
        "serviceAccountId": "projects/my-tpu-ci/serviceAccounts/ci-image@my-tpu-ci.iam.gserviceaccount.com",
        "role": "roles/iam.serviceAccountUser",
        "member": "serviceAccount:maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"}))


GCP_GAPS["two-hop actAs (deploy -> node account -> ci-image)"] = _transitive

# READ_VERBS counts every get/list as a read, so a reader behind read-<stack> (no reviewer) may hold
# container.secrets.get/list: every Secret of every cluster in the project (the MultiKueue kubeconfig tokens,
# the Kueue webhook certificate). drills.yml relies on the reader NOT having it ("ci-preview-<stack> (no Secrets
# read) cannot get"); the check would not notice if it did.
GCP_GAPS["Kubernetes Secrets read for the unreviewed reader"] = lambda x: [
    i.__setitem__("permissions", [*i["permissions"], "container.secrets.get", "container.secrets.list"])
    for t, i in x.boot if t == "gcp:projects/iAMCustomRole:IAMCustomRole" and i["roleId"] ==
    "tpuMultisliceRegistryViewer"]


@pytest.mark.parametrize("gap", list(GCP_GAPS))
def test_gcp_widening_is_caught(rendered, gap):  # noqa: F811
    new = _new_findings(rendered, GCP_GAPS[gap])
    assert new, f"{gap}: not caught (no new finding)"


# --- Kubernetes RBAC ------------------------------------------------------------------------------------------

KSA = {"kind": "ServiceAccount", "name": "maxtext-ksa", "namespace": "maxtext"}


def _crb(name, role, subject=KSA):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]}


def _cr(name, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}


K8S_GAPS = {
    # A ClusterRole the manifests do not define (built-in cluster-admin, admin, edit; a chart's role) has no
    # rules for _rules_of(): the binding is invisible. The shipped multi stack already binds one such role
    # (kueue-metrics-reader, from the Kueue chart).
    "ClusterRoleBinding to the built-in cluster-admin": _add_manifests(_crb("x", "cluster-admin")),
    "RoleBinding in kube-system to the built-in edit": _add_manifests(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "x", "namespace": "kube-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
         "subjects": [KSA]}),
    # resources: ["*"] with verb create: "*" is not in WORKLOADS and create is not an escalation verb.
    "cluster-wide create on resources *": _add_manifests(
        _cr("x", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["create", "update", "patch"]}]),
        _crb("x", "x")),
    # Token minting for every service account cluster-wide (then the KSA a workload-identity grant names).
    "cluster-wide create serviceaccounts/token": _add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]), _crb("x", "x")),
    # Reading every Secret cluster-wide (the MultiKueue kubeconfigs in kueue-system included).
    "cluster-wide get secrets": _add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]), _crb("x", "x")),
    # nodes/proxy get: the kubelet API, /exec and /run in every pod on every node.
    "nodes/proxy get": _add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get", "create"]}]), _crb("x", "x")),
    # Changing the admission policies that guard the cluster (the stack's own ValidatingAdmissionPolicy).
    "cluster-wide delete validatingadmissionpolicies": _add_manifests(
        _cr("x", [{"apiGroups": ["admissionregistration.k8s.io"],
                   "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings",
                                 "mutatingwebhookconfigurations"], "verbs": ["create", "update", "delete"]}]),
        _crb("x", "x")),
    # Pods in a namespace that is not the subject's own: only ns == '*' is refused.
    "create pods in kube-system for the trainer's KSA": _add_manifests(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "x", "namespace": "kube-system"},
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "x", "namespace": "kube-system"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": [KSA]}),
    # Workload kinds missing from WORKLOADS: JobSet (TPU multislice's usual wrapper, Kueue-integrated),
    # LeaderWorkerSet, pods/ephemeralcontainers (a new container in a running pod).
    "cluster-wide create jobsets / leaderworkersets / pods/ephemeralcontainers": _add_manifests(
        _cr("x", [{"apiGroups": ["jobset.x-k8s.io", "leaderworkerset.x-k8s.io", ""],
                   "resources": ["jobsets", "leaderworkersets", "pods/ephemeralcontainers"],
                   "verbs": ["create", "patch"]}]), _crb("x", "x")),
}


@pytest.mark.parametrize("gap", list(K8S_GAPS))
def test_kubernetes_widening_is_caught(rendered, gap):  # noqa: F811
    new = _new_findings(rendered, K8S_GAPS[gap])
    assert new, f"{gap}: not caught (no new finding)"


def test_gke_iam_is_kubernetes_authority(rendered):  # noqa: F811
    """GKE authorizes a request if IAM OR RBAC allows it (cloud.google.com/kubernetes-engine/docs/concepts/
    access-control). ci-deploy-prod's roles/container.admin carries container.pods.create, .pods.exec,
    .secrets.get, .serviceAccounts.createToken, .clusterRoles.escalate, .clusterRoleBindings.create on every
    cluster of the project: the check's Kubernetes side, which reads RBAC manifests only, never sees it, and the
    generated threat table says 'no ... administration' for that row."""
    reach = rendered.reach()
    r = reach[DEPLOY]
    held = {p for p in r.permissions if p.startswith("container.")}
    assert {"container.clusterRoles.escalate", "container.pods.create"} <= held  # the vendored catalog agrees
    findings = [str(f) for f in rendered.findings() if "ci-deploy-prod" in str(f)]
    assert any("escalate" in f or "pods" in f for f in findings), (
        "ci-deploy-prod holds Kubernetes escalate/bind and pod creation in every namespace through IAM, with no "
        "finding and no row in the Kubernetes table")


def test_binary_authorization_policy_update_is_refused_like_attestor_admin(rendered):  # noqa: F811
    """FORBIDDEN refuses attestor and note administration so that only ci-image's signature admits an image, but
    ci-deploy-<stack> holds roles/binaryauthorization.policyEditor (binaryauthorization.policy.update): it can set
    the project policy's defaultAdmissionRule to ALWAYS_ALLOW or add an admissionWhitelistPatterns entry, which
    makes the attestor irrelevant (https://cloud.google.com/binary-authorization/docs/policy-yaml-reference). The
    shipped rendering reports nothing for it."""
    reach = rendered.reach()
    assert "binaryauthorization.policy.update" in reach[DEPLOY].permissions
    assert any("binaryauthorization.policy" in str(f) for f in rendered.findings()), \
        "ci-deploy-prod can switch Binary Authorization off (policy.update); not reported"


def test_closure_is_transitive_as_documented():
    """escalation.py's docstring: 'then the closure through actAs/token creation on other accounts'. A -> B -> C
    with B no stronger than A by _more() and C stronger: compute()/check() never follow B's own actAs."""
    roles = esc.load_roles()
    a, b, c = (f"serviceAccount:ci-{n}@ci.iam.gserviceaccount.com" for n in ("a", "b", "c"))
    res = [
        ("gcp:serviceaccount/iAMMember:IAMMember", {"serviceAccountId": "projects/ci/serviceAccounts/b@x",
                                                    "role": "roles/iam.serviceAccountUser", "member": a}),
        ("gcp:serviceaccount/iAMMember:IAMMember", {"serviceAccountId": "projects/ci/serviceAccounts/c@x",
                                                    "role": "roles/iam.serviceAccountUser",
                                                    "member": "serviceAccount:b@x"}),
        ("gcp:projects/iAMMember:IAMMember", {"project": "ci", "role": "roles/iam.serviceAccountViewer",
                                              "member": "serviceAccount:b@x"}),
        ("gcp:projects/iAMMember:IAMMember", {"project": "victim", "role": "roles/container.admin",
                                              "member": "serviceAccount:c@x"}),
    ]
    del b, c
    reach = esc.compute(res, roles=roles)
    found = [str(f) for f in esc.check(reach, esc.Environments({}, {}), "assertion.repository_id == "
                                       "assertion.repository_owner_id == assertion.workflow_ref == "
                                       "assertion.job_workflow_ref") if "ci-a" in str(f) and "actAs" in str(f)]
    assert found, "ci-a reaches project victim through b@x -> c@x; not reported"


def test_every_allowed_set_iam_entry_is_exercised_by_the_rendering(rendered):  # noqa: F811
    """ALLOWED_SET_IAM admits iam.serviceAccounts.setIamPolicy on a MultiKueue account (roles/iam.serviceAccountAdmin:
    full control of who may act as it, i.e. token creation by another name). The only rendering the check sees
    is tests/fixtures/stacks/ with bootstrap/Pulumi.example.yaml, where only prod deploys on push and prod has no
    MultiKueue account: the entry, and the claim that the account is weaker than its holder, are never
    exercised (and the real stacks/ and the operator's bootstrap config are never checked at all)."""
    reach = rendered.reach()
    held = [(m, r) for m, r in reach.items() if "ci-deploy-" in m and any(
        p == "iam.serviceAccounts.setIamPolicy" for p in r.permissions)]
    assert held, ("no rendered deploy identity holds setIamPolicy on a MultiKueue account: the allow-list entry is "
                  "untested")
