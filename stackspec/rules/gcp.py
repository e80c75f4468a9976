"""GCP's rules on a stack across its sections (Compute Engine, Cloud Storage, Cloud KMS, IAM, Artifact Registry),
each with its source quoted beside it. A rule calls ``fail(key, value, message)`` for each problem; ``message`` says
what GCP allows. The format of a single value (a name, an image reference) is checked beside its field
(:mod:`stackspec.limits`); GKE's own rules are in :mod:`stackspec.rules.gke`.
"""

from __future__ import annotations

import re
from typing import Any

from .. import limits, machines, names, zones
from .. import regions as places
from ..model.types import _ns

# --------------------------------------------------------------------------- Cloud KMS key paths

# terraform-provider-google google/services/kms/kms_utils.go:186 (the provider's parse of a key's path):
# "^projects/(<project>)/locations/([a-z0-9-]+)/keyRings/([a-zA-Z0-9_-]{1,63})/cryptoKeys/([a-zA-Z0-9_-]{1,63})$";
# Pulumi's gcpkms:// secrets provider takes that path after its scheme.
_KMS_KEY = re.compile(r"projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/locations/(?P<location>[a-z0-9-]+)"
                      r"/keyRings/[a-zA-Z0-9_-]{1,63}/cryptoKeys/[a-zA-Z0-9_-]{1,63}")


def kms_key_path(value: str) -> str | None:
    """A Cloud KMS key path, ``projects/P/locations/L/keyRings/R/cryptoKeys/K`` (``gcpkms://`` stripped)."""
    path = value.removeprefix("gcpkms://")
    if not _KMS_KEY.fullmatch(path):
        return ("not a Cloud KMS key: gcpkms://projects/<project>/locations/<location>/keyRings/<ring>/cryptoKeys/"
                "<key>, a project ID of 6-30 characters, a lowercase location (global, a region, a multi-region), "
                "ring and key IDs of 1-63 letters, digits, '_' and '-'")
    return None


# --------------------------------------------------------------------------- the checkpoint bucket's location

# https://cloud.google.com/storage/docs/locations: a bucket's location is a region, a dual-region (a predefined code
# such as NAM4, or a configurable one: a code with two dataLocations) or a multi-region (US, EU, ASIA); a zone is none
# of these. A multi-region stack names a place holding every region (rules/regions.py); a single-region one's bucket
# holds the cluster's region: the workers read and write every checkpoint through GCS FUSE, and a bucket elsewhere
# charges each GB crossing and stops the job when that other place is down.
def bucket_location(spec: Any, fail) -> None:
    st, region = spec.storage, spec.region
    key = _ns("storage.location")
    holding = [region, *(p.location for p in places.bucket_places([region]))]
    if zones.ZONE.fullmatch(st.location):
        fail(key, st.location, f"a zone is not a Cloud Storage location; allowed: {', '.join(holding)}")
        return
    place = places.place_of(st.location, st.data_locations)
    if place.kind == "region":
        if not limits.REGION.fullmatch(place.location):
            fail(key, st.location, "not a Cloud Storage location: a region (us-east5), a dual-region (NAM4) or a "
                 f"multi-region (US, EU, ASIA); allowed here: {', '.join(holding)}")
        elif place.location != region:
            fail(key, st.location, f"the cluster runs in {region}: its checkpoints go to a bucket holding that region "
                 f"(GCS FUSE reads and writes each one); allowed: {', '.join(holding)}")
    elif not place.contains(region):
        fail(key, st.location, f"{place.describe()} does not hold the cluster's region {region}; allowed: "
             f"{', '.join(holding)}")


# --------------------------------------------------------------------------- the worker image's pusher

