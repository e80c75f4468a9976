"""Refuse a saved Pulumi plan whose IAM or RBAC inputs are unknown or secret, or that lacks resources; fail closed.

`pulumi up --plan` binds the inputs the preview knew, and nothing else: pulumi/pulumi
pkg/resource/deploy/plan.go, the doc comment of `type Plan`: "In the case of inputs, unknown values in the
plan accept any value (including no value) as valid." An IAM member computed from a resource the same update
creates or replaces (a new account's email, a replaced cluster's service agent) is therefore approved by the
deploy reviewer as "unknown" and applied as whatever the program computes under ci-deploy.

This script reads the plan `pulumi preview --save-plan` wrote (apitype DeploymentPlanV1: resourcePlans ->
goal.inputDiff.adds/updates; an unknown is serialized as pkg/resource/stack/deployment.go
computedValuePlaceholder) and refuses it when an input of a security-relevant resource is unknown:
a GCP IAM member/binding/policy (type token with IAM/Iam), a Kubernetes RBAC Role/ClusterRole/(Cluster)
RoleBinding. An unknown that a reviewer accepted is listed, by URN and property, in
.github/plan-unknowns-allowed.json (a code-owned file) with the reason. Standard library only.

    python3 .github/scripts/check_plan.py PLAN.json [--allowed FILE]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ALLOWED = Path(__file__).resolve().parents[1] / "plan-unknowns-allowed.json"
# pulumi/pulumi pkg/resource/stack/deployment.go: what a computed (unknown) value serializes as.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# resource.SecretSig: the key a serialised secret carries (sdk/go/common/resource/properties.go).
SECRET_SIG = "4dabf18193072939515e22adb298388d"
# The components the Kubernetes provider constructs (pulumi-kubernetes provider_construct.go resourceProviders).
CONSTRUCTED = ("kubernetes:yaml/v2:ConfigFile", "kubernetes:yaml/v2:ConfigGroup", "kubernetes:helm.sh/v4:Chart",
               "kubernetes:kustomize/v2:Directory")
RBAC = re.compile(r"^kubernetes:rbac\.authorization\.k8s\.io/v1:(Role|ClusterRole|RoleBinding|ClusterRoleBinding)$")


def security_relevant(type_: str) -> bool:
    """IAM of any GCP (or other) provider, or Kubernetes RBAC."""
    module_and_name = type_.split(":", 1)[-1]
    return bool(re.search(r"IAM|Iam", module_and_name)) or bool(RBAC.match(type_))


def unknowns(value: object, path: str) -> list[str]:
    """The property paths under `value` that are unknown (or contain an unknown, as an interpolated string does),
    or secret (unreadable: it may hide an unknown)."""
    if isinstance(value, str):
        return [path] if UNKNOWN in value else []
    if isinstance(value, dict) and SECRET_SIG in value:
        return [f"{path} (secret)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in unknowns(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknowns(v, f"{path}[{i}]")]
    return []


def missing(plans: dict) -> list[str]:
    """Resources the update will register that the plan cannot hold (see the module docstring)."""
    parents = {(rp.get("goal") or {}).get("parent") for rp in plans.values()}
    out = []
    for urn, rp in sorted(plans.items()):
        goal = rp.get("goal") or {}
        if goal.get("type") in CONSTRUCTED and urn not in parents:
            out.append(f"{urn}: a component its provider constructs, with no child in the plan (its provider's "
                       "configuration was unknown at preview, so Construct did not run): `up --plan` would refuse "
                       "each child it creates")
        parent = goal.get("parent") or ""
        if parent and parent not in plans and parent.split("::")[2:3] != ["pulumi:pulumi:Stack"]:
            out.append(f"{urn}: its parent {parent} is not in the plan")
    return out


def findings(plan: dict, allowed: set[tuple[str, str]]) -> list[str]:
    if "plan" in plan and "version" in plan:  # a VersionedDeploymentPlan
        plan = plan["plan"]
    out = missing(plan.get("resourcePlans") or {})
    for urn, rp in sorted((plan.get("resourcePlans") or {}).items()):
        goal = rp.get("goal") or {}
        if not security_relevant(goal.get("type", "")):
            continue
        diff = goal.get("inputDiff") or {}
        for kind in ("adds", "updates"):
            for key, value in sorted((diff.get(kind) or {}).items()):
                for path in unknowns(value, key):
                    if (urn, path) not in allowed and (urn, key) not in allowed:
                        what = "secret: unreadable in the plan (it may be unknown)" if path.endswith("(secret)") \
                            else "unknown in the plan (any value would be applied)"
                        out.append(f"{urn}: {path.removesuffix(' (secret)')} is {what}")
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("--"):
        print("usage: check_plan.py PLAN.json [--allowed FILE]", file=sys.stderr)
        return 2
    allowed_file = Path(argv[argv.index("--allowed") + 1]) if "--allowed" in argv else ALLOWED
    entries = json.loads(allowed_file.read_text()).get("allowed", []) if allowed_file.exists() else []
    for e in entries:
        if not (isinstance(e, dict) and e.get("urn") and e.get("property") and e.get("reason")):
            print(f"::error file=.github/{ALLOWED.name}::an entry needs urn, property and reason: {e!r}",
                  file=sys.stderr)
            return 1
    problems = findings(json.loads(Path(argv[0]).read_text()), {(e["urn"], e["property"]) for e in entries})
    for p in problems:
        print(f"::error::{p}", file=sys.stderr)
    if problems:
        print(f"refusing the plan: {len(problems)} problem(s): IAM/RBAC input(s) the reviewer could not see, or "
              "resources the update would create that the plan does not hold. Apply what produces an unknown first "
              f"(the next preview then knows it), or list it in .github/{ALLOWED.name} with its reason (a "
              "code-owned change); declare a constructed component's objects as the program's own resources.",
              file=sys.stderr)
        return 1
    print("no IAM or RBAC input of the plan is unknown or secret, and no resource is missing from it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
