"""The limits of the systems the stack deploys to on a value by itself: names, image references, registry
locations, address ranges, ports, quantities (the model checks each beside its field; rules across sections are
in stackspec/rules/).

Each check returns None when the value is fine, else a message saying what is allowed.
Sources: GCP resource naming (GKE clusters and node pools, Compute Engine networks,
IAM service accounts, Cloud Storage buckets), Kubernetes object names and label values
(k8s.io/apimachinery validation), KubeRay's name limits
(``ray-operator/controllers/ray/utils/constant.go``: RayCluster 53, RayJob 47 characters).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation


@dataclass(frozen=True)
class NameRule:
    kind: str  # what the name names, for the message
    min_len: int
    max_len: int
    pattern: re.Pattern[str]
    chars: str  # the allowed characters, in words

    def check(self, value: str) -> str | None:
        if not self.min_len <= len(value) <= self.max_len:
            return (f"a {self.kind} name has {self.min_len}-{self.max_len} characters, this has {len(value)}; "
                    f"allowed: {self.chars}")
        if not self.pattern.fullmatch(value):
            return f"not a valid {self.kind} name; allowed: {self.chars}, {self.min_len}-{self.max_len} characters"
        return None


_RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_RFC1035_WORDS = "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"

GKE_CLUSTER = NameRule("GKE cluster", 1, 40, _RFC1035, _RFC1035_WORDS)
GKE_NODE_POOL = NameRule("GKE node pool", 1, 40, _RFC1035, _RFC1035_WORDS)
COMPUTE_NETWORK = NameRule("VPC network", 1, 63, _RFC1035, _RFC1035_WORDS)
COMPUTE_FIREWALL = NameRule("firewall rule", 1, 63, _RFC1035, _RFC1035_WORDS)
COMPUTE_SUBNETWORK = NameRule("subnetwork", 1, 63, _RFC1035, _RFC1035_WORDS)
SERVICE_ACCOUNT_ID = NameRule("service account ID", 6, 30, _RFC1035, _RFC1035_WORDS)
K8S_NAMESPACE = NameRule("Kubernetes namespace", 1, 63, _DNS1123_LABEL,
                         "lowercase letters, digits and '-', starting and ending with a letter or digit")
K8S_SERVICE_ACCOUNT = NameRule("Kubernetes service account", 1, 63, _DNS1123_LABEL,
                               "lowercase letters, digits and '-', starting and ending with a letter or digit")
RAY_CLUSTER = NameRule("RayCluster", 1, 53, _RFC1035, _RFC1035_WORDS)
RAY_JOB = NameRule("RayJob", 1, 47, _RFC1035, _RFC1035_WORDS)
RAY_WORKER_GROUP = NameRule("Ray worker group", 1, 63, _DNS1123_LABEL,
                            "lowercase letters, digits and '-', starting and ending with a letter or digit")
CONFIG_MAP = NameRule("ConfigMap", 1, 253, re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"),
                      "lowercase letters, digits, '-' and '.'")
LABEL_VALUE = NameRule("Kubernetes label value", 0, 63, re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"),
                       "letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
# Artifact Registry repository IDs: lowercase letters, digits and '-', a letter first (its API's rule).
ARTIFACT_REPOSITORY = NameRule("Artifact Registry repository", 1, 63, _RFC1035, _RFC1035_WORDS)
# A Docker image path inside a repository: lowercase path components separated by '/'.
_IMAGE_PART = r"[a-z0-9]+(?:[._-][a-z0-9]+)*"
IMAGE_NAME = NameRule("container image", 1, 128, re.compile(rf"{_IMAGE_PART}(?:/{_IMAGE_PART})*"),
                      "lowercase letters, digits, '.', '_', '-' inside path components separated by '/'")
# MaxText writes under <base_output_directory>/<run_name>/; the run name is also a label value.
RUN_NAME = NameRule("run", 1, 63, _DNS1123_LABEL,
                    "lowercase letters, digits and '-', starting and ending with a letter or digit")


# GCP project IDs: 6-30 lowercase letters, digits and hyphens, starting with a letter, not ending with a hyphen
# (https://cloud.google.com/resource-manager/docs/creating-managing-projects, "Project ID requirements").
PROJECT_ID = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")
# GCP region and zone names (https://cloud.google.com/compute/docs/regions-zones): us-east5, us-east5-b; AI zones
# such as us-central1-ai1 live in stackspec.zones.ZONE, built from this.
# Kubernetes' int32 fields (a RayJob's activeDeadlineSeconds, backoffLimit, ttlSecondsAfterFinished:
# ray-project/kuberay ray-operator/apis/ray/v1/rayjob_types.go, *int32 / int32): the API server refuses a larger value.
INT32_MAX = 2**31 - 1

REGION = re.compile(r"[a-z]+-[a-z]+\d+")
# Cloud KMS rotation of every key the project makes (the stacks' Secrets keys, the state keys): 90 days, as the
# README's gcloud --rotation-period=90d (CIS GCP Foundations 1.10: at most 90 days).
KEY_ROTATION_DAYS = 90
KEY_ROTATION = f"{KEY_ROTATION_DAYS * 86400}s"  # as Cloud KMS takes a rotation period


def project_id_error(value: str) -> str | None:
    if PROJECT_ID.fullmatch(value):
        return None
    return "not a GCP project ID: 6-30 lowercase letters, digits and '-', starting with a letter"


def bucket_name(value: str) -> str | None:
    """Cloud Storage bucket naming (https://cloud.google.com/storage/docs/buckets#naming): 3-63 characters (222 with
    dots, 63 per dot-separated part), lowercase letters, digits, '-', '_' and '.', starting and ending with a letter
    or digit, not an IP address, no 'goog' prefix and no 'google' (or a close misspelling) inside. The one rule: the
    bootstrap's configuration takes it from here."""
    allowed = ("3-63 lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit, "
               "no 'goog' prefix and no 'google'")
    if not re.fullmatch(r"[a-z0-9][-a-z0-9_.]*[a-z0-9]", value):
        return f"not a valid bucket name; allowed: {allowed}"
    longest = max(len(p) for p in value.split("."))
    if len(value) < 3 or (len(value) > 63 and "." not in value) or len(value) > 222 or longest > 63:
        return f"a bucket name has 3-63 characters (222 with dots), this has {len(value)}; allowed: {allowed}"
    if value.startswith("goog") or "google" in value or "g00gle" in value:
        return f"Cloud Storage refuses names starting with 'goog' or containing 'google'; allowed: {allowed}"
    try:
        ipaddress.ip_address(value)
        return "a bucket name cannot be an IP address"
    except ValueError:
        return None


