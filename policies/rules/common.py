"""What every rule shares: the rule context, resource views and Kubernetes walkers.

Props come either from the Pulumi engine (through pulumi_policy's read-only proxy)
or from the offline engine: camelCase keys, numbers possibly floats (``4.0``).
Nothing here needs more than the standard library and the slice model.
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stackspec import kube, tpu

# Resource type tokens the rules look at.
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
NETWORK = "gcp:compute/network:Network"
SUBNETWORK = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
# The checkpoint bucket's authoritative policy (infra/checkpoints.py): its grants are in its policyData.
BUCKET_IAM_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
BUCKET_GRANTS = (BUCKET_IAM_MEMBER, BUCKET_IAM_POLICY)
BUCKET = "gcp:storage/bucket:Bucket"
RAY_CLUSTER = "kubernetes:ray.io/v1:RayCluster"
RAY_JOB = "kubernetes:ray.io/v1:RayJob"
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
SERVICE = "kubernetes:core/v1:Service"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"

NETDEV_DEVICE_CLASS = kube.NETDEV_DEVICE_CLASS
GCSFUSE_DRIVER = kube.GCSFUSE_DRIVER


@dataclass(frozen=True)
class Context:
    """What a rule knows besides the resource: the stack's environment and its pack config.

    ``environment`` is the stack's ``tpu-multislice:environment``; anything but ``dev``
    (including an unknown one) is held to production rules: safe by default.
    """

    environment: str = "prod"
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def prod(self) -> bool:
        return self.environment != "dev"


@dataclass(frozen=True)
class Res:
    """One resource of the stack as a stack rule sees it."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    dependencies: tuple[str, ...] = ()  # URNs it waits for (explicit depends_on and its inputs' resources)
    # The name of the explicit provider it goes through (a Kubernetes object: its cluster's, names.k8s_provider);
    # None for the default providers. A multi-region stack's rules tell its clusters apart by it.
    provider: str | None = None


# --------------------------------------------------------------------------- values


def get(obj: Any, path: str, default: Any = None) -> Any:
    """``obj['a']['b'][0]`` for ``path='a.b.0'``; ``default`` where any step is missing."""
    cur = obj
    for part, index in _steps(path):
        if type(cur) is dict or isinstance(cur, Mapping):  # a plain dict first: rules call this 300,000 times at scale
            if part not in cur:
                return default
            cur = cur[part]
        elif index is not None and isinstance(cur, Sequence) and not isinstance(cur, str):
            if index >= len(cur):
                return default
            cur = cur[index]
        else:
            return default
    return default if cur is None else cur


@functools.cache
def _steps(path: str) -> tuple[tuple[str, int | None], ...]:
    """A :func:`get` path's keys, each with its list index where it is all digits."""
    return tuple((part, int(part) if part.isdigit() else None) for part in path.split("."))


def as_int(value: Any) -> int | None:
    """Engine numbers (``4.0``) and Kubernetes quantities (``"4"``) as ints; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def items(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return []


# --------------------------------------------------------------------------- TPU node pools


def is_tpu_pool(props: Mapping[str, Any]) -> bool:
    return tpu.is_tpu_machine_type(str(get(props, "nodeConfig.machineType", "")))


def pool_topology(props: Mapping[str, Any]) -> str | None:
    """The pool's TPU topology: ``tpuTopology``, or the machine type's single-host topology."""
    topo = get(props, "placementPolicy.tpuTopology")
    if topo:
        return str(topo)
    machine = str(get(props, "nodeConfig.machineType", ""))
    for gen in tpu.GENERATIONS.values():
        for mt in gen.machine_types:
            if mt.name == machine:
                single = [t for t in gen.topologies
                          if tpu.topology_chips(t) == mt.chips_per_host
                          and machine in tpu.machine_types_for(gen, t)]
                return single[0] if single else None
    return None


def pool_shape(props: Mapping[str, Any]) -> tpu.SliceShape | None:
    """The slice a TPU node pool provisions, or None when it is not a valid TPU slice."""
    if not is_tpu_pool(props):
        return None
    topo = pool_topology(props)
    if topo is None:
        return None
    return slice_shape(str(get(props, "nodeConfig.machineType")), topo)


@functools.cache
def slice_shape(machine_type: str, topology: str) -> tpu.SliceShape | None:
    """A machine type and topology's slice (immutable; every pool of a stack asks for one of a few)."""
    try:
        return tpu.from_machine_type(machine_type, topology)
    except tpu.SliceError:
        return None


def pool_slice(r: Res) -> str:
    """The slice a TPU node pool serves: its slice label (a slice's fallback pools, one per
    capacity option, share it), else the pool's own name."""
    return str(get(r.props, f"nodeConfig.labels.{kube.SLICE_LABEL}") or get(r.props, "name", r.name))


def pool_networks(props: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return items(get(props, "networkConfig.additionalNodeNetworkConfigs", []))


def pool_spot(props: Mapping[str, Any]) -> bool:
    return bool(get(props, "nodeConfig.spot", False) or get(props, "nodeConfig.preemptible", False))


# --------------------------------------------------------------------------- Kubernetes


def k8s_name(props: Mapping[str, Any]) -> str:
    return str(get(props, "metadata.name", "?"))


def cluster_specs(type_: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, RayCluster spec) for a RayCluster and for a RayJob that brings its own cluster."""
    if type_ == RAY_CLUSTER and isinstance(get(props, "spec"), Mapping):
        yield "spec", props["spec"]
    elif type_ == RAY_JOB and isinstance(get(props, "spec.rayClusterSpec"), Mapping):
        yield "spec.rayClusterSpec", props["spec"]["rayClusterSpec"]


def worker_groups(type_: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, worker group spec) of every Ray worker group in a RayCluster or RayJob."""
    for path, spec in cluster_specs(type_, props):
        for i, group in enumerate(items(get(spec, "workerGroupSpecs", []))):
            yield f"{path}.workerGroupSpecs[{i}]", group


_POD_TEMPLATE_PATHS = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec.template.spec",),
    "kubernetes:apps/v1:StatefulSet": ("spec.template.spec",),
    "kubernetes:apps/v1:DaemonSet": ("spec.template.spec",),
    "kubernetes:batch/v1:Job": ("spec.template.spec",),
    "kubernetes:batch/v1:CronJob": ("spec.jobTemplate.spec.template.spec",),
    RAY_JOB: ("spec.submitterPodTemplate.spec",),
}


