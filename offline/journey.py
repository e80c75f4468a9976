"""The deploy journey, simulated: ``pulumi preview --save-plan`` on a state, then ``pulumi up --plan`` of that plan.

The real program runs under mocks (:func:`render`) whose answers tag every value the cloud or a provider hands back
(:class:`TaggingMocks`): an echoed input ``<v>⟦out:TYPE::NAME⟧``, a computed attribute or id ``<v>⟦cmp:TYPE::NAME⟧``.
A tag travels with the value into whatever the program builds from it (a provider's kubeconfig, a Role's
subject), so :func:`preview` can tell which inputs Pulumi would not know on a given state, by the engine's own
rules (:data:`RULES`, each quoting Pulumi's source at a pinned commit), and :func:`up` can replay the update
against the saved plan and name, per resource, the rule by which Pulumi refuses it (:class:`Violation`).

What is modelled, in the order the engine meets it:

- a create or replace at preview leaves the resource's computed outputs unknown; a create or update through a
  provider whose configuration is unknown leaves every output unknown (``create-preview-empty``);
- a provider with an unknown configuration value is not configured (``configure-unknown``): its resources skip
  ``Check`` (``check-skipped``), their diff is unavailable and planned as an update (``diff-unavailable``), and a
  component the provider constructs (``remote-components``) registers no child (``construct-skipped``);
- a Kubernetes provider whose kubeconfig is unknown is replaced (``diffconfig-computed``), and so is every
  resource it manages (``provider-replaced``);
- at ``up`` every provider is configured: a component's children are registered, ``Check`` runs (an object
  without a name is named, a client-side-applied one labelled: ``check-autoname``, ``check-managed-by``);
- each step is held to its resource plan: absent (``plan-absent``), another operation
  (``plan-constrained``), a planned delete re-registered (``plan-not-deleted``), an input the plan's goal
  does not hold (``plan-goal``), a planned operation never attempted (``plan-ops-not-seen``);
- at ``up``, an object a ``failurePolicy: Fail`` admission webhook intercepts (Kueue's: Pods, Jobs, Deployments,
  RayJobs, ClusterQueues, ...) is refused until the Deployment serving that webhook is available: when that
  Deployment is created or replaced in the same update, the object must wait for it (``webhook-not-serving``);
- :func:`saved_plan` writes the plan as ``apitype.DeploymentPlanV1``: an unknown as the computed placeholder,
  a secret as its signature with ciphertext (``computed-serialised``, ``secret-serialised``).

Operations are the logical ones (create, update, replace, delete, same); a diff of known values follows
``offline/lifecycle.py`` (the provider's ForceNew and Computed tables). Not modelled: aliases, imports,
targets, ``--refresh``, and the bridge's planned values of computed attributes on an in-place update (kept known).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline import engine
from offline import lifecycle as lc

PULUMI = "pulumi/pulumi@1b5949891b3cefcb9974752b24a5ecef0acc86c8"
PULUMI_K8S = "pulumi/pulumi-kubernetes@94977969d64112b04e19945818a7d5d5f38f631d"
KUEUE = "kubernetes-sigs/kueue@8eab68778fc1b52affe165fdf5af29d1e9b4f3cb"  # v0.19.2, the vendored release

# Each rule: where the engine (or the Kubernetes provider) says it, and what it does.
RULES: dict[str, tuple[str, str]] = {
    "configure-unknown": (f"{PULUMI}:sdk/go/common/resource/plugin/provider_plugin.go:1059-1075",
                          "a provider input that contains an unknown leaves the provider unconfigured"),
    "check-skipped": (f"{PULUMI}:sdk/go/common/resource/plugin/provider_plugin.go:1181-1185",
                      "Check under an unconfigured provider returns the inputs as written"),
    "diff-unavailable": (f"{PULUMI}:sdk/go/common/resource/plugin/provider_plugin.go:1303-1310 and "
                         "pkg/resource/deploy/step_generator.go:1927-1931",
                         "Diff under an unconfigured provider is unavailable: the step generator plans an update"),
    "create-preview-empty": (f"{PULUMI}:sdk/go/common/resource/plugin/provider_plugin.go:1420-1437",
                             "a preview Create under an unconfigured provider returns an empty state: every output "
                             "is unknown"),
    "construct-skipped": (f"{PULUMI}:sdk/go/common/resource/plugin/provider_plugin.go:2006-2030",
                          "Construct under an unconfigured provider registers the component's URN only: no child "
                          "is in the preview or its plan"),
    "remote-components": (f"{PULUMI_K8S}:provider/pkg/provider/provider_construct.go:31-37",
                          "the components the Kubernetes provider constructs"),
    "diffconfig-computed": (f"{PULUMI_K8S}:provider/pkg/provider/provider.go:503-516",
                            "a computed kubeconfig, context or cluster replaces the Kubernetes provider"),
    "provider-replaced": (f"{PULUMI}:pkg/resource/deploy/step_generator.go:2919-2925",
                          "a resource whose provider reference changed is replaced"),
    "check-autoname": (f"{PULUMI_K8S}:provider/pkg/provider/provider.go:1270-1274",
                       "Check names an object that has no metadata.name"),
    "check-managed-by": (f"{PULUMI_K8S}:provider/pkg/provider/provider.go:1276-1284",
                         "Check labels a client-side-applied object app.kubernetes.io/managed-by=pulumi"),
    "plan-absent": (f"{PULUMI}:pkg/resource/deploy/step_generator.go:449-455 (and 1387-1391)",
                    "is not allowed by the plan: no steps were expected for this resource"),
    "plan-constrained": (f"{PULUMI}:pkg/resource/deploy/step_generator.go:439-450, pkg/resource/deploy/"
                         "step.go:2404-2418", "is not allowed by the plan: this resource is constrained to"),
    "plan-not-deleted": (f"{PULUMI}:pkg/resource/deploy/plan.go:553-556", "resource unexpectedly not deleted"),
    "plan-goal": (f"{PULUMI}:pkg/resource/deploy/plan.go:373-420 (unknowns accept any value: plan.go:38-43)",
                  "violates plan: an input the plan's goal does not hold"),
    "plan-ops-not-seen": (f"{PULUMI}:pkg/resource/deploy/deployment_executor.go:366-392",
                          "expected resource operations but none were seen"),
    "computed-serialised": (f"{PULUMI}:pkg/resource/stack/deployment.go:66,785-789",
                            "an unknown is saved as the computed placeholder"),
    "secret-serialised": (f"{PULUMI}:pkg/resource/stack/deployment.go:844-880",
                          "a secret is saved as its signature and the ciphertext of its serialised element"),
    "webhook-not-serving": (f"{PULUMI_K8S}:provider/pkg/await/awaiters.go:140-146,188 (a Deployment's create "
                            f"returns once it is Available); {KUEUE}:cmd/kueue/main.go:636-641 and "
                            "test/util/e2e.go:322-340",
                            "an object a failurePolicy=Fail webhook intercepts is refused by the API server until the "
                            "webhook's Deployment is available: created in the same update, it must wait for it"),
}

# provider_construct.go:31-37: the types whose children the provider's Construct registers.
REMOTE_COMPONENTS = frozenset({"kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup",
                               "kubernetes:helm.sh/v4:Chart", "kubernetes:kustomize/v2:Directory"})
CHILDREN = "pulumi:journey:ConstructedChildren"  # what stands for a remote component's children
COMPUTED = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # deployment.go:66 computedValuePlaceholder
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # resource.SecretSig (sdk/go/common/resource/properties.go)
TAG = re.compile(r"⟦(out|cmp):([^⟧]+)⟧")
ALLOWED = {"create": {"same", "create"}, "update": {"same", "update"}, "replace": {"same", "update", "replace"},
           "delete": {"delete"}, "same": {"same"}}  # step.go:2404-2418 ConstrainedTo


def _tag(value: Any, kind: str, key: str) -> Any:
    if isinstance(value, str):
        return f"{value}⟦{kind}:{key}⟧"
    if isinstance(value, dict):
        return {k: _tag(v, kind, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_tag(v, kind, key) for v in value]
    return value


def _tag_state(value: Any, given: Any, key: str) -> Any:
    if value == given:
        return _tag(value, "out", key)
    if isinstance(value, dict) and isinstance(given, dict):
        return {k: _tag_state(v, given.get(k), key) for k, v in value.items()}
    return _tag(value, "cmp", key)


class TaggingMocks(engine._Mocks):
    """The offline engine's answers, each value tagged with the resource that hands it back."""

    def new_resource(self, args):
        id_, state = super().new_resource(args)
        key = f"{args.typ}::{args.name}"
        inputs = dict(args.inputs)
        return _tag(id_, "cmp", key), {k: _tag_state(v, inputs.get(k), key) for k, v in state.items()}


