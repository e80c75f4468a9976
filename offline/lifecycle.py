"""Day 0 to day 2 of a stack, simulated offline with state carried between runs.

- **Day 0** (:func:`first_up`): from an empty project, the program's resources in the order the engine would
  create them (waves: a resource starts once everything it waits for exists), checked against the
  prerequisites the cloud has and the program cannot see (:data:`PREREQUISITES`, each with its cloud rule):
  nothing may rely on what is created later without an explicit dependency.
- **Day 1** (:func:`gke_changes` then :func:`plan`): GKE changes the cluster on its own (an auto-upgrade of the
  control plane and every pool, the labels it adds to flex-start pools, the autoscaler's node counts); the
  next run of the same spec must plan no change.
- **Day 2** (:func:`plan` with another spec): a spec change plans only what it must.

The diff follows the provider's rules for what a run compares (:func:`diff`): a field the program sets is
compared with the state; a field it leaves unset that the provider marks computed is not (the cloud owns it);
``ignoreChanges`` paths are not; ``replaceOnChanges`` and the fields the provider replaces on turn an update
into a replacement. No cloud is called: the states are the offline engine's renderings plus the simulated
cloud-side changes, written as JSON so a CLI run can carry them to the next.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline.engine import Rendering

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"

# Fields the providers compute when the program leaves them unset (Optional+Computed in the provider schema):
# the cloud's value in state is never a diff. terraform-provider-google: resource_container_node_pool.go
# (version, node_count, instance_group_urls), resource_container_cluster.go (master_version, node_version).
COMPUTED: dict[str, tuple[str, ...]] = {
    NODE_POOL: ("version", "nodeCount", "instanceGroupUrls", "managedInstanceGroupUrls", "nodeLocations"),
    CLUSTER: ("masterVersion", "nodeVersion", "endpoint", "labelFingerprint"),
}
# Inputs a change of which replaces the resource, beyond replaceOnChanges: ForceNew in terraform-provider-google
# (resource_container_node_pool.go, node_config.go: spot, flex_start, reservation_affinity;
# resource_container_cluster.go; resource_compute_network.go; resource_compute_subnetwork.go;
# resource_storage_bucket.go). A machine type, an MTU or multi-networking change updates in place there.
FORCE_NEW: dict[str, tuple[str, ...]] = {
    NODE_POOL: ("name", "cluster", "location", "placementPolicy", "networkConfig.additionalNodeNetworkConfigs",
                "nodeConfig.spot", "nodeConfig.flexStart", "nodeConfig.reservationAffinity", "queuedProvisioning",
                "initialNodeCount"),
    CLUSTER: ("name", "location", "networkingMode", "datapathProvider"),
    "gcp:compute/network:Network": ("name", "autoCreateSubnetworks"),
    "gcp:compute/subnetwork:Subnetwork": ("name", "network", "region"),
    "gcp:storage/bucket:Bucket": ("name", "location"),
}


@dataclass(frozen=True)
class Prerequisite:
    """What the cloud needs to exist before a resource can be created, though no input refers to it."""

    rule: str  # the cloud rule (stackspec/cloud_rules.py) or why
    applies: Callable[[dict[str, Any]], bool]  # to a state entry
    needs: Callable[[dict[str, Any]], bool]  # what it must (transitively) wait for


def _is(type_: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == type_


def _starts(prefix: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"].startswith(prefix)


PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite("iam-wi-pool-exists: a binding to <project>.svc.id.goog waits for a cluster",
                 lambda e: "IAMMember" in e["type"] and ".svc.id.goog" in str(e["inputs"].get("member", "")),
                 _is(CLUSTER)),
    Prerequisite("Kubernetes objects need the cluster's API server (through the stack's provider)",
                 lambda e: e["type"].startswith("kubernetes:") and e["custom"], _is(CLUSTER)),
    Prerequisite("Kueue's objects need its CRDs and webhook: the chart first",
                 lambda e: e["type"].startswith("kubernetes:kueue.x-k8s.io/"), _is("kubernetes:helm.sh/v4:Chart")),
    Prerequisite("Kueue's webhook suspends a queued RayJob on creation: the chart first",
                 lambda e: e["type"] == "kubernetes:ray.io/v1:RayJob"
                 and "kueue.x-k8s.io/queue-name" in (e["inputs"].get("metadata", {}).get("labels") or {}),
                 _is("kubernetes:helm.sh/v4:Chart")),
    Prerequisite("gke-multi-networking-for-extra-nics: a pool's extra NICs need their subnets",
                 lambda e: e["type"] == NODE_POOL and bool((e["inputs"].get("networkConfig") or {})
                                                           .get("additionalNodeNetworkConfigs")),
                 _is("gcp:compute/subnetwork:Subnetwork")),
    Prerequisite("a repository needs the Artifact Registry API",
                 _is("gcp:artifactregistry/repository:Repository"),
                 lambda e: e["type"] == "gcp:projects/service:Service"
                 and e["inputs"].get("service") == "artifactregistry.googleapis.com"),
    Prerequisite("alerts, metrics and dashboards need the Monitoring/Logging APIs",
                 lambda e: e["type"].startswith(("gcp:monitoring/", "gcp:logging/")),
                 _is("gcp:projects/service:Service")),
)


# --------------------------------------------------------------------------- state


def state_of(rendering: Rendering) -> dict[str, dict[str, Any]]:
    """What the engine keeps after an `up` of ``rendering``: per URN, its type, inputs, outputs and options.
    Outputs start as the inputs (what the cloud echoes back); :func:`gke_changes` moves them on."""
    state = {}
    for r in rendering.resources:
        # A resource waits for its provider, which waits for what the provider's kubeconfig came from.
        deps = [*r.dependencies, *([r.provider_urn] if r.provider_urn else [])]
        state[r.urn] = {"type": r.type, "name": r.name, "parent": r.parent, "custom": r.custom,
                        "inputs": copy.deepcopy(r.inputs), "outputs": copy.deepcopy(r.inputs),
                        "dependencies": deps, "ignoreChanges": list(r.ignore_changes)}
    return state


def save(state: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1, sort_keys=True))


def load(path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text())


def gke_changes(state: Mapping[str, dict[str, Any]], version: str = "1.35.3-gke.1100000") -> tuple[dict, list[str]]:
    """The state after GKE's own changes between two runs, and what they were: every pool and the control
    plane auto-upgraded to ``version``, GKE's label on each flex-start pool, the autoscaler's node counts."""
    out, what = copy.deepcopy(dict(state)), []
    for e in out.values():
        o = e["outputs"]
        if e["type"] == CLUSTER:
            o["masterVersion"] = o["nodeVersion"] = version
            what.append(f"{e['name']}: control plane auto-upgraded to {version}")
        elif e["type"] == NODE_POOL:
            o["version"] = version
            what.append(f"{e['name']}: auto-upgraded to {version}")
            config = o.setdefault("nodeConfig", {})
            if config.get("flexStart"):
                # Simulated: GKE labels flex-start nodes itself; the provider suppresses only GKE Sandbox's labels.
                config["labels"] = {**(config.get("labels") or {}), "cloud.google.com/gke-flex-start": "true"}
                what.append(f"{e['name']}: GKE added label cloud.google.com/gke-flex-start=true")
            if o.get("autoscaling"):
                o["nodeCount"] = o["autoscaling"].get("maxNodeCount", 0)
                what.append(f"{e['name']}: the autoscaler grew it to {o['nodeCount']} node(s)")
    return out, what


# --------------------------------------------------------------------------- diff and plan


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _paths(obj: Any, prefix: str = "") -> Iterable[str]:
    if isinstance(obj, Mapping) and obj:
        for k, v in obj.items():
            yield from _paths(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix


def _ignored(path: str, ignore: Iterable[str]) -> bool:
    return any(path == i or path.startswith(i + ".") or path.startswith(i + "[") for i in ignore)


def diff(entry: Mapping[str, Any], new_inputs: Mapping[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """The input paths whose new value differs from the state's (see the module docstring)."""
    ignore = list(ignore)
    old = entry["outputs"]
    computed = COMPUTED.get(entry["type"], ())
    changed = set()
    for path in set(_paths(new_inputs)) | set(_paths(entry["inputs"])):
        if not path or _ignored(path, ignore):
            continue
        top = path.split(".")[0]
        if top not in new_inputs:
            if top in computed or path in computed:
                continue  # the program leaves it to the cloud
            if _get(old, path) is not None:
                changed.add(top)
            continue
        # Maps and lists the program sets are compared whole (a key the cloud added is a difference).
        value = new_inputs[top]
        if isinstance(value, Mapping):
            sub = path.split(".")
            for depth in range(2, len(sub) + 1):
                p = ".".join(sub[:depth])
                if _ignored(p, ignore):
                    break
                nv, ov = _get(new_inputs, p), _get(old, p)
                if not isinstance(nv, Mapping) or not isinstance(ov, Mapping):
                    if nv != ov:
                        changed.add(p)
                    break
                if set(nv) != set(ov) and not any(_ignored(f"{p}.{k}", ignore) for k in set(nv) ^ set(ov)):
                    changed.add(p)
                    break
        elif value != old.get(top):
            changed.add(top)
    return sorted(changed)


