"""MaxText's modules as the trainer reaches them, replaced by stand-ins, for the tests that run
``train_loop_per_worker`` in-process (tests/test_lease.py, tests/test_compiled_step.py).

The trainer calls MaxText through these names only (workloads/trainer/maxtext_trainer.py): ``maxtext.common``'s
``checkpointing`` (``maybe_save_checkpoint``, ``load_state_if_possible``) and ``metric_logger.MetricLogger``, and
``maxtext.trainers.pre_train.train``'s ``main``, ``get_first_step``, ``initialize`` and ``train_utils``
(``setup_train_loop``, ``jit_train_and_eval_step``), as maxtext 0.2.1's modules have them; Ray Train's worker
context is rank 0 of 1. ``jax`` is an empty module: the trainer's cluster path only imports it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StandIns:
    checkpointing: types.ModuleType
    train: types.ModuleType
    saved: list[tuple] = field(default_factory=list)  # the maybe_save_checkpoint calls that reached MaxText's save
    original_save: Callable[..., Any] | None = None
    original_initialize: Callable[..., Any] | None = None


def install(monkeypatch, main: Callable[[list[str]], None], train_utils: Any = None) -> StandIns:
    """The stand-in module tree in ``sys.modules`` (undone by ``monkeypatch``), ``train.main`` = ``main``.
    ``train_utils``: MaxText's ``train_utils`` as the test needs it (default: one whose steps are None)."""
    import ray.train

    saved: list[tuple] = []
    checkpointing = types.ModuleType("maxtext.common.checkpointing")
    checkpointing.maybe_save_checkpoint = lambda *a, **kw: saved.append(a)
    checkpointing.load_state_if_possible = lambda *a, **kw: None
    train = types.ModuleType("maxtext.trainers.pre_train.train")
    train.get_first_step = lambda state: 0
    # The names the trainer times a (re)start's setup through and takes the train step from, as MaxText's train
    # module has them (maxtext/trainers/pre_train/train.py: `def initialize`, `from maxtext.utils import train_utils`).
    train.initialize = lambda argv: (None, None, None)
    train.train_utils = train_utils or types.SimpleNamespace(setup_train_loop=lambda *a, **kw: None,
                                                             jit_train_and_eval_step=lambda *a, **kw: (None, None))
    train.main = main
    metric_logger = types.ModuleType("maxtext.common.metric_logger")
    metric_logger.MetricLogger = type("MetricLogger", (), {"log_metrics": lambda self, *a: None})
    common = types.ModuleType("maxtext.common")
    common.checkpointing, common.metric_logger = checkpointing, metric_logger
    pre_train = types.ModuleType("maxtext.trainers.pre_train")
    pre_train.train = train
    for name, module in {"maxtext.common": common, "maxtext.common.checkpointing": checkpointing,
                         "maxtext.common.metric_logger": metric_logger, "maxtext.trainers": types.ModuleType("t"),
                         "maxtext.trainers.pre_train": pre_train, "maxtext.trainers.pre_train.train": train,
                         "jax": types.ModuleType("jax")}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))  # the trainer's deferred-import finder
    context = types.SimpleNamespace(get_world_rank=lambda: 0, get_world_size=lambda: 1)
    monkeypatch.setattr(ray.train, "get_context", lambda: context)
    monkeypatch.setattr(ray.train, "report", lambda metrics: None)
    return StandIns(checkpointing, train, saved, checkpointing.maybe_save_checkpoint, train.initialize)
