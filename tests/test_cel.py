"""Every CEL rule (``x-kubernetes-validations``) of every vendored CRD whose kind a stack renders, evaluated with
cel-python (``tests/kube_cel.py``) against every rendered object of that kind, as the API server runs them on a
create and on a re-apply of the same object (transition rules, ``oldSelf`` = the object); mutated objects a rule
must refuse are refused. The CRDs are the vendored upstream ones (``vendor/README.md``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from typing import Any

import kube_cel
import pytest
import yaml
from conftest import VENDOR, with_fallbacks
from conftest import rendered as render_stack

from offline import engine

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
STACKS = ("prod", "dev", "team-eu", "multi", "dws")


@cache
def crds() -> dict[str, dict]:
    """kind -> the vendored CRD document (KubeRay, Kueue, GMP)."""
    out = {}
    for path in sorted(VENDOR.glob("*/*.yaml")):
        for doc in yaml.load_all(path.read_text(), Loader=LOADER):  # noqa: S506 (a multi-document setup may sit beside)
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out[doc["spec"]["names"]["kind"]] = doc
    return out


@cache
def schema(kind: str, version: str) -> dict:
    (served,) = [v for v in crds()[kind]["spec"]["versions"] if v["name"] == version and v.get("served")]
    return served["schema"]["openAPIV3Schema"]


def _dws_config() -> dict[str, str]:
    """prod on flex-start with queued provisioning (DWS): the render that has a ProvisioningRequestConfig and its
    AdmissionCheck in a single-region stack."""
    return with_fallbacks(engine.stack_config("prod"), [{"type": "flex-start", "queuedProvisioning": True}])


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    """stack -> every rendered object whose kind has a vendored CRD."""
    out = {}
    for stack in STACKS:
        r = render_stack("prod", _dws_config()) if stack == "dws" else render_stack(stack)
        out[stack] = [_as_stored(m, r.manifests) for m in r.manifests if m["kind"] in crds()]
    return out


MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def _as_stored(doc: dict, docs: list[dict]) -> dict:
    """A rendered object as the API server stores it after Kueue's mutating webhook: a job queued to a LocalQueue
    whose ClusterQueue has a MultiKueue admission check gets ``spec.managedBy: kueue.x-k8s.io/multikueue``
    (kueue v0.19.2 ``pkg/controller/jobframework/defaults.go`` ``ApplyDefaultForManagedBy``:
    ``if admissionCheck.Controller == kueue.MultiKueueControllerName { managedJob.SetManagedBy(...) }``).
    The chain is read from the rendered LocalQueue, ClusterQueue and AdmissionCheck."""
    queue = doc["metadata"].get("labels", {}).get("kueue.x-k8s.io/queue-name")
    if doc["kind"] != "RayJob" or not queue or "managedBy" in doc["spec"]:
        return doc
    ns = doc["metadata"].get("namespace")
    byname = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    lq = next((d for d in docs if d["kind"] == "LocalQueue" and d["metadata"]["name"] == queue
               and d["metadata"].get("namespace") == ns), None)
    cq = byname.get(("ClusterQueue", lq["spec"]["clusterQueue"])) if lq else None
    checks = [c if isinstance(c, str) else c["name"] for c in (cq or {}).get("spec", {}).get("admissionChecks", [])]
    checks += [c["name"] for c in (cq or {}).get("spec", {}).get("admissionChecksStrategy", {})
               .get("admissionChecks", [])]
    if any(byname.get(("AdmissionCheck", c), {}).get("spec", {}).get("controllerName") == MULTIKUEUE
           for c in checks):
        doc = copy.deepcopy(doc)
        doc["spec"]["managedBy"] = MULTIKUEUE
    return doc


def _version(doc: dict) -> str:
    return doc["apiVersion"].rpartition("/")[2]


# Rules that no rendered object reaches, each with why: the API server runs a rule only on a node the object has
# (and a transition rule only on an update). Each is still run below on a mutated object that reaches it, where
# its refusal matters to the project; the test fails when a rule is reached but listed, or not reached and not
# listed. Keys: (kind, schema path, rule).
NOT_REACHED_REASON = {
    "PodMonitoring:spec/endpoints/[]/metricRelabeling/[]": "no endpoint relabels metrics",
    "PodMonitoring:spec/endpoints/[]/metricRelabeling/[]/targetLabel": "no endpoint relabels metrics",
    "PodMonitoring:spec/endpoints/[]/oauth2/proxyUrl": "no endpoint sets oauth2",
    "PodMonitoring:spec/endpoints/[]/oauth2/tlsConfig": "no endpoint sets oauth2",
    "PodMonitoring:spec/endpoints/[]/proxyUrl": "no endpoint scrapes through a proxy",
    "RayCluster:spec/gcsFaultToleranceOptions/backend": "no RayCluster sets GCS fault tolerance",
    "RayCluster:spec/managedBy": "the only RayCluster (dev's shared one) is not queued through MultiKueue",
    "RayJob:spec/rayClusterSpec/gcsFaultToleranceOptions/backend": "no RayJob sets GCS fault tolerance",
    "RayJob:spec/deletionStrategy": "no RayJob sets a deletionStrategy (ttlSecondsAfterFinished and "
                                    "shutdownAfterJobFinishes instead)",
    "RayJob:spec/deletionStrategy/deletionRules/[]/condition": "no RayJob sets a deletionStrategy",
    "RayJob:spec/rayClusterSpec/managedBy": "no RayJob's cluster spec carries managedBy (KubeRay sets it on the "
                                            "RayCluster it creates)",
    "ResourceFlavor:spec/nodeTaints": "no flavor declares node taints",
    "ResourceFlavor:spec/tolerations": "no flavor declares tolerations (the TPU taint is tolerated in the pods)",
}


def _key(kind: str, rule: kube_cel.Rule) -> str:
    return f"{kind}:{rule.path}"


def test_every_cel_rule_of_every_rendered_kind_is_evaluated_and_holds(rendered):
    """Every rendered object of a CRD kind passes every rule its version's schema runs on it, on create and on a
    re-apply (the same object as ``oldSelf``); every rule of a rendered (kind, version) is reached by some
    object or listed in :data:`NOT_REACHED_REASON`; the rules of served versions no stack renders are counted
    apart (the API server validates an object against its own version's schema)."""
    evaluated: dict[tuple[str, str], set[kube_cel.Rule]] = {}
    failures = []
    for stack, docs in rendered.items():
        for doc in docs:
            s = schema(doc["kind"], _version(doc))
            for old in (None, doc):
                outcomes = kube_cel.evaluate(s, doc, old)
                failures += [f"{stack} {doc['kind']}/{doc['metadata']['name']}: {f}"
                             for f in kube_cel.failures(outcomes)]
                evaluated.setdefault((doc["kind"], _version(doc)), set()).update(o.rule for o in outcomes)
    assert failures == []
    kinds = {k for k, _ in evaluated}
    assert kinds >= {"RayJob", "RayCluster", "ClusterQueue", "LocalQueue", "ResourceFlavor", "AdmissionCheck",
                     "MultiKueueCluster", "MultiKueueConfig", "PodMonitoring", "ProvisioningRequestConfig"}
    every, other_versions = {}, 0
    for kind in kinds:
        for v in crds()[kind]["spec"]["versions"]:
            rules = [r for r, _ in kube_cel.rules(v["schema"]["openAPIV3Schema"])]
            if (kind, v["name"]) in evaluated:
                every[(kind, v["name"])] = rules
            elif v.get("served"):
                other_versions += len(rules)
    not_reached = {(_key(kind, r), r.rule) for (kind, _), rules in every.items() for r in rules
                   if r not in evaluated[(kind, _)]}
    assert {k for k, _ in not_reached} == set(NOT_REACHED_REASON), "reached or not reached, say which"
    # Each rule no rendered object reaches is refused by at least one mutation below.
    assert _refused_by_mutations(rendered) >= {(k.partition(":")[0], rule) for k, rule in not_reached}
    total = sum(map(len, every.values()))
    print(f"CEL rules of rendered (kind, version): {total}; run on rendered objects: {total - len(not_reached)}; "
          f"reached only by mutations: {len(not_reached)}; served versions no stack renders: {other_versions}")


def test_every_rule_compiles_in_the_evaluator():
    """Each rule of each vendored CRD parses (cel-python's CEL grammar), those of kinds not rendered included."""
    for doc in crds().values():
        for v in doc["spec"]["versions"]:
            for rule, _ in kube_cel.rules(v["schema"]["openAPIV3Schema"]):
                kube_cel.program(rule.rule)


# --------------------------------------------------------------------------- refusals


def _first(docs: list[dict], kind: str) -> dict:
    return copy.deepcopy(next(d for d in docs if d["kind"] == kind))


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _pm_endpoint(**fields: Any) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        doc["spec"]["endpoints"][0].update(fields)
    return mutate


def _cq_flavor_missing_resource(doc: dict) -> None:
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop()


def _cq_borrowing_without_cohort(doc: dict) -> None:
    doc["spec"].pop("cohortName", None)
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"


def _duplicate_cluster(doc: dict) -> None:
    doc["spec"]["clusters"].append(doc["spec"]["clusters"][0])


def _mk_both_sources(doc: dict) -> None:
    doc["spec"]["clusterSource"]["clusterProfileRef"] = {"name": "x"}


# (stack, kind, what, mutation, a word of the rule's message or text that refuses it)
CREATE_REFUSALS = [
    ("multi", "RayJob", "managedBy outside KubeRay's two", _set("spec.managedBy", "example.com/other"),
     "self in ['ray.io/kuberay-operator', 'kueue.x-k8s.io/multikueue']"),
    ("prod", "RayJob", "deletionStrategy with onSuccess only", _set("spec.deletionStrategy",
                                                                   {"onSuccess": {"policy": "DeleteCluster"}}),
     "has(self.onSuccess) && has(self.onFailure)"),
    ("prod", "RayJob", "deletionStrategy with onSuccess and rules both", _set("spec.deletionStrategy", {
        "onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"},
        "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]}),
     "!((has(self.onSuccess)"),
    ("prod", "RayJob", "a deletionRule with both condition keys", _set("spec.deletionStrategy", {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Failed"}}]}),
     "!(has(self.jobStatus) && has(self.jobDeploymentStatus))"),
    ("prod", "RayJob", "a cluster spec managedBy outside KubeRay's two",
     _set("spec.rayClusterSpec.managedBy", "x"), "self in ["),
    ("prod", "RayJob", "deletionRule with no condition key", _set("spec.deletionStrategy", {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {}}]}), "has(self.jobStatus) || has(self.jobDeploymentStatus)"),
    ("dev", "RayCluster", "managedBy outside KubeRay's two", _set("spec.managedBy", "x"), "self in ["),
    ("prod", "ClusterQueue", "a flavor without one of the covered resources", _cq_flavor_missing_resource,
     "size(x.resources) == size(self.coveredResources)"),
    ("prod", "ClusterQueue", "a borrowing limit without a cohort", _cq_borrowing_without_cohort,
     "borrowingLimit"),
    ("prod", "ClusterQueue", "reclaim Never with borrowWithinCohort", _set(
        "spec.preemption", {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}),
     "reclaimWithinCohort == 'Never'"),
    ("prod", "ClusterQueue", "a flavor preference with whenCanBorrow Borrow", _set(
        "spec.flavorFungibility", {"preference": "BorrowingOverPreemption", "whenCanBorrow": "MayStopSearch"}),
     "whenCanBorrow == 'TryNextFlavor'"),
    ("prod", "ResourceFlavor", "a toleration with seconds but not NoExecute", _set(
        "spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "tolerationSeconds"),
    ("prod", "ResourceFlavor", "an Exists toleration with a value", _set(
        "spec.tolerations", [{"key": "k", "operator": "Exists", "value": "v"}]), "!has(x.value)"),
    ("prod", "ResourceFlavor", "a keyless Equal toleration", _set(
        "spec.tolerations", [{"operator": "Equal", "value": "v"}]), "x.operator == 'Exists'"),
    ("prod", "ResourceFlavor", "an unknown toleration operator", _set(
        "spec.tolerations", [{"key": "k", "operator": "Matches"}]), "x.operator in ['Equal', 'Exists']"),
    ("prod", "ResourceFlavor", "an unknown toleration effect", _set(
        "spec.tolerations", [{"key": "k", "operator": "Exists", "effect": "Sometimes"}]), "!has(x.effect) ||"),
    ("prod", "ResourceFlavor", "an unknown taint effect", _set(
        "spec.nodeTaints", [{"key": "k", "value": "v", "effect": "Sometimes"}]), "x.effect in"),
    ("prod", "ResourceFlavor", "a topology with empty nodeLabels", lambda d: d["spec"].update(
        topologyName="t", nodeLabels={}), "self.nodeLabels.size() >= 1"),
    ("multi", "MultiKueueConfig", "a cluster listed twice", _duplicate_cluster, "size(self.filter(i"),
    ("multi", "MultiKueueCluster", "kubeConfig and clusterProfileRef both", _mk_both_sources,
     "clusterProfileRef"),
    ("prod", "PodMonitoring", "a timeout above the interval", _pm_endpoint(interval="10s", timeout="30s"),
     "self.timeout <= self.interval"),
    ("prod", "PodMonitoring", "port 0", _pm_endpoint(port=0), "Port is required"),
    ("prod", "PodMonitoring", "two auth methods", _pm_endpoint(
        authorization={"credentials": {"secret": {"name": "a", "key": "b"}}},
        basicAuth={"username": "u"}), "has(self.basicAuth)"),
    ("prod", "PodMonitoring", "a Basic authorization type", _pm_endpoint(authorization={"type": "Basic"}),
     "self != 'Basic'"),
    ("prod", "PodMonitoring", "a secret from another namespace", _pm_endpoint(
        authorization={"credentials": {"secret": {"name": "a", "key": "b", "namespace": "kube-system"}}}),
     "__namespace__"),
    ("prod", "PodMonitoring", "a relabel onto a protected label", _pm_endpoint(
        metricRelabeling=[{"sourceLabels": ["a"], "targetLabel": "cluster", "action": "replace"}]),
     "self != 'project_id'"),
    ("prod", "PodMonitoring", "a labeldrop without a regex", _pm_endpoint(
        metricRelabeling=[{"action": "labeldrop"}]), "has(self.regex)"),
    ("prod", "PodMonitoring", "a proxy URL with credentials", _pm_endpoint(proxyUrl="http://u:p@proxy:3128"),
     "isURL(self)"),
    ("prod", "PodMonitoring", "a proxy that is not a URL", _pm_endpoint(proxyUrl="proxy-host"), "isURL(self)"),
    ("prod", "PodMonitoring", "an oauth2 proxy URL with credentials", _pm_endpoint(
        oauth2={"clientID": "c", "tokenURL": "https://t", "proxyUrl": "http://u@p"}), "isURL(self)"),
    ("prod", "PodMonitoring", "oauth2 tls with a cert and no key", _pm_endpoint(
        oauth2={"clientID": "c", "tokenURL": "https://t", "tlsConfig": {"cert": {"secret": {"name": "s",
                                                                                             "key": "k"}}}}),
     "has(self.cert) == has(self.key)"),
    ("prod", "PodMonitoring", "tls with a cert and no key", _pm_endpoint(
        tls={"cert": {"secret": {"name": "s", "key": "k"}}}), "has(self.cert) == has(self.key)"),
    ("prod", "PodMonitoring", "a pod label copied onto a protected label", lambda d: d["spec"].update(
        targetLabels={"fromPod": [{"from": "app", "to": "namespace"}]}), "self != 'project_id'"),
]


@pytest.mark.parametrize(("stack", "kind", "what", "mutate", "refused_by"), CREATE_REFUSALS,
                         ids=[f"{c[1]}: {c[2]}" for c in CREATE_REFUSALS])
def test_a_mutated_object_is_refused_by_its_rule(rendered, stack, kind, what, mutate, refused_by):
    doc = _first(rendered[stack], kind)
    s = schema(kind, _version(doc))
    assert kube_cel.failures(kube_cel.evaluate(s, doc)) == []
    mutate(doc)
    refused = [o for o in kube_cel.evaluate(s, doc) if not o.ok]
    assert refused, f"{kind}: {what} accepted"
    assert any(refused_by in o.rule.rule or refused_by in o.rule.message for o in refused), refused


def _noop(doc: dict) -> None:
    return None


def _topology(doc: dict) -> None:
    doc["spec"].update(topologyName="t", nodeLabels={**doc["spec"].get("nodeLabels", {}), "pool": "p"})


# An update the API server refuses by a transition rule: (stack, kind, what, the old object's own setting (fields
# no stack renders), the change)
UPDATE_REFUSALS = [
    ("prod", "LocalQueue", "another ClusterQueue", _noop, _set("spec.clusterQueue", "other")),
    ("dws", "AdmissionCheck", "another controller", _noop, _set("spec.controllerName", "example.com/x")),
    ("multi", "AdmissionCheck", "another controller", _noop, _set("spec.controllerName", "example.com/x")),
    ("multi", "RayJob", "managedBy handed back to KubeRay", _noop, _set("spec.managedBy", "ray.io/kuberay-operator")),
    ("prod", "RayJob", "cluster spec managedBy changed", _set("spec.rayClusterSpec.managedBy", MULTIKUEUE),
     _set("spec.rayClusterSpec.managedBy", "ray.io/kuberay-operator")),
    ("dev", "RayCluster", "managedBy changed", _set("spec.managedBy", MULTIKUEUE),
     _set("spec.managedBy", "ray.io/kuberay-operator")),
    ("dev", "RayCluster", "GCS fault-tolerance backend changed", _set("spec.gcsFaultToleranceOptions", {
        "backend": "redis", "redisAddress": "redis:6379"}), _set("spec.gcsFaultToleranceOptions.backend", "rocksdb")),
    ("prod", "RayJob", "GCS fault-tolerance backend changed", _set("spec.rayClusterSpec.gcsFaultToleranceOptions", {
        "backend": "redis"}), _set("spec.rayClusterSpec.gcsFaultToleranceOptions.backend", "rocksdb")),
    ("prod", "ResourceFlavor", "topology changed", _topology, _set("spec.topologyName", "u")),
    ("prod", "ResourceFlavor", "node labels changed under a topology", _topology,
     lambda d: d["spec"]["nodeLabels"].update(extra="x")),
    ("prod", "ResourceFlavor", "tolerations added under a topology", _topology,
     _set("spec.tolerations", [{"key": "k", "operator": "Exists"}])),
]


def _update(rendered: dict, stack: str, kind: str, setting, change) -> tuple[dict, dict, dict]:
    old = _first(rendered[stack], kind)
    setting(old)
    new = copy.deepcopy(old)
    change(new)
    return schema(kind, _version(old)), old, new


@pytest.mark.parametrize(("stack", "kind", "what", "setting", "change"), UPDATE_REFUSALS,
                         ids=[f"{c[0]} {c[1]}: {c[2]}" for c in UPDATE_REFUSALS])
def test_an_update_a_transition_rule_forbids_is_refused(rendered, stack, kind, what, setting, change):
    s, old, new = _update(rendered, stack, kind, setting, change)
    assert kube_cel.failures(kube_cel.evaluate(s, old, old)) == []  # a re-apply passes
    refused = [o for o in kube_cel.evaluate(s, new, old) if not o.ok]
    assert refused and all(o.rule.transition for o in refused), refused


def _refused_by_mutations(rendered: dict) -> set[tuple[str, str]]:
    out = set()
    for stack, kind, _, mutate, _ in CREATE_REFUSALS:
        doc = _first(rendered[stack], kind)
        mutate(doc)
        out |= {(kind, o.rule.rule) for o in kube_cel.evaluate(schema(kind, _version(doc)), doc) if not o.ok}
    for stack, kind, _, setting, change in UPDATE_REFUSALS:
        s, old, new = _update(rendered, stack, kind, setting, change)
        out |= {(kind, o.rule.rule) for o in kube_cel.evaluate(s, new, old) if not o.ok}
    return out


# --------------------------------------------------------------------------- the Kubernetes shim


def test_the_kubernetes_shim_follows_the_api_server():
    """Property-name escaping as the CRD ``rule`` reference's own examples (``namespace`` -> ``__namespace__``,
    ``x-prop`` -> ``x__dash__prop``, ``redact__d`` -> ``redact__underscores__d``); Go durations; ``isURL``;
    heterogeneous equality (an int-or-string port compared with 0); map keys unescaped."""
    assert [kube_cel.escape(n) for n in ("namespace", "x-prop", "redact__d", "a.b/c", "plain", "1x")] == [
        "__namespace__", "x__dash__prop", "redact__underscores__d", "a__dot__b__slash__c", "plain", None]
    assert kube_cel.go_duration("1h30m").total_seconds() == 5400
    assert kube_cel.go_duration("500ms").total_seconds() == 0.5
    with pytest.raises(ValueError):
        kube_cel.go_duration("30 seconds")
    assert [bool(kube_cel.is_url(u)) for u in ("https://a:8080/x", "/metrics", "proxy-host", "")] == [
        True, True, False, False]
    port = {"x-kubernetes-int-or-string": True, "x-kubernetes-validations": [{"rule": "self != 0"}]}
    node = {"properties": {"port": port, "labels": {"additionalProperties": {"type": "string"},
                                                    "x-kubernetes-validations": [{"rule": "self['a.b/c'] == 'x'"}]}}}
    assert kube_cel.failures(kube_cel.evaluate(node, {"port": "metrics", "labels": {"a.b/c": "x"}})) == []
    assert kube_cel.failures(kube_cel.evaluate(node, {"port": 0, "labels": {"a.b/c": "y"}})) == [
        "port: self != 0", "labels: self['a.b/c'] == 'x'"]


def test_an_evaluation_error_refuses():
    """A rule that cannot be evaluated (here: a field read that is absent) refuses the object, as the API server
    reports a rule's runtime error as an invalid field (apiextensions-apiserver ``pkg/apiserver/schema/cel``
    validation); a policy's error denies under ``failurePolicy: Fail`` with a ``Deny`` binding. Without this, an
    evaluator that took every error for a pass passed every other test here."""
    rules = [{"rule": "self.a == 'x'"}, {"rule": "self.a != 'x'"}, {"rule": "!has(self.a) || self.a != 'x'"}]
    node = {"properties": {"spec": {"properties": {"a": {"type": "string"}}, "x-kubernetes-validations": rules}}}
    outcomes = kube_cel.evaluate(node, {"spec": {}})
    # == and != propagate the error (the shim's heterogeneous equality had made ``!=`` of an error true).
    assert [(o.ok, bool(o.error)) for o in outcomes] == [(False, True), (False, True), (True, False)]
    policy = {"metadata": {"name": "p"}, "spec": {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                                                "resources": ["pods"]}]},
        "validations": [{"expression": "oldObject.metadata.labels['absent'] == 'x'", "message": "m"}]}}
    binding = {"spec": {"policyName": "p", "validationActions": ["Deny"]}}
    req = kube_cel.admission_request("DELETE", "pods", "x", "u", namespace="n", kind="Pod")
    allowed, why = kube_cel.admit(policy, binding, req, None, {"metadata": {"name": "x", "labels": {"a": "b"}}})
    assert not allowed and why.startswith("error:"), why