def render(stack: str, config: dict | None = None, stacks_dir: Path | None = None) -> engine.Rendering:
    """The real program under :class:`TaggingMocks`, secrets kept marked."""
    return engine.render(stack, config, stacks_dir=stacks_dir, mocks=TaggingMocks(), keep_secrets=True)


@dataclass(frozen=True)
class Node:
    urn: str
    type: str
    custom: bool
    inputs: Any
    provider: str | None
    parent: str | None
    waits: tuple[str, ...]
    replace_on: tuple[str, ...] = ()  # the program's replaceOnChanges


def nodes(rendering: engine.Rendering) -> dict[str, Node]:
    """Everything the program registers at ``up``, a remote component's children standing as one node."""
    out = {}
    for r in rendering.resources:
        # The provider reference is "URN::ID", its ID tagged here (an ID has "::" in its tag): the URN before it.
        provider = r.provider_urn.split("⟦")[0].rsplit("::", 1)[0] if r.provider_urn and "⟦" in r.provider_urn \
            else r.provider_urn
        out[r.urn] = Node(r.urn, r.type, r.custom, r.inputs, provider, r.parent,
                          tuple(sorted({*r.dependencies, *([provider] if provider else [])})), r.replace_on_changes)
        if r.type in REMOTE_COMPONENTS:
            urn = f"{r.urn}${CHILDREN}"
            out[urn] = Node(urn, CHILDREN, True, r.inputs, provider, r.urn, out[r.urn].waits)
    return out


