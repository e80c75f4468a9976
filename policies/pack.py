"""The registry's rules as CrossGuard policies (``pulumi_policy``), built but not served.

``policies/__main__.py`` hands :func:`crossguard_policies` to the one ``PolicyPack``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
    _DictProxy,
    _ListProxy,
)

from stackspec import spec as stack_spec

from .registry import ENVIRONMENT_KEY, RESOURCE, RULES, Rule
from .rules.common import Context, Res

PACK_NAME = "tpu-multislice-policies"


def environment() -> str:
    """The stack's environment, read through the stack spec model as the program reads it.

    Pulumi hands the stack's config to the analyzer (``PULUMI_CONFIG``) and pulumi_policy
    loads it into the runtime config before each analysis. The model requires it; a stack
    without a valid one never deploys, and the pack holds it to production rules meanwhile.
    """
    return stack_spec.environment_of({ENVIRONMENT_KEY: pulumi.runtime.get_config(ENVIRONMENT_KEY)}) or "prod"


# pulumi_policy 1.21.0 (uv.lock) hands each policy its props wrapped in proxies (pulumi_policy/proxy.py:
# ``_DictProxy``/``_ListProxy`` around a dict or list of further proxies and plain values; reading a value that is one
# of the ``UNKNOWN_*`` sentinels raises ``UnknownValueError``; ``proxy["__target"]`` is the wrapped container).
_UNKNOWN = frozenset({UNKNOWN_BOOLEAN_VALUE, UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, UNKNOWN_ARRAY_VALUE,
                      UNKNOWN_ASSET_VALUE, UNKNOWN_ARCHIVE_VALUE, UNKNOWN_OBJECT_VALUE})
_SCALARS = (str, int, float, bool, type(None))


def _unknown(value: Any) -> bool:
    return isinstance(value, str) and value in _UNKNOWN  # pulumi_policy/proxy.py ``_is_unknown``


def known(value: Any) -> Any:
    """Props as plain data, every value the engine does not know yet left out.

    During a preview a stack policy sees each resource's planned outputs, where whatever
    the provider computes (a subnet's ``secondaryIpRanges``, a pool's ``networkConfig``
    it fills in) is unknown, and pulumi_policy's proxy raises on touching one, which
    would skip the whole rule. Unknown here means "not set by this program": the rules
    judge what is set, and run again on known values at ``pulumi up``.

    The proxies' own containers are read directly, each sentinel left out: what reading through the proxy and
    skipping every ``UnknownValueError`` gives, without an exception and two ABC checks per value (that walk was a
    third of the pack's CPU per resource, every policy converting every resource again). Anything else that is a
    mapping or a sequence is read through its interface, as before.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is _DictProxy:
        return {k: v if type(v) in _SCALARS else known(v) for k, v in value["__target"].items() if not _unknown(v)}
    if kind is _ListProxy:
        return [v if type(v) in _SCALARS else known(v) for v in value["__target"] if not _unknown(v)]
    if isinstance(value, Mapping):
        out = {}
        for key in value:
            try:
                out[key] = known(value[key])
            except UnknownValueError:
                continue
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = []
        for i in range(len(value)):
            try:
                items.append(known(value[i]))
            except UnknownValueError:
                continue
        return items
    return value


def _context(rule: Rule, config: Mapping[str, Any] | None) -> Context:
    return Context(environment=environment(), config=rule.settings(config))


def _resource_policy(rule: Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        ctx = _context(rule, args.get_config())
        for message in rule.check(args.resource_type, known(args.props), ctx):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=rule.name, description=rule.description, validate=validate,
        enforcement_level=EnforcementLevel(rule.level(environment())),
        config_schema=PolicyConfigSchema(dict(rule.config)) if rule.config else None,
        remediation_steps=rule.remediation,
    )


def _stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        ctx = _context(rule, args.get_config())
        resources = [Res(r.resource_type, r.name, r.urn, known(r.props),
                         tuple(d.urn for d in (getattr(r, "dependencies", None) or ())),
                         r.provider.name if getattr(r, "provider", None) else None)
                     for r in args.resources]
        for res, message in rule.check(resources, ctx):
            report_violation(message, res.urn if res else None)

    return StackValidationPolicy(
        name=rule.name, description=rule.description, validate=validate,
        enforcement_level=EnforcementLevel(rule.level(environment())),
        config_schema=PolicyConfigSchema(dict(rule.config)) if rule.config else None,
        remediation_steps=rule.remediation,
    )


def crossguard_policies() -> list[Policy]:
    return [_resource_policy(r) if r.kind == RESOURCE else _stack_policy(r) for r in RULES]
