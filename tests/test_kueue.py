"""Queued admission with Kueue, on the real prod rendering (the program under Pulumi mocks).

Every Kueue object is validated against the CRDs of kubernetes-sigs/kueue v0.19.2 vendored in
``vendor/kueue/`` and every RayJob against KubeRay's; the policy rules run for real on the
rendered resources, and on copies broken one field at a time.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
import yaml
from conftest import with_fallbacks

from offline import engine
from policies import offline as policy_offline
from policies.rules import queueing as rules
from stackspec import kube, names
from stackspec import spec as stack_spec
from stackspec.errors import SpecError
from stackspec.model import WORKLOAD_PRIORITIES
from workloads import kueue, manifests

NS = stack_spec.PROJECT
KUEUE_KINDS = {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "AdmissionCheck",
               "ProvisioningRequestConfig"}


def _flex_config() -> dict[str, str]:
    """prod with its slices from flex-start with queued provisioning (DWS), its only option (the spec refuses it
    beside others), opted in to pools that scale from zero with DRANET (tpu-multislice:unverified.draScaleFromZero)."""
    return with_fallbacks(engine.stack_config("prod"), [{"type": "flex-start", "queuedProvisioning": True}])


@pytest.fixture(scope="module")
def flex() -> engine.Rendering:
    return engine.render("prod", config=_flex_config())


def kueue_docs(r: engine.Rendering) -> list[dict[str, Any]]:
    return [m for m in r.manifests if m["kind"] in KUEUE_KINDS]


def one(r: engine.Rendering, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [m for m in r.manifests if m["kind"] == kind and (name is None or m["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, found)
    return found[0]


def tpu_quota(cq: dict[str, Any]) -> dict[str, int]:
    return {f["name"]: int(r["nominalQuota"]) for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
            for r in f["resources"] if r["name"] == kube.TPU_RESOURCE}


# --------------------------------------------------------------------------- schemas


@pytest.mark.parametrize("stack", ["prod", "dev", "flex"])
def test_every_kueue_object_validates_against_the_vendored_crds(stack, request, kueue_validator):
    r = request.getfixturevalue(stack)
    docs = kueue_docs(r)
    assert {d["kind"] for d in docs} >= {"ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}
    for d in docs:
        assert d["apiVersion"] == kueue.KUEUE_API
        assert kueue_validator(d) == [], (d["kind"], d["metadata"]["name"])
    # What the program declares is exactly what workloads/kueue.py renders.
    assert sorted(json.dumps(d, sort_keys=True) for d in docs) == sorted(
        json.dumps(d, sort_keys=True) for d in kueue.all_objects(r.spec))


def test_the_kueue_schema_check_is_not_vacuous(prod, kueue_validator):
    cq = copy.deepcopy(one(prod, "ClusterQueue"))
    cq["spec"]["resourceGroup"] = cq["spec"].pop("resourceGroups")  # misspelt
    assert any("resourceGroup" in e for e in kueue_validator(cq))
    wpc = copy.deepcopy(one(prod, "WorkloadPriorityClass", "production"))
    wpc["value"] = "high"
    assert any("value" in e for e in kueue_validator(wpc))


@pytest.mark.parametrize("stack", ["prod", "dev", "flex"])
def test_rayjobs_and_rayclusters_validate_against_kuberay(stack, request, kuberay_validator):
    r = request.getfixturevalue(stack)
    ray = [m for m in r.manifests if m["kind"] in ("RayJob", "RayCluster")]
    assert ray
    for d in ray:
        assert kuberay_validator(d) == [], d["metadata"]["name"]


# --------------------------------------------------------------------------- prod: all jobs queued


def test_prod_declares_and_queues_all_three_jobs(prod):
    spec = prod.spec
    jobs = {m["metadata"]["name"]: m for m in prod.manifests if m["kind"] == "RayJob"}
    assert set(jobs) == {"llama3-8b-multislice", "llama3-70b-multislice", "llama3-8b-elastic"}
    assert prod.held == []  # nothing rendered only "for review"
    assert not [m for m in prod.manifests if m["kind"] == "RayCluster"]  # no long-lived cluster holds slices
    lq = one(prod, "LocalQueue")
    for job in spec.jobs:
        d = jobs[job.name]
        labels = d["metadata"]["labels"]
        assert labels[kube.KUEUE_QUEUE_LABEL] == names.local_queue(spec.ray.cluster_name) == lq["metadata"]["name"]
        assert labels[kube.KUEUE_PRIORITY_LABEL] == job.priority
        s = d["spec"]
        # Kueue's rules for a RayJob it manages (pkg/controller/jobs/rayjob/rayjob_webhook.go).
        assert "clusterSelector" not in s and "rayClusterSpec" in s
        assert s["shutdownAfterJobFinishes"] is True
        # Kueue frees the quota when the job ends: its cluster goes then too (clusterTtlSeconds 0).
        assert s["ttlSecondsAfterFinished"] == job.cluster_ttl_seconds == 0
        assert not s["rayClusterSpec"].get("enableInTreeAutoscaling")
        assert "suspend" not in s  # Kueue suspends on creation and resumes on admission
    # Multislice jobs are admitted whole: one workload whose TPU pod set is every host of every slice.
    for job in spec.jobs:
        (g,) = manifests.worker_groups(jobs[job.name])
        assert g["replicas"] * g["numOfHosts"] == job.slices * spec.group(job.group).shape.hosts


def test_one_cluster_queue_with_the_provisioned_tpu_quota(prod):
    spec = prod.spec
    cq = one(prod, "ClusterQueue", names.cluster_queue(spec.ray.cluster_name))
    (group,) = spec.groups
    # Two v6e 4x4 slices: 16 chips each.
    assert tpu_quota(cq) == {names.resource_flavor(group.name): 16 * 2}
    assert tpu_quota(cq) == {names.resource_flavor(g.name): g.shape.chips * len(g.slices) for g in spec.groups}
    # ... and what the node pools provision, counted by the policy from the GCP resources.
    provisioned = rules._provisioned(policy_offline.resources_of(prod))
    assert provisioned == {(group.shape.gke_accelerator, group.shape.topology): 32}
    # CPU, memory and the DRANET NICs are covered too, or Kueue would never admit the pods.
    covered = [r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]]
    assert sorted(covered) == sorted(["cpu", "memory", kube.TPU_RESOURCE, kube.KUEUE_NETDEV_RESOURCE])
    netdev = {f["name"]: r["nominalQuota"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
              for r in f["resources"] if r["name"] == kube.KUEUE_NETDEV_RESOURCE}
    assert netdev == {names.resource_flavor(group.name): str(2 * 4 * 2)}  # 2 NICs x 4 hosts x 2 slices
    # Quota for every worker and a head plus submitter per slice (prod: 8 CPU workers, 8 CPU heads).
    cpu = {r["name"]: r["nominalQuota"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
           for r in f["resources"]}["cpu"]
    assert cpu == "81"  # 8 x 4 hosts x 2 slices + (8 + 0.5) x 2
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": spec.storage.namespace}}
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert "admissionChecksStrategy" not in cq["spec"]  # no flex-start slices in prod


def test_flavors_carry_the_labels_the_pods_select(prod):
    spec = prod.spec
    (group,) = spec.groups
    flavor = one(prod, "ResourceFlavor", names.resource_flavor(group.name))
    labels = flavor["spec"]["nodeLabels"]
    assert labels[kube.ACCELERATOR_LABEL] == group.shape.gke_accelerator == "tpu-v6e-slice"
    assert labels[kube.TOPOLOGY_LABEL] == "4x4"
    for job_doc in (m for m in prod.manifests if m["kind"] == "RayJob"):
        (g,) = manifests.worker_groups(job_doc)
        selector = g["template"]["spec"]["nodeSelector"]
        # Kueue injects the flavor's labels into the pods: they must agree with what the pods select.
        assert labels.items() <= selector.items()
        if kube.COMPUTE_CLASS_LABEL in selector:  # the group's GKE ComputeClass (workloads/compute_class.py)
            assert labels[kube.COMPUTE_CLASS_LABEL] == names.compute_class(group.name)
    # CPU and memory come from a flavor without labels: the heads stay on the system pool.
    assert one(prod, "ResourceFlavor", names.pod_flavor(spec.ray.cluster_name))["spec"] == {}


def test_priority_classes(prod):
    got = {m["metadata"]["name"]: m["value"] for m in prod.manifests if m["kind"] == "WorkloadPriorityClass"}
    assert got == WORKLOAD_PRIORITIES == {"production": 1000, "research": 500, "drill": 100}
    # The 70B job is the stack's production run: admitted first when all three wait.
    assert prod.spec.job("llama3-70b-multislice").priority == "production"


def test_local_queue_in_the_workload_namespace(prod):
    lq = one(prod, "LocalQueue")
    assert lq["metadata"]["namespace"] == prod.spec.storage.namespace
    assert lq["spec"]["clusterQueue"] == one(prod, "ClusterQueue")["metadata"]["name"]


# --------------------------------------------------------------------------- Kueue's release objects


def test_kueue_installed_from_the_vendored_release(prod):
    """Kueue's release manifest, each object a resource of the program's (a saved plan holds them all on day 0:
    tests/test_journey.py), with the stack's manager configuration and nothing else of its own."""
    from workloads import kueue_install

    installed = [r for r in prod.resources if r.parent and "KueueInstall" in r.parent]
    release = [d for d in kueue_install.release_objects() if d["kind"] != "Namespace"]
    assert sorted((r.inputs["kind"], r.inputs["metadata"]["name"]) for r in installed) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in release)
    assert not prod.by_type("kubernetes:helm.sh/v4:Chart")
    by_kind = {}
    for r in installed:
        by_kind.setdefault(r.inputs["kind"], []).append(r)
    assert len(by_kind["CustomResourceDefinition"]) == 11
    (deployment,) = by_kind["Deployment"]
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == kueue.IMAGE == "registry.k8s.io/kueue/kueue:v0.19.2"
    assert container["imagePullPolicy"] == "IfNotPresent"
    (cm,) = by_kind["ConfigMap"]
    assert cm.inputs["metadata"]["namespace"] == kueue.NAMESPACE == "kueue-system"
    config = yaml.safe_load(cm.inputs["data"]["controller_manager_config.yaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["integrations"]["frameworks"] == ["ray.io/rayjob", "ray.io/raycluster"]
    assert config["manageJobsWithoutQueueName"] is False
    # Kueue's default (30 min, then evicted) would delete pods waiting hours for a fallback slice; recovery
    # eviction off, so an elastic job that lost a slice trains on.
    assert config["waitForPodsReady"] == {"timeout": "24h", "recoveryTimeout": "0s", "blockAdmission": False}
    # The DRANET claim's device class is mapped, or Kueue's DRA integration leaves the TPU pods inadmissible.
    assert config["resources"]["deviceClassMappings"] == [
        {"name": kube.KUEUE_NETDEV_RESOURCE, "deviceClassNames": [kube.NETDEV_DEVICE_CLASS]}]
    # Every other object is the release's own but for the stack's labels.
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in release}
    for r in installed:
        if r.inputs["kind"] in ("ConfigMap", "Deployment"):
            continue
        want = by_name[(r.inputs["kind"], r.inputs["metadata"]["name"])]
        got = {**r.inputs, "metadata": {**r.inputs["metadata"], "labels": want["metadata"].get("labels")}}
        if "labels" not in want["metadata"]:
            del got["metadata"]["labels"]
        assert got == want, r.name
    # The namespace first; CRDs before the rest; the queue objects after all of Kueue (its CRDs and webhook).
    (ns,) = [r for r in prod.by_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "kueue-system"]
    assert ns.urn in deployment.dependencies
    assert {c.urn for c in by_kind["CustomResourceDefinition"]} <= set(deployment.dependencies)
    (cq,) = prod.by_type(f"kubernetes:{kueue.KUEUE_API}:ClusterQueue")
    assert {r.urn for r in installed} <= set(cq.dependencies)


def test_a_vendored_manifest_that_does_not_match_its_digest_is_refused(tmp_path, monkeypatch):
    from workloads import kueue_install

    copy_dir = tmp_path / "kueue"
    copy_dir.mkdir()
    for f in ("manifests.yaml", "SHA256SUMS"):
        (copy_dir / f).write_bytes((kueue_install.DATA / f).read_bytes())
    (copy_dir / "manifests.yaml").write_bytes((copy_dir / "manifests.yaml").read_bytes().replace(
        b"kueue-controller-manager", b"kueue-controller-manageR", 1))
    monkeypatch.setattr(kueue_install, "DATA", copy_dir)
    monkeypatch.setattr(kueue_install, "MANIFEST", copy_dir / "manifests.yaml")
    kueue_install.release_objects.cache_clear()
    try:
        with pytest.raises(ValueError, match="does not match"):
            kueue_install.release_objects()
    finally:
        kueue_install.release_objects.cache_clear()


def test_no_device_mapping_without_dranet():
    cfg = dict(engine.stack_config("prod"))
    del cfg[f"{NS}:network"]
    cfg[f"{NS}:slices"] = json.dumps(
        [{"name": "v6e-8-0", "generation": "v6e", "topology": "2x4", "machineType": "ct6e-standard-8t"}])
    cfg[f"{NS}:jobs"] = json.dumps([{"name": "one-host", "cluster": "dedicated", "slices": 1, "ici": {"fsdp": 8},
                                     "checkpointPeriod": 10}])
    spec = stack_spec.load("prod", cfg)
    assert "resources" not in kueue.manager_config(spec)
    cq = kueue.cluster_queue(spec)
    assert [r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]] == [
        "cpu", "memory", kube.TPU_RESOURCE]
    assert tpu_quota(cq) == {names.resource_flavor(spec.groups[0].name): 8}