def pod_specs(type_: str, props: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, pod spec) of every pod template a Kubernetes object carries."""
    for path, spec in cluster_specs(type_, props):
        head = get(spec, "headGroupSpec.template.spec")
        if isinstance(head, Mapping):
            yield f"{path}.headGroupSpec", head
        for i, group in enumerate(items(get(spec, "workerGroupSpecs", []))):
            pod = get(group, "template.spec")
            if isinstance(pod, Mapping):
                yield f"{path}.workerGroupSpecs[{i}]({get(group, 'groupName', i)})", pod
    for path in _POD_TEMPLATE_PATHS.get(type_, ()):
        pod = get(props, path)
        if isinstance(pod, Mapping):
            yield path, pod


def containers(pod: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers"):
        for c in items(get(pod, key, [])):
            if isinstance(c, Mapping):
                yield c


def tpu_request(container: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(requests, limits) of ``google.com/tpu`` for one container."""
    return _quantity(container, "requests"), _quantity(container, "limits")


def _quantity(container: Mapping[str, Any], kind: str) -> int | None:
    res = get(container, f"resources.{kind}", {})
    if isinstance(res, Mapping) and tpu.TPU_RESOURCE in res:
        return as_int(res[tpu.TPU_RESOURCE])
    return None


def group_tpu_chips(group: Mapping[str, Any]) -> int | None:
    """Chips per host a worker group asks for (its first container requesting TPUs)."""
    for c in containers(get(group, "template.spec", {})):
        req, lim = tpu_request(c)
        if req is not None or lim is not None:
            return req if req is not None else lim
    return None


def group_selector(group: Mapping[str, Any]) -> tuple[str | None, str | None]:
    sel = get(group, "template.spec.nodeSelector", {})
    if not isinstance(sel, Mapping):
        return None, None
    return sel.get(tpu.ACCELERATOR_LABEL), sel.get(tpu.TOPOLOGY_LABEL)


def group_shape(group: Mapping[str, Any]) -> tpu.SliceShape | None:
    """The slice shape a TPU worker group targets, or None when it is not a consistent one."""
    accel, topo = group_selector(group)
    chips = group_tpu_chips(group)
    if not accel or not topo or chips is None:
        return None
    try:
        return tpu.from_node_labels(str(accel), str(topo), chips)
    except tpu.SliceError:
        return None


def is_tpu_group(group: Mapping[str, Any]) -> bool:
    accel, _ = group_selector(group)
    return bool(accel) or group_tpu_chips(group) is not None


# --------------------------------------------------------------------------- trainer entrypoint


@dataclass(frozen=True)
class TrainerCall:
    """A RayJob entrypoint as the trainer reads it: its own flags, then MaxText's key=value."""

    flags: Mapping[str, str]
    maxtext: Mapping[str, str]

    def int_flag(self, name: str) -> int | None:
        return as_int(self.flags.get(name))

    def mesh(self, level: str) -> dict[str, int]:
        """MaxText ``<level>_<axis>_parallelism`` settings as {axis: degree}."""
        out = {}
        for key, value in self.maxtext.items():
            if key.startswith(f"{level}_") and key.endswith("_parallelism"):
                axis = key[len(level) + 1:-len("_parallelism")]
                degree = as_int(value)
                out[axis] = degree if degree is not None else 0
        return out


_BOOLEAN_FLAGS = {"--local"}


def parse_entrypoint(entrypoint: str) -> TrainerCall | None:
    """Split ``python trainer.py --slices 2 ... -- key=value ...``; None when it has no ``--mode``.

    Flags before `` -- `` are the trainer's (``--flag value`` or ``--flag=value``);
    ``key=value`` words after it are MaxText's (a leading config path has no ``=``).
    """
    try:
        words = shlex.split(entrypoint)
    except ValueError:
        return None
    own, rest = (words[:words.index("--")], words[words.index("--") + 1:]) if "--" in words \
        else (words, [])
    flags: dict[str, str] = {}
    i = 0
    while i < len(own):
        word = own[i]
        if word.startswith("--"):
            if "=" in word:
                k, v = word.split("=", 1)
                flags[k] = v
            elif word in _BOOLEAN_FLAGS or i + 1 >= len(own) or own[i + 1].startswith("--"):
                flags[word] = "true"
            else:
                flags[word] = own[i + 1]
                i += 1
        i += 1
    if "--mode" not in flags:
        return None
    maxtext = dict(w.split("=", 1) for w in rest if "=" in w)
    return TrainerCall(flags, maxtext)


def grants(props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, member) of an IAM resource: a member or binding resource's own, or every binding of a policy's
    ``policyData`` (the JSON the provider's getIAMPolicy data source makes; unknown during a preview: none)."""
    data = get(props, "policyData")
    if isinstance(data, str) and data.startswith("{"):
        return [(str(b.get("role", "")), str(m)) for b in json.loads(data).get("bindings") or []
                for m in b.get("members") or []]
    role = str(get(props, "role", ""))
    members = [get(props, "member")] if get(props, "member") else list(items(get(props, "members")))
    return [(role, str(m)) for m in members]
