"""Would the manager dispatch, and would the workers run what it dispatches? Derived from the rendered objects.

For every RayJob each cluster of a multi-region stack holds, this walks what the job references and checks the
cluster that must resolve it holds it, as Kubernetes and Kueue v0.19.2 resolve it (nothing here is a list of the
project's object names):

- Kueue, on the cluster where the job is created (the manager for queued jobs): the LocalQueue of its
  ``kueue.x-k8s.io/queue-name`` label in the job's namespace, that queue's ClusterQueue, the ClusterQueue's
  flavors and admission checks (a MultiKueue check's MultiKueueConfig, its MultiKueueClusters and their kubeconfig
  Secrets), the WorkloadPriorityClass of its ``kueue.x-k8s.io/priority-class`` label, every ResourceClaimTemplate a
  pod template names (Kueue reads it to count DRA devices: pkg/dra/claims.go:130-146, 168-178; a missing one
  leaves the Workload inadmissible, pkg/controller/core/workload_controller.go:470-494), each device class mapped
  by that cluster's Kueue configuration (``resources.deviceClassMappings``), and every requested resource
  covered by the ClusterQueue with enough nominal quota in total;
- Kueue again on each worker a MultiKueue check dispatches to (the copy keeps the namespace, labels and pod
  templates: rayjob_multikueue_adapter / ray_multikueue_adapter.go:213-220 copySpec), and the pods there: the
  ServiceAccount, ConfigMaps, Secrets, PersistentVolumeClaims, ResourceClaimTemplates, image pull Secrets,
  PriorityClass and GKE ComputeClass each pod template names, and the bucket a GCS FUSE volume mounts.

Then every worker is reachable with the credential the manager renders, under GKE's endpoint rules and the
worker's RBAC, with the rules Kueue's own e2e setup grants (vendored ``vendor/kueue-multikueue/``).
Run on the ``multi`` stack and on a test-owned three-region stack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import FIXTURE_STACKS, VENDOR

from offline import engine
from stackspec import limits

ROOT = Path(__file__).resolve().parents[1]
KUEUE_REF = VENDOR / "kueue-multikueue"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"  # kueue apis/kueue/v1beta2 MultiKueueControllerName
COMPUTE_CLASS_SELECTOR = "cloud.google.com/compute-class"
# GKE's built-in ComputeClasses need no object (https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes).
BUILTIN_COMPUTE_CLASSES = {"autopilot", "autopilot-spot", "Accelerator", "Balanced", "Performance", "Scale-Out"}
GCS_FUSE_DRIVER = "gcsfuse.csi.storage.gke.io"


# --------------------------------------------------------------------------- the rendered clusters


class Cluster:
    """What one cluster holds: every Kubernetes object applied through its provider, and its Kueue configuration."""

    def __init__(self, name: str, gke: dict[str, Any]):
        self.name, self.gke = name, gke
        self.docs: list[dict[str, Any]] = []
        self.kueue_config: dict[str, Any] | None = None

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        for d in self.docs:
            m = d["metadata"]
            if d["kind"] == kind and m["name"] == name and m.get("namespace") == namespace:
                return d
        return None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]


def clusters(rendering: engine.Rendering) -> dict[str, Cluster]:
    """GKE cluster name -> what its Kubernetes provider applies (a provider is mapped to the cluster it depends on)."""
    by_urn = {r.urn: r for r in rendering.resources}
    out: dict[str, Cluster] = {}
    provider_of: dict[str, Cluster] = {}
    for p in rendering.by_type("pulumi:providers:kubernetes"):
        [gke] = [by_urn[u] for u in p.dependencies if u in by_urn and by_urn[u].type == "gcp:container/cluster:Cluster"]
        c = out.setdefault(gke.inputs["name"], Cluster(gke.inputs["name"], gke.inputs))
        provider_of[p.urn] = c
    for r in rendering.resources:
        c = provider_of.get(r.provider_urn or "")
        if c is None:
            continue
        if engine.is_kubernetes_object(r) and r.inputs["kind"] == "ConfigMap" and r.inputs["metadata"] == {
                **r.inputs["metadata"], "name": "kueue-manager-config", "namespace": "kueue-system"}:
            # Kueue's release objects (workloads/kueue_install.py): its configuration is this ConfigMap's.
            c.kueue_config = yaml.safe_load(r.inputs["data"]["controller_manager_config.yaml"])
        if engine.is_kubernetes_object(r):
            c.docs.append(engine.kubernetes_manifest(r))
    return out


# --------------------------------------------------------------------------- what a RayJob references


def pod_templates(job: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(pod set, pod spec, pods) of a RayJob as Kueue's RayJob integration builds its pod sets: the head, each
    worker group (replicas x numOfHosts), and the submitter in K8sJobMode (kueue pkg/controller/jobs/rayjob
    rayjob_controller.go PodSets)."""
    rc = job["spec"]["rayClusterSpec"]
    yield "head", rc["headGroupSpec"]["template"]["spec"], 1
    for g in rc.get("workerGroupSpecs", []):
        yield g["groupName"], g["template"]["spec"], int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1))
    if job["spec"].get("submissionMode", "K8sJobMode") == "K8sJobMode":
        yield "submitter", (job["spec"].get("submitterPodTemplate") or {}).get("spec", {}), 1


