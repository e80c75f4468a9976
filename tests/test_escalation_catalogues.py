"""The published escalation catalogues as the escalation check's oracle: each entry, added to a CI identity or a
workload identity of the real rendering (tests/test_escalation.py's ``rendered`` fixture), must be refused.

The catalogues are vendored unchanged in tests/reference/escalation/ (source, commit, digest and licence in
tests/reference/README.md and SHA256SUMS):
- Rhino Security Labs' GCP IAM privilege-escalation methods: ``methods_and_permissions`` of
  ``PrivEscScanner/check_for_privesc.py``, each method the set of permissions it needs, on a project (or above);
- Kubernetes' "RBAC Good Practices: privilege escalation risks", each section an RBAC rule below (the section's
  heading is the key, so a section upstream adds and this file does not map fails the coverage test).
Then the entries the issue and the security review name beyond both (``EXTRA_GCP``, ``EXTRA_K8S``), and the
review's own mutations the first check let through (``REVIEW``), each with its source.

A mutation is caught when the check reports a new finding, not accepted, naming the identity it was given to.
"""

from __future__ import annotations

import ast
import json
import re

import pytest
from conftest import REFERENCE
from test_escalation import Rendered, refused, refused_after, rendered  # noqa: F401  (the module-scoped fixture)

from bootstrap import escalation as esc

CATALOGUES = REFERENCE / "escalation"
RHINO = CATALOGUES / "RhinoSecurityLabs_PrivEscScanner_check_for_privesc.py.txt"
RHINO_README = CATALOGUES / "RhinoSecurityLabs_README.md"
K8S = CATALOGUES / "kubernetes-website_rbac-good-practices_privilege-escalation-risks.md"

CI = "my-tpu-ci"
PROD = "my-tpu-project"
MULTI = "my-tpu-project-multi"
IMAGE = f"serviceAccount:ci-image-prod@{CI}.iam.gserviceaccount.com"
DEPLOY = f"serviceAccount:ci-deploy-prod@{CI}.iam.gserviceaccount.com"
READER = f"serviceAccount:ci-preview-prod@{CI}.iam.gserviceaccount.com"
NODES = f"serviceAccount:maxtext-tpu-nodes@{PROD}.iam.gserviceaccount.com"
GKE_POOL = "principal://iam.googleapis.com/projects/OFFLINE-PROJECT-NUMBER/locations/global/workloadIdentityPools"
TRAINER = f"{GKE_POOL}/{PROD}.svc.id.goog/subject/ns/maxtext/sa/maxtext-ksa"


def _canonical(permission: str) -> str:
    # The scanner spells actAs's service 'iam.serviceaccounts' in its two Cloud Run entries; IAM permission names
    # are 'iam.serviceAccounts.*' (https://cloud.google.com/iam/docs/permissions-reference), as its other entries.
    return re.sub(r"^iam\.serviceaccounts\.", "iam.serviceAccounts.", permission)


