"""IAM conditions, parsed as CEL and evaluated on the objects they guard: what a conditional grant admits is
computed, never searched for in the expression's text.

An IAM condition is a CEL expression over request attributes (https://cloud.google.com/iam/docs/conditions-overview;
Cloud Storage's ``resource.name`` is ``projects/_/buckets/<bucket>`` for the bucket and
``projects/_/buckets/<bucket>/objects/<object>`` for an object,
https://cloud.google.com/storage/docs/access-control/iam#conditions). cel-python (the CEL reference semantics for
Python) compiles and evaluates it with ``resource.name`` bound to each representative name of the resource's
objects (``stacks.state_objects``: every stack's state, history, backups and locks in the state bucket). An
expression that does not compile, or calls a function cel-python lacks (IAM's ``extract``, ``matchTag``), admits
every name: fail closed, the grant counts whole.
"""

from __future__ import annotations

from functools import cache

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError


@cache
def _program(expression: str) -> celpy.Runner | None:
    env = celpy.Environment()
    try:
        return env.program(env.compile(expression))
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
    activation = {"resource": celtypes.MapType({celtypes.StringType("name"): celtypes.StringType(name)})}
    try:
        value = program.evaluate(activation)
    except (CELEvalError, KeyError, TypeError, ValueError):
        return True
    return not (isinstance(value, celtypes.BoolType) and not bool(value))
