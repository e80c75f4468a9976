"""Widenings the first escalation check missed (the security review, REVIEW-trust.md section A), each now caught
for its own reason: every test mutates the real rendering (tests/test_escalation.py's ``rendered`` fixture) the way
a reviewed-looking change could, and names the finding it expects, refused (not accepted) and new against the
unmutated baseline.
"""

from __future__ import annotations

import json
import re

import pytest
from test_escalation import Rendered, refused, rendered  # noqa: F401  (the module-scoped fixture)

from bootstrap import escalation as esc

DEPLOY = "serviceAccount:ci-deploy-prod@my-tpu-ci.iam.gserviceaccount.com"
READER = "serviceAccount:ci-preview-prod@my-tpu-ci.iam.gserviceaccount.com"
POOL = "principalSet://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/workloadIdentityPools/github"
GKE_POOL = "principal://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/workloadIdentityPools"
KSA_PRINCIPAL = f"{GKE_POOL}/my-tpu-project.svc.id.goog/subject/ns/maxtext/sa/maxtext-ksa"
KSA_SUBJECT = "k8s:ServiceAccount:maxtext@maxtext-tpu.my-tpu-project/maxtext-ksa"  # prod's one cluster
CONDITION = ("assertion.repository == 'o/r' && assertion.repository_id == '1' && assertion.repository_owner_id == '2'"
             " && assertion.workflow_ref == assertion.job_workflow_ref")


def _new_refused(rendered: Rendered, mutate) -> list[str]:  # noqa: F811
    x = rendered.copy()
    before = rendered.baseline()
    mutate(x)
    return refused([f for f in x.findings() if str(f) not in before])


def _add_boot(typ, inputs):
    return lambda x: x.boot.append((typ, inputs))


def _add_manifests(*docs):
    def mutate(x):
        _, manifests = x.stacks["prod"]
        manifests.extend(json.loads(json.dumps(docs)))
    return mutate


def _custom_role_adds(role_id, *perms):
    def mutate(x):
        for t, i in x.boot:
            if t == "gcp:projects/iAMCustomRole:IAMCustomRole" and i["roleId"] == role_id:
                i["permissions"] = [*i["permissions"], *perms]
    return mutate


def _transitive(x):
    """ci-deploy-prod holds actAs on its node account (shipped); the node account gets actAs on ci-image, which
    signs images for every stack: ci-deploy-prod -> nodes -> ci-image."""
    x.boot.append(("gcp:serviceaccount/iAMMember:IAMMember", {
        "serviceAccountId": "projects/my-tpu-ci/serviceAccounts/ci-image-prod@my-tpu-ci.iam.gserviceaccount.com",
        "role": "roles/iam.serviceAccountUser",
        "member": "serviceAccount:maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"}))