@dataclass
class Step:
    op: str  # create | update | replace | delete | same
    urn: str
    type: str
    name: str
    fields: list[str] = field(default_factory=list)

    def line(self) -> str:
        sign = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " "}[self.op]
        return f"  {sign} {self.type}  {self.name}" + (f"  ({', '.join(self.fields)})" if self.fields else "")


@dataclass
class Plan:
    steps: list[Step]

    @property
    def changes(self) -> list[Step]:
        return [s for s in self.steps if s.op != "same"]

    def by_op(self, op: str) -> list[Step]:
        return [s for s in self.steps if s.op == op]

    def summary(self) -> str:
        counts = {op: len(self.by_op(op)) for op in ("create", "update", "replace", "delete")}
        if not any(counts.values()):
            return "no changes"
        return ", ".join(f"{n} to {op}" for op, n in counts.items() if n)


def plan(state: Mapping[str, dict[str, Any]], rendering: Rendering,
         replace_on: Mapping[str, Iterable[str]] | None = None) -> Plan:
    """What a run of ``rendering`` would do to ``state`` (custom resources only: components hold no state)."""
    steps: list[Step] = []
    replace_on = replace_on or {}
    new = {r.urn: r for r in rendering.resources if r.custom}
    for urn, r in new.items():
        e = state.get(urn)
        if e is None:
            steps.append(Step("create", urn, r.type, r.name))
            continue
        fields = diff(e, r.inputs, r.ignore_changes)
        forcing = [f for f in fields if any(f == p or f.startswith(p + ".")
                                            for p in (*FORCE_NEW.get(r.type, ()), *replace_on.get(urn, ())))]
        op = "replace" if forcing else ("update" if fields else "same")
        steps.append(Step(op, urn, r.type, r.name, fields))
    for urn, e in state.items():
        if urn not in new and e.get("custom", True):
            steps.append(Step("delete", urn, e["type"], e["name"]))
    return Plan(sorted(steps, key=lambda s: (s.op, s.urn)))


