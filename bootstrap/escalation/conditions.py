"""IAM conditions, parsed as CEL and evaluated on the objects they guard: what a conditional grant admits is
computed, never searched for in the expression's text.

An IAM condition is a CEL expression over request attributes (https://cloud.google.com/iam/docs/conditions-overview;
Cloud Storage's ``resource.name`` is ``projects/_/buckets/<bucket>`` for the bucket and
``projects/_/buckets/<bucket>/objects/<object>`` for an object,
https://cloud.google.com/storage/docs/access-control/iam#conditions). cel-python (the CEL reference semantics for
Python) compiles and evaluates it with ``resource.name`` bound to each representative name of the resource's
objects (``stacks.state_objects``: every stack's state, history, backups and locks in the state bucket). An
expression that does not compile, or calls a function cel-python lacks (IAM's ``extract``, ``matchTag``), admits
every name: fail closed, the grant counts whole. So does one that reads anything but ``resource.name``,
``resource.type`` and ``resource.service`` (bound to what IAM gives a Cloud Storage request,
https://cloud.google.com/iam/docs/conditions-resource-attributes): ``request.time``, ``resource`` as a whole
(``has(request.time)``, ``"type" in resource``, ``size(resource)``) or a macro's variable would otherwise be decided
on attributes IAM sets and this evaluation lacks, which can make a grant that admits everything look like one that
admits a lock.
"""

from __future__ import annotations

from functools import cache

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

# The resource attributes IAM sets on a Cloud Storage request and this evaluation binds; any other reference fails
# closed (https://cloud.google.com/iam/docs/conditions-resource-attributes: resource.service "storage.googleapis.com",
# resource.type "storage.googleapis.com/Bucket" or "storage.googleapis.com/Object").
BOUND = frozenset({"name", "type", "service"})


def _data(node) -> str | None:
    return getattr(node, "data", None)  # celpy's parse tree (lark): subtrees have ``data``, tokens are strings


def _resource_attribute(tree) -> bool:
    """A ``member_dot`` tree selecting one bound attribute of ``resource`` (``resource.name`` ...)."""
    if tree.data != "member_dot" or len(tree.children) != 2:
        return False
    inner, attr = tree.children
    if _data(attr) is not None or str(attr) not in BOUND or _data(inner) != "member" or len(inner.children) != 1:
        return False
    primary = inner.children[0]
    ident = primary.children[0] if _data(primary) == "primary" and len(primary.children) == 1 else None
    return _data(ident) == "ident" and [str(t) for t in ident.children] == ["resource"]


def _reads_only_bound(ast) -> bool:
    """Every identifier the expression reads is ``resource`` selecting a bound attribute."""
    idents = sum(1 for t in ast.iter_subtrees() if t.data == "ident")
    return idents == sum(1 for t in ast.iter_subtrees() if _resource_attribute(t))


@cache
def _program(expression: str) -> celpy.Runner | None:
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
        return env.program(ast) if _reads_only_bound(ast) else None
    except Exception:  # noqa: BLE001 (celpy raises its parser's own errors): unreadable, so it admits everything
        return None


@cache
def admits(expression: str | None, name: str) -> bool:
    """Whether a grant under ``expression`` applies to the resource called ``name`` (True when it cannot tell)."""
    if not expression:
        return True
    program = _program(expression)
    if program is None:
        return True
    kind = "Object" if "/objects/" in name else "Bucket"
    activation = {"resource": celtypes.MapType({
        celtypes.StringType("name"): celtypes.StringType(name),
        celtypes.StringType("type"): celtypes.StringType(f"storage.googleapis.com/{kind}"),
        celtypes.StringType("service"): celtypes.StringType("storage.googleapis.com")})}
    try:
        value = program.evaluate(activation)
    except (CELEvalError, KeyError, TypeError, ValueError):
        return True
    return not (isinstance(value, celtypes.BoolType) and not bool(value))