def rhino_methods() -> dict[str, tuple[str, ...]]:
    """The scanner's ``methods_and_permissions``: method -> the permissions it needs (read, never run)."""
    for node in ast.parse(RHINO.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "methods_and_permissions":
            table = ast.literal_eval(node.value)
            return {m: tuple(sorted({_canonical(p) for p in v["Permissions"]})) for m, v in table.items()}
    raise AssertionError(f"{RHINO.name}: no methods_and_permissions")


def test_the_readme_list_is_the_scanners_table():
    """Each method the README lists (its permission, in backquotes) is a permission of some scanner entry: the
    table the mutations use is the whole published list."""
    listed = re.findall(r"^\d+\. `([a-zA-Z.]+)`", RHINO_README.read_text(), re.M)
    assert len(listed) >= 17
    table = {p for perms in rhino_methods().values() for p in perms}
    # The README spells Cloud Build's service 'cloudbuilds' (the permission is cloudbuild.builds.create).
    missing = {p for p in listed if p.replace("cloudbuilds.", "cloudbuild.") not in table}
    assert not missing, missing


# Beyond the scanner: what the issue names (services that run code as an account, cluster switches) and the review
# found missing; each with the documentation that makes it a path.
EXTRA_GCP = {
    # actAs + a service that runs code as the account it is given (cloud.google.com/iam/docs/service-accounts-actas).
    "actAs + Dataproc": ("dataproc.clusters.create", "iam.serviceAccounts.actAs"),
    "actAs + Composer": ("composer.environments.create", "iam.serviceAccounts.actAs"),
    "actAs + Cloud Run jobs": ("run.jobs.create", "iam.serviceAccounts.actAs"),
    # The same services with no account named run as the project's default one (Compute Engine's, App Engine's,
    # Cloud Build's: https://cloud.google.com/build/docs/cloud-build-service-account-updates).
    "Dataproc with the default account": ("dataproc.clusters.create",),
    "Cloud Functions with the default account": ("cloudfunctions.functions.create",
                                                 "cloudfunctions.functions.sourceCodeSet"),
    "Cloud Run with the default account": ("run.services.create",),
    "a VM with the default account": ("compute.instances.create", "compute.disks.create"),
    # SSH keys in instance or project metadata: a shell on every VM, as the account it runs as (GKE nodes
    # included: https://cloud.google.com/compute/docs/connect/add-ssh-keys#metadata).
    "SSH keys in an instance's metadata": ("compute.instances.setMetadata",),
    "SSH keys in the project's metadata": ("compute.projects.setCommonInstanceMetadata",),
    "OS Login as administrator": ("compute.instances.osAdminLogin",),
    # The cluster's own switches: Binary Authorization evaluation, legacy ABAC, network policy, the node account
    # (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters/update).
    "container.clusters.update": ("container.clusters.update",),
    # setIamPolicy on any resource: whoever holds it grants itself the resource's roles.
    "setIamPolicy on a secret": ("secretmanager.secrets.setIamPolicy",),
    "setIamPolicy on a topic": ("pubsub.topics.setIamPolicy",),
    "setIamPolicy on the buckets": ("storage.buckets.setIamPolicy",),
    "setIamPolicy on a Cloud Run service": ("run.services.setIamPolicy",),
    # Logs exported elsewhere, or audit logs silenced (https://cloud.google.com/logging/docs/export/configure_export_v2).
    "a log sink": ("logging.sinks.create",),
    # A Kubernetes client certificate for any user the cluster's CA signs (GKE IAM's CSR approval).
    "GKE IAM CSR approval": ("container.certificateSigningRequests.create",
                             "container.certificateSigningRequests.approve"),
    "GKE IAM ConfigMap writes (the token job's script)": ("container.configMaps.update",),
}
# Who each GCP entry is given to: a reviewed CI identity, the deployer, a node account, the MultiKueue account and
# the trainer's workload identity principal; each at its own stack's project.
GCP_TARGETS = {
    "ci-image-prod": (IMAGE, PROD),
    "ci-deploy-prod": (DEPLOY, PROD),
    "node account": (NODES, PROD),
    "multikueue account": (f"serviceAccount:tpu-manager-multikueue@{MULTI}.iam.gserviceaccount.com", MULTI),
    "trainer principal": (TRAINER, PROD),
}
# Entries the design keeps for one identity, each with the check's own reason: the deployer is GKE's cluster
# administrator in its own project (esc.ACCEPTED["gke"]: roles/container.admin holds the cluster switches, CSR
# approval and ConfigMap writes) and sets its checkpoint buckets' IAM (esc.ALLOWED_SET_IAM).
ACCEPTED_GCP = {("ci-deploy-prod", "container.clusters.update"): "gke",
                ("ci-deploy-prod", "container.certificateSigningRequests.approve"): "gke",
                ("ci-deploy-prod", "container.configMaps.update"): "gke",
                ("ci-deploy-prod", "storage.buckets.setIamPolicy"): "set iam"}
def _short(member: str) -> str:
    m = re.match(r"^serviceAccount:(ci-[a-z0-9-]+)@", member)
    return m.group(1) if m else member.removeprefix("serviceAccount:")


def _grant_custom(member: str, project: str, permissions) -> callable:
    def mutate(x: Rendered) -> None:
        x.boot.append(("gcp:projects/iAMCustomRole:IAMCustomRole", {
            "project": project, "roleId": "catalogueMutation", "title": "mutation", "permissions": list(permissions)}))
        x.boot.append(("gcp:projects/iAMMember:IAMMember", {
            "project": project, "role": f"projects/{project}/roles/catalogueMutation", "member": member}))
    return mutate


def _caught(rendered: Rendered, mutate, member: str) -> tuple[list[str], list[str]]:  # noqa: F811
    """(new refused findings naming ``member``, new accepted ones) after ``mutate``, which only adds records."""
    x = rendered.extended()
    before = rendered.baseline()
    mutate(x)
    new = [f for f in x.findings() if str(f) not in before]
    who = _short(member)
    named = [f for f in new if f.identity == who or who in f.what]
    return refused(named), [str(f) for f in named if f.accepted]


# Every (entry, target) pair, none skipped: GKE IAM ConfigMap writes given to the trainer principal, once skipped as
# "not a path" (prod's only ConfigMap-mounting pods run the metrics token job), is refused where it leads: Kueue's
# controller, which patches the trainer's jobs, would reach the project grant (per-cluster reach, esc3).
GCP_CASES = [(f"{method} -> {target}", perms, target)
             for method, perms in [*rhino_methods().items(), *EXTRA_GCP.items()] for target in GCP_TARGETS]


@pytest.mark.parametrize(("case", "perms", "target"), GCP_CASES, ids=[c[0] for c in GCP_CASES])
def test_each_gcp_catalogue_entry_is_refused(rendered, case, perms, target):  # noqa: F811
    member, project = GCP_TARGETS[target]
    new, accepted = _caught(rendered, _grant_custom(member, project, perms), member)
    reach = rendered.reach_once()
    held = reach[member].permissions if member in reach else set()
    why = next((k for (t, p), k in ACCEPTED_GCP.items() if t == target and p in perms), None)
    if why and set(perms) <= held:
        # Held already, by design: the check names it with its reason (an accepted finding of the unmutated
        # rendering, or the setIamPolicy allow-list entry).
        if why == "set iam":
            assert any(pat.fullmatch(p) for p in perms for pat, _, _ in esc.ALLOWED_SET_IAM)
        else:
            assert any(f.accepted == esc.ACCEPTED[why] and f.identity == _short(member)
                       for f in rendered.findings_once())
        return
    assert new, f"{case}: not refused (accepted: {accepted})"


# --- Kubernetes ---------------------------------------------------------------------------------------------------

# Each section of the good-practices page: the RBAC rules that are its risk (resources, verbs, resourceNames).
K8S_SECTIONS = {
    "Listing secrets": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
    "Workload creation": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}],
    "Persistent volume creation": [{"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["create"]}],
    "Access to `proxy` subresource of Nodes": [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}],
    "Escalate verb": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}],
    "Bind verb": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind"]}],
    "Impersonate verb": [{"apiGroups": [""], "resources": ["users", "groups", "serviceaccounts"],
                          "verbs": ["impersonate"]}],
    "CSRs and certificate issuing": [
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"],
         "verbs": ["update"]},
        {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
         "resourceNames": ["kubernetes.io/kube-apiserver-client"]}],
    "Token request": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}],
    "Control admission webhooks": [{"apiGroups": ["admissionregistration.k8s.io"],
                                    "resources": ["mutatingwebhookconfigurations"], "verbs": ["create", "update"]}],
    "Namespace modification": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["patch"]}],
}
# Beyond the page: the other ways into a pod's identity (the issue's list; the review's K3-K10).
EXTRA_K8S = {
    "workload creation: a Deployment": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}],
    "workload creation: a CronJob": [{"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["create"]}],
    "workload creation: a RayCluster": [{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["create"]}],
    "a pod template patched (CronJob)": [{"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["patch"]}],
    "a pod template patched (Deployment)": [{"apiGroups": ["apps"], "resources": ["deployments"],
                                             "verbs": ["update"]}],
    "pods/exec (create)": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}],
    # The WebSocket handshake is a GET (kubernetes/website, feature gate AuthorizePodWebsocketUpgradeCreatePermission:
    # before it, get on pods/exec opened a shell).
    "pods/exec (get)": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get"]}],
    "pods/attach": [{"apiGroups": [""], "resources": ["pods/attach"], "verbs": ["create"]}],
    "pods/ephemeralcontainers": [{"apiGroups": [""], "resources": ["pods/ephemeralcontainers"], "verbs": ["patch"]}],
    "Secrets created (a service-account-token Secret)": [{"apiGroups": [""], "resources": ["secrets"],
                                                          "verbs": ["create"]}],
    "the token jobs' ConfigMaps (their scripts)": [{"apiGroups": [""], "resources": ["configmaps"],
                                                    "verbs": ["patch"]}],
    "the named Secrets holding worker tokens": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                                                 "resourceNames": ["maxtext-east1-multikueue",
                                                                   "maxtext-east5-multikueue"]}],
    # K17: the job namespace's network policies (the head's ingress rules) opened.
    "network policies in the job namespace": [{"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"],
                                               "verbs": ["patch", "delete"]}],
}
# Entries that live where the mutation's default namespace has nothing to reach: (namespace, stack) instead. The
# MultiKueue manager's kubeconfig Secrets and the token job's script are in the manager's kueue-system.
PLACE = {"the named Secrets holding worker tokens": ("kueue-system", "multi"),
         "network policies in the job namespace": ("maxtext", "prod"),
         "the token jobs' ConfigMaps (their scripts)": ("kueue-system", "multi")}
