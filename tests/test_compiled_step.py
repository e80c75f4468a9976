"""The trainer's CompiledStep: MaxText's train step called through the executable its train loop compiled.

Real JAX on CPU (a small jitted function), and MaxText's installed train loop read for the calls the hook relies on.
"""

from __future__ import annotations

import importlib.util
import inspect

import maxtext_standin
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


def test_a_sharding_the_executable_refuses_goes_to_the_jitted_step():
    """An argument committed to another device than the one the executable was compiled for: Compiled.call raises
    ValueError (pxla.check_array_xla_sharding_layout_match) where jit recompiles (its in_sharding unspecified, as
    MaxText's rng is). Two CPU devices need a process of their own (the device count is fixed at JAX's start)."""
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import jax, jax.numpy as jnp, maxtext_trainer as mt\n"
        "step = mt.CompiledStep(jax.jit(lambda s, b: (s + b.sum(), {})))\n"
        "step.lower(jnp.float32(0), jnp.ones(2)).compile()\n"
        "d1 = jax.devices()[1]\n"
        "s, _ = step(jax.device_put(jnp.float32(1), d1), jax.device_put(jnp.ones(2), d1))\n"
        "print('state', float(s), 'compiled', step.compiled)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("JAX_", "XLA_"))}
    env |= {"JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": "2"}
    out = subprocess.run([sys.executable, "-c", script, str(Path(TRAINER_SCRIPT).parent)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "state 3.0 compiled None" in out.stdout
    assert "differ from the compiled ones (Computation was compiled for input shardings" in out.stdout


def test_a_tpu_run_keeps_maxtexts_jitted_step(tmp_path, monkeypatch):
    """CompiledStep is for local runs (the drills that measured it); on a cluster (local false) the train loop gets
    MaxText's own jit_train_and_eval_step, unwrapped (a path no TPU run here has tried). train_loop_per_worker runs
    with MaxText's modules replaced by stand-ins whose ``main`` takes the step as MaxText's train_loop does."""
    import sys
    import types
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(TRAINER_SCRIPT).parent))
    import maxtext_trainer

    def jit_train_and_eval_step(*a, **kw):
        return "p_train_step", "p_eval_step"

    seen = []
    train_utils = types.SimpleNamespace(setup_train_loop=lambda *a, **kw: None,
                                        jit_train_and_eval_step=jit_train_and_eval_step)

    def main(argv):  # as train_loop: `p_train_step, p_eval_step = train_utils.jit_train_and_eval_step(...)`
        seen.append(train_utils.jit_train_and_eval_step()[0])
        cfg = types.SimpleNamespace(steps=1, base_output_directory=str(tmp_path), run_name="r",
                                    enable_checkpointing=False, save_checkpoint_on_completion=False)
        sys.modules["maxtext.common"].checkpointing.maybe_save_checkpoint(None, None, cfg, None, 0)

    maxtext_standin.install(monkeypatch, main, train_utils)
    config = {"base_yml": str(tmp_path / "base.yml"), "settings": {}, "local": False, "step_delay": 0,
              "hosts_per_slice": 1, "save_commit_delay": None, "warm_workers": False, "lease_guard": None}
    maxtext_trainer.train_loop_per_worker(config)
    assert seen == ["p_train_step"], f"a cluster run's train step was wrapped: {seen}"
    assert train_utils.jit_train_and_eval_step is jit_train_and_eval_step