def image_pusher(spec: Any, fail) -> None:
    """The worker image's pusher is not another stack's image identity: the bootstrap lets each
    ci-image-<stack> sign with its own stack's key only (bootstrap/access.py image_identity), so an image another
    stack's identity pushes here carries no attestation this stack's Binary Authorization policy admits, and the
    repository's authoritative policy (infra/registry.py) would grant another stack's identity in this project."""
    image = spec.image
    if image is None or image.pusher is None or spec.ci_project is None:
        return
    own = names.image_account_email(spec.stack, spec.ci_project)
    prefix, suffix = f"{names.CI_ACCOUNTS['image']}-", f"@{spec.ci_project}.iam.gserviceaccount.com"
    if image.pusher != own and image.pusher.startswith(prefix) and image.pusher.endswith(suffix):
        other = image.pusher.removeprefix(prefix).removesuffix(suffix)
        fail(_ns("image.pusher"), image.pusher, f"the image identity of stack {other}, not of this one: it signs "
             f"with {other}'s key only, so this stack's attestor never admits what it pushes; drop the key (the "
             f"default is {own})")


# --------------------------------------------------------------------------- a trainer image under Binary Authorization

def trainer_images(spec: Any, fail) -> None:
    """Under blocking Binary Authorization (unverified.binaryAuthorizationEnforce), a job's own trainer image lives in
    the stack's Artifact Registry repository: the project's policy admits everything else only through the stack's
    attestor (infra/cluster_security.py default_rule: REQUIRE_ATTESTATION, or ALWAYS_DENY without an image section;
    "There is at most one policy per project", https://cloud.google.com/binary-authorization/docs/key-concepts), and
    the attestor's key signs only what image.yml pushed to that repository, so an image elsewhere is never admitted
    and the job's pods are refused at admission."""
    if not spec.unverified.binary_authorization_enforce:
        return
    repository = (names.repository_path(spec.image.location or spec.region, spec.project, spec.image.repository)
                  if spec.image is not None else None)
    for i, j in enumerate(spec.jobs):
        image = j.trainer.image if j.trainer is not None else None
        if image is None or (repository is not None and image.startswith(repository + "/")):
            continue
        where = (f"the stack's repository {repository}/" if repository else
                 "an image section's repository (without one the policy denies every image)")
        fail(_ns(f"jobs[{i}].trainer.image"), image, f"Binary Authorization blocks (unverified."
             f"binaryAuthorizationEnforce) every image its attestor did not sign, and it signs only what image.yml "
             f"pushes to {where}: push the trainer's image there, or leave blocking off")


# --------------------------------------------------------------------------- network interfaces per TPU host

# https://cloud.google.com/compute/docs/create-use-multiple-interfaces (Requirements): "Each instance must have at
# least one network interface. The maximum number of network interfaces per instance is 8, depending on the
# instance's machine type." and https://cloud.google.com/vpc/docs/multiple-interfaces-concepts (Specifications):
# "Every instance has a nic0 interface. The maximum number of network interfaces varies depending on the instance's
# machine type." (its table: one per vCPU, at least 2, at most 8). A TPU host's nic0 is the cluster's subnet
# (network.primary); each secondary (DCN) network adds one NIC on every host of every slice.
MAX_NICS = 8
MIN_MAX_NICS = 2


def max_nics(vcpus: int) -> int:
    return min(MAX_NICS, max(MIN_MAX_NICS, vcpus))


def nics(spec: Any, fail) -> None:
    """The primary network plus the secondary ones against each slice's machine type's NIC limit."""
    wanted = 1 + len(spec.networks)
    reported: set[str] = set()
    for s in spec.slices or ():
        machine = machines.MACHINES.get(s.shape.machine_type.name)
        if machine is None:  # a machine type the vCPU table does not list is not checked here
            continue
        limit = max_nics(machine.vcpus)
        if wanted > limit and machine.name not in reported:
            reported.add(machine.name)
            fail(_ns("network.secondary"), [n.subnet for n in spec.networks],
                 f"{wanted} network interfaces per host (nic0 on the primary network and one per secondary "
                 f"network); Compute Engine gives {machine.name} ({machine.vcpus} vCPU) at most {limit}: list at "
                 f"most {limit - 1} secondary networks")
