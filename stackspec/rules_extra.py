"""Checks of the stack spec the reviews found missing, each a small function with its source, called from the
model by one-line hooks (``stackspec/model``). A check returns None when the value is fine, else a message saying
what is allowed; the model raises it at the key it names, so ``slicectl lint`` and ``preview`` give one answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
