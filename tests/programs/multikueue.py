"""A Pulumi program declaring the MultiKueue components for two regions of prod (tests/test_multikueue.py runs it
with offline.engine.render, the real engine under mocks); the multi-region program wires the same components."""

import json

from offline import provider_modules

provider_modules.install()

import pulumi  # noqa: E402
import pulumi_kubernetes as k8s  # noqa: E402

from offline import engine  # noqa: E402
from stackspec import names  # noqa: E402
from stackspec import spec as stack_spec  # noqa: E402
from workloads import multikueue as mk  # noqa: E402
from workloads.multikueue_component import (  # noqa: E402
    MultiKueueManager,
    MultiKueueManagerArgs,
    MultiKueueWorker,
    MultiKueueWorkerArgs,
)


def region(cluster: str, gcp_region: str, zone: str) -> stack_spec.StackSpec:
    cfg = dict(engine.stack_config("prod"))
    c = json.loads(cfg["tpu-multislice:cluster"])
    c["name"] = cluster
    cfg["tpu-multislice:cluster"], cfg["gcp:region"], cfg["gcp:zone"] = json.dumps(c), gcp_region, zone
    return stack_spec.load("prod", cfg)


regions = [region("tpu-use5", "us-east5", "us-east5-b"), region("tpu-apne1", "asia-northeast1", "asia-northeast1-b")]
manager = mk.Manager("tpu-manager", "my-tpu-project", "us-central1", regions[0].storage.namespace, "multiregion")
providers = {n: k8s.Provider(names.k8s_provider(n), kubeconfig="{}")
             for n in [manager.name, *(r.cluster.name for r in regions)]}
endpoints = [pulumi.Output.from_input(f"https://gke-{r.cluster.name}.{r.region}.gke.goog") for r in regions]
MultiKueueManager("mk", MultiKueueManagerArgs(manager=manager, regions=regions, k8s_provider=providers["tpu-manager"],
                                              endpoints=endpoints))
for r in regions:
    MultiKueueWorker(f"mk-{r.cluster.name}", MultiKueueWorkerArgs(region=r, manager=manager,
                                                                   k8s_provider=providers[r.cluster.name]))
