"""GKE's rules on a stack across its sections, each with its source quoted beside it.

GKE's facts (release channels, maintenance limits, version floors) are in :mod:`stackspec.gke`, where the model's
field types read them; a rule here calls ``fail(key, value, message)`` for each problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model.types import _ns

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


# https://cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks (Limitations): "Public clusters can have
# up to 50 authorized network CIDR ranges; private clusters can have up to 100."
MAX_AUTHORIZED_NETWORKS_PUBLIC = 50
MAX_AUTHORIZED_NETWORKS_PRIVATE = 100


def control_plane(spec: Any, fail) -> None:
    """The control plane's authorized networks: GKE's count limit, and never the whole internet outside a sandbox
    (prod keeps every public range off: rules/safety.py hardening)."""
    c = spec.cluster
    nets = c.control_plane.authorized_networks
    key = _ns("cluster.controlPlane.authorizedNetworks")
    limit = MAX_AUTHORIZED_NETWORKS_PRIVATE if c.private_nodes else MAX_AUTHORIZED_NETWORKS_PUBLIC
    if len(nets) > limit:
        kind = "private" if c.private_nodes else "public"
        fail(key, len(nets), f"{len(nets)} ranges; GKE takes at most {limit} for a {kind} cluster (GKE "
             "authorized networks, Limitations: 50 public, 100 private)")
    if spec.sandbox or spec.prod:
        return
    for i, n in enumerate(nets):
        if n.cidr.endswith("/0"):
            fail(f"{key}[{i}].cidr", n.cidr, "opens the control plane's endpoint to the whole internet: name the "
                 "ranges that reach it (a VPN's, an office's), or use access: dns (IAM); only a sandbox stack, in a "
                 "developer's own project, may open it")


# GKE "Maintenance windows and exclusions"
# (https://cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions, Scope of upgrades),
# PARAPHRASED (no copy of that section could be read here to quote): the "No minor upgrades" and "No minor or node
# upgrades" scopes are for clusters enrolled in a release channel; a cluster without one (UNSPECIFIED, a static
# version) takes "No upgrades" exclusions only. Verbatim, the API's MaintenanceExclusionOptions.Scope enum
# (container.googleapis.com v1; the generated PHP, Rust and Haskell clients read here carry the same words):
# "NO_UPGRADES excludes all upgrades, including patch upgrades and minor upgrades across control planes and nodes.
# This is the default exclusion behavior."; "NO_MINOR_UPGRADES excludes all minor upgrades for the cluster, only
# patches are allowed."; "NO_MINOR_OR_NODE_UPGRADES excludes all minor upgrades for the cluster, and also exclude all
# node pool upgrades. Only control plane patches are allowed."
CHANNEL_SCOPES = ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")


def maintenance(spec: Any, fail) -> None:
    """An exclusion scope that needs a release channel on a cluster without one."""
    c = spec.cluster
    if c.release_channel != "UNSPECIFIED":
        return
    for i, e in enumerate(c.maintenance.exclusions):
        if e.scope in CHANNEL_SCOPES:
            fail(_ns(f"cluster.maintenance.exclusions[{i}].scope"), e.scope,
                 f"GKE takes {e.scope} only on a cluster enrolled in a release channel (GKE maintenance windows and "
                 "exclusions, Scope of upgrades); this cluster's releaseChannel is UNSPECIFIED: enrol it "
                 "(REGULAR, STABLE, EXTENDED) or use scope NO_UPGRADES (at most 30 days)")
