"""The trainer's command line: built from the stack spec and slice model, parsed by the script.

Pure argument building and parsing: no Ray cluster, no MaxText run (see test_train_local.py).
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from offline import engine
from stackspec import maxtext as maxtext_facts
from stackspec import spec as stack_spec
from stackspec import tpu
from workloads.trainer_args import (
    CLUSTER_GOODPUT_SETTINGS,
    CLUSTER_JAX_CACHE_DIR,
    TRAINER_SCRIPT,
    find_job,
    maxtext_args,
    trainer_argv,
)


def _load_script():
    # The script is deployed alone (a ConfigMap): load it from its file, as the head does.
    s = importlib.util.spec_from_file_location("maxtext_trainer", TRAINER_SCRIPT)
    module = importlib.util.module_from_spec(s)
    s.loader.exec_module(module)
    return module


trainer = _load_script()


@pytest.fixture(scope="module")
def specs():
    return {st: stack_spec.load(st, engine.stack_config(st)) for st in ("dev", "prod")}


def _kv(args: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in args)


def test_maxtext_args_prod_70b_follow_the_spec(specs):
    spec = specs["prod"]
    job = find_job(spec, "llama3-70b-multislice")
    kv = _kv(maxtext_args(spec, job))
    assert kv["base_output_directory"] == "/data/"
    assert kv["run_name"] == job.run_name
    assert kv["model_name"] == job.model
    assert float(kv["per_device_batch_size"]) == job.per_device_batch_size
    assert int(kv["max_target_length"]) == job.max_target_length
    assert int(kv["steps"]) == job.steps
    assert int(kv["checkpoint_period"]) == job.checkpoint_period
    for axis, n in job.ici.items():
        assert int(kv[f"ici_{axis}_parallelism"]) == n
    for axis, n in job.dcn.items():
        assert int(kv[f"dcn_{axis}_parallelism"]) == n
    for k, v in job.maxtext.items():
        assert kv[k] == v
    # The seed's 70B command carries these settings.
    assert kv["remat_policy"] == "full" and kv["dcn_fsdp_parallelism"] == "2"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_trainer_argv_shape_from_slice_model(specs, stack):
    spec = specs[stack]
    for job in spec.jobs:
        argv = trainer_argv(spec, job)
        args, rest = trainer.parse_args(argv)
        shape = spec.group(job.group).shape
        assert args.hosts_per_slice == shape.hosts
        assert args.chips_per_host == shape.chips_per_host
        assert args.topology == shape.topology
        assert args.accelerator_type == shape.ray_accelerator_type
        assert args.storage_path.startswith("/data/")
        assert not args.local
        workers = trainer.num_workers(args)
        if job.elastic:
            assert workers == (shape.workers(job.min_slices), shape.workers(job.slices))
            assert args.max_failures == job.max_failures
        else:
            assert workers == shape.workers(job.slices)
        base, settings = trainer.split_maxtext(rest)
        assert base is None  # the workers find base.yml inside the maxtext package
        assert settings == _kv(maxtext_args(spec, job, defaults=CLUSTER_DEFAULTS))
        # On the bucket: a restarted worker group loads its compiled step (MaxText's key).
        assert settings["jax_cache_dir"] == CLUSTER_JAX_CACHE_DIR
        assert settings["enable_goodput_recording"] == settings["monitor_goodput"] == "true"


CLUSTER_DEFAULTS = {"jax_cache_dir": CLUSTER_JAX_CACHE_DIR} | CLUSTER_GOODPUT_SETTINGS


def test_cluster_defaults_are_maxtext_keys_and_yield_to_the_job(specs):
    """Every key the cluster argv adds is in MaxText 0.2.1's base.yml; a job's own passthrough wins."""
    for key in CLUSTER_DEFAULTS:
        assert maxtext_facts.key_error(key) is None, key
    spec = specs["prod"]
    job = find_job(spec, "llama3-8b-elastic")
    mine = job.model_copy(update={"maxtext": {**job.maxtext, "monitor_goodput": "false"}})
    settings = trainer.split_maxtext(trainer_argv(spec, mine)[trainer_argv(spec, mine).index("--") + 1:])[1]
    assert settings["monitor_goodput"] == "false"
    args = trainer_argv(spec, mine)
    assert sum(a.startswith("monitor_goodput=") for a in args) == 1


def test_local_runs_share_a_compilation_cache_when_given_one(specs, tmp_path):
    spec = specs["dev"]
    argv = trainer_argv(spec, spec.jobs[0], local=True, data_dir=str(tmp_path / "run"),
                        jax_cache_dir=str(tmp_path / "cache"), save_commit_delay=2, max_failures=1)
    args, rest = trainer.parse_args(argv)
    local = trainer.local_settings(trainer.split_maxtext(rest)[1])
    assert local["jax_cache_dir"] == str(tmp_path / "cache")
    assert args.save_commit_delay == 2 and args.max_failures == 1
    assert "enable_goodput_recording" not in local  # needs GCP: off locally


def test_rays_scaling_policy_hooks_are_where_the_trainer_expects_them():
    """The trainer's elastic policy subclasses Ray 2.60's and replaces ``fit``'s factory: an
    upgrade that moves either fails here, not in a drill."""
    import inspect

    from ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator import (
        _AutoscalingCoordinatorActor,
    )
    from ray.train.v2.api import data_parallel_trainer as dpt
    from ray.train.v2.api.config import ScalingConfig

    assert "create_scaling_policy(self.scaling_config)" in inspect.getsource(dpt.DataParallelTrainer.fit)
    assert "recompute" in inspect.signature(_AutoscalingCoordinatorActor.get_reserved_resources).parameters
    original = dpt.create_scaling_policy
    try:
        trainer.install_verdict_policy(12.0)
        elastic = dpt.create_scaling_policy(ScalingConfig(num_workers=(1, 2), use_gpu=False))
        assert type(elastic).__name__ == "VerdictElasticScalingPolicy" and elastic.verdict_wait_s == 12.0
        for name in ("_get_reserved_resources", "_count_possible_workers", "_maybe_send_resource_request",
                     "make_decision_for_non_running_worker_group"):
            assert callable(getattr(elastic, name))
        fixed = dpt.create_scaling_policy(ScalingConfig(num_workers=2, use_gpu=False))
        assert type(fixed).__name__ == "FixedScalingPolicy"
    finally:
        dpt.create_scaling_policy = original


def test_rays_runtime_env_hooks_for_warm_spares_are_where_the_trainer_expects_them(monkeypatch):
    """Warm spares (idle, prestarted, no runtime env) serve the training workers only if those have no runtime env:
    Ray Train 2.60 gives its controller ``ray.remote(..., runtime_env={"env_vars": ...})`` (which its workers
    inherit) and its worker group adds the controller's settings to each worker's. An upgrade that changes either
    fails here, not in a drill."""
    import inspect

    from ray.train.v2._internal.execution.worker_group.worker_group import WorkerGroup
    from ray.train.v2.api import data_parallel_trainer as dpt

    source = inspect.getsource(dpt.DataParallelTrainer._initialize_and_run_controller)
    assert "controller_actor_cls = ray.remote(" in source and 'runtime_env={"env_vars": env_vars}' in source
    assert "self._get_worker_runtime_env(" in inspect.getsource(WorkerGroup)
    # The controller starts without the runtime env (Ray's own remote() sees none) ...
    seen = {}
    monkeypatch.setattr("ray.remote", lambda *a, **kw: seen.update(kw) or (lambda cls: cls))
    original_ray = dpt.ray
    try:
        trainer.controller_without_runtime_env()
        dpt.ray.remote(num_cpus=0, runtime_env={"env_vars": {"X": "1"}})(object)
        assert seen == {"num_cpus": 0} and dpt.ray.get is original_ray.get
    finally:
        dpt.ray = original_ray
    # ... the driver's RAY_TRAIN_* settings leave its environment ...
    monkeypatch.setenv("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", "30")
    taken = trainer.take_train_settings()
    assert taken == {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "30"}
    assert "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S" not in os.environ
    # ... and reach the controller's through the callback, whose worker group then adds nothing of its own.
    original = WorkerGroup.__dict__["_get_worker_runtime_env"]
    try:
        trainer.node_environment_callback(taken).after_controller_start(None)
        assert os.environ["RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"] == "30"
        assert WorkerGroup._get_worker_runtime_env(custom_runtime_env={}) == {}
    finally:
        WorkerGroup._get_worker_runtime_env = original
        os.environ.pop("RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S", None)
    assert WorkerGroup._get_worker_runtime_env(custom_runtime_env={})["env_vars"] == {}


def test_raylet_probe_tells_a_listening_port_from_a_dead_one():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert trainer.raylet_reachable("127.0.0.1", port)
    assert not trainer.raylet_reachable("127.0.0.1", port, timeout=0.5)


def test_commit_delay_holds_orbax_renames(tmp_path):
    """The kill-during-save drill's window: Orbax's atomic rename waits, the tmp dir stays; once
    the worker group is a restart (``held["on"]`` off) saves commit at once."""
    import asyncio

    from etils import epath
    from orbax.checkpoint._src.path import atomicity

    cls = atomicity.AtomicRenameTemporaryPath
    saved = cls.finalize
    try:
        held = {"on": True}
        trainer.delay_checkpoint_commits(0.3, held)
        trainer.delay_checkpoint_commits(0.3, held)  # twice: still one pause, not two
        import time

        for step, on, (low, high) in ((5, True, (0.3, 0.6)), (10, False, (0.0, 0.2))):
            held["on"] = on
            final = epath.Path(tmp_path / str(step))
            tmp = cls.from_final(final)
            asyncio.run(tmp.create())
            t = time.time()
            asyncio.run(tmp.finalize())
            assert low <= time.time() - t < high, (step, on)
            assert final.exists() and not tmp.get().exists()
    finally:
        cls.finalize = saved
        if hasattr(cls, "_slicectl_finalize"):
            del cls._slicectl_finalize


def test_prod_multislice_is_the_seeds_eight_workers(specs):
    spec = specs["prod"]
    args, _ = trainer.parse_args(trainer_argv(spec, find_job(spec, "llama3-8b-multislice")))
    assert trainer.num_workers(args) == tpu.resolve("v6e", "4x4", "ct6e-standard-4t").workers(2)
    args, _ = trainer.parse_args(trainer_argv(spec, find_job(spec, "llama3-8b-elastic")))
    assert trainer.num_workers(args) == (4, 8)  # whole slices, as in the seed


def test_local_argv_one_worker_per_slice_node(specs, tmp_path):
    spec = specs["dev"]
    job = spec.jobs[0]
    argv = trainer_argv(spec, job, local=True, data_dir=str(tmp_path), local_slices=2, steps=7,
                        step_delay=0.5, checkpoint_period=3)
    args, rest = trainer.parse_args(argv)
    assert args.local and args.step_delay == 0.5
    assert trainer.num_workers(args) == (1, 2)
    _, settings = trainer.split_maxtext(rest)
    local = trainer.local_settings(settings)
    assert local["steps"] == "7" and local["checkpoint_period"] == "3"
    assert local["base_output_directory"] == f"{tmp_path}/"
    assert local["skip_jax_distributed_system"] == "true"
    assert local["model_name"] == "default"  # the tiny model replaces the job's
    assert not any(k.startswith(("ici_", "dcn_")) for k in local)
    # Caches and dumps stay inside the run directory.
    for key in ("jax_cache_dir", "dump_hlo_local_dir", "dump_jaxpr_local_dir"):
        assert local[key].startswith(str(tmp_path))
    with pytest.raises(ValueError, match="data_dir"):
        trainer_argv(spec, job, local=True)


def test_resize_interval_reaches_elastic_jobs_only(specs, tmp_path):
    """The local drill asks Ray Train to look for a returned slice every few seconds."""
    spec = specs["prod"]
    elastic = find_job(spec, "llama3-8b-elastic")
    args, _ = trainer.parse_args(trainer_argv(spec, elastic, resize_interval=7.5))
    assert args.resize_interval == 7.5
    assert trainer.parse_args(trainer_argv(spec, elastic))[0].resize_interval is None
    fixed = find_job(spec, "llama3-8b-multislice")
    assert "--resize-interval" not in trainer_argv(spec, fixed, resize_interval=7.5)


@pytest.mark.parametrize("argv, message", [
    (["--mode", "multislice", "--min-slices", "1", "--max-slices", "2"], "takes --slices"),
    (["--mode", "elastic", "--slices", "2"], "takes --min-slices"),
    (["--mode", "elastic", "--min-slices", "3", "--max-slices", "2"], "more than"),
    (["--mode", "multislice", "--slices", "1", "--step-delay", "1"], "--local"),
    (["--mode", "multislice", "--slices", "1", "--save-commit-delay", "1"], "--local"),
    (["--mode", "multislice", "--slices", "1", "--resize-interval", "5"], "for --mode elastic"),
])
def test_script_rejects_bad_command_lines(argv, message, capsys):
    common = ["--hosts-per-slice", "1", "--chips-per-host", "4", "--topology", "2x2",
              "--accelerator-type", "TPU-V6E", "--name", "r", "--storage-path", "/data/r"]
    with pytest.raises(SystemExit):
        trainer.parse_args(argv + common)
    assert message in capsys.readouterr().err


def test_split_maxtext_takes_an_optional_base_yml():
    base, settings = trainer.split_maxtext(["base.yml", "steps=5", "run_name=a=b"])
    assert base == "base.yml" and settings == {"steps": "5", "run_name": "a=b"}
    with pytest.raises(SystemExit, match="key=value"):
        trainer.split_maxtext(["steps=5", "oops"])


def test_find_job_names_the_stack_file(specs):
    with pytest.raises(LookupError, match=r"stacks/Pulumi.prod.yaml.*allowed: llama3-8b-multislice"):
        find_job(specs["prod"], "nope")


def test_committed_checkpoint_steps_ignore_unfinished_saves(tmp_path):
    for name in ("0", "5", "10.orbax-checkpoint-tmp-123", "junk"):
        (tmp_path / name).mkdir()
    assert trainer.committed_checkpoint_steps(str(tmp_path)) == [0, 5]
    assert trainer.committed_checkpoint_steps(str(tmp_path / "missing")) == []


def test_script_waits_for_a_stale_configmap_mount_then_runs_the_new_file(tmp_path):
    """The head's ConfigMap copy may lag the RayJob: the script re-executes the new version."""
    import threading

    from workloads.trainer.shipped_files import files_sha256

    script = tmp_path / "maxtext_trainer.py"
    script.write_text("old")
    new = "new version"
    wanted = files_sha256({script.name: new})  # the digest of its directory's files (the script alone here)
    threading.Timer(0.2, lambda: script.write_text(new)).start()
    calls = []

    class Exec(Exception):
        pass

    def execv(exe, argv):  # os.execv never returns
        calls.append(argv)
        raise Exec

    with pytest.raises(Exec):
        trainer.ensure_script_version(wanted, str(script), ["--mode", "elastic"], wait_s=10,
                                      poll_s=0.05, execv=execv)
    assert calls[0][1:] == [str(script), "--mode", "elastic"]
    # Already current: returns at once, no exec.
    trainer.ensure_script_version(wanted, str(script), [], execv=execv)
    assert len(calls) == 1
    with pytest.raises(SystemExit, match="is the trainer ConfigMap applied"):
        trainer.ensure_script_version("0" * 64, str(script), [], wait_s=0.1, poll_s=0.05)