# (mutation, the identity the finding names, what it says): REVIEW-trust.md's item in the comment.
GCP = {
    # A1: roles/iam.serviceAccountUser on the PROJECT is actAs on every account in it, the ones the rendering
    # does not create (the Compute Engine default account) included: counted stronger.
    "project-level actAs (serviceAccountUser on the project)": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/iam.serviceAccountUser", "member": DEPLOY}),
        "ci-deploy-prod", "accounts the rendering does not create under projects/my-tpu-project"),
    # A1: an account the rendering does not create is not assumed weaker.
    "actAs on an account the rendering does not know": (_add_boot(
        "gcp:serviceaccount/iAMMember:IAMMember",
        {"serviceAccountId": "projects/my-tpu-project/serviceAccounts/123456789012-compute@developer."
                             "gserviceaccount.com", "role": "roles/iam.serviceAccountUser", "member": DEPLOY}),
        "ci-deploy-prod", "not create under 123456789012-compute@developer.gserviceaccount.com"),
    # A2: an authoritative project policy (policyData, not role/member) is read like a member.
    "projects.IAMPolicy granting project IAM admin": (_add_boot(
        "gcp:projects/iAMPolicy:IAMPolicy",
        {"project": "my-tpu-project", "policyData": json.dumps({"bindings": [
            {"role": "roles/resourcemanager.projectIamAdmin", "members": [DEPLOY]}]})}),
        "ci-deploy-prod", "resourcemanager.projects.setIamPolicy on projects/my-tpu-project"),
    # A2: organization, folder and key ring IAM are read too.
    "organization-level IAMMember": (_add_boot(
        "gcp:organizations/iAMMember:IAMMember",
        {"orgId": "123456789", "role": "roles/resourcemanager.projectIamAdmin", "member": DEPLOY}),
        "ci-deploy-prod", "resourcemanager.projects.setIamPolicy on organizations/123456789"),
    "folder-level IAMMember": (_add_boot(
        "gcp:folder/iAMMember:IAMMember",
        {"folder": "folders/123", "role": "roles/resourcemanager.projectIamAdmin", "member": DEPLOY}),
        "ci-deploy-prod", "resourcemanager.projects.setIamPolicy on folders/123"),
    "KMS key ring admin on the state keys' ring": (_add_boot(
        "gcp:kms/keyRingIAMMember:KeyRingIAMMember",
        {"keyRingId": "projects/my-tpu-ci/locations/global/keyRings/pulumi", "role": "roles/cloudkms.admin",
         "member": DEPLOY}),
        "ci-deploy-prod", "cloudkms.keyRings.setIamPolicy on projects/my-tpu-ci/locations/global/keyRings/pulumi"),
    # A2: a type the parser does not read at all is refused (fail closed).
    "a bucket ACL": (_add_boot(
        "gcp:storage/bucketACL:BucketACL", {"bucket": "my-tpu-ci-pulumi-state", "roleEntities": ["OWNER:allUsers"]}),
        "registration", "gcp:storage/bucketACL:BucketACL"),
    "a Secret Manager secret's IAM": (_add_boot(
        "gcp:secretmanager/secretIamMember:SecretIamMember",
        {"secretId": "s", "project": "my-tpu-project", "role": "roles/secretmanager.secretAccessor",
         "member": READER}),
        "registration", "gcp:secretmanager/secretIamMember:SecretIamMember"),
    # A3: a federated GitHub principal granted a role directly, with no account in between.
    "a repository-wide principalSet granted project IAM admin directly": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/resourcemanager.projectIamAdmin",
         "member": f"{POOL}/attribute.repository/my-org/tpu-multislice"}),
        f"{POOL}/attribute.repository/my-org/tpu-multislice", "direct resource access for a federated principal"),
    "a BigQuery dataset access entry": (_add_boot(
        "gcp:bigquery/datasetAccess:DatasetAccess",
        {"datasetId": "d", "project": "my-tpu-project", "role": "OWNER", "userByEmail": "x@example.com"}),
        "registration", "gcp:bigquery/datasetAccess:DatasetAccess"),
    # A3: a GitHub principal signing in as an account that is not a CI account the rendering creates.
    "a GitHub principal given the node account": (_add_boot(
        "gcp:serviceaccount/iAMMember:IAMMember",
        {"serviceAccountId": "projects/my-tpu-project/serviceAccounts/maxtext-tpu-nodes@my-tpu-project.iam."
                             "gserviceaccount.com", "role": "roles/iam.workloadIdentityUser",
         "member": f"{POOL}/attribute.repository/my-org/tpu-multislice"}),
        f"{POOL}/attribute.repository/my-org/tpu-multislice", "direct resource access for a federated principal"),
    # A3/A4/A5: the trainer's KSA principal gets project IAM admin: refused for it, and for ci-deploy-prod, whose
    # container.admin runs pods as that KSA.
    "the trainer's KSA principal granted project IAM admin": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/resourcemanager.projectIamAdmin", "member": KSA_PRINCIPAL}),
        "ci-deploy-prod", "pods in my-tpu-project's clusters (GKE IAM)"),
    # A3/A6: a workload identity grant to a KSA no manifest declares, in the namespace where the MultiKueue
    # manager creates Ray jobs: the manager can run a pod as it, and so reaches the grant.
    "a grant to an undeclared KSA of the job namespace": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project-multi", "role": "roles/iam.roleAdmin",
         "member": f"{GKE_POOL}/my-tpu-project-multi.svc.id.goog/subject/ns/maxtext/sa/undeclared"}),
        "k8s:ServiceAccount:kueue-system@maxtext-east1.my-tpu-project-multi/multikueue",
        "create rayclusters in maxtext@maxtext-east1.my-tpu-project-multi"),
    # A7: compute.instances.setIamPolicy is no network object (instance admin -> ssh keys -> root on a node).
    "compute.instances.setIamPolicy in a deploy custom role": (
        _custom_role_adds("tpuMultisliceFirewalls", "compute.instances.setIamPolicy"),
        "ci-deploy-prod", "compute.instances.setIamPolicy on projects/my-tpu-project"),
    # A8: the condition is parsed: a disjunction is refused.
    "attribute condition with `|| true` appended": (lambda x: [
        i.__setitem__("attributeCondition", i["attributeCondition"] + " || true")
        for t, i in x.boot if t.endswith("workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")],
        "pool", "not a plain conjunction of equalities"),
    "attribute condition comparing the repository id with itself": (lambda x: [
        i.__setitem__("attributeCondition", i["attributeCondition"].replace(
            "assertion.repository_id == '123456789'", "assertion.repository_id == assertion.repository_id"))
        for t, i in x.boot if t.endswith("workloadIdentityPoolProvider:WorkloadIdentityPoolProvider")],
        "pool", "lacks `assertion.repository_id == <numeric id>`"),
    # A4: two hops.
    "two-hop actAs (deploy -> node account -> ci-image)": (
        _transitive, "ci-deploy-prod", "-> actAs ci-image-prod, which reaches more"),
    # A7: Secrets reads are not reads: the unreviewed reader may not hold them.
    "Kubernetes Secrets read for the unreviewed reader": (
        _custom_role_adds("tpuMultisliceRegistryViewer", "container.secrets.get", "container.secrets.list"),
        "ci-preview-prod", "Kubernetes get Secrets (cluster-wide)"),
    "Kubernetes Secrets read behind read-prod counts as a write": (
        _custom_role_adds("tpuMultisliceRegistryViewer", "container.secrets.get"),
        "ci-preview-prod", "behind read-prod, which has no required reviewer"),
    # A5: GKE IAM is Kubernetes authority: container.admin for the reader is refused (only the reviewed deployer
    # holds it, accepted).
    "container.admin for the reader": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/container.admin", "member": READER}),
        "ci-preview-prod", "Kubernetes verb 'escalate' (cluster-wide)"),
    # A5/A7: the deployer's acceptance holds in its own stack's project only: container.admin or the Binary
    # Authorization policy of another stack's project is refused.
    "container.admin for ci-deploy-prod on the dev stack's project": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project-dev", "role": "roles/container.admin", "member": DEPLOY}),
        "ci-deploy-prod", "Kubernetes verb 'escalate' (cluster-wide)"),
    "Binary Authorization policy editor for ci-deploy-prod on the dev stack's project": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project-dev", "role": "roles/binaryauthorization.policyEditor", "member": DEPLOY}),
        "ci-deploy-prod", "binaryauthorization.policy.update on projects/my-tpu-project-dev"),
    # A7: Binary Authorization policy writes by anyone but the reviewed deployer.
    "Binary Authorization policy editor for the reader": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/binaryauthorization.policyEditor", "member": READER}),
        "ci-preview-prod", "binaryauthorization.policy.update on projects/my-tpu-project"),
    "Binary Authorization policy editor for the image identity": (_add_boot(
        "gcp:projects/iAMMember:IAMMember",
        {"project": "my-tpu-project", "role": "roles/binaryauthorization.policyEditor",
         "member": "serviceAccount:ci-image-prod@my-tpu-ci.iam.gserviceaccount.com"}),
        "ci-image-prod", "binaryauthorization.policy.update on projects/my-tpu-project"),
    # A2 with trust2's authoritative policies: a BucketIAMPolicy / RepositoryIamPolicy is read binding by binding.
    "a checkpoint BucketIAMPolicy making the reader storage admin": (_add_boot(
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
        {"bucket": "my-tpu-project-maxtext-checkpoints", "policyData": json.dumps({"bindings": [
            {"role": "roles/storage.admin", "members": [READER]}]})}),
        "ci-preview-prod", "storage.buckets.setIamPolicy on buckets/my-tpu-project-maxtext-checkpoints"),
    "a RepositoryIamPolicy making the reader repository admin": (_add_boot(
        "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy",
        {"project": "my-tpu-project", "location": "us-east5", "repository": "maxtext-tpu-images",
         "policyData": json.dumps({"bindings": [{"role": "roles/artifactregistry.admin", "members": [READER]}]})}),
        "ci-preview-prod", "artifactregistry.repositories.setIamPolicy on projects/my-tpu-project/locations/"
                           "us-east5/repositories/maxtext-tpu-images"),
    "an IAM policy whose policyData cannot be read": (_add_boot(
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy", {"bucket": "b", "policyData": "not json"}),
        "registration", "unreadable inputs"),
}


