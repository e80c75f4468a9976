"""Short-lived credentials for Kueue, minted in the cluster that uses them (Python standard library only).

Run by a CronJob (``workloads/multikueue.py``) as ``python3 multikueue_token.py /config/targets.json``. For each
target it asks a Kubernetes API server for a one-hour token of a ServiceAccount (the TokenRequest API,
``POST /api/v1/namespaces/<ns>/serviceaccounts/<sa>/token``; RBAC verb ``create`` on ``serviceaccounts/token``,
https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/) and writes it
into a Secret of the cluster the job runs in:

- ``kubeconfig`` targets: a worker cluster's API server, reached with the pod's Google identity (workload
  identity: an OAuth access token from the GKE metadata server, which GKE's API server accepts as a bearer
  token and maps to the Google service account's email, its RBAC user). The Secret holds a kubeconfig under
  key ``kubeconfig``, as Kueue's MultiKueueCluster ``clusterSource.kubeConfig`` (``locationType: Secret``)
  reads it: a ``token`` user, ``certificate-authority-data`` only (Kueue 0.19 refuses token files, CA files,
  exec plugins and auth providers: pkg/controller/admissionchecks/multikueue/multikueuecluster.go
  ``validateKubeconfig``). Kueue watches the Secret and reconnects with the new token.
- ``token`` targets: a ServiceAccount of the same cluster (its in-cluster credentials); the Secret holds the
  bare token (Google Managed Prometheus' bearer credentials for Kueue's metrics endpoint).

No token outlives ``expirationSeconds`` (an hour by default), the job runs every 20 minutes, and nothing
long-lived (a ``kubernetes.io/service-account-token`` Secret, a key) exists anywhere.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The GKE metadata server (workload identity); GCE_METADATA_HOST is the variable Google's client libraries read.
METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
KUBECONFIG_KEY = "kubeconfig"  # kueue.MultiKueueConfigSecretKey
TOKEN_KEY = "token"

Opener = Callable[..., Any]


class TokenError(RuntimeError):
    """One target failed: which cluster, which call, what the server said."""


def _call(method: str, url: str, *, bearer: str, body: Mapping[str, Any] | None = None,
          content_type: str = "application/json", context: ssl.SSLContext | None = None,
          headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if bearer:
        req.add_header("Authorization", f"Bearer {bearer}")
    if data is not None:
        req.add_header("Content-Type", content_type)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:  # noqa: S310 (https/http only)
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}") if e.headers.get_content_type() == "application/json" else {}


def google_access_token(metadata_base: str) -> str:
    status, body = _call("GET", metadata_base + METADATA_TOKEN_PATH, bearer="",
                         headers={"Metadata-Flavor": "Google"})
    if status != 200 or "access_token" not in body:
        raise TokenError(f"metadata server: HTTP {status} (is workload identity on for this pod?)")
    return body["access_token"]


def request_token(server: str, namespace: str, service_account: str, seconds: int, bearer: str,
                  context: ssl.SSLContext | None = None) -> str:
    url = f"{server}/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
    status, body = _call("POST", url, bearer=bearer, context=context, body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds}})
    if status != 201:
        raise TokenError(f"TokenRequest {namespace}/{service_account} at {server}: HTTP {status} "
                         f"{body.get('message', '')}".rstrip())
    return body["status"]["token"]


def kubeconfig(cluster: str, server: str, token: str, ca_data: str | None = None) -> str:
    """The kubeconfig Kueue accepts: a server, an optional CA bundle inline, a bearer token."""
    entry: dict[str, Any] = {"server": server}
    if ca_data:
        entry["certificate-authority-data"] = ca_data
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": cluster,
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": f"{cluster}-multikueue", "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": f"{cluster}-multikueue"}}],
    }, indent=1)


def write_secret(api: str, namespace: str, name: str, key: str, value: str, bearer: str,
                 context: ssl.SSLContext | None = None) -> str:
    """Replaces the Secret's one key (a merge patch: RBAC ``patch`` on this name only). The stack creates each
    Secret empty (workloads/multikueue.py token_secrets), so this job holds no ``create`` on Secrets: a missing one
    is an error, never a Secret of another name."""
    data = {key: base64.b64encode(value.encode()).decode()}
    url = f"{api}/api/v1/namespaces/{namespace}/secrets/{name}"
    status, body = _call("PATCH", url, bearer=bearer, context=context, body={"data": data},
                         content_type="application/merge-patch+json")
    if status == 404:
        raise TokenError(f"Secret {namespace}/{name} does not exist: the stack creates it (pulumi up)")
    if status != 200:
        raise TokenError(f"Secret {namespace}/{name}: HTTP {status} {body.get('message', '')}".rstrip())
    return "updated"


def refresh(config: Mapping[str, Any], *, local_api: str, local_bearer: str, metadata_base: str,
            local_context: ssl.SSLContext | None = None) -> list[str]:
    """Every target of ``config`` once; the lines to log. Raises after trying all if any failed."""
    lines, failed = [], []
    namespace = config["namespace"]
    for t in config["targets"]:
        try:
            seconds = int(t.get("expirationSeconds", 3600))
            if t["kind"] == "kubeconfig":
                bearer = google_access_token(metadata_base)
                ca = t.get("caData")
                remote = ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None
                token = request_token(t["server"], t["tokenNamespace"], t["serviceAccount"], seconds, bearer,
                                      remote)
                value, key = kubeconfig(t["cluster"], t["server"], token, t.get("caData")), KUBECONFIG_KEY
            else:
                token = request_token(local_api, t["tokenNamespace"], t["serviceAccount"], seconds, local_bearer,
                                      local_context)
                value, key = token, TOKEN_KEY
            how = write_secret(local_api, namespace, t["secret"], key, value, local_bearer, local_context)
            lines.append(f"{t['secret']}: {how} ({t['kind']}, {seconds}s)")
        except (TokenError, OSError, KeyError, ValueError) as e:
            failed.append(f"{t.get('secret', '?')}: {e}")
    if failed:
        raise TokenError("; ".join(failed))
    return lines


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        config = json.load(f)
    with open(f"{SA_DIR}/token") as f:
        local_bearer = f.read().strip()
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    context = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")
    metadata = "http://" + os.environ.get("GCE_METADATA_HOST", "metadata.google.internal")
    try:
        for line in refresh(config, local_api=f"https://{host}:{port}", local_bearer=local_bearer,
                            metadata_base=metadata, local_context=context):
            print(line)
    except TokenError as e:
        print(f"multikueue-token: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
