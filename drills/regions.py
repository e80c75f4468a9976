"""``slicectl drill --local --scenario region-loss``: a whole region lost, the run resumed in another.

Two local Ray clusters (a head and its slice nodes each, every node its own process group,
:class:`~drills.localray.LocalRayCluster`) stand in for two regions' clusters; one directory
stands in for the checkpoint bucket every region reads (a dual- or multi-region bucket). The drill:

1. runs the job in region A on its slices (the real trainer script, a tiny MaxText on CPU) under
   the job's run name, which names no region, so a run resumes wherever it lands;
2. waits for a committed checkpoint past step 0 and the kill step, then loses region A whole:
   SIGKILL to its head, every slice node and the job's driver (the submitter runs in the region
   too), between checkpoints;
3. detects the loss as the manager does, by its connection to region A failing (the head's GCS
   port refuses), then waits ``worker_lost_timeout_s`` (Kueue's ``multiKueue.workerLostTimeout``:
   how long MultiKueue keeps a workload on a worker it cannot reach, 15 minutes by default,
   kubernetes-sigs/kueue v0.19.2 apis/config/v1beta2/configuration_types.go:345-351) before
   dispatching the job again;
4. submits the same job to region B, on that region's slice count where the job allows another
   (an elastic job; a multislice job's DCN mesh and run name fix its slice count), and follows it
   from the last committed checkpoint to its final step.

It passes when training resumes at the last checkpoint committed at the loss + 1, no more than a
period is lost, the first steps in B continue A's loss curve (a restore from another worker count:
the reshard drill's tolerances), no half-written checkpoint is restored or left corrupt, the final
step is committed, and nothing of region A is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from drills.checkpoints import checkpoint_dirs, corrupt_checkpoints
from drills.local import POLL_S
from drills.localray import pid_alive
from drills.report import DrillFailed, DrillReport
from drills.reshard import CONTINUATION_LOSS_TOL, FIRST_STEP_LOSS_TOL
from drills.spares import SPARE_READY_TIMEOUT_S, restart_on_standby_spares
from drills.timeline import Timeline
from stackspec.spec import Job, StackSpec

SCENARIO = "region-loss"
STANDBYS = ("warm", "up", "cold")
DEFAULT_STEPS = 20
# Local stand-ins when the stack has no regions of its own.
DEFAULT_REGIONS = (("region-a", 2), ("region-b", 1))


@dataclass(frozen=True)
class Region:
    name: str
    slices: int  # slices of the job's shape there
    # The region's single-region view of the stack (None: the local stand-ins): the trainer's arguments
    # for a run there come from it (its slice shape).
    site: StackSpec | None = field(default=None, compare=False, repr=False)


def stack_regions(spec: StackSpec, job: Job) -> list[Region]:
    """The regions ``job`` can run in, in its dispatch order, with the slices of its shape in each.

    A job the manager queues: its placements (``StackSpec.placements``: the MultiKueueConfig's order, which
    the incremental dispatcher nominates in); a job pinned to a region: that region only (it is created
    there, nothing moves it); a single-region stack: itself."""
    views = None
    if getattr(spec, "regions", None):
        views = spec.placements().get(job.name)
        if views is None:
            views = tuple(v for v in spec.region_views() if v.region == job.region)
    if views is None:
        views = spec.region_views() if callable(getattr(spec, "region_views", None)) else [spec]
    out = []
    for v in views:
        j = next((x for x in v.jobs if x.name == job.name), job)
        replicas = {g.name: g.replicas for g in v.groups}
        out.append(Region(v.region, replicas.get(j.group, 0), site=v))
    return out


def pick_job(spec: StackSpec, name: str | None) -> Job:
    """The named job, else on a multi-region stack the first job the manager can dispatch to two regions
    (elastic first, as :meth:`StackSpec.drill_job`), else the stack's drill job. A job pinned to one region
    is refused: losing its region takes it down, no other region runs it."""
    if not getattr(spec, "regions", None):
        return spec.drill_job(name)
    movable = [j for j in spec.jobs if len(stack_regions(spec, j)) >= 2]
    if name:
        job = spec.job(name)
        if job not in movable:
            raise ValueError(f"job {name} runs in {job.region or 'one region'} only (created there, not queued on "
                             f"the manager): a region loss has nowhere to move it; drill one of "
                             f"{', '.join(j.name for j in movable) or '(none)'}")
        return job
    if not movable:
        raise ValueError(f"stack {spec.stack}: no job can run in two regions (every job is pinned to one)")
    return ([j for j in movable if j.elastic] or movable)[0]


def default_regions(spec: StackSpec, job: Job) -> tuple[Region, Region]:
    """Region A (where the job runs first: the first of its dispatch order with its shape) and region B (where
    MultiKueue dispatches it next), else :data:`DEFAULT_REGIONS` on a single-region stack."""
    have = [r for r in stack_regions(spec, job) if r.slices]
    if len(have) >= 2:
        return have[0], have[1]
    return Region(*DEFAULT_REGIONS[0]), Region(*DEFAULT_REGIONS[1])


def workers_in(job: Job, slices_a: int, slices_b: int) -> tuple[int, int]:
    """Workers (one per local slice) the job trains on in A and in B; ValueError when B cannot run it.

    Elastic: any count from ``minSlices`` to the slices at hand (a checkpoint restores on another
    worker count: the reshard drill). Multislice: exactly its ``slices`` in every region: its DCN
    mesh is part of its run name (stackspec/runs.py), so another count would be another run."""
    if slices_a < 1 or slices_b < 1:
        raise ValueError(f"each region needs at least one slice of the job's shape (A {slices_a}, B {slices_b})")
    if job.elastic:
        low = min(job.min_slices or 1, slices_a)
        if slices_b < low:
            raise ValueError(f"region B has {slices_b} slice(s); job {job.name} needs at least minSlices {low}")
        return slices_a, min(slices_b, slices_a)
    if slices_b < slices_a:
        raise ValueError(f"job {job.name} is multislice on exactly {slices_a} slice(s) (its DCN mesh is in its run "
                         f"name); region B has {slices_b}: it cannot resume there")
    return slices_a, slices_a


@dataclass(frozen=True)
class RegionLossOptions:
    region_a: Region = Region(*DEFAULT_REGIONS[0])
    region_b: Region = Region(*DEFAULT_REGIONS[1])
    steps: int = DEFAULT_STEPS
    checkpoint_period: int = 5
    step_delay: float = 0.3
    kill_after_step: int | None = None  # default: half a period past the first checkpoint
    # Kueue's multiKueue.workerLostTimeout stand-in: seconds from the loss detected to the job
    # dispatched again (15 min by default on a real manager).
    worker_lost_timeout_s: float = 0.0
    probe_interval_s: float = 0.25  # how often the "manager" checks region A's head
    timeout_s: float = 900.0
    jax_cache_dir: Path | None = None
    # Region B before the loss. warm: its cluster up, each slice node keeping idle worker processes with MaxText
    # imported (the trainer's --warm-workers) and its head idle ones with Ray Train imported; up: its cluster up,
    # no spares (the job's workers start and import MaxText at the dispatch); cold: nothing running there, its
    # cluster started once the loss is seen. In each, the job is submitted at the dispatch, as MultiKueue creates
    # it in the region it picks.
    standby: str = "up"
    # The stack's writer lease (drills.writer_lease). None: the stack's own (its queued jobs hold one); True/False
    # overrides it, and the report says so.
    lease: bool | None = None
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.standby not in STANDBYS:
            raise ValueError(f"standby {self.standby!r}: allowed {', '.join(STANDBYS)}")

    def kill_step(self) -> int:
        if self.kill_after_step is not None:
            return self.kill_after_step
        return self.checkpoint_period + max(1, self.checkpoint_period // 2)


def judge(*, period: int, committed_at_kill: list[int], in_flight_at_kill: list[int], restored: int | None,
          start_world: int | None, workers_b: int, last_step_a: int | None, losses_a: dict[int, float],
          losses_b: dict[int, float], final_step: int | None, target_step: int, committed_end: list[int],
          corrupt_end: list[int], left_a: list[int], driver_ok: bool) -> tuple[list[str], dict]:
    """The drill's verdict from what it saw: (problems, figures). Pure: the slow test runs it on a real
    run, the fast tests on the cases a real run rarely shows."""
    problems: list[str] = []
    figures: dict = {}
    latest = max(committed_at_kill, default=None)
    if latest is None or latest <= 0:
        problems.append(f"no checkpoint past step 0 was committed at the loss ({committed_at_kill})")
    if restored is None:
        problems.append("region B never started training")
    elif restored != latest:
        problems.append(f"region B resumed after checkpoint {restored}, the last committed at the loss was {latest}")
    if restored is not None and restored in in_flight_at_kill:
        problems.append(f"checkpoint {restored} was being written at the loss: a partial save was restored")
    if start_world is not None and start_world != workers_b:
        problems.append(f"region B trains on {start_world} worker(s), expected {workers_b}")
    lost = None if restored is None or last_step_a is None else max(0, last_step_a - restored)
    # A save in flight at the loss: the steps run while it was written are lost with it.
    allowed = period + (max(0, (last_step_a or 0) - min(in_flight_at_kill)) if in_flight_at_kill else 0)
    figures["steps lost allowed"] = allowed
    if lost is not None and lost > allowed:
        problems.append(f"{lost} steps lost, more than the checkpoint period {period}")
    # Loss continuity: B's first step runs on the restored state (A ran the same step on the same
    # state, on its own worker count); the steps after it add each update's rounding.
    overlap = sorted(s for s in losses_b if s in losses_a and restored is not None and s > restored)
    first = None
    if restored is not None and restored + 1 in losses_b and restored + 1 in losses_a:
        first = abs(losses_b[restored + 1] - losses_a[restored + 1])
    worst = max((abs(losses_b[s] - losses_a[s]) for s in overlap), default=None)
    figures["first step |loss - region A's|"] = None if first is None else float(f"{first:.2e}")
    figures["max |loss - region A's| (steps both ran)"] = None if worst is None else float(f"{worst:.2e}")
    figures["steps both regions ran"] = len(overlap)
    if first is not None and first > FIRST_STEP_LOSS_TOL:
        problems.append(f"first step in region B has loss {losses_b[restored + 1]:.6f}, region A had "
                        f"{losses_a[restored + 1]:.6f} (tolerance {FIRST_STEP_LOSS_TOL})")
    if worst is not None and worst > CONTINUATION_LOSS_TOL:
        s = max(overlap, key=lambda x: abs(losses_b[x] - losses_a[x]))
        problems.append(f"step {s}: loss {losses_b[s]:.6f} in region B, {losses_a[s]:.6f} in region A "
                        f"(tolerance {CONTINUATION_LOSS_TOL})")
    if first is None and restored is not None and last_step_a is not None and last_step_a > restored:
        problems.append(f"no loss for step {restored + 1} from both regions: continuity unchecked")
    if not driver_ok:
        problems.append("the job failed in region B")
    if final_step != target_step:
        problems.append(f"final step {final_step}, expected {target_step}")
    if not committed_end or committed_end[-1] != target_step:
        problems.append(f"final checkpoint {target_step} not committed (have {committed_end[-3:]})")
    if gone := sorted(set(committed_at_kill) - set(committed_end)):
        problems.append(f"checkpoints committed before the loss are gone: {gone}")
    if corrupt_end:
        problems.append(f"committed checkpoints without Orbax's metadata: {corrupt_end}")
    if left_a:
        problems.append(f"{len(left_a)} process(es) of region A still running after the loss: {left_a[:5]}")
    return problems, figures | {"steps lost": lost}


def stack_standby(job) -> str:
    """What stands in region B before a dispatch, as the stack renders ``job``: a standing RayCluster (``up`` or
    ``warm``) only for a job on the shared cluster; a dedicated RayJob brings its own, which KubeRay creates once
    the RayJob exists in B (ray-operator/controllers/ray/rayjob_controller.go, Initializing:
    getOrCreateRayClusterInstance), and MultiKueue creates it there only at the dispatch (kueue
    pkg/controller/jobs/rayjob/rayjob_multikueue_adapter.go SyncJob): ``cold`` is what such a job meets."""
    if job.cluster == "shared":
        return "up: the stack's shared RayCluster stands in each region (warm with unverified.warmSpares)"
    return ("cold: the job's RayJob brings its own RayCluster, created in region B at the dispatch; an up or warm "
            "standby is a shared RayCluster this job does not use")


def gcs_reachable(address: str, timeout: float = 0.2) -> bool:
    """Whether a Ray head's GCS accepts a connection (the manager's view of a region)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class _Region:
    region: Region
    workers: int
    timeline: Timeline = field(default_factory=Timeline)
    cluster: object = None
    driver: object = None

    @property
    def lane(self) -> str:
        return f"{self.region.name} ({self.workers} slice{'s' if self.workers > 1 else ''})"