# --------------------------------------------------------------------------- flex-start (DWS)


def test_flex_start_goes_through_the_provisioning_request_check(flex, kueue_validator):
    spec = flex.spec
    (group,) = spec.groups
    name = names.provisioning_check(spec.ray.cluster_name)
    config = one(flex, "ProvisioningRequestConfig", name)
    # xpk's DWS config (src/xpk/templates/kueue_config.yaml.j2) sets the same podSetUpdates: the pods go to the
    # nodes GKE provisioned for their request.
    assert config["spec"] == {"provisioningClassName": "queued-provisioning.gke.io",
                              "managedResources": [kube.TPU_RESOURCE],
                              "podSetUpdates": {"nodeSelector": [{
                                  "key": "autoscaling.gke.io/provisioning-request",
                                  "valueFromProvisioningClassDetail": "ResizeRequestName"}]}}
    check = one(flex, "AdmissionCheck", name)
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                           "name": name}
    cq = one(flex, "ClusterQueue")
    assert cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": name, "onFlavors": [names.resource_flavor(group.name)]}]}
    # The quota is still the slices', whichever capacity option serves them.
    assert tpu_quota(cq) == {names.resource_flavor(group.name): 32}
    assert policy_offline.evaluate(flex) == []


def test_flex_start_without_queued_provisioning_needs_no_check():
    cfg = _flex_config()
    slices = json.loads(cfg[f"{NS}:slices"])
    for s in slices:
        s["capacity"][0].pop("queuedProvisioning")
    cfg[f"{NS}:slices"] = json.dumps(slices)
    spec = stack_spec.load("prod", cfg)
    assert kueue.flex_groups(spec) == []
    assert kueue.provisioning_objects(spec) == []


