"""One CI service account: its grants from the access model and who may act as it."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from bootstrap.access import (
    ATTESTOR,
    CUSTOM,
    EVERY,
    KEY,
    MULTIKUEUE_ACCOUNT,
    NODE_ACCOUNT,
    NOTE,
    PROJECT,
    SIGNING_KEY,
    STATE_BUCKET,
    WORKLOAD_IDENTITY_USER,
    Grant,
    Identity,
    stacks_of,
)
from bootstrap.components.federation import GitHubFederation
from bootstrap.components.stack_project import StackProject
from bootstrap.components.state import StateBackend
from bootstrap.config import BootstrapConfig, Stack
from stackspec import names


@dataclass(frozen=True)
class CiIdentityArgs:
    config: BootstrapConfig
    identity: Identity
    federation: GitHubFederation
    backend: StateBackend
    projects: dict[str, StackProject]  # by stack name


class CiIdentity(pulumi.ComponentResource):
    """One CI service account in the CI project: its grants from the role table, and who may act as it."""

    account: gcp.serviceaccount.Account

    def __init__(self, name: str, args: CiIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:CiIdentity", name, None, opts)
        c, ident = args.config, args.identity
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            gcp.serviceaccount.AccountArgs(
                account_id=ident.account_id, project=c.ci_project, display_name=ident.description
            ),
            opts=child,
        )
        member = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        for grant in ident.grants:
            slug = grant.role.removeprefix("roles/").removeprefix(CUSTOM).replace(".", "-")
            for s in stacks_of(c, grant.of):
                cond = _condition(grant, c, s)
                where = args.projects[s.name]
                if grant.on == PROJECT:
                    custom_role = where.roles.get(grant.role.removeprefix(CUSTOM))
                    gcp.projects.IAMMember(
                        f"{name}-{s.name}-{slug}",
                        gcp.projects.IAMMemberArgs(
                            project=s.project,
                            role=custom_role.name if custom_role else grant.role,
                            member=member,
                            condition=cond and gcp.projects.IAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                elif grant.on == NODE_ACCOUNT:
                    # Every pool the stack creates runs as its cluster's node account, and GKE checks that the caller
                    # may act as it (iam.serviceAccounts.actAs): a multi-region stack's region pools run as their
                    # region cluster's account, so the grant goes on each (the manager's keeps its name and URN).
                    accounts = [("", where.node_account)] + [
                        (f"{cluster}-", account) for cluster, account in where.region_node_accounts.items()]
                    for prefix, account in accounts:
                        gcp.serviceaccount.IAMMember(
                            f"{name}-{s.name}-{prefix}nodes-{slug}",
                            gcp.serviceaccount.IAMMemberArgs(
                                service_account_id=account.name, role=grant.role, member=member,
                                condition=cond and gcp.serviceaccount.IAMMemberConditionArgs(**cond),
                            ),
                            opts=child,
                        )
                elif grant.on == MULTIKUEUE_ACCOUNT:
                    if where.multikueue_account is None:
                        continue  # a single-region stack: no MultiKueue
                    gcp.serviceaccount.IAMMember(
                        f"{name}-{s.name}-multikueue-{slug}",
                        gcp.serviceaccount.IAMMemberArgs(
                            service_account_id=where.multikueue_account.name, role=grant.role, member=member,
                            condition=cond and gcp.serviceaccount.IAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                elif grant.on == STATE_BUCKET:
                    gcp.storage.BucketIAMMember(
                        f"{name}-state-{slug}" + ("" if grant.of == EVERY else f"-{s.name}"),
                        gcp.storage.BucketIAMMemberArgs(
                            bucket=args.backend.bucket.name, role=grant.role, member=member,
                            condition=cond and gcp.storage.BucketIAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                    if grant.of == EVERY:
                        break  # one bucket: one binding for every stack
                elif grant.on == SIGNING_KEY:
                    gcp.kms.CryptoKeyIAMMember(
                        f"{name}-{s.name}-signing-{slug}",
                        gcp.kms.CryptoKeyIAMMemberArgs(crypto_key_id=where.signing_key.id, role=grant.role,
                                                       member=member),
                        opts=child,
                    )
                elif grant.on == NOTE:
                    gcp.containeranalysis.NoteIamMember(
                        f"{name}-{s.name}-note-{slug}",
                        gcp.containeranalysis.NoteIamMemberArgs(project=s.project, note=where.note.name,
                                                                role=grant.role, member=member),
                        opts=child,
                    )
                elif grant.on == ATTESTOR:
                    gcp.binaryauthorization.AttestorIamMember(
                        f"{name}-{s.name}-attestor-{slug}",
                        gcp.binaryauthorization.AttestorIamMemberArgs(project=s.project, attestor=where.attestor.name,
                                                                      role=grant.role, member=member),
                        opts=child,
                    )
                elif grant.on == KEY:
                    gcp.kms.CryptoKeyIAMMember(
                        f"{name}-key-{s.name}-{slug}",
                        gcp.kms.CryptoKeyIAMMemberArgs(
                            crypto_key_id=args.backend.keys[s.name].id, role=grant.role, member=member,
                            condition=cond and gcp.kms.CryptoKeyIAMMemberConditionArgs(**cond),
                        ),
                        opts=child,
                    )
                else:
                    raise ValueError(f"{ident.key}: {grant.role} on {grant.on!r}: no such scope")
        for i, (attribute, template) in enumerate(ident.principals):
            gcp.serviceaccount.IAMMember(
                f"{name}-wif-{i}",
                gcp.serviceaccount.IAMMemberArgs(
                    service_account_id=self.account.name,
                    role=WORKLOAD_IDENTITY_USER,
                    member=args.federation.principal_set(attribute, template.format(repository=c.repository)),
                ),
                opts=child,
            )
        self.register_outputs({"email": self.account.email})


def _condition(grant: Grant, c: BootstrapConfig, s: Stack) -> dict | None:
    if grant.condition is None:
        return None
    cond = grant.condition
    return {"title": cond.title, "description": cond.description,
            "expression": cond.expression.format(state_bucket=c.state_bucket, project=names.PROJECT, stack=s.name)}

