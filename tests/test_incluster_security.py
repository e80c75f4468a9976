"""Inside the cluster: head NetworkPolicies, the drill identity's RBAC, no API tokens in Ray pods,
no privileged containers, Ray token auth; and the policies that hold them.

Renderings come from the real program under Pulumi mocks (``offline.engine``: only GCP and the
Pulumi engine are replaced). Every rendered object is checked against the Kubernetes 1.35 schema
(kubernetes-validate, strict: unknown fields fail) or KubeRay's CRD; the policy cases change a
deep copy of the rendering and run the real rules through the offline evaluator.
"""

from __future__ import annotations

import copy
import inspect
import json

import kube_cel
import kubernetes_validate
import pytest
from conftest import policy_bindings, rendered

from drills import cluster as drill
from offline import engine
from policies import offline, registry
from policies.rules.common import RAY_CLUSTER, RAY_JOB, Res
from stackspec import kube, limits
from stackspec import spec as stack_spec
from stackspec.errors import SpecError
from workloads import manifests, security

K8S_VERSION = "1.35.0"
NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _with_shared_job(stack: str) -> dict[str, str]:
    """The stack's config with its elastic job moved onto the shared RayCluster."""
    config = engine.stack_config(stack)
    key = f"{stack_spec.PROJECT}:jobs"
    jobs = json.loads(config[key])
    for j in jobs:
        if j.get("mode") == "elastic":
            j["cluster"] = "shared"
    return {**config, key: json.dumps(jobs)}


def _drilled(stack: str, job: str) -> dict[str, str]:
    """The stack with CI's cluster drill on ``job`` (deploy.clusterDrill): only a drilled stack gets the drill
    identity's RBAC and admission policy (the bootstrap makes ci-drill-<stack> only for it)."""
    return {**engine.stack_config(stack), "tpu-multislice:deploy": json.dumps({"clusterDrill": job})}


@pytest.fixture(scope="module")
def renderings() -> dict[str, engine.Rendering]:
    return {"prod": rendered("prod"), "dev": rendered("dev", _drilled("dev", "llama3-8b-elastic")),
            "prod-shared": rendered("prod", _with_shared_job("prod"))}


