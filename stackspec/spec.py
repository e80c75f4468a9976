"""The stack spec's public face: the checked model, how to load it, its errors.

The model lives in :mod:`stackspec.model` (pydantic), reading stack files in
:mod:`stackspec.loader`, derived names in :mod:`stackspec.names`. Everything above the
ground floor imports from here.

To add a spec key: a field on its section in ``stackspec/model/`` (camelCase in the
file, snake_case in code, a default so older stack files still load, its limits in the
type), and a rule in the section's validator or, when it spans sections, a function in
``stackspec/rules/``.
"""

from __future__ import annotations

from .errors import MISSING, Problem, SpecError, StackFileError, UnknownName
from .loader import (
    environment_of,
    flat_config,
    from_pulumi,
    load,
    load_file,
    load_stack,
    stack_config,
    stack_file_of_run,
)
from .model import (
    CAPACITY_TYPES,
    DCN_MTU,
    DRANET_MIN_VERSION,
    ENVIRONMENTS,
    MIN_ELASTIC_MAX_FAILURES,
    NOTIFICATION_CHANNEL_TYPES,
    PLACEHOLDER_IMAGE_DIGEST,
    RELEASE_CHANNELS,
    STORAGE_CLASSES,
    Capacity,
    Cluster,
    Job,
    Monitoring,
    Network,
    NotificationChannel,
    PrimaryNetwork,
    RaySettings,
    SecondaryNetwork,
    Slice,
    StackSpec,
    Storage,
    WorkerGroup,
    WorkerImage,
    gke_version_key,
)
from .names import PROJECT, stack_file

__all__ = [
    "CAPACITY_TYPES", "DCN_MTU", "DRANET_MIN_VERSION", "ENVIRONMENTS", "MIN_ELASTIC_MAX_FAILURES", "MISSING",
    "NOTIFICATION_CHANNEL_TYPES", "PLACEHOLDER_IMAGE_DIGEST", "Monitoring", "NotificationChannel", "WorkerImage",
    "PROJECT", "RELEASE_CHANNELS", "STORAGE_CLASSES", "Capacity", "Cluster", "Job", "Network", "PrimaryNetwork",
    "Problem",
    "RaySettings", "SecondaryNetwork", "Slice", "SpecError", "StackFileError", "StackSpec", "Storage",
    "UnknownName", "WorkerGroup", "environment_of", "flat_config", "from_pulumi", "gke_version_key", "load",
    "load_file", "load_stack", "stack_config", "stack_file", "stack_file_of_run",
]
