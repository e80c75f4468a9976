"""The repository's side of the trust: environments, the protection of main, Actions variables and settings."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_github as github

from bootstrap.access import environments
from bootstrap.config import BootstrapConfig
from bootstrap.environments import ACTIONS_APP_ID, MAIN, REQUIRED_CHECKS
from bootstrap.workflow_scan import allowed_actions


@dataclass(frozen=True)
class GitHubRepositoryArgs:
    config: BootstrapConfig
    variables: dict[str, pulumi.Input[str]]  # the repository's Actions variables the workflows read
    # An environment's own variables (deploy-<stack>: its deploy identity's email), by environment name.
    environment_variables: dict[str, dict[str, pulumi.Input[str]]] = field(default_factory=dict)


class GitHubRepository(pulumi.ComponentResource):
    """The repository's side of the trust, as code: the environments every cloud job runs in,
    the protection of main, and the Actions variables (none is a secret; there are no secrets)."""

    environments: dict[str, github.RepositoryEnvironment]
    protection: github.BranchProtection
    checks: github.RepositoryRuleset

    def __init__(self, name: str, args: GitHubRepositoryArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:GitHubRepository", name, None, opts)
        c = args.config
        provider = github.Provider(f"{name}-provider", github.ProviderArgs(owner=c.owner),
                                   opts=pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        invoke = pulumi.InvokeOutputOptions(parent=self, provider=provider)
        teams = {t: github.get_team_output(slug=t, summary_only=True, opts=invoke).id.apply(int)
                 for t in dict.fromkeys([*c.reviewer_teams, *(x for t, _ in c.stack_reviewers.values() for x in t)])}
        users = {u: github.get_user_output(username=u, opts=invoke).id.apply(int)
                 for u in dict.fromkeys([*c.reviewer_users, *(x for _, u in c.stack_reviewers.values() for x in u)])}
        self.environments = {}
        for env in environments(c):
            env_teams, env_users = c.reviewers(env) if env.reviewed else ((), ())
            reviewers = github.RepositoryEnvironmentReviewerArgs(teams=[teams[t] for t in env_teams],
                                                                 users=[users[u] for u in env_users])
            # docs.github.com/en/actions/reference/workflows-and-actions/deployments-and-environments
            self.environments[env.name] = github.RepositoryEnvironment(
                f"{name}-env-{env.name}",
                github.RepositoryEnvironmentArgs(
                    repository=c.repository_name,
                    environment=env.name,
                    reviewers=[reviewers] if env.reviewed else None,
                    prevent_self_review=env.reviewed,
                    can_admins_bypass=False,
                    deployment_branch_policy=github.RepositoryEnvironmentDeploymentBranchPolicyArgs(
                        protected_branches=False, custom_branch_policies=True) if env.main_only else None,
                ),
                opts=child,
            )
            if env.main_only:
                github.RepositoryEnvironmentDeploymentPolicy(
                    f"{name}-env-{env.name}-main",
                    github.RepositoryEnvironmentDeploymentPolicyArgs(
                        repository=c.repository_name, environment=env.name, branch_pattern=MAIN),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                                depends_on=[self.environments[env.name]]),
                )
        self.protection = github.BranchProtection(
            f"{name}-main",
            github.BranchProtectionArgs(
                repository_id=c.repository_name,
                pattern=MAIN,
                enforce_admins=True,
                allows_force_pushes=False,
                allows_deletions=False,
                require_conversation_resolution=True,
                # The required checks are the ruleset's below: the classic protection's `contexts` cannot name
                # the app a check must come from (pulumi-github BranchProtectionRequiredStatusCheck: strict and
                # contexts only), so a status any writer posts under a check's name would satisfy it.
                required_pull_request_reviews=[github.BranchProtectionRequiredPullRequestReviewArgs(
                    required_approving_review_count=1,
                    dismiss_stale_reviews=True,
                    require_last_push_approval=True,
                    require_code_owner_reviews=True,  # .github/CODEOWNERS: the reviewers own the trust paths
                )],
            ),
            opts=child,
        )
        # Rulesets and branch protection layer: both apply to main ("rulesets work alongside any branch
        # protection rules", docs.github.com/en/repositories/configuring-branches-and-merges-in-your-repository/
        # managing-rulesets/about-rulesets). Each required check is bound to GitHub Actions (ACTIONS_APP_ID).
        self.checks = github.RepositoryRuleset(
            f"{name}-main-checks",
            github.RepositoryRulesetArgs(
                repository=c.repository_name,
                name="main-required-checks",
                target="branch",
                enforcement="active",
                bypass_actors=[],
                conditions=github.RepositoryRulesetConditionsArgs(ref_name=github.RepositoryRulesetConditionsRefNameArgs(
                    includes=[f"refs/heads/{MAIN}"], excludes=[])),
                rules=github.RepositoryRulesetRulesArgs(
                    required_status_checks=github.RepositoryRulesetRulesRequiredStatusChecksArgs(
                        strict_required_status_checks_policy=True,
                        required_checks=[github.RepositoryRulesetRulesRequiredStatusChecksRequiredCheckArgs(
                            context=check, integration_id=ACTIONS_APP_ID) for check in REQUIRED_CHECKS])),
            ),
            opts=child,
        )
        # Actions: the workflows' token reads by default (each job asks for more) and never approves a pull
        # request (docs.github.com/en/rest/actions/permissions: default_workflow_permissions,
        # can_approve_pull_request_reviews); only the actions the workflows pin, by SHA, may run.
        github.WorkflowRepositoryPermissions(
            f"{name}-workflow-permissions",
            github.WorkflowRepositoryPermissionsArgs(repository=c.repository_name, default_workflow_permissions="read",
                                                     can_approve_pull_request_reviews=False),
            opts=child,
        )
        github.ActionsRepositoryPermissions(
            f"{name}-actions-permissions",
            github.ActionsRepositoryPermissionsArgs(
                repository=c.repository_name, enabled=True, allowed_actions="selected", sha_pinning_required=True,
                allowed_actions_config=github.ActionsRepositoryPermissionsAllowedActionsConfigArgs(
                    github_owned_allowed=False, verified_allowed=False, patterns_alloweds=list(allowed_actions()))),
            opts=child,
        )
        # GitHub's default `sub` (repo:<owner>/<name>:environment:<env> | :ref:<ref> | :pull_request), which the
        # pool's principals are written against: pinned, so an organization or repository customization cannot
        # change what the principals match (docs.github.com/en/actions/reference/security/oidc).
        github.ActionsRepositoryOidcSubjectClaimCustomizationTemplate(
            f"{name}-oidc-subject",
            github.ActionsRepositoryOidcSubjectClaimCustomizationTemplateArgs(repository=c.repository_name,
                                                                             use_default=True),
            opts=child,
        )
        for var, value in args.variables.items():
            github.ActionsVariable(
                f"{name}-var-{var.lower().replace('_', '-')}",
                github.ActionsVariableArgs(repository=c.repository_name, variable_name=var, value=value),
                opts=child,
            )
        for env_name, variables in args.environment_variables.items():
            for var, value in variables.items():
                github.ActionsEnvironmentVariable(
                    f"{name}-env-{env_name}-var-{var.lower().replace('_', '-')}",
                    github.ActionsEnvironmentVariableArgs(repository=c.repository_name, environment=env_name,
                                                          variable_name=var, value=value),
                    opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                                depends_on=[self.environments[env_name]]),
                )
        self.register_outputs({"environments": list(self.environments)})
