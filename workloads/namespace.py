"""WorkloadNamespace: the namespace every namespaced object of the stack lives in, created first.

The document comes from ``workloads/security.py`` (its Pod Security labels are explained there). Every
namespaced object (the checkpoint KSA, the RayCluster and RayJobs, the LocalQueue, the NetworkPolicies, the
drill's Role, the PodMonitorings) depends on this component, so none is applied before its namespace exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from stackspec.spec import StackSpec
from workloads import security


@dataclass(frozen=True)
class WorkloadNamespaceArgs:
    spec: StackSpec
    k8s_provider: k8s.Provider


class WorkloadNamespace(pulumi.ComponentResource):
    """The ``storage.namespace`` Namespace with its Pod Security labels (none for a dev stack on ``default``)."""

    namespace: k8s.core.v1.Namespace | None

    def __init__(self, name: str, args: WorkloadNamespaceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:WorkloadNamespace", name, None, opts)
        doc = security.workload_namespace(args.spec)
        self.namespace = (
            k8s.core.v1.Namespace(name, metadata=doc["metadata"],
                                  opts=pulumi.ResourceOptions(parent=self, provider=args.k8s_provider))
            if doc
            else None
        )
        self.name = args.spec.storage.namespace
        self.register_outputs({"name": self.name, "labels": doc["metadata"]["labels"] if doc else {}})