@pytest.mark.parametrize("gap", list(GCP))
def test_gcp_widening_is_caught(rendered, gap):  # noqa: F811
    mutate, identity, expect = GCP[gap]
    new = _new_refused(rendered, mutate)
    assert any(f.startswith(f"{identity}: ") and expect in f for f in new), f"{gap}: not caught; new: {new}"


KSA = {"kind": "ServiceAccount", "name": "maxtext-ksa", "namespace": "maxtext"}


def _crb(name, role, subject=KSA):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]}


def _cr(name, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}


def _in_kube_system(kind, role_kind, role, rules=None):
    docs = [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "x", "namespace": "kube-system"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
             "subjects": [KSA]}]
    if rules:
        docs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": role, "namespace": "kube-system"}, "rules": rules})
    return _add_manifests(*docs)


# A6: (mutation, what the trainer KSA's new finding says).
K8S = {
    "ClusterRoleBinding to the built-in cluster-admin": (_add_manifests(_crb("x", "cluster-admin")),
                                                         "Kubernetes verb '*' (cluster-wide)"),
    "RoleBinding in kube-system to the built-in edit": (
        _in_kube_system("RoleBinding", "ClusterRole", "edit"),
        "pod-making kinds outside its own namespace (kube-system)"),
    "ClusterRoleBinding to a role nothing defines (a chart's)": (
        _add_manifests(_crb("x", "some-chart-manager-role")), "unknown role"),
    "ClusterRoleBinding to an aggregated ClusterRole": (_add_manifests(
        {**_cr("x", []), "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]}},
        _crb("x", "x")), "unknown role"),
    "cluster-wide create on resources *": (_add_manifests(
        _cr("x", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["create", "update", "patch"]}]),
        _crb("x", "x")), "create on every resource (*) (cluster-wide)"),
    "cluster-wide create serviceaccounts/token": (_add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]), _crb("x", "x")),
        "service account tokens (any account's) (cluster-wide)"),
    "cluster-wide get secrets": (_add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]), _crb("x", "x")),
        "get Secrets (cluster-wide)"),
    "nodes/proxy get": (_add_manifests(
        _cr("x", [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get", "create"]}]), _crb("x", "x")),
        "the kubelet API"),
    "cluster-wide delete validatingadmissionpolicies": (_add_manifests(
        _cr("x", [{"apiGroups": ["admissionregistration.k8s.io"],
                   "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings",
                                 "mutatingwebhookconfigurations"], "verbs": ["create", "update", "delete"]}]),
        _crb("x", "x")), "admission control writes"),
    "create pods in kube-system for the trainer's KSA": (
        _in_kube_system("RoleBinding", "Role", "x", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]),
        "create of pod-making kinds outside its own namespace (kube-system) (cluster maxtext-tpu.my-tpu-project): "
        "pods"),
    "cluster-wide create jobsets / leaderworkersets / pods/ephemeralcontainers": (_add_manifests(
        _cr("x", [{"apiGroups": ["jobset.x-k8s.io", "leaderworkerset.x-k8s.io", ""],
                   "resources": ["jobsets", "leaderworkersets", "pods/ephemeralcontainers"],
                   "verbs": ["create", "patch"]}]), _crb("x", "x")),
        "jobsets, leaderworkersets, pods/ephemeralcontainers"),
}


