"""The multi stack against Kueue's own multi-cluster setup, object by object: every difference is one
docs/multikueue.md explains.

The oracle is Kueue v0.19.2's, vendored in ``vendor/kueue-multikueue/`` (source, commit and digests in
``vendor/README.md``): the MultiKueue e2e suite (its helper ``test/util/multikueue.go`` creating the
worker's ServiceAccount, RBAC and kubeconfig Secret; the baseline suite's Kueue configuration; the DRA e2e test's
manager and worker objects) and the documentation's setup (``multikueue-setup.yaml`` for the manager,
``create-multikueue-kubeconfig.sh`` for a worker). Both sides are reduced to the same keys (what the manager
holds, what a worker holds, how the manager reaches a worker); defaults are read from the vendored CRDs and
Kueue's configuration defaults, so an unset field compares as what Kueue makes of it. Names and quantities are
never compared (a kind cluster's ``cpu: 9`` is not ours). :func:`differences` gives ids ``<source>:<key>``; the
table under "## Compared with Kueue's own setup" in docs/multikueue.md must list exactly these, each with why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import VENDOR
from test_dispatch import allowed, clusters, kubeconfig_targets, kueue_e2e_rules

from offline import engine

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "multikueue.md"
SECTION = "## Compared with Kueue's own setup"
REF = VENDOR / "kueue-multikueue"
KUEUE_KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "AdmissionCheck", "MultiKueueConfig",
               "MultiKueueCluster", "WorkloadPriorityClass", "ResourceClaimTemplate")
OUR_GROUPS = ("kueue.x-k8s.io", "ray.io")  # the frameworks' and Kueue's: a worker grants nothing else
WRITES = ("create", "update", "patch", "delete")


def crd_default(path: list[str]) -> Any:
    """The default the vendored ClusterQueue CRD (v1beta2) gives ``spec.<path>``."""
    crd = yaml.safe_load((VENDOR / "kueue" / "kueue.x-k8s.io_clusterqueues.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    node = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in path:
        node = node["properties"][key]
    return node.get("default")


def cluster_queue_keys(cq: dict[str, Any] | None, kinds_by_check: dict[str, str]) -> dict[str, Any]:
    spec = (cq or {}).get("spec", {})
    sel = spec.get("namespaceSelector")
    preemption = spec.get("preemption") or {}
    return {
        "manager.ClusterQueue.namespaces": "all" if sel == {} else "none" if sel is None else
        f"matching {sel}",
        "manager.ClusterQueue.queueingStrategy": spec.get("queueingStrategy") or crd_default(["queueingStrategy"]),
        "manager.ClusterQueue.preemption.withinClusterQueue": preemption.get("withinClusterQueue")
        or crd_default(["preemption", "withinClusterQueue"]),
        "manager.ClusterQueue.admissionChecks": sorted(
            kinds_by_check.get(c["name"], "?") for c in spec.get("admissionChecksStrategy", {}).get(
                "admissionChecks", [])),
    }


def manager_keys(docs: list[dict[str, Any]], config: dict[str, Any] | None, token: dict[str, Any],
                 rct_on_manager: bool) -> dict[str, Any]:
    """``config`` None: the source states no Kueue configuration (its keys are not compared)."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    checks = {c["metadata"]["name"]: c["spec"]["controllerName"] for c in by_kind.get("AdmissionCheck", [])}
    [cq] = [c for c in by_kind.get("ClusterQueue", []) if c["spec"].get("admissionChecksStrategy")]
    out = {f"manager.holds.{k}": k in by_kind or (k == "ResourceClaimTemplate" and rct_on_manager)
           for k in KUEUE_KINDS}
    out |= cluster_queue_keys(cq, checks)
    out |= {
        "manager.ResourceFlavor.spec": sorted({str(f.get("spec", {})) for f in by_kind["ResourceFlavor"]}),
        "manager.AdmissionCheck.parameters": sorted({(c["spec"]["parameters"]["apiGroup"],
                                                     c["spec"]["parameters"]["kind"])
                                                    for c in by_kind["AdmissionCheck"]}),
        "manager.MultiKueueCluster.source": sorted({(m["spec"]["clusterSource"]["kubeConfig"]["locationType"])
                                                   for m in by_kind["MultiKueueCluster"]}),
        **{f"kubeconfig.{k}": v for k, v in token.items()},
    }
    if config is not None:
        out |= {
            "kueue.integrations": sorted(config.get("integrations", {}).get("frameworks", [])),
            "kueue.featureGates": sorted(k for k, v in (config.get("featureGates") or {}).items() if v),
            "kueue.multiKueue.dispatcher": (config.get("multiKueue") or {}).get(
                "dispatcherName", "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"),  # defaults.go:138
            "kueue.waitForPodsReady": "set" if config.get("waitForPodsReady") else "Kueue's default",
        }
    return out