def _order(ns: Mapping[str, Node]) -> list[str]:
    done: dict[str, None] = {}

    def visit(urn: str, path: frozenset[str] = frozenset()) -> None:
        if urn in done or urn not in ns or urn in path:
            return
        for w in ns[urn].waits:
            visit(w, path | {urn})
        if ns[urn].parent:
            visit(ns[urn].parent, path | {urn})
        done[urn] = None

    for u in sorted(ns):
        visit(u)
    return list(done)


def _by_key(ns: Mapping[str, Node]) -> dict[str, str]:
    return {f"{n.type}::{n.urn.rsplit('::', 1)[-1]}": u for u, n in ns.items()}


def _unknowns(value: Any, unknown: set[str], keys: Mapping[str, str]) -> Any:
    """``value`` with each tagged value of a resource in ``unknown`` (``out:`` or ``cmp:`` tags) made unknown."""
    if isinstance(value, str):
        for kind, key in TAG.findall(value):
            if f"{kind}:{keys.get(key, '')}" in unknown:
                return COMPUTED
        return value
    if isinstance(value, dict):
        return {k: _unknowns(v, unknown, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknowns(v, unknown, keys) for v in value]
    return value


def _has_unknown(value: Any) -> bool:
    return COMPUTED in json.dumps(value)


def _diff_op(entry: Mapping[str, Any], node: Node, inputs: Any) -> tuple[str, list[str]]:
    """A diff of the state against ``inputs`` by the provider's rules (offline/lifecycle.py); unknowns differ."""
    old = {"type": node.type, "inputs": entry["inputs"], "outputs": entry["inputs"]}
    fields = lc.diff(old, inputs)
    if not fields:
        return "same", []
    replacing = lc.forcing(node.type, fields, entry["inputs"], inputs, node.replace_on)
    return ("replace" if replacing else "update"), fields


@dataclass
class ResourcePlan:
    goal: dict[str, Any] | None  # None: a planned delete
    ops: list[str]
    why: list[str] = field(default_factory=list)  # the rules that shaped it


@dataclass
class Preview:
    plans: dict[str, ResourcePlan]
    unconfigured: list[str]  # providers whose configuration was unknown
    skipped: list[str]  # remote components whose Construct did not run


def preview(state: Mapping[str, dict[str, Any]], rendering: engine.Rendering) -> Preview:
    """``pulumi preview --save-plan`` of ``rendering`` against ``state`` (URN -> type, inputs, provider)."""
    ns, plans = nodes(rendering), {}
    keys = _by_key(ns)
    unknown: set[str] = set()  # "out:<urn>" (every output unknown), "cmp:<urn>" (computed outputs unknown)
    known_provider: dict[str, bool] = {}
    replaced_provider: set[str] = set()
    unconfigured, skipped = [], []
    for urn in _order(ns):
        n = ns[urn]
        entry = state.get(urn)
        inputs = _unknowns(n.inputs, unknown, keys)
        why: list[str] = []
        if n.type == CHILDREN and not known_provider.get(n.provider or "", True):
            skipped.append(n.parent)
            continue  # construct-skipped: nothing registered, nothing planned
        if n.type.startswith("pulumi:providers:"):
            known_provider[urn] = not _has_unknown(inputs)
            if not known_provider[urn]:
                unconfigured.append(urn)
                why.append("configure-unknown")
            if entry is None:
                op = "create"
            elif not known_provider[urn] and n.type == "pulumi:providers:kubernetes":
                op, why = "replace", [*why, "diffconfig-computed"]
            else:
                op = "same" if entry["inputs"] == inputs else "replace"
            if op == "replace":
                replaced_provider.add(urn)
        elif entry is None:
            op = "create"
        elif not n.custom and n.type != CHILDREN:
            op = "same"
        elif n.provider in replaced_provider:
            op, why = "replace", ["provider-replaced"]
        elif not known_provider.get(n.provider or "", True):
            op, why = "update", ["check-skipped", "diff-unavailable"]
        else:
            op, _ = _diff_op(entry, n, inputs)
        if op in ("create", "replace"):
            unknown.add(f"cmp:{urn}")
        if op != "same" and not known_provider.get(n.provider or "", True):
            unknown.add(f"out:{urn}")
            why.append("create-preview-empty")
        plans[urn] = ResourcePlan(_goal(n, entry, inputs), [op], why)
    for urn in state:
        if urn not in plans:  # not registered (a skipped component's children among them): deleted
            why = ["construct-skipped"] if urn.endswith(f"${CHILDREN}") and urn.split("$" + CHILDREN)[0] in skipped \
                else []
            plans[urn] = ResourcePlan(None, ["delete"], why)
    return Preview(plans, unconfigured, sorted(set(skipped)))


def _goal(n: Node, entry: Mapping[str, Any] | None, inputs: Any) -> dict[str, Any]:
    olds = (entry or {}).get("inputs") or {}
    adds = {k: v for k, v in inputs.items() if k not in olds} if isinstance(inputs, dict) else {}
    updates = {k: v for k, v in inputs.items() if k in olds and olds[k] != v} if isinstance(inputs, dict) else {}
    deletes = sorted(k for k in olds if k not in inputs)
    return {"type": n.type, "name": n.urn.rsplit("::", 1)[-1], "custom": n.custom, "parent": n.parent or "",
            "provider": n.provider or "", "inputs": inputs,
            "inputDiff": {"adds": adds, "updates": updates, "deletes": deletes}}


@dataclass(frozen=True)
class Violation:
    urn: str
    rule: str
    message: str

    def __str__(self) -> str:
        source, _ = RULES[self.rule]
        return f"{self.urn}: {self.message} [{self.rule}: {source}]"


def _holds(planned: Any, actual: Any) -> bool:
    """plan.go:38-43: an unknown in the plan accepts any value; everything known must be equal."""
    if planned == COMPUTED:
        return True
    if isinstance(planned, dict) and isinstance(actual, dict):
        return planned.keys() == actual.keys() and all(_holds(planned[k], actual[k]) for k in planned)
    if isinstance(planned, list) and isinstance(actual, list):
        return len(planned) == len(actual) and all(_holds(p, a) for p, a in zip(planned, actual, strict=True))
    return planned == actual


def _checked(n: Node, inputs: Any, providers: Mapping[str, Node]) -> Any:
    """What the Kubernetes provider's Check makes of an object's inputs at ``up`` (configured)."""
    if not (n.custom and n.type.startswith("kubernetes:") and isinstance(inputs, dict)):
        return inputs
    out = copy.deepcopy(inputs)
    meta = out.setdefault("metadata", {})
    if not meta.get("name"):  # check-autoname
        meta["name"] = f"{n.urn.rsplit('::', 1)[-1]}-{hashlib.sha256(n.urn.encode()).hexdigest()[:8]}"
    provider = providers.get(n.provider or "")
    if provider is not None and str(provider.inputs.get("enableServerSideApply", "")).lower() != "true":
        meta.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "pulumi"  # check-managed-by
    return out


def up(state: Mapping[str, dict[str, Any]], plan: Preview, rendering: engine.Rendering
       ) -> tuple[dict[str, dict[str, Any]], list[Violation]]:
    """``pulumi up --plan`` of ``plan``: the program registers everything (each provider is configured by the time
    its resources are created); each step is held to the plan. Returns the state after it and what Pulumi
    refuses (the first refusal stops a real update; all are listed here)."""
    ns = nodes(rendering)
    out: list[Violation] = []
    providers = {u: n for u, n in ns.items() if n.type.startswith("pulumi:providers:")}
    replaced: set[str] = set()
    seen: set[str] = set()
    ops: dict[str, str] = {}
    for urn in _order(ns):
        n = ns[urn]
        entry = state.get(urn)
        rp = plan.plans.get(urn)
        unchecked = rp is not None and "check-skipped" in rp.why or (
            rp is not None and rp.goal is not None and "create-preview-empty" in rp.why)
        inputs = _checked(n, n.inputs, providers) if unchecked or rp is None else n.inputs
        if entry is None:
            op = "create"
        elif not n.custom and n.type != CHILDREN:
            op = "same"
        elif n.type.startswith("pulumi:providers:"):
            op = "same" if entry["inputs"] == inputs else "replace"
        elif n.provider in replaced:
            op = "replace"
        else:
            op, _ = _diff_op(entry, n, inputs)
        if op == "replace" and n.type.startswith("pulumi:providers:"):
            replaced.add(urn)
        seen.add(urn)
        ops[urn] = op
        what = f"{n.type} {urn.rsplit('::', 1)[-1]}"
        if rp is None:
            if op != "same":
                why = " (its component's Construct was skipped at preview)" if n.type == CHILDREN else ""
                out.append(Violation(urn, "plan-absent", f"{what}: {op} is not allowed by the plan: no steps were "
                                     f"expected for this resource{why}"))
            continue
        if rp.goal is None:
            out.append(Violation(urn, "plan-not-deleted", f"{what}: resource unexpectedly not deleted"))
            continue
        if op not in ALLOWED[rp.ops[0]]:
            out.append(Violation(urn, "plan-constrained", f"{what}: {op} is not allowed by the plan: this resource "
                                 f"is constrained to {rp.ops[0]}"))
        elif not _holds(rp.goal["inputs"], inputs):
            out.append(Violation(urn, "plan-goal", f"{what}: violates plan: its inputs at up differ from the "
                                 "plan's goal" + (" (Check ran at up, not at preview)" if unchecked else "")))
    for urn, entry in state.items():
        if urn in seen:
            continue
        rp = plan.plans.get(urn)
        seen.add(urn)
        if rp is None or "delete" not in rp.ops:
            out.append(Violation(urn, "plan-absent", f"{entry['type']}: delete is not allowed by the plan: no "
                                 "steps were expected for this resource"))
    for urn, rp in plan.plans.items():
        if urn not in seen and rp.ops != ["same"]:
            out.append(Violation(urn, "plan-ops-not-seen", "expected resource operations but none were seen"))
    return state_of(rendering), out + webhook_races(ns, ops)


# --------------------------------------------------------------------------- admission webhooks at up

WEBHOOK_CONFIGS = ("kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration",
                   "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration")
NAME_LABEL = "kubernetes.io/metadata.name"  # the label every namespace carries (its name)


def _plain(value: Any) -> Any:
    """A value without its tags (what the API server sees once everything is known)."""
    if isinstance(value, str):
        return TAG.sub("", value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _object(n: Node) -> tuple[str, str, str, dict[str, Any]]:
    """(API group, resource plural, namespace, object) of a Kubernetes node, from its type token and inputs."""
    _, api, kind = n.type.split(":", 2)
    group = api.rsplit("/", 1)[0] if "/" in api else ""
    group = "" if group == "core" else group
    low = kind.lower()
    plural = low[:-1] + "ies" if low.endswith("y") else low + ("es" if low.endswith("s") else "s")
    obj = _plain(n.inputs) if isinstance(n.inputs, dict) else {}
    return group, plural, (obj.get("metadata") or {}).get("namespace") or "", obj


def _intercepts(hook: Mapping[str, Any], group: str, plural: str, namespace: str, operation: str) -> bool:
    """Whether the API server sends this operation on this object to ``hook`` (admissionregistration/v1 rules;
    a namespaceSelector is read for its ``kubernetes.io/metadata.name`` expressions only, any other key counts as
    matching: the conservative side)."""
    if hook.get("failurePolicy", "Fail") != "Fail":
        return False
    if not any((group in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
               and any(res.split("/")[0] in (plural, "*") for res in r.get("resources", []))
               and (operation in r.get("operations", []) or "*" in r.get("operations", []))
               for r in hook.get("rules", [])):
        return False
    if namespace:
        for e in (hook.get("namespaceSelector") or {}).get("matchExpressions", []):
            if e.get("key") == NAME_LABEL and e.get("operator") == "NotIn" and namespace in e.get("values", []):
                return False
            if e.get("key") == NAME_LABEL and e.get("operator") == "In" and namespace not in e.get("values", []):
                return False
    return True


def webhook_races(ns: Mapping[str, Node], ops: Mapping[str, str]) -> list[Violation]:
    """Objects created (or updated) in the update while the Deployment that serves a failurePolicy=Fail webhook
    intercepting them is itself created or replaced in it, without waiting for that Deployment.

    Kueue's release installs such webhooks (Pods, Jobs, Deployments, RayJobs, ClusterQueues, ...); until its
    controller is Available the API server refuses those objects ("failed calling webhook"). Kueue's readiness is
    gated on its certificates and webhook server (cmd/kueue/main.go:636-641) and its e2e setup waits for the
    Deployment to be Available before creating anything (test/util/e2e.go:322-340); the Kubernetes provider's
    create of a Deployment returns once it is Available (await/awaiters.go), unless the object opts out with
    ``pulumi.com/skipAwait``. So an object must (transitively) depend on that Deployment."""
    closure: dict[str, set[str]] = {}

    def waits_for(urn: str) -> set[str]:
        if urn not in closure:
            closure[urn] = set()
            n = ns.get(urn)
            for w in (*(n.waits if n else ()), *((n.parent,) if n and n.parent else ())):
                closure[urn] |= {w, *waits_for(w)}
        return closure[urn]

    parsed: dict[str, tuple[str, str, str, dict[str, Any]]] = {}

    def obj(urn: str, n: Node) -> tuple[str, str, str, dict[str, Any]]:
        """``_object`` of a node, once per node (read only here): the loops below visit each node per hook."""
        if urn not in parsed:
            parsed[urn] = _object(n)
        return parsed[urn]

    out: list[Violation] = []
    flagged: set[tuple[str, str]] = set()  # (object, Deployment): one violation each, the first hook named
    k8s = {u: n for u, n in ns.items() if n.custom and n.type.startswith("kubernetes:") and n.type != CHILDREN}
    for w in k8s.values():
        if w.type not in WEBHOOK_CONFIGS:
            continue
        for hook in _plain(w.inputs).get("webhooks") or []:
            svc = (hook.get("clientConfig") or {}).get("service") or {}
            services = [(u, n) for u, n in k8s.items()
                        if n.provider == w.provider and n.type == "kubernetes:core/v1:Service"
                        and obj(u, n)[3].get("metadata", {}).get("name") == svc.get("name")
                        and obj(u, n)[2] == svc.get("namespace")]
            for s_urn, s in services:
                selector = (obj(s_urn, s)[3].get("spec") or {}).get("selector") or {}
                for d_urn, d in k8s.items():
                    _, _, d_ns, dobj = obj(d_urn, d)
                    template = ((dobj.get("spec") or {}).get("template") or {}).get("metadata") or {}
                    labels = template.get("labels") or {}
                    if not (d.provider == w.provider and d.type == "kubernetes:apps/v1:Deployment"
                            and d_ns == svc.get("namespace") and selector and selector.items() <= labels.items()):
                        continue
                    if ops.get(d_urn) not in ("create", "replace"):
                        continue  # serving already (an update rolls out behind the running replica)
                    skip = str((dobj.get("metadata", {}).get("annotations") or {}).get("pulumi.com/skipAwait", ""))
                    for x_urn, x in k8s.items():
                        if x_urn == d_urn or x.provider != w.provider or ops.get(x_urn) in (None, "same", "delete"):
                            continue
                        operation = "UPDATE" if ops[x_urn] == "update" else "CREATE"
                        group, plural, namespace, _ = obj(x_urn, x)
                        if not _intercepts(hook, group, plural, namespace, operation):
                            continue
                        if (d_urn in waits_for(x_urn) and skip.lower() != "true") or (x_urn, d_urn) in flagged:
                            continue
                        flagged.add((x_urn, d_urn))
                        why = ("waits for it, but its create does not wait for availability (pulumi.com/skipAwait)"
                               if d_urn in waits_for(x_urn) else "does not wait for it")
                        out.append(Violation(x_urn, "webhook-not-serving", (
                            f"{x.type} {x_urn.rsplit('::', 1)[-1]}: {operation.lower()} is refused by webhook "
                            f"{hook.get('name')} (failurePolicy Fail) until {d.type} {d_urn.rsplit('::', 1)[-1]}, "
                            f"created in this update, is available; the object {why}")))
    return sorted(out, key=lambda v: (v.urn, v.message))


def state_of(rendering: engine.Rendering) -> dict[str, dict[str, Any]]:
    """What an ``up`` of ``rendering`` leaves: per URN its type, custom bit, provider and inputs."""
    return {u: {"type": n.type, "custom": n.custom, "provider": n.provider, "inputs": n.inputs}
            for u, n in nodes(rendering).items()}


def journey(state: Mapping[str, dict[str, Any]], rendering: engine.Rendering
            ) -> tuple[Preview, dict[str, dict[str, Any]], list[Violation]]:
    """Preview with a saved plan, then ``up --plan``: the plan, the state after, and what Pulumi refuses."""
    p = preview(state, rendering)
    after, violations = up(state, p, rendering)
    return p, after, violations


# --------------------------------------------------------------------------- the saved plan


def _serialise(value: Any) -> Any:
    """A goal value as deployment.go serialises it: unknowns as the placeholder, secrets as ciphertext."""
    if isinstance(value, dict) and set(value) == {engine.SECRET}:
        plaintext = json.dumps(_serialise(value[engine.SECRET]))
        return {SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270",
                "ciphertext": "v1:" + hashlib.sha256(plaintext.encode()).hexdigest()}
    if isinstance(value, dict):
        return {k: _serialise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_serialise(v) for v in value]
    if isinstance(value, str):
        return COMPUTED if value == COMPUTED else TAG.sub("", value)
    return value


def saved_plan(p: Preview) -> dict[str, Any]:
    """The plan as ``pulumi preview --save-plan`` writes it (apitype.VersionedDeploymentPlan, version 1)."""
    plans = {}
    for urn, rp in sorted(p.plans.items()):
        entry: dict[str, Any] = {"steps": rp.ops, "state": {}}
        if rp.goal is not None:
            g = rp.goal
            entry["goal"] = {"type": g["type"], "name": g["name"], "custom": g["custom"], "protect": False,
                             "parent": g["parent"], "provider": g["provider"],
                             "inputDiff": {k: _serialise(v) for k, v in g["inputDiff"].items() if v},
                             "outputDiff": {}}
        plans[urn] = entry
    return {"version": 1, "plan": {"manifest": {"time": "1970-01-01T00:00:00Z", "magic": "", "version": ""},
                                   "resourcePlans": plans}}
