"""A job's lifecycle from the command line: ``slicectl submit --apply``, ``slicectl jobs`` (list, ``--wait``) and
``slicectl jobs delete``, the real commands and the real kubernetes Python client against a LOCAL API DOUBLE
(tests/kubectl_standin.py: an HTTP server on 127.0.0.1 answering in the API server's JSON, not a Kubernetes API
server). Its scripted statuses play KubeRay and Kueue; each is checked against the vendored CRDs (KubeRay's RayJob
status, Kueue's Workload conditions) so the double says only what the real controllers could write.

The exit codes of ``--wait`` are xpk's for ``workload list --wait-for-job-completion`` (AI-Hypercomputer/xpk
docs/usage/workloads.md: "0: Workload finished and completed successfully. 124: Timeout was reached before workload
finished. 125: Workload finished but did not complete successfully.").
"""

from __future__ import annotations

import copy
import json
import time

import pytest
from kubectl_standin import PENDING, Cluster, Server, kubeconfig

from slicectl import cli, cmd_submit, where
from slicectl.exits import Exit
from stackspec import spec as stack_spec

NS = "maxtext"
T = "2026-11-28T04:00:00Z"


def condition(type_: str, status: str, reason: str, message: str) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": T}


QUOTA = condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue tpu")
ADMITTED = {"conditions": [QUOTA, condition("Admitted", "True", "Admitted",
                                            "The workload is admitted")]}
FINISHED = {"conditions": [QUOTA, condition("Admitted", "True", "Admitted", "The workload is admitted"),
                           condition("Finished", "True", "Succeeded", "Job finished successfully")]}
FAILED_WL = {"conditions": [QUOTA, condition("Finished", "True", "Failed", "Job failed")]}

# (RayJob status, Workload status) per read: KubeRay's JobDeploymentStatus and Ray's JobStatus, Kueue's conditions.
SUCCEEDS = [
    ({"jobDeploymentStatus": "Suspended"}, PENDING),
    ({"jobDeploymentStatus": "Initializing", "rayClusterName": "r-abc"}, ADMITTED),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "jobId": "j-1", "rayClusterName": "r-abc",
      "startTime": T}, ADMITTED),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "jobId": "j-1", "rayClusterName": "r-abc",
      "startTime": T, "endTime": T, "message": "Job finished successfully."}, FINISHED),
]
FAILS = [
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "r-abc"}, ADMITTED),
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "rayClusterName": "r-abc", "failed": 1,
      "message": "Job entrypoint command failed with exit code 1"}, FAILED_WL),
]
INVALID = [({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
             "message": "The RayJob metadata is invalid"}, None)]
# Kueue gives up on starting the job (a permanent error unsuspending it): it finishes the Workload with reason
# FailedToStart and the RayJob stays Suspended for ever (kueue v0.19.2 pkg/controller/jobframework/reconciler.go
# step 7, podset.IsPermanent -> workloadfinish.Finish(..., FailedToStartFinishedReason = "FailedToStart", ...)).
# xpk's wait is Kueue's: `kubectl wait --for=condition=Finished workload ...` (AI-Hypercomputer/xpk@367c838
# src/xpk/core/workload.py wait_for_job_completion).
NEVER_STARTS = [
    ({"jobDeploymentStatus": "Suspended"}, PENDING),
    ({"jobDeploymentStatus": "Suspended"},
     {"conditions": [QUOTA, condition("Admitted", "True", "Admitted", "The workload is admitted"),
                     condition("Finished", "True", "FailedToStart",
                               "invalid podset updates: node selector conflicts with the job's")]}),
]
FOREVER = [({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "r-abc"}, ADMITTED)] * 50


def _status(entry):
    return {"rayjob": entry[0], "workload": entry[1]}


@pytest.fixture
def prod():
    return stack_spec.load_stack("prod")