# (subject, namespace of its Role, stack): the drill's CI user in prod's job namespace, and the metrics token job's
# service account in the multi-region manager's kueue-system (beside the MultiKueue token job and its account).
K8S_TARGETS = {
    "ci-drill-prod": ({"kind": "User", "name": f"ci-drill-prod@{CI}.iam.gserviceaccount.com"}, "maxtext", "prod",
                      f"serviceAccount:ci-drill-prod@{CI}.iam.gserviceaccount.com"),
    "kueue-metrics-token": ({"kind": "ServiceAccount", "name": "kueue-metrics-token", "namespace": "kueue-system"},
                            "kueue-system", "multi",
                            "k8s:ServiceAccount:kueue-system@tpu-manager.my-tpu-project-multi/kueue-metrics-token"),
}


def test_every_section_of_the_page_is_a_mutation():
    sections = re.findall(r"^### (.+)$", K8S.read_text(), re.M)
    assert sections and set(sections) == set(K8S_SECTIONS), set(sections) ^ set(K8S_SECTIONS)


def _role(subject: dict, namespace: str, stack: str, rules: list[dict]):
    def mutate(x: Rendered) -> None:
        _, manifests = x.stacks[stack]
        cluster_scoped = any(r in ("persistentvolumes", "nodes/proxy", "certificatesigningrequests", "namespaces",
                                   "mutatingwebhookconfigurations", "signers", "users", "groups")
                             for rule in rules for r in rule["resources"])
        kind = "ClusterRole" if cluster_scoped else "Role"
        meta = {"name": "catalogue-mutation"} | ({} if cluster_scoped else {"namespace": namespace})
        manifests.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                          "rules": json.loads(json.dumps(rules))})
        manifests.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": meta,
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                                      "name": "catalogue-mutation"},
                          "subjects": [subject]})
    return mutate


