"""Where in the stack file a resource's inputs come from: a policy violation's key and line.

A resource maps to the spec entry the program built it from (a TPU node pool to its slice by the
slice label, a ComputeClass to the first slice of its worker group, a network to its
``network.secondary`` entry, a RayJob to its job, the cluster to ``cluster``); a rule that needs only
the spec names the field it judges (``Rule.spec``: ``capacity`` under the slice, ``mtu`` under
``network``, or a whole key such as ``gcp:region``). The stack file's loader gives the key its line (or
the nearest enclosing key's, when the file leaves the field to its default).
"""

from __future__ import annotations

from collections.abc import Mapping

from stackspec import kube, names, source
from stackspec import spec as stack_spec
from stackspec.loader import key_path

from .rules.common import CLUSTER, COMPUTE_CLASS, NETWORK, NODE_POOL, RAY_CLUSTER, RAY_JOB, SUBNETWORK, Res, get

NS = stack_spec.PROJECT


def _index(items, name) -> int | None:
    return next((i for i, x in enumerate(items) if x == name), None)


def entry(res: Res | None, spec: stack_spec.StackSpec) -> str | None:
    """The spec entry (``slices[1]``, ``network.secondary[0]``, ``cluster``...) ``res`` was built from."""
    if res is None:
        return None
    t, props = res.type, res.props
    if spec.multi_region and t in (CLUSTER, NODE_POOL):
        return _region_entry(res, spec)
    if t == NODE_POOL:
        i = _index([s.name for s in spec.slices], get(props, f"nodeConfig.labels.{kube.SLICE_LABEL}"))
        return f"slices[{i}]" if i is not None else "cluster"  # the system pool comes from cluster.*
    if t == COMPUTE_CLASS:
        # A multi-region stack's ComputeClass is its region cluster's (its Kubernetes provider names the cluster).
        sites = ([(f"regions[{r}].", reg.slices) for r, reg in enumerate(spec.regions)
                  if res.provider in (None, names.k8s_provider(reg.cluster.name))]
                 if spec.multi_region else [("", spec.slices)])
        for prefix, slices in sites:
            groups = {names.compute_class(s.group): i for i, s in reversed(list(enumerate(slices)))}
            if (i := groups.get(get(props, "metadata.name"))) is not None:
                return f"{prefix}slices[{i}]"
        return "regions" if spec.multi_region else "slices"
    if t in (NETWORK, SUBNETWORK):
        key = "subnet" if t == SUBNETWORK else "network"
        nets = [getattr(n, key) or names.network_name(spec.cluster.name, k + 1) for k, n in enumerate(spec.networks)]
        i = _index(nets, get(props, "name"))
        return f"network.secondary[{i}]" if i is not None else "network"
    if t == CLUSTER:
        return "cluster"
    if t == RAY_JOB:
        i = _index([j.name for j in spec.jobs], get(props, "metadata.name"))
        return f"jobs[{i}]" if i is not None else "jobs"
    if t == RAY_CLUSTER or t.startswith("kubernetes:"):
        return "ray"
    if t.startswith(("gcp:storage/", "gcp:serviceaccount/")):
        return "storage"
    if t.startswith("gcp:artifactregistry/"):
        return "image"
    if t.startswith(("gcp:monitoring/", "gcp:logging/")):
        return "monitoring"
    return None


def _region_entry(res: Res, spec: stack_spec.StackSpec) -> str | None:
    """A multi-region stack's cluster or node pool: the manager, or ``regions[i].cluster``/``.slices[k]``."""
    cluster = get(res.props, "name" if res.type == CLUSTER else "cluster")
    if spec.manager is not None and cluster == spec.manager.name:
        return "manager"
    i = _index([r.cluster.name for r in spec.regions], cluster)
    if i is None:
        return "regions"
    if res.type == NODE_POOL:
        k = _index([s.name for s in spec.regions[i].slices], get(res.props, f"nodeConfig.labels.{kube.SLICE_LABEL}"))
        return f"regions[{i}].slices[{k}]" if k is not None else f"regions[{i}].cluster"
    return f"regions[{i}].cluster"


def spec_key(res: Res | None, spec: stack_spec.StackSpec, field: Mapping[str, str] | None = None) -> str | None:
    """The stack-file key a violation on ``res`` is about: ``tpu-multislice:slices[0].capacity``."""
    at = (field or {}).get(res.type if res else "", (field or {}).get("*"))
    if at and ":" in at:  # a whole key (gcp:region)
        return at
    where = entry(res, spec)
    if where is None:
        return None
    return f"{NS}:{where}" + (f".{at}" if at else "")


def line(key: str | None, document: source.StackDocument | None) -> int | None:
    return document.line(key_path(key)) if key and document is not None else None
