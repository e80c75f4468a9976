"""The bootstrap program: run once by a project administrator (see the README's set-up section).

Creates the Pulumi state bucket, the Cloud KMS key every stack's secrets use, a workload
identity pool admitting only this repository's GitHub Actions tokens, and the three CI
service accounts with the grants in ``ci_components`` (preview, deploy, drill).
"""

import sys
from pathlib import Path

import pulumi

# The project's packages (infra's node role, written once) when run from bootstrap/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ci_components as ci  # noqa: E402
import pulumi_gcp as gcp  # noqa: E402

try:
    config = ci.read_config(pulumi.Config(ci.NAMESPACE), pulumi.Config("gcp"))
except ci.ConfigError as err:
    raise pulumi.RunError("invalid bootstrap config:\n" + "\n".join(f"  {p}" for p in err.problems)) from None

services = []
for project in dict.fromkeys([config.project, *config.stack_projects]):
    wanted = ci.HOME_SERVICES if project == config.project else ()
    wanted = dict.fromkeys([*wanted, *(ci.STACK_SERVICES if project in config.stack_projects else ())])
    for api in wanted:
        services.append(gcp.projects.Service(
            f"{project}-{api.split('.')[0]}",
            gcp.projects.ServiceArgs(project=project, service=api, disable_on_destroy=False),
        ))
after_services = pulumi.ResourceOptions(depends_on=services)

backend = ci.StateBackend("backend", ci.StateBackendArgs(config), after_services)
federation = ci.GitHubFederation("github", ci.GitHubFederationArgs(config), after_services)
identities = {
    ident.key: ci.CiIdentity(ident.key, ci.CiIdentityArgs(config, ident, federation, backend), after_services)
    for ident in ci.IDENTITIES
}

# The values the repository's Actions variables take (README: set-up), and the stack files' key.
pulumi.export("GCP_WORKLOAD_IDENTITY_PROVIDER", federation.provider.name)
for key, identity in identities.items():
    pulumi.export(f"GCP_{key.upper()}_SERVICE_ACCOUNT", identity.account.email)
pulumi.export("PULUMI_STATE_BUCKET", backend.bucket.name)
pulumi.export("secretsprovider", config.secrets_provider)