K8S_CASES = [(f"{entry} -> {target}", rules, target)
             for entry, rules in [*K8S_SECTIONS.items(), *EXTRA_K8S.items()] for target in K8S_TARGETS]


@pytest.mark.parametrize(("case", "rules", "target"), K8S_CASES, ids=[c[0] for c in K8S_CASES])
def test_each_kubernetes_catalogue_entry_is_refused(rendered, case, rules, target):  # noqa: F811
    subject, namespace, stack, member = K8S_TARGETS[target]
    namespace, stack = PLACE.get(case.split(" -> ")[0], (namespace, stack))
    if subject["kind"] == "ServiceAccount":  # the Role's cluster's account
        member = f"k8s:ServiceAccount:{esc.qualify(subject['namespace'], rendered.stacks[stack][1].default)}/" \
                 f"{subject['name']}"
    new, accepted = _caught(rendered, _role(subject, namespace, stack, rules), member)
    assert new, f"{case}: not refused (accepted: {accepted})"


# --- the security review's own mutations (its section 3), beyond the catalogues -----------------------------------

STATE = "projects/_/buckets/my-tpu-ci-pulumi-state/objects/.pulumi"


def _bucket_grant(member: str, role: str, bucket: str, expression: str | None):
    def mutate(x: Rendered) -> None:
        x.boot.append(("gcp:storage/bucketIAMMember:BucketIAMMember", {
            "bucket": bucket, "role": role, "member": member,
            **({"condition": {"title": "m", "expression": expression}} if expression else {})}))
    return mutate


