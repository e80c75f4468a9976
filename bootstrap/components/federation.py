"""The workload identity pool and its GitHub provider."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from bootstrap.access import ATTRIBUTE_MAPPING, GITHUB_ISSUER, attribute_condition
from bootstrap.config import BootstrapConfig


@dataclass(frozen=True)
class GitHubFederationArgs:
    config: BootstrapConfig


class GitHubFederation(pulumi.ComponentResource):
    """A workload identity pool admitting GitHub Actions tokens of one repository only."""

    pool: gcp.iam.WorkloadIdentityPool
    provider: gcp.iam.WorkloadIdentityPoolProvider

    def __init__(self, name: str, args: GitHubFederationArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:GitHubFederation", name, None, opts)
        c = args.config
        self.pool = gcp.iam.WorkloadIdentityPool(
            f"{name}-pool",
            gcp.iam.WorkloadIdentityPoolArgs(
                workload_identity_pool_id="github",
                project=c.ci_project,
                display_name="GitHub Actions",
                description=f"CI of {c.repository}",
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.provider = gcp.iam.WorkloadIdentityPoolProvider(
            f"{name}-provider",
            gcp.iam.WorkloadIdentityPoolProviderArgs(
                workload_identity_pool_id=self.pool.workload_identity_pool_id,
                workload_identity_pool_provider_id="github-actions",
                project=c.ci_project,
                display_name="GitHub Actions OIDC",
                attribute_mapping=ATTRIBUTE_MAPPING,
                attribute_condition=attribute_condition(c),
                oidc=gcp.iam.WorkloadIdentityPoolProviderOidcArgs(issuer_uri=GITHUB_ISSUER),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"provider": self.provider.name})

    def principal_set(self, attribute: str, value: str) -> pulumi.Output[str]:
        return self.pool.name.apply(lambda pool: f"principalSet://iam.googleapis.com/{pool}/attribute.{attribute}/{value}")

