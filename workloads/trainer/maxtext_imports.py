"""MaxText's imports as the training workers take them: the packages a pre-training run never calls deferred
(loaded on first use), and the whole import done ahead of time in a warm spare (``warm_worker.py``). Shipped
beside ``maxtext_trainer.py`` in the trainer ConfigMap."""

from __future__ import annotations

import sys

# Packages MaxText imports at module level that a pre-training run need not call: each is
# loaded on its first attribute access instead of at import (importlib.util.LazyLoader), so
# a run that uses one still gets it. Measured here, importing MaxText takes 17 s with them
# and 9 s without, paid again by every worker restarted after a preemption: the Vertex AI
# SDK (MaxText's Vertex TensorBoard uploader; use_vertex_tensorboard is off unless a job
# sets it), Hugging Face transformers (tokenizers; synthetic data has none), scipy.stats
# (the goodput recorder's statistics).
DEFERRED_IMPORTS = ("google.cloud.aiplatform", "transformers", "scipy.stats")


class _DeferredImports:
    """A meta-path finder that hands out DEFERRED_IMPORTS as lazy modules: the real module runs
    when something first reads an attribute of it, so a run that never does skips its cost."""

    def __init__(self, names: tuple[str, ...]):
        self.names = set(names)

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def defer_unused_imports() -> None:
    if not any(isinstance(f, _DeferredImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _DeferredImports(DEFERRED_IMPORTS))


def preimport() -> None:
    """Import what a Train worker's training function imports (``warm_worker.py`` runs this in idle
    worker processes, so a restarted worker group finds it done), and what Ray Train's worker group start imports
    in the process it takes: the RayTrainWorker actor's module (its class is unpickled by reference as the actor is
    created) and the JAX trainer's backend, whose setup runs on the workers (Ray 2.60 ``ray/train/v2/jax/config.py``).
    Measured after the MaxText imports, at load 28: 2.9 s and 1.2 s, otherwise paid in the restart's "failure -> new
    workers up" ("worker actors created" and "train context initialized" in Ray Train's controller log)."""
    defer_unused_imports()
    import jax  # noqa: F401
    import ray.train.v2._internal.execution.worker_group.worker  # noqa: F401
    import ray.train.v2.jax  # noqa: F401
    from maxtext.common import checkpointing  # noqa: F401
    from maxtext.common.metric_logger import MetricLogger  # noqa: F401
    from maxtext.trainers.pre_train import train  # noqa: F401