def test_a_stack_ci_does_not_drill_grants_no_drill_identity():
    """dev as its file has it (no deploy.clusterDrill): no RBAC or admission policy names ci-drill-dev, an account
    the bootstrap does not make for it (tests/test_references.py)."""
    kinds = {d["kind"] for d in _docs(rendered("dev"))}
    assert not kinds & {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy"}
    assert security.drill_user(rendered("dev").spec) is None


def _docs(rendering: engine.Rendering) -> list[dict]:
    """The stack's own objects: Kueue's release objects are upstream's (tests/test_kueue.py holds them to it)."""
    return [engine.kubernetes_manifest(r) for r in rendering.resources
            if engine.is_kubernetes_object(r) and "KueueInstall" not in (r.parent or "")]


def _kind(rendering, kind: str) -> list[dict]:
    return [d for d in _docs(rendering) if d["kind"] == kind]


def _head_labels(doc: dict) -> dict[str, str]:
    spec = doc["spec"].get("rayClusterSpec", doc["spec"])
    labels = dict(spec["headGroupSpec"]["template"].get("metadata", {}).get("labels", {}))
    labels[kube.RAY_NODE_TYPE_LABEL] = "head"
    if doc["kind"] == "RayCluster":
        labels[kube.RAY_CLUSTER_LABEL] = doc["metadata"]["name"]
    return labels


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_every_object_validates_against_its_schema(renderings, stack, kuberay_validator):
    docs = _docs(renderings[stack])
    builtin = [d for d in docs if d["kind"] in ("NetworkPolicy", "Role", "RoleBinding", "ClusterRole",
                                                "ClusterRoleBinding", "ServiceAccount")]
    assert {d["kind"] for d in builtin} >= {"NetworkPolicy", "Role", "RoleBinding", "ClusterRole",
                                            "ClusterRoleBinding"}
    for d in builtin:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    for d in docs:
        if d["kind"] in ("RayCluster", "RayJob"):
            assert kuberay_validator(d) == [], d["metadata"]["name"]


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_each_ray_head_has_its_network_policy(renderings, stack):
    r = renderings[stack]
    policies = [p for p in _kind(r, "NetworkPolicy")
                if p["spec"]["podSelector"]["matchLabels"].get(kube.RAY_NODE_TYPE_LABEL) == "head"]
    heads = _kind(r, "RayCluster") + [d for d in _kind(r, "RayJob") if "rayClusterSpec" in d["spec"]]
    assert heads and len(policies) == len(heads)
    ports = {p["port"] for pol in policies for rule in pol["spec"]["ingress"] for p in rule.get("ports", [])}
    assert ports == {limits.RAY_HEAD_PORTS["dashboard"], r.spec.ray.metrics_export_port}
    for head in heads:
        labels = _head_labels(head)
        mine = [p for p in policies
                if all(labels.get(k) == v for k, v in p["spec"]["podSelector"]["matchLabels"].items())]
        assert len(mine) == 1, head["metadata"]["name"]
        pol = mine[0]
        assert pol["spec"]["policyTypes"] == ["Ingress"]
        rules = pol["spec"]["ingress"]
        # Only the cluster's own Ray pods reach every port; everything else names a source and a port.
        same_cluster = rules[0]["from"][0]["podSelector"]["matchLabels"]
        assert set(same_cluster) <= set(labels) and kube.RAY_NODE_TYPE_LABEL not in same_cluster
        assert "ports" not in rules[0]
        namespaces = {x["from"][0]["namespaceSelector"]["matchLabels"][security.NAMESPACE_NAME_LABEL]: x["ports"]
                      for x in rules if "namespaceSelector" in x["from"][0]}
        assert namespaces == {"kube-system": [{"protocol": "TCP", "port": 8265}],
                              "gmp-system": [{"protocol": "TCP", "port": r.spec.ray.metrics_export_port}]}
        assert all(x.get("from") for x in rules)


def _worker_groups(doc: dict) -> list[dict[str, str]]:
    """Each worker group's pod labels as KubeRay sets them (node-type worker; ray.io/cluster on a RayCluster's)."""
    spec = doc["spec"].get("rayClusterSpec", doc["spec"])
    out = []
    for g in spec["workerGroupSpecs"]:
        labels = dict(g["template"].get("metadata", {}).get("labels", {}))
        labels[kube.RAY_NODE_TYPE_LABEL] = "worker"
        if doc["kind"] == "RayCluster":
            labels[kube.RAY_CLUSTER_LABEL] = doc["metadata"]["name"]
        out.append(labels)
    return out


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_a_ray_worker_is_reached_only_by_its_own_clusters_pods_and_the_metrics_collectors(renderings, stack):
    """Without a Ray token (dev), whoever reaches a worker's raylet runs tasks as the trainer's account: each
    worker group is selected by exactly one policy, which admits its own cluster's Ray pods (the head and the
    job's workers, every port: Ray picks the raylet, object manager and worker ports) and gmp-system on the
    metrics port only. A pod of another RayCluster in the namespace is not admitted."""
    r = renderings[stack]
    policies = [p for p in _kind(r, "NetworkPolicy")
                if p["spec"]["podSelector"]["matchLabels"].get(kube.RAY_NODE_TYPE_LABEL) == "worker"]
    clusters = _kind(r, "RayCluster") + [d for d in _kind(r, "RayJob") if "rayClusterSpec" in d["spec"]]
    assert clusters and len(policies) == len(clusters)
    for c in clusters:
        head = _head_labels(c)
        for worker in _worker_groups(c):
            [pol] = [p for p in policies if _selects(p["spec"]["podSelector"]["matchLabels"], worker)]
            assert pol["spec"]["policyTypes"] == ["Ingress"]
            own, metrics = pol["spec"]["ingress"]
            pods = own["from"][0]["podSelector"]["matchLabels"]
            assert "ports" not in own and len(own["from"]) == 1
            assert _selects(pods, head) and _selects(pods, worker)  # its head and its own workers
            for other in clusters:  # no other RayCluster's pod
                if other is not c:
                    assert not _selects(pods, _head_labels(other))
                    assert not any(_selects(pods, w) for w in _worker_groups(other))
            assert metrics == {"from": [{"namespaceSelector": {"matchLabels": {
                security.NAMESPACE_NAME_LABEL: security.GMP_NAMESPACE}}}],
                "ports": [{"protocol": "TCP", "port": r.spec.ray.metrics_export_port}]}


def test_shared_cluster_admits_the_submitters_of_its_jobs_on_the_dashboard_port(renderings):
    r = renderings["prod-shared"]
    [pol] = [p for p in _kind(r, "NetworkPolicy")
             if p["spec"]["podSelector"]["matchLabels"].get(kube.RAY_CLUSTER_LABEL) == r.spec.ray.cluster_name
             and p["spec"]["podSelector"]["matchLabels"][kube.RAY_NODE_TYPE_LABEL] == "head"]
    submitters = [x for x in pol["spec"]["ingress"] if "podSelector" in x["from"][0]
                  and "matchExpressions" in x["from"][0]["podSelector"]]
    shared_jobs = sorted(j.name for j in manifests.declared_jobs(r.spec) if j.cluster == "shared")
    assert submitters == [{"from": [{"podSelector": {"matchExpressions": [
        {"key": "batch.kubernetes.io/job-name", "operator": "In", "values": shared_jobs}]}}],
        "ports": [{"protocol": "TCP", "port": 8265}]}]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_ray_pods_mount_no_api_token_and_nothing_is_privileged(renderings, stack):
    for d in _kind(renderings[stack], "RayCluster") + _kind(renderings[stack], "RayJob"):
        spec = d["spec"].get("rayClusterSpec", d["spec"] if d["kind"] == "RayCluster" else None)
        pods = [d["spec"]["submitterPodTemplate"]["spec"]] if d["kind"] == "RayJob" else []
        if spec:
            pods += [spec["headGroupSpec"]["template"]["spec"]]
            pods += [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
        for pod in pods:
            assert pod["automountServiceAccountToken"] is False
            for c in pod["containers"]:
                assert c.get("securityContext", {}).get("privileged") is not True
    [ksa] = _kind(renderings[stack], "ServiceAccount")
    assert ksa["automountServiceAccountToken"] is False


def test_drill_rbac_grants_exactly_what_the_drill_calls(renderings):
    r = renderings["prod"]
    user = f"ci-drill-prod@{r.spec.ci_project}.iam.gserviceaccount.com"  # the stack's own (bootstrap/)
    [role], [binding] = _kind(r, "Role"), _kind(r, "RoleBinding")
    [crole], [cbinding] = _kind(r, "ClusterRole"), _kind(r, "ClusterRoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == r.spec.storage.namespace
    for b, ref in ((binding, role), (cbinding, crole)):
        assert b["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]
        assert b["roleRef"]["name"] == ref["metadata"]["name"] and b["roleRef"]["kind"] == ref["kind"]

    def grants(rules):
        return {(g, res, v) for x in rules for g in x["apiGroups"] for res in x["resources"] for v in x["verbs"]}

    # The Kubernetes calls drills/cluster.Kube makes (client method -> group, resource, verb).
    namespaced = {
        "get_namespaced_custom_object": (drill.RAY_GROUP, drill.RAYJOBS, "get"),
        "list_namespaced_pod": ("", "pods", "list"),
        "delete_namespaced_pod": ("", "pods", "delete"),
        "read_namespaced_service": ("", "services", "get"),
        "connect_get_namespaced_service_proxy_with_path": ("", "services/proxy", "get"),
        "read_namespaced_pod_log": ("", "pods/log", "get"),
    }
    cluster_wide = {"read_node": ("", "nodes", "get"), "delete_node": ("", "nodes", "delete")}
    source = inspect.getsource(drill.Kube)
    assert all(m in source for m in (*namespaced, *cluster_wide))
    assert grants(role["rules"]) == set(namespaced.values())
    assert grants(crole["rules"]) == set(cluster_wide.values())
    assert "secret" not in source.lower() and not any("secrets" in x["resources"] for x in role["rules"])


def test_drill_admission_policy_objects(renderings):
    """The ValidatingAdmissionPolicy and its binding (Kubernetes 1.35 schema, strict) and their match on the drill
    user and DELETE of pods and nodes; what the CEL allows is evaluated in the test below."""
    r = renderings["prod"]
    [vap], [binding] = _kind(r, "ValidatingAdmissionPolicy"), _kind(r, "ValidatingAdmissionPolicyBinding")
    for d in (vap, binding):
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    assert binding["spec"] == {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"]}
    spec = vap["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods", "nodes"]}]
    # The drill plan picks among the same pools the policy admits (nodes are checked by CEL below).
    pools = sorted({pool for s in r.spec.slices for _, pool in s.pools})
    assert pools == sorted(drill.plan(r.spec, "llama3-8b-elastic").node_pools)


def _kuberay_pod(node_type: str, cluster: str, group: str, template: dict) -> dict:
    """A pod as KubeRay v1.6 labels it: ``labelPod`` (ray-operator/controllers/ray/common/pod.go:776-800) sets
    ``ray.io/node``, ``ray.io/cluster``, ``ray.io/node-type``, ``ray.io/group``, ``ray.io/identifier``,
    ``app.kubernetes.io/name``/``created-by``, then copies the template's labels except node-type, group and
    cluster, which are not overridable."""
    labels = {"ray.io/node": "yes", kube.RAY_CLUSTER_LABEL: cluster, kube.RAY_NODE_TYPE_LABEL: node_type,
              "ray.io/group": group, "ray.io/identifier": f"{cluster}-{node_type}",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    for k, v in template.get("metadata", {}).get("labels", {}).items():
        if k not in (kube.RAY_NODE_TYPE_LABEL, "ray.io/group", kube.RAY_CLUSTER_LABEL):
            labels[k] = v
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{cluster}-{group}-x1", "namespace": "maxtext",
                                                          "labels": labels}}


def _ray_pods(docs: list[dict]) -> list[tuple[str, dict]]:
    """(head|worker, pod) for every Ray pod KubeRay would make from the rendered RayJobs and RayClusters; a
    RayJob's cluster is named ``<job>-<suffix>`` by KubeRay."""
    out = []
    for d in docs:
        if d["kind"] not in ("RayJob", "RayCluster") or (d["kind"] == "RayJob" and "rayClusterSpec" not in d["spec"]):
            continue  # a job on the shared cluster (clusterSelector) makes no pods of its own
        spec = d["spec"].get("rayClusterSpec", d["spec"])
        cluster = d["metadata"]["name"] + ("-k7x2q" if d["kind"] == "RayJob" else "")
        out.append(("head", _kuberay_pod("head", cluster, "headgroup", spec["headGroupSpec"]["template"])))
        for g in spec.get("workerGroupSpecs", []):
            out.append(("worker", _kuberay_pod("worker", cluster, g["groupName"], g["template"])))
    return out


def _node(pool: str | None) -> dict:
    labels = {"kubernetes.io/os": "linux"} | ({"cloud.google.com/gke-nodepool": pool} if pool else {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gke-{pool or 'x'}-abcd", "labels": labels}}


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_drill_deletes_are_limited_to_the_stacks_worker_pods_and_tpu_nodes(renderings, stack):
    """The policy's CEL evaluated (cel-python, ``tests/kube_cel.py``) on DELETE admission requests shaped as the
    API server builds them. A ValidatingAdmissionPolicy's variables, per the Kubernetes API reference
    (admissionregistration.k8s.io/v1 ``Validation.expression``): "'object' - The object from the incoming request.
    The value is null for DELETE requests. 'oldObject' - The existing object. The value is null for CREATE
    requests. 'request' - Attributes of the API request". The drill user (the RBAC ``User`` subject: GKE names a
    Google service account by its email) may delete the Ray workers of the stack's jobs and the nodes of its TPU
    slice pools; not a head, another job's worker, an unlabelled pod, the system pool's nodes; other users are not
    matched; a CREATE is not matched."""
    r = renderings[stack]
    docs = _docs(r)
    [vap], [binding] = _kind(r, "ValidatingAdmissionPolicy"), _kind(r, "ValidatingAdmissionPolicyBinding")
    (user,) = {s["name"] for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
               and d["metadata"]["name"] == vap["metadata"]["name"] for s in d["subjects"] if s["kind"] == "User"}

    def delete(obj: dict, who: str = user) -> tuple[bool, str]:
        resource = "nodes" if obj["kind"] == "Node" else "pods"
        req = kube_cel.admission_request("DELETE", resource, obj["metadata"]["name"], who,
                                         namespace=obj["metadata"].get("namespace", ""), kind=obj["kind"])
        return kube_cel.admit(vap, binding, req, None, obj)

    pods = _ray_pods(r.manifests)
    assert {t for t, _ in pods} == {"head", "worker"}
    for node_type, pod in pods:
        allowed, why = delete(pod)
        assert allowed == (node_type == "worker"), (pod["metadata"]["labels"], why)
        assert delete(pod, "someone@example.com") == (True, "not matched: drill-user")
    (_, worker) = next(p for p in pods if p[0] == "worker")
    stranger = copy.deepcopy(worker)
    stranger["metadata"]["labels"] = {k: v for k, v in worker["metadata"]["labels"].items()
                                      if k not in (kube.JOB_LABEL,)} | {kube.RAY_CLUSTER_LABEL: "other-cluster"}
    assert delete(stranger)[0] is False
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "maxtext"}}
    assert delete(bare) == (False, vap["spec"]["validations"][0]["message"])
    # Nodes: each TPU pool the program declares (the provider's node pools with a TPU machine), none else.
    pools = {p.inputs["name"]: p.inputs["nodeConfig"]["machineType"]
             for p in r.by_type("gcp:container/nodePool:NodePool")}
    tpu = [n for n, m in pools.items() if m.startswith("ct")]
    assert tpu and len(tpu) < len(pools)
    for name, machine in pools.items():
        assert delete(_node(name))[0] == machine.startswith("ct"), name
    assert delete(_node(None)) == (False, vap["spec"]["validations"][1]["message"])
    # A CREATE (object set, oldObject null) by the drill user is outside the policy's match.
    req = kube_cel.admission_request("CREATE", "pods", "p", user, namespace="maxtext", kind="Pod")
    assert kube_cel.admit(vap, binding, req, worker, None) == (True, "not matched: resource rules")


# --------------------------------------------------------------------------- policies


def _resources(rendering) -> list[Res]:
    return copy.deepcopy(offline.resources_of(rendering))


def _messages(resources, env: str, rule: str) -> list[str]:
    return [v.message for v in offline.evaluate_resources(resources, env) if v.rule == rule]


def _violations(resources, env: str, rule: str):
    return [v for v in offline.evaluate_resources(resources, env) if v.rule == rule]


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_renderings_pass_every_in_cluster_rule(renderings, stack):
    env = renderings[stack].spec.environment
    found = offline.evaluate_resources(_resources(renderings[stack]), env)
    rules = {"ray-head-network-policy", "ray-worker-network-policy", "ray-pods-no-token-automount", "ray-auth-version",
             "privileged-only-for-tpu"}
    assert [v for v in found if v.rule in rules] == []


@pytest.mark.parametrize("stack", ["prod", "prod-shared"])
def test_prod_without_a_head_network_policy_is_refused(renderings, stack):
    rs = [r for r in _resources(renderings[stack]) if r.type != NETPOL]
    [v, *more] = _violations(rs, "prod", "ray-head-network-policy")
    assert v.mandatory and "no NetworkPolicy in namespace maxtext restricts ingress to its head" in v.message
    assert len(more) + 1 == len([r for r in rs if r.type == RAY_CLUSTER
                                 or (r.type == RAY_JOB and "rayClusterSpec" in r.props["spec"])])
    assert registry.rule("ray-head-network-policy").level("dev") == "advisory"


def test_a_policy_open_to_every_source_or_missing_the_head_does_not_count(renderings):
    rs = _resources(renderings["prod-shared"])
    pol = next(r for r in rs if r.type == NETPOL
               and r.props["spec"]["podSelector"]["matchLabels"].get(kube.RAY_CLUSTER_LABEL))
    pol.props["spec"]["ingress"].append({"ports": [{"port": 6379}]})  # no "from": any pod, any namespace
    assert _messages(rs, "prod", "ray-head-network-policy") == [
        "RayCluster maxtext-tpu-cluster: no NetworkPolicy in namespace maxtext restricts ingress to its head "
        "(GCS, client and dashboard ports open to every pod)"]
    rs = _resources(renderings["prod-shared"])
    pol = next(r for r in rs if r.type == NETPOL
               and r.props["spec"]["podSelector"]["matchLabels"].get(kube.RAY_CLUSTER_LABEL))
    pol.props["spec"]["podSelector"]["matchLabels"][kube.RAY_CLUSTER_LABEL] = "another-cluster"
    assert len(_messages(rs, "prod", "ray-head-network-policy")) == 1


def test_dev_without_a_head_network_policy_is_a_warning(renderings):
    rs = [r for r in _resources(renderings["dev"]) if r.type != NETPOL]
    [v, *_] = _violations(rs, "dev", "ray-head-network-policy")
    assert not v.mandatory  # the same rule, a warning in dev


@pytest.mark.parametrize("stack", ["prod", "dev", "prod-shared"])
def test_a_worker_group_without_its_network_policy_is_refused(renderings, stack):
    """The worker-ingress NetworkPolicy removed (the head's kept): a mandatory violation per worker group, in dev
    too; a policy that selects another cluster's workers, or opens a rule to every source, does not count."""
    env = renderings[stack].spec.environment
    rs = [r for r in _resources(renderings[stack])
          if not (r.type == NETPOL and r.props["metadata"]["name"].endswith("-worker-ingress"))]
    found = _violations(rs, env, "ray-worker-network-policy")
    groups = sum(len(spec.get("workerGroupSpecs") or []) for r in rs if r.type in (RAY_CLUSTER, RAY_JOB)
                 for spec in [r.props["spec"].get("rayClusterSpec") or (r.props["spec"] if r.type == RAY_CLUSTER
                                                                       else {})])
    assert found and len(found) == groups and all(v.mandatory for v in found), found
    assert "restricts ingress to its worker group" in found[0].message
    assert _violations(rs, env, "ray-head-network-policy") == []
    for widen in ("selector", "open"):
        rs = _resources(renderings[stack])
        for pol in (r for r in rs if r.type == NETPOL and r.props["metadata"]["name"].endswith("-worker-ingress")):
            if widen == "selector":
                pol.props["spec"]["podSelector"]["matchLabels"][kube.RAY_NODE_TYPE_LABEL] = "head"
            else:
                pol.props["spec"]["ingress"].append({"ports": [{"port": 10001}]})  # no "from": every pod
        assert len(_violations(rs, env, "ray-worker-network-policy")) == groups, widen


# Peers that select every pod, every namespace or every address
# (https://kubernetes.io/docs/concepts/services-networking/network-policies/: an empty podSelector "selects all pods
# in the namespace", an empty namespaceSelector "selects all namespaces"; ipBlock 0.0.0.0/0 every address), and
# selectors that keep the worker's labels but no longer name its cluster.
OPEN_PEERS = {
    "every namespace": {"namespaceSelector": {}},
    "every pod of the namespace": {"podSelector": {}},
    "every pod of every namespace": {"namespaceSelector": {}, "podSelector": {}},
    "every Ray pod of the namespace": {"podSelector": {"matchExpressions": [
        {"key": kube.RAY_CLUSTER_LABEL, "operator": "Exists"}]}},
    "every pod but one namespace's": {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["x"]}]}},
    "every address": {"ipBlock": {"cidr": "0.0.0.0/0"}},
    "every pod of the namespace, by its name": {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "maxtext"}}},
}


