"""Checks of the stack spec the reviews found missing, each a small function with its source, called from the
model by one-line hooks (``stackspec/model``). A check returns None when the value is fine, else a message saying
what is allowed; the model raises it at the key it names, so ``slicectl lint`` and ``preview`` give one answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from . import limits


def queued_provisioning_alone(capacity: Sequence[Any]) -> str | None:
    """Queued provisioning (DWS) only as a slice's one capacity option.

    Kueue admits a workload on a flavor gated by a ProvisioningRequest check only once the request is provisioned,
    and the check's ProvisioningRequestConfig pins the pods to the provisioned nodes (``podSetUpdates.nodeSelector``
    ``autoscaling.gke.io/provisioning-request``, kueue v0.19.2 ``apis/kueue/v1beta2/provisioningrequestconfig_types.go``
    "podSetUpdates specifies the update of the workload's PodSetUpdates which are used to target the provisioned
    nodes"); a pool with queued provisioning grows only through ProvisioningRequests (terraform-provider-google
    ``resource_container_node_pool.go``: "obtainable solely through the ProvisioningRequest API"). The slices of a
    worker group share one flavor, so other options beside it would never be used: every job of the group would
    wait for DWS."""
    queued = [c for c in capacity if getattr(c, "queued_provisioning", False)]
    if queued and len(capacity) > 1:
        others = [c.type for c in capacity if not getattr(c, "queued_provisioning", False)]
        return (f"queuedProvisioning is the slice's only way to capacity: Kueue's DWS check gates the worker group's "
                f"flavor and pins its pods to the provisioned nodes, so the other options {others} would never be "
                "used; list flex-start with queuedProvisioning alone, or drop queuedProvisioning")
    return None


# --------------------------------------------------------------------------- Compute Engine names

# terraform-provider-google resource_compute_reservation.go:140-146 (the Compute API's Reservation.name): "The name
# must be 1-63 characters long, and comply with RFC1035. Specifically, the name must be 1-63 characters long and
# match the regular expression '[a-z]([-a-z0-9]*[a-z0-9])?'".
_GCE_NAME = limits._RFC1035  # the same RFC 1035 label


def gce_name(kind: str, value: str) -> str | None:
    """A Compute Engine resource name (a reservation's, a network's): RFC 1035, 1-63 characters."""
    if not 1 <= len(value) <= 63 or not _GCE_NAME.fullmatch(value):
        return (f"not a Compute Engine {kind} name: 1-63 lowercase letters, digits and '-', starting with a letter "
                f"and not ending with '-' (RFC 1035), this has {len(value)} characters")
    return None


def reservation_name(value: str) -> str | None:
    return gce_name("reservation", value)


# --------------------------------------------------------------------------- container image references

# The grammar every registry client parses an image reference with (github.com/distribution/reference
# @0965666a reference.go:1-25 and regexp.go): reference := name [":" tag] ["@" digest];
# name := [domain "/"] path-component ["/" path-component]*; path-component := [a-z0-9]+ (separator [a-z0-9]+)*;
# separator := [_.]|__|[-]+; domain := domain-component ("." domain-component)* [":" port];
# tag := [\w][\w.-]{0,127}; digest := algorithm ":" hex{32,}; a name is at most 255 characters
# (NameTotalLengthMax).
_ALNUM = r"[a-z0-9]+"
_PATH_COMPONENT = _ALNUM + r"(?:(?:[._]|__|[-]+)" + _ALNUM + r")*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = _DOMAIN_COMPONENT + r"(?:\." + _DOMAIN_COMPONENT + r")*(?::[0-9]+)?"
_NAME = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?::(?P<tag>[\w][\w.-]{{0,127}}))?"
                        r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?")
NAME_TOTAL_LENGTH_MAX = 255


def image_reference(value: str) -> str | None:
    """An image reference a registry client parses (``registry/path/name:tag@sha256:...``)."""
    m = _REFERENCE.fullmatch(value)
    if m is None:
        return ("not an image reference: [registry/]path[:tag][@sha256:digest], path components of lowercase "
                "letters and digits joined by '.', '_', '__' or '-', a tag of up to 128 letters, digits, '_', '.' "
                "and '-' (github.com/distribution/reference grammar)")
    if len(m["name"]) > NAME_TOTAL_LENGTH_MAX:
        return f"an image name has at most {NAME_TOTAL_LENGTH_MAX} characters, this has {len(m['name'])}"
    return None


# --------------------------------------------------------------------------- Artifact Registry locations

# terraform-provider-google website/docs/r/artifact_registry_repository.html.markdown:821-823: "In addition to
# specific regions, special values for multi-region locations are `asia`, `europe`, and `us`."
ARTIFACT_REGISTRY_MULTI_REGIONS = ("asia", "europe", "us")
_REGION = limits.REGION


def artifact_registry_location(value: str) -> str | None:
    if value in ARTIFACT_REGISTRY_MULTI_REGIONS or _REGION.fullmatch(value):
        return None
    multi = ", ".join(ARTIFACT_REGISTRY_MULTI_REGIONS)
    return f"not an Artifact Registry location: a region such as us-east5, or a multi-region: {multi}"


# --------------------------------------------------------------------------- flex-start zones

# GKE "About GPU and TPU provisioning with flex-start provisioning mode"
# (https://cloud.google.com/kubernetes-engine/docs/concepts/provisioning-model, Requirements): "To run TPUs, use
# GKE version 1.33.0-gke.1712000 or later. Flex-start supports the following version and zones: [TPU v6e]
# asia-northeast1-b, us-east5-a, and us-east5-b. [TPU v5e] us-west4-a. [TPU v5p] us-east5-a. TPU v3 and v4 are not
# supported."
FLEX_START_TPU_ZONES = {
    "v6e": ("asia-northeast1-b", "us-east5-a", "us-east5-b"),
    "v5e": ("us-west4-a",),
    "v5p": ("us-east5-a",),
    "v4": (),
}


def flex_start_zone(generation: str, zone: str, capacity_types: Sequence[str]) -> str | None:
    """Flex-start capacity only where GKE offers it for the slice's TPU generation."""
    if "flex-start" not in capacity_types or generation not in FLEX_START_TPU_ZONES:
        return None
    offered = FLEX_START_TPU_ZONES[generation]
    if zone in offered:
        return None
    where = f"only in {', '.join(offered)}" if offered else "in no zone"
    return (f"GKE offers flex-start for TPU {generation} {where} (GKE flex-start provisioning-mode requirements), "
            f"not in gcp:zone {zone}; drop the flex-start option or move the stack")


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
