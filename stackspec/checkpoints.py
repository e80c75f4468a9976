"""Checkpoint policy and storage: how often a job saves, and what its checkpoints weigh.

Pure functions over a job's settings and the facts below; the spec model resolves each job's
``checkpointPeriod`` with :func:`policy` and the preview prints the :class:`Plan` it came from.

- Multislice jobs (on-demand or reserved slices, all or nothing): the seed's choice. The seed
  tutorial sets no ``checkpoint_period``, so MaxText's ``base.yml`` default applies (10 000
  steps): a 100-step run saves at step 0 and, on completion, at its last step.
- Elastic jobs on Spot: Young and Daly's first-order optimum, period ≈ √(2 × save time × mean
  time between preemptions), in steps of the expected step time. A period past half the run
  is capped there so at least one checkpoint lands mid-run.

Storage: MaxText saves its whole train state (parameters and the optimizer's moments) at every
checkpoint and keeps all of them unless ``max_num_checkpoints_to_keep`` is set.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# MaxText base.yml (maxtext 0.2.1): checkpoint_period: 10_000, max_num_checkpoints_to_keep: None,
# save_checkpoint_on_completion: True, weight_dtype: float32, opt_type: adamw, mu_dtype inherits.
MAXTEXT_CHECKPOINT_PERIOD = 10_000
SEED_CHECKPOINT_PERIOD = MAXTEXT_CHECKPOINT_PERIOD  # the seed sets none

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class DenseShape:
    """A dense decoder (MaxText's llama2/mistral decoder block: gated SiLU MLP, RMSNorm, GQA)."""

    emb: int
    layers: int
    mlp: int
    q_heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool = False  # logits_via_embedding

    @property
    def parameters(self) -> int:
        attn = self.emb * self.head_dim * (2 * self.q_heads + 2 * self.kv_heads)  # q, o; k, v
        mlp = 3 * self.emb * self.mlp  # gate, up, down
        norms = 2 * self.emb
        embed = self.vocab * self.emb * (1 if self.tied else 2)  # embedding and output projection
        return self.layers * (attn + mlp + norms) + self.emb + embed


# From maxtext 0.2.1's src/maxtext/configs/models/<name>.yml (and base.yml for "default"):
# base_emb_dim, base_num_decoder_layers, base_mlp_dim, base_num_query_heads, base_num_kv_heads,
# head_dim, vocab_size, logits_via_embedding. tests/test_lifecycle.py checks them against the
# installed release. Models not listed (MoE, other decoder blocks) get no storage estimate.
MODEL_SHAPES: dict[str, DenseShape] = {
    "default": DenseShape(2048, 16, 7168, 16, 16, 128, 32_000),
    "llama2-7b": DenseShape(4096, 32, 11008, 32, 32, 128, 32_000),
    "llama2-13b": DenseShape(5120, 40, 13824, 40, 40, 128, 32_000),
    "llama2-70b": DenseShape(8192, 80, 28672, 64, 8, 128, 32_000),
    "llama3-8b": DenseShape(4096, 32, 14336, 32, 8, 128, 128_256),
    "llama3-70b": DenseShape(8192, 80, 28672, 64, 8, 128, 128_256),
    "llama3-405b": DenseShape(16384, 126, 53248, 128, 8, 128, 128_256),
    "llama3.1-8b": DenseShape(4096, 32, 14336, 32, 8, 128, 128_256),
    "llama3.1-70b": DenseShape(8192, 80, 28672, 64, 8, 128, 128_256),
    "llama3.1-405b": DenseShape(16384, 126, 53248, 128, 8, 128, 128_256),
    "llama3.3-70b": DenseShape(8192, 80, 28672, 64, 8, 128, 128_256),
    "mistral-7b": DenseShape(4096, 32, 14336, 32, 8, 128, 32_000),
}

# Measured step times (seconds) on the deployment of GKE's tutorial "Multislice and elastic training on TPUs using
# Ray Train" (2x v6e-16): (model, pod type, slices, per-device batch, max target length) -> seconds, with the
# published run log the number was read from (named by its title: a preview and cost.json print it).
STEP_SECONDS: dict[tuple[str, str, int, float, int], tuple[float, str]] = {
    ("llama3-8b", "v6e-16", 2, 4.0, 4096): (
        1.003, "Ray's announcement \"TPUs are a first-class accelerator in Ray\" (Ray 2.55), its llama3-8b run log: "
               "step 99, 16 338 tokens/s/device"),
    ("llama3-70b", "v6e-16", 2, 2.0, 4096): (
        0.693, "GKE tutorial \"Multislice and elastic training on TPUs using Ray Train\", its llama3-70b run log: "
               "step 99, 11 819 tokens/s/device"),
}


def parameters(model: str, maxtext: Mapping[str, str] | None = None) -> int | None:
    shape = MODEL_SHAPES.get(model)
    if shape is None or any(k.startswith("base_") for k in (maxtext or {})):
        return None  # unknown architecture, or its shape overridden key by key
    return shape.parameters


def bytes_per_parameter(maxtext: Mapping[str, str] | None = None) -> int | None:
    """What one parameter costs in a MaxText checkpoint: the weight plus AdamW's two moments
    (mu in ``mu_dtype``, else the weight's dtype; nu in the weight's dtype); SGD keeps none."""
    mt = maxtext or {}
    weight = DTYPE_BYTES.get(mt.get("weight_dtype", "float32"))
    mu = DTYPE_BYTES.get(mt.get("mu_dtype") or mt.get("weight_dtype", "float32"))
    if weight is None or mu is None:
        return None
    if mt.get("opt_type", "adamw") == "sgd":
        return weight
    return weight + mu + weight


def checkpoints_saved(steps: int, period: int) -> int:
    """MaxText saves at every step divisible by the period (step 0 included) and at the last
    step on completion (``save_checkpoint_on_completion``)."""
    last = steps - 1
    return last // period + 1 + (1 if last % period else 0)


@dataclass(frozen=True)
class Storage:
    parameters: int
    bytes_per_parameter: int
    checkpoints: int  # kept at the end of the run
    kept_by: str  # why that many

    @property
    def checkpoint_bytes(self) -> int:
        return self.parameters * self.bytes_per_parameter

    @property
    def total_bytes(self) -> int:
        return self.checkpoint_bytes * self.checkpoints

    def describe(self) -> str:
        return (f"{self.parameters / 1e9:.2f}e9 params x {self.bytes_per_parameter} B (weights + AdamW moments) "
                f"= {gb(self.checkpoint_bytes)} per checkpoint x {self.checkpoints} kept ({self.kept_by}) "
                f"= {gb(self.total_bytes)}")


@dataclass(frozen=True)
class DeclaredStorage:
    """A run's checkpoints where the job declares one checkpoint's size (a team's own trainer)."""

    checkpoint_bytes: int
    checkpoints: int
    kept_by: str

    @property
    def total_bytes(self) -> int:
        return self.checkpoint_bytes * self.checkpoints

    def describe(self) -> str:
        return (f"{gb(self.checkpoint_bytes)} per checkpoint (trainer.checkpointGb) x {self.checkpoints} kept "
                f"({self.kept_by}) = {gb(self.total_bytes)}")


def declared_storage(checkpoint_gb: float, steps: int, period: int) -> DeclaredStorage:
    saved = checkpoints_saved(steps, period)
    return DeclaredStorage(round(checkpoint_gb * 1e9), saved, f"saved at {steps} steps every {period}, all kept")


def gb(n: int | float) -> str:
    if n < 0.1e9:  # a small trainer's checkpoint: 0.0 GB would say nothing
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e9:,.0f} GB" if n >= 10e9 else f"{n / 1e9:.1f} GB"


