"""``slicectl jobs`` and ``slicectl logs``: the real commands and the real ``kubectl``, against stand-in
API servers (tests/kubectl_standin.py), one per cluster, named by the contexts get-credentials writes.

A multi-region stack: the manager holds the Workloads (each valid against Kueue v0.19.2's vendored
Workload CRD) and no pods; each region's cluster holds the RayJobs MultiKueue copied there and the
submitter Jobs' pods with their logs.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

import pytest
from kubectl_standin import Cluster, MultiRegion, Server, kubeconfig

from offline import engine
from slicectl import cli, where
from stackspec import names
from stackspec import spec as stack_spec

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

NS = "maxtext"
T = "2026-11-23T10:00:00Z"


@dataclass(frozen=True)
class Manager:
    """The fields of the multi-region spec's manager these commands read."""

    name: str
    region: str | None = None


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


def _multi():
    prod = _spec("prod")
    return MultiRegion(prod, [("us-east5", "us-east5-b", "tpu-east5", 2), ("us-south1", "us-south1-a",
                                                                          "tpu-south1", 2)],
                       manager=Manager("tpu-manager"))


def workload(rayjob: str, *, cluster: str | None = None, message: str | None = None,
             nominated: list[str] | None = None, created: str = T) -> dict:
    """A Workload as Kueue's RayJob integration and MultiKueue write it on the manager."""
    status: dict = {"conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                    "message": "Quota reserved in ClusterQueue tpu", "lastTransitionTime": T}]}
    if cluster:
        status["clusterName"] = cluster
    if message:
        status["admissionChecks"] = [{"name": names.multikueue_check("tpu-manager"), "state": "Ready",
                                      "message": message, "lastTransitionTime": T}]
    if nominated:
        status["nominatedClusterNames"] = nominated
        status["admissionChecks"] = [{"name": names.multikueue_check("tpu-manager"), "state": "Pending", "message": "",
                                      "lastTransitionTime": T}]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"rayjob-{rayjob}-3f2a1", "namespace": NS, "creationTimestamp": created,
                     "labels": {"kueue.x-k8s.io/job-uid": f"uid-{rayjob}"},
                     "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": rayjob,
                                          "uid": f"uid-{rayjob}", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "tpu", "podSets": [
            {"name": "head", "count": 1, "template": {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}},
            {"name": "workers", "count": 8, "template": {"spec": {"containers": [{"name": "ray-worker",
                                                                                   "image": "ray"}]}}}]},
        "status": status,
    }


def rayjob(name: str, deployment: str, status: str) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"entrypoint": "python maxtext_trainer.py"},
            "status": {"jobDeploymentStatus": deployment, "jobStatus": status}}


def submitter(cluster: Cluster, job: str, log: str) -> None:
    """KubeRay's submitter Job (named after its RayJob) and its pod, with the pod's log."""
    labels = {"batch.kubernetes.io/controller-uid": f"c-{job}", "batch.kubernetes.io/job-name": job}
    cluster.add({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": job, "namespace": NS, "uid": f"c-{job}"},
                 "spec": {"selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": f"c-{job}"}},
                          "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                              {"name": "ray-job-submitter", "image": "ray"}]}}},
                 "status": {"active": 1}})
    pod = f"{job}-x7k2p"
    cluster.add({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": pod, "namespace": NS, "labels": labels, "creationTimestamp": T},
                 "spec": {"containers": [{"name": "ray-job-submitter", "image": "ray"}]},
                 "status": {"phase": "Running"}})
    cluster.logs[pod] = log


@pytest.fixture
def clusters():
    mgr, east, south = Cluster("tpu-manager"), Cluster("tpu-east5"), Cluster("tpu-south1")
    # Admitted in us-south1 (status.clusterName), in us-east5 (only the check's message yet), one still dispatched.
    mgr.add(workload("llama3-8b-multislice", cluster="tpu-south1",
                     message='The workload was admitted on "tpu-south1"'))
    mgr.add(workload("llama3-70b-multislice", message='The workload was admitted on "tpu-east5"'))
    mgr.add(workload("llama3-8b-elastic", nominated=["tpu-east5", "tpu-south1"]))
    south.add(rayjob("llama3-8b-multislice", "Running", "RUNNING"))
    east.add(rayjob("llama3-70b-multislice", "Initializing", "PENDING"))
    submitter(south, "llama3-8b-multislice", "completed step: 41, seconds: 1.003\ncompleted step: 42, seconds: 1.002\n")
    return {"manager": mgr, "east": east, "south": south}