def pod_references(pod: dict[str, Any], namespace: str) -> set[tuple[str, str | None, str]]:
    """(kind, namespace, name) every object a pod spec names, for the kubelet, the scheduler or admission."""
    refs: set[tuple[str, str | None, str]] = set()
    if sa := pod.get("serviceAccountName"):
        refs.add(("ServiceAccount", namespace, sa))
    for v in pod.get("volumes", []):
        if "configMap" in v and not v["configMap"].get("optional"):
            refs.add(("ConfigMap", namespace, v["configMap"]["name"]))
        if "secret" in v and not v["secret"].get("optional"):
            refs.add(("Secret", namespace, v["secret"]["secretName"]))
        if "persistentVolumeClaim" in v:
            refs.add(("PersistentVolumeClaim", namespace, v["persistentVolumeClaim"]["claimName"]))
        for src in v.get("projected", {}).get("sources", []):
            for kind, key in (("ConfigMap", "configMap"), ("Secret", "secret")):
                if key in src and not src[key].get("optional"):
                    refs.add((kind, namespace, src[key]["name"]))
        if v.get("csi", {}).get("driver") == GCS_FUSE_DRIVER:
            refs.add(("Bucket", None, v["csi"]["volumeAttributes"]["bucketName"]))
    for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        for e in c.get("env", []):
            src = e.get("valueFrom", {})
            for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if key in src and not src[key].get("optional"):
                    refs.add((kind, namespace, src[key]["name"]))
        for e in c.get("envFrom", []):
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                if key in e and not e[key].get("optional"):
                    refs.add((kind, namespace, e[key]["name"]))
    for s in pod.get("imagePullSecrets", []):
        refs.add(("Secret", namespace, s["name"]))
    for claim in pod.get("resourceClaims", []):
        if name := claim.get("resourceClaimTemplateName"):
            refs.add(("ResourceClaimTemplate", namespace, name))
        if name := claim.get("resourceClaimName"):
            refs.add(("ResourceClaim", namespace, name))
    if (pc := pod.get("priorityClassName")) and not pc.startswith("system-"):
        refs.add(("PriorityClass", None, pc))
    if (cc := pod.get("nodeSelector", {}).get(COMPUTE_CLASS_SELECTOR)) and cc not in BUILTIN_COMPUTE_CLASSES:
        refs.add(("ComputeClass", None, cc))
    return refs


def requests(job: dict[str, Any]) -> dict[str, float]:
    """The job's total requests per resource, as Kueue counts a pod set (requests, or limits where no request)."""
    out: dict[str, float] = {}
    for _, pod, count in pod_templates(job):
        for c in pod.get("containers", []):
            res = {**c.get("resources", {}).get("limits", {}), **c.get("resources", {}).get("requests", {})}
            for name, q in res.items():
                out[name] = out.get(name, 0) + limits.quantity(q) * count
    return out