def storage(model: str, steps: int, period: int, maxtext: Mapping[str, str] | None = None) -> Storage | None:
    """One run's checkpoints at its end, or None where the model's size is not in the table."""
    params, per = parameters(model, maxtext), bytes_per_parameter(maxtext)
    if params is None or per is None:
        return None
    saved = checkpoints_saved(steps, period)
    keep = (maxtext or {}).get("max_num_checkpoints_to_keep")
    if keep and keep.isdigit() and 0 < int(keep) < saved:
        return Storage(params, per, int(keep), "max_num_checkpoints_to_keep")
    return Storage(params, per, saved, f"saved at {steps} steps every {period}, all kept")


def young_daly_seconds(save_seconds: float, mtbf_seconds: float) -> float:
    """Young (1974) / Daly (2006) first-order optimum checkpoint interval: √(2 · C · M)."""
    return math.sqrt(2 * save_seconds * mtbf_seconds)


@dataclass(frozen=True)
class Plan:
    """A job's checkpoint period and the numbers it came from (for the preview)."""

    period: int
    how: str  # one line: the rule and its inputs


def job_step_seconds(job: Any, pod_type: str) -> tuple[float, str] | None:
    """Seconds per step of ``job`` (a ``stackspec.model.Job``) on slices of ``pod_type`` and where the figure comes
    from: the job's ``expectedStepSeconds``, else the seed's measured step for the same model, shape, slices, batch
    and length."""
    if job.expected_step_seconds:
        return job.expected_step_seconds, "expectedStepSeconds"
    if job.trainer is not None:
        return None  # a team's own script: only its declared step time, never a MaxText model's measured one
    return step_seconds(job.model, pod_type, job.slices, job.per_device_batch_size, job.max_target_length)


