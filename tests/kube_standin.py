"""A stand-in for a GKE API server running one elastic RayJob, for the cluster drill's tests.

No Kubernetes API server can run here, so this in-process HTTP server answers the few
REST calls the drill makes, in the API server's own JSON, to the real Kubernetes Python
client: read a RayJob, list/delete pods by label, read the RayJob submitter pod's log (the Ray
job's log, as KubeRay's submitter follows it), read/delete a node, read a service, and GET
through a service proxy to the Ray dashboard's ``/api/jobs/`` (401 without a token when the
plan says ``ray.auth: token``, as Ray's dashboard answers; ``open_head`` plays an operator that
dropped ``authOptions``). There are no Secrets: the drill reads none.

Behind it, :class:`Sim` plays KubeRay and a MaxText job under Ray Train: worker pods
labelled as KubeRay labels them (``ray.io/cluster``, ``ray.io/group``,
``ray.io/worker-group-replica-index``, ``ray.io/replica-host-index``) on nodes labelled
with their node pool, and a log that grows by one training step per log read (so tests
do not depend on wall time), with MaxText's and Ray Train's real log lines. A deleted
worker pod (or node) makes the run fail, restart from its last *committed* checkpoint
(an asynchronous save commits ``commit_ticks`` reads after it starts), and KubeRay
replace the pods. ``recover=False`` stalls after the failure; ``fail_job=True`` makes the
RayJob fail (a non-elastic job).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from drills.cluster import (
    CLUSTER_LABEL,
    GROUP_LABEL,
    HOST_INDEX_LABEL,
    JOB_NAME_LABEL,
    NODE_TYPE_LABEL,
    NODEPOOL_LABEL,
    REPLICA_INDEX_LABEL,
    DrillPlan,
)

DASHBOARD_PORT = 8265


@dataclass
class Sim:
    plan: DrillPlan
    cluster: str
    checkpoint_period: int = 3
    commit_ticks: int = 1  # reads after an async save starts until Orbax commits it
    init_reads: int = 2  # RayJob reads while Initializing
    detect_ticks: int = 2  # reads after the kill until Ray Train logs the failure
    restore_ticks: int = 2  # further reads until MaxText restores and steps again
    replace_ticks: int = 3  # reads after the kill until KubeRay's new pods run
    recover: bool = True
    fail_job: bool = False
    hosts_print: int = 2  # workers that print each step line (deduplicated by the drill)
    # After the restart, each step's lines as a driver with Ray's log deduplication on prints them (one folded
    # line standing for the hosts'); None: printed whole (RAY_DEDUP_LOGS=0).
    fold: Callable[[str, int], str] | None = None
    job_id: str = "rayjob-llama3-8b-elastic-abcde"
    # The head serves requests without a token although the plan says ray.auth: token.
    open_head: bool = False
    # Ground truth, for the tests to compare the report with.
    lines: list[str] = field(default_factory=list)
    step: int = 0  # next step to run
    committed: list[int] = field(default_factory=list)
    saves: list[tuple[int, int]] = field(default_factory=list)  # (step, tick started)
    ticks: int = 0
    rayjob_reads: int = 0
    killed_at_tick: int | None = None
    kill_step: int | None = None  # last step run before the kill
    restored: int | None = None
    steps_run: int = 0
    status: str = "RUNNING"
    deleted: list[str] = field(default_factory=list)  # pods and nodes, in order
    pods: dict[str, dict] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        per_slice = max(1, len(self.plan.node_pools) // self.plan.slices)  # a pool per capacity option
        for r in range(self.plan.slices):
            pool = self.plan.node_pools[r * per_slice + per_slice - 1]  # each slice on its last fallback
            for h in range(self.plan.hosts):
                node = f"gke-{pool}-{h}"
                self.nodes[node] = {"metadata": {"name": node, "labels": {NODEPOOL_LABEL: pool}}}
                self._add_pod(f"{self.cluster}-{self.plan.group}-worker-r{r}h{h}", r, h, node)
        # The RayJob's submitter pod (a Job named after the RayJob), whose log is the Ray job's.
        self.pods[f"{self.plan.job}-sbmtr"] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{self.plan.job}-sbmtr", "namespace": self.plan.namespace,
                         "labels": {JOB_NAME_LABEL: self.plan.job}},
            "spec": {"nodeName": "cpu-pool-0", "containers": [{"name": "ray-job-submitter", "image": "ray"}]},
            "status": {"phase": "Running"}}

    def _add_pod(self, name: str, replica: int, host: int, node: str, phase: str = "Running"):
        self.pods[name] = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.plan.namespace, "labels": {
                CLUSTER_LABEL: self.cluster, GROUP_LABEL: self.plan.group,
                NODE_TYPE_LABEL: "worker", REPLICA_INDEX_LABEL: str(replica),
                HOST_INDEX_LABEL: str(host)}},
            "spec": {"nodeName": node, "containers": [{"name": "ray-worker", "image": "ray"}]},
            "status": {"phase": phase},
        }
        # A head pod and another group's pods, which no selector of the drill may match.
        self.pods.setdefault(f"{self.cluster}-head", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{self.cluster}-head", "namespace": self.plan.namespace,
                         "labels": {CLUSTER_LABEL: self.cluster, NODE_TYPE_LABEL: "head"}},
            "spec": {"nodeName": "cpu-pool-0", "containers": [{"name": "ray-head", "image": "ray"}]},
            "status": {"phase": "Running"}})

    # ----------------------------------------------------------------- training

    def _say(self, text: str, worker: bool = True) -> None:
        prefix = "(RayTrainWorker pid=1234, ip=10.68.9.5) " if worker else ""
        self.lines.append(prefix + text)

    def tick(self) -> None:
        self.ticks += 1
        for s, started in self.saves:
            if s not in self.committed and self.ticks - started >= self.commit_ticks:
                self.committed.append(s)
        if self.killed_at_tick is None:
            self._train()
            return
        since = self.ticks - self.killed_at_tick
        if since == self.replace_ticks:
            self._replace_pods()
        if self.restored is None:
            if since == self.detect_ticks:
                self._say("[FailurePolicy] RETRY\n  Source: worker group\n  Error count: 1 "
                          "(max allowed: 3)\nError: Training failed due to worker errors:",
                          worker=False)
                if self.fail_job:
                    self.status = "FAILED"
            elif self.recover and not self.fail_job and \
                    since == self.detect_ticks + self.restore_ticks:
                self.restored = max(self.committed) if self.committed else None
                self.step = (self.restored + 1) if self.restored is not None else 0
                self._say("checkpoint manager exists so trying to load this run's existing checkpoint")
                self._say(f"restoring from this run's directory step {self.restored}")
            return
        self._train()

    def _train(self) -> None:
        if self.step >= self.plan.target_step + 1:
            self.status = "SUCCEEDED"
            return
        line = (f"completed step: {self.step}, seconds: 0.512, TFLOP/s/device: 180.1, "
                f"Tokens/s/device: 8000.0, total_weights: 65536, loss: 10.8")
        if self.fold is not None and self.restored is not None:
            if self.step % 3 == 0:  # one line every few steps stands for the hosts' lines since
                self._say(self.fold(line, 3 * self.hosts_print))
        else:
            for _ in range(self.hosts_print):
                self._say(line)
        self.steps_run += 1
        if self.step % self.checkpoint_period == 0:
            self._say(f"Started an asynchronous checkpoint save for step {self.step}")
            self.saves.append((self.step, self.ticks))
        self.step += 1

    def kill(self, pods: list[str]) -> None:
        if self.killed_at_tick is None:
            self.killed_at_tick = self.ticks
            self.kill_step = self.step - 1
            # An async save still in flight when a worker dies is lost.
            self.saves = [(s, t) for s, t in self.saves if s in self.committed]
        for name in pods:
            self.pods.pop(name, None)

    def _replace_pods(self) -> None:
        have = {(p["metadata"]["labels"].get(REPLICA_INDEX_LABEL),
                 p["metadata"]["labels"].get(HOST_INDEX_LABEL)) for p in self.pods.values()}
        for r in range(self.plan.slices):
            for h in range(self.plan.hosts):
                if (str(r), str(h)) not in have:
                    node = f"gke-{self.plan.node_pools[r]}-{h}"
                    self.nodes.setdefault(node, {"metadata": {
                        "name": node, "labels": {NODEPOOL_LABEL: self.plan.node_pools[r]}}})
                    self._add_pod(f"{self.cluster}-{self.plan.group}-worker-r{r}h{h}-new", r, h, node)

    # ----------------------------------------------------------------- API objects

    def rayjob(self) -> dict:
        self.rayjob_reads += 1
        init = self.rayjob_reads <= self.init_reads
        status = {"jobDeploymentStatus": "Initializing"} if init else {
            "jobDeploymentStatus": {"FAILED": "Failed", "SUCCEEDED": "Complete"}.get(
                self.status, "Running"),
            "jobStatus": self.status,
            "jobId": self.job_id,
            "rayClusterName": self.cluster,
            "dashboardURL": f"{self.cluster}-head-svc.{self.plan.namespace}"
                            f".svc.cluster.local:{DASHBOARD_PORT}",
        }
        return {"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": self.plan.job, "namespace": self.plan.namespace},
                "status": status}


def _matches(labels: dict, selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        k, _, v = term.partition("=")
        if labels.get(k) != v:
            return False
    return True


class StandIn:
    """Start with ``with StandIn(sim) as host:``; ``host`` is the API server's URL."""

    def __init__(self, sim: Sim):
        self.sim = sim
        self.requests: list[tuple[str, str]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _send(self, code: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                standin.route(self, "GET")

            def do_DELETE(self):  # noqa: N802
                standin.route(self, "DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, h, method: str) -> None:
        url = urlparse(h.path)
        path = url.path  # raw: the real API server routes kubectl's unencoded proxy path
        self.requests.append((method, path))
        sim = self.sim
        ns = sim.plan.namespace
        not_found = {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}
        with sim.lock:
            if method == "GET" and path == f"/apis/ray.io/v1/namespaces/{ns}/rayjobs/{sim.plan.job}":
                return h._send(200, sim.rayjob())
            if method == "GET" and path == f"/api/v1/namespaces/{ns}/pods":
                sel = parse_qs(url.query).get("labelSelector", [""])[0]
                items = [p for p in sim.pods.values() if _matches(p["metadata"]["labels"], sel)]
                return h._send(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                                     "items": items})
            if method == "GET" and (m := re.fullmatch(rf"/api/v1/namespaces/{ns}/pods/([^/]+)/log", path)):
                if m.group(1) != f"{sim.plan.job}-sbmtr":
                    return h._send(404, not_found)
                sim.tick()
                body = "".join(line + "\n" for line in sim.lines).encode()
                h.send_response(200)
                h.send_header("Content-Type", "text/plain")
                h.send_header("Content-Length", str(len(body)))
                h.end_headers()
                h.wfile.write(body)
                return None
            if m := re.fullmatch(rf"/api/v1/namespaces/{ns}/pods/([^/]+)", path):
                pod = sim.pods.get(m.group(1))
                if pod is None:
                    return h._send(404, not_found)
                if method == "DELETE":
                    sim.deleted.append(m.group(1))
                    sim.kill([m.group(1)])
                return h._send(200, pod)
            if m := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
                node = sim.nodes.get(m.group(1))
                if node is None:
                    return h._send(404, not_found)
                if method == "DELETE":
                    sim.deleted.append(m.group(1))
                    sim.nodes.pop(m.group(1))
                    sim.kill([n for n, p in sim.pods.items() if p["spec"]["nodeName"] == m.group(1)])
                    return h._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})
                return h._send(200, node)
            svc = f"{sim.cluster}-head-svc"
            if method == "GET" and path == f"/api/v1/namespaces/{ns}/services/{svc}":
                return h._send(200, {"metadata": {"name": svc, "namespace": ns}, "spec": {
                    "ports": [{"name": "dashboard", "port": DASHBOARD_PORT}]}})
            proxy = f"/api/v1/namespaces/{ns}/services/{svc}:{DASHBOARD_PORT}/proxy"
            if method == "GET" and path == f"{proxy}/api/jobs/":
                # As Ray's dashboard with token auth: 401 to a request without the token (the drill sends none).
                if sim.plan.ray_auth and not sim.open_head:
                    return h._send(401, {"error": "Unauthorized: missing or invalid token"})
                return h._send(200, [{"submission_id": sim.job_id}])
        return h._send(404, not_found)
