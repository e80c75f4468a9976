"""Unverified paths opted into, prod's hardening, and the safety of where a stack's identities and secrets live."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import names
from ..errors import MISSING
from ..gke import PROD_RELEASE_CHANNELS
from ..model.types import _ns
from ..model.workloads import DEFAULT_RAY_IMAGE
from . import gcp

if TYPE_CHECKING:
    from ..model.stack import StackSpec


def protection(spec: StackSpec, fail) -> None:
    """Prod keeps its cluster and its checkpoints protected from deletion (both on by default there)."""
    if spec.prod and not spec.cluster.deletion_protection:
        fail(_ns("cluster.deletionProtection"), False, "a production cluster keeps deletion protection on")
    if spec.prod and not spec.storage.protected:
        fail(_ns("storage.protected"), False, "production checkpoints must be protected from deletion")


def unverified(spec: StackSpec, fail) -> None:
    if spec.ray.auth == "token" and not spec.unverified.ray_token_auth:
        fail(_ns("ray.auth"), "token", "GKE does not publish the KubeRay version of its Ray add-on, and one older "
             "than 1.5.1 drops authOptions silently (cloud rule gke-ray-addon-kuberay-version): opt in with "
             f"{_ns('unverified.rayTokenAuth')}: true (the preview lists it as unverified), or leave auth disabled "
             "as the seed does")


    if spec.unverified.warm_spares and not spec.prebuilt_image:
        fail(_ns("unverified.warmSpares"), True, "warm spares need the stack's own worker image (an image section "
             "with its digest): a worker that installs MaxText at start has a runtime env no idle process matches")


def hardening(spec: StackSpec, fail) -> None:
    """Prod keeps the cluster hardening on (dev may turn it off; the policies warn there)."""
    if not spec.prod:
        return
    c, key = spec.cluster, _ns("cluster")
    if c.release_channel not in PROD_RELEASE_CHANNELS:
        fail(f"{key}.releaseChannel", c.release_channel, "prod enrols in a release channel with GKE's SLA; "
             f"allowed: {', '.join(PROD_RELEASE_CHANNELS)}")
    if not c.private_nodes:
        fail(f"{key}.privateNodes", False, "prod nodes have no external IPs (egress goes through Cloud NAT)")
    if not c.shielded_nodes:
        fail(f"{key}.shieldedNodes", False, "prod keeps Shielded GKE Nodes on")
    for i, n in enumerate(c.control_plane.authorized_networks):
        if n.public:
            fail(f"{key}.controlPlane.authorizedNetworks[{i}].cidr", n.cidr,
                 "prod keeps the control plane's public endpoint off"
                 + (" and never opens it to the internet" if n.cidr.endswith("/0") else "")
                 + ": use access: dns (IAM) or private ranges")


def check(spec: StackSpec, fail, stack_file: bool = False) -> None:
    if spec.ci_project == spec.project:
        fail(_ns("ciProject"), spec.ci_project, "the CI identities and their federation live in a project of their "
             "own (bootstrap/), never in a stack's project: a stack's deploy must not reach them")
    if not spec.prod:
        return
    image = spec.ray.image
    if image.endswith((":latest", ":nightly")) or ":nightly-" in image or (":" not in image and "@" not in image):
        fail(_ns("ray.image"), image, f"prod pins a released image (e.g. {DEFAULT_RAY_IMAGE}) or a digest, "
             "not latest or nightly")
    if spec.storage.namespace == "default":
        fail(_ns("storage.namespace"), "default", "prod runs its workloads in a namespace of their own (anyone who "
             f"may create a pod in default could run as the checkpoint KSA): e.g. {names.DEFAULT_NAMESPACE}, "
             "which the stack creates with Pod Security labels")
    kms = "pulumi stack change-secrets-provider gcpkms://projects/P/locations/L/keyRings/R/cryptoKeys/K"
    if spec.encryption_salt is not None:
        fail("encryptionsalt", "(passphrase)", f"prod stacks keep secrets with Cloud KMS, not a passphrase: {kms}")
    elif spec.secrets_provider is None and stack_file:
        # Without one Pulumi falls back to its service backend's key or a passphrase; neither is the stack's key.
        fail("secretsprovider", MISSING, f"prod stacks keep secrets with their own Cloud KMS key (made by "
             f"bootstrap/): {kms}")
    elif spec.secrets_provider is not None and not spec.secrets_provider.startswith("gcpkms://"):
        fail("secretsprovider", spec.secrets_provider, "prod stacks keep secrets with Cloud KMS: gcpkms://...")
    elif spec.secrets_provider is not None and (msg := gcp.kms_key_path(spec.secrets_provider)):
        fail("secretsprovider", spec.secrets_provider, msg)
