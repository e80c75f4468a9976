"""Warm spares: idle Ray worker processes, MaxText already imported, that a restarted worker group takes.

The request is Ray's own raylet RPC (``NodeManagerService.PrestartWorkers``); the slow test asks a real local raylet
for a spare and checks that a training worker's actor is given it, the fast one checks the request on the wire
against Ray's generated service (a stand-in for the raylet's server side: the same generated servicer, in this
process).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent import futures
from pathlib import Path

import pytest

from drills.local_train import ROOT
from workloads.trainer import maxtext_trainer


def test_the_prestart_request_is_the_one_rays_raylet_serves():
    import grpc
    from ray.core.generated import common_pb2, node_manager_pb2, node_manager_pb2_grpc

    seen: list = []
    done = threading.Event()

    class Raylet(node_manager_pb2_grpc.NodeManagerServiceServicer):
        def PrestartWorkers(self, request, context):  # noqa: N802 - Ray's method name
            seen.append(request)
            done.set()
            return node_manager_pb2.PrestartWorkersReply()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    node_manager_pb2_grpc.add_NodeManagerServiceServicer_to_server(Raylet(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        maxtext_trainer.prestart_workers(f"127.0.0.1:{port}", "01000000", count=2)
        maxtext_trainer.prestart_workers(f"127.0.0.1:{port}", None)
        assert done.wait(10)
    finally:
        server.stop(None)
    job, anyone = seen
    assert job.language == common_pb2.Language.PYTHON and job.job_id == bytes.fromhex("01000000")
    assert job.num_workers == 2 and job.keep_alive_duration_secs == maxtext_trainer.SPARE_KEEP_ALIVE_S
    # No runtime env: a warm training worker has none (and an actor is given an idle process only if they match).
    assert job.runtime_env_info.serialized_runtime_env == "{}"
    assert anyone.job_id == b"" and anyone.num_workers == 1  # no job: any job's actor may take it


AUTH_PROBE = textwrap.dedent("""
    # One process per auth mode: Ray fixes a process's mode at first use (RayConfig).
    import grpc, sys
    from ray._private.grpc_utils import create_grpc_server_with_interceptors
    from ray.core.generated import node_manager_pb2, node_manager_pb2_grpc
    from workloads.trainer import maxtext_trainer

    class Raylet(node_manager_pb2_grpc.NodeManagerServiceServicer):
        def PrestartWorkers(self, request, context):
            return node_manager_pb2.PrestartWorkersReply()

    # Ray's own server, with the authentication interceptor Ray adds to its servers when token auth is on.
    server = create_grpc_server_with_interceptors(max_workers=1)
    node_manager_pb2_grpc.add_NodeManagerServiceServicer_to_server(Raylet(), server)
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    for name, call in [("trainer", lambda: maxtext_trainer.prestart_workers(address, None)),
                       ("raw channel", lambda: node_manager_pb2_grpc.NodeManagerServiceStub(
                           grpc.insecure_channel(address)).PrestartWorkers(
                           node_manager_pb2.PrestartWorkersRequest(), timeout=10))]:
        try:
            call()
            print(name, "ACCEPTED")
        except grpc.RpcError as e:
            print(name, e.code().name)
    server.stop(None)