def test_one_slice_groups_drop_the_pods_static_megascale_settings(monkeypatch):
    monkeypatch.setenv("MEGASCALE_NUM_SLICES", "2")
    monkeypatch.setenv("MEGASCALE_PORT", "9915")
    assert trainer.clear_stale_megascale(world_size=8, hosts_per_slice=4) == []  # two slices
    assert os.environ["MEGASCALE_NUM_SLICES"] == "2"
    assert trainer.clear_stale_megascale(world_size=4, hosts_per_slice=4) == ["MEGASCALE_NUM_SLICES"]
    assert "MEGASCALE_NUM_SLICES" not in os.environ and os.environ["MEGASCALE_PORT"] == "9915"


def test_deferred_imports_run_only_when_first_used(tmp_path, monkeypatch):
    """A deferred package is in sys.modules after ``import``, but its code runs on the first
    attribute read; other modules import as usual. (A stand-in package: the real ones,
    trainer.DEFERRED_IMPORTS, take seconds to import.)"""
    import sys

    pkg = tmp_path / "heavy_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import builtins\nbuiltins._heavy_runs = getattr(builtins, '_heavy_runs', 0) + 1\n"
                                     "VALUE = 42\n")
    (tmp_path / "light_mod.py").write_text("import heavy_pkg\nSEEN = heavy_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[trainer.defer_unused_imports.__module__], "DEFERRED_IMPORTS", ("heavy_pkg",))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    import builtins

    monkeypatch.setattr(builtins, "_heavy_runs", 0, raising=False)
    trainer.defer_unused_imports()
    trainer.defer_unused_imports()  # idempotent: one finder
    assert sum(isinstance(f, trainer._DeferredImports) for f in sys.meta_path) == 1
    try:
        import light_mod

        assert "heavy_pkg" in sys.modules and builtins._heavy_runs == 0  # imported, not run
        assert light_mod.SEEN.VALUE == 42 and builtins._heavy_runs == 1  # runs on first use, once
        assert light_mod.SEEN.VALUE == 42 and builtins._heavy_runs == 1
    finally:
        for name in ("heavy_pkg", "light_mod"):
            sys.modules.pop(name, None)


def test_deferred_imports_are_packages_of_the_worker_image():
    """Each deferred name is a real module of the environment (a typo would defer nothing)."""
    for name in trainer.DEFERRED_IMPORTS:
        assert importlib.util.find_spec(name) is not None, name