@pytest.fixture
def env(clusters, tmp_path, monkeypatch):
    """The stand-ins served, a kubeconfig naming them as get-credentials would, and the stack seen as two regions."""
    monkeypatch.setenv("HOME", str(tmp_path))  # kubectl's discovery cache
    monkeypatch.delenv("KUBECONFIG", raising=False)
    multi = _multi()
    monkeypatch.setattr(stack_spec, "load_stack", lambda stack, stacks_dir=None: multi)
    places = {"manager": where.manager(multi), "east": where.workers(multi)[0], "south": where.workers(multi)[1]}
    with Server(clusters["manager"]) as m, Server(clusters["east"]) as e, Server(clusters["south"]) as s:
        urls = {"manager": m, "east": e, "south": s}
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(kubeconfig({places[k].context: urls[k] for k in urls})))
        yield {"kubeconfig": str(path), "places": places, "spec": multi}


def test_every_workload_here_is_valid_against_kueues_crd(clusters, kueue_validator):
    for wl in clusters["manager"].objects[("kueue.x-k8s.io/v1beta2", "workloads")]:
        assert kueue_validator(wl) == [], wl["metadata"]["name"]
    bad = workload("x", cluster="c")
    bad["status"]["clusterNmae"] = "typo"
    assert any("clusterNmae" in e for e in kueue_validator(bad))


def test_places_are_named_as_get_credentials_names_them():
    multi = _multi()
    assert [(p.cluster, p.region, p.context) for p in where.workers(multi)] == [
        ("tpu-east5", "us-east5", "gke_my-tpu-project_us-east5-b_tpu-east5"),
        ("tpu-south1", "us-south1", "gke_my-tpu-project_us-south1-a_tpu-south1")]
    assert where.manager(multi).context == "gke_my-tpu-project_us-east5_tpu-manager"  # Autopilot: regional
    dev = _spec("dev")
    assert where.manager(dev) is None
    assert [p.context for p in where.workers(dev)] == ["gke_my-tpu-project-dev_us-east5-b_maxtext-dev"]


def test_admitted_cluster_reads_the_field_then_the_check_message():
    assert where.admitted_cluster(workload("j", cluster="a", message='The workload was admitted on "b"')) == "a"
    assert where.admitted_cluster(workload("j", message='The workload was admitted on "b"')) == "b"
    assert where.admitted_cluster(workload("j", nominated=["a"])) is None
    newer = workload("j", cluster="b", created="2026-11-24T00:00:00Z")
    assert where.workload_of([workload("j", cluster="a"), newer, workload("k", cluster="c")], "j") is newer


def test_jobs_shows_each_jobs_region_and_its_rayjob_there(env, clusters, capsys):
    assert cli.main(["jobs", "--stack", "prod", "--kubeconfig", env["kubeconfig"]]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:] if line.strip()}
    assert rows["llama3-8b-multislice"][1:5] == ["us-south1", "tpu-south1", "Running", "RUNNING"]
    assert rows["llama3-70b-multislice"][1:5] == ["us-east5", "tpu-east5", "Initializing", "PENDING"]
    assert rows["llama3-8b-elastic"][1:3] == ["-", "-"]
    assert "nominated: tpu-east5, tpu-south1" in out
    # One list call per cluster; nothing read through the manager but its Workloads.
    assert not any("rayjobs" in r for r in clusters["manager"].requests)