def test_the_multikueue_manager_is_accepted_in_job_namespaces_only(rendered):  # noqa: F811
    """The MultiKueue manager creates Ray jobs in the workers' job namespace (accepted: it has a LocalQueue); the same
    role in kube-system, where no job runs and whose service accounts are the cluster's own, is refused."""
    manager = "k8s:ServiceAccount:kueue-system@maxtext-east1.my-tpu-project-multi/multikueue"
    assert any(f.identity == manager and f.accepted == esc.ACCEPTED["multikueue"] for f in rendered.findings_once())

    def to_kube_system(x):
        _, manifests = x.stacks["multi"]
        moved = 0
        for d in manifests:
            if d.get("kind") in ("Role", "RoleBinding") and d["metadata"]["name"] == "tpu-manager-multikueue":
                d["metadata"]["namespace"] = "kube-system"
                moved += 1
        assert moved >= 2
    new = _new_refused(rendered, to_kube_system)
    where = "(kube-system) (cluster maxtext-east1.my-tpu-project-multi): rayclusters, rayjobs"
    assert any(f.startswith(f"{manager}: ") and where in f for f in new), new


@pytest.mark.parametrize("gap", list(K8S))
def test_kubernetes_widening_is_caught(rendered, gap):  # noqa: F811
    mutate, expect = K8S[gap]
    new = _new_refused(rendered, mutate)
    who = "kubernetes" if expect == "unknown role" else KSA_SUBJECT
    assert any(f.startswith(f"{who}: ") and expect in f for f in new), f"{gap}: not caught; new: {new}"


