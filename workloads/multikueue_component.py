"""MultiKueueManager and MultiKueueWorker: the documents of ``workloads/multikueue.py`` declared on each cluster.

The manager component installs Kueue from the same vendored release as the workers (with the MultiKueue
configuration), then its queues, a MultiKueueCluster per region, the token CronJob and Kueue's metrics
scraping, and binds the CronJob's Kubernetes service account to the Google service account it runs as (workload
identity, pulumi-gcp). The bootstrap creates that account and its cluster viewer role on the workers' projects
(bootstrap/components/stack_project.py StackProject: no deploy identity creates accounts or changes a project's IAM
policy).
The worker component adds, beside a region's own KueueQueueing, the ServiceAccount the manager acts as with its
RBAC, and Kueue's metrics scraping.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from stackspec.spec import StackSpec
from workloads import kueue
from workloads import multikueue as mk
from workloads.component import _custom, _rbac
from workloads.kueue_install import KueueInstall
from workloads.queueing import KueueObject


def _declare(name: str, doc: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    kind = doc["kind"]
    rname = f"{name}-{kind.lower()}-{doc['metadata']['name']}"
    if doc["apiVersion"] == kueue.KUEUE_API:
        return KueueObject(rname, doc, opts)
    if kind == "ServiceAccount":
        return k8s.core.v1.ServiceAccount(rname, metadata=doc["metadata"],
                                          automount_service_account_token=doc.get("automountServiceAccountToken"),
                                          opts=opts)
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(rname, metadata=doc["metadata"], data=doc["data"], opts=opts)
    if kind == "Secret":
        # Created empty; its data is the token job's (a merge patch of one key): never diffed, never written back.
        return k8s.core.v1.Secret(rname, metadata=doc["metadata"], type=doc["type"],
                                  opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
                                      ignore_changes=["data", "stringData"])))
    if kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        return _rbac(rname, doc, opts)
    return _custom(rname, doc, opts)  # CronJob, PodMonitoring: everything under spec


@dataclass(frozen=True)
class MultiKueueManagerArgs:
    manager: mk.Manager
    regions: Sequence[StackSpec]  # single-region views, in dispatch order
    k8s_provider: k8s.Provider
    # Each worker's API server URL (its DNS-based endpoint), in region order.
    endpoints: Sequence[pulumi.Input[str]]
    # The manager's workload namespace (the LocalQueue lives there) and its cluster (workload identity's
    # pool exists only once it does: cloud rule iam-wi-pool-exists).
    namespace: Sequence[pulumi.Resource] = field(default_factory=tuple)
    cluster: Sequence[pulumi.Resource] = field(default_factory=tuple)


class MultiKueueManager(pulumi.ComponentResource):
    """Kueue with MultiKueue on the manager cluster, its queues, and its keyless access to the workers."""

    def __init__(self, name: str, args: MultiKueueManagerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:MultiKueueManager", name, None, opts)
        m, regions = args.manager, list(args.regions)
        self.google_service_account = m.google_service_account
        base = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)

        # The account (and its roles on the workers' projects) is the bootstrap's; the deploy identity holds
        # roles/iam.serviceAccountAdmin on it alone to bind the KSA here, after the manager's cluster (its pool).
        self.workload_identity = gcp.serviceaccount.IAMMember(f"{name}-gsa-wi", gcp.serviceaccount.IAMMemberArgs(
            service_account_id=f"projects/{m.project}/serviceAccounts/{m.google_service_account}",
            role="roles/iam.workloadIdentityUser", member=mk.workload_identity_member(m)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.cluster)))

        self.namespace = k8s.core.v1.Namespace(f"{name}-ns", metadata=kueue.namespace(regions[0])["metadata"],
                                               opts=base)
        self.install = KueueInstall(
            f"{name}-install", mk.manager_helm_values(m, regions)["managerConfig"]["controllerManagerConfigYaml"],
            kueue.labels(regions[0], "kueue"), self.namespace, base)
        after_kueue = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(
            depends_on=[self.install, *args.namespace]))
        self.objects = {f"{d['kind']}/{d['metadata']['name']}": _declare(name, d, after_kueue)
                        for d in mk.manager_objects(m, regions)}

        # The token job: its ConfigMap carries the endpoints, known once the clusters exist.
        placeholder = ["https://endpoint"] * len(regions)
        access = mk.manager_access_objects(m, regions, placeholder)
        endpoints = pulumi.Output.all(*args.endpoints)
        self.access = {}
        for d in access:
            if d["kind"] == "ConfigMap":
                data = endpoints.apply(lambda eps, d=d: {
                    **d["data"], "targets.json": json.dumps(mk.token_targets(m, regions, list(eps)), indent=1)})
                d = {**d, "data": data}
            self.access[f"{d['kind']}/{d['metadata']['name']}"] = _declare(
                name, d, pulumi.ResourceOptions.merge(after_kueue, pulumi.ResourceOptions(
                    depends_on=[self.install, self.workload_identity])))
        self.register_outputs({
            "kueue": kueue.KUEUE_VERSION,
            "dispatchOrder": [r.cluster.name for r in regions],
            "googleServiceAccount": m.google_service_account,
            "objects": [*self.objects, *self.access],
        })


@dataclass(frozen=True)
class MultiKueueWorkerArgs:
    region: StackSpec
    manager: mk.Manager
    k8s_provider: k8s.Provider
    # The region's KueueQueueing (its release objects: kueue-system and Kueue's metrics reader role come with them).
    queueing: Sequence[pulumi.Resource] = field(default_factory=tuple)


class MultiKueueWorker(pulumi.ComponentResource):
    """On a region's cluster: the manager's ServiceAccount and RBAC, and Kueue's metrics scraping."""

    def __init__(self, name: str, args: MultiKueueWorkerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:MultiKueueWorker", name, None, opts)
        r = args.region
        after = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=list(args.queueing))
        docs = [*mk.worker_objects(r, args.manager), *mk.metrics_objects(r.stack, r.cluster.name)]
        self.objects = {f"{d['kind']}/{d['metadata']['name']}": _declare(name, d, after) for d in docs}
        self.register_outputs({"objects": list(self.objects), "managerUser": args.manager.google_service_account})
