"""GKE facts the spec checks against: release channels, maintenance limits, versions, DCN MTU, flex-start.

These are facts about GKE, not the shape of a stack file: the model's field types and the rules read them.
"""

from __future__ import annotations

import re

RELEASE_CHANNELS = ("UNSPECIFIED", "RAPID", "REGULAR", "STABLE", "EXTENDED")
# Prod enrols in a channel GKE's SLA covers (RAPID is not covered; UNSPECIFIED is being retired).
PROD_RELEASE_CHANNELS = ("REGULAR", "STABLE", "EXTENDED")
# GKE maintenance policy limits (cloud.google.com/kubernetes-engine/docs/concepts/maintenance-windows-and-exclusions):
# a recurring window must leave 48 h of maintenance in any 32 days, counting only stretches of >= 4 h;
# a NO_UPGRADES exclusion lasts at most 30 days; a cluster holds at most 20 exclusions. The window's rule, verbatim
# (https://cloud.google.com/kubernetes-engine/docs/how-to/maintenance-windows-and-exclusions, "Considerations when
# configuring a maintenance window"): "You must allow at least 48 hours of maintenance availability in a 32-day
# rolling window. Only contiguous availability windows of at least four hours are considered."
EXCLUSION_SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
NO_UPGRADES_MAX_DAYS = 30
MAX_EXCLUSIONS = 20
WINDOW_MIN_HOURS = 4
WINDOW_HOURS_PER_32_DAYS = 48
# A regional Standard cluster whose pools name no node_locations runs each pool in three zones of its region, the
# pool's node_count in each (https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters: "a
# regional cluster in the us-east1 region ... provisions nodes in three us-east1 zones"; the default pool is "nine
# nodes (three per zone)"; terraform-provider-google container_node_pool: node_count is "The number of nodes per
# instance group"). The Standard manager is such a cluster (infra/cluster.py: location=<region>).
REGIONAL_NODE_ZONES = 3
# GKE managed DRANET on Standard clusters needs at least this version.
DRANET_MIN_VERSION = "1.34.1-gke.1829001"
DCN_MTU = 8896

# Flex-start VMs run at most seven days (GKE "About GPU and TPU provisioning with flex-start");
# Compute Engine takes a max run duration of at least 30 s; under 10 minutes a TPU slice is gone
# before MaxText has compiled, so that is the floor here.
FLEX_START_MAX_RUN_SECONDS = 7 * 24 * 3600
FLEX_START_MIN_RUN_SECONDS = 600

# A GKE version or one of the API's version aliases: "1.X" (the highest valid patch in 1.X), "1.X.Y" (the highest
# gke.N patch of 1.X.Y), "1.X.Y-gke.N" (exact), per the GKE API's Cluster.initialClusterVersion. A prefix compares
# as its lowest possible version ((1, 34) < (1, 34, 1, 1829001)), so a floor check on it is sound.
_GKE_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+)(?:-gke\.(\d+))?)?")


def gke_version_key(version: str) -> tuple[int, ...] | None:
    m = _GKE_VERSION.fullmatch(version)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


# Image streaming with a custom node service account also needs Service Usage Consumer on it (cloud rule
# gke-image-streaming-node-sa-role); without it every image is pulled whole. Granted by the bootstrap, declared by
# infra/cluster.py's node_roles and checked by the policy pack (policies/rules/gke.py).
IMAGE_STREAMING_ROLE = "roles/serviceusage.serviceUsageConsumer"
