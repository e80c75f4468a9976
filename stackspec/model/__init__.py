"""The stack spec as a declarative model (pydantic v2), split by concern:

- :mod:`.types`: the field types (each carries the limit of the system it deploys to, ``stackspec.limits``) and
  ``Section``, the frozen, camelCase base of every section;
- :mod:`.cluster`, :mod:`.network`, :mod:`.slices`, :mod:`.jobs`, :mod:`.workloads`, :mod:`.options`,
  :mod:`.regions`: the sections, each with its own rules as validators;
- :mod:`.stack`: ``StackSpec``, the stack's fields and read-only views.

GKE facts live in :mod:`stackspec.gke`, rules across sections in :mod:`stackspec.rules`, the price-sorted dispatch
order in :mod:`stackspec.cost`. Every name ``stackspec.model`` held before the split is importable from here.
"""

from __future__ import annotations

from .. import checkpoints, kuberay, limits, machines, names, prices, runs, tpu, zones
from .. import maxtext as maxtext_facts
from .. import regions as places
from ..cost import Dispatch
from ..errors import MISSING, Problem, UnknownName
from ..gke import (
    _GKE_VERSION,
    DCN_MTU,
    DRANET_MIN_VERSION,
    EXCLUSION_SCOPES,
    FLEX_START_MAX_RUN_SECONDS,
    FLEX_START_MIN_RUN_SECONDS,
    MAX_EXCLUSIONS,
    NO_UPGRADES_MAX_DAYS,
    PROD_RELEASE_CHANNELS,
    RELEASE_CHANNELS,
    WINDOW_HOURS_PER_32_DAYS,
    WINDOW_MIN_HOURS,
    gke_version_key,
)
from ..tpu import SliceError, SliceShape
from .cluster import (
    _WEEKDAYS,
    CONTROL_PLANE_ACCESS,
    AuthorizedNetwork,
    Cluster,
    ControlPlane,
    Maintenance,
    MaintenanceExclusion,
    MaintenanceWindow,
    Manager,
    Timestamp,
    _rrule,
    _timestamp,
    rfc3339,
)
from .jobs import JOB_OWNED_MAXTEXT_KEYS, MIN_ELASTIC_MAX_FAILURES, WORKLOAD_PRIORITIES, Job
from .network import Network, PrimaryNetwork, SecondaryNetwork
from .options import UNVERIFIED, Deploy, Prices, TpuPrices, Unverified
from .regions import RegionSite
from .slices import (
    _DURATION,
    _DURATION_SCHEMA,
    _DURATION_UNITS,
    CAPACITY_TYPES,
    Capacity,
    Slice,
    WorkerGroup,
    _capacity_list,
    _seconds,
)
from .stack import StackSpec, config_keys
from .types import (
    ENVIRONMENTS,
    NS,
    BucketName,
    ClusterCidr,
    ClusterName,
    GkeVersion,
    GroupName,
    KsaName,
    MaxTextValue,
    MeshAxis,
    MeshDegree,
    Namespace,
    NetworkName,
    NodePoolName,
    Port,
    ProjectId,
    Quantity,
    RayClusterName,
    RayJobName,
    Region,
    RunName,
    Section,
    SubnetCidr,
    SubnetName,
    Zone,
    _check,
    _name,
    _ns,
    _to_str,
    at,
)
from .workloads import (
    _SERVICE_ACCOUNT_EMAIL,
    DEFAULT_RAY_IMAGE,
    IMAGE_DIGEST,
    KUBERAY_AUTH_MIN,
    NOTIFICATION_CHANNEL_TYPES,
    PLACEHOLDER_IMAGE_DIGEST,
    RAY_AUTH_MIN,
    STORAGE_CLASSES,
    Monitoring,
    NotificationChannel,
    RaySettings,
    Storage,
    WorkerImage,
)

# A region view and the dispatch order name StackSpec: resolve the forward references once every module is loaded.
StackSpec.model_rebuild()

__all__ = [
    "AuthorizedNetwork", "BucketName", "CAPACITY_TYPES", "CONTROL_PLANE_ACCESS", "Capacity", "Cluster",
    "ClusterCidr", "ClusterName", "ControlPlane", "DCN_MTU", "DEFAULT_RAY_IMAGE", "DRANET_MIN_VERSION", "Deploy",
    "Dispatch", "ENVIRONMENTS", "EXCLUSION_SCOPES", "FLEX_START_MAX_RUN_SECONDS", "FLEX_START_MIN_RUN_SECONDS",
    "GkeVersion", "GroupName", "IMAGE_DIGEST", "JOB_OWNED_MAXTEXT_KEYS", "Job", "KUBERAY_AUTH_MIN", "KsaName",
    "MAX_EXCLUSIONS", "MIN_ELASTIC_MAX_FAILURES", "MISSING", "Maintenance", "MaintenanceExclusion",
    "MaintenanceWindow", "Manager", "MaxTextValue", "MeshAxis", "MeshDegree", "Monitoring",
    "NOTIFICATION_CHANNEL_TYPES", "NO_UPGRADES_MAX_DAYS", "NS", "Namespace", "Network", "NetworkName",
    "NodePoolName", "NotificationChannel", "PLACEHOLDER_IMAGE_DIGEST", "PROD_RELEASE_CHANNELS", "Port", "Prices",
    "PrimaryNetwork", "Problem", "ProjectId", "Quantity", "RAY_AUTH_MIN", "RELEASE_CHANNELS", "RayClusterName",
    "RayJobName", "RaySettings", "Region", "RegionSite", "RunName", "STORAGE_CLASSES", "SecondaryNetwork",
    "Section", "Slice", "SliceError", "SliceShape", "StackSpec", "Storage", "SubnetCidr", "SubnetName", "Timestamp",
    "TpuPrices", "UNVERIFIED", "UnknownName", "Unverified", "WINDOW_HOURS_PER_32_DAYS", "WINDOW_MIN_HOURS",
    "WORKLOAD_PRIORITIES", "WorkerGroup", "WorkerImage", "Zone", "_DURATION", "_DURATION_SCHEMA", "_DURATION_UNITS",
    "_GKE_VERSION", "_SERVICE_ACCOUNT_EMAIL", "_WEEKDAYS", "_capacity_list", "_check", "_name", "_ns", "_rrule",
    "_seconds", "_timestamp", "_to_str", "at", "checkpoints", "config_keys", "gke_version_key", "kuberay", "limits",
    "machines", "maxtext_facts", "names", "places", "prices", "rfc3339", "runs", "tpu", "zones",
]