def _widen_reader_locks(x: Rendered, widening: str | None = None) -> None:
    """C7: the reader's lock condition, '|| stacks/' appended: every stack's state written by every approved preview."""
    for t, i in x.boot:
        if t == "gcp:storage/bucketIAMMember:BucketIAMMember" and i["member"] == READER and \
                i["role"] == "roles/storage.objectUser":
            i["condition"]["expression"] += widening or f' || resource.name.startsWith("{STATE}/stacks/")'
            return
    raise AssertionError("no reader lock grant")


# The same widening in IAM's CEL dialect, through attributes IAM always sets on a request and a bare evaluation
# lacks (https://cloud.google.com/iam/docs/conditions-resource-attributes: resource.type and resource.service;
# https://cloud.google.com/iam/docs/conditions-attribute-reference#request-time: request.time). Each disjunct is
# true on every real request, so the grant is the whole bucket; an evaluation that binds only resource.name reads
# them as false (has() of an absent field, a key test, a size) and sees locks only.
CEL_DIALECT_WIDENINGS = {
    "has(resource.type)": " || has(resource.type)",
    "'type' in resource": " || 'type' in resource",
    "size(resource)": " || size(resource) > 1",
    "has(request.time)": " || has(request.time)",
    "request.time after 2000": ' || request.time > timestamp("2000-01-01T00:00:00Z")',
    "resource.service": ' || resource.service == "storage.googleapis.com"',
    "resource.type of an object": ' || resource.type == "storage.googleapis.com/Object"',
    "extract": ' || resource.name.extract("projects/_/buckets/{bucket}/") != ""',
}


def _key_grant(member: str, role: str, stack: str):
    def mutate(x: Rendered) -> None:
        x.boot.append(("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", {
            "cryptoKeyId": f"projects/{CI}/locations/global/keyRings/pulumi/cryptoKeys/{stack}", "role": role,
            "member": member}))
    return mutate


def _wi(account: str, member: str):
    def mutate(x: Rendered) -> None:
        project = account.split("@")[1].removesuffix(".iam.gserviceaccount.com")
        x.boot.append(("gcp:serviceaccount/iAMMember:IAMMember", {
            "serviceAccountId": f"projects/{project}/serviceAccounts/{account}",
            "role": "roles/iam.workloadIdentityUser", "member": member}))
    return mutate


def _repository_member(role: str, member: str):
    """(f) ``member`` added to prod's image repository policy (the authoritative RepositoryIamPolicy it renders)."""
    def mutate(x: Rendered) -> None:
        res, _ = x.stacks["prod"]
        for t, i in res:
            if t == "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy":
                doc = json.loads(i["policyData"])
                doc["bindings"].append({"role": role, "members": [member]})
                i["policyData"] = json.dumps(doc, separators=(",", ":"))
                return
        raise AssertionError("prod renders no repository policy")
    return mutate