@pytest.mark.parametrize("others", [[{"type": "reservation", "reservation": "tpu-v6e-res"}], [{"type": "spot"}],
                                    [{"type": "on-demand"}]])
def test_queued_provisioning_beside_other_options_is_refused(others):
    """The DWS check would gate the worker group's one flavor, which the other options share, and pin its pods to
    the provisioned nodes: the other options would never be used (the spec names the key and the options)."""
    cfg = with_fallbacks(engine.stack_config("prod"), [*others, {"type": "flex-start", "queuedProvisioning": True}])
    with pytest.raises(SpecError) as e:
        stack_spec.load("prod", cfg)
    msg = str(e.value)
    assert "capacity" in msg and "queuedProvisioning is the slice's only way to capacity" in msg
    assert others[0]["type"] in msg


# --------------------------------------------------------------------------- suspend: an operator's pause


def test_suspend_is_an_operator_pause_outside_the_queue():
    cfg = dict(engine.stack_config("prod"))
    jobs = json.loads(cfg[f"{NS}:jobs"])
    jobs[0]["suspend"] = True
    cfg[f"{NS}:jobs"] = json.dumps(jobs)
    r = engine.render("prod", config=cfg)
    paused = one(r, "RayJob", jobs[0]["name"])
    assert paused["spec"]["suspend"] is True
    assert kube.KUEUE_QUEUE_LABEL not in paused["metadata"]["labels"]  # Kueue would resume it
    assert not r.spec.job(jobs[0]["name"]).queued
    assert [v for v in policy_offline.evaluate(r) if v.rule.startswith("kueue-")] == []


