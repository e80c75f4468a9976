"""The cluster preemption drill, against a stand-in for the GKE API server.

No Kubernetes API server can run here: ``tests/kube_standin.py`` serves the few REST calls
the drill makes (RayJob, pods, nodes, service, the service proxy to the Ray dashboard's
job log) over HTTP to the real Kubernetes Python client, and simulates KubeRay and a
MaxText job under Ray Train behind them (a log that grows by one step per read, with
MaxText's and Ray Train's real log lines). What is mocked: the API server, KubeRay and
the training job. What is real: the stack spec, the drill, the client and its JSON.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml
from conftest import FIXTURE_STACKS, with_fallbacks
from kube_standin import Sim, StandIn
from kubernetes import client

from drills.cluster import (
    DrillError,
    DrillOptions,
    Kube,
    plan,
    run_drill,
    select_victims,
)
from drills.train_log import TrainLog
from offline import engine
from slicectl import cli
from stackspec import spec

JOB = "llama3-8b-elastic"
ROOT = engine.ROOT


def running(config: dict, job: str) -> dict:
    """prod's config with ``job`` the one running job, on the long-lived RayCluster the stand-in serves
    (prod queues its jobs in Kueue, each on its own cluster; the drill follows either)."""
    key = f"{spec.PROJECT}:jobs"
    jobs = json.loads(config[key])
    for j in jobs:
        j["suspend"] = j["name"] != job
        if j["name"] == job:
            j["cluster"] = "shared"
    return {**config, key: json.dumps(jobs)}


@pytest.fixture(scope="module")
def prod():
    return spec.load("prod", running(engine.stack_config("prod"), JOB))


@pytest.fixture
def prod_plan(prod):
    return plan(prod, JOB)


def kube_at(host: str) -> Kube:
    cfg = client.Configuration(host=host)
    return Kube(client.ApiClient(cfg))


FAST = dict(poll_s=0.0, wait_s=30.0, deadline_s=30.0)


def drill(sim: Sim, **opts):
    with StandIn(sim) as host:
        report = run_drill(kube_at(host), sim.plan, DrillOptions(**(FAST | opts)), say=lambda s: None)
    return report


# --------------------------------------------------------------------------- the plan


def test_plan_names_come_from_the_stack_spec(prod, prod_plan):
    job = next(j for j in prod.jobs if j.name == JOB)
    group = prod.group(job.group)
    assert prod_plan.namespace == prod.storage.namespace
    assert prod_plan.ray_cluster == prod.ray.cluster_name  # a shared-cluster job
    assert prod_plan.group == job.group
    assert prod_plan.hosts == group.shape.hosts and prod_plan.slices == job.slices
    # prod: one on-demand pool per slice, named for the slice (the seed's).
    assert prod_plan.node_pools == tuple(pool for s in prod.slices if s.group == job.group for _, pool in s.pools)
    assert prod_plan.node_pools == tuple(s.name for s in group.slices) == ("v6e-16-0", "v6e-16-1")
    assert prod_plan.ray_auth == (prod.ray.auth == "token")
    assert prod_plan.target_step == job.steps - 1
    assert prod_plan.kube_context == (
        f"gke_{prod.project}_{prod.cluster.location}_{prod.cluster.name}")
    assert prod_plan.elastic


def test_plan_names_every_fallback_pool():
    """With fallbacks every capacity option's pool: the slice may be on a fallback when the drill runs."""
    fallbacks = spec.load("prod", with_fallbacks(running(engine.stack_config("prod"), JOB)))
    p = plan(fallbacks, JOB)
    group = fallbacks.group(p.group)
    assert p.node_pools == tuple(pool for s in group.slices for _, pool in s.pools)
    assert p.node_pools == tuple(f"{s.name}-{o}" for s in group.slices for o in ("rsv", "flex", "std"))


def test_unknown_job_names_the_stack_file_and_the_allowed_jobs(prod):
    with pytest.raises(spec.UnknownName) as e:
        plan(prod, "llama3-9b")
    msg = str(e.value)
    assert "stacks/Pulumi.prod.yaml" in msg and "llama3-9b" in msg
    for j in prod.jobs:
        assert j.name in msg


def test_a_suspended_job_is_not_drilled():
    config = engine.stack_config("prod")
    key = f"{spec.PROJECT}:jobs"
    jobs = json.loads(running(config, JOB)[key])
    jobs[[j["name"] for j in jobs].index(JOB)]["suspend"] = True
    suspended = spec.load("prod", {**config, key: json.dumps(jobs)})
    with pytest.raises(spec.SpecError) as e:
        plan(suspended, JOB)
    assert "stacks/Pulumi.prod.yaml" in str(e.value) and ".suspend" in str(e.value)
    assert f"job {JOB} is suspended" in str(e.value)


