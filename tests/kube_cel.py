"""Kubernetes CEL evaluated with cel-python: a CRD's ``x-kubernetes-validations`` on an object, and a
``ValidatingAdmissionPolicy`` on an admission request.

cel-python implements the CEL language and its standard library; what the Kubernetes API server adds on top is
here, each with the Kubernetes text it follows:

- **Property names** (CRD ``rule`` reference, apiextensions.k8s.io/v1 ``ValidationRule.rule``): "Only property names
  of the form ``[a-zA-Z_.-/][a-zA-Z0-9_.-/]*`` are accessible. Accessible property names are escaped according to
  the following rules when accessed in the expression: '__' escapes to '__underscores__', '.' escapes to
  '__dot__', '-' escapes to '__dash__', '/' escapes to '__slash__', Property names that exactly match a CEL
  RESERVED keyword escape to '__{keyword}__'." Map keys (``additionalProperties``) are not property names: they are
  read with ``self[key]`` and are not escaped.
- **Absent fields**: "Null valued fields are treated as absent fields in CEL expressions" (same reference).
- **Defaults first**: the API server defaults a custom resource before it validates it (structural schema
  defaulting, "Defaulting happens on the object ... when reading from etcd, ... after mutating admission"), so a
  rule sees the schema's ``default`` values; :func:`with_defaults` applies them.
- **Types**: a string with ``format: duration`` is a CEL ``duration``, ``date-time`` a ``timestamp``
  (k8s.io/apiserver ``pkg/cel/common/schemas.go`` ``SchemaDeclType``); an ``x-kubernetes-int-or-string`` value is
  ``dyn``, and CEL's heterogeneous equality makes ``'metrics' != 0`` true rather than an error (cel-spec
  ``langdef.md``, "Equality": values of different types are not equal; cel-python 0.5 raises "no such overload"
  instead, so :data:`FUNCTIONS` replaces ``==``/``!=``). GMP's own examples scrape ``port: metrics`` under the
  PodMonitoring rule ``self != 0``, which is only possible with that semantics.
- **Transition rules** (rules that read ``oldSelf``): "Transition rules never apply to create operations", and
  apply only where "both an old and a new value exist" at a correlatable path (not inside list items).
  :func:`evaluate` runs them when it is given the old object, at paths that exist in both.
- **Kubernetes library functions** the vendored CRDs call: ``isURL`` (the Kubernetes URL library,
  ``k8s.io/apiserver/pkg/cel/library/urls.go``: true for a URL Go's ``url.ParseRequestURI`` accepts, i.e. an
  absolute URI or an absolute path). ``messageExpression`` (``'...'.format([...])``) builds only the message
  text and is not evaluated.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

# CEL's RESERVED words (cel-spec langdef.md "Syntax"): as property names they are escaped to __word__.
RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                      "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})
_ACCESSIBLE = re.compile(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*\Z")


def escape(name: str) -> str | None:
    """A property name as a CEL expression reads it, or None where Kubernetes makes it inaccessible."""
    if name in RESERVED:
        return f"__{name}__"
    if not _ACCESSIBLE.match(name):
        return None
    return (name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
            .replace("/", "__slash__"))


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def go_duration(text: str) -> timedelta:
    """A Go/strfmt duration string (``30s``, ``1h30m``), as the API server reads ``format: duration``."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.lstrip("+"):
        raise ValueError(f"not a duration: {text!r}")
    return timedelta(seconds=sum(float(n) * _UNIT[u] for n, u in parts))


def is_url(value: Any) -> celtypes.BoolType:
    """Kubernetes' ``isURL(string)``: Go's ``url.ParseRequestURI`` accepts an absolute URI (a scheme) or an
    absolute path, and no fragment-only or relative reference."""
    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(bool(parts.scheme) or text.startswith("/"))


_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _heterogeneous_eq(a: Any, b: Any) -> celtypes.BoolType | CELEvalError:
    # An operand that failed (an absent field read) is the result: cel-python hands the error in as a value, and
    # CEL's == and != propagate it (cel-spec langdef.md "Errors"), so the API server refuses the object.
    for v in (a, b):
        if isinstance(v, CELEvalError):
            return v
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return celtypes.BoolType(float(a) == float(b))
    if type(a) is not type(b) and not (isinstance(a, type(b)) or isinstance(b, type(a))):
        return celtypes.BoolType(False)
    return celtypes.BoolType(a == b)


def _not(value: celtypes.BoolType | CELEvalError) -> celtypes.BoolType | CELEvalError:
    return value if isinstance(value, CELEvalError) else celtypes.BoolType(not value)


FUNCTIONS = {
    "_==_": _heterogeneous_eq,
    "_!=_": lambda a, b: _not(_heterogeneous_eq(a, b)),
    "isURL": is_url,
}


