"""The Kubernetes API through the official Python client (``kubernetes``), for a job's lifecycle: ``slicectl submit
--apply``, ``slicectl jobs`` (list, ``--wait``) and ``slicectl jobs delete``.

Each cluster of a stack is reached through the kubeconfig context ``gcloud container clusters get-credentials``
writes for it (:class:`slicectl.where.Place`), or one named with ``--context`` (``current``: the kubeconfig's
current context). The kubeconfig is ``--kubeconfig``, else ``$KUBECONFIG`` (a ``:``-separated list is merged, as
kubectl merges it), else ``~/.kube/config``. Every API error is one line naming the cluster, the call and what the
API server said.

When a RayJob has finished, and whether it succeeded, is what Kueue's RayJob integration decides
(kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/rayjob/rayjob_controller.go ``Finished``: finished when
``status.jobDeploymentStatus`` is ``Failed`` or ``Complete``; success when ``status.jobStatus`` is ``SUCCEEDED``),
and ``ValidationFailed`` with no RayCluster: KubeRay sets it and never reconciles the job on
(ray-project/kuberay@feeaf72 ray-operator/controllers/ray/rayjob_controller.go, no requeue after it). Kueue v0.19.2
only holds such a job (``IsOnHold``); its main branch after v0.19.2 finishes it (kueue 94c8bd44c7, #13415, in no
release yet), over KubeRay's states (ray-project/kuberay
ray-operator/apis/ray/v1/rayjob_types.go ``JobDeploymentStatus``: "", Initializing, Running, Complete, Failed,
ValidationFailed, Suspending, Suspended, Retrying, Waiting).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slicectl.exits import UsageError
from slicectl.where import Place

REQUEST_TIMEOUT = 20  # seconds, per call (kubectl's --request-timeout in slicectl.where)
CURRENT = "current"  # --context current: the kubeconfig's current context
DELETE_PROPAGATION = "Background"  # the RayJob goes now; its RayCluster and Kueue Workload follow (owner references)


def kubeconfig_path(given: str | None) -> str:
    """``--kubeconfig``, else ``$KUBECONFIG`` (possibly a list), else ``~/.kube/config``."""
    return given or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


@dataclass(frozen=True)
class Resource:
    """A namespaced resource by its ``plural.version.group`` name, as slicectl.where names them."""

    group: str
    version: str
    plural: str

    @classmethod
    def of(cls, name: str) -> Resource:
        plural, version, group = name.split(".", 2)
        return cls(group, version, plural)


def finished(rayjob: dict) -> tuple[bool, bool]:
    """(finished, succeeded) of a RayJob, as Kueue's integration decides them (module docstring)."""
    status = rayjob.get("status") or {}
    deployment = status.get("jobDeploymentStatus") or ""
    done = deployment in ("Failed", "Complete") or (deployment == "ValidationFailed"
                                                    and not status.get("rayClusterName"))
    return done, done and status.get("jobStatus") == "SUCCEEDED"


class KubeApi:
    """The clusters of a stack through the kubernetes client; the interface of :class:`slicectl.where.Kubectl`
    (``contexts``, ``check``, ``items``) plus ``get``, ``create`` and ``delete``."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None):
        from kubernetes import config

        self.path = kubeconfig_path(kubeconfig)
        self.override = context
        try:
            listed, current = config.list_kube_config_contexts(config_file=self.path)
        except (config.ConfigException, OSError) as e:
            raise UsageError(f"kubeconfig {self.path}: {str(e).splitlines()[0]} (get one with `gcloud container "
                             "clusters get-credentials`)") from None
        self._contexts = {c["name"] for c in listed or []}
        self._current = (current or {}).get("name")
        self._clients: dict[str, Any] = {}

    def contexts(self) -> set[str]:
        return set(self._contexts)

    def context_of(self, place: Place) -> str:
        if self.override == CURRENT:
            if not self._current:
                raise UsageError(f"kubeconfig {self.path}: no current context (--context names one)")
            return self._current
        return self.override or place.context

    def check(self, place: Place) -> None:
        ctx = self.context_of(place)
        if ctx not in self._contexts:
            hint = (f"run `{place.get_credentials()}`" if ctx == place.context
                    else f"contexts there: {', '.join(sorted(self._contexts)) or 'none'}")
            raise UsageError(f"no kube context {ctx} in {self.path} for cluster {place.cluster} ({place.region}); "
                             f"{hint}")

    def _api(self, place: Place):
        from kubernetes import client, config

        self.check(place)
        ctx = self.context_of(place)
        if ctx not in self._clients:
            self._clients[ctx] = client.CustomObjectsApi(config.new_client_from_config(config_file=self.path,
                                                                                       context=ctx))
        return self._clients[ctx]

    def _call(self, place: Place, what: str, fn, *args, **kwargs):
        """One API call; its failure one line (the API server's Status message, or why it was not reached)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as e:
            raise KubeError(e.status, f"{what} in cluster {place.cluster} (context {self.context_of(place)}): "
                            f"{e.status} {_message(e)}") from None
        except HTTPError as e:
            raise KubeError(0, f"{what} in cluster {place.cluster} (context {self.context_of(place)}): the API "
                               f"server was not reached ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None

    def items(self, place: Place, resource: str, namespace: str, label_selector: str | None = None) -> list[dict]:
        r = Resource.of(resource)
        api = self._api(place)
        extra = {"label_selector": label_selector} if label_selector else {}
        out = self._call(place, f"list {r.plural}.{r.group} in {namespace}", api.list_namespaced_custom_object,
                         r.group, r.version, namespace, r.plural, **extra)
        return out.get("items") or []

    def get(self, place: Place, resource: str, namespace: str, name: str) -> dict | None:
        r = Resource.of(resource)
        api = self._api(place)
        try:
            return self._call(place, f"get {r.plural}.{r.group} {namespace}/{name}", api.get_namespaced_custom_object,
                              r.group, r.version, namespace, r.plural, name)
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def create(self, place: Place, resource: str, body: dict) -> dict:
        r = Resource.of(resource)
        api = self._api(place)
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return self._call(place, f"create {r.plural}.{r.group} {ns}/{name}", api.create_namespaced_custom_object,
                              r.group, r.version, ns, r.plural, body)
        except KubeError as e:
            if e.status == 409:
                raise UsageError(f"{e}: choose another --name") from None
            raise

    def delete(self, place: Place, resource: str, namespace: str, name: str) -> dict:
        from kubernetes import client

        r = Resource.of(resource)
        api = self._api(place)
        return self._call(place, f"delete {r.plural}.{r.group} {namespace}/{name}",
                          api.delete_namespaced_custom_object, r.group, r.version, namespace, r.plural, name,
                          body=client.V1DeleteOptions(propagation_policy=DELETE_PROPAGATION))


# Answers that say "not now" rather than "no": the API server unreachable (0), throttling (429), or unable to serve
# (5xx, e.g. a zonal control plane while it upgrades). ``jobs --wait`` waits them out, as kubectl wait's informer
# lists and watches again after an error (kubernetes/kubectl@dee3483 pkg/cmd/wait/condition.go UntilWithSync).
TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})


class KubeError(UsageError):
    """An API server's refusal (its HTTP status kept for the callers that expect one, e.g. 404; 0: not reached)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT


def _message(e) -> str:
    """The Status object's message the API server sends with an error, else the HTTP reason."""
    import json

    try:
        body = json.loads(e.body or "{}")
    except ValueError:
        body = {}
    return body.get("message") or e.reason or "error"
