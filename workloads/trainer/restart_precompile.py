"""A restart's compile paid ahead of it (local CPU runs): the restart shape's train step compiled into the
persistent cache in a background process, its failure reported, and MaxText's step called as the executable
compiled ahead of time (``CompiledStep``). Shipped beside ``maxtext_trainer.py`` in the trainer ConfigMap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from maxtext_imports import defer_unused_imports
from progress_lines import PROGRESS


def precompile_restart_shape(argv: list[str], world: int) -> subprocess.Popen:
    """Compile MaxText's train step for a ``world``-worker restart into the persistent compilation cache, in a
    background process (local CPU runs, one process per worker: ``world`` must be 1, the shape after a two-slice
    job loses one).

    JAX's persistent cache keys an executable by its HLO, compile options, devices and backend
    (``jax/_src/cache_key.py``), so the process is shaped as the restarted worker is: CPU JAX with the same
    flags, ``jax.distributed`` initialised for one process, MaxText's own ``initialize`` and ``setup_train_loop``
    from the same arguments, then the ``lower(...).compile()`` MaxText's ``train_loop`` does. Checkpointing is
    off in it (the train step does not depend on it; the run's checkpoints are not touched)."""
    if world != 1:
        raise ValueError(f"precompile_restart_shape: local runs precompile the one-worker shape, not {world}")
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import restart_precompile; "
        "restart_precompile._precompile(json.loads(sys.argv[2]))"
    )
    argv = [a for a in argv if not a.startswith("enable_checkpointing=")] + ["enable_checkpointing=false"]
    env = os.environ | {"JAX_PLATFORMS": "cpu"}
    # stdout stays the worker's (its "precompiled" progress line reaches the driver); stderr is read by
    # watch_precompile, which reports a failure as a progress event instead of leaving it in the worker's log.
    return subprocess.Popen([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__)),
                             json.dumps(argv)], env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace", start_new_session=True)


PRECOMPILE_ERROR_CHARS = 600  # the end of a failed precompile's stderr carried in its progress event


def watch_precompile(proc: subprocess.Popen, on_failure) -> threading.Thread:
    """Wait for a :func:`precompile_restart_shape` process in a daemon thread, echoing its stderr to this worker's
    (the log keeps it); when it exits non-zero, ``on_failure(returncode, the end of its stderr)``: the trainer emits
    that as a ``precompile_failed`` progress event the drills report and fail on."""
    def wait() -> None:
        tail = ""
        for line in proc.stderr:
            sys.stderr.write(line)
            tail = (tail + line)[-PRECOMPILE_ERROR_CHARS:]
        if (rc := proc.wait()) != 0:
            on_failure(rc, tail.strip())

    thread = threading.Thread(target=wait, name="precompile-watch", daemon=True)
    thread.start()
    return thread


def _precompile(argv: list[str]) -> None:
    import socket

    if not os.path.isfile(argv[1]):  # before seconds of imports: a wrong path fails at once, and says so
        raise SystemExit(f"precompile_restart_shape: no MaxText config at {argv[1]}")

    import jax

    defer_unused_imports()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0)
    from flax.linen import partitioning as nn_partitioning
    from maxtext.trainers.pre_train import train
    from maxtext.utils import maxtext_utils, sharding, train_utils

    t = time.time()
    config, recorder, _ = train.initialize(argv)
    (init_rng, _, state_mesh_shardings, model, mesh, _, _, data_loader, rampup_manager, eval_data_iterator,
     state) = train_utils.setup_train_loop(config, recorder)
    params_shardings, state_mesh_shardings = sharding.maybe_update_params_sharding_with_opt(
        config, state_mesh_shardings)
    p_train_step, _ = train_utils.jit_train_and_eval_step(
        config, model, mesh, state, state_mesh_shardings, train.train_step, train.eval_step, eval_data_iterator,
        params_shardings)
    with jax.set_mesh(mesh), nn_partitioning.axis_rules(config.logical_axis_rules):
        if config.shard_optimizer_over_data:
            state = sharding.maybe_shard_with_name(state, state_mesh_shardings, config.shard_mode)
        p_train_step.lower(state, maxtext_utils.get_shaped_batch(config), init_rng).compile()
        # What train_loop's first step compiles besides the step (its synthetic batch and its step's rng, MaxText
        # 0.2.1 train.py:541-543), done once here so that they are in the persistent cache too: measured, a fresh
        # cache's restart otherwise compiles both before its first step (0.7 and 2.2 s at load 20).
        data_loader.load_next_batch(rampup_manager=rampup_manager)
        jax.jit(jax.random.fold_in)(init_rng, 0)
    # The drill waits for this line (its progress stream: this process writes to the worker's stdout) before
    # its kill, as it waits for the spares.
    line = json.dumps({"event": "precompiled", "t": round(time.time(), 3), "world": 1,
                       "s": round(time.time() - t, 3)})
    print(f"{PROGRESS} {line}", flush=True)
    jax.distributed.shutdown()


class CompiledStep:
    """MaxText's jitted train step, called through the executable its train loop compiled ahead of the loop.

    MaxText 0.2.1's ``train_loop`` compiles the step with ``p_train_step.lower(state, shaped_batch, rng).compile()``
    (train.py:522-523) and then calls the jitted function itself (train.py:548). The call's arguments (a real batch,
    the step's rng) do not hit the trace cache of the shaped ones, so the first step traces, lowers and looks the
    step up again (measured on a fresh cache: ``jit(train_step)`` traced twice, the second lowering a persistent-cache
    hit with the first one's key, i.e. the same HLO), before every (re)start's first step. This keeps the ``Compiled``
    that ``lower(...).compile()`` returned and calls it (``jax.stages.Compiled.__call__``); a call it refuses
    (``Compiled.call`` raises TypeError for another pytree, before running anything) goes to the jitted function,
    as before, from then on."""

    def __init__(self, jitted):
        self.jitted = jitted
        self.compiled = None

    def lower(self, *args, **kwargs):
        lowered = self.jitted.lower(*args, **kwargs)
        step = self

        class Lowered:
            def compile(self, *a, **kw):
                step.compiled = lowered.compile(*a, **kw)
                return step.compiled

            def __getattr__(self, name):
                return getattr(lowered, name)

        return Lowered()

    def __call__(self, *args, **kwargs):
        if self.compiled is not None:
            try:
                return self.compiled(*args, **kwargs)
            except (TypeError, ValueError) as e:
                # Compiled.call refuses another pytree with TypeError (jax/_src/stages.py), another shape/dtype
                # with TypeError and a committed argument whose sharding or layout is not the compiled one with
                # ValueError (jax/_src/interpreters/pxla.py MeshExecutable.call: check_arg_avals_for_call,
                # check_array_xla_sharding_layout_match), all before it runs the executable (nothing donated yet).
                # jit recompiles for some of these (an in_sharding left unspecified, as MaxText's rng is): the
                # jitted step then runs or raises its own error.
                print(f"maxtext_trainer: the train step's arguments differ from the compiled ones ({str(e)[:200]}): "
                      "calling the jitted step", flush=True)
                self.compiled = None
        return self.jitted(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.jitted, name)
