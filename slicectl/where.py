"""Where a stack's job runs, over ``kubectl``: ``slicectl jobs`` and ``slicectl logs``.

A single-region stack has one cluster: its RayJobs are there. A multi-region stack creates queued
RayJobs on its manager, whose MultiKueue copies each to the worker cluster that admits it; the
manager runs no pods (Kueue defaults the RayJob's ``spec.managedBy`` to MultiKueue there and
KubeRay skips it: kubernetes-sigs/kueue v0.19.2 site/content/en/docs/tasks/run/multikueue/kuberay.md
lines 33-37; "no pods will be created in the management cluster": keps/693-multikueue/README.md
lines 104-107), so no logs or exec there. The job's Workload on the manager names the worker:
``status.clusterName`` ("the worker cluster where the Workload has been successfully admitted",
concepts/multikueue.md line 84), and the MultiKueue admission check's message says
``The workload was admitted on "<cluster>"`` (pkg/controller/admissionchecks/multikueue/workload.go
line 1237). That MultiKueueCluster's name is the worker cluster's name
(``stackspec.names.multikueue_cluster``), hence its region and the kubeconfig context ``get-credentials``
writes. Elastic jobs that name a ``region`` are created in that region's cluster directly (no MultiKueue for them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from slicectl.exits import UsageError
from stackspec import names
from stackspec.spec import Job, StackSpec

# The Workload's owner is the RayJob (Kueue's jobframework sets the owner reference).
RAYJOB_API = "ray.io/v1"
WORKLOADS = "workloads.v1beta2.kueue.x-k8s.io"
RAYJOBS = "rayjobs.v1.ray.io"
MULTIKUEUE_MESSAGE = re.compile(r'admitted on "([^"]+)"')
REQUEST_TIMEOUT = "20s"


@dataclass(frozen=True)
class Place:
    """One cluster of the stack: a region's worker, or the manager (``region`` is its own)."""

    cluster: str  # the GKE cluster's name; a worker's is its MultiKueueCluster's name
    region: str
    location: str  # the cluster's zone or region, as get-credentials takes it
    project: str

    @property
    def context(self) -> str:
        return names.kube_context(self.project, self.location, self.cluster)

    def get_credentials(self) -> str:
        return (f"gcloud container clusters get-credentials {self.cluster} --location={self.location} "
                f"--project={self.project}")


def workers(spec: StackSpec) -> list[Place]:
    """The clusters jobs run in: one per region view of a multi-region stack, else the stack's one."""
    views = spec.region_views() if callable(getattr(spec, "region_views", None)) else [spec]
    return [Place(v.cluster.name, v.region, v.cluster.location, v.project) for v in views]


def manager(spec: StackSpec) -> Place | None:
    """The multi-region stack's manager (it holds the queues), None for a single-region stack."""
    m = getattr(spec, "manager", None)
    if m is None:
        return None
    region = getattr(m, "region", None) or spec.region
    # An Autopilot manager is regional; a Standard one names its location where the spec has it.
    location = getattr(m, "location", None) or region
    return Place(m.name, region, location, spec.project)


class Kubectl:
    """``kubectl`` as a subprocess: every failure one line naming the command and the fix."""

    def __init__(self, kubeconfig: str | None = None, binary: str = "kubectl"):
        self.kubeconfig = kubeconfig
        self.exe = shutil.which(binary)
        if self.exe is None:
            raise UsageError("kubectl not found on PATH: install it (e.g. `gcloud components install kubectl`)")
        self._contexts: set[str] | None = None

    def _base(self) -> list[str]:
        return [self.exe] + (["--kubeconfig", self.kubeconfig] if self.kubeconfig else [])

    def contexts(self) -> set[str]:
        if self._contexts is None:
            out = subprocess.run([*self._base(), "config", "get-contexts", "-o", "name"], capture_output=True,
                                 text=True)
            self._contexts = set(out.stdout.split()) if out.returncode == 0 else set()
        return self._contexts

    def check(self, place: Place) -> None:
        if place.context not in self.contexts():
            where = f" in {self.kubeconfig}" if self.kubeconfig else ""
            raise UsageError(f"no kube context {place.context}{where} for cluster {place.cluster} ({place.region}); "
                             f"run `{place.get_credentials()}`")

    def run(self, place: Place, args: Sequence[str]) -> str:
        self.check(place)
        argv = [*self._base(), "--context", place.context, "--request-timeout", REQUEST_TIMEOUT, *args]
        out = subprocess.run(argv, capture_output=True, text=True)
        if out.returncode != 0:
            lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()] or [f"exit {out.returncode}"]
            raise UsageError(f"kubectl --context {place.context} {' '.join(args)}: {lines[-1].strip()}")
        return out.stdout

    def items(self, place: Place, resource: str, namespace: str) -> list[dict]:
        text = self.run(place, ["get", resource, "-n", namespace, "-o", "json"])
        try:
            return json.loads(text).get("items") or []
        except json.JSONDecodeError:
            raise UsageError(f"kubectl --context {place.context} get {resource}: not JSON") from None


