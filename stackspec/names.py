"""Every name the project derives, computed here once and checked against its system's limit.

A name can be fine as typed and too long once something is appended to it (the node
service account ``<cluster>-nodes`` has at most 30 characters): :func:`derived` lists
each derived name with the spec key it comes from, and the spec model checks them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import limits

if TYPE_CHECKING:
    from .model import StackSpec

PROJECT = "tpu-multislice"  # the Pulumi project's name (Pulumi.yaml); also the config namespace
PART_OF = PROJECT  # app.kubernetes.io/part-of on every Kubernetes object

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight")


def stack_file(stack: str) -> str:
    return f"stacks/Pulumi.{stack}.yaml"


def node_service_account_id(cluster: str) -> str:
    """The GCP service account the cluster's nodes run as (never the default compute one)."""
    return f"{cluster}-nodes"


def network_name(cluster: str, index: int) -> str:
    """The default VPC of the ``index``-th (1-based) secondary network."""
    return f"{cluster}-net-{index}"


def trainer_configmap(ray_cluster: str) -> str:
    return f"{ray_cluster}-trainer"


def claim_template(networks: int) -> str:
    """``two-netdev`` for two secondary networks, as the seed names it."""
    return f"{_NUMBER_WORDS[networks]}-netdev" if networks < len(_NUMBER_WORDS) else f"netdev-{networks}"


def submitter_job(ray_job: str) -> str:
    """KubeRay names the Kubernetes Job that runs ``ray job submit`` after its RayJob."""
    return ray_job


def k8s_provider(cluster: str) -> str:
    return f"{cluster}-k8s"


@dataclass(frozen=True)
class Derived:
    key: str  # the spec key the name comes from (where an error points)
    name: str
    rule: limits.NameRule
    how: str  # how it is derived, for the message


def derived(spec: StackSpec) -> list[Derived]:
    """Every name the stack deploys, with the spec key it comes from and its limit."""
    ns = PROJECT
    c = spec.cluster.name
    out = [
        Derived(f"{ns}:cluster.name", c, limits.GKE_CLUSTER, "the GKE cluster"),
        Derived(f"{ns}:cluster.name", node_service_account_id(c), limits.SERVICE_ACCOUNT_ID,
                f"the node service account <cluster>-nodes ({node_service_account_id(c)})"),
        Derived(f"{ns}:ray.clusterName", spec.ray.cluster_name, limits.RAY_CLUSTER, "the shared RayCluster"),
        Derived(f"{ns}:ray.clusterName", trainer_configmap(spec.ray.cluster_name), limits.CONFIG_MAP,
                "the trainer ConfigMap <clusterName>-trainer"),
        Derived(f"{ns}:storage.namespace", spec.storage.namespace, limits.K8S_NAMESPACE, "the workload namespace"),
        Derived(f"{ns}:storage.serviceAccount", spec.storage.service_account, limits.K8S_SERVICE_ACCOUNT,
                "the workloads' Kubernetes service account"),
        Derived("stack", spec.stack, limits.LABEL_VALUE, "the tpu-multislice/stack label on every object"),
    ]
    for i, net in enumerate(spec.networks):
        k = f"{ns}:network.secondary[{i}]"
        out.append(Derived(f"{k}.network", net.network, limits.COMPUTE_NETWORK, "a secondary VPC"))
        out.append(Derived(f"{k}.subnet", net.subnet, limits.COMPUTE_SUBNETWORK, "a secondary subnet"))
    for i, s in enumerate(spec.slices):
        out.append(Derived(f"{ns}:slices[{i}].name", s.name, limits.GKE_NODE_POOL, "the slice's node pool"))
        out.append(Derived(f"{ns}:slices[{i}].group", s.group, limits.RAY_WORKER_GROUP, "the Ray worker group"))
    for i, j in enumerate(spec.jobs):
        out.append(Derived(f"{ns}:jobs[{i}].name", j.name, limits.RAY_JOB, "the RayJob (KubeRay appends 6 "
                                                                             "characters for its cluster)"))
        out.append(Derived(f"{ns}:jobs[{i}].name", submitter_job(j.name), limits.LABEL_VALUE,
                           "the submitter Job and the tpu-multislice/job label"))
        out.append(Derived(f"{ns}:jobs[{i}].runName", j.run_name, limits.RUN_NAME, "the MaxText run name"))
    return out