def worker_keys(rules: set[tuple[str, str, str]], write_scope: str, tokens: str,
                cq: dict[str, Any] | None) -> dict[str, Any]:
    """``cq``: a worker's ClusterQueue (None: the source shows none, Kueue's defaults apply)."""
    within = ((cq or {}).get("spec", {}).get("preemption") or {}).get("withinClusterQueue")
    return {"worker.rbac.rules": sorted(r for r in rules if r[0] in OUR_GROUPS),
            "worker.rbac.writeScope": write_scope, "worker.endpoint.serviceAccountTokens": tokens,
            "worker.ClusterQueue.preemption.withinClusterQueue": within or crd_default(
                ["preemption", "withinClusterQueue"]),
            "worker.ClusterQueue.admissionChecks.multikueue": any(
                "multikueue" in c["name"] for c in (cq or {}).get("spec", {}).get("admissionChecksStrategy", {})
                .get("admissionChecks", []))}


# --------------------------------------------------------------------------- ours


def ours(rendering: engine.Rendering) -> dict[str, Any]:
    cs = clusters(rendering)
    manager = cs[rendering.outputs["manager"]]
    targets = [t for t in kubeconfig_targets(manager).values() if t["kind"] == "kubeconfig"]
    token = {"secretNamespace": sorted({t["secretNamespace"] for t in targets}),
             "tokenSeconds": sorted({t["expirationSeconds"] for t in targets}),
             "caData": any(t.get("caData") for t in targets)}
    keys = manager_keys([d for d in manager.docs if d["kind"] in KUEUE_KINDS], manager.kueue_config, token,
                        bool(manager.of_kind("ResourceClaimTemplate")))
    worker = cs[rendering.outputs["dispatchOrder"][0]]
    sa = ("ServiceAccount", targets[0]["tokenNamespace"], targets[0]["serviceAccount"])
    ns = sorted({j["metadata"]["namespace"] for j in manager.of_kind("RayJob")})[0]
    # Every verb on every resource Kueue's rules name: what the worker's RBAC grants the token there.
    candidates = {(g, r, v) for g, r, _ in kueue_e2e_rules(manager.kueue_config["integrations"]["frameworks"])
                  for v in ("get", "list", "watch", *WRITES)}
    rules = {c for c in candidates if allowed(worker, sa, c[2], c[0], c[1], ns)}
    cluster_wide_writes = any(allowed(worker, sa, v, g, r, "kube-system") for g, r, v in rules if v in WRITES)
    dns = worker.gke["controlPlaneEndpointsConfig"]["dnsEndpointConfig"]
    [worker_cq] = worker.of_kind("ClusterQueue")
    keys |= worker_keys(rules, "cluster" if cluster_wide_writes else "job namespace",
                        "accepted" if dns.get("enableK8sTokensViaDns") else "refused (401)", worker_cq)
    keys["worker.tokenMinting"] = "TokenRequest by the manager's Google identity (a worker Role)"
    return keys


# --------------------------------------------------------------------------- Kueue's


def _heredocs(script: str, env: dict[str, str]) -> list[list[dict[str, Any]]]:
    blocks = re.findall(r"<<EOF\n(.*?)\nEOF", script, re.S)
    out = []
    for b in blocks:
        for k, v in env.items():
            b = b.replace("${" + k + "}", v)
        try:
            out.append([d for d in yaml.safe_load_all(b) if d])
        except yaml.YAMLError:
            continue  # the kubeconfig template (shell substitutions inside)
    return out