def test_the_built_in_view_role_is_no_finding(rendered):  # noqa: F811
    """The vendored roles are read, not refused by name: view (reads, no Secrets) adds no finding."""
    assert _new_refused(rendered, _add_manifests(_crb("x", "view"))) == []


def test_gke_iam_is_kubernetes_authority_accepted_for_the_reviewed_deployer_only(rendered):  # noqa: F811
    """GKE authorizes a request if IAM or RBAC allows it: ci-deploy-prod's roles/container.admin is cluster-admin in
    its project's clusters. The check reports it, accepted for the reviewed deployer (and the threat model lists
    it); without deploy-prod's reviewer the same paths are refused."""
    reach = rendered.reach_once()
    assert {"container.clusterRoles.escalate", "container.pods.create"} <= reach[DEPLOY].permissions
    mine = [f for f in rendered.findings_once() if f.identity == "ci-deploy-prod"]
    gke = [f for f in mine if f.what.startswith("Kubernetes ")]
    assert any("'escalate'" in f.what for f in gke) and any("pod-making" in f.what for f in gke)
    assert all(f.accepted == esc.ACCEPTED["gke"] for f in gke)

    def no_reviewers(x):
        for t, i in x.boot:
            if t == "github:index/repositoryEnvironment:RepositoryEnvironment" and i["environment"] == "deploy-prod":
                i["reviewers"] = [{"teams": [], "users": []}]
    x = rendered.copy()
    no_reviewers(x)
    assert any(f.identity == "ci-deploy-prod" and "'escalate'" in f.what and not f.accepted for f in x.findings())


def test_binary_authorization_policy_update_is_reported_and_gated(rendered):  # noqa: F811
    """ci-deploy-<stack> applies the stack's Binary Authorization policy, so it can switch attestation off: the check
    reports it, accepted only for the deployer behind its reviewed environment (docs/ci-trust.md says so)."""
    (f,) = [f for f in rendered.findings_once() if f.identity == "ci-deploy-prod" and
            "binaryauthorization.policy.update" in f.what]
    assert f.accepted == esc.ACCEPTED["binauthz"]


def test_closure_is_transitive():
    """A -> B -> C with B no stronger than A and C reaching a project A does not: the path is reported for A."""
    a = "serviceAccount:ci-a@ci.iam.gserviceaccount.com"
    res = [("gcp:serviceaccount/account:Account", {"accountId": n, "project": "ci"}) for n in ("ci-a", "b", "c")]
    res += [
        ("gcp:serviceaccount/iAMMember:IAMMember", {
            "serviceAccountId": "projects/ci/serviceAccounts/b@ci.iam.gserviceaccount.com",
            "role": "roles/iam.serviceAccountUser", "member": a}),
        ("gcp:serviceaccount/iAMMember:IAMMember", {
            "serviceAccountId": "projects/ci/serviceAccounts/c@ci.iam.gserviceaccount.com",
            "role": "roles/iam.serviceAccountUser", "member": "serviceAccount:b@ci.iam.gserviceaccount.com"}),
        ("gcp:projects/iAMMember:IAMMember", {"project": "ci", "role": "roles/iam.serviceAccountViewer",
                                              "member": "serviceAccount:b@ci.iam.gserviceaccount.com"}),
        ("gcp:projects/iAMMember:IAMMember", {"project": "victim", "role": "roles/container.admin",
                                              "member": "serviceAccount:c@ci.iam.gserviceaccount.com"}),
    ]
    reach = esc.compute(res)
    assert set(esc.closure(reach, a)) == {"serviceAccount:b@ci.iam.gserviceaccount.com",
                                          "serviceAccount:c@ci.iam.gserviceaccount.com"}
    found = [str(f) for f in esc.check(reach, esc.Environments({}, {}), CONDITION) if f.identity == "ci-a"]
    assert any("actAs b@ci.iam.gserviceaccount.com -> actAs c@ci.iam.gserviceaccount.com, which reaches more: "
               "['project victim']" in f for f in found), found
    # b itself reaches victim through c, and is reported too (every identity, not only ci-*).
    assert any(f.startswith("b@ci.iam.gserviceaccount.com: actAs c@") for f in map(
        str, esc.check(reach, esc.Environments({}, {}), CONDITION)))


