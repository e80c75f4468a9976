"""A LOCAL API DOUBLE, not a Kubernetes API server: what real ``kubectl`` and the real kubernetes Python client
ask for ``slicectl jobs``, ``slicectl logs``, ``slicectl submit --apply`` and ``slicectl jobs --wait``/``delete``.

No Kubernetes API server runs here; this in-process HTTP server on 127.0.0.1 answers, in the API server's JSON:
legacy discovery (``/api``, ``/apis``, each group version's resource list), lists (with ``labelSelector``) and reads
of the objects it holds (Workloads, RayJobs, Jobs, Pods), a pod's log, a create (``POST``: 201 with the object, its
``uid``, ``creationTimestamp`` and ``resourceVersion`` set; 409 ``AlreadyExists`` for a taken name) and a delete (200
with the object kept and marked ``deletionTimestamp`` while it has finalizers, else removed with what it owns and a
``Success`` Status; 404 ``NotFound``),
errors as ``Status`` objects. Behind a create, Kueue's part: a Workload owned by the new RayJob, pending on quota.
Each read of a RayJob named in ``Cluster.scripts`` moves it (and its Workload) to the next scripted status, so a
test plays KubeRay and Kueue without wall time; the tests check every scripted status against the vendored CRDs
(RayJob ``status`` of KubeRay's, Workload ``conditions`` of Kueue's). One server per cluster; a kubeconfig names each
as a context (:func:`kubeconfig`), as ``get-credentials`` writes them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# group/version -> (resource, kind) served; every one namespaced.
RESOURCES = {
    "v1": [("pods", "Pod"), ("pods/log", "Pod")],
    "batch/v1": [("jobs", "Job")],
    "ray.io/v1": [("rayjobs", "RayJob"), ("rayclusters", "RayCluster")],
    "kueue.x-k8s.io/v1beta2": [("workloads", "Workload"), ("localqueues", "LocalQueue")],
}


@dataclass
class Cluster:
    """One cluster's objects: ``objects[(group/version, resource)] = [object, ...]``; pod logs by pod name."""

    name: str
    objects: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    # RayJob name -> the statuses its next reads show, one per read: {"rayjob": status, "workload": status or None}.
    scripts: dict[str, list[dict]] = field(default_factory=dict)
    kueue: bool = True  # a created RayJob gets its Workload, as Kueue's RayJob integration makes one
    # Reads (GET) from the n-th on answered 503 ServiceUnavailable, ``outage[1]`` of them: a control plane that is
    # upgrading or restarting (a zonal GKE cluster's single one is unavailable while it upgrades).
    outage: tuple[int, int] = (0, 0)
    reads: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def owned(self, kind: str, name: str) -> list[dict]:
        """The Workloads an object owns (Kueue's owner reference)."""
        return [w for w in self.objects.get(("kueue.x-k8s.io/v1beta2", "workloads"), [])
                if any(o.get("kind") == kind and o.get("name") == name
                       for o in w["metadata"].get("ownerReferences") or [])]

    def advance(self, rayjob: dict) -> None:
        script = self.scripts.get(rayjob["metadata"]["name"])
        if not script:
            return
        step = script.pop(0)
        rayjob["status"] = step["rayjob"]
        for w in self.owned("RayJob", rayjob["metadata"]["name"]):
            if step.get("workload") is not None:
                w["status"] = step["workload"]

    def add(self, obj: dict) -> None:
        gv, kind = obj["apiVersion"], obj["kind"]
        resource = next(r for r, k in RESOURCES[gv] if k == kind and "/" not in r)
        self.objects.setdefault((gv, resource), []).append(obj)


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


NOW = "2026-11-28T04:00:00Z"
# What Kueue writes on a Workload it cannot admit yet (kueue v0.19.2 pkg/scheduler: "couldn't assign flavors to pod
# set ...: insufficient unused quota ..."), reason Pending.
PENDING = {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "lastTransitionTime": NOW,
                           "message": "couldn't assign flavors to pod set workers: insufficient unused quota for "
                                      "google.com/tpu in flavor tpu-v6e-4x4, 16 more needed"}]}