def test_a_missing_rayjob_says_to_deploy(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    gone = prod_plan.__class__(**{**prod_plan.__dict__, "job": "not-deployed"})
    with StandIn(sim) as host, pytest.raises(DrillError, match="pulumi up"):
        run_drill(kube_at(host), gone, DrillOptions(**FAST), say=lambda s: None)


def test_cli_exits_2_on_an_unknown_job(capsys):
    assert cli.main(["drill", "--stack", "prod", "--job", "nope"]) == 2
    assert "no job named" in capsys.readouterr().err


# --------------------------------------------------------------------------- victims


def test_pod_target_picks_one_pod_of_the_highest_replica(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    pods = [client.ApiClient()._ApiClient__deserialize(p, "V1Pod") for p in sim.pods.values()]
    workers = [p for p in pods if p.metadata.labels.get("ray.io/node-type") == "worker"]
    v = select_victims(workers, "pod")
    top = prod_plan.slices - 1
    assert v.kind == "pod" and v.replica == top and len(v.pods) == 1
    assert v.pods[0] == f"{prod_plan.ray_cluster}-{prod_plan.group}-worker-r{top}h0"


def test_replica_target_picks_every_host_of_one_slice(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    pods = [client.ApiClient()._ApiClient__deserialize(p, "V1Pod") for p in sim.pods.values()]
    workers = [p for p in pods if p.metadata.labels.get("ray.io/node-type") == "worker"]
    v = select_victims(workers, "replica", replica=0)
    assert v.replica == 0 and len(v.pods) == prod_plan.hosts
    assert all("-worker-r0h" in name for name in v.pods)
    with pytest.raises(DrillError, match="running replicas"):
        select_victims(workers, "replica", replica=prod_plan.slices)


def test_node_target_refuses_a_node_outside_the_groups_pools(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    pods = [client.ApiClient()._ApiClient__deserialize(p, "V1Pod") for p in sim.pods.values()]
    workers = [p for p in pods if p.metadata.labels.get("ray.io/node-type") == "worker"]
    with pytest.raises(DrillError, match="refusing to delete"):
        select_victims(workers, "node", nodes_in_pool=lambda n: "default-pool",
                       node_pools=prod_plan.node_pools)
    pool = prod_plan.node_pools[-1]
    v = select_victims(workers, "node", nodes_in_pool=lambda n: pool, node_pools=prod_plan.node_pools)
    assert v.node == f"gke-{pool}-0" and len(v.pods) == 1


def test_no_running_worker_is_an_error(prod_plan):
    with pytest.raises(DrillError, match="no running worker"):
        select_victims([], "pod")


# --------------------------------------------------------------------------- whole drills


def _check_recovered(report, sim: Sim) -> None:
    assert report.ok, report.notes
    assert report.kill_step == sim.kill_step
    assert report.restored_step == sim.restored  # the last checkpoint Orbax committed
    assert report.restored_step is not None and 0 < report.restored_step <= report.kill_step
    assert report.steps_lost == sim.kill_step - sim.restored
    assert report.steps_lost <= sim.checkpoint_period + sim.commit_ticks
    assert report.final_step > report.kill_step
    assert report.steps_run == sim.steps_run  # hosts print each step; counted once
    assert 0 <= report.detect_s <= report.resume_s <= report.wall_s
    assert report.scale_up_s is not None


def test_pod_drill_recovers_and_reports(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    with StandIn(sim) as host:
        report = run_drill(kube_at(host), prod_plan, DrillOptions(**FAST), say=lambda s: None)
    _check_recovered(report, sim)
    victim = f"{prod_plan.ray_cluster}-{prod_plan.group}-worker-r{prod_plan.slices - 1}h0"
    assert sim.deleted == [victim] and victim in report.killed
    # The drill waited through Initializing and for a committed checkpoint first.
    assert sim.rayjob_reads > sim.init_reads
    assert sim.kill_step >= min(sim.committed)


def test_token_auth_head_must_refuse_a_tokenless_request_and_no_secret_is_read(prod_plan):
    """prod's heads have Ray token auth: the drill needs no token (the job's log is the submitter pod's) and
    checks that the head refuses a request without one; a head that serves it fails the drill before any kill."""
    assert prod_plan.ray_auth
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    stand_in = StandIn(sim)
    with stand_in as host:
        report = run_drill(kube_at(host), prod_plan, DrillOptions(**FAST), say=lambda s: None)
    _check_recovered(report, sim)
    assert any("refused a request without a token (401)" in n for n in report.notes)
    assert not any("/secrets" in path for _, path in stand_in.requests)
    assert ("GET", f"/api/v1/namespaces/{prod_plan.namespace}/pods/{prod_plan.job}-sbmtr/log") in stand_in.requests
    opened = Sim(prod_plan, prod_plan.ray_cluster, open_head=True)
    with StandIn(opened) as host, pytest.raises(DrillError, match="answered 200 to a request without a token"):
        run_drill(kube_at(host), prod_plan, DrillOptions(**FAST), say=lambda s: None)
    assert opened.deleted == []


def test_replica_drill_deletes_every_pod_of_the_slice(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    report = drill(sim, target="replica", replica=0)
    _check_recovered(report, sim)
    assert sorted(sim.deleted) == [
        f"{prod_plan.ray_cluster}-{prod_plan.group}-worker-r0h{h}" for h in range(prod_plan.hosts)]


def test_node_drill_deletes_a_node_of_the_slice_pool(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    report = drill(sim, target="node")
    _check_recovered(report, sim)
    assert sim.deleted == [f"gke-{prod_plan.node_pools[-1]}-0"]
    assert report.killed.startswith(f"node gke-{prod_plan.node_pools[-1]}-0")


def test_until_done_follows_to_the_final_step(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster)
    report = drill(sim, until_done=True)
    _check_recovered(report, sim)
    assert report.final_step == prod_plan.target_step
    assert report.goodput == pytest.approx((prod_plan.target_step + 1) / sim.steps_run)
    assert report.goodput < 1.0  # the lost steps were run twice


def test_no_progress_fails_at_the_deadline(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster, recover=False)
    t0 = time.monotonic()
    report = drill(sim, deadline_s=0.5, poll_s=0.02)
    assert not report.ok
    assert time.monotonic() - t0 < 10
    assert report.detect_s is not None and report.resume_s is None
    assert any("no recovery within" in n for n in report.notes)


def test_a_failed_rayjob_ends_the_drill_as_failed(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster, fail_job=True)
    report = drill(sim)
    assert not report.ok
    assert any("FAILED" in n for n in report.notes)


def test_a_job_that_never_checkpoints_is_not_drilled(prod_plan):
    sim = Sim(prod_plan, prod_plan.ray_cluster, checkpoint_period=10_000)
    with pytest.raises(DrillError, match="past a checkpoint"):
        drill(sim, wait_s=0.3, poll_s=0.02)
    assert sim.deleted == []


def test_cli_drill_exit_codes_and_json_report(prod_plan, tmp_path, monkeypatch, capsys):
    """``slicectl drill`` end to end: kubeconfig context named from the spec, report file,
    exit 0 on recovery and 1 on a stall."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.prod.yaml").read_text())
    for j in doc["config"][f"{spec.PROJECT}:jobs"]:
        j["suspend"] = j["name"] != JOB
    (stacks / "Pulumi.prod.yaml").write_text(yaml.safe_dump(doc))
    for recover, code in ((True, 0), (False, 4)):
        sim = Sim(prod_plan, prod_plan.ray_cluster, recover=recover)
        with StandIn(sim) as host:
            kubeconfig = tmp_path / "kubeconfig"
            ctx = prod_plan.kube_context
            kubeconfig.write_text(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "other",
                "clusters": [{"name": ctx, "cluster": {"server": host}}],
                "users": [{"name": ctx, "user": {"token": "standin"}}],
                "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": ctx}},
                             {"name": "other", "context": {"cluster": "nowhere", "user": ctx}}],
            }))
            out = tmp_path / f"report-{recover}.json"
            rc = cli.main(["drill", "--stack", "prod", "--job", JOB, "--stacks-dir", str(stacks),
                           "--kubeconfig", str(kubeconfig),
                           "--poll", "0", "--deadline", "1", "--report", str(out)])
        assert rc == code
        doc = json.loads(out.read_text())
        assert doc["ok"] is recover and doc["job"] == JOB and doc["kill_step"] == sim.kill_step
        assert doc["target"] == f"cluster:prod/{JOB}"
    assert "result" in capsys.readouterr().out


# --------------------------------------------------------------------------- the log


def test_a_log_ray_folded_after_the_restart_fails_the_drill_by_name(prod_plan):
    """The RayJob's driver prints its workers' lines with Ray's log deduplication on unless told otherwise: a
    restarted worker's step lines, differing only in numbers, come as one line "[repeated Nx across cluster]"
    every 5 s (Ray's own DedupState.formatted below). The steps counted from such a log are not the run's: the
    drill fails and says why, even though it saw the job resume."""
    from ray._private.ray_logging import DedupState

    def fold(line: str, count: int) -> str:
        return DedupState(0, count, line, {}, set()).formatted()

    sim = Sim(prod_plan, prod_plan.ray_cluster, fold=fold)
    report = drill(sim)
    assert report.resume_s is not None  # it resumed; the verdict is about what can be counted
    assert not report.ok
    assert any("folded" in n and "RAY_DEDUP_LOGS=0" in n for n in report.notes), report.notes


def test_train_log_commits_async_saves_only_when_the_next_starts():
    log = TrainLog()
    log.feed("completed step: 0, seconds: 1\nStarted an asynchronous checkpoint save for step 0\n"
             "completed step: 1\ncompleted step: 1\n")
    assert log.committed == [] and log.last_step == 1 and log.steps_run == 2
    log.feed("completed step: 0, seconds: 1\nStarted an asynchronous checkpoint save for step 0\n"
             "completed step: 1\ncompleted step: 1\nStarted an asynchronous checkpoint save for "
             "step 2\nSaved a checkpoint at step 5.\npartial line without newl")
    assert log.committed == [0, 5]


def test_train_log_counts_redone_steps_per_attempt():
    text = "".join(f"completed step: {s}\n" for s in range(5))
    text += "restoring from this run's directory step 2\n"
    text += 'slicectl-progress {"event": "start", "start_step": 3}\n'
    text += "".join(f"completed step: {s}\n" for s in range(3, 6))
    log = TrainLog()
    log.feed(text)
    assert log.attempts == 2 and log.steps_run == 8 and log.max_step == 5
    assert log.latest_checkpoint == 2


def test_dedicated_cluster_job_finds_its_cluster_in_the_rayjob_status(prod_plan):
    """A job with its own RayCluster: the name KubeRay gave it comes from the status."""
    own = prod_plan.__class__(**{**prod_plan.__dict__, "ray_cluster": None})
    sim = Sim(own, f"{JOB}-raycluster-x7k2p")
    report = drill(sim)
    _check_recovered(report, sim)
    assert sim.deleted == [f"{JOB}-raycluster-x7k2p-{own.group}-worker-r{own.slices - 1}h0"]


def test_dev_single_slice_job_recovers_once_kuberay_replaces_the_slice():
    """dev: one Spot slice, so the job stops until KubeRay brings the slice back."""
    dev = spec.load("dev", engine.stack_config("dev"))
    job = next(j for j in dev.jobs if j.elastic and not j.suspend)
    p = plan(dev, job.name)
    assert p.slices == 1 and p.hosts == dev.group(job.group).shape.hosts
    sim = Sim(p, p.ray_cluster, replace_ticks=4, detect_ticks=1, restore_ticks=4)
    report = drill(sim, target="replica")
    _check_recovered(report, sim)
    assert len(sim.deleted) == p.hosts
    assert report.scale_up_s <= report.resume_s


# --------------------------------------------------------------------------- bad access


@pytest.mark.parametrize("kubeconfig, message", [
    ("apiVersion: v1\nclusters: [\n", "is not a readable kubeconfig: ParserError"),
    ("- a list\n- not a mapping\n", "is not a readable kubeconfig: TypeError"),
    # A closed port on this host: refused at once (a black-holed address times out after
    # drills.cluster.API_TIMEOUT_S instead of hanging).
    ("apiVersion: v1\nkind: Config\ncurrent-context: x\n"
     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n",
     "cannot reach the Kubernetes API server"),
])
def test_a_bad_kubeconfig_or_unreachable_api_server_is_one_line_exit_2(tmp_path, capsys, kubeconfig, message):
    path = tmp_path / "kubeconfig"
    path.write_text(kubeconfig)
    rc = cli.main(["drill", "--stack", "prod", "--kubeconfig", str(path), "--context", "x", "--poll", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_api_failures_read_as_one_line():
    import urllib3
    from kubernetes.client.exceptions import ApiException

    from drills.cluster import api_failure

    assert "answered 403 Forbidden: this identity may not do that" in api_failure(ApiException(403, "Forbidden"))
    assert "401" in api_failure(ApiException(401, "Unauthorized"))
    assert api_failure(urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out")).startswith(
        "cannot reach the Kubernetes API server")
    assert api_failure(ValueError("x")) is None