# ------------------------------------------------------------------ IPv4 ranges

# What GCP accepts for subnet and GKE ranges without privately used public IPs:
# RFC 1918 and RFC 6598 (shared address space).
PRIVATE_RANGES = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                         "100.64.0.0/10"))
SUBNET_PREFIX = (8, 29)  # Compute Engine: IPv4 subnet ranges from /8 to /29
RESERVED_PER_SUBNET = 4  # network, gateway, second-to-last and broadcast addresses
POD_RANGE_PER_NODE = 256  # GKE's default 110 pods per node takes a /24 of the pod range per node


def private_cidr(value: str, prefix: tuple[int, int] | None = None) -> str | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as e:
        return f"not an IPv4 CIDR range ({e}); e.g. 10.50.0.0/16"
    if net.version != 4:
        return "must be an IPv4 range"
    if not any(net.subnet_of(p) for p in PRIVATE_RANGES):
        return f"must lie in a private range: {', '.join(map(str, PRIVATE_RANGES))}"
    if prefix and not prefix[0] <= net.prefixlen <= prefix[1]:
        return f"prefix /{net.prefixlen} is outside what GCP allows here: /{prefix[0]} to /{prefix[1]}"
    return None


def usable_addresses(cidr: str) -> int:
    return ipaddress.ip_network(cidr).num_addresses - RESERVED_PER_SUBNET


