"""A stand-in API server for real ``kubectl``: ``slicectl jobs`` and ``slicectl logs`` tests.

No Kubernetes API server runs here; this in-process HTTP server answers what ``kubectl get
<resource> -o json`` and ``kubectl logs job/<name>`` ask, in the API server's JSON: legacy
discovery (``/api``, ``/apis``, each group version's resource list), lists and reads of the objects
it holds (Workloads, RayJobs, Jobs, Pods) and a pod's log. One server per cluster; a kubeconfig
names each as a context (:func:`kubeconfig`), as ``get-credentials`` writes them.
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

    def add(self, obj: dict) -> None:
        gv, kind = obj["apiVersion"], obj["kind"]
        resource = next(r for r, k in RESOURCES[gv] if k == kind and "/" not in r)
        self.objects.setdefault((gv, resource), []).append(obj)


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


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
            return self._send(200, obj)

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