# --------------------------------------------------------------------------- policies


def _violations(resources, fn) -> list[str]:
    return [msg for _, msg in fn(resources, policy_offline.Context("prod"))]


def _edit(resources, type_suffix: str, name: str, change) -> list:
    out = []
    for r in resources:
        if r.type.endswith(type_suffix) and r.props.get("metadata", {}).get("name") == name:
            props = copy.deepcopy(dict(r.props))
            change(props)
            r = replace(r, props=props)
        out.append(r)
    return out


def test_policies_pass_on_prod_and_dev(prod, dev):
    for r in (prod, dev):
        assert [v for v in policy_offline.evaluate(r) if v.rule.startswith("kueue-")] == []


def test_policy_refuses_a_quota_other_than_the_slices(prod):
    resources = policy_offline.resources_of(prod)
    cq = names.cluster_queue(prod.spec.ray.cluster_name)

    def raise_quota(props):
        for g in props["spec"]["resourceGroups"]:
            for f in g["flavors"]:
                for res in f["resources"]:
                    if res["name"] == kube.TPU_RESOURCE:
                        res["nominalQuota"] = "48"

    msgs = _violations(_edit(resources, ":ClusterQueue", cq, raise_quota), rules.tpu_quota_matches_slices)
    assert len(msgs) == 1 and "48 chips" in msgs[0] and "provision 32" in msgs[0]
    # A slice removed from the pools (the quota kept) is caught the same way.
    fewer = [r for r in resources if not r.name.startswith("v6e-16-1")]
    assert any("provision 16" in m for m in _violations(fewer, rules.tpu_quota_matches_slices))


