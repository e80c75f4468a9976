"""What a stack opts into beside its resources: unverified paths, what the workflows do, its own prices."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from .. import machines, tpu
from .types import Section, at


class Unverified(Section):
    """Paths no test here can prove and no apply-tested peer takes: off by default, so a stack runs what
    the seed or a peer is known to run. Each one turned on is listed as unverified by the preview."""

    # TPU pools that scale from zero (capacity fallbacks, flex-start) while their pods claim DRANET devices:
    # the cluster autoscaler grows a DRA node group from zero only where the cloud provider models the
    # driver's devices on its template node (cluster-autoscaler docs/dra_support.md), which GKE does not
    # document for netdev.google.com. The seed's fixed-size pools are known to work.
    dra_scale_from_zero: bool = False
    # Ray token auth through KubeRay's authOptions (KubeRay >= 1.5.1): GKE does not publish the Ray add-on's
    # KubeRay version, and an older RayCluster CRD prunes the field silently, leaving the head open.
    ray_token_auth: bool = False
    # Binary Authorization blocking (ENFORCED_BLOCK_AND_AUDIT_LOG) rather than logging (DRYRUN_AUDIT_LOG_ONLY): the
    # images GKE itself runs on the nodes (its system policy's list) and the GCS FUSE sidecar GKE injects are not
    # checked here against the policy, and a refused system pod stops the cluster's add-ons.
    binary_authorization_enforce: bool = False
    # Multi-tier checkpointing (workloads/multitier.py): MaxText's enable_multi_tier_checkpointing with GKE's
    # HighScaleCheckpointing add-on; GKE documents it with JobSet workloads, not KubeRay's pods.
    multi_tier_checkpointing: bool = False
    # Warm spares on the TPU hosts (docs/recovery.md): every worker process imports MaxText as it starts and each
    # training worker asks its raylet for an idle one after its first step, so a restarted worker group takes it.
    # Measured on local CPU nodes only; needs the stack's own worker image (nothing installed at worker start).
    warm_spares: bool = False


UNVERIFIED = {
    "draScaleFromZero": "TPU pools scale from zero while worker pods claim DRANET devices: GKE documents no "
                        "template-node devices for netdev.google.com, so the autoscaler may never grow them",
    "rayTokenAuth": "ray.auth: token relies on the GKE Ray add-on running KubeRay >= 1.5.1 (authOptions), which GKE "
                    "does not publish: an older CRD drops the field and the head runs without a token (the cluster "
                    "drill checks that the head refuses a request without one)",
    "binaryAuthorizationEnforce": "Binary Authorization blocks every image its policy does not allow: the images GKE "
                                  "runs for itself are trusted through Google's system policy, which no test here "
                                  "can list; a refused system pod stops the cluster's add-ons (the default only logs)",
    "multiTierCheckpointing": "multi-tier checkpointing (MaxText enable_multi_tier_checkpointing, GKE's "
                              "HighScaleCheckpointing add-on, a CheckpointConfiguration and the "
                              "multitier-checkpoint.csi.storage.gke.io volume at /local on the TPU workers): GKE "
                              "documents it for JobSet pods, whose indices its replicator pairs peers by, not for "
                              "KubeRay's; the backups need a bucket with hierarchical namespace; the local period's "
                              "save rate is assumed (stackspec/checkpoints.py), not measured",
    "warmSpares": "warm spares on the TPU hosts (each worker process preloads MaxText; the training workers ask "
                  "their raylet for an idle one, Ray's PrestartWorkers): measured on local CPU nodes only; on a TPU "
                  "host a spare holds host memory (about 1.5 GB, within the worker's limit) and must not open the "
                  "TPU (JAX's backend starts at first use, not at import)",
}


class Deploy(Section):
    """What the GitOps workflows do with the stack (bootstrap/ makes the environments and identities these need)."""

    # deploy.yml applies the stack on every push to main, in the GitHub environment deploy-<stack>, as the
    # stack's own deploy identity ci-deploy-<stack>. Off by default: a new stack is previewed, never applied.
    on_push: bool = False
    # drills.yml's weekly cluster drill runs this elastic job against the deployed stack (environment drill-<stack>).
    cluster_drill: str | None = None


class TpuPrices(Section):
    """USD per chip-hour by capacity type; unset: the dated table, stackspec/data/prices.json."""

    on_demand: float | None = Field(None, gt=0)
    spot: float | None = Field(None, gt=0)
    flex_start: float | None = Field(None, gt=0)
    reservation: float | None = Field(None, gt=0)


class Prices(Section):
    """Prices the stack gives itself (a negotiated rate, a current Spot price, what the table lacks)."""

    # The generations' keys as written everywhere else (v6e, tpu7x), not camelCased (v6E, tpu7X).
    model_config = ConfigDict(alias_generator=lambda n: n if n in tpu.GENERATIONS else to_camel(n))

    v6e: TpuPrices | None = None
    v5e: TpuPrices | None = None
    v5p: TpuPrices | None = None
    v4: TpuPrices | None = None
    tpu7x: TpuPrices | None = None
    machines: dict[str, Annotated[float, Field(gt=0)]] = Field(default_factory=dict)  # USD per machine-hour
    storage_gb_month: float | None = Field(None, gt=0)  # USD per GB-month of the bucket's storage class
    bucket_gb: float | None = Field(None, ge=0)  # the checkpoint bucket's expected size, for the monthly line
    # Multi-region stacks: the manager cluster's hourly cost (Autopilot bills pod requests, not in the table).
    manager_per_hour: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _machines(self) -> Prices:
        for name in self.machines:
            if name not in machines.MACHINES:
                raise at(f"machines.{name}", f"not a machine type of the machine table; allowed: "
                                             f"{', '.join(machines.MACHINES)}")
        return self

    def tpu_overrides(self) -> dict[str, dict[str, float]]:
        """``{generation: {onDemand|spot|flexStart|reservation: usd}}`` for what the stack sets."""
        out = {}
        for gen in tpu.GENERATIONS:
            p = getattr(self, gen, None)
            if p is not None:
                out[gen] = {to_camel(k): v for k, v in p.model_dump().items() if v is not None}
        return out