def _is_int_or_string(schema: dict) -> bool:
    return bool(schema.get("x-kubernetes-int-or-string"))


def to_cel(value: Any, schema: dict | None) -> Any:
    """A JSON value as the API server hands it to CEL under ``schema`` (escaped property names, typed strings)."""
    schema = schema or {}
    if value is None:
        return None
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None or not isinstance(schema.get("additionalProperties"), dict):
            out = {}
            for k, v in value.items():
                key = escape(k)
                if key is not None and v is not None:
                    out[celtypes.StringType(key)] = to_cel(v, (props or {}).get(k))
            return celtypes.MapType(out)
        item = schema["additionalProperties"]
        return celtypes.MapType({celtypes.StringType(k): to_cel(v, item) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return celtypes.ListType([to_cel(v, schema.get("items")) for v in value])
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        fmt = schema.get("format")
        if fmt == "duration" and not _is_int_or_string(schema):
            return celtypes.DurationType(go_duration(value))
        if fmt == "date-time":
            return celtypes.TimestampType(datetime.fromisoformat(value.replace("Z", "+00:00")))
        return celtypes.StringType(value)
    raise TypeError(f"not a JSON value: {value!r}")


def with_defaults(value: Any, schema: dict | None) -> Any:
    """``value`` with the schema's ``default`` of every absent property filled in, recursively (a copy)."""
    value = copy.deepcopy(value)
    _default(value, schema or {})
    return value


def _default(value: Any, schema: dict) -> None:
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                _default(value[k], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for v in value.values():
                _default(v, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            _default(v, schema["items"])


@dataclass(frozen=True)
class Rule:
    path: str  # the schema node, e.g. spec/endpoints/[]/port ("" for the root)
    rule: str
    message: str

    @property
    def transition(self) -> bool:
        return re.search(r"\boldSelf\b", self.rule) is not None


def rules(schema: dict, path: str = "") -> Iterator[tuple[Rule, dict]]:
    """Every ``x-kubernetes-validations`` rule of a schema with the schema node it sits on."""
    for r in schema.get("x-kubernetes-validations", []):
        yield Rule(path, r["rule"], r.get("message", r["rule"])), schema
    for k, sub in (schema.get("properties") or {}).items():
        yield from rules(sub, f"{path}/{k}".lstrip("/"))
    if isinstance(schema.get("items"), dict):
        yield from rules(schema["items"], f"{path}/[]".lstrip("/"))
    if isinstance(schema.get("additionalProperties"), dict):
        yield from rules(schema["additionalProperties"], f"{path}/{{}}".lstrip("/"))
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key, []):
            yield from rules(sub, path)


@cache
def program(text: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(text), functions=FUNCTIONS)


@dataclass(frozen=True)
class Outcome:
    rule: Rule
    at: str  # the concrete path in the object, e.g. spec/endpoints/0/port
    ok: bool
    error: str = ""  # an evaluation error (the API server refuses the object then too)


def _nodes(value: Any, schema: dict, old: Any, path: str, at: str, correlated: bool) -> Iterator[tuple]:
    """(schema node, its path, concrete path, value, old value or None) for every node ``value`` has."""
    yield schema, path, at, value, old if correlated else None
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) if k in props else (extra if isinstance(extra, dict) else None)
            if sub is None or v is None:
                continue
            o = old.get(k) if correlated and isinstance(old, dict) else None
            key = "{}" if k not in props else k
            yield from _nodes(v, sub, o, f"{path}/{key}".lstrip("/"), f"{at}/{k}".lstrip("/"),
                              correlated and o is not None)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            # list items are not correlatable: transition rules below them are not run
            yield from _nodes(v, schema["items"], None, f"{path}/[]".lstrip("/"), f"{at}/{i}".lstrip("/"), False)


def evaluate(schema: dict, obj: dict, old: dict | None = None) -> list[Outcome]:
    """Every rule of ``schema`` at every node of ``obj`` (defaulted first), as the API server runs them on a
    create (``old`` None: transition rules skipped) or an update from ``old``."""
    obj = with_defaults(obj, schema)
    old = with_defaults(old, schema) if old is not None else None
    out = []
    for node, path, at, value, old_value in _nodes(obj, schema, old, "", "", old is not None):
        for r in node.get("x-kubernetes-validations", []):
            rule = Rule(path, r["rule"], r.get("message", r["rule"]))
            if rule.transition and old_value is None:
                continue
            activation = {"self": to_cel(value, node)}
            if rule.transition:
                activation["oldSelf"] = to_cel(old_value, node)
            out.append(_run(rule, at, activation))
    return out


def _run(rule: Rule, at: str, activation: dict) -> Outcome:
    try:
        result = program(rule.rule).evaluate(activation)
    except CELEvalError as e:  # raised or returned, as cel-python does either
        return Outcome(rule, at, False, str(e.args[0] if e.args else e))
    if isinstance(result, CELEvalError):
        return Outcome(rule, at, False, str(result.args[0] if result.args else result))
    if not isinstance(result, celtypes.BoolType):
        return Outcome(rule, at, False, f"not a bool: {result!r}")
    return Outcome(rule, at, bool(result))


def failures(outcomes: list[Outcome]) -> list[str]:
    return [f"{o.at or '<root>'}: {o.rule.message}" + (f" ({o.error})" if o.error else "")
            for o in outcomes if not o.ok]


# --------------------------------------------------------------------------- ValidatingAdmissionPolicy


# The parts of the admission variables' schemas that make a map rather than an object: map keys are not escaped
# (``oldObject.metadata.labels['ray.io/node-type']``). ObjectMeta labels/annotations are ``map[string]string``
# (k8s.io/apimachinery ``meta/v1/types.go``), UserInfo.extra ``map[string]ExtraValue`` (k8s.io/api
# ``authentication/v1/types.go``).
_MAP = {"additionalProperties": {"type": "string"}}
OBJECT_SCHEMA = {"properties": {"metadata": {"properties": {"labels": _MAP, "annotations": _MAP}}}}
REQUEST_SCHEMA = {"properties": {"userInfo": {"properties": {"extra": {"additionalProperties": {"items": {}}}}}}}


def admission_request(operation: str, resource: str, name: str, user: str, *, namespace: str = "",
                      group: str = "", version: str = "v1", kind: str = "", groups: tuple[str, ...] = ()) -> dict:
    """An ``admission.k8s.io/v1`` AdmissionRequest as the API server builds it for a ValidatingAdmissionPolicy's
    ``request`` variable (k8s.io/api ``admission/v1/types.go``: kind, resource, requestKind, requestResource, name,
    namespace, operation, userInfo, dryRun)."""
    gvk = {"group": group, "version": version, "kind": kind or resource.rstrip("s").capitalize()}
    gvr = {"group": group, "version": version, "resource": resource}
    req = {"uid": "00000000-0000-0000-0000-000000000000", "kind": gvk, "resource": gvr, "requestKind": gvk,
           "requestResource": gvr, "name": name, "operation": operation,
           "userInfo": {"username": user, "groups": list(groups)}, "dryRun": False}
    if namespace:
        req["namespace"] = namespace
    return req


def _rule_matches(rule: dict, request: dict) -> bool:
    res = request["resource"]
    sub = request.get("subResource", "")
    name = res["resource"] + (f"/{sub}" if sub else "")

    def has(values: list[str], v: str) -> bool:
        return "*" in values or v in values

    return (has(rule.get("apiGroups", []), res["group"]) and has(rule.get("apiVersions", []), res["version"])
            and has(rule.get("operations", []), request["operation"]) and has(rule.get("resources", []), name))


def admit(policy: dict, binding: dict, request: dict, obj: dict | None, old: dict | None) -> tuple[bool, str]:
    """(allowed, why) for one request under a policy and its binding: matchConstraints' resourceRules, then every
    matchCondition (all true, or the policy does not apply), then every validation; an evaluation error is
    handled by ``failurePolicy`` (default Fail). Variables: ``object`` ("null for DELETE requests"),
    ``oldObject`` ("null for CREATE requests"), ``request`` (the AdmissionRequest)."""
    spec = policy["spec"]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    if not any(_rule_matches(r, request) for r in spec["matchConstraints"]["resourceRules"]):
        return True, "not matched: resource rules"
    activation = {"request": to_cel(request, REQUEST_SCHEMA), "object": to_cel(obj, OBJECT_SCHEMA),
                  "oldObject": to_cel(old, OBJECT_SCHEMA)}
    fail_closed = spec.get("failurePolicy", "Fail") == "Fail"
    deny = "Deny" in binding["spec"]["validationActions"]
    for cond in spec.get("matchConditions", []):
        o = _run(Rule("matchConditions", cond["expression"], cond["name"]), "", activation)
        if o.error:
            return (not (fail_closed and deny)), f"matchCondition {cond['name']} error: {o.error}"
        if not o.ok:
            return True, f"not matched: {cond['name']}"
    for v in spec["validations"]:
        o = _run(Rule("validations", v["expression"], v.get("message", v["expression"])), "", activation)
        if o.error:
            return (not (fail_closed and deny)), f"error: {o.error}"
        if not o.ok:
            return (not deny), v.get("message", v["expression"])
    return True, "allowed"