def test_policy_refuses_a_rayjob_without_an_existing_queue(prod):
    resources = policy_offline.resources_of(prod)
    job = "llama3-8b-elastic"
    no_label = _edit(resources, ":RayJob", job, lambda p: p["metadata"]["labels"].pop(kube.KUEUE_QUEUE_LABEL))
    assert any("names no LocalQueue" in m for m in _violations(no_label, rules.rayjob_names_a_queue))
    wrong = _edit(resources, ":RayJob", job,
                  lambda p: p["metadata"]["labels"].update({kube.KUEUE_QUEUE_LABEL: "nope"}))
    assert any("LocalQueue nope" in m for m in _violations(wrong, rules.rayjob_names_a_queue))
    prio = _edit(resources, ":RayJob", job,
                 lambda p: p["metadata"]["labels"].update({kube.KUEUE_PRIORITY_LABEL: "urgent"}))
    assert any("WorkloadPriorityClass urgent" in m for m in _violations(prio, rules.rayjob_names_a_queue))


def test_policy_refuses_kueue_managed_rayjobs_that_break_kueues_rules(prod):
    resources = policy_offline.resources_of(prod)
    job = "llama3-70b-multislice"
    cases = {
        "shutdownAfterJobFinishes": lambda p: p["spec"].update(shutdownAfterJobFinishes=False),
        "enableInTreeAutoscaling": lambda p: p["spec"]["rayClusterSpec"].update(enableInTreeAutoscaling=True),
        "spec.suspend": lambda p: p["spec"].update(suspend=False),
    }
    for what, change in cases.items():
        msgs = _violations(_edit(resources, ":RayJob", job, change), rules.queued_rayjob_lifecycle)
        assert len(msgs) == 1 and what in msgs[0], (what, msgs)
    # Registered once, mandatory (slicectl preview exits 1 on them).
    from policies import registry
    for name in ("kueue-rayjob-queue", "kueue-rayjob-lifecycle", "kueue-tpu-quota-matches-slices"):
        assert registry.rule(name).enforcement == registry.MANDATORY


