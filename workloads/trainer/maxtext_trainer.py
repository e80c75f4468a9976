"""Ray Train V2 JaxTrainer around MaxText's pre-training loop: the RayJob entrypoint.

(Over 600 lines on purpose: it is the one script the trainer ConfigMap mounts and every RayJob runs by its sha256,
so the driver, the worker loop and MaxText's hooks travel as one reviewed file; lease.py and custom_trainer.py
ride beside it only where a job needs them.)

Runs on the Ray head as the job's driver. Self-contained: it imports only ray and
the standard library on the driver; maxtext and jax are imported inside the
training function, on the workers (which install ``maxtext[tpu]==0.2.1`` through
their runtime env on TPU, or share the driver's environment with ``--local``).

    python maxtext_trainer.py --mode {multislice,elastic} \
        [--slices N | --min-slices A --max-slices B] --hosts-per-slice H \
        --chips-per-host C --topology 4x4 --accelerator-type TPU-V6E \
        [--max-failures K] --name RUN_NAME --storage-path PATH \
        [--local] [--step-delay SECONDS] -- [BASE_YML] key=value ...

Workers are whole slices: ``slices * H`` workers (multislice) or the range
``(A*H, B*H)`` (elastic), one per TPU host.

``--local`` runs the same path on CPU: one worker per local "slice" node, a tiny
model, and real multi-process SPMD (Ray Train only sets up ``jax.distributed`` for
TPU/GPU, so the workers do it themselves from rank 0's coordinator address).

Progress lines ``slicectl-progress {json}`` (rank 0, one per step and one at
start) and the final ``slicectl-result {json}`` are for the runner to parse.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time

PROGRESS = "slicectl-progress"
RESULT = "slicectl-result"
# Each local "slice" node carries one unit of this custom resource (the head none), so
# every worker lands on its own slice node, as one worker per TPU host does on GKE.
LOCAL_SLICE_RESOURCE = "local_slice"
WORKER_PACKAGES = ["maxtext[tpu]==0.2.1"]  # also what the repository's Dockerfile installs
UV_PIP_INSTALL_OPTIONS = ["--resolution=lowest"]
# Packages MaxText imports at module level that a pre-training run need not call: each is
# loaded on its first attribute access instead of at import (importlib.util.LazyLoader), so
# a run that uses one still gets it. Measured here, importing MaxText takes 17 s with them
# and 9 s without, paid again by every worker restarted after a preemption: the Vertex AI
# SDK (MaxText's Vertex TensorBoard uploader; use_vertex_tensorboard is off unless a job
# sets it), Hugging Face transformers (tokenizers; synthetic data has none), scipy.stats
# (the goodput recorder's statistics).
DEFERRED_IMPORTS = ("google.cloud.aiplatform", "transformers", "scipy.stats")

# --local: XLA's CPU backend without its expensive LLVM passes. The tiny model's step time does
# not matter here, its compile time does: JAX writes its persistent compilation cache from
# process 0 only, and on CPU every other process compiles a program of its own, so rank 1
# compiles the train step on every start (12 s -> 5 s measured; the steps stay ~0.3 s).
LOCAL_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"

# --local: a model that trains in seconds on one CPU core. These keys win over the
# job's own (a Llama 3 8B on CPU is not a drill); steps, checkpointing, run name and
# output directory come from the job.
LOCAL_MODEL = {
    "model_name": "default",
    "base_num_decoder_layers": "2",
    "base_emb_dim": "64",
    "base_num_query_heads": "2",
    "base_num_kv_heads": "2",
    "base_mlp_dim": "128",
    "head_dim": "32",
    "vocab_size": "256",
    "max_target_length": "64",
    "per_device_batch_size": "1",
    "dataset_type": "synthetic",
    "attention": "dot_product",
    "hardware": "cpu",
    "enable_checkpointing": "true",
    # Ray Train does not start jax.distributed on CPU; the train function does.
    "skip_jax_distributed_system": "true",
}
# --local: the global batch stays this size whatever the worker count (per-device batch =
# this / workers), so a run resized or resharded from N to M workers sees the same batches
# (MaxText's synthetic data is one fixed batch) and the same loss curve.
LOCAL_GLOBAL_BATCH = 12
# Mesh axes are for TPU slices: on CPU every process holds one device and there is
# no slice boundary, so MaxText's defaults (all devices on ICI fsdp) apply.
LOCAL_DROPPED_PREFIXES = ("ici_", "dcn_")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        i = argv.index("--")
        own, maxtext = argv[:i], argv[i + 1:]
    else:
        own, maxtext = argv, []
    p = argparse.ArgumentParser(prog="maxtext_trainer.py", description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=("multislice", "elastic"), required=True)
    p.add_argument("--slices", type=int, help="multislice: number of slices")
    p.add_argument("--min-slices", type=int, help="elastic: fewest slices to train on")
    p.add_argument("--max-slices", type=int, help="elastic: most slices to train on")
    p.add_argument("--hosts-per-slice", type=int, required=True)
    p.add_argument("--chips-per-host", type=int, required=True)
    p.add_argument("--topology", required=True)
    p.add_argument("--accelerator-type", required=True)
    p.add_argument("--max-failures", type=int, default=0)
    p.add_argument("--resize-interval", type=float, default=None,
                   help="elastic: seconds between checks for capacity to grow the worker group "
                        "(Ray's default when omitted)")
    p.add_argument("--name", required=True, help="Ray Train run name")
    p.add_argument("--storage-path", required=True, help="Ray Train run storage")
    p.add_argument("--local", action="store_true", help="CPU: tiny model, one worker per node")
    p.add_argument("--prebuilt-image", action="store_true",
                   help="the workers' image has MaxText installed (the repository's Dockerfile): "
                        "no package install at worker start")
    p.add_argument("--script-sha256", default=None,
                   help="the sha256 this script must have: on a ConfigMap mount, wait for the "
                        "kubelet to refresh a stale copy and re-run the new one")
    p.add_argument("--warm-workers", action="store_true",
                   help="the slice nodes keep idle worker processes with MaxText imported (warm_worker.py) and "
                        "carry the workers' environment: give the workers no runtime env, so a (re)started "
                        "worker group takes those processes instead of starting new ones")
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="--local only: sleep this long after each step (a window for drills)")
    p.add_argument("--save-commit-delay", type=float, default=0.0,
                   help="--local only: hold each checkpoint of the first attempt (the worker "
                        "group that starts at step 0) this long before Orbax commits it (slow "
                        "storage: a window for the kill-during-save drill)")
    p.add_argument("--lease", default=None,
                   help="a writer lease on the run's checkpoints (gs://bucket/run/.writer-lease or a path): wait "
                        "while another copy holds it, stop before a save once it is lost (lease.py beside this script)")
    p.add_argument("--lease-ttl", type=float, default=None,
                   help="--local only: the lease's life in seconds (its save budget and clock-skew margin scaled "
                        "alike), so a drill sees a takeover in seconds, not lease.TTL_S")
    p.add_argument("--verdict-wait", type=float, default=VERDICT_WAIT_S,
                   help="elastic: longest wait, after a failure, for the cluster to declare an "
                        "unreachable node dead before restarting without it")
    args = p.parse_args(own)
    if args.mode == "multislice":
        if not args.slices or args.min_slices or args.max_slices:
            p.error("--mode multislice takes --slices N (and not --min-slices/--max-slices)")
    elif not (args.min_slices and args.max_slices) or args.slices:
        p.error("--mode elastic takes --min-slices A --max-slices B (and not --slices)")
    elif args.min_slices > args.max_slices:
        p.error(f"--min-slices {args.min_slices} is more than --max-slices {args.max_slices}")
    if args.resize_interval is not None and args.mode != "elastic":
        p.error("--resize-interval is for --mode elastic")
    if args.warm_workers and not (args.local or args.prebuilt_image):
        p.error("--warm-workers needs --local or --prebuilt-image: an idle process serves a worker only if the worker "
                "has no runtime env, and without the image the workers install MaxText through one")
    if args.lease_ttl is not None and not (args.local and args.lease):
        p.error("--lease-ttl scales a local drill's --lease; pass it with --local and --lease")
    if (args.step_delay or args.save_commit_delay) and not args.local:
        p.error("--step-delay and --save-commit-delay pace local drills only; pass them with --local")
    if args.hosts_per_slice < 1 or args.chips_per_host < 1:
        p.error("--hosts-per-slice and --chips-per-host must be at least 1")
    return args, maxtext


def split_maxtext(rest: list[str]) -> tuple[str | None, dict[str, str]]:
    """``[BASE_YML] key=value ...`` -> (base.yml path or None, ordered settings)."""
    base = None
    if rest and "=" not in rest[0]:
        base, rest = rest[0], rest[1:]
    settings: dict[str, str] = {}
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"maxtext_trainer.py: MaxText settings are key=value, got {item!r}")
        settings[key] = value
    return base, settings


def local_settings(settings: dict[str, str]) -> dict[str, str]:
    """The job's settings made to run on CPU: tiny model, run-local caches and dumps."""
    out = {k: v for k, v in settings.items() if not k.startswith(LOCAL_DROPPED_PREFIXES)}
    out.update(LOCAL_MODEL)
    run_dir = os.path.join(out.get("base_output_directory", "."), out.get("run_name", "run"))
    # Keep everything this run writes inside its own directory, not $HOME or /tmp.
    out.setdefault("jax_cache_dir", os.path.join(run_dir, "jax_cache"))
    out.setdefault("dump_hlo_local_dir", os.path.join(run_dir, "xla_dump"))
    out.setdefault("dump_jaxpr_local_dir", os.path.join(run_dir, "jaxpr_dump"))
    return out


