"""A team's own Ray Train loop under the same JaxTrainer as MaxText's (``jobs[].trainer``).

    python maxtext_trainer.py --custom-trainer SCRIPT <maxtext_trainer.py's flags> -- key=value ...

``maxtext_trainer.py`` hands this command line here: same workers (one per TPU host, whole slices), same elastic
range and failure budget, same Ray Train storage and run name, ``--local`` on CPU as for MaxText. The script (a file
of the repository, or the ConfigMap's copy on the cluster) defines ``train_loop_per_worker(config)``; it is sent to
the workers as text and run there, so no worker needs the file. ``config`` holds ``steps``,
``checkpoint_period``, ``run_name``, ``output_dir``, ``local`` and the trainer's own settings (numbers as numbers).

The script reports as any Ray Train loop does, ``ray.train.report({"step": s, "loss": l}, checkpoint=...)``, and
resumes from ``ray.train.get_checkpoint()``. Each report on rank 0 becomes the progress lines the runner and the
drills read (``slicectl-progress``: start, step, loss, done), and the driver prints the ``slicectl-result`` line.
"""

from __future__ import annotations

import json
import os
import sys
import time

import maxtext_trainer as mt  # the sibling script: its flags, worker counts, failure policy and line markers

FLAG = "--custom-trainer"
# maxtext_trainer.py's --local model settings that are MaxText's alone: not the script's business.
NOT_FOR_SCRIPT = frozenset(mt.LOCAL_MODEL) | {"jax_cache_dir", "enable_goodput_recording", "monitor_goodput"}


def _typed(v: str):
    """A ``key=value`` setting as the script would want it: an int, a float, a bool or the text."""
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(v.lower(), v)


def script_config(settings: dict[str, str], local: bool) -> dict:
    """What ``train_loop_per_worker`` receives: the job's steps, period and run, where to write, and its own keys."""
    out = {k: _typed(v) for k, v in settings.items() if k not in NOT_FOR_SCRIPT and not k.startswith(("ici_", "dcn_"))}
    out["output_dir"] = os.path.join(str(out.pop("base_output_directory", ".")), str(out.get("run_name", "run")))
    out["local"] = local
    return out


def train_loop_per_worker(config: dict) -> None:
    """Run the script's loop on this worker, its reports turned into the runner's progress lines (rank 0)."""
    import ray.train

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    if config["local"]:
        os.environ["JAX_PLATFORMS"] = "cpu"
    seen = {"start": None, "last": None, "ckpt": None, "loss": None, "steps": 0}

    def emit(kind: str, **fields) -> None:
        if rank == 0:
            line = json.dumps({"event": kind, "t": round(time.time(), 3), "world": world} | fields)
            print(f"{mt.PROGRESS} {line}", flush=True)

    original = ray.train.report

    def report(metrics: dict, *args, checkpoint=None, **kwargs):
        out = original(metrics, *args, checkpoint=checkpoint, **kwargs)
        step = metrics.get("step")
        if isinstance(step, int):
            if seen["start"] is None:
                seen["start"] = step
                emit("start", start_step=step)
            seen["last"], seen["steps"] = step, seen["steps"] + 1
            if checkpoint is not None:
                seen["ckpt"] = step
            emit("step", step=step)
            if "loss" in metrics:
                seen["loss"] = float(metrics["loss"])
                emit("loss", step=step, loss=seen["loss"])
            if config["step_delay"]:
                time.sleep(config["step_delay"])  # --step-delay: a drill's window, as for MaxText
        return out

    emit("worker_up", t_up=round(time.time(), 3))
    namespace: dict = {"__name__": "team_trainer", "__file__": config["script_path"]}
    ray.train.report = report
    try:
        exec(compile(config["script_source"], config["script_path"], "exec"), namespace)  # noqa: S102
        emit("imported", import_s=0.0, script=config["script_path"])  # the script loaded, not MaxText
        namespace["train_loop_per_worker"](dict(config["script_config"]))
    finally:
        ray.train.report = original
    final = int(config["script_config"]["steps"]) - 1
    if seen["last"] != final and seen["start"] != final + 1:
        raise RuntimeError(f"the script stopped early: last reported step {seen['last']}, expected {final}")
    emit("done", start_step=seen["start"], final_step=seen["last"], loss=seen["loss"], steps_run=seen["steps"],
         checkpoint_step=seen["ckpt"], world_size=world)


def main(argv: list[str]) -> int:
    i = argv.index(FLAG)
    script = argv[i + 1]
    rest = argv[:i] + argv[i + 2:]
    args, tail = mt.parse_args(rest)
    if args.script_sha256:
        # The whole command line: a refreshed mount re-executes maxtext_trainer.py, which hands --custom-trainer back
        # here; without it, MaxText would train in the team's trainer's place.
        mt.ensure_script_version(args.script_sha256, os.path.abspath(mt.__file__), argv)
    _, settings = mt.split_maxtext(tail)
    if args.local:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.train.v2.api.config import FailureConfig, RunConfig, ScalingConfig
    from ray.train.v2.jax import JaxTrainer

    source = open(script).read()  # noqa: SIM115, PTH123 - read once, sent to the workers as text
    common = {"num_workers": mt.num_workers(args), "placement_strategy": "SPREAD"}
    if args.resize_interval is not None:
        common["elastic_resize_monitor_interval_s"] = args.resize_interval
    if args.local:
        scaling = ScalingConfig(use_tpu=False, resources_per_worker={"CPU": 1, mt.LOCAL_SLICE_RESOURCE: 1}, **common)
        worker_env = {"env_vars": {"JAX_PLATFORMS": "cpu"}}  # Ray's auth comes from the node, as on the cluster
    else:
        scaling = ScalingConfig(use_tpu=True, topology=args.topology, accelerator_type=args.accelerator_type,
                                resources_per_worker={"TPU": args.chips_per_host}, **common)
        worker_env = {}  # the script's packages are its image's (trainer.image) or the stack's worker image's
    run_kw = {}
    if args.mode == "elastic":
        run_kw["failure_config"] = FailureConfig(max_failures=args.max_failures)
        mt.install_verdict_policy(args.verdict_wait)
    trainer = JaxTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={"script_source": source, "script_path": os.path.basename(script), "local": args.local,
                           "step_delay": args.step_delay,
                           "script_config": script_config(settings, args.local)},
        scaling_config=scaling,
        run_config=RunConfig(name=args.name, storage_path=args.storage_path, worker_runtime_env=worker_env, **run_kw),
    )
    print(f"custom_trainer: {os.path.basename(script)}, {args.mode}, workers {mt.num_workers(args)}, "
          f"{'local CPU' if args.local else f'{args.accelerator_type} {args.topology}'}", flush=True)
    started, metrics, path = time.time(), None, None
    try:
        result = trainer.fit()
        error, metrics, path = result.error, result.metrics, getattr(result, "path", None)
    except Exception as e:  # noqa: BLE001 - Ray Train V2's fit raises when the job fails for good
        error = e
    summary = {"ok": error is None, "wall_s": round(time.time() - started, 1), "metrics": metrics, "path": path,
               "error": None if error is None else f"{type(error).__name__}: {str(error)[:500]}"}
    print(f"{mt.RESULT} {json.dumps(summary, default=str)}", flush=True)
    ray.shutdown()
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