@pytest.mark.parametrize("peer", list(OPEN_PEERS))
@pytest.mark.parametrize(("rule", "suffix"), [("ray-worker-network-policy", "-worker-ingress"),
                                              ("ray-head-network-policy", "-head-ingress")])
def test_a_policy_whose_peer_selects_every_pod_does_not_count(renderings, peer, rule, suffix):
    """A rule whose source is every pod (or namespace, or address) has a "from" but restricts nothing."""
    rs = _resources(renderings["prod-shared"])
    pols = [r for r in rs if r.type == NETPOL and r.props["metadata"]["name"].endswith(suffix)]
    assert pols
    for pol in pols:
        pol.props["spec"]["ingress"].append({"from": [copy.deepcopy(OPEN_PEERS[peer])]})
    assert _violations(rs, "prod", rule), peer


@pytest.mark.parametrize(("rule", "suffix"), [("ray-worker-network-policy", "-worker-ingress"),
                                              ("ray-head-network-policy", "-head-ingress")])
def test_a_second_policy_opening_the_ray_pods_is_refused(renderings, rule, suffix):
    """NetworkPolicies are additive ("the connections allowed ... is the union of what the applicable policies
    allow", kubernetes.io/docs/concepts/services-networking/network-policies/): the stack's own restricting policy
    kept, a second one in the namespace that selects every pod and allows all ingress opens the Ray pods again."""
    rs = _resources(renderings["prod-shared"])
    pol = next(r for r in rs if r.type == NETPOL and r.props["metadata"]["name"].endswith(suffix))
    allow_all = copy.deepcopy(pol)
    allow_all.props["metadata"]["name"] = "allow-all"
    allow_all.props["spec"] = {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}
    rs.append(allow_all)
    assert _violations(rs, "prod", rule)