def num_workers(args: argparse.Namespace) -> int | tuple[int, int]:
    h = args.hosts_per_slice
    if args.mode == "elastic":
        return (args.min_slices * h, args.max_slices * h)
    return args.slices * h


# --------------------------------------------------------------------------- script version

# How long to wait for a ConfigMap mount to show the script a RayJob was rendered with:
# the kubelet refreshes mounted ConfigMaps on its sync period (about a minute by default).
SCRIPT_REFRESH_WAIT_S = 300.0


def file_sha256(path: str) -> str:
    import hashlib

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ensure_script_version(expected: str, path: str, argv: list[str],
                          wait_s: float = SCRIPT_REFRESH_WAIT_S, poll_s: float = 5.0,
                          execv=os.execv) -> None:
    """Return if this script is the ``expected`` one; else wait for the mount to catch up and
    exec the new file with the same arguments, or fail naming both hashes."""
    running = file_sha256(path)
    if running == expected:
        return
    print(f"maxtext_trainer: {path} is sha256 {running[:12]}, the job wants {expected[:12]}: "
          "waiting for the ConfigMap mount to refresh", flush=True)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        time.sleep(poll_s)
        if file_sha256(path) == expected:
            execv(sys.executable, [sys.executable, path, *argv])
    raise SystemExit(f"maxtext_trainer: {path} still has sha256 {file_sha256(path)[:12]} after "
                     f"{wait_s:.0f} s, not {expected[:12]}: is the trainer ConfigMap applied?")


