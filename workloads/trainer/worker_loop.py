"""The training worker's loop (``train_loop_per_worker``, one per TPU host): MaxText's pre-training loop with the
hooks the trainer adds (progress lines, the writer lease around MaxText's save, local jax.distributed, a drill's
slow commit). Shipped beside ``maxtext_trainer.py`` in the trainer ConfigMap; Ray ships it to the workers by
value (``maxtext_trainer.ship_modules``)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from maxtext_imports import defer_unused_imports
from progress_lines import PROGRESS
from restart_precompile import CompiledStep, precompile_restart_shape, watch_precompile
from warm_spares import keep_warm_spare

# --local: the global batch stays this size whatever the worker count (per-device batch =
# this / workers), so a run resized or resharded from N to M workers sees the same batches
# (MaxText's synthetic data is one fixed batch) and the same loss curve.
LOCAL_GLOBAL_BATCH = 12

# --------------------------------------------------------------------------- workers

# Multislice coordination that the pods carry statically (as the seed's manifest does).
MEGASCALE_KEYS = ("MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID")


def clear_stale_megascale(world_size: int, hosts_per_slice: int) -> list[str]:
    """On a one-slice worker group (an elastic job after a preemption) drop MEGASCALE_*.

    Ray Train sets these per worker only when the group spans several slices; a pod's
    static ``MEGASCALE_NUM_SLICES=2`` would otherwise make libtpu wait for a second slice
    that is gone. Called before MaxText first touches the TPU backend.
    """
    if world_size > hosts_per_slice:
        return []
    dropped = [k for k in MEGASCALE_KEYS if k in os.environ]
    for k in dropped:
        del os.environ[k]
    return dropped


def committed_checkpoint_steps(checkpoint_dir: str) -> list[int]:
    """Steps with a committed checkpoint: Orbax renames ``<step>.orbax-checkpoint-tmp-*``
    to ``<step>`` only when every host has finished writing it."""
    from etils import epath  # ships with orbax, a MaxText dependency; handles gs:// too

    path = epath.Path(checkpoint_dir)
    if not path.exists():
        return []
    return sorted(int(p.name) for p in path.iterdir() if p.name.isdigit() and p.is_dir())


def _init_local_jax_distributed() -> None:
    """CPU SPMD: rank 0 picks a coordinator port; every worker joins it."""
    import socket

    import jax
    import ray
    import ray.train
    from ray.train.collective import broadcast_from_rank_zero

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    address = None
    if rank == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        address = f"{ray.util.get_node_ip_address()}:{port}"
    address = broadcast_from_rank_zero(address)
    print(f"rank {rank}/{world}: jax.distributed coordinator {address}", flush=True)
    jax.distributed.initialize(coordinator_address=address, num_processes=world, process_id=rank)


def delay_checkpoint_commits(seconds: float, held: dict) -> None:
    """--save-commit-delay: Orbax renames ``<step>.orbax-checkpoint-tmp-*`` to ``<step>`` only
    after this pause (a slow bucket), so a drill can kill a worker with a save in flight.
    Only while ``held["on"]``: a restarted worker group (past the kill) saves at full speed."""
    import asyncio

    from orbax.checkpoint._src.path import atomicity

    cls = atomicity.AtomicRenameTemporaryPath
    orig = getattr(cls, "_slicectl_finalize", cls.finalize)

    async def finalize(self):
        if held["on"]:
            await asyncio.sleep(seconds)
        await orig(self)

    cls._slicectl_finalize = orig
    cls.finalize = finalize


def process_start_time() -> float:
    """This process's start, in epoch seconds (Linux: /proc/self/stat's starttime, clock ticks after boot)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def train_loop_per_worker(config: dict) -> None:
    import ray.train

    t_up = time.time()
    local = config["local"]
    if local:
        os.environ["JAX_PLATFORMS"] = "cpu"
    t_import = time.time()
    # The process's own start, and when warm_worker's preload finished in it (None: not preloaded): a spare is a
    # process that was started, and ready, before the failure it serves (the drill judges that, not this flag).
    preload = sys.modules.get("warm_worker")
    ready_at = getattr(preload, "READY_AT", None)
    warm = ready_at is not None
    defer_unused_imports()
    import jax
    from maxtext.common import checkpointing
    from maxtext.common.metric_logger import MetricLogger
    from maxtext.trainers.pre_train import train as maxtext_train

    base = config["base_yml"]
    if base is None:
        import importlib.util

        # maxtext is a namespace package (no __init__.py, no __file__).
        pkg = importlib.util.find_spec("maxtext").submodule_search_locations[0]
        base = os.path.join(pkg, "configs", "base.yml")
    settings = dict(config["settings"])
    rank = ray.train.get_context().get_world_rank()
    world = ray.train.get_context().get_world_size()
    if local:
        # Cache every compilation (JAX skips those under a second by default: all of a tiny
        # model's) in the persistent cache MaxText's jax_cache_dir names.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        settings["per_device_batch_size"] = str(max(1, LOCAL_GLOBAL_BATCH // world))
    # The first attempt's saves are held (--save-commit-delay); get_first_step below says which.
    held = {"on": True}
    if local and config.get("save_commit_delay"):
        delay_checkpoint_commits(config["save_commit_delay"], held)
    if not local and (dropped := clear_stale_megascale(world, config["hosts_per_slice"])):
        print(f"rank {rank}: one slice in this worker group, dropped {dropped}", flush=True)
    delay = config["step_delay"]
    seen: dict = {"start_step": None, "last_step": None, "loss": None, "steps_run": 0, "cfg": None}

    def emit(kind: str, every_rank: bool = False, **fields) -> None:
        """A progress line: rank 0's, or with ``every_rank`` each rank's (stamped with its rank)."""
        if rank == 0 or every_rank:
            line = json.dumps({"event": kind, "t": round(time.time(), 3), "world": world, "rank": rank} | fields)
            print(f"{PROGRESS} {line}", flush=True)

    # Every rank's process and spare request, with its node: the drills judge each restarted rank's process by the
    # spare its own node was asked for (drills.local.restart_on_own_spares), not rank 0's alone.
    node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None  # never a Ray of its own
    emit("worker_up", every_rank=True, t_up=round(t_up, 3), warm=warm, pid=os.getpid(), node=node_id,
         proc_start=round(process_start_time(), 3), ready_at=None if ready_at is None else round(ready_at, 3))
    emit("imported", import_s=round(time.time() - t_import, 1), warm=warm)
    if local:
        _init_local_jax_distributed()
        emit("distributed")

    # Hooks on functions MaxText 0.2.1's train_loop calls (no copy of the loop):
    # get_first_step once (the restored step), maybe_save_checkpoint after every step,
    # MetricLogger.log_metrics for the loss (one step behind: MaxText buffers metrics).
    orig_first_step = maxtext_train.get_first_step
    orig_save = checkpointing.maybe_save_checkpoint
    orig_log = MetricLogger.log_metrics

    def first_step(state):
        step = orig_first_step(state)
        seen["start_step"] = step
        held["on"] = step == 0
        emit("start", start_step=step, global_batch=int(settings.get("per_device_batch_size", 1)) * world
             if local else None)
        return step

    guard = config.get("lease_guard")
    check_lease = guard(lambda: None) if guard else None

    def save(checkpoint_manager, state, cfg, data_iterator, step=None):
        seen["cfg"] = cfg
        if check_lease is None:
            orig_save(checkpoint_manager, state, cfg, data_iterator, step)
        else:
            # Orbax's save decision taken once and pinned for MaxText's call (save_decided_once): asked again
            # inside Orbax's save it may answer otherwise (an async save that finished meanwhile, a time-based
            # policy, a preemption noticed in between) and write without the lease's check.
            with save_decided_once(checkpoint_manager, state, cfg, step) as writes:
                if writes:
                    check_lease()  # raises before MaxText's save, outside its handler (lease.guarded)
                    # Past the lease's check: the drills check each against the driver's lease.
                    emit("saving", step=None if step is None else int(step))
                orig_save(checkpoint_manager, state, cfg, data_iterator, step)
        if step is not None:
            seen["last_step"] = int(step)
            seen["steps_run"] += 1
            emit("step", step=int(step))
            if local and rank == 0 and seen["steps_run"] == 1 and world == 2 and config.get("warm_workers"):
                # The restart after one lost slice runs on one worker: its train step is compiled now,
                # in a process of that shape, into the persistent cache the restart reads (the 10 s of
                # "imported -> restored" of a cold cache, drills' figures), while this run trains.
                proc = precompile_restart_shape(argv_for(world - 1), world - 1)
                emit("precompile_started", shape=world - 1)
                watch_precompile(proc, lambda rc, error: emit("precompile_failed", shape=world - 1, rc=rc,
                                                              error=error))
            if config.get("warm_workers") and seen["steps_run"] == 1:
                # After this attempt's first step, not at its start: the spare's import (seconds of CPU) then
                # competes with training, not with this restore. A raylet's refusal (grpc.RpcError: auth, an
                # unknown job) is reported as an event the drills count and fail on; training goes on, as the
                # spare only speeds the next restart. Anything else is a fault of this code: it fails the run.
                import grpc

                try:
                    keep_warm_spare()
                    emit("spare_requested", every_rank=True, node=node_id)
                except grpc.RpcError as e:
                    error = f"{e.code().name}: {e.details()}" if hasattr(e, "code") else str(e)
                    print(f"rank {rank}: warm spare refused by this node's raylet: {error}", flush=True)
                    emit("spare_refused", every_rank=True, node=node_id, error=error)
            if delay:
                time.sleep(delay)

    def log_metrics(self, metrics, step, is_training):
        orig_log(self, metrics, step, is_training)
        if is_training:
            loss = float(metrics["scalar"]["learning/loss"])
            seen["loss"] = loss
            emit("loss", step=int(step), loss=loss)

    orig_load = checkpointing.load_state_if_possible

    def load_state(*a, **kw):
        # The checkpoint read itself (Orbax's restore), apart from the setup around it.
        t = time.time()
        out = orig_load(*a, **kw)
        emit("checkpoint_read", read_s=round(time.time() - t, 3))
        return out

    # Where a (re)start's setup goes (the drill's "imported -> restored" phase): MaxText's config and
    # initialisation, setup_train_loop (mesh, state init, the checkpoint restore), then the train step's
    # lowering and compilation (from setup_train_loop's return to get_first_step). Progress events only.
    orig_initialize = maxtext_train.initialize
    orig_setup = maxtext_train.train_utils.setup_train_loop

    def timed(name, fn):
        def run(*a, **kw):
            t = time.time()
            out = fn(*a, **kw)
            emit("phase", phase=name, s=round(time.time() - t, 3))
            return out
        return run

    orig_jit_steps = maxtext_train.train_utils.jit_train_and_eval_step

    def jit_steps(*a, **kw):
        p_train_step, p_eval_step = orig_jit_steps(*a, **kw)
        return CompiledStep(p_train_step), p_eval_step

    if local:
        # Local (CPU) runs only, the drills that measured it: on a TPU cluster MaxText's own jitted call stays (a
        # path no TPU run here has tried: the project's rule for what cannot be verified here).
        maxtext_train.train_utils.jit_train_and_eval_step = jit_steps
    maxtext_train.initialize = timed("maxtext_initialize", orig_initialize)
    maxtext_train.train_utils.setup_train_loop = timed("setup_train_loop", orig_setup)
    maxtext_train.get_first_step = first_step
    checkpointing.maybe_save_checkpoint = save
    checkpointing.load_state_if_possible = load_state
    MetricLogger.log_metrics = log_metrics
    def argv_for(n: int) -> list[str]:
        shaped = settings | ({"per_device_batch_size": str(max(1, LOCAL_GLOBAL_BATCH // n))} if local else {})
        return ["maxtext_trainer.py", base] + [f"{k}={v}" for k, v in shaped.items()]

    argv = argv_for(world)
    try:
        maxtext_train.main(argv)
    finally:
        maxtext_train.get_first_step = orig_first_step
        maxtext_train.initialize = orig_initialize
        maxtext_train.train_utils.setup_train_loop = orig_setup
        maxtext_train.train_utils.jit_train_and_eval_step = orig_jit_steps
        checkpointing.maybe_save_checkpoint = orig_save
        checkpointing.load_state_if_possible = orig_load
        MetricLogger.log_metrics = orig_log
        if local:
            jax.distributed.shutdown()

    # MaxText turns a failed checkpoint save into StopTraining and a normal return:
    # a run only succeeded if it reached its last step and that step is committed.
    cfg = seen["cfg"]
    if cfg is None:
        raise RuntimeError("MaxText returned without running a single step")
    final = int(cfg.steps) - 1
    ckpt_dir = os.path.join(cfg.base_output_directory, cfg.run_name, "checkpoints")
    committed = committed_checkpoint_steps(ckpt_dir) if cfg.enable_checkpointing else []
    if seen["last_step"] != final and seen["start_step"] != final + 1:
        raise RuntimeError(
            f"training stopped early: last step {seen['last_step']}, expected {final}; "
            f"committed checkpoints in {ckpt_dir}: {committed[-3:]}"
        )
    if cfg.enable_checkpointing and cfg.save_checkpoint_on_completion:
        if not committed or committed[-1] != final:
            raise RuntimeError(
                f"final checkpoint missing: expected step {final} committed in {ckpt_dir}, "
                f"found {committed[-3:] or 'none'}"
            )
    metrics = {
        "start_step": seen["start_step"], "final_step": seen["last_step"], "loss": seen["loss"],
        "steps_run": seen["steps_run"], "checkpoint_step": committed[-1] if committed else None,
        "world_size": world,
    }
    emit("done", **metrics)
    ray.train.report(metrics)


@contextlib.contextmanager
def save_decided_once(checkpoint_manager, state, config, step=None):
    """Whether this call of MaxText's ``maybe_save_checkpoint`` writes a checkpoint, decided once, the decision
    pinned on the checkpoint manager while the call runs (yields it), so only a call that writes waits for the
    lease and no call writes past it. MaxText saves its ``actual_step`` (the last completed one when ``step`` is
    None) forced on the final call unless it is a period's step, else when Orbax's ``CheckpointManager.save``
    decides to (maxtext 0.2.1 common/checkpointing.py:714-732 and 747-800, ``checkpoint_manager.save(step, ...,
    force)``; orbax checkpoint_manager.py:1417 ``if not force and not self.should_save(step): return False``).
    ``should_save`` is not a pure function of the step: it reads whether a save is in progress and the time
    (orbax ``ContinuousCheckpointingPolicy``, MaxText's ``enable_continuous_checkpointing``) and the preemption
    sync point. So its first answer is the one Orbax's save gets for this step (an instance attribute shadowing
    the method), not a second asking that could write after a check that said no save."""
    if checkpoint_manager is None:
        yield False
        return
    actual = (int(state.step) - 1) if step is None else int(step)
    force = step is None and actual != -1 and actual % config.checkpoint_period != 0
    should = bool(checkpoint_manager.should_save(actual))
    real = checkpoint_manager.should_save
    shadowed = "should_save" in vars(checkpoint_manager)
    checkpoint_manager.should_save = lambda s: should if int(s) == actual else real(s)
    try:
        yield force or should
    finally:
        if shadowed:
            checkpoint_manager.should_save = real
        else:
            del checkpoint_manager.should_save
