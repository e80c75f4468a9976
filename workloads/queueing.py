"""KueueQueueing: Kueue installed from its pinned Helm chart, and the stack's queue objects.

The documents come from ``workloads/kueue.py`` (pure functions of the spec); this component
declares them on the cluster's provider: the ``kueue-system`` namespace, the ``kueue`` chart
(``helm.v4.Chart``, pinned version, OCI repository), then the ResourceFlavors, priority classes,
the DWS admission check where a slice asks for it, the ClusterQueue and the LocalQueue.
Whatever Kueue must manage (RayJobs, the shared RayCluster) depends on this component, so Kueue's
webhook is serving before any of them is created (else KubeRay would start them unqueued).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from stackspec.spec import StackSpec
from workloads import kueue


@dataclass(frozen=True)
class KueueQueueingArgs:
    spec: StackSpec
    k8s_provider: k8s.Provider
    # The workload namespace: the LocalQueue lives there (the ClusterQueue's namespaceSelector names it).
    namespace: Sequence[pulumi.Resource] = field(default_factory=tuple)


class KueueObject(pulumi.CustomResource):
    """A Kueue object as the Kubernetes provider applies any custom resource: the whole document.

    ``apiextensions.CustomResource`` in Python carries ``spec`` only; a WorkloadPriorityClass keeps
    ``value`` and ``description`` at the top level.
    """

    def __init__(self, name: str, doc: dict[str, Any], opts: pulumi.ResourceOptions):
        super().__init__(f"kubernetes:{doc['apiVersion']}:{doc['kind']}", name, dict(doc), opts)


class KueueQueueing(pulumi.ComponentResource):
    """Kueue (Helm chart kueue, pinned) and the stack's flavors, priority classes and queues."""

    namespace: k8s.core.v1.Namespace
    chart: k8s.helm.v4.Chart
    objects: dict[str, KueueObject]

    def __init__(self, name: str, args: KueueQueueingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:KueueQueueing", name, None, opts)
        spec = args.spec
        base = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)

        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=kueue.namespace(spec)["metadata"],
            opts=base,
        )
        self.chart = k8s.helm.v4.Chart(
            f"{name}-chart",
            # The release name: the chart names its objects kueue-* (the webhook Secret the drift check skips).
            name=kueue.RELEASE,
            chart=kueue.CHART,
            version=kueue.CHART_VERSION,
            namespace=kueue.NAMESPACE,
            values=kueue.helm_values(spec),
            opts=pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(depends_on=[self.namespace])),
        )
        # The CRDs and the webhook come with the chart: the objects wait for it.
        after_chart = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(
            depends_on=[self.chart, *args.namespace]))
        self.objects = {
            f"{doc['kind']}/{doc['metadata']['name']}": KueueObject(
                f"{name}-{doc['kind'].lower()}-{doc['metadata']['name']}", doc, after_chart)
            for doc in kueue.all_objects(spec)
        }
        self.register_outputs({
            "chart": f"{kueue.CHART}:{kueue.CHART_VERSION}",
            "clusterQueue": kueue.cluster_queue(spec)["metadata"]["name"],
            "localQueue": kueue.local_queue(spec)["metadata"]["name"],
            "objects": list(self.objects),
        })