@pytest.fixture
def api(prod, tmp_path, monkeypatch):
    """The prod cluster's double, served; a kubeconfig naming it as get-credentials would; no sleeping."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    cluster = Cluster(prod.cluster.name)
    with Server(cluster) as url:
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(kubeconfig({where.workers(prod)[0].context: url})))
        yield {"cluster": cluster, "kubeconfig": str(path), "args": ["--kubeconfig", str(path)]}


def submit(api, capsys, name: str = "try-1", *extra: str) -> int:
    capsys.readouterr()
    return cli.main(["submit", "--stack", "prod", "--job", "llama3-8b-elastic", "--name", name, "--steps", "20",
                     "--apply", *api["args"], *extra])


def rayjobs(cluster: Cluster) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in cluster.objects.get(("ray.io/v1", "rayjobs"), [])}


def workloads(cluster: Cluster) -> list[dict]:
    return cluster.objects.get(("kueue.x-k8s.io/v1beta2", "workloads"), [])


def test_every_scripted_status_is_one_kuberay_and_kueue_could_write(api, capsys, prod, kuberay_validator,
                                                                    kueue_validator):
    assert submit(api, capsys) == Exit.OK
    made = rayjobs(api["cluster"])["try-1"]
    (wl,) = workloads(api["cluster"])
    for rj_status, wl_status in [*SUCCEEDS, *FAILS, *INVALID, *NEVER_STARTS]:
        doc = {k: v for k, v in copy.deepcopy(made).items()}
        doc["metadata"] = {"name": "try-1", "namespace": NS, "labels": made["metadata"]["labels"]}
        doc["status"] = rj_status
        assert kuberay_validator(doc) == [], rj_status
        if wl_status is not None:
            assert kueue_validator({**copy.deepcopy(wl), "status": wl_status}) == [], wl_status


def test_submit_apply_creates_the_one_off_and_its_workload(api, capsys, prod, kuberay_validator):
    assert submit(api, capsys) == Exit.OK
    out = capsys.readouterr().out
    assert f"POST /apis/ray.io/v1/namespaces/{NS}/rayjobs" in api["cluster"].requests
    made = rayjobs(api["cluster"])["try-1"]
    assert made["metadata"]["labels"][cmd_submit.ONE_OFF_LABEL] == "true"
    body = {k: v for k, v in made.items()}
    body["metadata"] = {k: v for k, v in made["metadata"].items()
                        if k not in ("uid", "creationTimestamp", "resourceVersion", "generation")}
    assert kuberay_validator(body) == []
    (wl,) = workloads(api["cluster"])
    assert wl["metadata"]["ownerReferences"][0]["name"] == "try-1"
    assert "slicectl jobs --stack prod --wait try-1" in out and "slicectl jobs delete try-1 --stack prod" in out


def test_submit_apply_twice_is_one_line_naming_the_fix(api, capsys):
    assert submit(api, capsys) == Exit.OK
    assert submit(api, capsys) == Exit.USAGE
    err = capsys.readouterr().err
    assert "already exists" in err and "choose another --name" in err and len(err.strip().splitlines()) == 1


def test_no_context_names_the_get_credentials_command(api, capsys, tmp_path, prod):
    empty = tmp_path / "other"
    empty.write_text(json.dumps(kubeconfig({"some-other-context": "http://127.0.0.1:9"})))
    capsys.readouterr()
    assert cli.main(["jobs", "--stack", "prod", "--kubeconfig", str(empty)]) == Exit.USAGE
    err = capsys.readouterr().err
    assert f"no kube context {where.workers(prod)[0].context}" in err
    assert "gcloud container clusters get-credentials" in err


def test_context_current_reaches_the_kubeconfigs_current_context(api, capsys, tmp_path):
    """``--context current``: the kubeconfig's own current context, whatever its name."""
    url = json.loads(open(api["kubeconfig"]).read())["clusters"][0]["cluster"]["server"]
    mine = tmp_path / "mine"
    mine.write_text(json.dumps(kubeconfig({"my-own-name": url})))
    assert cli.main(["submit", "--stack", "prod", "--job", "llama3-8b-elastic", "--name", "try-2", "--apply",
                     "--kubeconfig", str(mine), "--context", "current"]) == Exit.OK
    assert "try-2" in rayjobs(api["cluster"])