MK_GSA = f"tpu-manager-multikueue@{MULTI}.iam.gserviceaccount.com"
REVIEW = {
    "C6b: the deployer writes dev's state": (
        _bucket_grant(DEPLOY, "roles/storage.objectAdmin", "my-tpu-ci-pulumi-state",
                      f'resource.name.startsWith("{STATE}/stacks/tpu-multislice/dev.json")'), "ci-deploy-prod"),
    "C6: the deployer on the whole state bucket": (
        _bucket_grant(DEPLOY, "roles/storage.objectAdmin", "my-tpu-ci-pulumi-state", None), "ci-deploy-prod"),
    "C7: the reader's lock condition widened to every stack's state": (_widen_reader_locks, "ci-preview-prod"),
    **{f"C7 in IAM's CEL dialect: the reader's lock condition || {k}": (
        lambda x, w=w: _widen_reader_locks(x, w), "ci-preview-prod") for k, w in CEL_DIALECT_WIDENINGS.items()},
    "C8: the deployer on dev's state key": (_key_grant(DEPLOY, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "dev"),
                                            "ci-deploy-prod"),
    "C8b: the reader decrypts multi's state": (_key_grant(READER, "roles/cloudkms.cryptoKeyDecrypter", "multi"),
                                               "ci-preview-prod"),
    "C9: the reader reads every stack's state": (
        _bucket_grant(READER, "roles/storage.objectViewer", "my-tpu-ci-pulumi-state", None), "ci-preview-prod"),
    "C11: allUsers reads the checkpoints": (
        _bucket_grant("allUsers", "roles/storage.objectViewer", "my-tpu-project-maxtext-checkpoints", None),
        "allUsers"),
    "C11b: allAuthenticatedUsers writes the checkpoints": (
        _bucket_grant("allAuthenticatedUsers", "roles/storage.objectUser", "my-tpu-project-maxtext-checkpoints", None),
        "allAuthenticatedUsers"),
    "f: allAuthenticatedUsers pulls prod's images": (
        _repository_member("roles/artifactregistry.reader", "allAuthenticatedUsers"), "allAuthenticatedUsers"),
    "f: allAuthenticatedUsers pushes prod's images": (
        _repository_member("roles/artifactregistry.writer", "allAuthenticatedUsers"), "allAuthenticatedUsers"),
    "f: allUsers pushes prod's images": (
        _repository_member("roles/artifactregistry.writer", "allUsers"), "allUsers"),
    "G2: a foreign cluster's account as the node account": (
        _wi(f"maxtext-tpu-nodes@{PROD}.iam.gserviceaccount.com", "serviceAccount:evil-project.svc.id.goog[default/x]"),
        f"maxtext-tpu-nodes@{PROD}.iam.gserviceaccount.com"),
    "G3: a foreign cluster's account as the MultiKueue account": (
        _wi(MK_GSA, "serviceAccount:evil-project.svc.id.goog[default/x]"), MK_GSA),
    "G3 (source): the token job's binding moved to default/default": (
        _wi(MK_GSA, f"serviceAccount:{MULTI}.svc.id.goog[default/default]"), MK_GSA),
    "G3b: a whole namespace as the MultiKueue account": (
        _wi(MK_GSA, f"principalSet://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/"
                    f"{MULTI}.svc.id.goog/namespace/default"), MK_GSA),
}


@pytest.mark.parametrize("mutation", list(REVIEW))
def test_each_review_blind_spot_is_refused(rendered, mutation):  # noqa: F811
    mutate, who = REVIEW[mutation]
    assert refused_after(rendered, mutate, lambda f: f.identity == who), f"{mutation}: not refused"


@pytest.fixture(scope="module", autouse=True)
def _records_never_edited(rendered):  # noqa: F811
    """After every case: the module's rendering is still what it was (its pickle), so each case's ``extended`` copy
    (sharing its records) saw the unmutated records plus its own mutation only, as a deep copy would have."""
    rendered.copy()  # pickles it now, before any case
    yield
    assert rendered.unchanged(), "a catalogue case edited the records it shares with the others"


def test_a_role_not_in_the_vendored_data_fails_closed(rendered):  # noqa: F811
    """(g) A role the vendored data (bootstrap/data/iam_roles.json) does not hold has unknown permissions: granting
    it must stop the check, naming the role, never count as a grant of nothing."""
    x = rendered.copy()
    x.boot.append(("gcp:projects/iAMMember:IAMMember",
                   {"project": PROD, "role": "roles/notARealRole.admin", "member": IMAGE}))
    with pytest.raises(KeyError, match="roles/notARealRole.admin"):
        x.findings()
