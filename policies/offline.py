"""The pack's rules over an offline rendering (``offline.engine.Rendering``), no Pulumi CLI.

``config`` takes the same shape as a Pulumi policy-pack config file
(``pulumi preview --policy-pack-config``): ``{"<rule>": "advisory" | {"enforcementLevel":
..., "<key>": value}, "all": ...}``, so one file serves both paths.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from . import locate
from .registry import ADVISORY, MANDATORY, RESOURCE, RULES, Rule
from .rules.common import Context, Res

LEVELS = (ADVISORY, MANDATORY, "remediate", "disabled")


@dataclass(frozen=True)
class Violation:
    rule: str
    enforcement: str
    message: str
    remediation: str
    resource_type: str | None  # None: the stack as a whole
    resource_name: str | None
    urn: str | None
    # Where in the stack file it comes from (policies/locate.py): the key, the file, its line.
    key: str | None = None
    source: str | None = None
    line: int | None = None

    @property
    def mandatory(self) -> bool:
        return self.enforcement == MANDATORY

    def render(self) -> str:
        """One line as a linter prints it, file and line first (``<file>:<line>: <key>: [<level>] <rule>: ...``)."""
        where = f"{self.source}:{self.line}: " if self.source and self.line else \
            (f"{self.source}: " if self.source else "")
        return f"{where}{self.key + ': ' if self.key else ''}[{self.enforcement}] {self.rule}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _level(rule: Rule, config: Mapping[str, Any], environment: str = "prod") -> str:
    level = rule.level(environment)
    for key in ("all", rule.name):
        value = config.get(key)
        if isinstance(value, str):
            level = value
        elif isinstance(value, Mapping) and "enforcementLevel" in value:
            level = value["enforcementLevel"]
    if level not in LEVELS:
        raise ValueError(f"policy config {rule.name}: enforcementLevel {level!r}; "
                         f"allowed: {', '.join(LEVELS)}")
    # Remediation is not offered by these rules: a remediate level blocks like mandatory.
    return MANDATORY if level == "remediate" else level


def config_problems(config: Any) -> list[str]:
    """What is wrong with a policy pack config (unknown rules or keys, bad levels); empty when fine."""
    if not isinstance(config, Mapping):
        return ["must be a JSON object of rule name -> level or settings"]
    problems = []
    rules = {r.name: r for r in RULES}
    for name, value in config.items():
        if name != "all" and name not in rules:
            close = difflib.get_close_matches(name, rules, n=1)
            problems.append(f"unknown rule {name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
            continue
        level = value if isinstance(value, str) else (value.get("enforcementLevel") if isinstance(value, Mapping)
                                                      else None)
        if not isinstance(value, str | Mapping):
            problems.append(f"{name}: must be a level ({', '.join(LEVELS)}) or an object of settings")
        elif level is not None and level not in LEVELS:
            problems.append(f"{name}: enforcementLevel {level!r}; allowed: {', '.join(LEVELS)}")
        if isinstance(value, Mapping) and name in rules:
            unknown = sorted(set(value) - set(rules[name].config) - {"enforcementLevel"})
            if unknown:
                allowed = ", ".join(["enforcementLevel", *rules[name].config])
                problems.append(f"{name}: unknown setting(s) {unknown}; allowed: {allowed}")
    return problems


def _overrides(rule: Rule, config: Mapping[str, Any]) -> Mapping[str, Any]:
    value = config.get(rule.name)
    return value if isinstance(value, Mapping) else {}


def evaluate_resources(
    resources: list[Res], environment: str, config: Mapping[str, Any] | None = None, spec_only: bool = False
) -> list[Violation]:
    """Run every enabled rule (``spec_only``: those that need only the spec) over ``resources`` (custom
    resources only, as Pulumi does)."""
    config = config or {}
    unknown = sorted(set(config) - {r.name for r in RULES} - {"all"})
    if unknown:
        raise ValueError(f"policy config names unknown rules {unknown}; "
                         f"allowed: all, {', '.join(r.name for r in RULES)}")
    out: list[Violation] = []
    for rule in RULES:
        if spec_only and not rule.spec_only:
            continue
        level = _level(rule, config, environment)
        if level == "disabled":
            continue
        ctx = Context(environment=environment, config=rule.settings(_overrides(rule, config)))
        if rule.kind == RESOURCE:
            found = [(r, msg) for r in resources for msg in rule.check(r.type, r.props, ctx)]
        else:
            found = rule.check(resources, ctx)
        out += [Violation(rule.name, level, msg, rule.remediation,
                          r.type if r else None, r.name if r else None, r.urn if r else None)
                for r, msg in found]
    return out


# Helm charts are components: offline, the rules read their inputs (chart, version) instead of the objects they
# render, which the offline engine does not expand (policies/rules/regions.py reads either).
HELM_CHART = "kubernetes:helm.sh/v4:Chart"


def resources_of(rendering: Any) -> list[Res]:
    """The rendering's custom resources (and Helm charts) as rules see them (other components carry no props)."""
    return [Res(r.type, r.name, r.urn, r.inputs, r.dependencies,
                r.provider_urn.rpartition("::")[2] if r.provider_urn else None)
            for r in rendering.resources if r.custom or r.type == HELM_CHART]


def evaluate(rendering: Any, config: Mapping[str, Any] | None = None, spec_only: bool = False) -> list[Violation]:
    """Every violation of the pack's rules (``spec_only``: of those needing only the spec, as ``slicectl
    lint`` runs them) in an offline rendering of a stack, each with its stack-file key and line."""
    resources = resources_of(rendering)
    by_urn = {r.urn: r for r in resources}
    spec, document = rendering.spec, getattr(rendering, "document", None)
    out = []
    for v in evaluate_resources(resources, spec.environment, config, spec_only):
        key = locate.spec_key(by_urn.get(v.urn), spec, _RULES[v.rule].spec)
        out.append(replace(v, key=key, source=document.source if document else None,
                           line=locate.line(key, document)))
    return sorted(out, key=lambda v: (not v.mandatory, v.line or 0, v.rule))


_RULES = {r.name: r for r in RULES}