def device_requests(cluster: Cluster, job: dict[str, Any], namespace: str) -> tuple[dict[str, float], list[str]]:
    """DRA devices of the job's pod sets counted as Kueue does on ``cluster`` (countDevicesPerClass, then the
    configuration's deviceClassMappings), and what is missing for it."""
    missing: list[str] = []
    mapping = {dc: m["name"] for m in (cluster.kueue_config or {}).get("resources", {}).get("deviceClassMappings", [])
               for dc in m["deviceClassNames"]}
    out: dict[str, float] = {}
    for podset, pod, count in pod_templates(job):
        for claim in pod.get("resourceClaims", []):
            name = claim.get("resourceClaimTemplateName")
            if not name:
                continue
            tmpl = cluster.get("ResourceClaimTemplate", name, namespace)
            if tmpl is None:
                missing.append(f"{cluster.name}: ResourceClaimTemplate {namespace}/{name} ({podset}): Kueue answers "
                               f"'failed to get claim spec for ResourceClaimTemplate {name}'")
                continue
            for req in tmpl["spec"]["spec"]["devices"]["requests"]:
                exactly = req.get("exactly")
                if exactly is None:  # FirstAvailable: "not supported" (countDevicesPerClass)
                    missing.append(f"{cluster.name}: {name}: only 'exactly' requests are counted by Kueue")
                    continue
                if any("cel" in s for s in exactly.get("selectors", [])):
                    # validateCELSelectorsAgainstDevices lists the cluster's ResourceSlices: none on a manager.
                    missing.append(f"{cluster.name}: {name}: CEL selectors need devices in this cluster")
                dc = exactly["deviceClassName"]
                if dc not in mapping:
                    missing.append(f"{cluster.name}: device class {dc} is not in Kueue's deviceClassMappings")
                    continue
                out[mapping[dc]] = out.get(mapping[dc], 0) + int(exactly.get("count", 1)) * count
    return out, missing


# --------------------------------------------------------------------------- Kueue's view


