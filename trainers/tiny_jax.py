"""A team's own trainer, the smallest that is real: a two-layer JAX model fitting a fixed function, data parallel
across the Ray Train workers, with checkpoints it resumes from. Runs under ``slicectl train --local`` (CPU) as
under a RayJob on TPU slices (docs/trainers.md).

What the platform hands it (``config``): ``steps``, ``checkpoint_period``, ``run_name``, ``output_dir``, ``local``
and the job's ``trainer.config`` (here ``learning_rate``, ``width``, ``seed``). What it gives back: one
``ray.train.report({"step", "loss"}, checkpoint=...)`` per step on every worker (rank 0 attaches the checkpoint
every ``checkpoint_period`` steps and at the last), and it resumes from ``ray.train.get_checkpoint()``.

The global batch is fixed and split across the workers, and each step averages the workers' gradients through
files in the run's output directory, so a run restarted on fewer workers (an elastic job after a preemption)
continues the same loss curve from its last checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

GLOBAL_BATCH = 64


def _data(seed: int):
    import jax
    import jax.numpy as jnp

    x = jax.random.normal(jax.random.PRNGKey(seed), (GLOBAL_BATCH, 8))
    y = jnp.sin(x @ jnp.arange(1.0, 9.0) / 8.0)[:, None]
    return x, y


def _init(seed: int, width: int):
    import jax

    k1, k2 = jax.random.split(jax.random.PRNGKey(seed + 1))
    return {"w1": jax.random.normal(k1, (8, width)) * 0.3, "w2": jax.random.normal(k2, (width, 1)) * 0.3}


def _loss(params, x, y):
    import jax.numpy as jnp

    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"] - y) ** 2)


def _allreduce(grads, step: int, rank: int, world: int, where: str):
    """The workers' mean gradient: each writes its own, then reads everyone's (a shared directory: the run's output
    on the bucket mount on GKE, the run directory locally). Small and dependency-free; a real trainer would use
    jax.distributed collectives instead."""
    import numpy as np

    os.makedirs(where, exist_ok=True)
    mine = os.path.join(where, f"g-{step}-{world}-{rank}.npz")
    np.savez(mine + ".tmp.npz", **{k: np.asarray(v) for k, v in grads.items()})
    os.replace(mine + ".tmp.npz", mine)
    paths = [os.path.join(where, f"g-{step}-{world}-{r}.npz") for r in range(world)]
    deadline = time.time() + 300
    while not all(os.path.exists(p) for p in paths):
        if time.time() > deadline:
            raise TimeoutError(f"step {step}: not every worker's gradient arrived in {where}")
        time.sleep(0.01)
    loaded = [dict(np.load(p)) for p in paths]
    return {k: sum(g[k] for g in loaded) / world for k in grads}


def train_loop_per_worker(config: dict) -> None:
    import jax
    import numpy as np
    import ray.train

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    steps, period = int(config["steps"]), int(config["checkpoint_period"])
    lr, width, seed = float(config.get("learning_rate", 0.1)), int(config.get("width", 16)), int(config.get("seed", 0))
    x, y = _data(seed)
    params, start = _init(seed, width), 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            params = {k: jax.numpy.asarray(v) for k, v in np.load(os.path.join(d, "params.npz")).items()}
            with open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["step"] + 1
    # This worker's share of the fixed global batch.
    shard = slice(rank * GLOBAL_BATCH // world, (rank + 1) * GLOBAL_BATCH // world)
    grad = jax.jit(jax.value_and_grad(_loss))
    exchange = os.path.join(config["output_dir"], "grads")
    for step in range(start, steps):
        _, g = grad(params, x[shard], y[shard])
        g = _allreduce(g, step, rank, world, exchange)
        params = {k: params[k] - lr * g[k] for k in params}
        loss = float(_loss(params, x, y))  # on the whole batch: the same figure on every worker
        save = rank == 0 and ((step + 1) % period == 0 or step == steps - 1)
        if save:
            with tempfile.TemporaryDirectory() as d:
                np.savez(os.path.join(d, "params.npz"), **{k: np.asarray(v) for k, v in params.items()})
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step, "loss": loss}, f)
                ray.train.report({"step": step, "loss": loss}, checkpoint=ray.train.Checkpoint.from_directory(d))
        else:
            ray.train.report({"step": step, "loss": loss})
