"""GitHub's side of the gates: the environments a CI job names (each with its reviewers' rule and the stack it
acts on), and the checks main requires. Pure data over ``stackspec.names``: the bootstrap's config and its access
model both read it, and it reads neither of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from stackspec import names

MAIN = "main"
DEFAULT_BRANCH = f"refs/heads/{MAIN}"


@dataclass(frozen=True)
class Environment:
    name: str
    main_only: bool  # deployments from main only (a custom branch policy naming main)
    why: str
    stack: str | None = None  # the stack it acts on (its reviewers may be the stack's own: stackReviewers)
    # Required reviewers approve each run. An environment without them (read-<stack>) exists only so the job's OIDC
    # subject names its stack: the token exchange admits it for main's workflow file only, whatever the settings.
    reviewed: bool = True


# Every environment: required reviewers, prevent-self-review (the author of a run never approves
# it), administrators cannot bypass. GitHub creates an environment a job names without any
# protection, so the workflows check these settings before they authenticate (.github/scripts/).
# A pull request's cloud preview of a stack runs the branch's own Pulumi program as that stack's
# ci-preview-<stack>, which decrypts the stack's secrets: a reviewer approves each run after reading the change.
PR_PREVIEW = "pr-preview"  # the kind (pr-preview-<stack>)


def pr_preview_environment(stack: str) -> Environment:
    """pr.yml's cloud preview of ``stack`` for a pull request (ci-preview-<stack>), after a reviewer's approval."""
    return Environment(names.pr_preview_environment(stack), False,
                       f"pr.yml's cloud preview of {stack} for a pull request ({names.preview_account_id(stack)})",
                       stack)


def read_environment(stack: str) -> Environment:
    """deploy.yml's preview and drills.yml's drift of ``stack`` on main: its OIDC subject names the stack, so the
    state of one stack, whose providers a refresh runs, can act only as that stack's reader."""
    return Environment(names.read_environment(stack), True,
                       f"main's preview and drift of {stack} ({names.preview_account_id(stack)}; no reviewer: "
                       "main's code, the token exchange admits main only)", stack, reviewed=False)


def image_environment(stack: str) -> Environment:
    """image.yml's build, push and signature of ``stack``'s worker image (a stack with a tpu-multislice:image
    section): a reviewer approves each run (any writer can dispatch the workflow), main only."""
    return Environment(names.image_environment(stack), True,
                       f"image.yml's build, push and signature of {stack}'s worker image "
                       f"({names.image_account_id(stack)})", stack)


def deploy_environment(stack: str) -> Environment:
    """deploy.yml's `pulumi up` of one stack (a stack with tpu-multislice:deploy.onPush)."""
    return Environment(names.deploy_environment(stack), True,
                       f"deploy.yml's `pulumi up --stack {stack}` ({names.deploy_account_id(stack)})", stack)


def drill_environment(stack: str) -> Environment:
    """drills.yml's cluster drill of one stack (a stack with tpu-multislice:deploy.clusterDrill)."""
    return Environment(names.drill_environment(stack), True,
                       f"drills.yml's cluster drill: deletes pods and a node under {stack} "
                       f"({names.drill_account_id(stack)})", stack)


# The pr.yml jobs every pull request must pass (no matrix, never skipped): branch protection of
# main requires them by job name (tests/test_workflows.py checks pr.yml has them, unskippable).
REQUIRED_CHECKS = ("stacks", "check", "cost")
# The GitHub App the required checks must come from: GitHub Actions. Without it, a required context is
# satisfied by any commit status of that name, and "Anyone with write permissions to a repository can set the
# state for any status check in the repository" (docs.github.com/en/pull-requests/reference/status-checks).
# github/rest-api-description, branch protection `checks[].app_id`: "The ID of the GitHub App that must provide
# this check. Omit this field to automatically select the GitHub App that has recently provided this check, or
# any app if it was not set by a GitHub App"; rulesets' `required_status_checks[].integration_id` is the same id.
# 15368 is GitHub Actions' app id, as GitHub's check-runs API reports it ("app_id": 15368,
# "app_name": "GitHub Actions", recorded in Mergifyio/mergify-engine's check-run fixtures).
ACTIONS_APP_ID = 15368


def workflow(file: str) -> str:
    return f".github/workflows/{file}"

