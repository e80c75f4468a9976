"""KueueQueueing: Kueue installed from its vendored release manifest, and the stack's queue objects.

The documents come from ``workloads/kueue.py`` (pure functions of the spec); this component
declares them on the cluster's provider: the ``kueue-system`` namespace, Kueue's release objects
(``workloads/kueue_install.py``: each a resource of its own, so a saved plan holds them on day 0 too),
then the ResourceFlavors, priority classes,
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
from workloads.kueue_install import KueueInstall


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
    """Kueue (its release manifest, pinned) and the stack's flavors, priority classes and queues."""

    namespace: k8s.core.v1.Namespace
    install: KueueInstall
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
        self.install = KueueInstall(
            f"{name}-install", kueue.helm_values(spec)["managerConfig"]["controllerManagerConfigYaml"],
            kueue.labels(spec, "kueue"), self.namespace, base)
        # The CRDs and the webhook come with Kueue's release objects: the queue objects wait for them.
        after_kueue = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(
            depends_on=[self.install, *args.namespace]))
        self.objects = {
            f"{doc['kind']}/{doc['metadata']['name']}": KueueObject(
                f"{name}-{doc['kind'].lower()}-{doc['metadata']['name']}", doc, after_kueue)
            for doc in kueue.all_objects(spec)
        }
        self.register_outputs({
            "kueue": kueue.KUEUE_VERSION,
            "clusterQueue": kueue.cluster_queue(spec)["metadata"]["name"],
            "localQueue": kueue.local_queue(spec)["metadata"]["name"],
            "objects": list(self.objects),
        })
