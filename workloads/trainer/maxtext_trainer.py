"""Ray Train V2 JaxTrainer around MaxText's pre-training loop: the RayJob entrypoint (the driver: arguments, the
trainer's configuration, the run's writer lease, the result line).

Runs on the Ray head as the job's driver. It imports only ray and the standard library on the driver; maxtext and
jax are imported inside the training function, on the workers (which install ``maxtext[tpu]==0.2.1`` through their
runtime env on TPU, or share the driver's environment with ``--local``). Its parts are modules beside it, which the
trainer ConfigMap carries with it (``workloads/manifests.py`` ``TRAINER_MODULES``) and Ray ships to the workers by
value (:func:`ship_modules`): ``worker_loop`` (the training function), ``restart_precompile``, ``maxtext_imports``,
``warm_spares``, ``elastic_verdict``, ``lease_holder`` (and ``lease.py``, where a job holds the lease) and
``progress_lines``.

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
import json
import os
import sys
import time

# The modules beside this script: on the sys.path already when it runs (its directory comes first); appended, as
# warm_worker.py does, when the drills and tests import it as workloads.trainer.maxtext_trainer.
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.append(HERE)

# The driver's parts, and the names the drills, warm_worker.py, custom_trainer.py and the tests reach through the
# entrypoint (its interface before the split: __all__ below).
from elastic_verdict import VERDICT_WAIT_S, install_verdict_policy, raylet_reachable, verdict_scaling_policy  # noqa: E402
from lease_holder import LEASE_RETAKES, DriverVerdict, hold_lease, lease_lost  # noqa: E402
from maxtext_imports import DEFERRED_IMPORTS, _DeferredImports, defer_unused_imports, preimport  # noqa: E402
from progress_lines import PROGRESS, RESULT  # noqa: E402
from restart_precompile import CompiledStep, _precompile, precompile_restart_shape, watch_precompile  # noqa: E402
from shipped_files import directory_sha256  # noqa: E402
from warm_spares import (  # noqa: E402
    SPARE_KEEP_ALIVE_S,
    WARM_READY_DIR_ENV,
    controller_without_runtime_env,
    keep_warm_spare,
    node_environment_callback,
    prestart_workers,
    take_train_settings,
)
from worker_loop import (  # noqa: E402
    LOCAL_GLOBAL_BATCH,
    clear_stale_megascale,
    committed_checkpoint_steps,
    delay_checkpoint_commits,
    save_decided_once,
    train_loop_per_worker,
)

__all__ = [
    "DEFERRED_IMPORTS", "LEASE_RETAKES", "LOCAL_GLOBAL_BATCH", "PROGRESS", "RESULT", "SPARE_KEEP_ALIVE_S",
    "VERDICT_WAIT_S", "WARM_READY_DIR_ENV", "CompiledStep", "DriverVerdict", "_DeferredImports", "_precompile",
    "build_trainer", "clear_stale_megascale", "committed_checkpoint_steps", "defer_unused_imports",
    "delay_checkpoint_commits", "hold_lease", "keep_warm_spare", "lease_lost", "main", "parse_args",
    "raylet_reachable",
    "precompile_restart_shape", "preimport", "prestart_workers", "save_decided_once", "ship_modules",
    "train_loop_per_worker", "verdict_scaling_policy", "watch_precompile",
]


def ship_modules() -> list[str]:
    """Have Ray pickle the modules beside this script by value (the training function, its hooks, the lease's
    token): the workers have no copy of them (the ConfigMap is the head's), as lease.py always was. Returns their
    names."""
    import ray.cloudpickle

    here = [name for name, m in list(sys.modules.items())
            if os.path.dirname(os.path.abspath(getattr(m, "__file__", None) or "/")) == HERE
            and name != "__main__" and "." not in name]
    for name in here:
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])
    return sorted(here)


# Each local "slice" node carries one unit of this custom resource (the head none), so
# every worker lands on its own slice node, as one worker per TPU host does on GKE.
LOCAL_SLICE_RESOURCE = "local_slice"
WORKER_PACKAGES = ["maxtext[tpu]==0.2.1"]  # also what the repository's Dockerfile installs
UV_PIP_INSTALL_OPTIONS = ["--resolution=lowest"]

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
    """The digest of the trainer's files in ``path``'s directory, as the RayJob was rendered with (shipped_files):
    the script and every module beside it, so a mount still holding an old module is caught as an old script is."""
    return directory_sha256(os.path.dirname(path))


def ensure_script_version(expected: str, path: str, argv: list[str],
                          wait_s: float = SCRIPT_REFRESH_WAIT_S, poll_s: float = 5.0,
                          execv=os.execv) -> None:
    """Return if this script's directory holds the ``expected`` files; else wait for the mount to catch up and
    exec the new script with the same arguments, or fail naming both digests."""
    running = file_sha256(path)
    if running == expected:
        return
    print(f"maxtext_trainer: {os.path.dirname(path)} is sha256 {running[:12]}, the job wants {expected[:12]}: "
          "waiting for the ConfigMap mount to refresh", flush=True)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        time.sleep(poll_s)
        if file_sha256(path) == expected:
            execv(sys.executable, [sys.executable, path, *argv])
    raise SystemExit(f"maxtext_trainer: {os.path.dirname(path)} still has sha256 {file_sha256(path)[:12]} after "
                     f"{wait_s:.0f} s, not {expected[:12]}: is the trainer ConfigMap applied?")


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

    ship_modules()  # before anything is pickled for the workers (the training function, the lease's token)
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