def workload_for(rayjob: dict) -> dict:
    """The Workload Kueue's RayJob integration makes for a new RayJob (its pod sets, its owner), pending."""
    meta = rayjob["metadata"]
    spec = rayjob["spec"].get("rayClusterSpec") or {}
    pod_sets = [{"name": "head", "count": 1, "template": spec.get("headGroupSpec", {}).get("template")
                 or {"spec": {"containers": [{"name": "ray-head", "image": "ray"}]}}}]
    for g in spec.get("workerGroupSpecs") or []:
        pod_sets.append({"name": g["groupName"][:63], "count": g.get("replicas", 1) * g.get("numOfHosts", 1),
                         "template": g["template"]})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"rayjob-{meta['name']}-{meta['uid'][:5]}", "namespace": meta["namespace"],
                         "creationTimestamp": NOW, "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"queueName": (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name", ""),
                     "podSets": pod_sets},
            "status": json.loads(json.dumps(PENDING))}


def _handler(cluster: Cluster):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body, content_type: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            url = urlparse(self.path)
            cluster.requests.append(url.path)
            parts = [p for p in url.path.split("/") if p]
            query = parse_qs(url.query)
            with cluster.lock:
                cluster.reads += 1
                first, many = cluster.outage
                if many and first <= cluster.reads < first + many:
                    return self._send(503, _status(503, "ServiceUnavailable",
                                                   "the server is currently unable to handle the request"))
            if parts == ["api"]:
                return self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            if parts == ["apis"]:
                groups = {}
                for gv in RESOURCES:
                    if "/" in gv:
                        g, v = gv.split("/")
                        groups.setdefault(g, []).append({"groupVersion": gv, "version": v})
                return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                    {"name": g, "versions": vs, "preferredVersion": vs[0]} for g, vs in groups.items()]})
            if parts == ["version"]:
                return self._send(200, {"major": "1", "minor": "35", "gitVersion": "v1.35.2-gke.1842000"})
            if parts[:1] == ["api"]:
                gv, rest = "v1", parts[2:]
                if len(parts) == 2:
                    return self._resource_list(gv)
            elif parts[:1] == ["apis"] and len(parts) >= 3:
                gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
                if len(parts) == 3:
                    return self._resource_list(gv)
            else:
                return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            if gv not in RESOURCES or len(rest) < 3 or rest[0] != "namespaces":
                return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            ns, resource, name = rest[1], rest[2], rest[3] if len(rest) > 3 else None
            items = [o for o in cluster.objects.get((gv, resource), []) if o["metadata"].get("namespace") == ns]
            if name is None:
                selector = (query.get("labelSelector") or [""])[0]
                if selector:
                    want = dict(kv.split("=", 1) for kv in selector.split(","))
                    items = [o for o in items if want.items() <= (o["metadata"].get("labels") or {}).items()]
                kind = next(k for r, k in RESOURCES[gv] if r == resource)
                return self._send(200, {"kind": f"{kind}List", "apiVersion": gv, "metadata": {}, "items": items})
            obj = next((o for o in items if o["metadata"]["name"] == name), None)
            if obj is None:
                return self._send(404, _status(404, "NotFound", f'{resource} "{name}" not found'))
            if len(rest) > 4 and rest[4] == "log":
                return self._send(200, cluster.logs.get(name, ""), "text/plain")
            if resource == "rayjobs":
                with cluster.lock:
                    cluster.advance(obj)
            return self._send(200, obj)

        def _target(self):
            """(group/version, namespace, resource, name or None) of a write, or None (404 sent)."""
            url = urlparse(self.path)
            cluster.requests.append(f"{self.command} {url.path}")
            parts = [p for p in url.path.split("/") if p]
            gv, rest = (("v1", parts[2:]) if parts[:1] == ["api"] else
                        (f"{parts[1]}/{parts[2]}", parts[3:]) if parts[:1] == ["apis"] and len(parts) >= 3 else
                        ("", []))
            if gv not in RESOURCES or len(rest) < 3 or rest[0] != "namespaces":
                self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return None
            return gv, rest[1], rest[2], rest[3] if len(rest) > 3 else None

        def _body(self) -> dict:
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"{}")

        def do_POST(self):  # noqa: N802
            target = self._target()
            if target is None:
                return None
            gv, ns, resource, _ = target
            obj = self._body()
            kind = next((k for r, k in RESOURCES[gv] if r == resource), None)
            if obj.get("apiVersion") != gv or obj.get("kind") != kind:
                why = (f"the API version in the data ({obj.get('apiVersion')}) does not match the expected API "
                       f"version ({gv})")
                return self._send(400, _status(400, "BadRequest", why))
            meta = obj.setdefault("metadata", {})
            name = meta.get("name")
            with cluster.lock:
                taken = [o for o in cluster.objects.get((gv, resource), [])
                         if o["metadata"].get("namespace") == ns and o["metadata"]["name"] == name]
                if taken:
                    group = gv.split("/")[0] if "/" in gv else ""
                    return self._send(409, {**_status(409, "AlreadyExists",
                                                      f'{resource}.{group} "{name}" already exists'),
                                            "details": {"name": name, "group": group, "kind": resource}})
                n = sum(len(v) for v in cluster.objects.values())
                meta.update({"namespace": ns, "uid": f"{n:08d}-0000-4000-8000-{cluster.name[:12]:0>12}",
                             "creationTimestamp": NOW, "resourceVersion": str(1000 + n), "generation": 1})
                cluster.add(obj)
                if kind == "RayJob" and cluster.kueue:
                    cluster.add(workload_for(obj))
            return self._send(201, obj)

        def do_DELETE(self):  # noqa: N802
            target = self._target()
            if target is None:
                return None
            gv, ns, resource, name = target
            self._body()  # the DeleteOptions (propagationPolicy): the owned Workloads go either way
            with cluster.lock:
                objects = cluster.objects.get((gv, resource), [])
                obj = next((o for o in objects if o["metadata"].get("namespace") == ns
                            and o["metadata"]["name"] == name), None)
                if obj is None:
                    group = gv.split("/")[0] if "/" in gv else ""
                    return self._send(404, _status(404, "NotFound", f'{resource}.{group} "{name}" not found'))
                if obj["metadata"].get("finalizers"):
                    # The API server only marks it: the object stays, terminating, until its controller removes
                    # its finalizers (KubeRay's ray.io/rayjob-finalizer); its dependents go after it.
                    obj["metadata"].setdefault("deletionTimestamp", NOW)
                    obj["metadata"].setdefault("deletionGracePeriodSeconds", 0)
                    return self._send(200, obj)
                objects.remove(obj)
                for w in cluster.owned(obj["kind"], name):  # the garbage collector, owner references
                    cluster.objects[("kueue.x-k8s.io/v1beta2", "workloads")].remove(w)
            return self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                    "details": {"name": name, "group": gv.split("/")[0], "kind": resource,
                                                "uid": obj["metadata"].get("uid")}})

        def _resource_list(self, gv: str) -> None:
            if gv not in RESOURCES:
                return self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
            resources = [{"name": r, "singularName": "", "namespaced": True, "kind": k,
                          "verbs": ["get", "list"] if "/" not in r else ["get"]} for r, k in RESOURCES[gv]]
            return self._send(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                                    "resources": resources})

    return Handler