def test_the_multikueue_allow_list_entry_is_exercised_and_compared(rendered):  # noqa: F811
    """The rendering deploys multi on push: ci-deploy-multi holds iam.serviceAccounts.setIamPolicy on the MultiKueue
    account (allowed: the token job's workload identity), which is becoming that account; give the account more than
    its holder and the path is refused."""
    reach = rendered.reach_once()
    mk = next(iter(rendered.exports["multikueueServiceAccounts"].values()))
    deploy_multi = "serviceAccount:ci-deploy-multi@my-tpu-ci.iam.gserviceaccount.com"
    assert any(p == "iam.serviceAccounts.setIamPolicy" and r.endswith(mk) for p, r, _, _ in reach[deploy_multi].grants)
    assert f"serviceAccount:{mk}" in esc.closure(reach, deploy_multi)
    assert not [f for f in refused(rendered.findings_once()) if "ci-deploy-multi" in f]
    new = _new_refused(rendered, _add_boot("gcp:serviceaccount/iAMMember:IAMMember", {
        "serviceAccountId": "projects/my-tpu-ci/serviceAccounts/ci-image-prod@my-tpu-ci.iam.gserviceaccount.com",
        "role": "roles/iam.serviceAccountTokenCreator", "member": f"serviceAccount:{mk}"}))
    assert any(f.startswith(f"ci-deploy-multi: setIamPolicy {mk} -> getAccessToken ci-image-prod") and
               "which reaches more" in f for f in new), new


def test_authoritative_policies_read_like_members(rendered):  # noqa: F811
    """An authoritative policy and the same grants as additive members read alike: the prod stack's
    RepositoryIamPolicy rewritten as one RepositoryIamMember per member gives every identity the same grants and
    the check the same findings (less the policy-only check of foreign members, which has none here)."""
    x = rendered.copy()
    res, man = x.stacks["prod"]
    policies = [(t, i) for t, i in res if t == "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy"]
    assert policies
    members = [("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
                {k: i[k] for k in ("project", "location", "repository")} | {"role": b["role"], "member": m})
               for _, i in policies for b in json.loads(i["policyData"])["bindings"] for m in b["members"]]
    assert members
    x.stacks["prod"] = ([r for r in res if r not in policies] + members, man)
    assert {m: r.grants for m, r in x.reach().items()} == {m: r.grants for m, r in rendered.reach_once().items()}
    assert sorted(map(str, x.findings())) == sorted(map(str, rendered.findings_once()))


def test_roles_drift_reports_a_predefined_role_that_grew(tmp_path):
    """The vendored catalog is a snapshot: roles_drift compares it with `gcloud iam roles describe` (a stand-in here
    that answers from the catalog, with one permission added to roles/container.viewer) and fails on the change.

    The stand-in is run once, as roles_drift runs gcloud; the comparisons over every role take its answers in
    process (a process per role and call was 176 processes)."""
    from bootstrap.escalation import roles_drift

    catalog = {role: sorted(perms) for role, perms in esc.load_roles().items()}
    catalog["roles/container.viewer"].append("container.secrets.get")
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    gcloud = tmp_path / "gcloud"
    gcloud.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                      f"catalog = json.load(open({str(tmp_path / 'catalog.json')!r}))\n"
                      "assert sys.argv[1:4] == ['iam', 'roles', 'describe'] and sys.argv[5] == '--format=json'\n"
                      "print(json.dumps({'name': sys.argv[4], 'includedPermissions': catalog[sys.argv[4]]}))\n")
    gcloud.chmod(0o755)
    live = roles_drift.live_permissions("roles/container.viewer", str(gcloud))
    assert "container.secrets.get" in live

    def describe(role: str, given: str) -> frozenset[str]:
        assert given == str(gcloud)  # the gcloud named on the command line
        return live if role == "roles/container.viewer" else frozenset(catalog[role])

    assert roles_drift.drift(str(gcloud), describe) == {"roles/container.viewer": (["container.secrets.get"], [])}
    assert roles_drift.main([str(gcloud)], describe) == 1
    live = frozenset(live - {"container.secrets.get"})
    assert roles_drift.drift(str(gcloud), describe) == {} and roles_drift.main([str(gcloud)], describe) == 0


