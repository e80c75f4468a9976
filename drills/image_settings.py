"""The stack's image settings in a local drill: what the drill applies, and what a local CPU drill cannot.

A local drill runs this checkout's Python environment (uv.lock) on CPU processes, not the stack's worker image on
TPU hosts. Every setting the cluster gives a TPU worker (its container environment, ``workloads.manifests``) and
every trainer flag or MaxText setting only the cluster's run gets (``workloads.trainer_args``) is listed in the
drill's report with what the drill did with it, so no setting is dropped silently. A setting the cluster gains
without an answer here is reported as such and fails ``tests/test_drill_image_settings.py``.
"""

from __future__ import annotations

from stackspec.spec import Job, StackSpec

# The TPU worker container's environment (workloads/manifests.py _worker_env): name -> what a local drill does.
WORKER_ENV = {
    "MEGASCALE_NUM_SLICES": "not applied: multislice DCN (megascale) joins TPU slices; local slices are CPU processes",
    "MEGASCALE_PORT": "not applied: multislice DCN (megascale) joins TPU slices; local slices are CPU processes",
    "JAX_PLATFORMS": "cpu instead: a local drill has no TPU (the trainer's --local, drills.localray.warm_env)",
    "ENABLE_PJRT_COMPATIBILITY": "not applied: a setting of libtpu's PJRT plugin; JAX runs on CPU here",
    "LIBTPU_INIT_ARGS": "not applied: libtpu's XLA flags; the local workers take the trainer's CPU XLA flags "
                        "(maxtext_trainer.LOCAL_XLA_FLAGS) instead",
    "RAY_preload_python_modules": "applied with warm spares: each warm slice node preloads warm_worker "
                                  "(drills.localray.warm_env)",
    "PYTHONPATH": "applied with warm spares: the trainer's directory on the warm nodes' path "
                  "(drills.localray.warm_env)",
}
# Trainer flags only the cluster's run gets (trainer_argv local=False): flag -> what a local drill does.
CLUSTER_FLAGS = {
    "--script-sha256": "not applied: it checks that the head's ConfigMap-mounted trainer is the rendered version; "
                       "a local drill runs this checkout's trainer itself",
    "--custom-trainer": "applied: the same script, from this checkout instead of the cluster's ConfigMap copy",
    "--hosts-per-slice": "not applied: a local slice is one CPU process (one host)",
    "--chips-per-host": "not applied: a local host has one CPU device, not a TPU host's chips",
    "--storage-path": "applied: a directory under the drill's run directory instead of the bucket's mount",
    "--prebuilt-image": "holds locally: the local workers install nothing at start either (they run this checkout's "
                        "environment, uv.lock)",
    "--warm-workers": "applied when the drill keeps warm spares (the stack's unverified.warmSpares)",
    "--lease": "applied: the drill's copies hold the run's writer lease on a Cloud Storage emulator "
               "(fake-gcs-server), its life scaled to the drill (drills.writer_lease)",
}
# MaxText settings only the cluster's run gets: key -> what a local drill does.
CLUSTER_SETTINGS = {
    "base_output_directory": "applied: a directory under the drill's run directory instead of the bucket's mount",
    "jax_cache_dir": "applied: a local directory (drills.local_train.JAX_CACHE_DIR) instead of the bucket's",
    "enable_goodput_recording": "not applied: MaxText's goodput recording writes to Cloud Logging; the drill "
                                "computes goodput from the steps' own timestamps",
    "monitor_goodput": "not applied: MaxText's goodput monitor uploads to Cloud Monitoring",
    "enable_multi_tier_checkpointing": "not applied: GKE's multi-tier checkpointing CSI driver (/local) is not here",
    "local_checkpoint_directory": "not applied: GKE's multi-tier checkpointing CSI driver (/local) is not here",
    "local_checkpoint_period": "not applied: GKE's multi-tier checkpointing CSI driver (/local) is not here",
    "multi_tier_checkpointing_backup_interval_minutes": "not applied: GKE's multi-tier checkpointing is not here",
}
UNKNOWN = "not applied: no local answer for this setting yet (drills/image_settings.py)"


def _settings(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the trainer's own flags -> value, "on" for a switch; MaxText's key=value settings) of a trainer argv."""
    cut = argv.index("--") if "--" in argv else len(argv)
    own, maxtext = argv[:cut], argv[cut + 1:]
    flags = {a: own[i + 1] if i + 1 < len(own) and not own[i + 1].startswith("--") else "on"
             for i, a in enumerate(own) if a.startswith("--")}
    settings = dict(a.split("=", 1) for a in maxtext if "=" in a)
    return flags, settings


def image_settings(spec: StackSpec, job: Job) -> list[tuple[str, str, str]]:
    """(setting, the cluster's value, what a local drill does with it) for the stack's worker image and every
    setting the cluster's workers or trainer get that a local run does not."""
    import shlex

    from workloads.manifests import DRIVER_ENV, _worker_env, entrypoint
    from workloads.trainer_args import trainer_argv

    # A dedicated job's own trainer image replaces the stack's on its Ray containers (custom_trainer_args.with_image).
    own = job.trainer.image if job.trainer is not None and job.cluster != "shared" else None
    out = [("worker image", own or spec.worker_image,
            "not applied: a local drill runs this checkout's environment (uv.lock), Ray "
            f"{_ray_version()} on CPU"
            + ("" if own or spec.prebuilt_image
               else "; the cluster's workers install MaxText at start (no digest yet)"))]
    if spec.image is not None:
        out.append(("image.streaming", str(spec.image.streaming), "not applied: GKE image streaming (node pools)"))
    for e in _worker_env(spec, job.slices):
        out.append((e["name"], e["value"], WORKER_ENV.get(e["name"], UNKNOWN)))
    for name, value in DRIVER_ENV.items():  # the head's, for the RayJob's driver
        out.append((name, value, "applied: the local drill's driver runs with it too (drills.local_train)"))
    # The RayJob's own entrypoint (past "python <script>"): its flags too, not only trainer_argv's. A flag or setting
    # the local argv lacks, or gives another value (hosts, chips, paths), is reported.
    cluster_flags, cluster_settings = _settings(shlex.split(entrypoint(spec, job))[2:])
    local_flags, local_settings = _settings(trainer_argv(spec, job, local=True, data_dir="/local-run",
                                                         warm_workers=True))
    for flag in sorted(f for f, v in cluster_flags.items() if local_flags.get(f) != v):
        out.append((flag, cluster_flags[flag], CLUSTER_FLAGS.get(flag, UNKNOWN)))
    for key in sorted(k for k, v in cluster_settings.items() if local_settings.get(k) != v):
        out.append((key, cluster_settings[key], CLUSTER_SETTINGS.get(key, UNKNOWN)))
    return out


def _ray_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("ray")


def report_lines(spec: StackSpec, job: Job) -> list[str]:
    """One report note per setting: ``image setting <name> = <value>: <what the drill does>``."""
    def short(v: str) -> str:
        return v if len(v) <= 60 else v[:57] + "..."

    return [f"image setting {name} = {short(value)}: {how}" for name, value, how in image_settings(spec, job)]
