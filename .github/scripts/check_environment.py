"""Fail closed unless a GitHub environment is protected as bootstrap/ declares it.

Run by every cloud job that names an environment, before it authenticates to GCP: GitHub runs a
job in an environment of that name even when it has no protection (it creates a missing one bare),
so a deleted or loosened environment must stop the job here. Standard library only (it runs
before anything is installed).

    GH_TOKEN=... GITHUB_REPOSITORY=owner/name python3 .github/scripts/check_environment.py production --main-only

Checks (GitHub REST: GET /repos/{owner}/{repo}/environments/{env} and, for --main-only,
.../deployment-branch-policies; docs.github.com/en/rest/deployments/environments and
docs.github.com/en/rest/deployments/branch-policies; both need `actions: read`):
a required-reviewers rule with at least one reviewer and prevent_self_review true; administrators
cannot bypass the rules; with --main-only, deployments from custom branch policies that are
exactly the branch `main`. Exit 0 when all hold, 1 otherwise (any error included).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

API_VERSION = "2022-11-28"
TIMEOUT = 20
MAIN = "main"


def environment_problems(env: object, main_only: bool) -> list[str]:
    """What is wrong with an environment document (the GET environment answer)."""
    if not isinstance(env, dict):
        return ["the environment answer is not a JSON object"]
    problems = []
    rules = env.get("protection_rules")
    rules = rules if isinstance(rules, list) else []
    reviewers = [r for r in rules if isinstance(r, dict) and r.get("type") == "required_reviewers"]
    if not reviewers:
        problems.append("no required reviewers")
    else:
        rule = reviewers[0]
        if not isinstance(rule.get("reviewers"), list) or not rule["reviewers"]:
            problems.append("the required-reviewers rule names nobody")
        if rule.get("prevent_self_review") is not True:
            problems.append("prevent_self_review is not on (a run's author could approve it)")
    if env.get("can_admins_bypass") is not False:
        problems.append("administrators can bypass the protection rules (can_admins_bypass is not false)")
    if main_only:
        policy = env.get("deployment_branch_policy")
        if policy != {"protected_branches": False, "custom_branch_policies": True}:
            problems.append(f"deployment branches are not limited to a custom policy (deployment_branch_policy "
                            f"= {json.dumps(policy)}; want protected_branches false, custom_branch_policies true)")
    return problems


def branch_policy_problems(answer: object) -> list[str]:
    """What is wrong with the deployment branch policies (want exactly the branch main)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("branch_policies"), list):
        return ["the branch policies answer has no branch_policies list"]
    policies = answer["branch_policies"]
    if answer.get("total_count", len(policies)) != len(policies):
        return [f"{answer.get('total_count')} branch policies, {len(policies)} listed: not all seen"]
    seen = [(p.get("name"), p.get("type", "branch")) if isinstance(p, dict) else (None, None) for p in policies]
    if seen != [(MAIN, "branch")]:
        return [f"deployment branch policies are {seen}; want exactly [('{MAIN}', 'branch')]"]
    return []


def get(api: str, path: str, token: str) -> object:
    request = urllib.request.Request(f"{api}{path}", headers={
        "Accept": "application/vnd.github+json",
        "Authorization": f"Bearer {token}",
        "X-GitHub-Api-Version": API_VERSION,
    })
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310 (the GitHub API URL)
        return json.load(response)


def check(api: str, repository: str, environment: str, main_only: bool, token: str) -> list[str]:
    base = f"/repos/{repository}/environments/{urllib.parse.quote(environment, safe='')}"
    try:
        problems = environment_problems(get(api, base, token), main_only)
        if main_only and not problems:
            problems = branch_policy_problems(get(api, f"{base}/deployment-branch-policies?per_page=100", token))
    except urllib.error.HTTPError as err:
        what = "no such environment" if err.code == 404 else f"HTTP {err.code} {err.reason}"
        return [f"GET {base}: {what}"]
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        return [f"GET {base}: {err}"]
    except ValueError as err:  # json.JSONDecodeError
        return [f"GET {base}: not JSON ({err})"]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("environment")
    parser.add_argument("--main-only", action="store_true", help="deployments from the branch main only")
    args = parser.parse_args(argv)
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    token = os.environ.get("GH_TOKEN", "")
    api = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    if repository.count("/") != 1 or not token:
        print("::error::GITHUB_REPOSITORY (owner/name) and GH_TOKEN must be set", file=sys.stderr)
        return 1
    problems = check(api, repository, args.environment, args.main_only, token)
    for p in problems:
        print(f"::error::environment {args.environment}: {p} (bootstrap/ declares it; re-run it)", file=sys.stderr)
    if not problems:
        print(f"environment {args.environment}: required reviewers, prevent-self-review, no admin bypass"
              + (f", deployments from {MAIN} only" if args.main_only else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