class Server:
    """``with Server(cluster) as url:`` serves ``cluster`` on a free local port."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))

    def __enter__(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def kubeconfig(contexts: dict[str, str]) -> dict:
    """A kubeconfig naming each context (``gke_<project>_<location>_<cluster>``) at its server URL."""
    return {"apiVersion": "v1", "kind": "Config", "current-context": next(iter(contexts)),
            "clusters": [{"name": c, "cluster": {"server": url}} for c, url in contexts.items()],
            "users": [{"name": "standin", "user": {"token": "offline"}}],
            "contexts": [{"name": c, "context": {"cluster": c, "user": "standin"}} for c in contexts]}


class MultiRegion:
    """A real single-region StackSpec seen as a multi-region one: ``region_views()`` (real StackSpecs,
    each with its region, zone, cluster name and first ``n`` slices) and a ``manager``, the interface
    the multi-region spec provides; everything else is the base spec's."""

    def __init__(self, spec, places: list[tuple[str, str, str, int]], manager=None):
        self._spec = spec
        self.manager = manager
        self._views = []
        for region, zone, cluster, n in places:
            c = spec.cluster.model_copy(update={"name": cluster, "location": zone})
            view = spec.model_copy(update={"region": region, "zone": zone, "cluster": c, "slices": spec.slices[:n]})
            view.__dict__.pop("groups", None)  # a cached_property: model_copy keeps the original's
            self._views.append(view)

    def region_views(self):
        return self._views

    def __getattr__(self, name):
        return getattr(self._spec, name)