@pytest.mark.parametrize(("script", "code"), [(SUCCEEDS, Exit.OK), (FAILS, Exit.JOB_FAILED),
                                               (INVALID, Exit.JOB_FAILED)])
def test_wait_follows_the_job_to_its_end_with_xpks_exit_codes(api, capsys, script, code):
    assert submit(api, capsys) == Exit.OK
    api["cluster"].scripts["try-1"] = [_status(e) for e in script]
    capsys.readouterr()
    assert cli.main(["jobs", "--stack", "prod", "--wait", "try-1", "--interval", "1", *api["args"]]) == code
    out = capsys.readouterr().out
    states = [line.split("] try-1: ", 1)[1] for line in out.splitlines() if "] try-1: " in line]
    # One line per change of state, in order, ending in the verdict.
    assert len(states) == len(script) and states[-1].startswith(script[-1][0]["jobDeploymentStatus"])
    if script is SUCCEEDS:
        assert "Kueue: queued: couldn't assign flavors" in states[0] and "Kueue: admitted" in states[1]
        assert out.rstrip().endswith("try-1: succeeded (Job finished successfully.)")
    else:
        assert "finished without success" in out


def test_wait_ends_when_kueue_finishes_the_workload_of_a_job_that_never_starts(api, capsys):
    """Kueue's Finished condition ends the wait as it ends xpk's, though the RayJob never leaves Suspended: exit 125
    at once, not 124 after the timeout (a week by default)."""
    assert submit(api, capsys) == Exit.OK
    api["cluster"].scripts["try-1"] = [_status(e) for e in NEVER_STARTS]
    capsys.readouterr()
    assert cli.main(["jobs", "--stack", "prod", "--wait", "try-1", "--timeout", "3", *api["args"]]) \
        == Exit.JOB_FAILED
    out = capsys.readouterr().out
    assert "finished without success" in out and "FailedToStart" in out and "not finished after" not in out


def test_wait_times_out_with_124(api, capsys):
    assert submit(api, capsys) == Exit.OK
    api["cluster"].scripts["try-1"] = [_status(e) for e in FOREVER]
    assert cli.main(["jobs", "--stack", "prod", "--wait", "try-1", "--timeout", "0", *api["args"]]) \
        == Exit.JOB_TIMEOUT
    assert "not finished after 0 s" in capsys.readouterr().out


def test_wait_on_no_such_job_is_a_usage_error(api, capsys):
    assert cli.main(["jobs", "--stack", "prod", "--wait", "nope", *api["args"]]) == Exit.USAGE
    assert "RayJob maxtext/nope" in capsys.readouterr().err


def test_list_shows_the_stacks_jobs_and_the_one_offs_with_their_queue_state(api, capsys):
    assert submit(api, capsys) == Exit.OK
    capsys.readouterr()
    assert cli.main(["jobs", "--stack", "prod", *api["args"]]) == Exit.OK
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("try-1 (one-off)"))
    assert "queued: couldn't assign flavors" in row
    assert any(line.startswith("llama3-8b-elastic ") and "not found" in line for line in out.splitlines())


def test_delete_removes_a_one_off_and_refuses_the_stacks_own(api, capsys, prod):
    assert submit(api, capsys) == Exit.OK
    # The stack's own RayJob, as Pulumi applies it (no one-off label).
    own = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "llama3-8b-elastic", "namespace": NS,
                                                                    "finalizers": ["ray.io/rayjob-finalizer"]},
           "spec": {"entrypoint": "python maxtext_trainer.py"}}
    api["cluster"].add(own)
    capsys.readouterr()
    assert cli.main(["jobs", "delete", "llama3-8b-elastic", "--stack", "prod", *api["args"]]) == Exit.USAGE
    assert "is the stack's (Pulumi manages it)" in capsys.readouterr().err
    assert cli.main(["jobs", "delete", "try-1", "--stack", "prod", *api["args"]]) == Exit.OK
    assert set(rayjobs(api["cluster"])) == {"llama3-8b-elastic"} and workloads(api["cluster"]) == []
    assert f"DELETE /apis/ray.io/v1/namespaces/{NS}/rayjobs/try-1" in api["cluster"].requests
    assert cli.main(["jobs", "delete", "try-1", "--stack", "prod", *api["args"]]) == Exit.USAGE
    assert "no RayJob maxtext/try-1" in capsys.readouterr().err