""")


@pytest.mark.parametrize("mode", ["token", "disabled"])
def test_the_prestart_request_authenticates_as_rays_own_clients_do(mode):
    """Under Ray's token auth (RAY_AUTH_MODE=token with RAY_AUTH_TOKEN, what KubeRay's authOptions sets on every
    Ray container) a server built as Ray builds its own (``create_grpc_server_with_interceptors``, Ray's auth
    interceptor) accepts the trainer's spare request and refuses one on a raw channel, as the raylet does; with
    auth off both pass. (A real raylet: the slow test below without auth, the warm-spare drill with the token.)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {
        "RAY_AUTH_MODE": mode, "PYTHONPATH": str(ROOT)}
    if mode == "token":
        env["RAY_AUTH_TOKEN"] = "a1" * 32
    out = subprocess.run([sys.executable, "-c", AUTH_PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    lines = out.stdout.splitlines()
    expected = ["trainer ACCEPTED", "raw channel UNAUTHENTICATED" if mode == "token" else "raw channel ACCEPTED"]
    assert lines == expected, out.stdout + out.stderr[-2000:]


ACTOR = textwrap.dedent("""
    import os, sys, time, ray
    t = time.time()  # before the job starts: Ray may prestart workers of the job on its nodes as it connects
    ray.init(address=os.environ["RAY_ADDRESS"])

    @ray.remote(num_cpus=1, resources={"local_slice": 1})
    class TrainWorkerLike:
        def where(self):
            import psutil
            ready = getattr(sys.modules.get("warm_worker"), "READY_AT", None)  # its preload done
            return os.getpid(), psutil.Process().create_time(), ready is not None and ready < t

    time.sleep(5)
    t_actor = time.time()
    pid, started, imported = ray.get(TrainWorkerLike.remote().where.remote())
    print(f"actor pid={pid} started_before_job={started < t} imported={imported} "
          f"started_before_actor={started < t_actor}", flush=True)
""")


# With Ray's token auth (prod's ``ray.auth``) the same holds: proven end to end by the warm-spare drill
# (tests/test_drill_warm_spares.py, prod's settings): its nodes' start-up spares and its workers' spare requests go
# through the same prestart_workers with the token (a refusal fails that drill), and its restart must run in the spare
# its own node was asked for, started and done importing MaxText before the kill. A third cluster here for the token
# case cost about 60 s of a worker's wall time and proved nothing that drill does not; the request's token metadata
# itself is checked without a cluster above (test_the_prestart_request_authenticates_as_rays_own_clients_do).
@pytest.mark.slow
@pytest.mark.parametrize(("spares", "auth"), [(1, None), (0, None)])
def test_a_warm_nodes_spare_serves_a_training_workers_actor(spares, auth):
    """A slice node started with one spare: an actor shaped like a Train worker (a CPU, the slice resource, no
    runtime env), created once the spare is up, runs in that process, which was started, and had imported MaxText's
    training loop, before the job. Without spares, the actor's process is one Ray starts as the job connects
    (measured: before the actor is created, so Ray prestarts a job's workers itself, but at the job's start, not
    for a restart), without MaxText (the control). With Ray's token auth: the warm-spare drill (comment above)."""
    from drills.localray import LocalRayCluster

    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="ws-", dir=ROOT / "build"))
    try:
        with LocalRayCluster(run_dir, slices=1, spares=spares, auth=auth) as cluster:
            assert cluster.spares_refused == []
            env = cluster.env | {"RAY_ADDRESS": cluster.address}
            if spares:
                # The spare imports MaxText as it starts (seconds of CPU): wait for the node's mark that it is done,
                # the one warm_worker writes after its import (the drills wait on the same mark). The actor's own
                # check below is exact: its process was started, and done importing, before the job.
                node, deadline = cluster.workers()[0], time.time() + 400
                while not cluster.spare_ready_marks().get(node.name) and time.time() < deadline:
                    time.sleep(0.2)
                assert cluster.spare_ready_marks().get(node.name), f"no spare of {node.name} ready in 400 s"
            out = subprocess.run([sys.executable, "-c", ACTOR], env=env, capture_output=True, text=True, timeout=300,
                                 cwd=run_dir, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)  # the cluster's logs: gone with it, as in the drills' tests
    expected = "started_before_job=True imported=True" if spares else "started_before_job=False imported=False"
    assert expected in out.stdout, out.stdout + out.stderr[-3000:]


# --------------------------------------------------------------------------- the cluster opt-in (unverified)

IMAGE = "tpu-multislice:image"
DIGEST = "sha256:" + "ab" * 32  # a well-formed digest: the stack runs its own image


def _with_own_image(config: dict[str, str]) -> dict[str, str]:
    import json

    return dict(config) | {IMAGE: json.dumps(json.loads(config[IMAGE]) | {"digest": DIGEST})}