class RegionLossDrill:
    """``RegionLossDrill(spec, job, run_dir, options).run()`` -> :class:`DrillReport`."""

    def __init__(self, spec: StackSpec, job: Job, run_dir: Path, options: RegionLossOptions,
                 cluster_b=None):
        """``cluster_b``: a running :class:`~drills.localray.LocalRayCluster` to stand in for region B
        (it stays up); region A's cluster is always the drill's own: it is lost."""
        o = options
        if o.checkpoint_period < 1 or o.step_delay < 0:
            raise ValueError("--checkpoint-period must be at least 1 and --step-delay 0 or more")
        if o.steps <= o.kill_step() + 1:
            raise ValueError(f"--steps {o.steps} leaves nothing to resume: region A is lost after step "
                             f"{o.kill_step()}; use more steps")
        if o.kill_step() <= o.checkpoint_period - 1:
            raise ValueError(f"--kill-after-step {o.kill_step()}: the first checkpoint past step 0 is "
                             f"{o.checkpoint_period}; lose the region after it")
        workers_a, workers_b = workers_in(job, o.region_a.slices, o.region_b.slices)
        if cluster_b is not None and len(cluster_b.live_workers()) < workers_b:
            raise ValueError(f"region B's cluster has {len(cluster_b.live_workers())} live slice node(s), the job "
                             f"needs {workers_b}")
        self.spec, self.job, self.opts = spec, job, o
        self.run_dir = Path(run_dir).resolve()
        self.bucket = self.run_dir / "bucket"  # the checkpoint bucket both regions read
        self.ckpt_dir = self.bucket / job.run_name / "checkpoints"
        self.a = _Region(o.region_a, workers_a)
        self.b = _Region(o.region_b, workers_b, cluster=cluster_b)
        self._own_b = cluster_b is None
        if o.standby == "cold" and not self._own_b:
            raise ValueError("a cold standby is started by the drill after the loss: pass no running cluster for B")
        self.report = DrillReport(target=f"local:{spec.stack}/{job.name}", job=job.name, elastic=job.elastic,
                                  target_step=o.steps - 1, scenario=SCENARIO)
        self.t0 = time.time()
        self.t_job: float | None = None
        self.files: dict = {}
        from drills.writer_lease import drill_lease

        self.lease, self.lease_source = drill_lease(spec, job, o.lease)
        self.emulator = None  # drills.writer_lease.Emulator while the drill runs, with the lease on

    def say(self, msg: str) -> None:
        print(f"[{time.time() - self.t0:6.1f}s] {msg}", flush=True)

    def _wait(self, what: str, ready, deadline: float, region: _Region | None = None):
        while True:
            if value := ready():
                return value
            d = region.driver if region else None
            if d is not None and d.proc.poll() is not None:
                if value := ready():
                    return value
                raise DrillFailed(f"the job ended in {region.region.name} (driver exit {d.proc.returncode}) while "
                                  f"waiting for {what}; see {d.log}")
            if time.time() > deadline:
                raise DrillFailed(f"timed out waiting for {what}")
            time.sleep(POLL_S)

    def _submit(self, r: _Region) -> None:
        from drills.local_train import JAX_CACHE_DIR, start_driver
        from workloads.trainer_args import trainer_argv

        o = self.opts
        site = r.region.site or self.spec
        argv = trainer_argv(site, site.job(self.job.name), local=True, data_dir=str(self.bucket),
                            local_slices=r.workers, steps=o.steps, step_delay=o.step_delay,
                            checkpoint_period=o.checkpoint_period,
                            jax_cache_dir=str(o.jax_cache_dir or JAX_CACHE_DIR),
                            warm_workers=bool(r.cluster.spares), **self._lease_args())
        if self.t_job is None:
            self.t_job = time.time()

        def on_event(e: dict) -> None:
            r.timeline.on_event(e)
            if e["event"] == "start":
                self.say(f"{r.region.name}: training started on {e['world']} worker(s) at step {e['start_step']}")
            elif e["event"] == "step" and (o.verbose or e["step"] % o.checkpoint_period == 0):
                self.say(f"{r.region.name}: step {e['step']}")

        r.driver = start_driver(r.cluster, argv, self.run_dir / f"driver-{r.region.name}.log", on_event,
                                on_line=r.timeline.on_line, env=self.emulator.env() if self.emulator else None)

    def _lease_args(self) -> dict:
        from drills import writer_lease

        return {"lease": writer_lease.location(self.job.run_name), "lease_ttl": writer_lease.DRILL_TTL_S} \
            if self.emulator else {}

    def run(self) -> DrillReport:
        from drills.localray import LocalRayCluster, LocalRayError

        o, rep = self.opts, self.report
        deadline = self.t0 + o.timeout_s
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.say(f"drill {SCENARIO}: job {self.job.name} ({self.job.mode}, run {self.job.run_name}) in "
                 f"{self.a.region.name} on {self.a.workers} slice(s), resumed in {self.b.region.name} on "
                 f"{self.b.workers}; {o.steps} steps, checkpoint every {o.checkpoint_period}; bucket {self.bucket}")
        spares = 1 if o.standby == "warm" else 0
        from drills import image_settings

        rep.notes += image_settings.report_lines(self.spec, self.job)  # each applied, or why not
        # Each region's cluster with the stack's Ray auth (its token its own, as each RayCluster's Secret is).
        auth = self.spec.ray.auth
        self.a.cluster = LocalRayCluster(self.run_dir / "a", slices=self.a.workers, spares=spares, auth=auth)
        if self._own_b:
            self.b.cluster = LocalRayCluster(self.run_dir / "b", slices=self.b.workers, spares=spares, auth=auth)
        try:
            with contextlib.ExitStack() as stack:
                self._stack = stack
                rep.figures["writer lease"] = self.lease_source
                if self.lease:
                    from drills.writer_lease import Emulator

                    self.emulator = stack.enter_context(Emulator())
                stack.enter_context(self.a.cluster)
                if self._own_b and o.standby != "cold":
                    # Region B stands before the job exists, as MultiKueue's worker clusters do: its spares preload
                    # MaxText while the job cold-starts in A. (Started after the submission, as before, a warm
                    # standby's spare was still importing at the loss of a 20-step run and the restart waited for
                    # it, 2026-11-28: "restarted on a warm spare: no", rightly.)
                    stack.enter_context(self.b.cluster)
                    self.say(f"{self.b.region.name} up at {self.b.cluster.address} ({o.standby} standby)")
                self.say(f"{self.a.region.name} up at {self.a.cluster.address}; job submitted")
                self._submit(self.a)

                self._drill(deadline)
        except (DrillFailed, LocalRayError) as e:
            rep.ok = False
            rep.notes.append(f"drill failed: {e}")
            self.say(f"FAILED: {e}")
        finally:
            for r in (self.a, self.b):
                if r.driver is not None:
                    r.driver.stop()
            rep.wall_s = round(time.time() - self.t0, 1)
            self._timeline_figures()
            self.files = rep.publish(self.run_dir)
        return rep

    def _wait_for_standby_spares(self, deadline: float) -> None:
        """A warm standby is one whose spares are ready: a region is lost long after its standby came up, a drill
        seconds after. Wait (before the loss) until every slice node of region B has a process done importing
        MaxText (warm_worker's ready marks), bounded by SPARE_READY_TIMEOUT_S and by region A's run nearing its
        end (a loss must leave steps to resume); past either the loss comes anyway and the report says so."""
        a, b = self.a, self.b
        if self.opts.standby != "warm" or not b.cluster.spares:
            return
        t, nodes = time.time(), [n.name for n in b.cluster.live_workers()]
        last = self.opts.steps - self.opts.checkpoint_period - 2

        def ready():
            marks = b.cluster.spare_ready_marks()
            if all(marks.get(n) for n in nodes):
                return "ready"
            step = a.timeline.last_step()
            return "region A's run ending" if step is not None and step >= last else None

        try:
            why = self._wait(f"{b.region.name}'s spares to be ready", ready,
                             min(deadline, t + SPARE_READY_TIMEOUT_S), a)
        except DrillFailed:
            why = f"not ready {SPARE_READY_TIMEOUT_S:.0f} s after the wait began"
        if why != "ready":
            self.report.notes.append(f"{b.region.name}'s spares: {why}; lost region A anyway (use more --steps)")
        self.report.figures["waited for the standby's spares before the loss (s)"] = round(time.time() - t, 1)

    def _drill(self, deadline: float) -> None:
        o, rep, a, b = self.opts, self.report, self.a, self.b
        kill_at = o.kill_step()

        def ready():
            # MaxText logs a step's loss a step or two after running it: wait for the loss of the step after
            # the last committed checkpoint too, the step region B runs first, to compare the two regions by.
            committed, _ = checkpoint_dirs(self.ckpt_dir)
            step = a.timeline.last_step()
            past = [c for c in committed if c > 0]
            with a.timeline.lock:
                reported = past and past[-1] + 1 in a.timeline.losses
            return reported and step is not None and step >= kill_at

        self._wait(f"a committed checkpoint, the next step's loss and step {kill_at} in {a.region.name}", ready,
                   deadline, a)
        self._wait_for_standby_spares(deadline)
        pids = a.cluster.process_ids() + [a.driver.proc.pid]
        rep.kill_step = a.timeline.last_step()
        # The whole region at once: the submitter (the driver) and every node, head included.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(a.driver.proc.pid, signal.SIGKILL)
        lost = a.cluster.lose()
        t_kill = time.time()
        renewer = None
        if self.emulator:
            # Region A's copy as the manager sees it: maybe partitioned, still renewing its lease, until region B
            # has resumed (drills.writer_lease.LostCopyRenewer); B may take the lease only past its expiry + skew.
            from drills.writer_lease import LostCopyRenewer

            renewer = LostCopyRenewer(self.emulator, self.job.run_name,
                                      lambda: bool(b.timeline.steps_after(t_kill))).start()
        a.driver.wait(timeout=10)
        committed_at_kill, in_flight = checkpoint_dirs(self.ckpt_dir)
        in_flight_steps = sorted({int(n.split(".")[0]) for n in in_flight if n.split(".")[0].isdigit()})
        rep.marks.append(("region lost", t_kill))
        rep.killed = (f"region {a.region.name}: head, {len(lost) - 1} slice node(s) and the job's driver "
                      f"({len(pids)} processes, SIGKILL)")
        self.say(f"LOST {a.region.name} after step {rep.kill_step}; committed checkpoints {committed_at_kill}"
                 + (f", saves in flight {in_flight_steps}" if in_flight_steps else ""))
        # The manager's view: region A stops answering.
        while gcs_reachable(a.cluster.address):
            if time.time() > deadline:
                raise DrillFailed(f"{a.region.name}'s head still answers after the loss")
            time.sleep(o.probe_interval_s)
        t_detect = time.time()
        rep.detect_s = round(t_detect - t_kill, 1)
        rep.marks.append(("detected", t_detect))
        self.say(f"{a.region.name} unreachable {rep.detect_s} s after the loss")
        if o.worker_lost_timeout_s:
            self.say(f"waiting {o.worker_lost_timeout_s:.0f} s (workerLostTimeout) before dispatching again")
            time.sleep(o.worker_lost_timeout_s)
        t_dispatch = time.time()
        rep.marks.append(("dispatched", t_dispatch))
        t_up = None
        if o.standby == "cold":
            self._stack.enter_context(b.cluster)
            t_up = time.time()
            rep.marks.append((f"{b.region.name} up", t_up))
            self.say(f"{b.region.name} up at {b.cluster.address} {t_up - t_dispatch:.1f} s after the dispatch "
                     "(cold standby)")
        self._submit(b)
        t_start, start_step, world = self._wait(f"training to start in {b.region.name}",
                                                lambda: b.timeline.starts_after(t_dispatch), deadline, b)[0]
        first = self._wait(f"the first step in {b.region.name}", lambda: b.timeline.steps_after(t_start),
                           deadline, b)[0]
        up = b.timeline.first_after("ups", t_dispatch)
        imported = b.timeline.first_after("imported", t_dispatch)
        rep.marks += [(m, t) for m, t in (("workers up", up), ("restored", t_start), ("resumed", first[0]))
                      if t is not None]
        rep.resume_s = round(first[0] - t_kill, 1)
        if None not in (up, imported):
            rep.phases = {"detect": t_detect - t_kill, "reschedule": up - t_detect, "process_start": imported - up,
                          "restore": t_start - imported, "first_step": first[0] - t_start}
            if t_up is not None:  # the cold region's cluster start, then the job's own start there
                rep.phases = {"detect": t_detect - t_kill, "standby_up": t_up - t_detect,
                              "reschedule": up - t_up} | {k: rep.phases[k] for k in ("process_start", "restore",
                                                                                        "first_step")}
            rep.phases = {k: round(max(0.0, v), 1) for k, v in rep.phases.items()}
        rep.restored_step = start_step - 1 if start_step > 0 else None
        with b.timeline.lock:
            ups = list(b.timeline.warm_ups)
        spare, spare_lines = restart_on_standby_spares(ups, world, t_kill, t_dispatch, t_start)
        self.say(f"{b.region.name}: resumed from checkpoint {rep.restored_step} on {world} worker(s), first step "
                 f"{first[1]} {rep.resume_s} s after the loss")
        self._wait(f"the job to end in {b.region.name}", lambda: b.driver.proc.poll() is not None, deadline)
        b.driver.wait(timeout=10)
        done = b.timeline.done or {}
        rep.final_step = done.get("final_step")
        committed_end, _ = checkpoint_dirs(self.ckpt_dir)
        time.sleep(0.5)  # a SIGKILLed process's children reparented to init are reaped there
        left = [p for p in pids if pid_alive(p)]
        with a.timeline.lock, b.timeline.lock:
            losses_a, losses_b = dict(a.timeline.losses), dict(b.timeline.losses)
        steps_a = [s for _, s, _ in a.timeline.steps]
        problems, figures = judge(
            period=o.checkpoint_period, committed_at_kill=committed_at_kill, in_flight_at_kill=in_flight_steps,
            restored=rep.restored_step, start_world=world, workers_b=b.workers,
            last_step_a=max(steps_a, default=None), losses_a=losses_a, losses_b=losses_b,
            final_step=rep.final_step, target_step=rep.target_step, committed_end=committed_end,
            corrupt_end=corrupt_checkpoints(self.ckpt_dir), left_a=left,
            driver_ok=b.driver.proc.returncode == 0 and bool((b.driver.result or {}).get("ok")))
        rep.steps_lost = figures.pop("steps lost")
        if self.emulator is not None:
            from drills.writer_lease import lease_problems

            renewer.join()
            lease_at_loss = renewer.last  # A's lease as it was left: B may take it only past its expiry + skew
            figures["region A's lease renewed after the loss (s)"] = round((renewer.stopped_at or t_kill) - t_kill, 1)
            if renewer.error:
                problems.append(f"region A's lease could not be kept after the loss: {renewer.error}")
            more, lease_figures = lease_problems([(a.region.name, a.driver.events), (b.region.name, b.driver.events)],
                                                 previous=lease_at_loss)
            problems += more
            figures |= lease_figures
            taken = next((e["t"] for e in b.driver.events if e["event"] == "lease" and e.get("state") == "acquired"),
                         None)
            figures[f"{b.region.name}: lease acquired (s from the loss)"] = \
                None if taken is None else round(taken - t_kill, 1)
        rep.figures = {"regions": f"{a.region.name} -> {b.region.name}",
                       "standby": o.standby + {"warm": " (cluster up, spare workers with MaxText imported)",
                                               "up": " (cluster up, the job submitted at the dispatch)",
                                               "cold": " (cluster started after the loss)"}[o.standby],
                       "standby the stack renders": stack_standby(self.job),
                       "slices": f"{a.workers} -> {b.workers}",
                       "run name (both regions)": self.job.run_name,
                       "checkpoints committed at the loss": committed_at_kill,
                       "saves in flight at the loss": in_flight_steps,
                       "loss -> dispatched (workerLostTimeout)": round(t_dispatch - t_detect, 1),
                       "region A processes left": len(left)} | rep.figures | figures
        rep.figures["tolerance (first step, later steps)"] = f"{FIRST_STEP_LOSS_TOL}, {CONTINUATION_LOSS_TOL}"
        rep.figures["restarted ranks"] = "; ".join(spare_lines)
        if spare is not None:
            rep.figures["restarted on a warm spare"] = spare
        if o.standby == "warm" and spare is not True:
            # A warm standby's figure is a warm restart's, or the drill says it is not (as the preemption drill
            # fails a cold restart with spares on): e.g. the standby's spares still importing at the loss.
            problems.append("warm standby, but region B's restart did not run in ready spares: "
                            + "; ".join(spare_lines))
        self._t = {"kill": t_kill, "detect": t_detect, "dispatch": t_dispatch, "start": t_start,
                   "end": time.time()}
        # A driver's stream Ray's log deduplication folded: the steps counted are not the run's.
        problems += [p for r in (a, b) if (p := r.driver.folded_problem())]
        rep.notes += problems
        rep.ok = not problems
        rep.notes.append(f"checkpoints committed at the end: {committed_end}")
        self.say(f"{'PASSED' if rep.ok else 'FAILED'}: final step {rep.final_step}, {rep.steps_lost} step(s) lost")

    def _timeline_figures(self) -> None:
        from drills.report import productive_seconds

        rep = self.report
        with self.a.timeline.lock, self.b.timeline.lock:
            steps = list(self.a.timeline.steps) + list(self.b.timeline.steps)
            starts = list(self.a.timeline.starts) + list(self.b.timeline.starts)
        rep.steps_run = len(steps)
        if self.t_job is None or not steps:
            return
        t0 = self.t_job

        def rel(t: float) -> float:
            return round(t - t0, 2)

        rep.step_times = sorted((rel(t), s, w) for t, s, w in steps)
        rep.marks = sorted(((label, rel(t)) for label, t in rep.marks), key=lambda m: m[1])
        t = getattr(self, "_t", None)
        if t is not None:
            a_steps = [(ts, s) for ts, s, _ in self.a.timeline.steps]
            b_steps = [(ts, s) for ts, s, _ in self.b.timeline.steps]
            lanes = []
            if a_steps:
                lanes += [(self.a.lane, "start", 0.0, rel(a_steps[0][0])),
                          (self.a.lane, f"training steps {a_steps[0][1]}-{a_steps[-1][1]}", rel(a_steps[0][0]),
                           rel(t["kill"]))]
            lanes.append((self.a.lane, "lost", rel(t["kill"]), rel(t["end"])))
            lanes.append((self.b.lane, "standby", 0.0, rel(t["dispatch"])))
            if b_steps:
                lanes += [(self.b.lane, "restore", rel(t["dispatch"]), rel(b_steps[0][0])),
                          (self.b.lane, f"training steps {b_steps[0][1]}-{b_steps[-1][1]}", rel(b_steps[0][0]),
                           rel(b_steps[-1][0]))]
            rep.lanes = lanes
        if rep.final_step is not None:
            rep.job_wall_s = round(max(ts for ts, _, _ in steps) - t0, 1)
            rep.productive_s = round(productive_seconds(steps, starts), 1)
            rep.measure_from_first_step(steps, starts, t0)
