"""``slicectl drill --local``: a Spot preemption rehearsed on a local Ray cluster.

The preemption scenarios' steps and pass criteria live here, read top to bottom as the drill runs them; the cluster,
the report, the checkpoints' state, the driver's timeline, the warm spares' checks, the reshard scenario and the
region-loss drill in localray.py, report.py, checkpoints.py, timeline.py, spares.py, reshard.py and regions.py.

Runs a stack's job with the real trainer script and a tiny MaxText on a local CPU
cluster (a head plus one node per local "slice", separate processes), and while it
trains:

1. waits for a committed checkpoint past step 0, then for the kill step;
2. SIGKILLs one slice node, raylet and workers (a Spot preemption: no grace);
3. follows the job: Ray Train detects the failure, an elastic job restarts on the
   remaining slice and MaxText restores the latest checkpoint; a multislice job fails,
   and is resubmitted (as an operator would) once its slices are back;
4. with ``scale_up``, starts a replacement node and waits for the worker group to grow;
5. waits for the final step and checks every checkpoint: none lost, none left half-written.

Timings come from the trainer's own ``slicectl-progress`` lines (stamped by the worker,
same host clock) and from the driver log (Ray Train's failure-policy lines).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from drills import image_settings
from drills.checkpoints import CHECKPOINT_METADATA, checkpoint_dirs, corrupt_checkpoints
from drills.report import DrillFailed, DrillReport
from drills.reshard import RESHARD_STEPS, Reshard
from drills.spares import WARM_SPARES, SpareChecks
from drills.timeline import RAISE, Timeline
from stackspec.spec import Job, StackSpec

POLL_S = 0.02
DRILL_STEPS = 40
# Growing back takes a node start, a resize check and a worker-group restart (a MaxText
# cold start, about a minute here): enough steps must be left to see it.
SCALE_UP_STEPS = 150
# Scenarios: one preemption (elastic restart or multislice resubmit); a kill while a
# checkpoint is being written; kills up to max_failures and one more, which must fail the job.
SCENARIOS = ("preemption", "mid-save", "repeated", "reshard")
# mid-save: how long Orbax holds each checkpoint of the first attempt before committing it
# (slow storage; the restarted worker group saves at full speed).
MID_SAVE_COMMIT_DELAY_S = 4.0
# repeated: the job must have ended this long after the kill that exhausts max_failures.
FAIL_DEADLINE_S = 180.0


def default_steps(scale_up: bool) -> int:
    return SCALE_UP_STEPS if scale_up else DRILL_STEPS


@dataclass(frozen=True)
class LocalDrillOptions:
    slices: int = 2  # local slice nodes; the drill kills one
    steps: int = 0  # 0: DRILL_STEPS, or SCALE_UP_STEPS with scale_up
    checkpoint_period: int = 5
    step_delay: float = 0.5  # seconds per step: MaxText's tiny model steps in ~5 ms
    kill_after_step: int | None = None  # default: half a period past the first checkpoint
    kill_node: int | None = None  # slice-<i>; default: the last live one
    kill_during_save: bool = False
    scale_up: bool = False
    scenario: str = "preemption"
    max_failures: int | None = None  # repeated: overrides the job's (each kill costs a cold start)
    save_commit_delay_s: float = 0.0  # mid-save: MID_SAVE_COMMIT_DELAY_S unless given
    jax_cache_dir: Path | None = None  # default: drills.local_train.JAX_CACHE_DIR
    # reshard: a finished ``train_local`` run (summary.json + checkpoints) of the same job,
    # steps and period on ``slices`` workers, used as the reference instead of training one.
    reference_dir: Path | None = None
    # Elastic: how often Ray Train looks for room to grow (Ray's default is 60 s).
    resize_interval_s: float = 10.0
    # Bounds a worker-group start that waits for a node the controller still counts. Ray's
    # autoscaling coordinator refreshes its view of the nodes every 20 s (TICK_INTERVAL_S):
    # above that, one wasted start per preemption; at or below it, often two, each spending
    # one of the job's max_failures (measured: 20 s here used all 3 of dev's).
    worker_group_start_timeout_s: float = 30.0
    timeout_s: float = 1800.0
    # Multislice: seconds until the lost slice's capacity is back and the job is resubmitted
    # (0: at once, the fixed-size job's best case; a Spot slice on GKE can take far longer).
    resubmit_delay_s: float = 0.0
    # Warm spares (docs/recovery.md). None: the stack's own setting, unverified.warmSpares (off: every worker starts
    # cold, as on the cluster); True/False overrides it, and the report says so. Warm: slice nodes import MaxText in
    # every worker process they start (WARM_SPARES idle ones at node start), the training workers take the node's
    # environment and ask for the next spare after each attempt's first step (the trainer's --warm-workers).
    # A cluster passed in uses its own spares (LocalRayCluster(spares=...)).
    warm: bool | None = None
    # The stack's writer lease (drills.writer_lease). None: the stack's own (its queued jobs hold one); True/False
    # overrides it, and the report says so.
    lease: bool | None = None
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario {self.scenario!r}: allowed {', '.join(SCENARIOS)}")
        if self.scenario == "mid-save":
            object.__setattr__(self, "kill_during_save", True)
        if self.kill_during_save and not self.save_commit_delay_s:
            object.__setattr__(self, "save_commit_delay_s", MID_SAVE_COMMIT_DELAY_S)
        if self.scenario == "reshard":
            object.__setattr__(self, "steps", self.steps or RESHARD_STEPS)
        if not self.steps:
            object.__setattr__(self, "steps", default_steps(self.scale_up))

    def kill_step(self) -> int:
        if self.kill_after_step is not None:
            return self.kill_after_step
        return self.checkpoint_period + max(1, self.checkpoint_period // 2)


class LocalDrill(Reshard, SpareChecks):
    """One drill: ``LocalDrill(spec, job, run_dir, options).run()`` -> :class:`DrillReport`."""

    def __init__(self, spec: StackSpec, job: Job, run_dir: Path, options: LocalDrillOptions,
                 cluster=None):
        """``cluster``: a running :class:`~drills.localray.LocalRayCluster` to drill on instead of
        starting one (it stays up; the nodes the drill killed are replaced at the end)."""
        if options.slices < 2:
            raise ValueError("a local drill needs at least 2 slice nodes (one is killed)")
        if options.kill_node is not None and not 0 <= options.kill_node < options.slices:
            raise ValueError(f"--kill-node {options.kill_node}: the local slice nodes are 0 to "
                             f"{options.slices - 1}")
        if options.checkpoint_period < 1 or options.step_delay < 0:
            raise ValueError("--checkpoint-period must be at least 1 and --step-delay 0 or more")
        if options.steps <= options.kill_step() + 1:
            raise ValueError(f"--steps {options.steps} leaves nothing to resume: the kill comes after "
                             f"step {options.kill_step()}; use more steps")
        self.spec, self.job, self.opts = spec, job, options
        self.restart_unseen = False  # resumed without the restarted rank 0's worker_up line (_spare_problems)
        # The stack's own warm-spare setting unless the options override it (reported either way).
        self.warm = spec.unverified.warm_spares if options.warm is None else options.warm
        stack_says = "on" if spec.unverified.warm_spares else "off"
        self.warm_source = ("the stack's unverified.warmSpares" if options.warm is None else
                            f"overridden; the stack's unverified.warmSpares is {stack_says}")
        from drills.writer_lease import drill_lease

        self.lease, self.lease_source = drill_lease(spec, job, options.lease)
        self.emulator = None  # drills.writer_lease.Emulator while the drill runs, with the lease on
        self.run_dir = Path(run_dir).resolve()
        self.ckpt_dir = self.run_dir / "out" / job.run_name / "checkpoints"
        self.timeline = Timeline()
        if options.scenario == "repeated" and not job.elastic:
            raise ValueError("the repeated-preemption drill needs an elastic job (a multislice job "
                             "fails on the first kill)")
        self.report = DrillReport(target=f"local:{spec.stack}/{job.name}", job=job.name,
                                  elastic=job.elastic, target_step=options.steps - 1,
                                  scenario=options.scenario)
        self.t0 = time.time()
        if cluster is not None and len(cluster.live_workers()) < options.slices:
            raise ValueError(f"the cluster has {len(cluster.live_workers())} live slice node(s), the "
                             f"drill needs {options.slices}")
        self.cluster = cluster
        self._own_cluster = cluster is None
        self.drivers: list = []
        self._committed_at_kill: list[int] = []
        self.t_job: float | None = None  # the first driver's start: goodput's wall clock
        self._in_flight_at_kill: list[int] = []

    # ------------------------------------------------------------------ output

    def say(self, msg: str) -> None:
        print(f"[{time.time() - self.t0:6.1f}s] {msg}", flush=True)

    def _on_event(self, e: dict) -> None:
        self.timeline.on_event(e)
        if e["event"] == "imported":
            loaded = f"{e['script']} loaded" if e.get("script") else f"MaxText imported in {e['import_s']} s"
            self.say(f"workers up: {loaded}")
        elif e["event"] == "start":
            self.say(f"training (re)started on {e['world']} worker(s) at step {e['start_step']}")
        elif e["event"] == "step" and (self.opts.verbose or e["step"] % self.opts.checkpoint_period == 0):
            self.say(f"step {e['step']} on {e['world']} worker(s)")
        elif e["event"] == "done":
            self.say(f"done: final step {e['final_step']}, checkpoint {e['checkpoint_step']}")

    # ------------------------------------------------------------------ waiting

    def _wait(self, what: str, ready, deadline: float, driver_may_exit: bool = False):
        """Poll ``ready()`` until it returns something truthy; fail on timeout, or when the
        driver exits first (unless that is what is awaited)."""
        while True:
            value = ready()
            if value:
                return value
            driver = self.drivers[-1] if self.drivers else None
            if driver is not None and driver.proc.poll() is not None and not driver_may_exit:
                value = ready()  # the driver's last lines may have just arrived
                if value:
                    return value
                raise DrillFailed(f"the job ended (driver exit {driver.proc.returncode}) while "
                                  f"waiting for {what}; see {driver.log}")
            if time.time() > deadline:
                raise DrillFailed(f"timed out waiting for {what}")
            time.sleep(POLL_S)

    def _start_driver(self, slices: int | None = None, data_dir: Path | None = None, name: str | None = None):
        from drills import writer_lease
        from drills.local_train import JAX_CACHE_DIR, start_driver
        from workloads.trainer_args import trainer_argv

        o = self.opts
        argv = trainer_argv(
            self.spec, self.job, local=True, data_dir=str(data_dir or self.run_dir / "out"),
            local_slices=slices or o.slices, steps=o.steps,
            step_delay=o.step_delay, checkpoint_period=o.checkpoint_period,
            resize_interval=o.resize_interval_s if self.job.elastic else None,
            jax_cache_dir=str(o.jax_cache_dir or JAX_CACHE_DIR),
            save_commit_delay=o.save_commit_delay_s or None, max_failures=o.max_failures,
            warm_workers=bool(self.warm and self.cluster.spares),
            **({"lease": writer_lease.location(self.job.run_name), "lease_ttl": writer_lease.DRILL_TTL_S}
               if self.emulator else {}),
        )
        if self.t_job is None:
            self.t_job = time.time()
        env = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": str(self.opts.worker_group_start_timeout_s)}
        env |= self.emulator.env() if self.emulator else {}
        log = self.run_dir / f"driver-{name or len(self.drivers)}.log"
        driver = start_driver(self.cluster, argv, log, self._on_event, echo=False,
                              on_line=self.timeline.on_line, env=env)
        self.drivers.append(driver)
        return driver

    # ------------------------------------------------------------------ the drill

    def run(self) -> DrillReport:
        from drills.localray import LocalRayCluster, LocalRayError

        o, r = self.opts, self.report
        deadline = self.t0 + o.timeout_s
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.say(f"drill: job {self.job.name} ({self.job.mode}) on {o.slices} local slice "
                 f"node(s); {o.steps} steps, checkpoint every {o.checkpoint_period}, "
                 f"{o.step_delay} s/step; run dir {self.run_dir}")
        try:
            if self._own_cluster:
                self.cluster = LocalRayCluster(self.run_dir, slices=o.slices, spares=WARM_SPARES if self.warm else 0,
                                               auth=self.spec.ray.auth)
            else:
                self.cluster.peaks.clear()  # this drill's processes only
            with self.cluster if self._own_cluster else contextlib.nullcontext(), self._lease_server():
                auth = self.cluster.auth_env["RAY_AUTH_MODE"]
                self.say(f"local Ray cluster up: head + {o.slices} slice node(s), Ray auth {auth} "
                         "(the stack's ray.auth)")
                r.figures["ray auth"] = auth
                r.figures["warm spares"] = f"{'on' if self.warm else 'off'} ({self.warm_source})"
                r.notes += image_settings.report_lines(self.spec, self.job)  # each applied, or why not
                if self._own_cluster:  # apart from the job's cold start: warm spares start importing here
                    r.figures["cluster start (s)"] = round(time.time() - self.t0, 1)
                if o.scenario == "reshard":
                    self._reshard(deadline)
                elif o.scenario == "repeated":
                    self._start_driver()
                    self._repeated(deadline)
                else:
                    self._start_driver()
                    t_kill = self._kill_when_ready(deadline)
                    self._recover(t_kill, deadline)
                    if o.scale_up and self.job.elastic:
                        self._scale_up(deadline)
                    self._finish(deadline)
                r.notes.append(f"peak RSS of one process: {self.cluster.peak_rss_mb()} MB")
        except (DrillFailed, LocalRayError) as e:
            r.ok = False
            r.notes.append(f"drill failed: {e}")
            self.say(f"FAILED: {e}")
        finally:
            for d in self.drivers:
                d.stop()
            if not self._own_cluster:
                self.cluster.heal()
            if problems := self._folded_problems() + self._precompile_problems() + self._lease_problems():
                r.ok = False
                r.notes += problems
            r.wall_s = round(time.time() - self.t0, 1)
            self._timeline_figures()
            self.files = r.publish(self.run_dir)
        return r

    def _timeline_figures(self) -> None:
        """Steps over time, goodput by time (from the first driver's start to the last step)."""
        from drills.report import productive_seconds

        r, tl = self.report, self.timeline
        with tl.lock:
            steps, starts = list(tl.steps), list(tl.starts)
        r.steps_run = len(steps)
        if self.t_job is None or not steps:
            return
        t0 = self.t_job
        r.step_times = [(round(t - t0, 2), s, w) for t, s, w in steps]
        r.marks = sorted(((label, round(t - t0, 2)) for label, t in r.marks), key=lambda m: m[1])
        if r.final_step is not None and self.opts.scenario != "reshard":  # reshard: separate runs
            r.job_wall_s = round(max(t for t, _, _ in steps) - t0, 1)
            r.productive_s = round(productive_seconds(steps, starts), 1)
            r.measure_from_first_step(steps, starts, t0)

    def _kill_when_ready(self, deadline: float) -> float:
        o, r = self.opts, self.report
        period = o.checkpoint_period
        self._wait_for_spares(deadline)
        if o.kill_during_save:
            # Kill the moment a periodic save at or past the kill step is in flight on disk (by
            # default the second one past step 0: a committed checkpoint past 0 is there to restore).
            first = max(period, o.kill_step())

            def in_flight():
                _, flying = checkpoint_dirs(self.ckpt_dir)
                steps = [int(n.split(".")[0]) for n in flying if n.split(".")[0].isdigit()]
                return [s for s in steps if s >= first]

            flying = self._wait(f"a checkpoint save in flight at step {first} or later", in_flight, deadline)
            self._in_flight_at_kill = flying
            r.figures["save in flight at the kill"] = flying[0]
        else:
            kill_at = o.kill_step()

            def ready():
                committed, _ = checkpoint_dirs(self.ckpt_dir)
                step = self.timeline.last_step()
                return [c for c in committed if c > 0] and step is not None and step >= kill_at

            self._wait(f"a committed checkpoint and step {kill_at}", ready, deadline)
        r.kill_step = self.timeline.last_step()
        node = self.cluster.kill_node(self._victim())
        t_kill = time.time()
        r.marks.append(("kill", t_kill))
        committed, _ = checkpoint_dirs(self.ckpt_dir)
        self._committed_at_kill = committed
        r.killed = f"local node {node.name} (pid {node.pid}, SIGKILL)"
        self.say(f"KILLED {node.name} after step {r.kill_step}; committed checkpoints {committed}")
        return t_kill

    def _victim(self) -> str | None:
        """The node to kill: the one asked for, else one running a Ray Train worker (after an
        elastic restart some nodes may hold none), else the last live one."""
        if self.opts.kill_node is not None:
            return f"slice-{self.opts.kill_node}"
        busy = self.cluster.nodes_running("RayTrainWorker")
        return busy[-1].name if busy else None

    def _recover(self, t_kill: float, deadline: float, n: int = 1) -> None:
        """Follow the job from the ``n``-th kill to its first step after the restart (phases and
        steps lost are the first recovery's)."""
        r = self.report
        first, suffix = n == 1, ("" if n == 1 else f" #{n}")
        if self.job.elastic:
            self._wait("the failure to be detected",
                       lambda: self.timeline.failure_after(t_kill) or self.timeline.starts_after(t_kill),
                       deadline)
        else:
            # A fixed-size job cannot shrink: it fails, and is resubmitted once its slices are back.
            driver = self.drivers[-1]
            self._wait("driver exit", lambda: driver.proc.poll() is not None, deadline, driver_may_exit=True)
            driver.wait(timeout=10)
            self.say(f"job failed as a fixed-size job must (driver exit {driver.proc.returncode}); "
                     "replacing the node and resubmitting")
            r.notes.append("multislice: the job failed on the kill and was resubmitted after a "
                           "replacement node joined (on GKE: once the slice's capacity is back)")
        failure = self.timeline.failure_after(t_kill)
        if failure is None and not self.job.elastic:
            failure = time.time()
        if failure is not None:
            self.say(f"failure detected {failure - t_kill:.1f} s after the kill{suffix}")
            if first:
                r.detect_s = round(failure - t_kill, 1)
        if not self.job.elastic:
            if self.opts.resubmit_delay_s:
                self.say(f"waiting {self.opts.resubmit_delay_s:.0f} s for the slice's capacity to come back")
                time.sleep(self.opts.resubmit_delay_s)
            self.cluster.add_node()
            self._start_driver()
        t_start, start_step, world = self._wait(
            "training to restart", lambda: self.timeline.starts_after(t_kill), deadline)[0]
        first_step = self._wait("the first step after the restart",
                                lambda: self.timeline.steps_after(t_start), deadline)[0]
        tl = self.timeline
        up = tl.first_after("ups", t_kill)
        imported = tl.first_after("imported", t_kill)
        marks = [("detected", failure), ("workers up", up), ("restored", t_start), ("resumed", first_step[0])]
        r.marks += [(m + suffix, t) for m, t in marks if t is not None]
        if not first:
            self.say(f"resumed on {world} worker(s) at step {start_step}, {first_step[0] - t_kill:.1f} s "
                     f"after the kill{suffix}")
            return
        r.resume_s = round(first_step[0] - t_kill, 1)
        # The kill step by the workers' own clock: under load their lines reach the driver late,
        # and the step seen at the kill may be a step or two behind the one they had run.
        stamped = self.timeline.last_step_before(t_kill)
        if stamped is not None and (r.kill_step is None or stamped > r.kill_step):
            r.kill_step = stamped
        if None not in (failure, up, imported):
            r.phases = {"detect": failure - t_kill, "reschedule": up - failure, "process_start": imported - up,
                        "restore": t_start - imported, "first_step": first_step[0] - t_start}
            r.phases = {k: round(max(0.0, v), 1) for k, v in r.phases.items()}
        r.restored_step = start_step - 1 if start_step > 0 else None
        with tl.lock:
            read = next((s for t, s in tl.reads if t >= t_kill), None)
        if read is not None:  # the restore phase's checkpoint read itself, apart from MaxText's setup and compile
            r.figures["checkpoint read in the restore (s)"] = read
        self._judge_restart(t_kill, t_start, world)
        if r.detect_s is None:
            # No failure-policy line reached the driver: the restart is the first sign.
            r.detect_s = round(t_start - t_kill, 1)
            r.notes.append("detection time taken from the restart (no failure line in the log)")
        # Survivors may finish a step or two after the kill before the group is torn down:
        # every step past the restored checkpoint and before the restart is redone.
        before_restart = [s[1] for s in self.timeline.steps_before(t_start)]
        last_before = max(before_restart, default=r.kill_step)
        # Steps the survivors finished after the kill (by the workers' clock): timing, not checkpointing.
        if first:
            self._after_kill = max(0, (last_before or 0) - (r.kill_step or 0))
        if r.restored_step is not None and last_before is not None:
            r.steps_lost = max(0, last_before - r.restored_step)
        self.say(f"resumed on {world} worker(s) from checkpoint {r.restored_step}: first step "
                 f"{first_step[1]} {r.resume_s} s after the kill ({r.steps_lost} step(s) redone); "
                 f"phases {r.phases}")

    def _repeated(self, deadline: float) -> None:
        """Kill a worker's node ``max_failures`` times (a replacement joins after each: capacity
        comes back), each kill must be retried and recovered from; then once more, which must
        end the job as failed, within FAIL_DEADLINE_S, with every process gone."""
        o, r = self.opts, self.report
        budget = self.job.max_failures if o.max_failures is None else o.max_failures
        r.figures["max_failures"] = budget
        for n in range(1, budget + 1):
            t_kill = self._kill_when_ready(deadline) if n == 1 else self._kill_again(n, deadline)
            self.cluster.add_node()  # the slice's capacity comes back
            self._recover(t_kill, deadline, n)
        t_kill = self._kill_again(budget + 1, deadline)
        driver = self.drivers[-1]
        fail_by = min(deadline, t_kill + FAIL_DEADLINE_S)
        self._wait(f"the job to fail after kill #{budget + 1}", lambda: driver.proc.poll() is not None,
                   fail_by, driver_may_exit=True)
        driver.wait(timeout=10)
        t_end = time.time()
        r.marks.append(("job failed", t_end))
        r.figures["kill -> job failed (s)"] = round(t_end - t_kill, 1)
        with self.timeline.lock:
            retries, raised = self.timeline.retries, self.timeline.raised
        r.figures["failures retried"] = retries
        r.figures["failures raised"] = raised
        r.final_step = None
        problems = []
        if driver.proc.returncode == 0 or (driver.result or {}).get("ok"):
            problems.append(f"the job succeeded after {budget + 1} kills; max_failures {budget} should have "
                            "ended it")
        if retries != budget:
            problems.append(f"Ray Train retried {retries} failure(s) for {budget} kill(s): a restart that was "
                            "bound to fail spent the budget" if retries > budget else
                            f"Ray Train retried {retries} failure(s), expected {budget}")
        if raised < 1:
            problems.append(f"no '{RAISE}' line: the job did not end through its failure policy")
        if driver.result is None:
            problems.append("the trainer printed no result line (no report of the failure)")
        else:
            r.figures["the job's error"] = (driver.result.get("error") or "-").split("\n")[0][:160]
        r.notes += problems
        r.ok = not problems
        self.say(f"job failed {t_end - t_kill:.1f} s after kill #{budget + 1} (driver exit "
                 f"{driver.proc.returncode}); {retries} retried, {raised} raised")

    def _kill_again(self, n: int, deadline: float) -> float:
        """Kill #n: once the job has run a step past its last restart, kill a worker's node."""
        last_start = self.timeline.starts[-1][0]
        self._wait(f"a step before kill #{n}", lambda: self.timeline.steps_after(last_start), deadline)
        node = self.cluster.kill_node(self._victim())
        t_kill = time.time()
        self.report.marks.append((f"kill #{n}", t_kill))
        self.report.killed += f"; {node.name}"
        self.say(f"KILLED {node.name} (kill #{n}) after step {self.timeline.last_step()}")
        return t_kill

    # ------------------------------------------------------------------ resharding


    def _scale_up(self, deadline: float) -> None:
        r = self.report
        node = self.cluster.add_node()
        t_node = node.started
        self.say(f"replacement node {node.name} joined; waiting for the job to grow back to "
                 f"{self.opts.slices} worker(s)")

        def grown():
            return [s for s in self.timeline.steps_after(t_node) if s[2] >= self.opts.slices]

        t_step, step, world = self._wait("the job to scale back up", grown, deadline)[0]
        r.scale_up_s = round(t_step - t_node, 1)
        self.say(f"scaled back up to {world} worker(s) at step {step}, {r.scale_up_s} s after "
                 "the replacement node joined")

    def _finish(self, deadline: float) -> None:
        r = self.report
        driver = self.drivers[-1]
        self._wait("driver exit", lambda: driver.proc.poll() is not None, deadline, driver_may_exit=True)
        driver.wait(timeout=10)
        done = self.timeline.done or {}
        r.final_step = done.get("final_step")
        committed, in_flight = checkpoint_dirs(self.ckpt_dir)
        lost = sorted(set(self._committed_at_kill) - set(committed))
        corrupt = corrupt_checkpoints(self.ckpt_dir)
        problems = []
        if driver.proc.returncode != 0 or not (driver.result or {}).get("ok"):
            problems.append(f"the job failed (driver exit {driver.proc.returncode}); see {driver.log}")
        if r.final_step != r.target_step:
            problems.append(f"final step {r.final_step}, expected {r.target_step}")
        if not committed or committed[-1] != r.target_step:
            problems.append(f"final checkpoint {r.target_step} not committed (have {committed[-3:]})")
        if lost:
            problems.append(f"checkpoints committed before the kill are gone: {lost}")
        if corrupt:
            problems.append(f"committed checkpoints without {CHECKPOINT_METADATA}: {corrupt}")
        if in_flight:
            r.notes.append(f"half-written saves left on disk (Orbax ignores them): {in_flight}")
        latest = max(self._committed_at_kill, default=None)
        if r.restored_step is None or latest is None or r.restored_step < latest:
            problems.append(f"restored step {r.restored_step}, but checkpoint {latest} was "
                            "committed at the kill")
        period = self.opts.checkpoint_period
        if self._in_flight_at_kill:
            # Killed mid-save: the half-written checkpoint is never restored, the one before is;
            # nothing is lost beyond one period plus the steps run while the save was in flight.
            flying = self._in_flight_at_kill[0]
            r.figures["checkpoint restored instead"] = r.restored_step
            if r.restored_step is not None and r.restored_step >= flying:
                problems.append(f"restored step {r.restored_step}: the save of {flying} was in flight at the kill")
            if flying in self._committed_at_kill:
                problems.append(f"checkpoint {flying} was committed at the kill: no save was in flight")
            # One period, the steps run while the save was in flight, and the steps survivors finished after the
            # kill before the group was torn down (measured: under load it is more than one).
            after_kill = getattr(self, "_after_kill", 0)
            allowed = period + max(0, (r.kill_step or flying) - flying) + max(1, after_kill)
            r.figures["steps lost allowed"] = allowed
            r.figures["steps run after the kill"] = after_kill
            if r.steps_lost is not None and r.steps_lost > allowed:
                problems.append(f"{r.steps_lost} steps lost, more than one period plus the save in flight ({allowed})")
        elif r.steps_lost is not None and r.steps_lost > period:
            problems.append(f"{r.steps_lost} steps lost, more than the checkpoint period {period}")
        problems += self._spare_problems()
        if self.job.elastic and self.timeline.retries > 1:
            problems.append(f"one kill, {self.timeline.retries} failures retried: a restart that could not "
                            "succeed spent the job's max_failures")
        if self.job.elastic:
            # A restart that waits for the dead node (the controller's resource view lags)
            # times out and is retried too: both spend the job's failure budget.
            r.notes.append(f"Ray Train retried {self.timeline.retries} failure(s) of the "
                           f"job's max_failures {self.job.max_failures}")
        r.notes += problems
        r.ok = not problems
        r.notes.append(f"checkpoints committed at the end: {committed}")


    def _folded_problems(self) -> list[str]:
        """A driver's stream Ray's log deduplication folded (DriverRun.folded): the steps counted (steps run,
        goodput, the kill step) are not the run's, whatever else passed."""
        return [p for d in self.drivers if (p := d.folded_problem())]

    def _lease_server(self):
        """The Cloud Storage emulator the drill's copies hold the writer lease on, with the lease on."""
        self.report.figures["writer lease"] = self.lease_source
        if not self.lease:
            return contextlib.nullcontext()
        from drills.writer_lease import Emulator

        self.emulator = Emulator()
        return self.emulator

    def _lease_problems(self) -> list[str]:
        """With the lease on: every save under its copy's lease, and the lease in the figures (drills.writer_lease).
        The copies ran one after another (a resubmitted job's first copy released the lease as it failed)."""
        if self.emulator is None:
            return []
        from drills.writer_lease import lease_problems

        problems, figures = lease_problems([(f"copy {i + 1}", d.events) for i, d in enumerate(self.drivers)],
                                           t0=self.t_job)
        self.report.figures |= figures
        return problems

    def _precompile_problems(self) -> list[str]:
        """The restart shape's precompile (maxtext_trainer.precompile_restart_shape, warm local runs): its time in
        the figures, or its failure, which fails the drill: a restart that was to load its train step from the
        cache compiles it instead, and only the worker's log would say why."""
        tl, figures = self.timeline, self.report.figures
        with tl.lock:
            started, took, error = tl.precompile_started, tl.precompiled_s, tl.precompile_error
        if not started:
            return []
        key = "restart shape's train step precompiled (s)"
        if error is not None:
            figures[key] = f"failed ({error[:200]})"
            return [f"the restart shape's precompile failed, {error}"]
        figures[key] = took  # None: not done by the end of the drill
        return []


# --------------------------------------------------------------------------- CLI


def pick_job(spec: StackSpec, name: str | None) -> Job:
    """The named job, else the stack's first running elastic job (:meth:`StackSpec.drill_job`)."""
    return spec.drill_job(name)
