"""A job: a RayJob running MaxText through Ray Train, multislice or elastic, with its run name and checkpoints."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from pydantic.alias_generators import to_camel
from pydantic.json_schema import SkipJsonSchema

from .. import checkpoints, runs
from .. import maxtext as maxtext_facts
from .. import trainer as own_trainer
from ..limits import INT32_MAX
from .types import MaxTextValue, MeshAxis, MeshDegree, RayJobName, Region, Section, _check, at, resolved

# One preemption spends two of Ray Train's failures: the lost worker, and the restart that
# still counts the lost slice (Ray's resource view lags) and times out. Measured by the drill.
MIN_ELASTIC_MAX_FAILURES = 2
# MaxText keys a job sets through its own keys, never through the maxtext passthrough.
JOB_OWNED_MAXTEXT_KEYS = frozenset({
    "steps", "per_device_batch_size", "max_target_length", "model_name", "run_name",
    "base_output_directory", "checkpoint_period",
})

# A MaxText job's keys that a job with its own trainer does not take (docs/trainers.md).
MAXTEXT_ONLY_KEYS = ("model", "per_device_batch_size", "max_target_length", "ici", "dcn", "maxtext")

# Kueue WorkloadPriorityClasses every stack declares (name -> value): Kueue admits higher values
# first and, within the ClusterQueue, may preempt a lower one to admit a higher one.
WORKLOAD_PRIORITIES = {
    "production": 1000,  # runs the stack exists for: admitted first, may preempt the others
    "research": 500,  # experiments: wait for production work, preempt drills
    "drill": 100,  # preemption drills and canaries: only on capacity nobody else wants
}


class Job(Section):
    name: RayJobName
    mode: Literal["multislice", "elastic"] = "multislice"
    group: str | None = None  # worker group (slice shape); the only one by default
    # dedicated: the RayJob brings its own RayCluster and is queued by Kueue (admitted whole when
    # quota frees); shared: submitted to the long-lived RayCluster, which Kueue cannot queue per job.
    cluster: Literal["shared", "dedicated"] = "shared"
    priority: Literal[tuple(WORKLOAD_PRIORITIES)] = "research"  # Kueue WorkloadPriorityClass
    slices: int | None = Field(None, ge=1)  # multislice: exact; resolved: the maximum
    min_slices: int | None = Field(None, ge=1)  # elastic only
    max_slices: int | None = Field(None, ge=1)  # elastic only
    max_failures: int | None = Field(None, ge=0)  # elastic: 3 by default, at least 2
    model: Annotated[str, _check(maxtext_facts.model_error)] = "llama3-8b"
    steps: int = Field(100, ge=1)
    per_device_batch_size: float = Field(4, gt=0)
    max_target_length: int = Field(4096, ge=1)
    # The run name is derived (stackspec.runs): a new value here starts a fresh run of the same settings.
    rerun: int | str | None = None
    ici: dict[MeshAxis, MeshDegree] = Field(default_factory=dict)
    dcn: dict[MeshAxis, MeshDegree] = Field(default_factory=dict)
    maxtext: dict[str, MaxTextValue] = Field(default_factory=dict)  # further MaxText key=value settings
    # Steps between checkpoints; unset: the seed's for multislice jobs, Young/Daly's for elastic ones
    # (from checkpointSaveSeconds, expectedPreemptionIntervalMinutes and the step time).
    checkpoint_period: int | None = Field(None, ge=1)
    checkpoint_save_seconds: float | None = Field(None, gt=0)  # measured blocking time of one save
    expected_preemption_interval_minutes: float | None = Field(None, gt=0)  # mean time between preemptions
    # Seconds per training step on this job's slices, for the cost of a run; unset: shown as unknown.
    expected_step_seconds: float | None = Field(None, gt=0)
    active_deadline_seconds: int = Field(4 * 3600, ge=1, le=INT32_MAX)  # RayJob fields are int32 (limits.INT32_MAX)
    backoff_limit: int = Field(0, ge=0, le=INT32_MAX)
    # A dedicated cluster (and its slices) is deleted this long after the job ends (logs until then).
    # Queued jobs take 0: Kueue frees the job's quota when KubeRay reports it finished, not when the
    # cluster goes (cloud rule kueue-quota-freed-at-job-end).
    cluster_ttl_seconds: int = Field(0, ge=0, le=INT32_MAX)
    # Shared-cluster jobs: KubeRay deletes the finished RayJob and its submitter Job after this long
    # (deletionRules, KubeRay >= 1.6). Unset: kept, so Pulumi's state and the cluster agree.
    job_ttl_seconds: int | None = Field(None, ge=0, le=INT32_MAX)
    # Multi-region stacks (tpu-multislice:regions): the region whose cluster this job is created in directly.
    # Unset: queued through the manager, whose MultiKueue dispatches it to the first region that admits it.
    region: Region | None = None
    # An operator's pause: a dedicated job is declared suspended and outside Kueue (no queue label:
    # Kueue would unsuspend it on admission); a shared job is not submitted (held for review).
    suspend: bool = False
    trainer: own_trainer.Trainer | None = None  # a team's own train loop instead of MaxText (stackspec/trainer.py)
    # Resolved (stackspec.defaults): how checkpointPeriod was chosen, one line for the preview.
    checkpoint_how: SkipJsonSchema[str | None] = resolved()

    @model_validator(mode="after")
    def _mode_keys(self) -> Job:
        given = self.model_fields_set
        if self.mode == "elastic":
            if "slices" in given:
                raise at("slices", "elastic jobs take minSlices and maxSlices")
            failures = 3 if self.max_failures is None else self.max_failures
            if failures < MIN_ELASTIC_MAX_FAILURES:
                raise at("maxFailures", f"must be at least {MIN_ELASTIC_MAX_FAILURES}: one preemption spends two "
                                        "(the lost worker, and a restart that times out waiting for the lost slice)")
        else:
            for key in ("min_slices", "max_slices"):
                if key in given:
                    raise at(to_camel(key), "multislice jobs take slices; minSlices/maxSlices are for mode elastic")
        for key in self.maxtext:
            if key.startswith(("ici_", "dcn_")) or key in JOB_OWNED_MAXTEXT_KEYS:
                raise at(f"maxtext.{key}", "set through the job's own key (ici, dcn, steps, ...), not maxtext")
            if msg := maxtext_facts.key_error(key):
                raise at(f"maxtext.{key}", msg)
        if self.backoff_limit and self.cluster == "shared":
            raise at("backoffLimit", "KubeRay retries a job by creating a new RayCluster: a job on the shared cluster "
                                     "takes backoffLimit 0 (or cluster: dedicated)")
        if self.cluster_ttl_seconds and self.queued:
            raise at("clusterTtlSeconds", f"{self.cluster_ttl_seconds}: Kueue frees a queued job's quota as soon as "
                     "KubeRay reports it finished, so a cluster kept after that holds slices the next admitted job "
                     "is counted on (its pods pend, or the autoscaler brings up another fallback): 0 for a queued "
                     "job; read its logs in Cloud Logging")
        if self.trainer is not None:
            # A team's own script: MaxText's model, batch, length, mesh and passthrough mean nothing to it (none
            # of them reaches its config), so a key set here would be silently ignored.
            if maxtext_only := [to_camel(k) for k in MAXTEXT_ONLY_KEYS if k in given]:
                raise at(maxtext_only[0], f"{', '.join(maxtext_only)}: MaxText's, and this job runs its own trainer "
                         "(trainer.script); its settings go in trainer.config (docs/trainers.md)")
            if self.trainer.image is not None and self.cluster != "dedicated":
                # workloads/custom_trainer_args.py with_image: only a job's own RayCluster takes another image; the
                # shared cluster's workers run the stack's image for every job.
                raise at("trainer.image", "an image of its own needs a cluster of its own (cluster: dedicated); the "
                         "shared cluster's workers run the stack's image")
        if self.job_ttl_seconds is not None and self.cluster == "dedicated":
            raise at("jobTtlSeconds", "a dedicated job's cluster goes with shutdownAfterJobFinishes (Kueue requires "
                                      "it), which KubeRay's deletionRules exclude: use clusterTtlSeconds")
        return self

    @model_validator(mode="before")
    @classmethod
    def _no_run_name(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "runName" in data:
            raise at("runName", "the run name is derived from the model, mesh, batch, sequence length and dataset "
                                "(so a changed job never restores a checkpoint that does not fit it): remove runName; "
                                "set rerun: 1 (or any new value) to start a fresh run of unchanged settings")
        return data

    @property
    def elastic(self) -> bool:
        return self.mode == "elastic"

    @cached_property
    def run_identity(self) -> dict[str, Any]:
        """What a checkpoint of this job must agree with (hashed into :attr:`run_name`)."""
        return runs.identity(model=self.model, ici=self.ici, dcn=self.dcn,
                             per_device_batch_size=self.per_device_batch_size,
                             max_target_length=self.max_target_length, maxtext=self.maxtext, rerun=self.rerun)

    @cached_property
    def run_name(self) -> str:
        """MaxText's run_name and Ray Train's run: ``<name>-<8 hex>`` (:mod:`stackspec.runs`)."""
        return runs.run_name(self.name, self.run_identity)

    @property
    def checkpoint_plan(self) -> checkpoints.Plan:
        """The resolved checkpoint period and how it was chosen (:func:`stackspec.defaults.checkpoint_plan`)."""
        return checkpoints.Plan(self.checkpoint_period or checkpoints.SEED_CHECKPOINT_PERIOD,
                                self.checkpoint_how or "unresolved")

    @property
    def checkpoint_storage(self) -> checkpoints.Storage | checkpoints.DeclaredStorage | None:
        """One run's checkpoints at its end (None: unknown: a MaxText model not in the table, a trainer that does
        not declare its checkpoint size)."""
        if self.trainer is not None:
            size = self.trainer.checkpoint_gb
            return None if size is None else checkpoints.declared_storage(size, self.steps, self.checkpoint_plan.period)
        return checkpoints.storage(self.model, self.steps, self.checkpoint_plan.period, self.maxtext)

    @property
    def runs(self) -> str:
        """What the job runs, for tables: its MaxText model, or its own trainer's script."""
        return f"own: {self.trainer.script}" if self.trainer is not None else self.model

    @property
    def queued(self) -> bool:
        """Kueue admits this job's RayJob: it brings its own cluster (Kueue's rule) and is not paused."""
        return self.cluster == "dedicated" and not self.suspend
