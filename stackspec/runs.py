"""A job's MaxText run name, derived from what makes a checkpoint fit the job.

MaxText restores the latest checkpoint under ``<base_output_directory>/<run_name>/`` when a
run starts. A fixed run name is unsafe under a GitOps loop: a RayJob created again (replaced,
or refreshed after KubeRay cleaned it up) finds the earlier run's final checkpoint, restores
the last step, trains nothing and reports success; a job whose model, mesh or batch changed
tries to restore a checkpoint that does not fit it. So the name is
``<job name>-<8 hex of sha256(canonical JSON of the compatible settings)>``:

- the same stack renders the same name (no time, sorted keys, canonical numbers);
- raising ``steps`` keeps it (the run continues from its last checkpoint);
- a changed model, ICI/DCN mesh, per-device batch, sequence length, dataset or model-shape
  setting, or an explicit ``rerun`` value, starts a fresh run under a new name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

HASH_CHARS = 8
# MaxText passthrough keys that change what a checkpoint holds or what data order it resumes:
# dataset and tokenizer settings, and keys that change the parameter tree or its dtypes.
DATA_KEY_PREFIXES = ("dataset_", "hf_", "grain_", "tfds_", "tokenizer_", "train_data", "eval_")
DATA_KEYS = frozenset({"dataset_type", "dataset_path", "dataset_name", "train_split", "add_bos", "add_eos",
                       "packing", "data_shuffle_seed", "vocab_size"})
SHAPE_KEY_PREFIXES = ("base_", "num_experts", "quantization")
SHAPE_KEYS = frozenset({"weight_dtype", "opt_type", "mu_dtype", "head_dim", "decoder_block", "mlp_activations",
                        "logits_via_embedding", "scan_layers", "num_vocab_tiling", "use_iota_embed"})


def checkpoint_keys(maxtext: Mapping[str, str]) -> dict[str, str]:
    """The passthrough settings a checkpoint depends on (dataset, tokenizer, parameter tree)."""
    def relevant(k: str) -> bool:
        return k in DATA_KEYS or k in SHAPE_KEYS or k.startswith(DATA_KEY_PREFIXES + SHAPE_KEY_PREFIXES)

    return {k: str(v) for k, v in sorted(maxtext.items()) if relevant(k)}


def _num(v: float | int) -> int | float:
    # 4 and 4.0 are the same batch: one JSON spelling for both.
    return int(v) if float(v).is_integer() else float(v)


def identity(*, model: str, ici: Mapping[str, int], dcn: Mapping[str, int], per_device_batch_size: float,
             max_target_length: int, maxtext: Mapping[str, str], rerun: int | str | None) -> dict[str, Any]:
    """What the run name hashes: every setting a restored checkpoint must agree with."""
    return {
        "model": model,
        "ici": {k: int(v) for k, v in sorted(ici.items())},
        "dcn": {k: int(v) for k, v in sorted(dcn.items())},
        "per_device_batch_size": _num(per_device_batch_size),
        "max_target_length": int(max_target_length),
        "maxtext": checkpoint_keys(maxtext),
        "rerun": None if rerun is None else str(rerun),
    }


def digest(ident: Mapping[str, Any]) -> str:
    canonical = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_CHARS]


def run_name(job_name: str, ident: Mapping[str, Any]) -> str:
    """``<job name>-<8 hex>``: at most 47 + 9 = 56 characters (KubeRay's RayJob limit plus the hash),
    within MaxText's run-directory and Kubernetes' label-value limit of 63."""
    return f"{job_name}-{digest(ident)}"
