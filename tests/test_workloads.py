"""Workloads: the DRANET claim, the trainer ConfigMap, the RayCluster and the RayJobs.

The real program runs under mocks (``engine.render``: GCP and the Pulumi engine are
the only stand-ins). No Kubernetes API server can run here, so the KubeRay CRDs'
``openAPIV3Schema`` (vendored in ``vendor/``) and KubeRay's own RayJob rules stand
in for the server's validation. The seed tutorial is read from the same place and
parsed: its manifest and its commands are the reference, not values retyped here.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shlex
import textwrap
from typing import Any

import pytest
import yaml

from offline import engine
from stackspec import kube, names, tpu
from stackspec import spec as stack_spec
from workloads import manifests, security
from workloads import monitoring as gmp
from workloads.trainer.shipped_files import files_sha256
from workloads.trainer_args import TRAINER_SCRIPT, trainer_argv

NS = stack_spec.PROJECT
TPU = "google.com/tpu"


# --------------------------------------------------------------------------- renderings


def _shapes_config() -> dict[str, str]:
    """prod with three multi-host shapes (2x4 on two 4-chip hosts, 4x8, 16x16) and jobs on each."""
    cfg = dict(engine.stack_config("prod"))
    pools = [("2x4", 2), ("4x8", 2), ("16x16", 1)]
    cfg[f"{NS}:slices"] = json.dumps(
        [
            {"name": f"v6e-{topo}-{i}", "generation": "v6e", "topology": topo, "machineType": "ct6e-standard-4t"}
            for topo, n in pools
            for i in range(n)
        ]
    )
    group = {t: tpu.resolve("v6e", t, "ct6e-standard-4t") for t, _ in pools}
    cfg[f"{NS}:jobs"] = json.dumps(
        [
            {
                "name": "small-shared",
                "group": group["2x4"].group_name,
                "slices": 2,
                "ici": {"fsdp": group["2x4"].chips},
                "dcn": {"data": 2},
            },
            {
                "name": "mid-elastic",
                "group": group["4x8"].group_name,
                "cluster": "dedicated",
                "mode": "elastic",
                "minSlices": 1,
                "maxSlices": 2,
                "maxFailures": 2,
                "ici": {"fsdp": group["4x8"].chips},
                "checkpointPeriod": 10,  # no Young/Daly inputs for this shape (stackspec.checkpoints)
            },
            {
                "name": "big-dedicated",
                "group": group["16x16"].group_name,
                "cluster": "dedicated",
                "slices": 1,
                "ici": {"fsdp": 64, "tensor": 4},
            },
        ]
    )
    return cfg


def _single_host_config() -> dict[str, str]:
    """prod on one 2x4 slice of a single 8-chip host: no secondary networks, no DRANET."""
    cfg = dict(engine.stack_config("prod"))
    del cfg[f"{NS}:network"]
    cfg[f"{NS}:slices"] = json.dumps(
        [{"name": "v6e-8-0", "generation": "v6e", "topology": "2x4", "machineType": "ct6e-standard-8t"}]
    )
    cfg[f"{NS}:jobs"] = json.dumps([{"name": "one-host", "slices": 1, "ici": {"fsdp": 8}}])
    return cfg


@pytest.fixture(scope="module")
def shapes() -> engine.Rendering:
    return engine.render("prod", config=_shapes_config())


@pytest.fixture(scope="module")
def single_host() -> engine.Rendering:
    return engine.render("prod", config=_single_host_config())


def docs(r: engine.Rendering, kind: str) -> list[dict[str, Any]]:
    return [m for m in r.manifests if m["kind"] == kind]


def doc(r: engine.Rendering, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [m for m in docs(r, kind) if name is None or m["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [m["metadata"]["name"] for m in docs(r, kind)])
    return found[0]


def job_doc(r: engine.Rendering, name: str) -> dict[str, Any]:
    """A job's RayJob as rendered: applied, or - for a suspended shared job, which is not
    submitted - held for review (``Rendering.held``, ``manifests/held/``)."""
    job = next(j for j in r.spec.jobs if j.name == name)
    if job in manifests.declared_jobs(r.spec):
        return doc(r, "RayJob", name)
    return next(d for d in r.held if d["metadata"]["name"] == name)


def cluster_doc(r: engine.Rendering) -> dict[str, Any]:
    """The seed's RayCluster: the shared one where a stack declares it, else the cluster the first
    multislice job brings (prod: every job is queued by Kueue, which needs a job's own cluster)."""
    if manifests.needs_shared_cluster(r.spec):
        return doc(r, "RayCluster")
    job = next(j for j in r.spec.jobs if not j.elastic)
    return {"apiVersion": manifests.RAY_API, "kind": "RayCluster",
            "metadata": {"name": r.spec.ray.cluster_name}, "spec": job_doc(r, job.name)["spec"]["rayClusterSpec"]}


def groups_of(d: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in manifests.worker_groups(d)}


def container(pod_template: dict[str, Any]) -> dict[str, Any]:
    (c,) = pod_template["spec"]["containers"]
    return c


def env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c["env"]}