# --------------------------------------------------------------------------- day 0: order and prerequisites


def _closure(state: Mapping[str, dict[str, Any]]) -> dict[str, set[str]]:
    """Each URN's transitive waits: its dependencies, a component's children, a provider's own waits."""
    children: dict[str, list[str]] = {}
    for urn, e in state.items():
        if e.get("parent"):
            children.setdefault(e["parent"], []).append(urn)

    def direct(urn: str) -> list[str]:
        out = []
        for d in state.get(urn, {}).get("dependencies", []):
            if d in state:
                out.append(d)
                out += _descendants(d, children)
        return out

    memo: dict[str, set[str]] = {}

    def walk(urn: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if urn in memo:
            return memo[urn]
        out: set[str] = set()
        for d in direct(urn):
            if d not in seen:
                out |= {d} | walk(d, seen | {urn})
        memo[urn] = out
        return out

    return {urn: walk(urn) for urn in state}


def _descendants(urn: str, children: Mapping[str, list[str]]) -> list[str]:
    out = []
    for c in children.get(urn, []):
        out += [c, *_descendants(c, children)]
    return out


def waves(state: Mapping[str, dict[str, Any]]) -> list[list[str]]:
    """Custom resources grouped in creation order: each wave waits only for earlier ones."""
    waits = _closure(state)
    todo = {u for u, e in state.items() if e.get("custom", True)}
    done: set[str] = set()
    out = []
    while todo:
        ready = sorted(u for u in todo if not ({w for w in waits[u] if state[w].get("custom", True)} - done))
        if not ready:  # a cycle: cannot happen with the engine's own dependencies
            raise ValueError(f"dependency cycle among {sorted(todo)}")
        out.append(ready)
        done |= set(ready)
        todo -= set(ready)
    return out


def prerequisite_problems(state: Mapping[str, dict[str, Any]]) -> list[str]:
    """Each resource that does not wait for what the cloud needs before it (see :data:`PREREQUISITES`)."""
    waits = _closure(state)
    problems = []
    for urn, e in sorted(state.items()):
        for p in PREREQUISITES:
            if p.applies(e) and not any(p.needs(state[w]) for w in waits[urn]):
                problems.append(f"{e['type']} {e['name']}: {p.rule}")
    return problems


@dataclass
class FirstUp:
    state: dict[str, dict[str, Any]]
    waves: list[list[str]]
    problems: list[str]


def first_up(rendering: Rendering) -> FirstUp:
    state = state_of(rendering)
    return FirstUp(state, waves(state), prerequisite_problems(state))


def replace_on_changes(rendering: Rendering) -> dict[str, list[str]]:
    """The program's replaceOnChanges per URN (the engine sees it; RayJobs are replaced on any change)."""
    return {r.urn: ["spec", "metadata"] for r in rendering.resources if r.type == "kubernetes:ray.io/v1:RayJob"}