def test_the_cluster_opt_in_preloads_maxtext_on_the_tpu_hosts_and_the_trainer_keeps_spares():
    """unverified.warmSpares: every TPU worker container preloads warm_worker from the trainer's ConfigMap (mounted
    there too), the trainer gets --warm-workers beside --prebuilt-image and accepts that pair, and the preview
    lists the path as unverified."""
    from conftest import opt_in

    from offline import engine
    from stackspec import spec as stack_spec
    from workloads.manifests import TRAINER_DIR

    rendered = engine.render("prod", opt_in(_with_own_image(engine.stack_config("prod")), "warmSpares"))
    assert f"{stack_spec.PROJECT}:unverified.warmSpares" in rendered.spec.unverified_paths
    jobs = [d for d in rendered.manifests if d["kind"] == "RayJob"]
    configmaps = [d for d in rendered.manifests if d["kind"] == "ConfigMap" and "warm_worker.py" in d.get("data", {})]
    assert jobs and configmaps
    assert configmaps[0]["data"]["warm_worker.py"] == Path(maxtext_trainer.__file__).with_name(
        "warm_worker.py").read_text()
    for doc in jobs:
        own = doc["spec"]["entrypoint"].split()[2:]
        own = own[:own.index("--")]
        args, _ = maxtext_trainer.parse_args(own)
        assert args.warm_workers and args.prebuilt_image and not args.local
        for group in doc["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
            container = group["template"]["spec"]["containers"][0]
            env = {e["name"]: e["value"] for e in container["env"]}
            assert env["RAY_preload_python_modules"] == "warm_worker" and env["PYTHONPATH"] == TRAINER_DIR
            assert any(m["mountPath"] == TRAINER_DIR and m.get("readOnly") for m in container["volumeMounts"])
    plain = engine.render("prod", _with_own_image(engine.stack_config("prod")))
    assert not any("warm_worker.py" in d.get("data", {}) for d in plain.manifests if d["kind"] == "ConfigMap")
    assert all("--warm-workers" not in d["spec"]["entrypoint"] for d in plain.manifests if d["kind"] == "RayJob")


def test_the_cluster_opt_in_without_the_stacks_own_image_is_refused_by_name():
    from conftest import opt_in

    from offline import engine
    from stackspec import spec as stack_spec
    from stackspec.errors import SpecError

    with pytest.raises(SpecError) as e:
        stack_spec.load("prod", opt_in(engine.stack_config("prod"), "warmSpares"))
    assert "unverified.warmSpares" in str(e.value) and "own worker image" in str(e.value)


TOKEN_RAYLET = textwrap.dedent("""
    # Ray's own server with the authentication interceptor its servers get under token auth; serves until stdin ends.
    import sys
    from ray._private.grpc_utils import create_grpc_server_with_interceptors
    from ray.core.generated import node_manager_pb2, node_manager_pb2_grpc

    class Raylet(node_manager_pb2_grpc.NodeManagerServiceServicer):
        def PrestartWorkers(self, request, context):
            return node_manager_pb2.PrestartWorkersReply()

    server = create_grpc_server_with_interceptors(max_workers=1)
    node_manager_pb2_grpc.add_NodeManagerServiceServicer_to_server(Raylet(), server)
    print(server.add_insecure_port('127.0.0.1:0'), flush=True)
    server.start()
    sys.stdin.read()
    server.stop(None)
""")


def test_a_nodes_refused_spares_are_reported_with_the_raylets_reason():
    """A warm node whose raylet refuses its start-up spares (here: a token the server does not hold) is reported in
    the drill's figures with the raylet's status and reason, not the last line of a gRPC error's repr (``>``)."""
    from types import SimpleNamespace

    from drills.localray import LocalRayCluster

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"PYTHONPATH": str(ROOT)}
    raylet = subprocess.Popen([sys.executable, "-c", TOKEN_RAYLET], env=env | {
        "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "a1" * 32}, cwd=ROOT, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    try:
        port = int(raylet.stdout.readline())
        cluster = SimpleNamespace(env=env | {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "b2" * 32}, spares=1,
                                  spares_refused=[])
        LocalRayCluster._prestart_spares(cluster, SimpleNamespace(name="slice-0", ports={"node_manager": port}))
    finally:
        raylet.stdin.close()
        raylet.wait(timeout=30)
    [(node, error)] = cluster.spares_refused
    assert node == "slice-0" and error.startswith("UNAUTHENTICATED: ") and "token" in error, error
