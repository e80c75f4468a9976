"""Command lines for ``workloads/trainer/maxtext_trainer.py``, derived from the stack spec.

One builder for both places the trainer runs: the RayJob entrypoint on the
cluster (rendered by the workloads component) and ``slicectl train --local``.
Every number comes from the spec's job and the slice model (``stackspec.tpu``).
"""

from __future__ import annotations

from pathlib import Path

from stackspec.spec import Job, StackSpec

TRAINER_SCRIPT = Path(__file__).resolve().parent / "trainer" / "maxtext_trainer.py"
# Where the trainer ConfigMap is mounted in the Ray head, where the job's driver runs (workloads/manifests.py mounts
# it there; the argv below names files in it).
TRAINER_DIR = "/home/ray/trainer"
# Where the GCS FUSE volume holding the checkpoint bucket is mounted on the head and workers.
CLUSTER_DATA_DIR = "/data"
# Ray Train's run storage (controller state, reported metrics) next to MaxText's output.
RAY_RESULTS_SUBDIR = "ray-results"
# On CPU every local "slice" is one Ray node running one Train worker (one JAX process,
# one CPU device): the multi-host path (one worker per host) at its smallest.
# MaxText's persistent JAX compilation cache (its ``jax_cache_dir`` key) on the bucket mount:
# a restarted worker group loads its compiled train step instead of compiling it again.
CLUSTER_JAX_CACHE_DIR = CLUSTER_DATA_DIR + "/jax-cache"
# MaxText's goodput recording (ml-goodput-measurement, which maxtext[tpu] installs): rank 0
# records step and badput events to Cloud Logging (logger ``goodput_<run_name>``) and uploads
# goodput and badput to TensorBoard and Cloud Monitoring as it trains. Needs GCP: cluster only.
CLUSTER_GOODPUT_SETTINGS = {"enable_goodput_recording": "true", "monitor_goodput": "true"}
LOCAL_HOSTS_PER_SLICE = 1
LOCAL_CHIPS_PER_HOST = 1


def find_job(spec: StackSpec, name: str | None = None) -> Job:
    """The named job, or the stack's first (:meth:`StackSpec.job`)."""
    return spec.job(name)


def job_site(spec: StackSpec, job: Job) -> tuple[StackSpec, Job]:
    """The single-region view ``job`` runs in, and the job as that view resolves it (its group).

    A single-region stack is its own view. On a multi-region stack (no top-level slices) a queued job
    runs in the first region of its dispatch order (``StackSpec.placements``), a pinned job in its region;
    every view names the run alike (the run name holds no region), so any of them builds the same run."""
    if spec.slices is not None or not spec.regions:
        return spec, job
    views = spec.placements().get(job.name) or tuple(v for v in spec.region_views() if v.region == job.region)
    if not views:
        raise ValueError(f"job {job.name}: no region of stack {spec.stack} can run it")
    return views[0], views[0].job(job.name)


def _num(v: float | int) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def maxtext_args(
    spec: StackSpec,
    job: Job,
    *,
    base_output_directory: str = CLUSTER_DATA_DIR + "/",
    steps: int | None = None,
    checkpoint_period: int | None = None,
    defaults: dict[str, str] | None = None,
) -> list[str]:
    """MaxText ``key=value`` settings for ``job`` (no base.yml: the trainer finds it).

    The job's own keys first, then ``defaults`` the job's ``maxtext`` passthrough does not
    set, then the passthrough keys (the spec forbids those from repeating a job-owned key or
    a mesh axis). A job with its own trainer gets only what its script's config holds (docs/trainers.md): where
    to write, its run, steps and checkpoint period; no MaxText model, batch, length, mesh or defaults.
    """
    if job.trainer is not None:
        return [
            f"base_output_directory={base_output_directory}",
            f"run_name={job.run_name}",
            f"steps={steps if steps is not None else job.steps}",
            f"checkpoint_period={checkpoint_period or job.checkpoint_period}",
        ]
    args = [
        f"base_output_directory={base_output_directory}",
        f"run_name={job.run_name}",
        f"model_name={job.model}",
        f"per_device_batch_size={_num(job.per_device_batch_size)}",
        f"max_target_length={job.max_target_length}",
        f"steps={steps if steps is not None else job.steps}",
        f"checkpoint_period={checkpoint_period or job.checkpoint_period}",
    ]
    args += [f"ici_{axis}_parallelism={n}" for axis, n in job.ici.items()]
    args += [f"dcn_{axis}_parallelism={n}" for axis, n in job.dcn.items()]
    args += [f"{k}={v}" for k, v in (defaults or {}).items() if k not in job.maxtext]
    args += [f"{k}={v}" for k, v in job.maxtext.items()]
    return args