def test_token_automount_on_a_ray_pod_is_refused_in_prod(renderings):
    rs = _resources(renderings["prod"])
    job = next(r for r in rs if r.type == RAY_JOB)
    job.props["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"].pop("automountServiceAccountToken")
    [v] = _violations(rs, "prod", "ray-pods-no-token-automount")
    assert v.mandatory and "automountServiceAccountToken is not false" in v.message
    assert [x.mandatory for x in _violations(rs, "dev", "ray-pods-no-token-automount")] == [False]


def test_privileged_tpu_container_needs_an_allow_list_entry(renderings):
    rs = _resources(renderings["prod"])
    job = next(r for r in rs if r.type == RAY_JOB)
    worker = job.props["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    worker["securityContext"] = {"privileged": True}
    [msg] = _messages(rs, "prod", "privileged-only-for-tpu")
    assert "container ray-worker is privileged: GKE >= 1.28 gives TPU containers their devices" in msg
    allowed = {"privileged-only-for-tpu": {"privilegedAllowed": {"ray-worker": "GKE 1.27 TPU nodes"}}}
    assert [v for v in offline.evaluate_resources(rs, "prod", allowed) if v.rule == "privileged-only-for-tpu"] == []


# --------------------------------------------------------------------------- Ray token auth


def _config(stack: str, **ray) -> dict[str, str]:
    config = engine.stack_config(stack)
    key = f"{stack_spec.PROJECT}:ray"
    return {**config, key: json.dumps({**json.loads(config.get(key, "{}")), **ray})}


def test_token_auth_renders_kuberay_auth_options(kuberay_validator):
    r = rendered("prod")  # prod sets ray.auth: token
    jobs = [d for d in _kind(r, "RayJob") if "rayClusterSpec" in d["spec"]]
    assert jobs
    for d in jobs:
        assert d["spec"]["rayClusterSpec"]["authOptions"] == {"mode": "token"}
        assert kuberay_validator(d) == []
    assert not [v for v in offline.evaluate_resources(_resources(r), "prod") if v.rule == "ray-auth-version"]
    off = engine.render("prod", _config("prod", auth="disabled"))
    assert all("authOptions" not in d["spec"].get("rayClusterSpec", {}) for d in _kind(off, "RayJob"))


@pytest.mark.parametrize("ray,expected", [
    ({"auth": "token", "kuberayVersion": "1.5.0"}, "KubeRay 1.5.0 (ray.kuberayVersion) has no authOptions"),
    ({"auth": "token", "image": "rayproject/ray:2.51.0-py312-tpu"}, "token auth needs Ray >= 2.52.0"),
    ({"auth": "tokens"}, "ray.auth"),
])
def test_token_auth_the_operator_or_ray_would_drop_is_refused(ray, expected):
    with pytest.raises(SpecError) as err:
        stack_spec.load("prod", _config("prod", **ray))
    assert expected in str(err.value)


def test_auth_version_rule_refuses_a_token_cluster_below_ray_2_52(renderings):
    rs = _resources(renderings["prod"])
    job = next(r for r in rs if r.type == RAY_JOB)
    job.props["spec"]["rayClusterSpec"].update(authOptions={"mode": "token"}, rayVersion="2.50.0")
    [v] = _violations(rs, "prod", "ray-auth-version")
    assert v.mandatory and "KubeRay refuses it below 2.52.0" in v.message


# --------------------------------------------------------------------------- the workload namespace (issue 17, item 4)


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_stack_creates_its_workload_namespace_with_pod_security_labels(renderings, stack):
    r = renderings[stack]
    ns = r.spec.storage.namespace
    assert ns == "maxtext" != "default"
    namespaces = [res for res in r.by_type("kubernetes:core/v1:Namespace") if res.inputs["metadata"]["name"] == ns]
    assert len(namespaces) == 1
    (namespace,) = namespaces
    doc = engine.kubernetes_manifest(namespace)
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    labels = doc["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/audit"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.35"
    # Everything namespaced lives there and waits for it (the RayJobs through the RayCluster's needs, or directly).
    namespaced = [res for res in r.resources if engine.is_kubernetes_object(res)
                  and res.inputs.get("metadata", {}).get("namespace") not in (None, "kueue-system")
                  and "KueueInstall" not in (res.parent or "")]  # Kueue's reader binding sits in kube-system
    kinds = {res.inputs["kind"] if "kind" in res.inputs else res.type.rsplit(":", 1)[1] for res in namespaced}
    assert {"ServiceAccount", "NetworkPolicy", "Role", "RoleBinding", "LocalQueue", "ConfigMap",
            "PodMonitoring"} <= kinds, kinds
    for res in namespaced:
        assert res.inputs["metadata"]["namespace"] == ns, res.name
        assert namespace.urn in res.dependencies, res.name
    # The ClusterQueue admits only the workload namespace; the bucket grant names its KSA there.
    (cq,) = [d for d in _docs(r) if d["kind"] == "ClusterQueue"]
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": ns}}
    (policy,) = r.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    (member,) = policy_bindings(policy)["roles/storage.objectUser"]
    assert member.endswith(f"/subject/ns/{ns}/sa/{r.spec.storage.service_account}")
    assert r.outputs["namespace"] == ns


def test_the_ray_pods_meet_the_enforced_baseline_level(renderings):
    """What Pod Security's baseline refuses (kubernetes.io/docs/concepts/security/pod-security-standards):
    privileged containers, host namespaces, hostPath volumes, host ports, added capabilities outside its list."""
    allowed_caps = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
    pods = 0
    for stack in ("prod", "dev"):
        for doc in _docs(renderings[stack]):
            for pod in _pod_specs(doc):
                pods += 1
                assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), doc["metadata"]["name"]
                assert not any("hostPath" in v for v in pod.get("volumes", []))
                for c in pod.get("containers", []) + pod.get("initContainers", []):
                    sc = c.get("securityContext", {})
                    assert sc.get("privileged") is not True
                    assert set(sc.get("capabilities", {}).get("add", [])) <= allowed_caps
                    assert not any(p.get("hostPort") for p in c.get("ports", []))
    assert pods >= 4


def _pod_specs(x) -> list[dict]:
    out = []
    if isinstance(x, dict):
        if "containers" in x and isinstance(x["containers"], list):
            out.append(x)
        for v in x.values():
            out += _pod_specs(v)
    elif isinstance(x, list):
        for v in x:
            out += _pod_specs(v)
    return out


def test_prod_refuses_the_default_namespace_and_every_stack_refuses_a_system_one():
    cfg = engine.stack_config("prod")
    storage = json.loads(cfg[f"{stack_spec.PROJECT}:storage"])
    with pytest.raises(SpecError) as e:
        stack_spec.load_stack("prod", config={**cfg, f"{stack_spec.PROJECT}:storage":
                                              json.dumps({**storage, "namespace": "default"})})
    text = str(e.value)
    assert "Pulumi.prod.yaml" in text and 'tpu-multislice:storage.namespace = "default"' in text
    assert "namespace of their own" in text
    for ns in ("kube-system", "kueue-system", "gmp-system"):
        with pytest.raises(SpecError) as e:
            stack_spec.load_stack("dev", config={**engine.stack_config("dev"), f"{stack_spec.PROJECT}:storage":
                                                 json.dumps({**storage, "namespace": ns})})
        assert "belongs to Kubernetes, GKE or Kueue" in str(e.value), ns


def test_dev_on_default_creates_no_namespace_and_says_so():
    cfg = engine.stack_config("dev")
    storage = json.loads(cfg[f"{stack_spec.PROJECT}:storage"])
    r = engine.render("dev", {**cfg, f"{stack_spec.PROJECT}:storage": json.dumps({**storage, "namespace": "default"})})
    assert [n.inputs["metadata"]["name"] for n in r.by_type("kubernetes:core/v1:Namespace")] == ["kueue-system"]
    assert security.workload_namespace(r.spec) is None