# ------------------------------------------------------------------ ports

# Ports the Ray head listens on (KubeRay's defaults, named in workloads/manifests.py) and
# Ray's own fixed ports on every node; a configured port must not land on one of them.
RAY_HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001}
RAY_NODE_PORTS = {"dashboard-agent-grpc": 52365, "dashboard-agent-listen": 52366}


# ------------------------------------------------------------------ quantities

_QUANTITY = re.compile(r"(?P<num>[+]?(\d+(\.\d*)?|\.\d+))(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_SUFFIX = {
    "": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10**3, "M": 10**6, "G": 10**9,
    "T": 10**12, "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
    "Ei": 2**60,
}


def quantity(value: str) -> Decimal | None:
    """A Kubernetes resource quantity (``"8"``, ``"7500m"``, ``"200G"``, ``"16Gi"``) as a number, or None."""
    m = _QUANTITY.fullmatch(str(value).strip())
    if not m:
        return None
    try:
        num = Decimal(m["num"])
    except InvalidOperation:
        return None
    suffix = m["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        return num * Decimal(10) ** int(suffix[1:])
    return num * Decimal(_SUFFIX[suffix])


# Far beyond any machine here (the largest allocates a few TiB): a bound that keeps the
# arithmetic on quantities (GiB, allocatable) finite, whatever exponent is typed.
QUANTITY_MAX = Decimal(2) ** 60  # 1 Ei


def quantity_error(value: str) -> str | None:
    q = quantity(value)
    if q is None:
        return ("not a Kubernetes quantity; e.g. 8, 7500m (CPU), 16Gi, 200G (memory): a number with an optional "
                "suffix m, k, M, G, T, Ki, Mi, Gi, Ti")
    if q > QUANTITY_MAX:
        return "larger than any machine can allocate (at most 1Ei)"
    return None


# --------------------------------------------------------------------------- Compute Engine names

# terraform-provider-google resource_compute_reservation.go:140-146 (the Compute API's Reservation.name): "The name
# must be 1-63 characters long, and comply with RFC1035. Specifically, the name must be 1-63 characters long and
# match the regular expression '[a-z]([-a-z0-9]*[a-z0-9])?'".
_GCE_NAME = _RFC1035  # the same RFC 1035 label


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
    if m["digest"]:
        algorithm, _, encoded = m["digest"].partition(":")
        # github.com/opencontainers/go-digest algorithm.go (anchoredEncodedRegexps): sha256 `^[a-f0-9]{64}$`,
        # sha384 `^[a-f0-9]{96}$`, sha512 `^[a-f0-9]{128}$`; a registry refuses any other digest.
        size = DIGEST_HEX.get(algorithm)
        if size is None or not re.fullmatch(f"[a-f0-9]{{{size}}}", encoded):
            allowed = ", ".join(f"{a}:<{n} lowercase hex>" for a, n in DIGEST_HEX.items())
            return f"not an image digest: {m['digest'][:80]}; allowed: {allowed}"
    return None


DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}


# --------------------------------------------------------------------------- Artifact Registry locations

# terraform-provider-google website/docs/r/artifact_registry_repository.html.markdown:821-823: "In addition to
# specific regions, special values for multi-region locations are `asia`, `europe`, and `us`."
ARTIFACT_REGISTRY_MULTI_REGIONS = ("asia", "europe", "us")


def artifact_registry_location(value: str) -> str | None:
    if value in ARTIFACT_REGISTRY_MULTI_REGIONS or REGION.fullmatch(value):
        return None
    multi = ", ".join(ARTIFACT_REGISTRY_MULTI_REGIONS)
    return f"not an Artifact Registry location: a region such as us-east5, or a multi-region: {multi}"
