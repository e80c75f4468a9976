"""The preemption drill on the real cluster: kill part of a running job's slices, watch it recover.

``slicectl drill --stack prod --job <name>`` (see :mod:`slicectl.cmd_drill`):

1. reads the stack spec for every name it needs (namespace, RayCluster, worker group,
   the group's node pools, the kube context ``get-credentials`` writes);
2. waits until the RayJob runs and its log shows a committed checkpoint;
3. deletes one worker pod, every pod of one slice replica (KubeRay labels them with
   ``ray.io/worker-group-replica-index``), or the Kubernetes node under a worker pod
   (a node of one of the group's node pools, ``cloud.google.com/gke-nodepool``);
4. follows the RayJob status, the Ray job log (the RayJob submitter pod's log: KubeRay's submitter
   runs ``ray job logs --follow``, so the drill needs no Ray token) and the group's pods until
   training resumes from a checkpoint and progresses past the step it was killed at, or the
   deadline passes; with ``ray.auth: token`` it first checks that the head's dashboard refuses
   a request without a token (through the API server's service proxy);
5. returns a :class:`DrillReport` (``ok`` false when recovery failed).

Everything that touches the cluster goes through :class:`Kube` (the Kubernetes Python
client) and a log source, so tests drive the same code against a stand-in API server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from drills.report import DrillReport
from drills.train_log import TrainLog, folded_problem
from stackspec import kube, names
from stackspec.names import kube_context
from stackspec.spec import PROJECT, Problem, SpecError, StackSpec, stack_file

RAY_GROUP, RAY_VERSION, RAYJOBS = "ray.io", "v1", "rayjobs"
# KubeRay pod labels (v1.5: multi-host groups get the replica labels).
CLUSTER_LABEL = kube.RAY_CLUSTER_LABEL
GROUP_LABEL = kube.RAY_GROUP_LABEL
NODE_TYPE_LABEL = kube.RAY_NODE_TYPE_LABEL
REPLICA_INDEX_LABEL = kube.RAY_REPLICA_INDEX_LABEL
HOST_INDEX_LABEL = "ray.io/replica-host-index"
# GKE puts the node pool's name on every node.
NODEPOOL_LABEL = kube.NODEPOOL_LABEL
# KubeRay names the head service <raycluster>-head-svc; its dashboard port is "dashboard".
HEAD_SERVICE_SUFFIX = "-head-svc"
DASHBOARD_PORT_NAME = "dashboard"
# Kubernetes labels a Job's pods with the Job's name; KubeRay names a RayJob's submitter Job after it.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# A dashboard path every Ray head serves; with token auth it answers 401 without the token.
JOBS_PATH = "api/jobs/"

TARGETS = ("pod", "replica", "node")
TERMINAL_JOB_STATUSES = ("STOPPED", "SUCCEEDED", "FAILED")
FAILED_DEPLOYMENT_STATUSES = ("Failed", "ValidationFailed")


class DrillError(RuntimeError):
    """The drill cannot start (wrong job, nothing running, no checkpoint yet)."""


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class DrillPlan:
    """Names and sizes the drill needs, all from the stack spec."""

    stack: str
    job: str
    elastic: bool
    namespace: str
    ray_cluster: str | None  # None: the job brings its own cluster; read from its status
    group: str
    hosts: int  # pods per slice replica
    slices: int  # replicas the job trains on at full size
    node_pools: tuple[str, ...]  # the group's slices' node pools (every capacity option's)
    target_step: int  # MaxText steps are 0..steps-1
    kube_context: str
    ray_auth: bool = False  # ray.auth: token: the dashboard wants the cluster's token


def plan(spec: StackSpec, job_name: str) -> DrillPlan:
    job = spec.job(job_name)
    if job.suspend:
        i = spec.jobs.index(job)
        raise SpecError(stack_file(spec.stack), [Problem(
            f"{PROJECT}:jobs[{i}].suspend", True,
            f"job {job_name} is suspended (no RayJob runs): drill a running job "
            f"({', '.join(j.name for j in spec.jobs if not j.suspend) or 'none'}) or unsuspend it")])
    group = spec.group(job.group)
    return DrillPlan(
        stack=spec.stack,
        job=job.name,
        elastic=job.elastic,
        namespace=spec.storage.namespace,
        ray_cluster=spec.ray.cluster_name if job.cluster == "shared" else None,
        group=group.name,
        hosts=group.shape.hosts,
        slices=job.slices,
        # Each capacity option's pool: a slice may be on any of its fallbacks.
        node_pools=tuple(pool for s in group.slices for _, pool in s.pools) or tuple(s.name for s in group.slices),
        target_step=job.steps - 1,
        # What `gcloud container clusters get-credentials` names the context.
        kube_context=kube_context(spec.project, spec.cluster.location, spec.cluster.name),
        ray_auth=spec.ray.auth == "token",
    )


def get_credentials_argv(spec: StackSpec) -> list[str]:
    """The ``gcloud`` command that writes the kubeconfig context :func:`plan` names."""
    return ["gcloud", "container", "clusters", "get-credentials", spec.cluster.name,
            f"--location={spec.cluster.location}", f"--project={spec.project}"]


@dataclass(frozen=True)
class DrillOptions:
    target: str = "pod"  # pod | replica | node
    replica: int | None = None  # which slice replica; default the highest index
    deadline_s: float = 1800.0  # kill -> recovered, or the drill fails
    wait_s: float = 3600.0  # before the kill: job running and a checkpoint committed
    poll_s: float = 5.0
    progress_steps: int = 1  # steps past the kill step that count as progress
    until_done: bool = False  # keep following until the job's final step


# --------------------------------------------------------------------------- cluster access


# (connect, read) seconds for every API call: an unreachable API server is an error, not a hang.
API_TIMEOUT_S = (10.0, 60.0)


class Kube:
    """The few Kubernetes API calls the drill makes, on one ApiClient."""

    def __init__(self, api_client: Any):
        from kubernetes import client

        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def ray_job(self, namespace: str, name: str) -> dict:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.custom.get_namespaced_custom_object(
                RAY_GROUP, RAY_VERSION, namespace, RAYJOBS, name, _request_timeout=API_TIMEOUT_S)
        except ApiException as e:
            if e.status == 404:
                raise DrillError(f"no RayJob {namespace}/{name} on the cluster: "
                                 "deploy the stack (pulumi up) first") from e
            raise

    def worker_pods(self, namespace: str, cluster: str, group: str) -> list:
        selector = f"{CLUSTER_LABEL}={cluster},{GROUP_LABEL}={group},{NODE_TYPE_LABEL}=worker"
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector,
                                                  _request_timeout=API_TIMEOUT_S).items)

    def delete_pod(self, namespace: str, name: str) -> None:
        # No grace period: a preemption does not wait for the trainer to finish a step.
        self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0,
                                        _request_timeout=API_TIMEOUT_S)

    def node(self, name: str):
        return self.core.read_node(name, _request_timeout=API_TIMEOUT_S)

    def delete_node(self, name: str) -> None:
        self.core.delete_node(name, grace_period_seconds=0, _request_timeout=API_TIMEOUT_S)

    def service_port(self, namespace: str, service: str, port_name: str) -> int:
        svc = self.core.read_namespaced_service(service, namespace, _request_timeout=API_TIMEOUT_S)
        for p in svc.spec.ports or []:
            if p.name == port_name:
                return int(p.port)
        raise DrillError(f"service {namespace}/{service} has no port named {port_name}")

    def submitter_log(self, namespace: str, job: str) -> str:
        """The RayJob submitter's log (KubeRay's K8sJobMode runs ``ray job submit --no-wait`` then
        ``ray job logs --follow``: ray-operator controllers/ray/common/job.go), from its newest pod;
        empty before the submitter starts."""
        pods = self.core.list_namespaced_pod(
            namespace, label_selector=f"{JOB_NAME_LABEL}={names.submitter_job(job)}",
            _request_timeout=API_TIMEOUT_S).items
        if not pods:
            return ""
        newest = max(pods, key=lambda p: (str(p.metadata.creation_timestamp or ""), p.metadata.name))
        return self.core.read_namespaced_pod_log(newest.metadata.name, namespace, _request_timeout=API_TIMEOUT_S)

    def proxy_status(self, namespace: str, service: str, port: int, path: str) -> int:
        """The HTTP status a cluster service answers a GET of ``path`` with, through the API server's
        service proxy, sending no credentials of its own (the proxy relays the service's status)."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.proxy_get(namespace, service, port, path)
        except ApiException as e:
            return int(e.status)
        return 200

    def proxy_get(self, namespace: str, service: str, port: int, path: str,
                  headers: dict[str, str] | None = None) -> str:
        """GET a path of a cluster service through the API server's service proxy."""
        # The generated client percent-encodes '/' and ':' in path parameters; send the
        # proxy path as kubectl does (<svc>:<port>/proxy/<path>).
        cfg = self.core.api_client.configuration
        saved, cfg.safe_chars_for_path_param = cfg.safe_chars_for_path_param, "/:"
        try:
            resp = self.core.connect_get_namespaced_service_proxy_with_path(
                f"{service}:{port}", namespace, path, _preload_content=False, _headers=headers,
                _request_timeout=API_TIMEOUT_S)
        finally:
            cfg.safe_chars_for_path_param = saved
        return resp.data.decode()


def load_kube(context: str | None, kubeconfig: str | None = None) -> Kube:
    """A Kube on the kubeconfig ``gcloud container clusters get-credentials`` wrote."""
    import yaml
    from kubernetes import client, config

    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except config.ConfigException as e:
        raise DrillError(
            f"no kube context {context!r} ({e}); run the stack's getCredentials output: "
            "gcloud container clusters get-credentials <cluster> --location=<zone> "
            "--project=<project>") from e
    except (yaml.YAMLError, OSError, TypeError, AttributeError, KeyError, ValueError) as e:
        # The kubernetes client reads the file without checking its shape: a YAML error, or a
        # list where a mapping belongs, surfaces as whatever Python raised.
        raise DrillError(f"kubeconfig {kubeconfig or '$KUBECONFIG or ~/.kube/config'} is not a "
                         f"readable kubeconfig: {type(e).__name__}: {str(e).splitlines()[0]}") from e
    assert isinstance(api, client.ApiClient)
    return Kube(api)


def api_failure(e: BaseException) -> str | None:
    """One line for a Kubernetes API call that failed (unreachable, timed out, refused, denied),
    or None for any other exception."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    if isinstance(e, ApiException):
        hint = {401: ": the kubeconfig's credentials were refused (rerun get-credentials)",
                403: ": this identity may not do that (the drill needs the stack's <cluster>-drill "
                     "Role: README, Inside the cluster)"}
        return f"the Kubernetes API server answered {e.status} {e.reason}{hint.get(e.status, '')}"
    if isinstance(e, urllib3.exceptions.HTTPError):
        reason = getattr(e, "reason", None) or e
        return f"cannot reach the Kubernetes API server: {type(reason).__name__}: {str(reason).splitlines()[0][:200]}"
    return None


class LogSource(Protocol):
    def text(self) -> str: ...


class SubmitterLogs:
    """The Ray job's whole log as the RayJob's submitter pod prints it (``pods/log``)."""

    def __init__(self, kube: Kube, namespace: str, job: str):
        self.kube, self.namespace, self.job = kube, namespace, job

    def text(self) -> str:
        return self.kube.submitter_log(self.namespace, self.job)


class RayJobClientLogs:
    """The same log through ``ray.job_submission`` at a reachable dashboard address."""

    def __init__(self, address: str, job_id: str):
        from ray.job_submission import JobSubmissionClient

        self.client = JobSubmissionClient(address)
        self.job_id = job_id

    def text(self) -> str:
        return self.client.get_job_logs(self.job_id)


def dashboard(kube: Kube, namespace: str, cluster: str, status: dict) -> tuple[str, int]:
    """Where the dashboard is: KubeRay's ``status.dashboardURL`` (``<svc>.<ns>.svc...:port``),
    else the head service's port named ``dashboard``."""
    url = status.get("dashboardURL") or ""
    host, _, port = url.removeprefix("http://").partition(":")
    service = host.split(".")[0] if host else f"{cluster}{HEAD_SERVICE_SUFFIX}"
    return service, int(port) if port.isdigit() else kube.service_port(namespace, service, DASHBOARD_PORT_NAME)


def check_head_refuses_tokenless(kube: Kube, namespace: str, cluster: str, status: dict) -> int:
    """With ``ray.auth: token`` the head must answer a request without a token with 401 or 403; one it
    serves means the operator dropped ``authOptions`` (KubeRay < 1.5.1) and the head runs open."""
    service, port = dashboard(kube, namespace, cluster, status)
    code = kube.proxy_status(namespace, service, port, JOBS_PATH)
    if code not in (401, 403):
        raise DrillError(f"the Ray head {namespace}/{service} answered {code} to a request without a token "
                         "(ray.auth: token): the operator dropped authOptions (KubeRay < 1.5.1?) and the head "
                         "runs open")
    return code


# --------------------------------------------------------------------------- victims


@dataclass(frozen=True)
class Victims:
    kind: str  # pod | replica | node
    pods: tuple[str, ...]  # pods that go away
    node: str | None = None  # the node deleted (target node)
    replica: int | None = None

    def describe(self) -> str:
        what = {"pod": "pod", "replica": f"slice replica {self.replica}: pods",
                "node": f"node {self.node} (pods"}[self.kind]
        return f"{what} {', '.join(self.pods)}" + (")" if self.kind == "node" else "")


def _labels(pod) -> dict[str, str]:
    return dict(pod.metadata.labels or {})


def _replica(pod) -> int | None:
    v = _labels(pod).get(REPLICA_INDEX_LABEL)
    return int(v) if v is not None and v.isdigit() else None


def _running(pod) -> bool:
    phase = pod.status.phase if pod.status else None
    return phase == "Running" and not pod.metadata.deletion_timestamp


def select_victims(pods: list, target: str, replica: int | None = None,
                   nodes_in_pool: Callable[[str], str | None] | None = None,
                   node_pools: tuple[str, ...] = ()) -> Victims:
    """Which pods (or node) to kill among a worker group's running pods.

    ``replica`` picks the slice replica; by default the highest index, so replica 0
    (which holds Ray Train's rank 0 in a fresh start) survives. ``nodes_in_pool`` maps a
    node name to its node-pool label (target ``node``), which must be one of
    ``node_pools``.
    """
    if target not in TARGETS:
        raise DrillError(f"target {target!r}; allowed: {', '.join(TARGETS)}")
    running = [p for p in pods if _running(p)]
    if not running:
        raise DrillError("no running worker pod in the group")
    indices = sorted({r for p in running if (r := _replica(p)) is not None})
    if replica is None:
        if target == "replica" and not indices:
            raise DrillError(f"worker pods carry no {REPLICA_INDEX_LABEL} label (KubeRay >= 1.5 "
                             "sets it on multi-host groups): cannot tell slices apart")
        chosen = indices[-1] if indices else None
    elif replica not in indices:
        raise DrillError(f"no running pod of replica {replica}; running replicas: {indices}")
    else:
        chosen = replica
    members = sorted(
        (p for p in running if chosen is None or _replica(p) == chosen),
        key=lambda p: (int(_labels(p).get(HOST_INDEX_LABEL, "0") or 0), p.metadata.name),
    )
    first = members[0]
    if target == "pod":
        return Victims("pod", (first.metadata.name,), replica=chosen)
    if target == "replica":
        return Victims("replica", tuple(p.metadata.name for p in members), replica=chosen)
    node = first.spec.node_name
    if not node:
        raise DrillError(f"pod {first.metadata.name} is not on a node")
    pool = nodes_in_pool(node) if nodes_in_pool else None
    if pool not in node_pools:
        raise DrillError(f"node {node} is in node pool {pool!r}, not one of the group's "
                         f"slices {', '.join(node_pools)}: refusing to delete it")
    on_node = tuple(sorted(p.metadata.name for p in running if p.spec.node_name == node))
    return Victims("node", on_node, node=node, replica=chosen)


# --------------------------------------------------------------------------- the drill


def _status(job: dict) -> tuple[str, str]:
    st = job.get("status") or {}
    return st.get("jobDeploymentStatus", ""), st.get("jobStatus", "")


def run_drill(kube: Kube, p: DrillPlan, opts: DrillOptions,
              logs: Callable[[dict], LogSource] | None = None,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep,
              say: Callable[[str], None] = print) -> DrillReport:
    """Run the drill; raises :class:`DrillError` when it cannot start, otherwise returns a
    report whose ``ok`` says whether training recovered before the deadline."""
    started = clock()
    report = DrillReport(target=f"cluster:{p.stack}/{p.job}", job=p.job, elastic=p.elastic,
                         target_step=p.target_step)

    # 1. Running, past a committed checkpoint.
    log = TrainLog()
    source: LogSource | None = None
    cluster = p.ray_cluster
    while True:
        job = kube.ray_job(p.namespace, p.job)
        deployment, status = _status(job)
        st = job.get("status") or {}
        if status in TERMINAL_JOB_STATUSES or deployment in FAILED_DEPLOYMENT_STATUSES:
            raise DrillError(f"RayJob {p.namespace}/{p.job} is not running "
                             f"({deployment}/{status}): start it (pulumi up) and rerun the drill")
        if deployment == "Running" and status == "RUNNING" and st.get("jobId"):
            cluster = cluster or st.get("rayClusterName")
            if source is None:
                if p.ray_auth:
                    code = check_head_refuses_tokenless(kube, p.namespace, cluster, st)
                    report.notes.append(f"the head refused a request without a token ({code})")
                source = logs(st) if logs else SubmitterLogs(kube, p.namespace, p.job)
            log.feed(source.text())
            if log.latest_checkpoint is not None and log.last_step is not None:
                break
        if clock() - started > opts.wait_s:
            raise DrillError(
                f"RayJob {p.namespace}/{p.job} not running past a checkpoint after "
                f"{opts.wait_s:.0f} s ({deployment or '-'}/{status or '-'}, "
                f"last step {log.last_step}, checkpoints {log.committed[-3:]})")
        sleep(opts.poll_s)
    say(f"{p.job}: running at step {log.last_step}, checkpoint at step {log.latest_checkpoint}")

    # 2. The kill.
    pods = kube.worker_pods(p.namespace, cluster, p.group)
    victims = select_victims(
        pods, opts.target, opts.replica,
        nodes_in_pool=lambda n: _labels(kube.node(n)).get(NODEPOOL_LABEL),
        node_pools=p.node_pools)
    log.feed(source.text())  # the freshest step before the kill
    report.kill_step = log.last_step
    report.killed = victims.describe()
    attempts_before = log.attempts
    events_before = len(log.events)
    t_kill = clock()
    if victims.kind == "node":
        kube.delete_node(victims.node)
    else:
        for name in victims.pods:
            kube.delete_pod(p.namespace, name)
    say(f"killed {report.killed} at step {report.kill_step}")

    # 3. Follow until resumed and progressing, or the deadline.
    full = p.slices * p.hosts
    resumed_line = None
    while True:
        now = clock()
        log.feed(source.text())
        for e in log.events[events_before:]:
            if report.detect_s is None and e.kind in ("failure", "restore", "start"):
                report.detect_s = now - t_kill
                say(f"failure detected after {report.detect_s:.1f} s")
            if e.kind in ("restore", "start") and log.attempts > attempts_before:
                if e.step is not None and report.restored_step is None:
                    report.restored_step = e.step
                resumed_line = e.line if resumed_line is None else resumed_line
            if e.kind == "step" and resumed_line is not None and e.line > resumed_line \
                    and report.resume_s is None:
                report.resume_s = now - t_kill
                say(f"training resumed at step {e.step} after {report.resume_s:.1f} s "
                    f"(restored checkpoint {report.restored_step})")
        events_before = len(log.events)

        if report.scale_up_s is None:
            back = [x for x in kube.worker_pods(p.namespace, cluster, p.group)
                    if _running(x) and x.metadata.name not in victims.pods]
            if len(back) >= full:
                report.scale_up_s = now - t_kill
                say(f"worker group back at {full} pod(s) after {report.scale_up_s:.1f} s")

        deployment, status = _status(kube.ray_job(p.namespace, p.job))
        report.final_step = log.last_step
        progressed = (report.resume_s is not None and report.kill_step is not None
                      and log.last_step is not None
                      and log.last_step >= report.kill_step + opts.progress_steps)
        done = log.last_step is not None and log.last_step >= p.target_step
        if status == "SUCCEEDED" or (progressed and (not opts.until_done or done)):
            report.ok = progressed or (status == "SUCCEEDED" and report.resume_s is not None)
            break
        if status in ("STOPPED", "FAILED") or deployment in FAILED_DEPLOYMENT_STATUSES:
            report.notes.append(f"RayJob ended {deployment}/{status} before recovering")
            break
        if now - t_kill > opts.deadline_s:
            report.notes.append(
                f"no recovery within {opts.deadline_s:.0f} s: last step {log.last_step}, "
                f"killed at {report.kill_step}, resumed {'yes' if report.resume_s else 'no'}")
            break
        sleep(opts.poll_s)

    if report.restored_step is not None and report.kill_step is not None:
        report.steps_lost = max(0, report.kill_step - report.restored_step)
    report.steps_run = log.steps_run
    report.wall_s = clock() - started
    if problem := folded_problem(log.folded, "the job's log"):
        report.ok = False
        report.notes.append(problem)
    if report.scale_up_s is None:
        report.notes.append(f"worker group not back at {full} pod(s) when the drill ended")
    return report