@pytest.mark.parametrize("cel, expect", [
    (CONDITION, None),
    (CONDITION.replace("'", '"'), None),
    (f"{CONDITION} || true", "not a plain conjunction"),
    (f"!({CONDITION})", "not a plain conjunction"),
    (CONDITION.replace("assertion.repository_id == '1'", "assertion.repository_id.startsWith('1')"),
     "not a plain conjunction"),
    (CONDITION.replace("assertion.repository_owner_id == '2'", "assertion.repository_owner_id == 'my-org'"),
     "lacks `assertion.repository_owner_id == <numeric id>`"),
    (CONDITION.replace(" && assertion.workflow_ref == assertion.job_workflow_ref", ""),
     "lacks `assertion.workflow_ref == assertion.job_workflow_ref`"),
])
def test_the_pool_condition_is_parsed(cel, expect):
    """A8: the condition must be a plain conjunction of equalities holding the repository's numeric ids and
    workflow_ref == job_workflow_ref; anything that could widen it (a disjunction, a negation, a call) is refused."""
    problems = esc.condition_problems(cel)
    assert (problems == []) if expect is None else any(expect in p for p in problems), problems


def _cluster_docs(cluster: str, ns: str) -> list[dict]:
    """A cluster's objects: a KSA of ``ns`` bound to its project's account, and a Role there letting ``creator``
    make pods."""
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
                "namespace": ns, "name": "trainer", "annotations": {
                    "iam.gke.io/gcp-service-account": f"trainer@{cluster}.iam.gserviceaccount.com"}}},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"namespace": ns, "name": "r"},
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"namespace": ns, "name": "r"}, "roleRef": {"kind": "Role", "name": "r"},
             "subjects": [{"kind": "ServiceAccount", "namespace": "kueue-system", "name": "creator"}]}]


def test_namespaces_of_different_clusters_are_not_merged():
    """C10: the same namespace and account names in two clusters (of two projects) are two places. A subject that
    makes pods in cluster a's ``maxtext`` becomes a's trainer (and its project's workload identity principal), not
    b's: with the namespaces merged, it reached both, and b's checkpoints with them."""
    grants = [("gcp:storage/bucketIAMMember:BucketIAMMember", {
        "bucket": f"{p}-checkpoints", "role": "roles/storage.objectUser",
        "member": f"serviceAccount:{p}.svc.id.goog[maxtext/trainer]"}) for p in ("proj-a", "proj-b")]
    reach = esc.compute(grants)
    for project in ("proj-a", "proj-b"):
        reach.absorb(esc.compute([], _cluster_docs(project, "maxtext"), cluster=esc.cluster_id("c", project)))
    esc.check(reach, esc.Environments({}, {}), "")  # links principals and Secrets as a real check does
    paths = esc.closure(reach, "k8s:ServiceAccount:kueue-system@c.proj-a/creator")
    assert {"k8s:ServiceAccount:maxtext@c.proj-a/trainer", "serviceAccount:proj-a.svc.id.goog[maxtext/trainer]"} \
        <= set(paths), sorted(paths)
    assert not any("proj-b" in t for t in paths), sorted(paths)


def test_each_path_reaches_its_own_stacks_data_only(rendered):  # noqa: F811
    """C10 on the rendering: a Kubernetes subject of one cluster, or a per-stack CI identity, reaching checkpoints
    or images reaches its own stack's only (merged namespaces made every stack's trainer one account, so the
    MultiKueue manager's and the deployer's accepted paths listed every stack's checkpoint buckets)."""
    stacks = {k: res for k, (res, _) in rendered.stacks.items()}
    scopes = esc.stack_scopes(stacks)
    by_project = {p.split("/")[1]: s for s, scope in scopes.items() for p in scope if p.startswith("projects/")}
    checked = 0
    for f in rendered.findings_once():
        m = re.search(r"@[^./]+\.([a-z0-9-]+)/", f.identity)
        stack = by_project.get(m.group(1)) if m else (f.identity.removeprefix("ci-deploy-")
                                                      if f.identity.startswith("ci-deploy-") else None)
        if stack not in scopes:
            continue
        for bucket in re.findall(r"data buckets/([a-z0-9._-]+)", f.what):
            checked += 1
            assert f"buckets/{bucket}" in scopes[stack], f"{f.identity} ({stack}) reaches {bucket}: {f.what[:300]}"
    assert checked, "no finding names a bucket: the test checks nothing"


