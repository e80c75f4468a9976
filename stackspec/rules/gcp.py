"""GCP's rules on a stack across its sections (Compute Engine, Cloud Storage, Cloud KMS, IAM, Artifact Registry),
each with its source quoted beside it. A rule calls ``fail(key, value, message)`` for each problem; ``message`` says
what GCP allows. The format of a single value (a name, an image reference) is checked beside its field
(:mod:`stackspec.limits`); GKE's own rules are in :mod:`stackspec.rules.gke`.
"""

from __future__ import annotations

import re

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