def step_seconds(model: str, pod_type: str, slices: int, batch: float, length: int) -> tuple[float, str] | None:
    return STEP_SECONDS.get((model, pod_type, slices, float(batch), length))


def elastic_period(save_seconds: float, mtbf_minutes: float, step_s: float, step_source: str,
                   steps: int) -> Plan:
    interval = young_daly_seconds(save_seconds, mtbf_minutes * 60)
    raw = max(1, round(interval / step_s))
    cap = max(1, steps // 2)
    period = min(raw, cap)
    how = (f"Young/Daly: sqrt(2 x {save_seconds:g} s save x {mtbf_minutes:g} min between preemptions) "
           f"= {interval:,.0f} s / {step_s:g} s per step ({step_source}) = {raw} steps")
    if period < raw:
        how += f", capped at half the run ({steps} steps) = {period}"
    return Plan(period, how)


# Multi-tier checkpointing's local tier (workloads/multitier.py, an unverified opt-in): each host writes its share
# of the train state to its in-memory volume and a restore reads it back from there (or a peer's), not from the
# bucket. Neither rate is published for a v6e host and none is measured here: an assumption the plan names.
LOCAL_BYTES_PER_S = 5e9


def daly_seconds(save_seconds: float, mtbf_seconds: float, restart_seconds: float) -> float:
    """Daly (2006) first-order optimum checkpoint interval with the restart time: √(2 · δ · (M + R))."""
    return math.sqrt(2 * save_seconds * (mtbf_seconds + restart_seconds))


def multi_tier_period(bytes_per_host: float, mtbf_minutes: float, step_s: float, step_source: str,
                      steps: int) -> Plan:
    """The local tier's checkpoint period: Daly's optimum with the local save and restore (host memory, not the
    bucket), and what a preemption then costs on average: the restore plus half a period redone."""
    save = restore = bytes_per_host / LOCAL_BYTES_PER_S
    interval = daly_seconds(save, mtbf_minutes * 60, restore)
    raw = max(1, round(interval / step_s))
    period = min(raw, max(1, steps // 2))
    lost = restore + period * step_s / 2
    how = (f"Daly: sqrt(2 x {save:.2g} s local save x ({mtbf_minutes:g} min between preemptions + {restore:.2g} s "
           f"local restore)) = {interval:,.0f} s / {step_s:g} s per step ({step_source}) = {raw} steps"
           + (f", capped at half the run = {period}" if period < raw else "")
           + f"; a preemption then costs {lost:,.0f} s on average (restore + half a period); "
           f"local rate assumed {LOCAL_BYTES_PER_S / 1e9:g} GB/s per host, unverified")
    return Plan(period, how)