def docs_setup() -> dict[str, Any]:
    """The documentation's manager setup and worker script."""
    manager_docs = [d for d in yaml.safe_load_all((REF / "site_static_examples_multikueue_multikueue-setup.yaml")
                                                  .read_text()) if d]
    script = (REF / "site_static_examples_multikueue_create-multikueue-kubeconfig.sh").read_text()
    env = dict(re.findall(r"^(\w+)=(\S+)$", script, re.M))
    env["MULTIKUEUE_SA"], env["NAMESPACE"] = "multikueue-sa", "kueue-system"
    objs = [d for block in _heredocs(script, env) for d in block]
    [role] = [d for d in objs if d["kind"] == "ClusterRole"]
    [binding] = [d for d in objs if d["kind"] == "ClusterRoleBinding"]
    long_lived = any(d["kind"] == "Secret" and d.get("type") == "kubernetes.io/service-account-token" for d in objs)
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    rules = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
             for v in rule["verbs"]}
    token = {"secretNamespace": ["kueue-system"],  # "in the namespace the kueue controller manager runs into"
             "tokenSeconds": ["no expiry (a kubernetes.io/service-account-token Secret)"] if long_lived else [],
             "caData": "certificate-authority-data: ${CA_CERT}" in script}
    keys = manager_keys(manager_docs, None, token, rct_on_manager=False)
    keys |= worker_keys({r for r in rules if r[1].split("/")[0] in ("workloads", "clusterqueues", "localqueues",
                                                                    "rayjobs", "rayclusters")},
                        "cluster", "accepted", None)
    keys["worker.tokenMinting"] = "a long-lived Secret read by an administrator"
    return keys


def e2e_setup() -> dict[str, Any]:
    """The MultiKueue e2e suites: the DRA test's manager objects, the baseline Kueue configuration, the helper's
    worker RBAC (for the manager's frameworks: ours, the ones the rules are keyed by) and kubeconfig."""
    dra = (REF / "test_e2e_multikueue_dra_dra_test.go").read_text()
    helper = (REF / "test_util_multikueue.go").read_text()
    config = yaml.safe_load((REF / "test_e2e_config_multikueue_baseline_controller_manager_config.yaml").read_text())
    # The DRA test's manager: MakeMultiKueueCluster(...).KubeConfig(kueue.SecretLocationType, ...), a
    # MultiKueueConfig, AdmissionCheck(ControllerName(kueue.MultiKueueControllerName), Parameters(group,
    # "MultiKueueConfig", ...)), a flavor without labels, a ClusterQueue with the check and no namespace
    # selector (MakeClusterQueue's default: all namespaces), a LocalQueue; the claim template on the manager too.
    assert "KubeConfig(kueue.SecretLocationType" in dra and 'Parameters(kueue.SchemeGroupVersion.Group, ' \
        '"MultiKueueConfig"' in dra and "AdmissionChecks(kueue.AdmissionCheckReference(multiKueueAc.Name))" in dra
    manager_docs = [
        {"kind": "ResourceFlavor", "metadata": {"name": "dra-flavor"}, "spec": {}},
        {"kind": "MultiKueueCluster", "metadata": {"name": "worker1"},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "multikueue1"}}}},
        {"kind": "MultiKueueConfig", "metadata": {"name": "multikueueconfig"}, "spec": {"clusters": ["worker1"]}},
        {"kind": "AdmissionCheck", "metadata": {"name": "ac1"}, "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "multikueueconfig"}}},
        {"kind": "ClusterQueue", "metadata": {"name": "dra-cq"}, "spec": {
            "namespaceSelector": {}, "admissionChecksStrategy": {"admissionChecks": [{"name": "ac1"}]}}},
        {"kind": "LocalQueue", "metadata": {"name": "dra-cq", "namespace": "multikueuedra-x"}, "spec": {}},
    ]
    rct_on_manager = "util.MustCreate(ctx, k8sManagerClient, managerRct)" in dra
    days = re.search(r"ExpirationSeconds: new\(int64\((\d+) \* (\d+) \* (\d+)\)\)", helper)
    token = {"secretNamespace": ["kueue-system"] if 'MakeMultiKueueSecret(ctx, k8sManagerClient, kueueNS' in
             (REF / "test_e2e_multikueue_baseline_suite_test.go").read_text() else [],
             "tokenSeconds": [int(days[1]) * int(days[2]) * int(days[3])],
             "caData": "CertificateAuthorityData: restConfig.CAData" in helper}
    keys = manager_keys(manager_docs, config, token, rct_on_manager)
    rules = {(g, r, v) for g, r, verbs in kueue_e2e_rules(["ray.io/rayjob", "ray.io/raycluster"]) for v in verbs}
    scope = "cluster" if "rbacv1.ClusterRoleBinding" in helper else "?"
    # A kind cluster's API server takes ServiceAccount tokens; the workers' ClusterQueues are
    # MakeClusterQueue("dra-cq").ResourceGroup(...).Obj(): no preemption, no check.
    assert 'worker1Cq = utiltestingapi.MakeClusterQueue("dra-cq").' in dra
    keys |= worker_keys(rules, scope, "accepted", {"spec": {}})
    keys["worker.tokenMinting"] = "a 7-day TokenRequest by the test harness"
    return keys


