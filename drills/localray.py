"""A local Ray cluster of separate processes: a head plus one worker node per local "slice".

Each node is ``ray start --block`` started as a child in its own process group, with
its own ports (below 32768) and a capped object store. Ray's temp dir (its session, logs and
Unix sockets) is a short directory under /tmp named by a hash, whatever the run directory's
length (an AF_UNIX path holds at most 107 bytes); ``<run dir>/ray`` links to it while the
cluster runs and holds a copy of its logs once it is down. :class:`LocalRayCluster` ends
exactly the process groups it started (and their descendants), on exit, on an exception or
on Ctrl-C. It never runs ``ray stop``, which ends every Ray process on the host, other
people's included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# The trainer's per-slice resource (workloads/trainer/maxtext_trainer.py): one per slice node.
SLICE_RESOURCE = "local_slice"
PORT_FLOOR, PORT_CEILING = 20000, 32000  # below Linux's ephemeral range (32768+)
PORTS_PER_NODE = 48
WORKER_PORTS = 32  # Ray worker processes per node: Train workers plus Ray's own helpers
OBJECT_STORE_BYTES = 150 * 1024**2  # Ray's minimum is 75 MB; MaxText passes no big objects
READY_MARK = "Ray runtime started"
STARTUP_TIMEOUT_MARK = "timed out during startup"
START_ATTEMPTS = 4
# Every local process runs from this same environment. Ray's `uv run` hook (on by default)
# would otherwise, under `uv run pytest` or `uv run slicectl`, try to ship the project
# to the workers as a working_dir and refuse a run directory outside the project.
LOCAL_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
# Under the run dir: <node>/<pid>.ready, written by each of a warm slice node's worker processes once MaxText is
# imported (warm_worker), so a drill can tell its spares are ready before it kills.
SPARE_READY_DIR = "spares-ready"
# Ray's token authentication, as a stack's ``ray.auth`` asks: KubeRay's authOptions sets RAY_AUTH_MODE=token and the
# cluster's RAY_AUTH_TOKEN on every Ray container and on the submitter (workloads/security.py auth_options); a local
# cluster sets the same variables on every node and driver, with a token made as Ray makes one (ray/_private/
# authentication/authentication_token_generator.py: secrets.token_hex(32)). Without it, auth is off (Ray's default).
AUTH_MODE_ENV, AUTH_TOKEN_ENV = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN"


def auth_env(auth: str | None) -> dict[str, str]:
    """The environment of every process of a local cluster with ``ray.auth`` = ``auth`` (the spec's "token" or
    "disabled"; None: disabled)."""
    import secrets

    if auth == "token":
        return {AUTH_MODE_ENV: "token", AUTH_TOKEN_ENV: secrets.token_hex(32)}
    if auth in (None, "disabled"):
        return {AUTH_MODE_ENV: "disabled"}
    raise ValueError(f"ray.auth {auth!r}: allowed token, disabled")
START_TIMEOUT_S = 90.0
# Shutdown: SIGTERM, then SIGKILL whatever is left after this grace. Slice nodes end within
# a second of SIGTERM; the head's GCS, raylet and autoscaler monitor outlive it by more than
# 10 s (measured), and a throwaway local cluster keeps nothing worth waiting for.
SHUTDOWN_GRACE_S = 2.0
# Ray's Unix sockets live under its temp dir (<temp>/session_<date>_<time>_<pid>/sockets/raylet.<n>, about
# 60 bytes past it) and an AF_UNIX path holds at most 107 bytes (Linux sun_path): the temp dir is
# /tmp/<SHORT_TEMP_PREFIX><10 hex>, 21 bytes, whatever the run directory (a CI checkout alone is ~50).
SHORT_TEMP_ROOT = Path("/tmp")
SHORT_TEMP_PREFIX = "sray-"
SOCKET_PATH_MAX = 107


def short_temp_dir(run_dir: Path) -> Path:
    """A fresh short temp dir for a cluster of ``run_dir``: hashed from the run dir, this process and the time,
    so two clusters (two regions of one drill, two engineers' runs) never share one."""
    import hashlib

    key = f"{run_dir}:{os.getpid()}:{time.time_ns()}".encode()
    return SHORT_TEMP_ROOT / f"{SHORT_TEMP_PREFIX}{hashlib.sha256(key).hexdigest()[:10]}"
# The GCS declares a node dead after this many missed health checks of its raylet, one per
# period (Ray's defaults: 5 x 3 s). A local "preemption" is a SIGKILL: the raylet's port refuses at
# once, so each check fails at once and the verdict takes about threshold x period (0.6 s; 1.5 s at
# 500 ms, the detection phase measured on an idle machine); a live raylet slowed by load still has the
# timeout (2 s) to answer each one, so only a raylet silent for 3 x 2 s is called dead. The trainer's
# elastic policy waits for the verdict before sizing a restart.
HEAD_ENV = {"RAY_health_check_period_ms": "200", "RAY_health_check_timeout_ms": "2000",
            "RAY_health_check_failure_threshold": "3",
            # Ray Train's controller (an actor on the head) polls its workers this often (Ray's default 2 s): a
            # dead worker is seen sooner. Read when the controller is created, so from the head's environment.
            "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
            # What Ray Train sets in its controller's runtime env, which a warm run leaves out (maxtext_trainer.py
            # controller_without_runtime_env): the controller runs on the head.
            "RAY_WARN_BLOCKING_GET_INSIDE_ASYNC": "0",
            # Ray Train's preemption watcher (an actor with no resources, placed anywhere) reads the cloud's preemption
            # notices, which a local node never gets; placed on a slice node it would take that node's warm spare
            # (ray/train/v2/_internal/callbacks/preemption_callback.py, on by default in constants.py).
            "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}


class LocalRayError(RuntimeError):
    pass


@dataclass
class Node:
    name: str  # "head" or "slice-<i>"
    proc: subprocess.Popen
    ports: dict[str, int]
    log: Path
    started: float
    killed: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_block(taken: set[int]) -> int:
    """The first port of a free block of PORTS_PER_NODE ports, chosen away from other users."""
    span = (PORT_CEILING - PORT_FLOOR) // PORTS_PER_NODE
    start = (os.getpid() * 7919 + int(time.time())) % span
    for i in range(span):
        base = PORT_FLOOR + ((start + i) % span) * PORTS_PER_NODE
        block = range(base, base + PORTS_PER_NODE)
        if not taken.intersection(block) and all(_free(p) for p in block):
            taken.update(block)
            return base
    raise LocalRayError(f"no free block of {PORTS_PER_NODE} ports in {PORT_FLOOR}-{PORT_CEILING}")


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc), children first found first."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces): state, ppid, ...
        fields = stat.rsplit(")", 1)[1].split()
        parent[int(entry)] = int(fields[1])
    out, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        frontier += kids
    return out


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is still a process (a reaped child is not, nor a zombie waiting for its reaper)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _kill_tree(proc: subprocess.Popen, sig: int) -> None:
    """Signal the process group we created for ``proc`` and any descendant that left it."""
    pids = _descendants(proc.pid) if proc.poll() is None else []
    try:
        os.killpg(proc.pid, sig)  # start_new_session=True made pgid == pid
    except ProcessLookupError:
        pass
    for p in pids:
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class LocalRayCluster:
    """``with LocalRayCluster(run_dir, slices=2) as c:`` then ``c.address`` for drivers."""

    run_dir: Path
    slices: int = 2
    cpus_per_slice: int = 1
    head_cpus: int = 1
    object_store_bytes: int = OBJECT_STORE_BYTES
    nodes: list[Node] = field(default_factory=list)
    _taken: set[int] = field(default_factory=set)
    _next_slice: int = 0
    # pid -> (command name, peak resident set in kB), sampled while the cluster runs.
    peaks: dict[int, tuple[str, int]] = field(default_factory=dict)
    # Warm spares: non-zero, each slice node imports MaxText in every worker process it starts
    # (workloads/trainer/warm_worker.py) and carries the workers' environment, for the trainer's --warm-workers, whose
    # workers each ask their node for one idle process of the job (maxtext_trainer.keep_warm_spare); 0: none,
    # every worker starts cold.
    spares: int = 0
    # The stack's ``ray.auth`` ("token", "disabled" or None): every node, driver and spare request of this cluster
    # uses it.
    auth: str | None = None
    # Spare requests a node refused ((node, error)): reported by the drills, never dropped.
    spares_refused: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._sampling = False
        self.auth_env = auth_env(self.auth)
        self.run_dir = Path(self.run_dir).resolve()
        # Ray's Unix sockets live under the temp dir: short whatever the run directory.
        self.temp_dir = short_temp_dir(self.run_dir)

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalRayCluster:
        self._old_sigterm = signal.getsignal(signal.SIGTERM)
        # A SIGTERM to us becomes an exception, so __exit__ still cleans up.
        signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self.start()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        signal.signal(signal.SIGTERM, self._old_sigterm)

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.temp_dir.mkdir(parents=True, exist_ok=False)
        link = self.run_dir / "ray"
        if link.is_symlink() or link.is_file():
            link.unlink()
        if not link.exists():
            link.symlink_to(self.temp_dir)
        self._start_node("head", head=True)
        # One at a time: nodes sharing the head's session directory race when started together.
        for _ in range(self.slices):
            self.add_node()
        self._sampling = True
        threading.Thread(target=self._sample_memory, daemon=True).start()

    def _sample_memory(self) -> None:
        while self._sampling:
            for node in list(self.nodes):
                if not node.alive:
                    continue
                for pid in _descendants(node.pid):
                    try:
                        status = Path(f"/proc/{pid}/status").read_text()
                    except OSError:
                        continue
                    info = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                    hwm = int(info.get("VmHWM", "0 kB").split()[0])
                    name = info.get("Name", "?").strip()
                    if hwm > self.peaks.get(pid, ("", 0))[1]:
                        self.peaks[pid] = (name, hwm)
            time.sleep(2.0)

    def peak_rss_mb(self) -> int:
        """The largest peak resident set of any process of the cluster (a Train worker)."""
        return max((kb for _, kb in self.peaks.values()), default=0) // 1024

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.head.ports['gcs']}"

    @property
    def env(self) -> dict[str, str]:
        """Environment for a driver (or ``ray`` CLI) that should use this cluster."""
        return os.environ | LOCAL_ENV | self.auth_env | {"RAY_ADDRESS": self.address}

    def spare_ready_marks(self) -> dict[str, list[float]]:
        """Node name -> when each of its worker processes finished preloading MaxText (warm_worker's marks)."""
        root, out = self.run_dir / SPARE_READY_DIR, {}
        for d in root.iterdir() if root.is_dir() else ():
            out[d.name] = [float(f.read_text() or 0) for f in d.iterdir() if f.suffix == ".ready"]
        return out

    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.name != "head"]

    def _next_name(self) -> str:
        name = f"slice-{self._next_slice}"
        self._next_slice += 1
        return name

    def add_node(self) -> Node:
        """Start one more slice node (also a replacement after a kill)."""
        return self._start_node(self._next_name(), head=False)

    def live_workers(self) -> list[Node]:
        return [n for n in self.workers() if n.alive and not n.killed]

    def heal(self) -> list[Node]:
        """Replace killed slice nodes until ``slices`` are live again: a cluster that outlives one
        run (a drill kills nodes) is whole for the next. The new nodes."""
        return [self.add_node() for _ in range(self.slices - len(self.live_workers()))]

    def nodes_running(self, marker: str) -> list[Node]:
        """Live slice nodes with a process whose command line holds ``marker`` (Ray names an
        actor's worker process ``ray::<ActorClass>...``)."""
        out = []
        for node in self.workers():
            if not node.alive or node.killed:
                continue
            for pid in _descendants(node.pid):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if marker.encode() in cmd:
                    out.append(node)
                    break
        return out

    def kill_node(self, name: str | None = None) -> Node:
        """SIGKILL one slice node's raylet, workers and all (a Spot preemption: no grace)."""
        live = self.live_workers()
        if not live:
            raise LocalRayError("no live slice node to kill")
        node = live[-1] if name is None else next((n for n in live if n.name == name), None)
        if node is None:
            raise LocalRayError(f"no live slice node {name!r}; live: {[n.name for n in live]}")
        _kill_tree(node.proc, signal.SIGKILL)
        node.proc.wait(timeout=10)
        node.killed = True
        return node

    def lose(self) -> list[Node]:
        """SIGKILL every node, the head too, at once: a whole region lost (no grace, no drain).
        The nodes' processes and every descendant are signalled before any is waited on."""
        live = [n for n in self.nodes if n.alive]
        for node in live:
            _kill_tree(node.proc, signal.SIGKILL)
        for node in live:
            node.proc.wait(timeout=10)
            node.killed = True
        return live

    def process_ids(self) -> list[int]:
        """Every live process of the cluster: the nodes and their descendants."""
        return [p for n in self.nodes if n.alive for p in (n.pid, *_descendants(n.pid))]

    def shutdown(self) -> None:
        """End every node this object started: workers first, then the head. A Ctrl-C while
        this runs (the impatient second one) is noted, not obeyed: it would leave nodes behind."""
        with deferred_interrupts():
            self._shutdown()

    def _shutdown(self) -> None:
        self._sampling = False
        for node in reversed(self.nodes):
            if node.alive:
                _kill_tree(node.proc, signal.SIGTERM)
        deadline = time.time() + SHUTDOWN_GRACE_S
        for node in reversed(self.nodes):
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
        for node in reversed(self.nodes):
            # SIGKILL whatever is left of each group and its descendants.
            _kill_tree(node.proc, signal.SIGKILL)
            try:
                node.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._keep_logs()

    def _keep_logs(self) -> None:
        """Copy Ray's logs from the short temp dir into ``<run dir>/ray`` (replacing the link), then
        remove the temp dir: nothing of the cluster is left under /tmp."""
        import shutil

        if not self.temp_dir.exists():
            return
        link = self.run_dir / "ray"
        if link.is_symlink():
            link.unlink()
        for logs in self.temp_dir.glob("session_2*/logs"):
            shutil.copytree(logs, link / logs.parent.name / "logs", dirs_exist_ok=True,
                            ignore_dangling_symlinks=True,
                            ignore=shutil.ignore_patterns("*.sock"))
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    # ------------------------------------------------------------------ nodes

    def _start_node(self, name: str, head: bool) -> Node:
        for attempt in range(1, START_ATTEMPTS + 1):
            node = self._spawn_node(name, head)
            try:
                self._wait_ready(node)
                if self.spares:
                    self._prestart_spares(node)
                return node
            except LocalRayError as e:
                # Ray gives a node 30 s (hard-coded, ray/_private/node.py) to register with the GCS; on a
                # loaded machine (other nodes' spares importing MaxText) it can miss that: try again.
                if STARTUP_TIMEOUT_MARK not in str(e) or attempt == START_ATTEMPTS:
                    raise
                _kill_tree(node.proc, signal.SIGKILL)
                node.proc.wait(timeout=10)
                self.nodes.remove(node)
        raise AssertionError("unreachable")

    def _prestart_spares(self, node: Node) -> None:
        """A warm node starts idle worker processes at once, of no job (any job's actor takes one): a slice node
        ``spares``, each importing MaxText as it starts (the training workers then keep one of their own job on
        their node, maxtext_trainer.keep_warm_spare); the head HEAD_SPARES with Ray Train imported, for the
        controller and the helper actors it creates one after another when a job starts (a region's standby taking a
        dispatched job). Ray by itself prestarts a job's workers only once the job has started, too late for
        a standby.

        The request goes out from a short process with the cluster's environment: Ray fixes a process's auth mode
        at its first use (its RayConfig), so this process, which may serve clusters of other stacks, cannot be a
        client of a token cluster; that process sends it as Ray's own clients do (maxtext_trainer.prestart_workers).
        A refusal is kept in ``spares_refused`` and printed, for the drill's report."""
        count = HEAD_SPARES if node.name == "head" else self.spares
        # A refusal's status and reason on its own last line, as the trainer reports its workers' (a gRPC error's
        # repr spans lines and ends with ">", which said nothing in the report).
        code = ("import sys, grpc\nfrom workloads.trainer.maxtext_trainer import prestart_workers\n"
                "try:\n    prestart_workers(sys.argv[1], None, int(sys.argv[2]))\n"
                "except grpc.RpcError as e:\n"
                "    sys.exit(f'{e.code().name}: {e.details()}' if hasattr(e, 'code') else str(e))\n")
        root = Path(__file__).resolve().parents[1]
        env = self.env | {"PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
        env.pop("RAY_ADDRESS", None)
        # stdin closed: under pytest-xdist this process's stdin is execnet's channel to the controller, which no
        # child may inherit (one that reads it, or outlives the run holding it, stalls the worker).
        done = subprocess.run([sys.executable, "-c", code, f"127.0.0.1:{node.ports['node_manager']}", str(count)],
                              env=env, cwd=root, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            error = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            self.spares_refused.append((node.name, error))
            print(f"warm spares: node {node.name} refused {count} spare(s): {error}", file=sys.stderr, flush=True)

    def _spawn_node(self, name: str, head: bool) -> Node:
        base = _port_block(self._taken)
        ports = {
            "node_manager": base, "object_manager": base + 1, "agent_listen": base + 2,
            "agent_grpc": base + 3, "runtime_env_agent": base + 4, "metrics": base + 5,
            "min_worker": base + PORTS_PER_NODE - WORKER_PORTS,
            "max_worker": base + PORTS_PER_NODE - 1,
        }
        ray_bin = str(Path(sys.executable).with_name("ray"))
        cmd = [
            ray_bin, "start", "--block", "--disable-usage-stats",
            "--node-ip-address", "127.0.0.1",
            "--node-manager-port", str(ports["node_manager"]),
            "--object-manager-port", str(ports["object_manager"]),
            "--dashboard-agent-listen-port", str(ports["agent_listen"]),
            "--dashboard-agent-grpc-port", str(ports["agent_grpc"]),
            "--runtime-env-agent-port", str(ports["runtime_env_agent"]),
            "--metrics-export-port", str(ports["metrics"]),
            "--min-worker-port", str(ports["min_worker"]),
            "--max-worker-port", str(ports["max_worker"]),
            "--object-store-memory", str(self.object_store_bytes),
        ]
        if head:
            ports |= {"gcs": base + 6, "dashboard": base + 7, "client": base + 8}
            cmd += [
                "--head", "--port", str(ports["gcs"]), "--temp-dir", str(self.temp_dir),
                "--include-dashboard", "false", "--ray-client-server-port", str(ports["client"]),
                "--num-cpus", str(self.head_cpus), "--resources", "{}",
            ]
        else:
            cmd += [
                # Worker nodes on one host share the head's session dir (Ray 2.60 takes the
                # temp dir from the head), so one log monitor (the head's) forwards every
                # node's logs; a second one would print each line twice.
                "--address", self.address, "--include-log-monitor", "false",
                "--num-cpus", str(self.cpus_per_slice),
                "--resources", f'{{"{SLICE_RESOURCE}": 1}}',
            ]
        log = self.run_dir / f"node-{name}.log"
        env = os.environ | LOCAL_ENV | self.auth_env | (HEAD_ENV if head else {})
        if self.spares:
            env |= warm_head_env() if head else warm_env(self.spares)
            if not head:  # each preloaded process marks itself ready here (warm_worker.READY_DIR_ENV)
                (ready := self.run_dir / SPARE_READY_DIR / name).mkdir(parents=True, exist_ok=True)
                from workloads.trainer.maxtext_trainer import WARM_READY_DIR_ENV

                env[WARM_READY_DIR_ENV] = str(ready)
        env.pop("RAY_ADDRESS", None)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=env, cwd=self.run_dir,
            )
        node = Node(name, proc, ports, log, time.time())
        self.nodes.append(node)
        return node

    def _wait_ready(self, node: Node) -> None:
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            text = node.log.read_text(errors="replace")
            if READY_MARK in text:
                return
            if not node.alive:
                raise LocalRayError(f"ray node {node.name} exited at start:\n{text[-2000:]}")
            time.sleep(0.3)
        raise LocalRayError(f"ray node {node.name} not ready after {START_TIMEOUT_S:.0f} s; "
                            f"see {node.log}")


# A warm head's idle processes: Ray Train 2.60 starts its controller and then, one after another, an autoscaling
# coordinator, a synchronization actor and two more helpers on the head when a job starts (and its preemption
# watcher where that is on; HEAD_ENV turns it off): one spare each, and one beside.
HEAD_SPARES = 6
# Ray Train's controller and trainer modules, which every one of those processes would otherwise import first.
HEAD_PRELOAD = "ray.train.v2._internal.execution.controller.controller,ray.train.v2.jax"


def startup_concurrency(spares: int) -> dict[str, str]:
    """A raylet starts at most min(host cores, node CPUs) worker processes at a time and drops a prestart beyond that
    (ray/_private/services.py ``maximum_startup_concurrency``; ``RAY_worker_maximum_startup_concurrency`` overrides
    it): a warm node starts its spares together."""
    return {"RAY_worker_maximum_startup_concurrency": str(spares + 1)}


def warm_head_env() -> dict[str, str]:
    """A warm cluster's head: its worker processes import Ray Train's controller as they start."""
    return {"RAY_preload_python_modules": HEAD_PRELOAD} | startup_concurrency(HEAD_SPARES)


def warm_env(spares: int) -> dict[str, str]:
    """A slice node's environment for warm spares (the trainer's ``--warm-workers``): Ray imports ``warm_worker``
    (beside the trainer script) in every worker process it starts, the idle ones it prestarts included, starts its
    ``spares`` together, and carries what the trainer's runtime env would have given its workers (CPU JAX, its XLA
    flags), so an idle process fits a training worker as it is."""
    from workloads.trainer import maxtext_trainer
    from workloads.trainer_args import TRAINER_SCRIPT

    here = str(TRAINER_SCRIPT.parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    xla = f"{os.environ.get('XLA_FLAGS', '')} {maxtext_trainer.LOCAL_XLA_FLAGS}".strip()
    return {"RAY_preload_python_modules": "warm_worker", "PYTHONPATH": path, "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": xla} | startup_concurrency(spares)


def _raise_interrupt(signum, frame):  # noqa: ARG001
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def deferred_interrupts():
    """Hold SIGINT and SIGTERM off while cleanup runs (a no-op off the main thread, where
    signals never land). The program is ending anyway: what it was asked to do, it does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def note(signum, frame):  # noqa: ARG001
        if not got:
            print("\ncleaning up the local Ray cluster; please wait", file=sys.stderr, flush=True)
        got.append(signum)

    old = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