# --------------------------------------------------------------------------- the seed


def seed_manifests(seed_text: str, spec: stack_spec.StackSpec) -> dict[str, dict[str, Any]]:
    """The seed's ``ray-cluster.tpu-multi-slice.yaml`` with its variables set from ``spec``."""
    lines = seed_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "apiVersion: resource.k8s.io/v1")
    end = next(i for i, line in enumerate(lines) if "The preceding RayCluster spec" in line)
    block = textwrap.dedent("\n".join(lines[start:end]))
    block = block.replace("${KSA_NAME}", spec.storage.service_account)
    block = block.replace("${GS_BUCKET}", spec.storage.bucket)
    return {d["kind"]: d for d in yaml.safe_load_all(block)}


def seed_commands(seed_text: str) -> list[tuple[str, dict[str, str]]]:
    """Each ``ray job submit ... -- python <script> base.yml k=v ...`` of the seed."""
    out = []
    for script, args in re.findall(r"-- python (maxtext_\w+\.py)((?:\s*\\\n\s*\S+)+)", seed_text):
        tokens = args.replace("\\\n", " ").split()
        out.append((script, dict(t.split("=", 1) for t in tokens if "=" in t)))
    return out


def missing_from(seed: Any, ours: Any, path: str = "") -> list[str]:
    """Where ``ours`` lacks or changes a field of ``seed`` (extra fields in ours are fine).

    Lists of named items (containers, env, ports, volumes, mounts) match by name.
    """
    if isinstance(seed, dict):
        if not isinstance(ours, dict):
            return [f"{path}: {ours!r} is not a mapping"]
        return [
            m
            for k, v in seed.items()
            for m in (missing_from(v, ours[k], f"{path}.{k}") if k in ours else [f"{path}.{k}: missing"])
        ]
    if isinstance(seed, list) and seed and all(isinstance(i, dict) and "name" in i for i in seed):
        theirs = {i["name"]: i for i in ours or [] if isinstance(i, dict)}
        return [
            m
            for item in seed
            for m in (
                missing_from(item, theirs[item["name"]], f"{path}[{item['name']}]")
                if item["name"] in theirs
                else [f"{path}[{item['name']}]: missing"]
            )
        ]
    if isinstance(seed, list):
        if not isinstance(ours, list) or len(ours) != len(seed):
            return [f"{path}: {ours!r} != {seed!r}"]
        return [m for i, (a, b) in enumerate(zip(seed, ours, strict=True)) for m in missing_from(a, b, f"{path}[{i}]")]
    # YAML reads the seed's unquoted numbers as ints and quoted ones as strings; so do we.
    return [] if seed == ours and type(seed) is type(ours) else [f"{path}: {ours!r} != seed {seed!r}"]


def load_trainer():
    spec_ = importlib.util.spec_from_file_location("maxtext_trainer", TRAINER_SCRIPT)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- KubeRay rules