def trainer_argv(
    spec: StackSpec,
    job: Job,
    local: bool = False,
    *,
    data_dir: str | None = None,
    local_slices: int | None = None,
    steps: int | None = None,
    step_delay: float | None = None,
    checkpoint_period: int | None = None,
    resize_interval: float | None = None,
    jax_cache_dir: str | None = None,
    save_commit_delay: float | None = None,
    max_failures: int | None = None,
    warm_workers: bool = False,
    lease: str | None = None,
    lease_ttl: float | None = None,
) -> list[str]:
    """The trainer script's arguments (everything after ``python maxtext_trainer.py``).

    On the cluster: shape from the slice model, storage on the bucket mount.
    ``local=True``: one worker per local slice node, output under ``data_dir`` (required),
    ``local_slices`` local slice nodes (default: the job's maximum slices), the compilation
    cache in ``jax_cache_dir`` (default: inside the run), ``max_failures`` overriding the job's
    (a drill that runs out of retries on purpose), ``warm_workers`` for a local cluster whose slice
    nodes keep warm spares (``LocalRayCluster(spares=...)``), ``lease`` (with ``lease_ttl``) for a local drill that
    holds the stack's writer lease (drills.writer_lease).
    """
    spec, job = job_site(spec, job)
    shape = spec.group(job.group).shape
    hosts = LOCAL_HOSTS_PER_SLICE if local else shape.hosts
    chips = LOCAL_CHIPS_PER_HOST if local else shape.chips_per_host
    if local:
        if not data_dir:
            raise ValueError("trainer_argv(local=True) needs data_dir (the local run directory)")
        root = data_dir.rstrip("/")
        max_slices = local_slices or job.slices
        min_slices = min(job.min_slices, max_slices)
    else:
        root = CLUSTER_DATA_DIR
        max_slices, min_slices = job.slices, job.min_slices
    argv = ["--mode", job.mode]
    if job.elastic:
        argv += ["--min-slices", str(min_slices), "--max-slices", str(max_slices)]
    else:
        argv += ["--slices", str(max_slices)]
    argv += [
        "--hosts-per-slice", str(hosts),
        "--chips-per-host", str(chips),
        "--topology", shape.topology,
        "--accelerator-type", shape.ray_accelerator_type,
    ]
    if job.elastic:
        argv += ["--max-failures", str(job.max_failures if max_failures is None else max_failures)]
        if resize_interval is not None:
            argv += ["--resize-interval", _num(resize_interval)]
    argv += ["--name", job.run_name, "--storage-path", f"{root}/{RAY_RESULTS_SUBDIR}"]
    if not local and spec.site is not None and job.region is None:
        # Queued through a multi-region manager: a second copy may run after a re-dispatch (docs/multikueue.md
        # "Two copies of one run"); the run's writer lease lets one write its checkpoints at a time.
        argv += ["--lease", f"gs://{spec.storage.bucket}/{job.run_name}/.writer-lease"]
    if local:
        argv.append("--local")
        if step_delay:
            argv += ["--step-delay", str(step_delay)]
        if save_commit_delay:
            argv += ["--save-commit-delay", _num(save_commit_delay)]
        if warm_workers:
            argv.append("--warm-workers")  # the local nodes keep MaxText-imported spares (drills.localray)
        if lease:
            argv += ["--lease", lease] + (["--lease-ttl", _num(lease_ttl)] if lease_ttl else [])
        defaults = {"jax_cache_dir": jax_cache_dir} if jax_cache_dir else {}
    else:
        if spec.prebuilt_image:
            argv.append("--prebuilt-image")  # MaxText is in the worker image: workers install nothing at start
        if spec.unverified.warm_spares:
            argv.append("--warm-workers")  # the TPU hosts' worker processes preload MaxText (an unverified opt-in)
        from workloads import multitier

        defaults = ({"jax_cache_dir": jax_cache_dir or CLUSTER_JAX_CACHE_DIR} | CLUSTER_GOODPUT_SETTINGS
                    | multitier.settings(spec, job))
    argv.append("--")
    argv += maxtext_args(
        spec, job, base_output_directory=root + "/", steps=steps,
        checkpoint_period=checkpoint_period, defaults=defaults,
    )
    if job.trainer is not None:  # the job's own train loop (workloads/custom_trainer_args.py)
        from workloads import custom_trainer_args
        argv = custom_trainer_args.wrap(job, argv, local, TRAINER_DIR)
    return argv