def test_the_vendored_release_installs_the_crds_the_tests_validate_against():
    """Kueue's release manifest (workloads/data/) and the CRDs vendored for validation (vendor/kueue/) come
    from the same commit: each CRD the release installs serves the same versions and schemas."""
    from pathlib import Path

    from workloads import kueue_install

    reference = {}
    for p in (Path(__file__).resolve().parents[1] / "vendor" / "kueue").glob("*.yaml"):
        d = yaml.safe_load(p.read_text())
        reference[d["metadata"]["name"]] = d
    crds = [d for d in kueue_install.release_objects() if d["kind"] == "CustomResourceDefinition"]
    assert sorted(d["metadata"]["name"] for d in crds) == sorted(reference)
    for d in crds:
        want = reference[d["metadata"]["name"]]["spec"]
        assert (d["spec"]["names"], d["spec"]["versions"]) == (want["names"], want["versions"]), d["metadata"]["name"]


def _typed(value):
    """``value`` with every scalar paired with its exact type, dict keys included."""
    if isinstance(value, dict):
        return [(_typed(k), _typed(v)) for k, v in value.items()]  # key order too
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return type(value), value


@pytest.mark.parametrize("text", [
    None,  # the vendored release manifest itself
    "a: &x {b: 1}\nc: *x\nd: [*x, *x]\n",
    "base: &b {x: 1}\nd:\n  <<: *b\n  y: 2\n",
    "- 1\n- true\n- null\n- 2020-01-01\n- 1.5\n- 'yes'\n- !!str 3\n- 0x1F\n- ~\n---\n...\n---\nplain\n",
], ids=["release", "aliases", "merge-key", "scalars"])
def test_the_release_manifest_reads_as_yaml_loads_it(text):
    """``kueue_install._documents`` builds strings, mappings and sequences itself: the same documents as
    ``yaml.load_all`` with the same loader, aliases the same objects."""
    from workloads import kueue_install

    raw = kueue_install.MANIFEST.read_bytes() if text is None else text.encode()
    expected = list(yaml.load_all(raw, Loader=kueue_install._LOADER))
    got = kueue_install._documents(raw)
    assert got == expected
    assert _typed(got) == _typed(expected)  # ``==`` alone takes 1 == 1.0 == True and "1" apart only by type
    if text and "*x" in text:
        assert got[0]["c"] is got[0]["a"] and got[0]["d"][0] is got[0]["a"]


def test_a_collection_as_a_key_is_refused_as_yaml_refuses_it():
    from workloads import kueue_install

    with pytest.raises(yaml.constructor.ConstructorError, match="unhashable key"):
        kueue_install._documents(b"? [1, 2]\n: x\n")


def test_a_value_key_reads_as_yaml_loads_it():
    """A plain ``=`` resolves to YAML's ``value`` tag, which SafeConstructor's ``flatten_mapping`` turns into the
    string key ``"="`` (PyYAML constructor.py, ``flatten_mapping``); left to ``construct_object`` it has no
    constructor and raises."""
    from workloads import kueue_install

    raw = b"a:\n  =: x\n---\n=: 1\n"
    assert kueue_install._documents(raw) == list(yaml.load_all(raw, Loader=kueue_install._LOADER))
