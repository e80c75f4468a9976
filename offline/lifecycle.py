"""Day 0 to day 2 of a stack, simulated offline with state carried between runs.

- **Day 0** (:func:`first_up`): from an empty project, the program's resources in the order the engine would
  create them (waves: a resource starts once everything it waits for exists), checked against the
  prerequisites the cloud has and the program cannot see (:data:`PREREQUISITES`, each with its cloud rule):
  nothing may rely on what is created later without an explicit dependency.
- **Day 1** (:func:`gke_changes` then :func:`plan`): what GKE and the Kubernetes API return and change on their
  own, each with its source (:data:`DAY1_SOURCES`): the blocks and values GKE fills in that the program leaves
  unset, the ``goog-gke-*`` resource labels it adds, auto-upgrades of the control plane and every pool, the labels
  it adds to flex-start pools, the autoscaler's node counts, the label the API server puts on every namespace and
  (given the CRDs) the defaults the API server writes into custom objects; the next run of the same spec must
  plan no change.
- **Day 2** (:func:`plan` with another spec): a spec change plans only what it must.

This is a simulation. The diff follows the provider's rules for what a run compares (:func:`diff`): a GCP field
the program sets is compared with the state; a field it leaves unset that the provider's schema marks
``Computed`` is not (the cloud owns it), at any depth; ``ignoreChanges`` paths are not; the provider's
``ForceNew`` attributes and the program's ``replaceOnChanges`` turn an update into a replacement
(:func:`forcing`). ``Computed`` and ``ForceNew`` are read from terraform-provider-google's schema at a pinned
commit (``offline/data/provider_schema.json``, written by ``offline/tools/gen_forcenew.py``; pulumi-gcp bridges that
provider). A Kubernetes object is applied server-side (the stack's provider sets ``enableServerSideApply``): the
program owns the fields it applies, and what the API server or a webhook adds beside them is not a difference.
No cloud is called: the states are the offline engine's renderings plus the simulated cloud-side changes,
written as JSON so a CLI run can carry them to the next.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline.engine import Rendering

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"

PROVIDER_SCHEMA = Path(__file__).resolve().parent / "data" / "provider_schema.json"


def _provider_schema() -> dict[str, Any]:
    data = json.loads(PROVIDER_SCHEMA.read_text())
    body = {"resources": data["resources"], "unresolved": data["unresolved"]}
    if hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest() != data["sha256"]:
        raise ValueError(f"{PROVIDER_SCHEMA} does not match its sha256: write it with offline/tools/gen_forcenew.py")
    return data


SCHEMA = _provider_schema()
# The provider version and commit the tables were read at (the CLI prints them).
SCHEMA_SOURCE = f"{SCHEMA['source']} @ {SCHEMA['commit'][:12]} (for pulumi-gcp {SCHEMA['pulumiGcp']})"
# Per type: the attributes the provider computes when the program leaves them unset (Optional+Computed, or
# Computed only): the cloud's value in state is never a diff.
COMPUTED: dict[str, frozenset[str]] = {t: frozenset(f["path"] for f in r["computed"])
                                       for t, r in SCHEMA["resources"].items()}
# Per type: (attribute, "value" | "count"): a change of which replaces the resource. "count": a list of blocks,
# replaced when blocks are added or removed (its fields by their own ForceNew).
FORCE_NEW: dict[str, tuple[tuple[str, str], ...]] = {t: tuple((f["path"], f["on"]) for f in r["forceNew"])
                                                     for t, r in SCHEMA["resources"].items()}
# A DiffSuppressFunc the day-1 changes meet: GKE's own ``goog-gke*`` labels on a pool's GCE resources are never a
# difference (terraform-provider-google google/services/container/node_config.go,
# containerNodePoolResourceLabelsDiffSuppress: "Suppress diffs for server-specified labels prefixed with goog-gke").
SUPPRESSED: dict[str, Callable[[str], bool]] = {
    NODE_POOL: lambda path: path.startswith("nodeConfig.resourceLabels.goog-gke"),
}


@dataclass(frozen=True)
class Prerequisite:
    """What the cloud needs to exist before a resource can be created, though no input refers to it."""

    rule: str  # the cloud rule (stackspec/rules/catalogue.py) or why
    applies: Callable[[dict[str, Any]], bool]  # to a state entry
    needs: Callable[[dict[str, Any], dict[str, Any]], bool]  # (the entry, one it waits for): that one is needed
    # Several needed (one per name ``each`` gives): every one must be waited for.
    each: Callable[[dict[str, Any]], set[str]] | None = None


def _is(type_: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    return lambda e, w: w["type"] == type_


def _type(type_: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == type_


def _service(name: str) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    return lambda e, w: w["type"] == "gcp:projects/service:Service" and w["inputs"].get("service") == name


def _kueue_controller(e: dict[str, Any], w: dict[str, Any]) -> bool:
    """Kueue's controller Deployment (its webhook server) on the same cluster's provider."""
    return w["type"] == "kubernetes:apps/v1:Deployment" and (w["inputs"].get("metadata") or {}).get(
        "name") == "kueue-controller-manager"


def _extra_nic_subnets(e: dict[str, Any]) -> set[str]:
    return {c.get("subnetwork") for c in (e["inputs"].get("networkConfig") or {}).get("additionalNodeNetworkConfigs")
            or ()}


PREREQUISITES: tuple[Prerequisite, ...] = (
    Prerequisite("iam-wi-pool-exists: a binding to <project>.svc.id.goog waits for a cluster",
                 lambda e: ("IAMMember" in e["type"] or "IAMPolicy" in e["type"]) and ".svc.id.goog" in str(
                     e["inputs"].get("member") or e["inputs"].get("policyData") or ""),
                 _is(CLUSTER)),
    Prerequisite("Kubernetes objects need the cluster's API server (through the stack's provider)",
                 lambda e: e["type"].startswith("kubernetes:") and e["custom"], _is(CLUSTER)),
    Prerequisite("Kueue's objects need its CRDs and webhook: Kueue's controller first",
                 lambda e: e["type"].startswith("kubernetes:kueue.x-k8s.io/"), _kueue_controller),
    Prerequisite("Kueue's webhook suspends a queued RayJob on creation: Kueue's controller first",
                 lambda e: e["type"] == "kubernetes:ray.io/v1:RayJob"
                 and "kueue.x-k8s.io/queue-name" in (e["inputs"].get("metadata", {}).get("labels") or {}),
                 _kueue_controller),
    Prerequisite("gke-multi-networking-for-extra-nics: a pool's extra NICs need the subnets they name",
                 lambda e: e["type"] == NODE_POOL and bool(_extra_nic_subnets(e)),
                 lambda e, w: w["type"] == "gcp:compute/subnetwork:Subnetwork"
                 and w["inputs"].get("name") in _extra_nic_subnets(e), each=_extra_nic_subnets),
    Prerequisite("a repository needs the Artifact Registry API (artifactregistry.googleapis.com)",
                 _type("gcp:artifactregistry/repository:Repository"), _service("artifactregistry.googleapis.com")),
    Prerequisite("alerts, dashboards and notification channels need the Monitoring API (monitoring.googleapis.com)",
                 lambda e: e["type"].startswith("gcp:monitoring/"), _service("monitoring.googleapis.com")),
    Prerequisite("log-based metrics need the Cloud Logging API (logging.googleapis.com)",
                 lambda e: e["type"].startswith("gcp:logging/"), _service("logging.googleapis.com")),
    Prerequisite("image streaming (gcfsConfig) needs the Container File System API (containerfilesystem.googleapis.com:"
                 " GKE's image streaming page, 'Enable the Container File System API')",
                 lambda e: e["type"] == NODE_POOL
                 and bool(((e["inputs"].get("nodeConfig") or {}).get("gcfsConfig") or {}).get("enabled")),
                 _service("containerfilesystem.googleapis.com")),
    Prerequisite("a Binary Authorization policy needs its API (binaryauthorization.googleapis.com)",
                 _type("gcp:binaryauthorization/policy:Policy"), _service("binaryauthorization.googleapis.com")),
    Prerequisite("a Pub/Sub topic needs its API (pubsub.googleapis.com)",
                 _type("gcp:pubsub/topic:Topic"), _service("pubsub.googleapis.com")),
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
                        "dependencies": deps, "ignoreChanges": list(r.ignore_changes), "protect": r.protect}
    return state


def save(state: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1, sort_keys=True))


def load(path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text())


# What GKE and the Kubernetes API return or change by themselves between two runs, each with its source.
DAY1_SOURCES = {
    "upgrade": "GKE release channels: the control plane and node pools are auto-upgraded within the channel "
               "(cloud.google.com/kubernetes-engine/docs/concepts/release-channels)",
    "pool-defaults": "GKE's NodeConfig defaults for fields left unset: imageType COS_CONTAINERD, a 100 GB pd-balanced "
                     "boot disk, metadata disable-legacy-endpoints=true (cloud.google.com/kubernetes-engine/docs/"
                     "reference/rest/v1/NodeConfig; terraform-provider-google marks each Optional+Computed)",
    "pool-settings": "GKE's NodePool defaults: surge upgrades maxSurge 1 / maxUnavailable 0, the pool's pod range and "
                     "private-nodes setting inherited from the cluster, its zones and instance groups "
                     "(cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools)",
    "goog-gke-labels": "GKE adds goog-gke-* labels to a pool's GCE resources (terraform-provider-google "
                       "node_config.go containerNodePoolResourceLabelsDiffSuppress: 'server-specified labels "
                       "prefixed with goog-gke')",
    "flex-label": "GKE labels flex-start nodes cloud.google.com/gke-flex-start=true "
                  "(cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training)",
    "autoscaler": "the cluster autoscaler sets a pool's node count between its bounds",
    "cluster-defaults": "GKE's Cluster defaults for what the program leaves unset: logging and monitoring "
                        "components, the label fingerprint, the service range (cloud.google.com/kubernetes-engine/"
                        "docs/reference/rest/v1/projects.locations.clusters)",
    "namespace-label": "the API server sets kubernetes.io/metadata.name on every namespace (kubernetes.io/docs/"
                       "reference/labels-annotations-taints/#kubernetes-io-metadata-name)",
    "api-defaults": "the API server writes a CRD's structural-schema defaults into each object "
                    "(kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#defaulting)",
}


def gke_changes(state: Mapping[str, dict[str, Any]], version: str = "1.35.3-gke.1100000",
                api_defaults: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> tuple[dict, list[str]]:
    """The state after GKE's and the Kubernetes API's own doing between two runs (:data:`DAY1_SOURCES`), and what
    it was. ``api_defaults``: a custom object as the API server stores it (its CRD's defaults applied)."""
    out, what = copy.deepcopy(dict(state)), []
    for e in out.values():
        o = e["outputs"]
        if e["type"] == CLUSTER:
            o["masterVersion"] = o["nodeVersion"] = version
            what.append(f"{e['name']}: control plane auto-upgraded to {version} [upgrade]")
            o.setdefault("loggingConfig", {"enableComponents": ["SYSTEM_COMPONENTS", "WORKLOADS"]})
            o.setdefault("monitoringConfig", {"enableComponents": ["SYSTEM_COMPONENTS"],
                                              "managedPrometheus": {"enabled": True}})
            o["labelFingerprint"] = "a9dc16a7"
            o.setdefault("servicesIpv4Cidr", "34.118.224.0/20")
            what.append(f"{e['name']}: GKE filled in its logging, monitoring and label defaults [cluster-defaults]")
        elif e["type"] == NODE_POOL:
            o["version"] = version
            what.append(f"{e['name']}: auto-upgraded to {version} [upgrade]")
            config = o.setdefault("nodeConfig", {})
            for key, value in (("imageType", "COS_CONTAINERD"), ("diskSizeGb", 100), ("diskType", "pd-balanced")):
                config.setdefault(key, value)
            # Set whether or not the program sets metadata (terraform-provider-google's docs for
            # node_config.metadata: the API sets disable-legacy-endpoints=true; set it too, or it plans to unset it).
            config["metadata"] = {"disable-legacy-endpoints": "true", **(config.get("metadata") or {})}
            config["effectiveTaints"] = list(config.get("taints") or [])
            model = "flex-start" if config.get("flexStart") else "spot" if config.get("spot") else "on-demand"
            config["resourceLabels"] = {**(config.get("resourceLabels") or {}),
                                        "goog-gke-node-pool-provisioning-model": model}
            what.append(f"{e['name']}: GKE filled in its node defaults [pool-defaults] and added "
                        f"goog-gke-node-pool-provisioning-model={model} [goog-gke-labels]")
            o.setdefault("upgradeSettings", {"maxSurge": 1, "maxUnavailable": 0, "strategy": "SURGE"})
            network = o.setdefault("networkConfig", {})
            network.setdefault("podRange", f"gke-{e['inputs'].get('cluster', 'cluster')}-pods")
            network.setdefault("enablePrivateNodes", True)
            o.setdefault("nodeLocations", [e["inputs"].get("location", "zone")])
            o["instanceGroupUrls"] = o["managedInstanceGroupUrls"] = [f"instanceGroupManagers/gke-{e['name']}-grp"]
            what.append(f"{e['name']}: GKE set its upgrade settings, pod range, zones and instance groups "
                        "[pool-settings]")
            if config.get("flexStart"):
                config["labels"] = {**(config.get("labels") or {}), "cloud.google.com/gke-flex-start": "true"}
                what.append(f"{e['name']}: GKE added label cloud.google.com/gke-flex-start=true [flex-label]")
            if o.get("autoscaling"):
                o["nodeCount"] = o["autoscaling"].get("maxNodeCount", 0)
                what.append(f"{e['name']}: the autoscaler grew it to {o['nodeCount']} node(s) [autoscaler]")
        elif e["type"] == "kubernetes:core/v1:Namespace":
            meta = o.setdefault("metadata", {})
            name = meta.get("name", e["name"])
            meta["labels"] = {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": name}
            what.append(f"{e['name']}: the API server labelled it kubernetes.io/metadata.name={name} "
                        "[namespace-label]")
        elif api_defaults is not None and e["type"].startswith("kubernetes:") and "apiVersion" in o:
            defaulted = api_defaults(o)
            if defaulted != o:
                e["outputs"] = defaulted
                what.append(f"{e['name']}: the API server wrote its CRD's defaults [api-defaults]")
    return out, what


# --------------------------------------------------------------------------- diff and plan


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return None
        obj = obj[part]
    return obj


def _project(obj: Any, path: str) -> Any:
    """The values at ``path``, through lists (each element's), as a comparable structure."""
    if not path:
        return obj
    head, _, rest = path.partition(".")
    if isinstance(obj, list):
        return [_project(v, path) for v in obj]
    if not isinstance(obj, Mapping):
        return None
    return _project(obj.get(head), rest)


def _count(obj: Any, path: str) -> int:
    value = _get(obj, path)
    return len(value) if isinstance(value, list) else (0 if value in (None, {}) else 1)


def _ignored(path: str, ignore: Iterable[str]) -> bool:
    return any(path == i or path.startswith(i + ".") or path.startswith(i + "[") for i in ignore)


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _compare(old: Any, new: Any, prefix: str, computed: frozenset[str], suppressed: Callable[[str], bool],
             ignore: list[str], changed: set[str]) -> None:
    for key in set(old) | set(new):
        path = f"{prefix}{key}"
        if _ignored(path, ignore) or suppressed(path):
            continue
        if key not in new:
            if path in computed or _empty(old[key]):
                continue
            if isinstance(old[key], Mapping):  # key by key: a DiffSuppressFunc may pass some
                _compare(old[key], {}, path + ".", computed, suppressed, ignore, changed)
            else:
                changed.add(path)  # the program dropped it, or the cloud set what the program leaves unset
        elif key not in old:
            if not _empty(new[key]):
                changed.add(path)
        elif isinstance(old[key], Mapping) and isinstance(new[key], Mapping):
            _compare(old[key], new[key], path + ".", computed, suppressed, ignore, changed)
        elif old[key] != new[key]:  # lists and values compared whole
            changed.add(path)


def diff(entry: Mapping[str, Any], new_inputs: Mapping[str, Any], ignore: Iterable[str] = ()) -> list[str]:
    """The input paths whose new value differs from the state's (see the module docstring).

    A GCP resource: against its state (what the cloud returned), an attribute the program leaves unset compared only
    where the provider's schema does not mark it ``Computed``. A Kubernetes object (applied server-side): against
    what the program applied, so what the API server or a webhook added is not a difference."""
    type_ = entry["type"]
    changed: set[str] = set()
    if type_.startswith("kubernetes:"):
        _compare(entry["inputs"], new_inputs, "", frozenset(), lambda _: False, list(ignore), changed)
    else:
        _compare(entry["outputs"], new_inputs, "", COMPUTED.get(type_, frozenset()),
                 SUPPRESSED.get(type_, lambda _: False), list(ignore), changed)
    return sorted(changed)


def forcing(type_: str, fields: Iterable[str], old: Mapping[str, Any], new: Mapping[str, Any],
            replace_on: Iterable[str] = ()) -> list[str]:
    """Which of the changed ``fields`` replace the resource: a ``ForceNew`` attribute (:data:`FORCE_NEW`) whose
    value changed, a list of blocks whose number changed, or a ``replaceOnChanges`` path."""
    out = []
    for f in fields:
        for p, on in FORCE_NEW.get(type_, ()):
            if on == "value" and (f == p or f.startswith(p + ".")):
                out.append(f)  # the attribute, or a key or element of it
            elif on == "value" and p.startswith(f + ".") and _project(old, p) != _project(new, p):
                out.append(f)  # a block or list holding it, and its value there changed
            elif on == "count" and (f == p or p.startswith(f + ".") or f.startswith(p + ".")) \
                    and _count(old, p) != _count(new, p):  # blocks added or removed, not a field of one changed
                out.append(f)
            else:
                continue
            break
        else:
            if any(f == p or f.startswith(p + ".") for p in replace_on):
                out.append(f)
    return out


@dataclass
class Step:
    op: str  # create | update | replace | delete | same
    urn: str
    type: str
    name: str
    fields: list[str] = field(default_factory=list)
    protected: bool = False  # replaced or deleted while protected: Pulumi refuses the update

    def line(self) -> str:
        sign = {"create": "+", "update": "~", "replace": "+-", "delete": "-", "same": " "}[self.op]
        refused = "  [protected: `pulumi up` refuses]" if self.protected else ""
        return f"  {sign} {self.type}  {self.name}" + (f"  ({', '.join(self.fields)})" if self.fields else "") \
            + refused


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
        old = e["inputs"] if r.type.startswith("kubernetes:") else e["outputs"]
        replacing = forcing(r.type, fields, old, r.inputs, replace_on.get(urn, ()))
        op = "replace" if replacing else ("update" if fields else "same")
        steps.append(Step(op, urn, r.type, r.name, fields, protected=op == "replace" and bool(e.get("protect"))))
    for urn, e in state.items():
        if urn not in new and e.get("custom", True):
            steps.append(Step("delete", urn, e["type"], e["name"], protected=bool(e.get("protect"))))
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
            if not p.applies(e):
                continue
            met = [state[w] for w in waits[urn] if p.needs(e, state[w])]
            missing = sorted(p.each(e) - {w["inputs"].get("name") for w in met}) if p.each else ([] if met else [""])
            if missing:
                what = f" ({', '.join(missing)})" if p.each else ""
                problems.append(f"{e['type']} {e['name']}: {p.rule}{what}")
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
    """The program's replaceOnChanges per URN, as its RegisterResource requests carry it (RayJobs are replaced on
    any change of spec or metadata, ResourceClaimTemplates on one of spec)."""
    return {r.urn: list(r.replace_on_changes) for r in rendering.resources if r.replace_on_changes}