def test_logs_come_from_the_region_that_admitted_the_job(env, clusters, capsys):
    assert cli.main(["logs", "--stack", "prod", "llama3-8b-multislice", "--kubeconfig", env["kubeconfig"],
                     "--tail", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job llama3-8b-multislice: us-south1 (cluster tpu-south1, context "
                          "gke_my-tpu-project_us-south1-a_tpu-south1); admitted on tpu-south1")
    assert "RayJob Running, job status RUNNING" in out and "completed step: 42" in out
    assert any(r.endswith("/pods/llama3-8b-multislice-x7k2p/log") for r in clusters["south"].requests)
    assert not any("/pods" in r for r in clusters["manager"].requests + clusters["east"].requests)


@pytest.mark.parametrize("job, message", [
    ("llama3-8b-elastic", "job llama3-8b-elastic runs in no region yet: dispatched, not yet admitted; "
                          "nominated: tpu-east5, tpu-south1"),
    ("llama3-70b-multislice", "logs job/llama3-70b-multislice -n maxtext --tail 100: "),
    ("nope", "no job named 'nope'"),
])
def test_logs_of_a_job_without_logs_is_one_line(env, capsys, job, message):
    assert cli.main(["logs", "--stack", "prod", job, "--kubeconfig", env["kubeconfig"]]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_workload_on_a_cluster_the_stack_does_not_name_is_refused(env, clusters, capsys):
    clusters["manager"].objects[("kueue.x-k8s.io/v1beta2", "workloads")][0]["status"]["clusterName"] = "tpu-old"
    assert cli.main(["jobs", "--stack", "prod", "--kubeconfig", env["kubeconfig"]]) == 2
    assert "admitted on cluster 'tpu-old', which the stack does not name (its clusters: tpu-east5, tpu-south1)" in \
        capsys.readouterr().err


def test_a_missing_context_names_the_get_credentials_command(env, tmp_path, capsys):
    path = tmp_path / "partial"
    doc = json.loads(open(env["kubeconfig"]).read())
    doc["contexts"] = [c for c in doc["contexts"] if "south1" not in c["name"]]
    path.write_text(json.dumps(doc))
    assert cli.main(["jobs", "--stack", "prod", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: no kube context gke_my-tpu-project_us-south1-a_tpu-south1 in {path} for cluster "
                   "tpu-south1 (us-south1); run `gcloud container clusters get-credentials tpu-south1 "
                   "--location=us-south1-a --project=my-tpu-project`")


def test_no_kubectl_is_one_line_for_logs_and_jobs_needs_none(env, monkeypatch, capsys):
    """``logs`` runs kubectl; ``jobs`` talks to the API server through the kubernetes client (slicectl/kubeapi.py)."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert cli.main(["logs", "llama3-8b-multislice", "--stack", "prod", "--kubeconfig", env["kubeconfig"]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kubectl not found on PATH") and len(err.strip().splitlines()) == 1
    assert cli.main(["jobs", "--stack", "prod", "--kubeconfig", env["kubeconfig"]]) == 0


def test_single_region_stack_reads_its_one_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    dev = _spec("dev")
    c = Cluster("maxtext-dev")
    c.add(rayjob("llama3-8b-elastic", "Running", "RUNNING"))
    submitter(c, "llama3-8b-elastic", "completed step: 7, seconds: 1.0\n")
    with Server(c) as url:
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(kubeconfig({where.workers(dev)[0].context: url})))
        assert cli.main(["jobs", "--stack", "dev", "--kubeconfig", str(path)]) == 0
        assert "llama3-8b-elastic  us-east5  maxtext-dev  Running     RUNNING     no Workload" in \
            capsys.readouterr().out
        assert cli.main(["logs", "--stack", "dev", "llama3-8b-elastic", "--kubeconfig", str(path)]) == 0
        assert "completed step: 7" in capsys.readouterr().out


def test_a_finished_job_whose_copy_multikueue_deleted_says_where_its_logs_are(env, clusters, capsys):
    """MultiKueue deleted the worker's RayJob (and its submitter) once the job finished: the manager's RayJob keeps
    the mirrored status, and the driver's output is in Cloud Logging (the command to read it is printed)."""
    south = clusters["south"]
    south.objects[("ray.io/v1", "rayjobs")] = []
    south.objects[("batch/v1", "jobs")] = []
    south.objects[("v1", "pods")] = []
    clusters["manager"].add(rayjob("llama3-8b-multislice", "Complete", "SUCCEEDED"))
    assert cli.main(["logs", "--stack", "prod", "llama3-8b-multislice", "--kubeconfig", env["kubeconfig"],
                     "--tail", "50"]) == 0
    out = capsys.readouterr().out
    assert "its copy in tpu-south1 is gone" in out and "RayJob says: Complete, job status SUCCEEDED" in out
    assert ('gcloud logging read \'resource.type="k8s_container" AND resource.labels.project_id="my-tpu-project" AND '
            'resource.labels.cluster_name="tpu-south1" AND resource.labels.namespace_name="maxtext" AND '
            'resource.labels.container_name="ray-job-submitter" AND '
            'resource.labels.pod_name=~"^llama3-8b-multislice-[a-z0-9]{5}$"\' '
            '--project=my-tpu-project --limit=50') in out
    assert not any("/log" in r for c in clusters.values() for r in c.requests)