# --------------------------------------------------------------------------- elastic restarts

# After a failure, how long to wait for the cluster (Ray's GCS) to declare a node dead whose
# raylet no longer answers, before restarting without it. A restart sized while the GCS still
# counts the lost node waits for it, times out and spends one of max_failures.
VERDICT_WAIT_S = 60.0
PROBE_TIMEOUT_S = 1.0
# While no restart can be decided, the controller's loop asks again at once (it never awaits):
# pause between questions instead of taking a whole core from the workers.
UNDECIDED_PAUSE_S = 0.5


def raylet_reachable(address: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a node's raylet accepts a connection: a preempted node's does not, well before
    the GCS's health checks (a few missed periods) declare it dead."""
    import socket

    try:
        with socket.create_connection((address, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def verdict_scaling_policy(scaling_config, verdict_wait_s: float = VERDICT_WAIT_S):
    """Ray Train V2's elastic policy, made to restart only at a size the cluster can hold.

    Ray 2.60's ``ElasticScalingPolicy`` sizes a restart from the autoscaling coordinator's
    reservation, which refreshes its node list every 20 s (``TICK_INTERVAL_S``): right after a
    preemption it still counts the lost node, the worker group waits for it until
    ``RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S`` and that failed start spends one of
    ``max_failures``. This policy (1) waits, while any node the GCS calls alive has a raylet
    that does not answer, for the GCS's verdict (at most ``verdict_wait_s``, then leaves the
    node out), and (2) asks the coordinator for a reservation recomputed from the current node
    list (``recompute=True``) instead of the last tick's.
    """
    import logging

    import ray
    from ray.train.v2._internal.execution.scaling_policy import ElasticScalingPolicy, NoopDecision
    from ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client import (
        AUTOSCALING_REQUESTS_GET_TIMEOUT_S,
    )

    log = logging.getLogger("ray.train")

    class VerdictElasticScalingPolicy(ElasticScalingPolicy):
        def __init__(self, config, wait_s: float):
            super().__init__(config)
            self.verdict_wait_s = wait_s
            self._suspect_since: dict[str, float] = {}
            self._excluded: set[str] = set()

        def _unreachable_alive_nodes(self) -> list[str]:
            return [n["NodeID"] for n in ray.nodes()
                    if n.get("Alive") and n.get("NodeManagerPort")
                    and not raylet_reachable(n["NodeManagerAddress"], n["NodeManagerPort"])]

        def make_decision_for_non_running_worker_group(self):
            now = time.monotonic()
            suspects = self._unreachable_alive_nodes()
            self._suspect_since = {n: self._suspect_since.get(n, now) for n in suspects}
            waiting = [n for n, since in self._suspect_since.items() if now - since < self.verdict_wait_s]
            if waiting:
                if len(waiting) != getattr(self, "_logged_waiting", 0):
                    log.info("[VerdictScaling] node(s) %s do not answer but the GCS still counts them: "
                             "waiting for its verdict before sizing the restart", [n[:8] for n in waiting])
                    self._logged_waiting = len(waiting)
                self._maybe_send_resource_request()
                time.sleep(UNDECIDED_PAUSE_S)
                return NoopDecision()
            self._logged_waiting = 0
            if suspects:
                log.warning("[VerdictScaling] no verdict on node(s) %s after %.0f s: restarting without them",
                            [n[:8] for n in suspects], self.verdict_wait_s)
            self._excluded = set(suspects)
            # Never size a restart from a reservation read before the failure: Ray's policy reuses one younger
            # than GET_RESERVED_RESOURCES_INTERVAL_S, and one read by the running group's last resize check (every
            # elastic_resize_monitor_interval_s) just before the kill still holds the lost node: a worker group of
            # that size waits for it until RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S and the failed start spends one
            # more of max_failures (drill-prod's "failure -> new workers up 30.9 s", two retries for one kill).
            self._latest_reserved_resources_query_time = float("-inf")
            decision = super().make_decision_for_non_running_worker_group()
            if isinstance(decision, NoopDecision):
                time.sleep(UNDECIDED_PAUSE_S)
            return decision

        def _get_reserved_resources(self):
            now = time.monotonic()
            if now - self._latest_reserved_resources_query_time < self.GET_RESERVED_RESOURCES_INTERVAL_S:
                return self._latest_reserved_resources
            reserved = None
            try:
                reserved = ray.get(
                    self._autoscaling_coordinator.get_reserved_resources.remote(
                        self._requester_id, recompute=True),
                    timeout=AUTOSCALING_REQUESTS_GET_TIMEOUT_S)
                # Only nodes a worker group can start on now: the GCS calls them alive and their raylet answers.
                live = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("NodeManagerPort")
                        and raylet_reachable(n["NodeManagerAddress"], n["NodeManagerPort"])}
                reserved = {nid: r for nid, r in reserved.items() if nid not in self._excluded and nid in live}
            except Exception:  # noqa: BLE001 - as Ray's own policy: no decision this round
                log.warning("[VerdictScaling] could not get reserved resources; no resize this round",
                            exc_info=True)
            self._latest_reserved_resources_query_time = time.monotonic()
            self._latest_reserved_resources = reserved
            return reserved

    return VerdictElasticScalingPolicy(scaling_config, verdict_wait_s)


def install_verdict_policy(verdict_wait_s: float) -> None:
    """Make ``JaxTrainer.fit`` build :func:`verdict_scaling_policy` for elastic runs. Ray 2.60
    has no public hook for a scaling policy; ``fit`` takes it from this module-level factory
    (tests/test_trainer_args.py fails loudly when an upgrade moves it)."""
    from ray.train.v2.api import data_parallel_trainer as dpt

    ray_factory = dpt.create_scaling_policy

    def create_scaling_policy(scaling_config):
        if scaling_config.elasticity_enabled:
            return verdict_scaling_policy(scaling_config, verdict_wait_s)
        return ray_factory(scaling_config)

    dpt.create_scaling_policy = create_scaling_policy


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
        "import json, sys; sys.path.insert(0, sys.argv[1]); import maxtext_trainer; "
        "maxtext_trainer._precompile(json.loads(sys.argv[2]))"
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


# --------------------------------------------------------------------------- warm spares


# A spare's keep-alive: until it runs out, the raylet's idle-worker reaper leaves the process alone (after it, the
# reaper takes idle workers only while they outnumber the node's free CPUs, and its memory monitor may take one
# first under memory pressure). A job's spares end with the job (the raylet kills a finished job's idle workers);
# spares of no job stay until taken or the node goes.
SPARE_KEEP_ALIVE_S = 24 * 3600
# Set on a local drill's warm nodes only: a directory where each preloaded process writes <pid>.ready (its READY_AT)
# when its import is done (warm_worker.py), so the drill kills once the spares are ready.
WARM_READY_DIR_ENV = "SLICECTL_WARM_READY_DIR"


def prestart_workers(node_manager: str, job_id: str | None, count: int = 1,
                     keep_alive_s: int = SPARE_KEEP_ALIVE_S) -> None:
    """Ask the raylet at ``node_manager`` (host:port) to start ``count`` idle worker processes now: of job ``job_id``
    (hex), or of no job (``None``: any job's actor may take them), with no runtime env.

    Ray 2.60 has no Python call for it: this is the request its ``CoreWorker::PrestartWorkers`` sends,
    ``NodeManagerService.PrestartWorkers`` (``node_manager.proto``: language, job, runtime env, keep-alive, count).
    An actor is given such a process when their job and runtime env match (Ray's ``prestart_workers_on_local_node``
    docstring: "A future task/actor with the same runtime_env and job_id *can* be assigned to these prestarted
    workers"); a process of no job fits any job (the worker pool skips a worker only if it "has been assigned" to
    another job). tests/test_trainer_args.py holds the request's fields to the installed Ray's.

    The channel is Ray's own client channel, ``ray._private.grpc_utils.init_grpc_channel`` (Ray 2.60): with token
    auth on (``RAY_AUTH_MODE=token``, as KubeRay's authOptions sets on every Ray container) it adds Ray's
    ``SyncAuthenticationMetadataClientInterceptor``, which sends ``authorization: Bearer <RAY_AUTH_TOKEN>``; the
    raylet refuses a request without it (UNAUTHENTICATED), as it does every gRPC call (server_call.h). TLS and
    keepalive follow Ray's settings too. A refusal raises ``grpc.RpcError``."""
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import common_pb2, node_manager_pb2, node_manager_pb2_grpc, runtime_environment_pb2

    request = node_manager_pb2.PrestartWorkersRequest(
        language=common_pb2.Language.PYTHON, job_id=bytes.fromhex(job_id) if job_id else b"",
        runtime_env_info=runtime_environment_pb2.RuntimeEnvInfo(serialized_runtime_env="{}"),
        keep_alive_duration_secs=keep_alive_s, num_workers=count)
    channel = init_grpc_channel(node_manager)
    try:
        node_manager_pb2_grpc.NodeManagerServiceStub(channel).PrestartWorkers(request, timeout=10)
    finally:
        channel.close()


def keep_warm_spare() -> None:
    """Ask this worker's node for one idle worker process of this job, started now, for the next (re)start.

    A restarted worker group on this node then takes that process, MaxText already imported in it (the node
    preloads ``warm_worker``), instead of starting Python, Ray and MaxText anew. Ray prestarts a job's workers by
    itself only as the job starts, none for a restart, so each training worker asks its own raylet, once per
    attempt, after its first step. The spare is of this job (the raylet ends it with the job) and has no
    runtime env, as a warm training worker has none."""
    import ray

    ctx = ray.get_runtime_context()
    node = next(n for n in ray.nodes() if n["NodeID"] == ctx.get_node_id())
    prestart_workers(f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}", ctx.get_job_id())


def controller_without_runtime_env() -> None:
    """Start Ray Train's controller without a runtime env, so the training workers it creates have none.

    Ray's worker pool hands an actor an idle worker process only if their runtime envs match (and the
    process has run no task): the warm spares are the idle workers a slice node prestarts, with MaxText
    preloaded (``warm_worker.py``) and no runtime env. An actor without a runtime env of its own inherits its
    parent's, and Ray Train 2.60 gives its controller one (``DataParallelTrainer._initialize_and_run_controller``:
    ``ray.remote(..., runtime_env={"env_vars": ...})(TrainController)``, the propagated ``RAY_TRAIN_*`` settings
    and ``RAY_WARN_BLOCKING_GET_INSIDE_ASYNC``): here that ``ray.remote`` call drops it. The settings reach the
    controller instead through :func:`node_environment_callback` (and the head node's environment);
    tests/test_trainer_args.py fails loudly when an upgrade changes that call."""
    import ray
    from ray.train.v2.api import data_parallel_trainer as dpt

    class _RayForController:
        def __getattr__(self, name):
            return getattr(ray, name)

        @staticmethod
        def remote(*args, **kwargs):
            kwargs.pop("runtime_env", None)
            return ray.remote(*args, **kwargs)

    dpt.ray = _RayForController()


# --------------------------------------------------------------------------- driver


def take_train_settings() -> dict[str, str]:
    """Remove Ray Train's ``RAY_TRAIN_*`` settings from this driver's environment and return them.

    Ray Train gives the controller a runtime env holding every such setting the driver has
    (``get_env_vars_to_propagate``), and an actor inherits its parent's runtime env: the training
    workers would then need processes of their own, never the warm spares. With ``--warm-workers``
    the settings reach the controller through :func:`node_environment_callback` instead."""
    from ray.train.v2._internal.constants import ENV_VARS_TO_PROPAGATE, V2_ENABLED_ENV_VAR

    return {k: os.environ.pop(k) for k in sorted(ENV_VARS_TO_PROPAGATE - {V2_ENABLED_ENV_VAR}) if k in os.environ}


def node_environment_callback(settings: dict[str, str]):
    """A controller callback for warm spares: the controller takes ``settings`` (:func:`take_train_settings`) into
    its own environment, and its worker group gives the workers no runtime env, so they take the node's.

    Ray Train adds the controller's ``RAY_TRAIN_*`` settings to every worker's runtime env
    (``WorkerGroup._get_worker_runtime_env``), and a worker with a runtime env of its own needs a new
    process. The worker group lives in the controller's process, so the change is made there when the
    controller starts (``ControllerCallback.after_controller_start``, before any worker group; Ray 2.60 has no
    public switch; tests/test_trainer_args.py fails loudly when an upgrade moves it). Settings read when the
    controller is created (its health-check period) must be in the head node's environment instead."""
    from ray.train.v2._internal.execution.callback import ControllerCallback

    class NodeEnvironment(ControllerCallback):
        def __init__(self, env: dict[str, str]):
            self.env = dict(env)

        def after_controller_start(self, train_run_context) -> None:  # noqa: ARG002 - the hook's signature
            from ray.train.v2._internal.execution.worker_group.worker_group import WorkerGroup

            os.environ.update(self.env)
            WorkerGroup._get_worker_runtime_env = staticmethod(lambda custom_runtime_env: dict(custom_runtime_env))

    return NodeEnvironment(settings)


def build_trainer(args: argparse.Namespace, base_yml: str | None, settings: dict[str, str]):
    from ray.train.v2.api.config import FailureConfig, RunConfig, ScalingConfig
    from ray.train.v2.jax import JaxTrainer

    common = {"num_workers": num_workers(args), "placement_strategy": "SPREAD"}
    if args.resize_interval is not None:
        common["elastic_resize_monitor_interval_s"] = args.resize_interval
    if args.local:
        scaling = ScalingConfig(
            use_tpu=False,
            resources_per_worker={"CPU": 1, LOCAL_SLICE_RESOURCE: 1},
            **common,
        )
        # Local nodes run from this same environment: no package install, CPU only.
        xla_flags = f"{os.environ.get('XLA_FLAGS', '')} {LOCAL_XLA_FLAGS}".strip()
        # (Ray's auth mode and token come from the node, as on the cluster: not set here.)
        worker_env = {"env_vars": {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags}}
    else:
        scaling = ScalingConfig(
            use_tpu=True,
            topology=args.topology,
            accelerator_type=args.accelerator_type,
            resources_per_worker={"TPU": args.chips_per_host},
            **common,
        )
        # MaxText needs extra dependencies on the TPU workers (as in GKE's tutorial), unless
        # the image already holds them: then a restarted worker starts without any install.
        worker_env = {} if args.prebuilt_image else {
            "uv": {
                "packages": WORKER_PACKAGES,
                "uv_pip_install_options": UV_PIP_INSTALL_OPTIONS,
            },
        }
    run_kw = {}
    if args.warm_workers:
        # An idle worker serves an actor only if their runtime envs match: the warm spares have none.
        worker_env = {}
        run_kw["callbacks"] = [node_environment_callback(take_train_settings())]
        controller_without_runtime_env()
    if args.mode == "elastic":
        run_kw["failure_config"] = FailureConfig(max_failures=args.max_failures)
        install_verdict_policy(args.verdict_wait)
    return JaxTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={
            "base_yml": base_yml, "settings": settings, "local": args.local,
            "step_delay": args.step_delay, "hosts_per_slice": args.hosts_per_slice,
            "save_commit_delay": args.save_commit_delay, "lease_guard": getattr(args, "lease_guard", None),
            "warm_workers": args.warm_workers,
        },
        scaling_config=scaling,
        run_config=RunConfig(
            name=args.name, storage_path=args.storage_path, worker_runtime_env=worker_env,
            **run_kw,
        ),
    )


# A copy that lost its run's writer lease takes it over again at most this often (main): more is a fault of this
# copy (a worker whose clock runs minutes ahead refuses every save), not a takeover, and ends the job.
LEASE_RETAKES = 3


class DriverVerdict:
    """How a driver whose background wait for the lease ended in an error tells its workers at once: the error
    under a key of this holder's in Ray's key-value store (the GCS's internal KV, which every process of the cluster
    reads), which the workers' pending token reads while their first save waits (lease.Lease.driver_error).

    Ray Train gives the driver no way to reach running workers, and only the driver writes the lease, so without it
    a driver that gave up (say Cloud Storage answered 403 to its insert) left its workers waiting out the job's
    deadline, then refusing with LeaseHeld. The error may come before the fit has connected this driver to Ray:
    it is then put by a thread that waits for the connection (the fit's own ``ray.init``; this never starts one)."""

    NAMESPACE = "tpu-multislice-writer-lease"

    def __init__(self, holder: str):
        self.key = f"driver-error/{holder}".encode()

    def publish(self, error: BaseException) -> threading.Thread:
        from ray.experimental import internal_kv

        text = f"{type(error).__name__}: {error}".encode()

        def put() -> None:
            while not internal_kv._internal_kv_initialized():
                time.sleep(0.1)
            internal_kv._internal_kv_put(self.key, text, overwrite=True, namespace=self.NAMESPACE)

        thread = threading.Thread(target=put, name="writer-lease-verdict", daemon=True)
        thread.start()
        return thread

    def __call__(self) -> str | None:
        """The driver's error, if it published one (read on a training worker, connected to Ray by Ray Train)."""
        from ray.experimental import internal_kv

        found = internal_kv._internal_kv_get(self.key, namespace=self.NAMESPACE)
        return None if found is None else found.decode()


def hold_lease(args: argparse.Namespace):
    """--lease: hold the run's writer lease (lease.py) for the whole fit; each worker's saves check it."""
    if not args.lease:
        return None
    import functools

    import lease as writer_lease  # beside this script: the trainer ConfigMap carries both
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(writer_lease)  # the workers have no copy of the module
    if __name__ != "__main__":  # imported (a test), not run: DriverVerdict travels by value as lease.py does
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ttl = args.lease_ttl or writer_lease.TTL_S  # a drill's shorter lease keeps the stack's proportions
    lease = writer_lease.WriterLease(args.lease, ttl_s=ttl, save_budget_s=ttl * writer_lease.SAVE_BUDGET_S /
                                     writer_lease.TTL_S, skew_s=ttl * writer_lease.SKEW_S / writer_lease.TTL_S)
    started = time.time()

    verdict = DriverVerdict(lease.holder)

    def report(error, waited_s: float) -> None:
        # A progress line of the driver's (the drills' lease figures and their check that no save ran without it).
        line = {"event": "lease", "t": round(time.time(), 3), "world": 0, "holder": lease.holder,
                "state": "failed" if error else "acquired", "epoch": lease.epoch, "waited_s": round(waited_s, 3),
                "expires": round(lease.expires, 3), "ttl_s": ttl, "skew_s": lease.skew_s}
        print(f"{PROGRESS} {json.dumps(line | ({'error': str(error)} if error else {}))}", flush=True)
        if error:
            print(f"writer lease: {error}", file=sys.stderr, flush=True)
            verdict.publish(error)  # the workers' first save stops with it at once (DriverVerdict)

    # The new holder restores while it waits: the workers' first save that writes waits for the lease (a pending
    # token), the restore does not. Taken at once when free or released (one read, one conditional write).
    if lease.try_acquire():
        lease.start_renewing()
        report(None, time.time() - started)
        token = lease.token()
    else:
        token = lease.pending(writer_lease.WAIT_S, driver_error=verdict)
        lease.acquire_in_background(writer_lease.WAIT_S, report)
    # The workers check it before each save that writes (train_loop_per_worker's hook, save_decided_once).
    args.lease_guard = functools.partial(writer_lease.guarded, lease=token)
    return lease


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


def lease_lost(lease, error: BaseException) -> bool:
    """Whether a failed fit failed because this copy lost the run's writer lease: the renewer saw it taken over, a
    worker's save refused (``LeaseLost`` in Ray Train's error, which carries the workers' tracebacks), or the
    lease now names another holder."""
    import lease as writer_lease

    if lease.epoch == 0:
        return False  # never held (the wait for it ran out or failed, or the fit failed while waiting): the job's error
    if lease.lost is not None or "LeaseLost" in f"{type(error).__name__}: {error}":
        return True
    try:
        lease.token().check()
    except writer_lease.LeaseLost:
        return True
    except (writer_lease.LeaseError, OSError):
        return False
    return False


def main(argv: list[str]) -> int:
    if "--custom-trainer" in argv:  # a job's own train loop (jobs[].trainer): custom_trainer.py beside this script
        import custom_trainer
        return custom_trainer.main(argv)
    args, rest = parse_args(argv)
    if args.script_sha256:
        ensure_script_version(args.script_sha256, os.path.abspath(__file__), argv)
    base_yml, settings = split_maxtext(rest)
    if base_yml is not None:
        base_yml = os.path.abspath(base_yml)  # the workers resolve it from another cwd
    if args.local:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        settings = local_settings(settings)
    import ray

    print(f"maxtext_trainer: {args.mode}, workers {num_workers(args)}, "
          f"{'local CPU' if args.local else f'{args.accelerator_type} {args.topology}'}", flush=True)
    started = time.time()
    metrics = path = error = None
    try:
        lease = hold_lease(args)
    except Exception as e:  # noqa: BLE001 - a permanent storage error on the first attempt: the job's error, reported
        lease, error = None, e
    retakes = 0
    training = error is None
    while training:
        try:
            result = build_trainer(args, base_yml, settings).fit()
            error, metrics, path = result.error, result.metrics, getattr(result, "path", None)
        except Exception as e:  # noqa: BLE001 - Ray Train V2's fit raises when the job fails for good
            error = e
        if error is not None and lease is not None and lease.epoch == 0 and lease.lost is not None:
            # The driver's own wait for the lease failed (a permanent storage error, or the wait ran out) and its
            # workers stopped at their first save on it (DriverVerdict): the job's error is the driver's, whose
            # message carries Cloud Storage's status and words, not the workers' second-hand report of it.
            print(f"training failed after the writer lease did: {error}", file=sys.stderr, flush=True)
            error = lease.lost
            break
        if lease is None or error is None or retakes >= LEASE_RETAKES or not lease_lost(lease, error):
            break
        retakes += 1
        # Another copy of this run took the writer lease over and this copy's saves stopped. Failing here would
        # finish the job on the manager, which finishes it on any copy's Finished and then deletes every copy,
        # the running one included (kueue v0.19.2 multikueue/workload.go:380-393, 396-438); and at reconnection
        # the manager keeps the copy admitted first, which may be this one (bestMatchByCondition, :140-155 and
        # :566-581). So wait for the lease like a new copy, then train again from the run's latest checkpoint.
        print(f"writer lease lost ({lease.lost or 'a save refused'}): waiting to take the run over again, then "
              "resuming from its latest checkpoint", flush=True)
        lease.release()  # stops the renewer; the write is refused unless the lease is still this copy's
        try:
            lease = hold_lease(args)
        except Exception as e:  # noqa: BLE001 - LeaseHeld past the wait: reported below as the job's error
            error, lease = e, None
            break
    # The result line is the job's report, failed or not (the runner and the drills read it).
    summary = {"ok": error is None, "wall_s": round(time.time() - started, 1), "metrics": metrics,
               "path": path, "error": None if error is None else f"{type(error).__name__}: {str(error)[:500]}"}
    print(f"{RESULT} {json.dumps(summary, default=str)}", flush=True)
    if lease is not None:
        lease.release()
    ray.shutdown()
    if error is not None:
        print(f"training failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