def kuberay_rayjob_problems(d: dict[str, Any]) -> list[str]:
    """KubeRay's controller-side RayJob checks (ray-operator utils/validation.go,
    ``ValidateRayJobSpec``/``validateDeletionConfiguration``) for the fields we set;
    the CRD's CEL rules on ``deletionStrategy`` as well, since jsonschema skips CEL."""
    s, out = d["spec"], []
    if ("clusterSelector" in s) == ("rayClusterSpec" in s):
        out.append("exactly one of clusterSelector and rayClusterSpec")
    if s.get("ttlSecondsAfterFinished", 0) > 0 and not s.get("shutdownAfterJobFinishes"):
        out.append("ttlSecondsAfterFinished needs shutdownAfterJobFinishes")
    if s.get("backoffLimit", 0) < 0:
        out.append("backoffLimit must be a positive integer")
    if "clusterSelector" in s and s.get("suspend"):
        out.append("clusterSelector mode does not support suspend")
    ds = s.get("deletionStrategy")
    if ds is not None:
        # validateDeletionConfiguration: refused unless the operator runs with this gate,
        # which GKE's managed Ray operator does not.
        out.append("deletionStrategy needs KubeRay's RayJobDeletionPolicy feature gate")
        legacy = "onSuccess" in ds or "onFailure" in ds
        if legacy and "deletionRules" in ds:
            out.append("legacy policies and deletionRules together")
        if not (("onSuccess" in ds and "onFailure" in ds) or "deletionRules" in ds):
            out.append("deletionStrategy needs onSuccess and onFailure, or deletionRules")
        if legacy:
            policies = [ds[k]["policy"] for k in ("onSuccess", "onFailure") if k in ds]
            if "clusterSelector" in s and set(policies) & {"DeleteCluster", "DeleteWorkers"}:
                out.append(f"clusterSelector mode does not support {policies}")
            if s.get("shutdownAfterJobFinishes") and "DeleteNone" in policies:
                out.append("shutdownAfterJobFinishes with DeleteNone")
        if "deletionRules" in ds and s.get("shutdownAfterJobFinishes"):
            out.append("deletionRules and shutdownAfterJobFinishes are exclusive")
    return out


# --------------------------------------------------------------------------- component


def test_component_children_parent_and_provider(prod):
    (comp,) = [r for r in prod.resources if r.type == "tpu-multislice:workloads:RayWorkloads"]
    kids = prod.children(comp)
    spec = prod.spec
    assert sorted((r.type, r.name) for r in kids) == sorted(
        [
            ("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", f"{comp.name}-netdev"),
            ("kubernetes:core/v1:ConfigMap", f"{comp.name}-trainer"),
            # Kueue and the stack's queues (tests/test_kueue.py checks them).
            ("tpu-multislice:workloads:KueueQueueing", f"{comp.name}-kueue"),
        ]
        # One ComputeClass per worker group (tests/test_compute_class.py checks them).
        + [("kubernetes:cloud.google.com/v1:ComputeClass", f"{comp.name}-{g.compute_class}") for g in spec.groups]
        + ([("kubernetes:ray.io/v1:RayCluster", f"{comp.name}-cluster")]
           if manifests.needs_shared_cluster(spec) else [])
        + [("kubernetes:ray.io/v1:RayJob", f"{comp.name}-{j.name}") for j in manifests.declared_jobs(spec)]
        # Two NetworkPolicies per RayCluster (head, workers), the drill RBAC (tests/test_incluster_security.py).
        + [("kubernetes:networking.k8s.io/v1:NetworkPolicy", f"{comp.name}-{d['metadata']['name']}")
           for d in security.network_policies(spec, manifests.needs_shared_cluster(spec),
                                              manifests.declared_jobs(spec))]
        + [(f"kubernetes:rbac.authorization.k8s.io/v1:{d['kind']}", f"{comp.name}-drill-{d['kind'].lower()}")
           for d in security.drill_rbac(spec)]
        + [("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy", f"{comp.name}-drill-admission"),
           ("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
            f"{comp.name}-drill-admission-binding")]
        # GMP scraping of the Ray metrics port (tests/test_monitoring.py checks them).
        + [("kubernetes:monitoring.googleapis.com/v1:PodMonitoring", f"{comp.name}-{d['metadata']['name']}")
           for d in gmp.pod_monitorings(spec)]
    )
    # Every object goes through the provider built from the cluster (the mock's id for it).
    (provider,) = prod.by_type("pulumi:providers:kubernetes")
    # (The Kueue component has no provider of its own: its children take the one it was given.)
    assert {r.provider for r in kids if r.custom} == {f"{provider.name}-offline-id"}
    kueue_kids = [r for k in kids if not k.custom for r in prod.children(k)]
    assert kueue_kids and {r.provider for r in kueue_kids if r.custom} == {f"{provider.name}-offline-id"}


