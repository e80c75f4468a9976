"""Warm spares: idle worker processes with MaxText imported, asked of the raylet ahead of a restart, and the
driver-side settings that let a restarted training worker take one (no runtime env of its own). Shipped beside
``maxtext_trainer.py`` in the trainer ConfigMap."""

from __future__ import annotations

import os

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
