"""The trainer's CompiledStep: MaxText's train step called through the executable its train loop compiled.

Real JAX on CPU (a small jitted function), and MaxText's installed train loop read for the calls the hook relies on.
"""

from __future__ import annotations

import importlib.util
import inspect

import pytest

from workloads.trainer_args import TRAINER_SCRIPT

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _load_script():
    s = importlib.util.spec_from_file_location("maxtext_trainer", TRAINER_SCRIPT)
    module = importlib.util.module_from_spec(s)
    s.loader.exec_module(module)
    return module


class CountingJit:
    """``jax.jit(f)`` whose own calls are counted (``lower`` and the rest go to the real one)."""

    def __init__(self, fn):
        self.jitted = jax.jit(fn)
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.jitted(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.jitted, name)


def step_fn(state, batch):
    return state + batch.sum(), {"loss": (batch * 2.0).mean()}


def test_steps_run_in_the_executable_the_loop_compiled():
    mt = _load_script()
    spy = CountingJit(step_fn)
    step = mt.CompiledStep(spy)
    shaped = (jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.float32))
    compiled = step.lower(*shaped).compile()  # as MaxText's train_loop does, before its first step
    assert step.compiled is compiled
    state = jnp.float32(0.0)
    for i in range(3):
        state, metrics = step(state, jnp.full((4,), float(i + 1)))
    assert float(state) == 4 * (1 + 2 + 3) and float(metrics["loss"]) == 6.0
    assert spy.calls == 0, "a step went through the jitted function (a second trace and lowering) instead"


def test_a_call_the_executable_refuses_goes_to_the_jitted_step(capsys):
    mt = _load_script()
    spy = CountingJit(lambda state, batch: (state + sum(b.sum() for b in batch), {}))
    step = mt.CompiledStep(spy)
    step.lower(jax.ShapeDtypeStruct((), jnp.float32), (jax.ShapeDtypeStruct((2,), jnp.float32),)).compile()
    # Another pytree (two arrays where one was compiled): Compiled.call raises TypeError before running anything.
    state, _ = step(jnp.float32(1.0), (jnp.ones(2), jnp.ones(2)))
    assert float(state) == 5.0 and spy.calls == 1 and step.compiled is None
    assert "differ from the compiled ones" in capsys.readouterr().out
    step(jnp.float32(1.0), (jnp.ones(2),))
    assert spy.calls == 2  # from then on, the jitted step


def test_without_a_compile_the_jitted_step_runs():
    # MaxText's compiled_trainstep_file path: train_loop never calls lower(); every call is the jitted function's.
    mt = _load_script()
    spy = CountingJit(step_fn)
    step = mt.CompiledStep(spy)
    state, _ = step(jnp.float32(0.0), jnp.ones(4))
    assert float(state) == 4.0 and spy.calls == 1


def test_maxtext_train_loop_calls_what_the_hook_wraps():
    """MaxText 0.2.1's train_loop takes its step from train_utils.jit_train_and_eval_step (a module attribute the
    trainer replaces), compiles it with lower(...).compile() and calls it: an upgrade that moves any of these fails
    here, not as a silently slower first step."""
    spec = importlib.util.find_spec("maxtext.trainers.pre_train.train")  # read, not imported (MaxText's import is slow)
    text = open(spec.origin).read()
    source = text[text.index("def train_loop("):text.index("\ndef ", text.index("def train_loop(") + 1)]
    assert "train_utils.jit_train_and_eval_step(" in source
    assert "p_train_step.lower(state, shaped_batch, init_rng).compile()" in source
    assert "p_train_step(state, example_batch, nextrng)" in source
    assert "p_train_step.lower(" in inspect.getsource(_load_script()._precompile)