@dataclass(frozen=True)
class Found:
    job: str
    place: Place | None  # None: not placed yet (queued on the manager)
    admission: str  # how the place was found, or why there is none
    rayjob: dict | None = None  # the RayJob on its worker


def admitted_cluster(workload: dict) -> str | None:
    """The worker cluster a Workload was admitted on: ``status.clusterName``, else the MultiKueue
    admission check's message (older managers, or the moment before the field is written)."""
    status = workload.get("status") or {}
    if status.get("clusterName"):
        return status["clusterName"]
    for check in status.get("admissionChecks") or []:
        if check.get("state") == "Ready" and (m := MULTIKUEUE_MESSAGE.search(check.get("message") or "")):
            return m.group(1)
    return None


def workload_of(workloads: list[dict], rayjob: str) -> dict | None:
    """The Workload Kueue made for RayJob ``rayjob`` (its owner reference), the newest if several."""
    owned = [w for w in workloads if any(o.get("kind") == "RayJob" and o.get("name") == rayjob
                                         and o.get("apiVersion") == RAYJOB_API
                                         for o in (w.get("metadata") or {}).get("ownerReferences") or [])]
    owned.sort(key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "")
    return owned[-1] if owned else None


def pending_reason(workload: dict) -> str:
    status = workload.get("status") or {}
    nominated = status.get("nominatedClusterNames") or []
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    if (c := conditions.get("Finished")) and c.get("status") == "True":
        return f"finished: {c.get('message') or c.get('reason')}"
    if (c := conditions.get("Evicted")) and c.get("status") == "True":
        return f"evicted ({c.get('reason')}), requeued"
    if nominated:
        return f"dispatched, not yet admitted; nominated: {', '.join(nominated)}"
    if (c := conditions.get("QuotaReserved")) and c.get("status") == "False":
        return f"queued: {c.get('message') or c.get('reason')}"
    return "queued on the manager"


def locate(spec: StackSpec, kubectl: Kubectl, jobs: Sequence[Job]) -> list[Found]:
    """Where each job runs, and its RayJob there (one list call per cluster)."""
    ns = spec.storage.namespace
    places = workers(spec)
    by_cluster = {names.multikueue_cluster(p.cluster): p for p in places}  # a Workload names its MultiKueueCluster
    by_region = {p.region: p for p in places}
    mgr = manager(spec)
    workloads = kubectl.items(mgr, WORKLOADS, ns) if mgr and any(_queued(j) for j in jobs) else []
    found: list[tuple[Job, Place | None, str]] = []
    for job in jobs:
        if mgr is None:
            found.append((job, places[0], "single region"))
        elif not _queued(job):
            found.append((job, by_region.get(job.region), f"created in {job.region} (not through MultiKueue)"))
        elif (wl := workload_of(workloads, job.name)) is None:
            found.append((job, None, "no Workload on the manager (not submitted, or finished and deleted)"))
        elif (cluster := admitted_cluster(wl)) is None:
            found.append((job, None, pending_reason(wl)))
        elif cluster not in by_cluster:
            raise UsageError(f"job {job.name}: its Workload {wl['metadata']['name']} was admitted on cluster "
                             f"{cluster!r}, which the stack does not name (its clusters: {', '.join(by_cluster)})")
        else:
            found.append((job, by_cluster[cluster], f"admitted on {cluster} (Workload {wl['metadata']['name']})"))
    rayjobs: dict[str, dict[str, dict]] = {}
    for place in dict.fromkeys(p for _, p, _ in found if p is not None):
        rayjobs[place.cluster] = {r["metadata"]["name"]: r for r in kubectl.items(place, RAYJOBS, ns)}
    return [Found(job.name, place, how, rayjobs.get(place.cluster, {}).get(job.name) if place else None)
            for job, place, how in found]


def _queued(job: Job) -> bool:
    """Queued through the manager: every multi-region job that names no region of its own."""
    return getattr(job, "region", None) is None


def rayjob_status(rayjob: dict | None) -> tuple[str, str]:
    """(jobDeploymentStatus, jobStatus) of a RayJob, '-' where KubeRay has not said."""
    if rayjob is None:
        return "not found", "-"
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or "-"
    if (rayjob.get("metadata") or {}).get("deletionTimestamp"):  # deleted, held by a finalizer until KubeRay lets go
        deployment += " (deleting)"
    return deployment, status.get("jobStatus") or "-"
