"""What a stack's project gets from the bootstrap (node and MultiKueue accounts, custom roles, keys, attestor)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from bootstrap.access import CUSTOM_ROLES, GKE_SECRETS_KEY_ROLE, IMAGE_SIGNING_ALGORITHM, SECRETS_KEY_ROTATION
from bootstrap.components.state import _keep
from bootstrap.config import BootstrapConfig, Stack
from infra.cluster import NODE_SA_ROLE
from stackspec import names


@dataclass(frozen=True)
class StackProjectArgs:
    config: BootstrapConfig
    stack: Stack
    custom_roles: tuple[str, ...]  # CUSTOM_ROLES ids granted in this project


class StackProject(pulumi.ComponentResource):
    """What a stack's project gets from the bootstrap: the node service account with its one role,
    a multi-region stack's MultiKueue token account with its cluster viewer role, and the custom roles
    the CI identities hold there. The stack looks the accounts up; no CI identity can create service
    accounts or change the project's IAM policy."""

    node_account: gcp.serviceaccount.Account
    # A multi-region stack's region clusters' node accounts (its manager's is ``node_account``), by cluster name.
    region_node_accounts: dict[str, gcp.serviceaccount.Account]
    multikueue_account: gcp.serviceaccount.Account | None
    roles: dict[str, gcp.projects.IAMCustomRole]
    secrets_key: gcp.kms.CryptoKey
    signing_key: gcp.kms.CryptoKey
    note: gcp.containeranalysis.Note
    attestor: gcp.binaryauthorization.Attestor

    def __init__(self, name: str, args: StackProjectArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:bootstrap:StackProject", name, None, opts)
        s = args.stack
        child = pulumi.ResourceOptions(parent=self)
        self.node_account = gcp.serviceaccount.Account(
            f"{name}-nodes",
            gcp.serviceaccount.AccountArgs(account_id=s.node_account_id, project=s.project,
                                           display_name=f"GKE nodes of {s.cluster} (stack {s.name})"),
            opts=child,
        )
        member = self.node_account.email.apply(lambda e: f"serviceAccount:{e}")
        for role in s.node_roles:
            gcp.projects.IAMMember(
                f"{name}-nodes-role" if role == NODE_SA_ROLE else f"{name}-nodes-{role.split('.')[-1].lower()}",
                gcp.projects.IAMMemberArgs(project=s.project, role=role, member=member),
                opts=child,
            )
        # A multi-region stack's MultiKueue token job runs as this account (workload identity, which the stack binds
        # once the manager's cluster exists) and needs roles/container.clusterViewer on the workers' projects
        # (workloads/multikueue.py WORKER_PROJECT_ROLE); made here so the deploy identity grants no project role.
        self.multikueue_account = None
        if s.multikueue_account is not None:
            self.multikueue_account = gcp.serviceaccount.Account(
                f"{name}-multikueue",
                gcp.serviceaccount.AccountArgs(
                    account_id=s.multikueue_account, project=s.project,
                    display_name=f"MultiKueue token minter of {s.cluster} (stack {s.name}, one-hour worker tokens)"),
                opts=child,
            )
            mk_member = self.multikueue_account.email.apply(lambda e: f"serviceAccount:{e}")
            for project, role in s.multikueue_grants:
                gcp.projects.IAMMember(
                    f"{name}-multikueue-{project}-{role.split('.')[-1].lower()}",
                    gcp.projects.IAMMemberArgs(project=project, role=role, member=mk_member),
                    opts=child,
                )
        self.roles = {
            rid: gcp.projects.IAMCustomRole(
                f"{name}-{rid}",
                gcp.projects.IAMCustomRoleArgs(
                    project=s.project, role_id=rid, title=CUSTOM_ROLES[rid].title,
                    description=f"Replaces {CUSTOM_ROLES[rid].replaces} for the CI identities (bootstrap/)",
                    permissions=list(CUSTOM_ROLES[rid].permissions), stage="GA",
                ),
                opts=child,
            )
            for rid in args.custom_roles
        }
        # The cluster's Secrets key, in its region, and GKE's service agent on it: made here so the deploy identity
        # needs no Cloud KMS admin; the stack names it (stackspec.names.secrets_key_id).
        ring = gcp.kms.KeyRing(
            f"{name}-gke-ring",
            gcp.kms.KeyRingArgs(name=names.secrets_key_ring(s.cluster), location=s.region, project=s.project),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        self.secrets_key = gcp.kms.CryptoKey(
            f"{name}-gke-secrets",
            gcp.kms.CryptoKeyArgs(name=names.secrets_key(s.cluster), key_ring=ring.id, purpose="ENCRYPT_DECRYPT",
                                  rotation_period=SECRETS_KEY_ROTATION),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        # The agent exists once the Kubernetes Engine API is on; ServiceIdentity makes sure and names it.
        agent = gcp.projects.ServiceIdentity(
            f"{name}-gke-agent",
            gcp.projects.ServiceIdentityArgs(project=s.project, service="container.googleapis.com"),
            opts=child,
        )
        number = gcp.organizations.get_project_output(project_id=s.project).number
        gcp.kms.CryptoKeyIAMMember(
            f"{name}-gke-secrets-agent",
            gcp.kms.CryptoKeyIAMMemberArgs(
                crypto_key_id=self.secrets_key.id, role=GKE_SECRETS_KEY_ROLE,
                member=number.apply(lambda n: f"serviceAccount:{names.gke_service_agent(n)}")),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[agent]),
        )
        # The worker image's signing key (beside the Secrets key), the attestor's note and the attestor holding the
        # key's public half: Binary Authorization admits the workers' image only with its attestation, which only
        # ci-image can make (its grants, above). Made here so no deploy identity holds an attestor or a key role.
        self.signing_key = gcp.kms.CryptoKey(
            f"{name}-image-signer",
            gcp.kms.CryptoKeyArgs(
                name=names.image_signing_key(s.cluster), key_ring=ring.id, purpose="ASYMMETRIC_SIGN",
                version_template=gcp.kms.CryptoKeyVersionTemplateArgs(algorithm=IMAGE_SIGNING_ALGORITHM)),
            opts=pulumi.ResourceOptions(**_keep(self)),
        )
        self.note = gcp.containeranalysis.Note(
            f"{name}-image-note",
            gcp.containeranalysis.NoteArgs(
                name=names.image_attestor(s.cluster), project=s.project,
                attestation_authority=gcp.containeranalysis.NoteAttestationAuthorityArgs(
                    hint=gcp.containeranalysis.NoteAttestationAuthorityHintArgs(
                        human_readable_name=f"worker image of {s.cluster}, signed by image.yml (ci-image)"))),
            opts=child,
        )
        version = gcp.kms.get_kms_crypto_key_version_output(crypto_key=self.signing_key.id,
                                                            version=names.IMAGE_SIGNING_KEY_VERSION)
        self.attestor = gcp.binaryauthorization.Attestor(
            f"{name}-image-attestor",
            gcp.binaryauthorization.AttestorArgs(
                name=names.image_attestor(s.cluster), project=s.project,
                attestation_authority_note=gcp.binaryauthorization.AttestorAttestationAuthorityNoteArgs(
                    note_reference=self.note.name,
                    public_keys=[gcp.binaryauthorization.AttestorAttestationAuthorityNotePublicKeyArgs(
                        # Binary Authorization names a Cloud KMS public key "//cloudkms.googleapis.com/v1/" + the key
                        # version's resource name, which is what gcloud's sign-and-create writes as the attestation's
                        # publicKeyId (googlecloudsdk/api_lib/container/binauthz/kms.py GetKeyUri: the version's
                        # SelfLink after "https:"). The data source's id is already that string
                        # (terraform-provider-google google/services/kms/data_source_google_kms_crypto_key_version.go:
                        # d.SetId(fmt.Sprintf("//cloudkms.googleapis.com/v1/%s/cryptoKeyVersions/%d", crypto_key,
                        # version))): used as it is (cloud rule binauthz-kms-key-id; tests/test_attestation.py).
                        id=version.id,
                        pkix_public_key=gcp.binaryauthorization.AttestorAttestationAuthorityNotePublicKeyPkixPublicKeyArgs(
                            public_key_pem=version.public_keys[0].pem,
                            signature_algorithm=version.public_keys[0].algorithm))])),
            opts=child,
        )
        # A multi-region stack's region clusters: the same node account, roles and Secrets key each.
        self.region_node_accounts = {}
        for cluster, region in s.extra_clusters:
            n = f"{name}-{cluster}"
            account = gcp.serviceaccount.Account(
                f"{n}-nodes",
                gcp.serviceaccount.AccountArgs(account_id=names.node_service_account_id(cluster), project=s.project,
                                               display_name=f"GKE nodes of {cluster} (stack {s.name})"),
                opts=child,
            )
            self.region_node_accounts[cluster] = account
            for role in s.node_roles:
                gcp.projects.IAMMember(
                    f"{n}-nodes-{role.split('.')[-1].lower()}",
                    gcp.projects.IAMMemberArgs(project=s.project, role=role,
                                               member=account.email.apply(lambda e: f"serviceAccount:{e}")),
                    opts=child,
                )
            ring_ = gcp.kms.KeyRing(
                f"{n}-gke-ring",
                gcp.kms.KeyRingArgs(name=names.secrets_key_ring(cluster), location=region, project=s.project),
                opts=pulumi.ResourceOptions(**_keep(self)),
            )
            key = gcp.kms.CryptoKey(
                f"{n}-gke-secrets",
                gcp.kms.CryptoKeyArgs(name=names.secrets_key(cluster), key_ring=ring_.id, purpose="ENCRYPT_DECRYPT",
                                      rotation_period=SECRETS_KEY_ROTATION),
                opts=pulumi.ResourceOptions(**_keep(self)),
            )
            gcp.kms.CryptoKeyIAMMember(
                f"{n}-gke-secrets-agent",
                gcp.kms.CryptoKeyIAMMemberArgs(
                    crypto_key_id=key.id, role=GKE_SECRETS_KEY_ROLE,
                    member=number.apply(lambda n_: f"serviceAccount:{names.gke_service_agent(n_)}")),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[agent]),
            )
        self.register_outputs({"nodeAccount": self.node_account.email, "secretsKey": self.secrets_key.id,
                               "attestor": self.attestor.name,
                               "multikueueAccount": self.multikueue_account and self.multikueue_account.email})