def test_kueues_reach_past_the_token_job_is_its_own_project_only(rendered):  # noqa: F811
    """Kueue's controller on the manager patches the token job, so it reaches what the job's account holds: accepted
    in its own cluster's project (get-credentials on the workers), refused in any other. The mutation: the
    MultiKueue account also granted a read role on prod's project."""
    controller = "k8s:ServiceAccount:kueue-system@tpu-manager.my-tpu-project-multi/kueue-controller-manager"
    new = _new_refused(rendered, _add_boot("gcp:projects/iAMMember:IAMMember", {
        "project": "my-tpu-project", "role": "roles/container.clusterViewer",
        "member": "serviceAccount:tpu-manager-multikueue@my-tpu-project-multi.iam.gserviceaccount.com"}))
    assert any(f.startswith(f"{controller}: patch jobs ") and "['project my-tpu-project'" in f for f in new), new


def _role_in(stack: str, namespace: str, subject: dict, rules: list[dict]):
    """A Role and its binding in ``namespace`` of the stack's manager (or only) cluster."""
    def mutate(x):
        _, manifests = x.stacks[stack]
        meta = {"name": "mutation", "namespace": namespace}
        manifests.extend(json.loads(json.dumps([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "mutation"},
             "subjects": [subject]}])))
    return mutate


METRICS_TOKEN = {"kind": "ServiceAccount", "namespace": "kueue-system", "name": "kueue-metrics-token"}
METRICS_MEMBER = "k8s:ServiceAccount:kueue-system@tpu-manager.my-tpu-project-multi/kueue-metrics-token"


@pytest.mark.parametrize(("res", "names"), [("services", ["kueue-webhook-service"]), ("services", None),
                                            ("endpoints", None), ("endpointslices", None)])
def test_the_declared_webhooks_backends_are_refused(rendered, res, names):  # noqa: F811
    """K6: Kueue's webhook configurations (its vendored release manifest) call kueue-webhook-service in
    kueue-system: patching that Service (or its Endpoints/EndpointSlices) points every pod admission at another
    pod. Given to the metrics token job's account on the manager, it is refused; the same in the job namespace,
    where no webhook's Service lives, is no such finding."""
    rule = {"apiGroups": ["", "discovery.k8s.io"], "resources": [res], "verbs": ["patch"],
            **({"resourceNames": names} if names else {})}
    new = _new_refused(rendered, _role_in("multi", "kueue-system", METRICS_TOKEN, [rule]))
    assert any(f.startswith(f"{METRICS_MEMBER}: Kubernetes admission webhook backends (kueue-webhook-service")
               for f in new), new
    elsewhere = _new_refused(rendered, _role_in("multi", "maxtext", METRICS_TOKEN, [rule]))
    assert not any("webhook backends" in f for f in elsewhere), elsewhere


def test_the_declared_webhooks_are_read_from_the_manifests(rendered):  # noqa: F811
    """Every cluster with Kueue has its webhook Service in the model (read, not named by the check)."""
    reach = rendered.reach_once()
    clusters = {c for _, m in rendered.stacks.values() for c in m.by_cluster()}
    assert {(f"kueue-system@{c}", "kueue-webhook-service") for c in clusters} <= reach.webhook_services


def test_writing_the_kubeconfig_secrets_kueue_reads_is_refused(rendered):  # noqa: F811
    """K11: the worker kubeconfig Secrets on the manager are the token job's to write (it is excluded by its pods'
    ConfigMap); any other writer redirects MultiKueue's dispatch and credentials, refused: the metrics token job's
    account given patch on one of them."""
    rule = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["patch"],
            "resourceNames": ["maxtext-east1-multikueue"]}
    new = _new_refused(rendered, _role_in("multi", "kueue-system", METRICS_TOKEN, [rule]))
    assert any(f.startswith(f"{METRICS_MEMBER}: Kubernetes the Secrets Kueue reads (maxtext-east1-multikueue")
               for f in new), new
    assert "k8s:ServiceAccount:kueue-system@tpu-manager.my-tpu-project-multi/multikueue-token" in \
        rendered.reach_once().token_jobs


@pytest.mark.parametrize("subject", [
    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:unauthenticated"},
    {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:anonymous"}])
def test_a_binding_to_kubernetes_public_subjects_is_refused_reads_too(rendered, subject):  # noqa: F811
    """K9: view in kube-system for system:unauthenticated. Read-only, but on GKE system:authenticated is any Google
    account and the other two are anyone: what they read is public, as allUsers on a bucket is (refused alike)."""
    rule = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
    new = _new_refused(rendered, _role_in("prod", "kube-system", subject, [rule]))
    assert any("public Kubernetes access" in f and subject["name"] in f for f in new), new