def test_kubeconfig_and_context_belong_to_apply(capsys):
    assert cli.main(["submit", "--stack", "prod", "--job", "llama3-8b-elastic", "--context", "x"]) == Exit.USAGE
    assert "only with --apply" in capsys.readouterr().err


def test_a_deactivated_workload_is_not_shown_as_requeued(api, capsys, kueue_validator):
    """Kueue requeues an evicted Workload only when it says so (its ``Requeued`` condition: true on preemption or node
    failure, kueue v0.19.2 pkg/controller/jobframework/reconciler.go step 6); a deactivated one (``spec.active:
    false``, evicted with reason ``Deactivated``) is never admitted again until it is reactivated."""
    from slicectl.cmd_jobs import queue_state

    assert submit(api, capsys) == Exit.OK
    (wl,) = workloads(api["cluster"])
    evicted = condition("Evicted", "True", "Deactivated", "The workload is deactivated")
    deactivated = {**copy.deepcopy(wl), "spec": {**wl["spec"], "active": False},
                   "status": {"conditions": [evicted, condition("Requeued", "False", "Deactivated",
                                                                "The workload is deactivated")]}}
    preempted = {**copy.deepcopy(wl), "status": {"conditions": [
        condition("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
        condition("Requeued", "True", "Preempted", "Preempted to accommodate a workload")]}}
    for doc in (deactivated, preempted):
        assert kueue_validator(doc) == []
    assert "requeued" not in queue_state(deactivated) and "deactivated" in queue_state(deactivated)
    assert queue_state(preempted) == "evicted (Preempted), requeued"


def test_a_deleted_one_off_kuberay_still_holds_is_shown_terminating(api, capsys):
    """KubeRay puts its finalizer on every new RayJob (ray-project/kuberay@feeaf72 ray-operator/controllers/ray/
    rayjob_controller.go, JobDeploymentStatusNew: ``ray.io/rayjob-finalizer``, utils/constant.go): a delete leaves it
    terminating until KubeRay has stopped it.
    ``jobs`` says so rather than showing it as running, and the name stays taken meanwhile."""
    assert submit(api, capsys) == Exit.OK
    rayjobs(api["cluster"])["try-1"]["metadata"]["finalizers"] = ["ray.io/rayjob-finalizer"]
    api["cluster"].scripts["try-1"] = [_status(FOREVER[0])]
    assert cli.main(["jobs", "delete", "try-1", "--stack", "prod", *api["args"]]) == Exit.OK
    assert "being deleted" in capsys.readouterr().out
    assert cli.main(["jobs", "--stack", "prod", *api["args"]]) == Exit.OK
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("try-1 (one-off)"))
    assert "deleting" in row
    assert submit(api, capsys) == Exit.USAGE and "already exists" in capsys.readouterr().err


def test_wait_rides_out_an_api_server_outage(api, capsys):
    """A week-long wait outlives control-plane upgrades (a zonal cluster's API server is down while it upgrades):
    as ``kubectl wait`` (kubernetes/kubectl@dee3483 pkg/cmd/wait/condition.go: ``watchtools.UntilWithSync``, an
    informer that lists and watches again after an error), an unavailable API server is waited out until --timeout,
    not a failure of the job (exit 2)."""
    assert submit(api, capsys) == Exit.OK
    api["cluster"].scripts["try-1"] = [_status(e) for e in SUCCEEDS]
    reads = api["cluster"].reads
    api["cluster"].outage = (reads + 3, 4)  # the first wait's read succeeds; then four reads answer 503
    capsys.readouterr()
    assert cli.main(["jobs", "--stack", "prod", "--wait", "try-1", "--interval", "1", *api["args"]]) == Exit.OK
    out = capsys.readouterr().out
    assert "503" in out and "retrying" in out and out.rstrip().endswith("succeeded (Job finished successfully.)")
