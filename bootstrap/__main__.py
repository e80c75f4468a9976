"""The bootstrap program: run once (and after a stack's project or cluster changes) by an administrator
of the CI project, the stack projects and the GitHub repository (see the README's set-up section).

In the CI project (``ciProject``): the bootstrap's own state bucket and key, the stacks' state
bucket and one Cloud KMS key per stack, a workload identity pool admitting only this repository's
GitHub Actions tokens, and the CI service accounts with the grants of ``bootstrap.access``. In each
stack's project: the node service account, a multi-region stack's MultiKueue token account and
the custom roles. In the repository: the environments, the protection of main and the Actions variables.
"""

import pulumi
import pulumi_gcp as gcp

from bootstrap import access as ci
from bootstrap import components as c
from bootstrap.config import NAMESPACE, ConfigError, read_config

try:
    config = read_config(pulumi.Config(NAMESPACE), pulumi.Config("gcp"))
except ConfigError as err:
    raise pulumi.RunError("invalid bootstrap config:\n" + "\n".join(f"  {p}" for p in err.problems)) from None

stack_projects = list(dict.fromkeys(s.project for s in config.stacks))
services = []
for project in [config.ci_project, *stack_projects]:
    for api in ci.HOME_SERVICES if project == config.ci_project else ci.STACK_SERVICES:
        services.append(gcp.projects.Service(
            f"{project}-{api.split('.')[0]}",
            gcp.projects.ServiceArgs(project=project, service=api, disable_on_destroy=False),
        ))
after_services = pulumi.ResourceOptions(depends_on=services)

backend = c.StateBackend("backend", c.StateBackendArgs(config), after_services)
federation = c.GitHubFederation("github", c.GitHubFederationArgs(config), after_services)
identities_ = ci.identities(config)  # per stack: ci-preview, ci-deploy when it deploys, ci-drill, ci-image
# The custom roles each stack's project needs: those its grants name.
wanted: dict[str, set[str]] = {s.name: set() for s in config.stacks}
for ident in identities_:
    for grant in ident.grants:
        if grant.role.startswith(ci.CUSTOM):
            for s in ci.stacks_of(config, grant.of):
                wanted[s.name].add(grant.role.removeprefix(ci.CUSTOM))
projects = {
    s.name: c.StackProject(s.name, c.StackProjectArgs(config, s, tuple(sorted(wanted[s.name]))), after_services)
    for s in config.stacks
}
identities = {
    ident.key: c.CiIdentity(ident.key, c.CiIdentityArgs(config, ident, federation, backend, projects),
                             after_services)
    for ident in identities_
}

# The repository's Actions variables (set below, in GitHub) are these outputs; a deploy identity's email is a
# variable of its own environment (deploy-<stack>), so deploy.yml's one expression names each stack's identity.
variables = {
    "GCP_WORKLOAD_IDENTITY_PROVIDER": federation.provider.name,
    **{ident.variable: identities[ident.key].account.email for ident in identities_ if not ident.environments},
    "PULUMI_STATE_BUCKET": backend.bucket.name,
}
environment_variables: dict[str, dict] = {}
for ident in identities_:
    for env in ident.environments:
        environment_variables.setdefault(env, {})[ident.variable] = identities[ident.key].account.email
c.GitHubRepository("repository", c.GitHubRepositoryArgs(config, variables, environment_variables))
for name, value in variables.items():
    pulumi.export(name, value)
pulumi.export("environmentVariables", environment_variables)
# What each stack needs: its stack file's `secretsprovider`, and the node service account the
# stack program runs its nodes as (it looks the account up, never creates it).
pulumi.export("secretsproviders", {s.name: config.secrets_provider(s.name) for s in config.stacks})
pulumi.export("nodeServiceAccounts", {name: p.node_account.email for name, p in projects.items()})
# A multi-region stack's MultiKueue token account: the stack binds its token job's Kubernetes service account to it.
pulumi.export("multikueueServiceAccounts", {name: p.multikueue_account.email for name, p in projects.items()
                                            if p.multikueue_account is not None})
pulumi.export("bootstrapStateBucket", backend.bootstrap_bucket.name)