def differences(rendering: engine.Rendering) -> dict[str, tuple[Any, Any]]:
    mine = ours(rendering)
    out = {}
    for source, theirs in (("e2e", e2e_setup()), ("docs", docs_setup())):
        assert set(theirs) <= set(mine), set(theirs) - set(mine)
        out |= {f"{source}:{k}": (mine[k], theirs[k]) for k in theirs if mine[k] != theirs[k]}
    return out


def doc_table(text: str) -> dict[str, list[str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == SECTION), None)
    rows: dict[str, list[str]] = {}
    if start is None:
        return rows
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        first = cells[0].strip("`")
        if first in ("id", "difference") or set(first) <= set("-: "):
            continue
        rows[first] = cells[1:]
    return rows


@pytest.fixture(scope="module")
def multi():
    return engine.render("multi")


def test_every_difference_from_kueues_setup_is_explained(multi):
    found = differences(multi)
    table = doc_table(DOC.read_text())
    unexplained = sorted(set(found) - set(table))
    stale = sorted(set(table) - set(found))
    assert not unexplained and not stale, (
        f"docs/multikueue.md '{SECTION}' is out of date.\n"
        + "".join(f"  unexplained: {i}: ours {found[i][0]!r}, Kueue's {found[i][1]!r}\n" for i in unexplained)
        + "".join(f"  stale row: {i}\n" for i in stale))
    for rid, cells in table.items():
        assert len(cells) == 3 and all(cells), f"docs row {rid}: needs ours, Kueue's and why"


def test_what_we_share_with_kueues_setup(multi):
    """The agreements that matter, stated: MultiKueue objects of the same shape, the claim template on the manager
    as the DRA e2e test has it, exactly the e2e suite's worker rules (only their scope differs)."""
    mine, e2e = ours(multi), e2e_setup()
    for key in ("manager.holds.MultiKueueCluster", "manager.holds.ResourceClaimTemplate",
                "manager.AdmissionCheck.parameters", "manager.MultiKueueCluster.source", "manager.ResourceFlavor.spec",
                "manager.ClusterQueue.admissionChecks", "kubeconfig.secretNamespace", "worker.rbac.rules",
                "worker.endpoint.serviceAccountTokens"):
        assert mine[key] == e2e[key], key
    assert set(e2e) == set(mine)


def test_the_oracle_is_read_not_assumed():
    """Each side's facts come out of the vendored files (a parser returning nothing would hide a difference)."""
    docs, e2e = docs_setup(), e2e_setup()
    assert ("ray.io", "rayjobs", "create") in docs["worker.rbac.rules"]
    assert e2e["kubeconfig.tokenSeconds"] == [7 * 24 * 3600] and e2e["kubeconfig.caData"] is True
    assert e2e["kueue.featureGates"] == ["MultiKueueManagerQuotaAutomation"]
    assert docs["manager.ClusterQueue.namespaces"] == "all" and docs["manager.ClusterQueue.admissionChecks"] == [
        "kueue.x-k8s.io/multikueue"]
    assert crd_default(["queueingStrategy"]) == "BestEffortFIFO"