# Kinds without a namespace: Kueue's flavors, priority classes, checks and ClusterQueue; GKE's
# ComputeClass; the drill identity's cluster role and admission policy; Kueue's own namespace.
CLUSTER_SCOPED = {"ResourceFlavor", "WorkloadPriorityClass", "AdmissionCheck", "ProvisioningRequestConfig",
                  "ClusterQueue", "ComputeClass", "ClusterRole", "ClusterRoleBinding", "Namespace",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def test_prod_objects(prod):
    spec = prod.spec
    names = {(m["kind"], m["metadata"]["name"]) for m in prod.manifests}
    assert {
        ("ResourceClaimTemplate", "two-netdev"),
        ("ConfigMap", manifests.trainer_configmap_name(spec)),
    } <= names
    # Every prod job is queued by Kueue with its own cluster: no long-lived RayCluster holds the slices.
    assert ("RayCluster", spec.ray.cluster_name) not in names
    assert {m["metadata"]["name"] for m in docs(prod, "RayJob")} == {j.name for j in manifests.declared_jobs(spec)}
    # Kueue's release objects (workloads/kueue_install.py) live where its manifest puts them: kueue-system, the
    # visibility server's reader binding in kube-system, the rest cluster-scoped.
    from workloads import kueue_install

    release = {(d["kind"], d["metadata"]["name"]) for d in kueue_install.release_objects()}
    own = [m for m in prod.manifests if (m["kind"], m["metadata"]["name"]) not in release]
    assert {m["metadata"].get("namespace") for m in prod.manifests if (m["kind"], m["metadata"]["name"]) in release
            } == {"kueue-system", "kube-system", None}
    for m in own:
        if m["kind"] != "ServiceAccount" and "namespace" in m["metadata"]:
            assert m["metadata"]["namespace"] == spec.storage.namespace
    # The namespaced objects of the workloads all live in the workload namespace.
    assert {m["kind"] for m in own if "namespace" not in m["metadata"]} <= CLUSTER_SCOPED


# --------------------------------------------------------------------------- CRD schemas


@pytest.mark.parametrize("stack", ["prod", "dev", "shapes", "single_host"])
def test_ray_objects_validate_against_kuberay_crds(stack, request, kuberay_validator):
    r = request.getfixturevalue(stack)
    ray_docs = docs(r, "RayCluster") + docs(r, "RayJob")
    assert ray_docs
    for d in ray_docs:
        assert kuberay_validator(d) == [], d["metadata"]["name"]
        if d["kind"] == "RayJob":
            assert kuberay_rayjob_problems(d) == [], d["metadata"]["name"]


def test_schema_check_catches_mistakes(prod, kuberay_validator):
    """The strict schema is not vacuous: a misspelt field and a wrong type both fail."""
    bad = copy.deepcopy(cluster_doc(prod))
    bad["spec"]["workerGroupSpecs"][0]["numOfHost"] = 4
    assert any("numOfHost" in e for e in kuberay_validator(bad))
    bad = copy.deepcopy(job_doc(prod, prod.spec.jobs[0].name))
    bad["spec"]["backoffLimit"] = "none"
    assert any("backoffLimit" in e for e in kuberay_validator(bad))
    bad = copy.deepcopy(job_doc(prod, prod.spec.jobs[0].name))
    bad["spec"]["deletionStrategy"] = {
        "onSuccess": {"policy": "DeleteCluster"},
        "onFailure": {"policy": "DeleteCluster"},
    }
    assert kuberay_rayjob_problems(bad)


# --------------------------------------------------------------------------- the seed


def test_prod_carries_every_field_of_the_seed_manifest(prod, seed_text):
    spec = prod.spec
    seed = seed_manifests(seed_text, spec)
    # The one deliberate change: prod pins a released image instead of the seed's nightly.
    seed_image = seed["RayCluster"]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    assert "nightly" in seed_image and "nightly" not in spec.ray.image
    # And its containers run the prebuilt worker image by digest (tests/test_image.py).
    text = yaml.safe_dump(seed["RayCluster"]).replace(seed_image, spec.worker_image)
    seed_cluster = yaml.safe_load(text)
    # And its TPU workers are not privileged: GKE >= 1.28 hands a container its TPU chips
    # without it (README, "Inside the cluster"); the pinned version is 1.35.
    assert spec.cluster.version.startswith("1.35")
    for group in seed_cluster["spec"]["workerGroupSpecs"]:
        for c in group["template"]["spec"]["containers"]:
            if c.get("securityContext", {}).get("privileged"):
                c["securityContext"]["privileged"] = False

    assert missing_from(seed["ResourceClaimTemplate"], doc(prod, "ResourceClaimTemplate")) == []
    # The seed's cluster is now the one each queued job brings: the same spec, named by KubeRay.
    assert missing_from(seed_cluster["spec"], cluster_doc(prod)["spec"]) == []


def test_prod_seed_values(prod):
    """The headline numbers, read from the rendering: two 4x4 slices of four 4-chip hosts."""
    rct = doc(prod, "ResourceClaimTemplate")
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == len(prod.spec.networks) == 2
    (g,) = manifests.worker_groups(cluster_doc(prod))
    c = container(g["template"])
    assert (g["numOfHosts"], g["replicas"]) == (4, 2)
    assert c["resources"]["requests"][TPU] == c["resources"]["limits"][TPU] == "4"
    assert env(c)["MEGASCALE_NUM_SLICES"] == "2"
    assert env(c)["LIBTPU_INIT_ARGS"].endswith("--megascale_grpc_interface_prefixes=eth1,eth2,lo")


def test_dev_uses_the_seed_image_and_its_own_shape(dev, seed_text):
    seed = seed_manifests(seed_text, dev.spec)["RayCluster"]
    cluster = doc(dev, "RayCluster")
    assert (
        container(cluster["spec"]["headGroupSpec"]["template"])["image"]
        == seed["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]
    )
    (group,) = dev.spec.groups
    g = groups_of(cluster)[group.name]
    assert g["numOfHosts"] == group.shape.hosts == 2  # 2x4 on two ct6e-standard-4t hosts
    assert g["replicas"] == group.replicas == 1
    assert env(container(g["template"]))["MEGASCALE_NUM_SLICES"] == "1"


def test_head_service_is_not_public(prod, dev, shapes):
    for r in (prod, dev, shapes):
        heads = [d["spec"]["headGroupSpec"] for d in docs(r, "RayCluster")]
        heads += [
            d["spec"]["rayClusterSpec"]["headGroupSpec"] for d in docs(r, "RayJob") if "rayClusterSpec" in d["spec"]
        ]
        assert heads
        for h in heads:
            assert h["serviceType"] == "ClusterIP" and h["enableIngress"] is False
        assert "LoadBalancer" not in json.dumps(r.manifests)


def test_seed_job_commands(prod, seed_text):
    """Each of the seed's three ``ray job submit`` commands is a RayJob with its MaxText
    settings, and its JaxTrainer ScalingConfig is what our trainer builds from the entrypoint."""
    trainer = load_trainer()
    # Run names are derived (stackspec.runs), not the seed's: match a command by model and script.
    by_kind = {(j.model, j.elastic): (j, job_doc(prod, j.name)) for j in prod.spec.jobs}
    commands = seed_commands(seed_text)
    assert len(commands) == 3
    # The seed's two scripts: fixed num_workers=8, elastic (4, 8) with max_failures=3.
    fixed = int(re.search(r"num_workers=(\d+),", seed_text).group(1))
    lo, hi = map(int, re.search(r"num_workers=\((\d+),\s*(\d+)\)", seed_text).group(1, 2))
    failures = int(re.search(r"FailureConfig\(max_failures=(\d+)\)", seed_text).group(1))
    topology = re.search(r'topology="([^"]+)"', seed_text).group(1)
    accel = re.search(r'accelerator_type="([^"]+)"', seed_text).group(1)
    per_worker = int(re.search(r'resources_per_worker=\{"TPU": (\d+)\}', seed_text).group(1))

    for script, settings in commands:
        spec_job, job = by_kind[(settings["model_name"], "elastic" in script)]
        argv = shlex.split(job["spec"]["entrypoint"])
        own, ours = argv[2 : argv.index("--")], dict(a.split("=", 1) for a in argv[argv.index("--") + 1 :])
        settings = {k: v for k, v in settings.items() if k != "run_name"}
        assert {k: ours.get(k) for k in settings} == settings, script
        assert ours["run_name"] == spec_job.run_name
        args, _ = trainer.parse_args(argv[2:])
        expected = (lo, hi) if "elastic" in script else fixed
        assert trainer.num_workers(args) == expected
        assert (args.topology, args.accelerator_type, args.chips_per_host) == (topology, accel, per_worker)
        if "elastic" in script:
            assert args.max_failures == failures
        assert "--storage-path" in own


def test_70b_job_has_dcn_fsdp_and_full_remat(prod, seed_text):
    (job,) = [j for j in prod.spec.jobs if j.model == "llama3-70b"]
    argv = shlex.split(job_doc(prod, job.name)["spec"]["entrypoint"])
    assert {
        "dcn_fsdp_parallelism=2",
        "remat_policy=full",
        "ici_tensor_parallelism=4",
        "ici_fsdp_parallelism=4",
        "per_device_batch_size=2",
    } <= set(argv)


# --------------------------------------------------------------------------- jobs


def test_entrypoint_runs_the_mounted_trainer(prod):
    spec = prod.spec
    cm = doc(prod, "ConfigMap", manifests.trainer_configmap_name(spec))
    head = cluster_doc(prod)["spec"]["headGroupSpec"]["template"]
    (vol,) = [v for v in head["spec"]["volumes"] if v.get("configMap")]
    (mount,) = [m for m in container(head)["volumeMounts"] if m["name"] == vol["name"]]
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    script = f"{mount['mountPath']}/{TRAINER_SCRIPT.name}"
    assert TRAINER_SCRIPT.name in cm["data"]
    for job in spec.jobs:
        argv = shlex.split(job_doc(prod, job.name)["spec"]["entrypoint"])
        assert argv == ["python", script, "--script-sha256", cm["metadata"]["annotations"][
            manifests.TRAINER_HASH_ANNOTATION], *trainer_argv(spec, job, local=False)]
        # MaxText is in the worker image only once its digest is set: the trainer's own flag says so
        # (before MaxText's settings). prod as shipped is in the first phase: ray.image, MaxText installed.
        own = argv[:argv.index("--")]
        assert ("--prebuilt-image" in own) == spec.prebuilt_image
        assert "--prebuilt-image" not in own and spec.image is not None and spec.image.pending


def test_shared_and_dedicated_jobs(shapes):
    spec = shapes.spec
    cluster = doc(shapes, "RayCluster")
    for job in spec.jobs:
        d = job_doc(shapes, job.name)
        s = d["spec"]
        assert s["activeDeadlineSeconds"] == job.active_deadline_seconds
        assert s["backoffLimit"] == job.backoff_limit
        assert s["submissionMode"] == "K8sJobMode"
        assert kuberay_rayjob_problems(d) == []
        if job.cluster == "shared":
            assert s["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
            assert "rayClusterSpec" not in s and s["shutdownAfterJobFinishes"] is False
            assert "deletionStrategy" not in s  # feature-gated in KubeRay; the default is right
        else:
            # Its own cluster: the job's group only, sized to the job's slices, gone when it ends (queued:
            # Kueue frees its quota then, so clusterTtlSeconds is 0).
            assert "clusterSelector" not in s
            assert job.queued and s["shutdownAfterJobFinishes"] is True
            assert s["ttlSecondsAfterFinished"] == job.cluster_ttl_seconds == 0
            assert "deletionStrategy" not in s
            (g,) = s["rayClusterSpec"]["workerGroupSpecs"]
            assert g["groupName"] == job.group
            assert (g["replicas"], g["minReplicas"], g["maxReplicas"]) == (job.slices, job.min_slices, job.slices)
            assert env(container(g["template"]))["MEGASCALE_NUM_SLICES"] == str(job.slices)
            head = s["rayClusterSpec"]["headGroupSpec"]["template"]
            assert any(v.get("configMap") for v in head["spec"]["volumes"])
    # The shared cluster holds every group, elastic or not.
    assert set(groups_of(cluster)) == {g.name for g in spec.groups}


def test_no_shared_cluster_when_every_job_brings_its_own(prod):
    cfg = dict(engine.stack_config("prod"))
    jobs = json.loads(cfg[f"{NS}:jobs"])
    for j in jobs:
        j["cluster"] = "dedicated"
    cfg[f"{NS}:jobs"] = json.dumps(jobs)
    spec = stack_spec.load("prod", cfg)
    kinds = [d["kind"] for d in manifests.all_objects(spec)]
    assert "RayCluster" not in kinds and kinds.count("RayJob") == len(jobs)
    # prod as written queues every job through Kueue, each on its own cluster: no shared one.
    assert not manifests.needs_shared_cluster(prod.spec)


# --------------------------------------------------------------------------- shapes


# GKE's v6e multi-host table on ct6e-standard-4t: topology -> hosts (Plan TPUs in GKE).
GKE_V6E_HOSTS = {"2x4": 2, "4x8": 8, "16x16": 64}


def test_worker_shapes_follow_the_slice_model(shapes):
    spec = shapes.spec
    cluster = doc(shapes, "RayCluster")
    got = groups_of(cluster)
    assert len(got) == len(spec.groups) == 3
    for group in spec.groups:
        g, shape = got[group.name], group.shape
        c = container(g["template"])
        assert g["numOfHosts"] == shape.hosts == GKE_V6E_HOSTS[shape.topology]
        assert g["replicas"] == group.replicas
        assert c["resources"]["requests"][TPU] == c["resources"]["limits"][TPU] == str(shape.chips_per_host)
        assert g["template"]["spec"]["nodeSelector"] == {
            **manifests.METADATA_SERVER_SELECTOR,
            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
            "cloud.google.com/gke-tpu-topology": shape.topology,
            "cloud.google.com/compute-class": f"{group.name}-class",  # the group's capacity fallbacks
        }
        assert g["template"]["spec"]["resourceClaims"] == [
            {"name": "netdev", "resourceClaimTemplateName": "two-netdev"}
        ]
        assert env(c)["MEGASCALE_NUM_SLICES"] == str(group.replicas)
        assert g["rayStartParams"]["metrics-export-port"] == str(spec.ray.metrics_export_port)
    # The elastic job on 4x8 lets its group shrink to one slice; the others stay whole.
    elastic = {j.group: j.min_slices for j in spec.jobs if j.cluster == "shared"}
    for group in spec.groups:
        assert got[group.name]["minReplicas"] == elastic.get(group.name, group.replicas)
        assert got[group.name]["maxReplicas"] == group.replicas


def test_single_host_slice_has_no_dranet(single_host):
    assert docs(single_host, "ResourceClaimTemplate") == []
    (g,) = manifests.worker_groups(doc(single_host, "RayCluster"))
    c = container(g["template"])
    assert g["numOfHosts"] == 1
    assert c["resources"]["limits"][TPU] == "8"
    assert "resourceClaims" not in g["template"]["spec"] and "claims" not in c["resources"]
    assert "megascale_grpc_interface_prefixes" not in env(c)["LIBTPU_INIT_ARGS"]


def test_nics_and_claim_follow_the_networks():
    cfg = dict(engine.stack_config("prod"))
    net = json.loads(cfg[f"{NS}:network"])
    net["secondary"].append({"subnet": "tpu-subnet-3", "cidr": "10.70.0.0/16"})
    cfg[f"{NS}:network"] = json.dumps(net)
    spec = stack_spec.load("prod", cfg)
    rct = manifests.resource_claim_template(spec)
    assert rct["metadata"]["name"] == "three-netdev"
    assert rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 3
    (g,) = manifests.worker_groups(manifests.ray_cluster(spec))
    assert env(container(g["template"]))["LIBTPU_INIT_ARGS"].endswith(
        "--megascale_grpc_interface_prefixes=eth1,eth2,eth3,lo"
    )
    assert g["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "three-netdev"


# --------------------------------------------------------------------------- trainer ConfigMap


def test_configmap_embeds_the_script_with_its_hash(prod):
    source = TRAINER_SCRIPT.read_text()
    cm = doc(prod, "ConfigMap", manifests.trainer_configmap_name(prod.spec))
    assert cm["data"] == {TRAINER_SCRIPT.name: source, **{m.name: m.read_text() for m in manifests.TRAINER_MODULES}}
    digest = files_sha256(cm["data"])  # over every file it ships (tests/test_trainer_modules.py: a module's change)
    assert cm["metadata"]["annotations"][manifests.TRAINER_HASH_ANNOTATION] == digest
    for d in docs(prod, "RayJob"):
        assert d["metadata"]["annotations"][manifests.TRAINER_HASH_ANNOTATION] == digest


def test_a_script_change_changes_the_hash_on_configmap_and_jobs(prod):
    spec, job = prod.spec, prod.spec.jobs[0]
    source = TRAINER_SCRIPT.read_text()
    changed = source + "\n# a change\n"
    before = manifests.trainer_configmap(spec, source)["metadata"]["annotations"]
    after = manifests.trainer_configmap(spec, changed)["metadata"]["annotations"]
    assert before != after
    assert after[manifests.TRAINER_HASH_ANNOTATION] == files_sha256(manifests.trainer_configmap(spec, changed)["data"])
    assert (
        manifests.ray_job(spec, job, changed)["metadata"]["annotations"]
        == after | manifests.image_annotations(spec)
        != manifests.ray_job(spec, job, source)["metadata"]["annotations"]
    )


def test_suspended_jobs(prod, shapes):
    """Every prod job is declared and queued (no ``suspend`` of its own: Kueue's webhook suspends
    it and admission resumes it); ``suspend: true`` is an operator's pause: a dedicated job is
    declared suspended and outside the queue, a shared one is not submitted at all."""
    jobs = {d["metadata"]["name"]: d for d in prod.manifests if d["kind"] == "RayJob"}
    assert set(jobs) == {j.name for j in prod.spec.jobs}  # all three seed jobs
    for d in jobs.values():
        assert "suspend" not in d["spec"]
        assert d["metadata"]["labels"][kube.KUEUE_QUEUE_LABEL] == names.local_queue(prod.spec.ray.cluster_name)
    s = stack_spec.load("prod", engine.stack_config("prod"))
    paused = s.jobs[1].model_copy(update={"suspend": True})
    body = manifests.ray_job(s, paused)
    assert body["spec"]["suspend"] is True
    assert kube.KUEUE_QUEUE_LABEL not in body["metadata"].get("labels", {})
    shared = s.jobs[1].model_copy(update={"suspend": True, "cluster": "shared"})
    assert shared not in manifests.declared_jobs(s.model_copy(update={"jobs": (shared,)}))


def test_entrypoint_pins_the_script_version_of_its_annotation(prod):
    for d in [doc(prod, "RayJob", j.name) for j in manifests.declared_jobs(prod.spec)] + prod.held:
        argv = shlex.split(d["spec"]["entrypoint"])
        digest = argv[argv.index("--script-sha256") + 1]
        assert digest == d["metadata"]["annotations"][manifests.TRAINER_HASH_ANNOTATION]


# KubeRay v1.6.0 (ray-operator/controllers/ray/common/pod.go:224-231 head, 446-453 workers; utils/constant.go:104,111):
#   isMetricsPortExists := utils.FindContainerPort(&podTemplate.Spec.Containers[utils.RayContainerIndex],
#                                                  utils.MetricsPortName, -1) != -1
#   if !isMetricsPortExists { ... Name: utils.MetricsPortName, ContainerPort: int32(utils.DefaultMetricsPort) ... }
# with MetricsPortName = "metrics", DefaultMetricsPort = 8080, and the Ray container the first (RayContainerIndex 0).
KUBERAY_METRICS_PORT_NAME, KUBERAY_DEFAULT_METRICS_PORT = "metrics", 8080


def _kuberay_ports(container: dict) -> list[dict]:
    """The Ray container's ports after KubeRay's pod builder: its default metrics port added when none is named."""
    ports = list(container.get("ports", []))
    if not any(p.get("name") == KUBERAY_METRICS_PORT_NAME for p in ports):
        ports.append({"name": KUBERAY_METRICS_PORT_NAME, "containerPort": KUBERAY_DEFAULT_METRICS_PORT})
    return ports


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_named_metrics_port_is_the_one_ray_exports_on(stack, request):
    """Every Ray head and worker container, as KubeRay builds its pod, names as ``metrics`` the port Ray exports on
    (``rayStartParams.metrics-export-port``, 8082), not KubeRay's default 8080 (k8s review 1.5)."""
    r = request.getfixturevalue(stack)
    seen = 0
    for d in r.manifests:
        if d["kind"] not in ("RayJob", "RayCluster") or (d["kind"] == "RayJob" and "rayClusterSpec" not in d["spec"]):
            continue
        spec = d["spec"].get("rayClusterSpec", d["spec"])
        for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
            ray_container = group["template"]["spec"]["containers"][0]
            named = [p["containerPort"] for p in _kuberay_ports(ray_container) if p["name"] == "metrics"]
            assert named == [int(group["rayStartParams"]["metrics-export-port"])] == [8082], d["metadata"]["name"]
            seen += 1
    assert seen >= 2
