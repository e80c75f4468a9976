"""A job's own trainer: a team's Ray Train script instead of MaxText (``jobs[].trainer``).

    tpu-multislice:jobs:
      - name: tiny-own
        mode: elastic
        trainer:
          script: trainers/tiny_jax.py   # a file of this repository defining train_loop_per_worker(config)
          config: {learning_rate: 0.1}            # handed to it beside steps, checkpoint_period, run_name, output_dir
          image: us-east5-docker.pkg.dev/p/r/own@sha256:...   # optional: its workers' image (dedicated jobs)

The script runs under the same Ray Train JaxTrainer, queue, checkpoint storage and drills as a MaxText job
(workloads/trainer/custom_trainer.py); docs/trainers.md says what the function receives and reports.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from . import limits

ROOT = Path(__file__).resolve().parents[1]
# A ConfigMap holds at most 1 MiB of data (Kubernetes: "The data stored in a ConfigMap cannot exceed 1 MiB"); the
# script travels in the stack's trainer ConfigMap beside the driver, so a script keeps well under it.
MAX_SCRIPT_BYTES = 256 * 1024


class Trainer(BaseModel):
    """A team's own train loop: a script of the repository, its settings, and optionally its workers' image."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
                              allow_inf_nan=False)

    script: str
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    image: str | None = None
    # One checkpoint's size in GB, for the storage estimate and the bucket budget (the job's expectedStepSeconds is
    # its step time): a script's state is its own, so nothing here can work it out. Unset: shown as unknown.
    checkpoint_gb: float | None = Field(None, gt=0)

    @field_validator("script")
    @classmethod
    def _script(cls, v: str) -> str:
        path = Path(v)
        if path.is_absolute() or ".." in path.parts or path.suffix != ".py":
            raise ValueError("a .py file of this repository, as a relative path (trainers/tiny_jax.py)")
        full = ROOT / path
        if full.exists() and not full.resolve().is_relative_to(ROOT):
            # A symbolic link out of the checkout: the ConfigMap would carry a file the repository does not hold.
            raise ValueError(f"a file of this repository; {v} leads outside it")
        if not full.is_file():
            raise ValueError(f"no such file in the repository ({full.relative_to(ROOT)})")
        size = full.stat().st_size
        if size > MAX_SCRIPT_BYTES:
            raise ValueError(f"{size} bytes; at most {MAX_SCRIPT_BYTES} (it travels in a ConfigMap, 1 MiB in all)")
        if "def train_loop_per_worker(" not in full.read_text(errors="replace"):
            raise ValueError("defines no train_loop_per_worker(config) (docs/trainers.md)")
        return v

    @field_validator("image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        # The grammar of every image key (limits.image_reference, distribution/reference's: a tag beside the digest
        # and go-digest's other algorithms are legal), and by digest: a tag can move under a run, and Binary
        # Authorization admits images by digest.
        if v is None:
            return v
        if msg := limits.image_reference(v):
            raise ValueError(msg)
        if "@" not in v:
            raise ValueError("an image by digest, <registry>/<path>[:tag]@sha256:<64 hex> (a tag can move under a run)")
        return v

    @field_validator("config")
    @classmethod
    def _config(cls, v: dict) -> dict:
        reserved = sorted(set(v) & RESERVED)
        if reserved:
            raise ValueError(f"{', '.join(reserved)}: set by the job itself (steps, checkpointPeriod, its run)")
        return v


# What the job hands the script itself (workloads/custom_trainer_args.py); the trainer's config may not set them.
RESERVED = frozenset({"steps", "checkpoint_period", "run_name", "base_output_directory", "output_dir", "local"})