def kueue_problems(cluster: Cluster, job: dict[str, Any], manager_side: bool) -> tuple[list[str], list[str]]:
    """What keeps Kueue on ``cluster`` from admitting ``job``; and the MultiKueueClusters it dispatches to."""
    ns, labels = job["metadata"]["namespace"], job["metadata"].get("labels", {})
    out: list[str] = []
    if cluster.kueue_config is None:
        return [f"{cluster.name}: no Kueue"], []
    if "ray.io/rayjob" not in cluster.kueue_config.get("integrations", {}).get("frameworks", []):
        out.append(f"{cluster.name}: Kueue's ray.io/rayjob integration is off")
    if cluster.get("Namespace", ns) is None:
        out.append(f"{cluster.name}: Namespace {ns}")
    if (pc := labels.get(PRIORITY_LABEL)) and cluster.get("WorkloadPriorityClass", pc) is None:
        out.append(f"{cluster.name}: WorkloadPriorityClass {pc}")
    lq = cluster.get("LocalQueue", labels.get(QUEUE_LABEL, ""), ns)
    if lq is None:
        return [*out, f"{cluster.name}: LocalQueue {ns}/{labels.get(QUEUE_LABEL)}"], []
    cq = cluster.get("ClusterQueue", lq["spec"]["clusterQueue"])
    if cq is None:
        return [*out, f"{cluster.name}: ClusterQueue {lq['spec']['clusterQueue']}"], []
    selector = cq["spec"].get("namespaceSelector", {}).get("matchLabels", {})
    if selector and selector != {"kubernetes.io/metadata.name": ns}:
        out.append(f"{cluster.name}: ClusterQueue {cq['metadata']['name']} does not select namespace {ns}")
    quota: dict[str, float] = {}
    for group in cq["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            if cluster.get("ResourceFlavor", f["name"]) is None:
                out.append(f"{cluster.name}: ResourceFlavor {f['name']}")
            for r in f["resources"]:
                quota[r["name"]] = quota.get(r["name"], 0) + limits.quantity(r["nominalQuota"])
    devices, missing = device_requests(cluster, job, ns)
    out += missing
    for res, amount in {**requests(job), **devices}.items():
        if res not in quota:
            out.append(f"{cluster.name}: ClusterQueue {cq['metadata']['name']} does not cover {res}")
        elif amount > quota[res]:
            out.append(f"{cluster.name}: {res} {amount} exceeds ClusterQueue quota {quota[res]}")
    workers: list[str] = []
    checks = [c["name"] for c in cq["spec"].get("admissionChecksStrategy", {}).get("admissionChecks", [])]
    for name in checks:
        ac = cluster.get("AdmissionCheck", name)
        if ac is None:
            out.append(f"{cluster.name}: AdmissionCheck {name}")
            continue
        if ac["spec"]["controllerName"] != MULTIKUEUE_CONTROLLER:
            continue
        if not manager_side:
            out.append(f"{cluster.name}: a worker's queue carries a MultiKueue check (no nested dispatch)")
        config = cluster.get("MultiKueueConfig", ac["spec"]["parameters"]["name"])
        if config is None:
            out.append(f"{cluster.name}: MultiKueueConfig {ac['spec']['parameters']['name']}")
            continue
        for mkc_name in config["spec"]["clusters"]:
            if cluster.get("MultiKueueCluster", mkc_name) is None:
                out.append(f"{cluster.name}: MultiKueueCluster {mkc_name}")
            else:
                workers.append(mkc_name)
    return out, workers


def kubeconfig_targets(manager: Cluster) -> dict[str, dict[str, Any]]:
    """Secret name -> the token job's target writing it (the Secret Kueue reads exists only through that job)."""
    out = {}
    for cm in manager.of_kind("ConfigMap"):
        if "targets.json" in cm.get("data", {}):
            config = json.loads(cm["data"]["targets.json"])
            for t in config["targets"]:
                out[t["secret"]] = {**t, "secretNamespace": config["namespace"]}
    return out


def worker_of(manager: Cluster, mkc_name: str, all_clusters: dict[str, Cluster]) -> tuple[Cluster | None, str]:
    """The cluster a MultiKueueCluster reaches: its kubeconfig Secret (in Kueue's namespace: multikueuecluster.go
    :1063-1080) is written by a token job target naming the worker's cluster and server."""
    mkc = manager.get("MultiKueueCluster", mkc_name)
    src = mkc["spec"]["clusterSource"]["kubeConfig"]
    if src["locationType"] != "Secret":
        return None, f"{mkc_name}: kubeconfig location type {src['locationType']}"
    target = kubeconfig_targets(manager).get(src["location"])
    if target is None or target["secretNamespace"] != "kueue-system" or target["kind"] != "kubeconfig":
        return None, f"{mkc_name}: nothing writes Secret kueue-system/{src['location']}"
    worker = all_clusters.get(target["cluster"])
    return worker, "" if worker else f"{mkc_name}: no cluster {target['cluster']}"


def pod_problems(cluster: Cluster, job: dict[str, Any], buckets: set[str]) -> list[str]:
    out = []
    ns = job["metadata"]["namespace"]
    for podset, pod, _ in pod_templates(job):
        for kind, rns, name in sorted(pod_references(pod, ns), key=str):
            if kind == "Bucket":
                if name not in buckets:
                    out.append(f"{cluster.name}: {podset} mounts bucket {name}, which the stack does not declare")
            elif cluster.get(kind, name, rns) is None:
                out.append(f"{cluster.name}: {podset} needs {kind} {rns + '/' if rns else ''}{name}")
    return out


def dispatch_report(rendering: engine.Rendering) -> dict[str, Any]:
    """Per RayJob: where Kueue resolves it, where it may run, and every missing reference."""
    all_clusters = clusters(rendering)
    buckets = {r.inputs["name"] for r in rendering.by_type("gcp:storage/bucket:Bucket")}
    report: dict[str, Any] = {}
    for c in all_clusters.values():
        for job in c.of_kind("RayJob"):
            problems, mk_clusters = kueue_problems(c, job, manager_side=True)
            runs_on = []
            if mk_clusters and job["spec"].get("managedBy") != MULTIKUEUE_CONTROLLER:
                # Kueue defaults it only if its webhook's caches already hold the queue and check
                # (jobframework/defaults.go:127-148); it is immutable afterwards (KubeRay CRD CEL).
                problems.append(f"{c.name}: spec.managedBy is not {MULTIKUEUE_CONTROLLER} at creation")
            if mk_clusters:
                for mkc in mk_clusters:
                    worker, why = worker_of(c, mkc, all_clusters)
                    if worker is None:
                        problems.append(why)
                        continue
                    # The worker's Kueue admits the copy (same namespace, labels and pod templates) ...
                    problems += kueue_problems(worker, job, manager_side=False)[0]
                    # ... its pods find what they mount; the manager's copy never runs (spec.managedBy).
                    problems += pod_problems(worker, job, buckets)
                    runs_on.append(worker.name)
            else:
                problems += pod_problems(c, job, buckets)
                runs_on.append(c.name)
            report[f"{c.name}/{job['metadata']['name']}"] = {"runs_on": runs_on, "problems": problems}
    return report


# --------------------------------------------------------------------------- the stacks


def three_regions(tmp_path: Path) -> engine.Rendering:
    """A test-owned stack: the multi stack with a third region (us-central1, with its own two DCN networks: every
    region must render a queued job alike), the bucket in the US multi-region (a dual-region holds two regions)
    and a Standard manager."""
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.multi.yaml").read_text())
    cfg = doc["config"]
    third = json.loads(json.dumps(cfg["tpu-multislice:regions"][1]))
    third.update(region="us-central1", zone="us-central1-b")
    third["cluster"].update(name="maxtext-central1", podCidr="10.124.0.0/14", serviceCidr="10.104.32.0/20")
    third["network"] = {"primary": {"cidr": "10.0.48.0/20"},
                        "secondary": [{"subnet": "central1-tpu-subnet-1", "cidr": "10.52.0.0/16"},
                                      {"subnet": "central1-tpu-subnet-2", "cidr": "10.62.0.0/16"}]}
    cfg["tpu-multislice:regions"].append(third)
    cfg["tpu-multislice:storage"]["location"] = "US"
    cfg["tpu-multislice:storage"].pop("dataLocations", None)  # the US multi-region, not a dual-region
    cfg["tpu-multislice:manager"].update(autopilot=False, systemMachineType="n2-standard-8")
    (tmp_path / "Pulumi.tri.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return engine.render("tri", stacks_dir=tmp_path)


@pytest.fixture(scope="module", params=["multi", "three-regions"])
def rendering(request, tmp_path_factory) -> engine.Rendering:
    if request.param == "multi":
        return engine.render("multi")
    return three_regions(tmp_path_factory.mktemp("tri"))


def test_every_queued_job_is_admissible_on_the_manager_and_runnable_on_every_worker(rendering):
    report = dispatch_report(rendering)
    queued = {k: v for k, v in report.items() if len(v["runs_on"]) > 1}
    assert queued, report  # the stack queues jobs through the manager
    order = rendering.outputs["dispatchOrder"]
    for name, r in report.items():
        assert r["problems"] == [], name
    # Queued jobs may run in every region, in the dispatch order; a job created in a region runs there.
    assert all(v["runs_on"] == order for v in queued.values()), queued
    assert len(order) == len(rendering.outputs["clusters"])


def test_the_walk_sees_what_is_missing(tmp_path):
    """Not vacuous: the manager without its claim template, a worker without its LocalQueue, a pod's ConfigMap
    or KSA, or a flavor, each shows up, named."""
    r = engine.render("multi")
    cases = {
        ("tpu-manager", "ResourceClaimTemplate"): "failed to get claim spec",
        ("maxtext-east1", "LocalQueue"): "maxtext-east1: LocalQueue",
        ("maxtext-east5", "ConfigMap"): "maxtext-east5: head needs ConfigMap",
        ("maxtext-east5", "ServiceAccount"): "needs ServiceAccount maxtext/",
        ("tpu-manager", "WorkloadPriorityClass"): "tpu-manager: WorkloadPriorityClass",
        ("maxtext-east1", "ComputeClass"): "needs ComputeClass",
    }
    original = clusters
    for (cluster, kind), expect in cases.items():
        def dropped(rendering, cluster=cluster, kind=kind):
            out = original(rendering)
            out[cluster].docs = [d for d in out[cluster].docs if d["kind"] != kind]
            return out
        globals()["clusters"] = dropped
        try:
            problems = [p for v in dispatch_report(r).values() for p in v["problems"]]
        finally:
            globals()["clusters"] = original
        assert any(expect in p for p in problems), (cluster, kind, problems)


def test_the_manager_counts_the_devices_each_worker_counts(rendering):
    """Kueue counts a DRA claim on the manager with the manager's template and on the worker with the worker's
    (upstream dra_test.go:162-176 gives them different counts on purpose): the same template everywhere keeps the
    manager's quota the workers' quota."""
    cs = clusters(rendering)
    manager = cs[rendering.outputs["manager"]]
    for tmpl in manager.of_kind("ResourceClaimTemplate"):
        m = tmpl["metadata"]
        for w in rendering.outputs["dispatchOrder"]:
            theirs = cs[w].get("ResourceClaimTemplate", m["name"], m["namespace"])
            assert theirs is not None and theirs["spec"] == tmpl["spec"], (w, m["name"])


# --------------------------------------------------------------------------- reaching each worker

# Kueue's e2e helper names groups by Go identifiers (test/util/multikueue.go imports).
GO_GROUPS = {"kueue": "kueue.x-k8s.io", "rayv1": "ray.io", "batchv1": "batch", "corev1": "", "appsv1": "apps",
             "jobset": "jobset.x-k8s.io", "kftraining": "kubeflow.org", "kfmpi": "kubeflow.org",
             "awv1beta2": "workload.codeflare.dev", "leaderworkersetv1": "leaderworkerset.x-k8s.io",
             "kftrainerapi": "trainer.kubeflow.org"}
_RULE = re.compile(r'PolicyRule\((\w+)\.(?:SchemeGroupVersion|GroupVersion)\.Group, "([^"]+)", ([^)]*)\)')


def kueue_e2e_rules(frameworks: list[str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(group, resource, verbs) Kueue's MultiKueue e2e grants the manager on a worker, for the manager's enabled
    frameworks (MultiKueueRulesForManager and frameworkRules in the vendored test/util/multikueue.go)."""
    src = (KUEUE_REF / "test_util_multikueue.go").read_text()
    resource_verbs = tuple(re.findall(r'"(\w+)"', re.search(r"var resourceVerbs = \[\]string\{([^}]*)\}", src)[1]))

    def rules(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(GO_GROUPS[g], res, resource_verbs if verbs.strip() == "resourceVerbs..." else
                 tuple(re.findall(r'"(\w+)"', verbs))) for g, res, verbs in _RULE.findall(text)]

    body = src[src.index("func MultiKueueRulesForManager"):src.index("func KubeconfigForMultiKueueSA")]
    out = rules(body[:body.index("for _, framework")])
    for fw in frameworks:
        block = re.search(rf'"{re.escape(fw)}": \{{(.*?)\n\t\}},', src, re.S)
        out += rules(block[1])
    return out


def allowed(cluster: Cluster, subject: tuple[str, str | None, str], verb: str, group: str, resource: str,
            namespace: str | None, name: str | None = None) -> bool:
    """Kubernetes RBAC over the cluster's rendered Roles and bindings (namespace None: a cluster-wide request)."""
    kind, sns, sname = subject

    def binds(b: dict[str, Any]) -> bool:
        return any(s["kind"] == kind and s["name"] == sname and (kind != "ServiceAccount" or s["namespace"] == sns)
                   for s in b.get("subjects", []))

    def grants(role: dict[str, Any] | None) -> bool:
        return role is not None and any(
            (verb in r["verbs"] or "*" in r["verbs"]) and (group in r["apiGroups"] or "*" in r["apiGroups"])
            and (resource in r["resources"] or "*" in r["resources"])
            and (not r.get("resourceNames") or name in r["resourceNames"]) for r in role["rules"])

    for b in cluster.of_kind("ClusterRoleBinding"):
        if binds(b) and grants(cluster.get("ClusterRole", b["roleRef"]["name"])):
            return True
    for b in cluster.of_kind("RoleBinding"):
        bns = b["metadata"]["namespace"]
        if namespace != bns or not binds(b):
            continue
        ref = b["roleRef"]
        role = (cluster.get("Role", ref["name"], bns) if ref["kind"] == "Role"
                else cluster.get("ClusterRole", ref["name"]))
        if grants(role):
            return True
    return False


READS = ("get", "list", "watch")


def test_every_worker_is_reachable_with_the_rendered_credential(rendering):
    """The chain, link by link, for each MultiKueueCluster of the manager:

    1. the token job on the manager runs as the Google service account its KSA names (workload identity), and the
       worker's RBAC lets that User (GKE names a Google identity by its email) create a token for the
       ServiceAccount the target names, which exists there;
    2. the kubeconfig Kueue reads then carries that Kubernetes token to the worker's DNS-based endpoint (the only
       one: its IP endpoint is off), which the manager reaches from outside the worker's VPC
       (``allowExternalTraffic``) and which accepts a Kubernetes token only with ``enableK8sTokensViaDns``
       (GKE API DNSEndpointConfig "Controls whether the k8s token auth is allowed via DNS";
       terraform-google-modules/terraform-google-kubernetes-engine#2578: without it, 401). The manager's own
       endpoint keeps it off (workers only);
    3. with that token, the worker's RBAC grants every rule of Kueue's own MultiKueue e2e setup for the manager's
       frameworks: reads cluster-wide (remote watches and the garbage collector list every namespace:
       multikueuecluster.go:421,693), writes in the job namespace (the clone keeps the manager object's
       namespace: workload.go:819,945; ray_multikueue_adapter.go:220,257,274,298), and no write anywhere else.
    """
    cs = clusters(rendering)
    manager = cs[rendering.outputs["manager"]]
    assert not manager.gke["controlPlaneEndpointsConfig"]["dnsEndpointConfig"].get("enableK8sTokensViaDns")
    cronjobs = manager.of_kind("CronJob")
    frameworks = manager.kueue_config["integrations"]["frameworks"]
    job_namespaces = {j["metadata"]["namespace"] for j in manager.of_kind("RayJob")}
    reached = []
    for mkc in manager.of_kind("MultiKueueCluster"):
        worker, why = worker_of(manager, mkc["metadata"]["name"], cs)
        assert worker is not None, why
        target = kubeconfig_targets(manager)[mkc["spec"]["clusterSource"]["kubeConfig"]["location"]]
        # 1. The Google identity mints the token.
        [cm] = [c for c in manager.of_kind("ConfigMap") if target["secret"] in
                {t["secret"] for t in json.loads(c.get("data", {}).get("targets.json", '{"targets": []}'))["targets"]}]
        [pod] = [c["spec"]["jobTemplate"]["spec"]["template"]["spec"] for c in cronjobs
                 if {"name": cm["metadata"]["name"]} in [v.get("configMap") for v in
                                                         c["spec"]["jobTemplate"]["spec"]["template"]["spec"]["volumes"]]]
        ksa = manager.get("ServiceAccount", pod["serviceAccountName"], cm["metadata"]["namespace"])
        gsa = ksa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
        [wi] = [r for r in rendering.by_type("gcp:serviceaccount/iAMMember:IAMMember")
                if r.inputs["serviceAccountId"].endswith(f"/serviceAccounts/{gsa}")]
        assert wi.inputs["role"] == "roles/iam.workloadIdentityUser"
        assert wi.inputs["member"].endswith(f".svc.id.goog[kueue-system/{ksa['metadata']['name']}]")
        sa = (target["tokenNamespace"], target["serviceAccount"])
        assert worker.get("ServiceAccount", sa[1], sa[0]) is not None, worker.name
        assert allowed(worker, ("User", None, gsa), "create", "", "serviceaccounts/token", sa[0], sa[1]), worker.name
        assert not allowed(worker, ("User", None, gsa), "create", "", "serviceaccounts/token", sa[0], "default")
        # 2. GKE's DNS endpoint takes that Kubernetes token from outside the worker's VPC.
        endpoints = worker.gke["controlPlaneEndpointsConfig"]
        assert endpoints["ipEndpointsConfig"] == {"enabled": False} and target["server"].startswith("https://")
        assert endpoints["dnsEndpointConfig"] == {"allowExternalTraffic": True, "enableK8sTokensViaDns": True}
        # 3. What Kueue does there with it, by Kueue's own e2e rules.
        token = ("ServiceAccount", sa[0], sa[1])
        for group, resource, verbs in kueue_e2e_rules(frameworks):
            for verb in verbs:
                if verb in READS and "/" not in resource:
                    assert allowed(worker, token, verb, group, resource, None), (worker.name, verb, resource)
                for ns in job_namespaces:
                    assert allowed(worker, token, verb, group, resource, ns), (worker.name, verb, resource, ns)
                if verb not in READS:
                    for other in ("default", "kube-system", "kueue-system"):
                        assert not allowed(worker, token, verb, group, resource, other), (worker.name, verb, other)
        # Where it may write, Pod Security keeps what KubeRay makes of a RayCluster unprivileged (no hostPath,
        # host namespaces or privileged containers: the baseline level).
        for ns in job_namespaces:
            labels = worker.get("Namespace", ns)["metadata"].get("labels", {})
            assert labels.get("pod-security.kubernetes.io/enforce") in ("baseline", "restricted"), (worker.name, ns)
        for group, resource in (("", "pods"), ("", "secrets"), ("batch", "jobs")):
            assert not any(allowed(worker, token, v, group, resource, ns) for v in (*READS, "create")
                           for ns in (None, *job_namespaces)), resource
        reached.append(worker.name)
    assert sorted(reached) == sorted(rendering.outputs["dispatchOrder"])


def test_kueue_e2e_rules_are_read_from_the_vendored_source():
    """The parser reads what the Go file says (not an empty list that would make the test above vacuous)."""
    rules = kueue_e2e_rules(["ray.io/rayjob", "ray.io/raycluster"])
    assert ("kueue.x-k8s.io", "workloads", ("create", "update", "patch", "delete", "get", "list", "watch")) in rules
    assert ("ray.io", "rayclusters/status", ("get",)) in rules and len(rules) == 8


def test_single_region_clusters_refuse_kubernetes_tokens_on_their_dns_endpoint():
    r = engine.render("prod")
    [c] = r.by_type("gcp:container/cluster:Cluster")
    assert "enableK8sTokensViaDns" not in c.inputs["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]


def test_the_token_job_image_is_pinned_by_digest_and_admitted_exactly():
    """A digest, never a moving tag; Binary Authorization admits that reference and no other tag of the repository."""
    from infra.cluster_security import image_pattern
    from workloads import multikueue as mk

    r = engine.render("multi")
    images = {c["image"] for d in r.manifests if d["kind"] == "CronJob"
              for c in d["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]}
    assert images == {mk.TOKEN_IMAGE} and re.fullmatch(r"[a-z0-9./-]+@sha256:[0-9a-f]{64}", mk.TOKEN_IMAGE)
    [policy] = r.by_type("gcp:binaryauthorization/policy:Policy")
    patterns = [p["namePattern"] for p in policy.inputs["admissionWhitelistPatterns"]]
    assert image_pattern(mk.TOKEN_IMAGE) in patterns
    assert not [p for p in patterns if "cloudsdktool" in p and p != image_pattern(mk.TOKEN_IMAGE)]


# GKE Warden's allow-list for node selection without workload separation, as its refusal quotes it
# (kubernetes-sigs/secrets-store-csi-driver#672, arangodb/kube-arangodb#751).
AUTOPILOT_NODE_KEYS = {"topology.kubernetes.io/region", "topology.kubernetes.io/zone",
                       "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
                       "cloud.google.com/gke-os-distribution", "kubernetes.io/os", "kubernetes.io/arch"}


def manager_pods(manager: Cluster) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template the stack puts on the manager (a RayJob there makes none: spec.managedBy)."""
    for d in manager.docs:
        spec = d.get("spec", {})
        if d["kind"] == "CronJob":
            yield f"CronJob/{d['metadata']['name']}", spec["jobTemplate"]["spec"]["template"]["spec"]
        elif d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield f"{d['kind']}/{d['metadata']['name']}", spec["template"]["spec"]
        elif d["kind"] == "Pod":
            yield f"Pod/{d['metadata']['name']}", spec


def test_nothing_on_the_autopilot_manager_is_what_autopilot_refuses():
    """Autopilot's Warden refuses node selectors outside its allow-list and pods outside its baseline policy
    (privileged, host namespaces, hostPath, added capabilities: cloud.google.com/kubernetes-engine/docs/concepts/
    autopilot-security). The manager holds Kueue's objects, the claim template and the RayJobs (no pods of
    theirs) and the token CronJob, whose pod asks for none of these."""
    r = engine.render("multi")
    assert r.spec.manager.autopilot
    manager = clusters(r)[r.outputs["manager"]]
    assert all(j["spec"].get("managedBy") == MULTIKUEUE_CONTROLLER for j in manager.of_kind("RayJob"))
    pods = list(manager_pods(manager))
    assert pods, "the token CronJob"
    for what, pod in pods:
        assert set(pod.get("nodeSelector", {})) <= AUTOPILOT_NODE_KEYS, what
        affinity = pod.get("affinity", {}).get("nodeAffinity", {})
        assert not affinity, what
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), what
        assert not any("hostPath" in v for v in pod.get("volumes", [])), what
        for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            sc = c.get("securityContext", {})
            assert not sc.get("privileged") and not sc.get("capabilities", {}).get("add"), what
            assert sc.get("allowPrivilegeEscalation") is False, what
