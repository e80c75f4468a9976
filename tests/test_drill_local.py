"""``slicectl drill --local``: a real Spot-style kill of a real local Ray node while the real
trainer script trains a tiny MaxText on CPU. Nothing is mocked.

The slow tests are drills themselves (preemption and mid-save here; reshard in
test_train_local.py, which shares its trained run; the multislice and repeated drills run in
the scheduled workflow, .github/workflows/drills.yml, to keep the suite under 5 minutes); the
others check the pieces they judge with (checkpoint directories, job choice, options, log lines).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from drills.checkpoints import CHECKPOINT_METADATA, checkpoint_dirs, corrupt_checkpoints
from drills.local import LocalDrill, LocalDrillOptions, pick_job
from drills.local_train import ROOT
from drills.localray import pid_alive
from drills.timeline import Timeline
from offline import engine
from slicectl import cli
from stackspec import spec as stack_spec


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


def test_checkpoint_dirs_tell_committed_from_in_flight(tmp_path):
    for name in ("0", "5", "10.orbax-checkpoint-tmp-1732", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "0" / CHECKPOINT_METADATA).write_text("{}")
    assert checkpoint_dirs(tmp_path) == ([0, 5], ["10.orbax-checkpoint-tmp-1732"])
    assert corrupt_checkpoints(tmp_path) == [5]
    assert checkpoint_dirs(tmp_path / "missing") == ([], [])


def test_kill_step_defaults_to_half_a_period_past_the_first_checkpoint():
    assert LocalDrillOptions(checkpoint_period=5).kill_step() == 7
    assert LocalDrillOptions(checkpoint_period=1).kill_step() == 2
    assert LocalDrillOptions(kill_after_step=12).kill_step() == 12


def test_the_drilled_job_is_the_running_elastic_one():
    prod = _spec("prod")
    assert pick_job(prod, None).name == "llama3-8b-elastic"  # the multislice jobs are suspended
    assert pick_job(prod, "llama3-8b-multislice").mode == "multislice"
    with pytest.raises(LookupError, match="allowed: llama3-8b-multislice"):
        pick_job(prod, "nope")


def test_a_drill_needs_a_node_to_spare(tmp_path):
    dev = _spec("dev")
    with pytest.raises(ValueError, match="at least 2 slice nodes"):
        LocalDrill(dev, pick_job(dev, None), tmp_path, LocalDrillOptions(slices=1))
    with pytest.raises(ValueError, match="--steps 8 leaves nothing to resume: the kill comes after step 7"):
        LocalDrill(dev, pick_job(dev, None), tmp_path, LocalDrillOptions(steps=8))
    with pytest.raises(ValueError, match="--checkpoint-period must be at least 1"):
        LocalDrill(dev, pick_job(dev, None), tmp_path, LocalDrillOptions(checkpoint_period=-1))


def test_cli_names_the_stack_file_and_jobs_on_a_bad_job(capsys):
    assert cli.main(["drill", "--local", "--stack", "dev", "--job", "nope"]) == 2
    err = capsys.readouterr().err
    assert "stacks/Pulumi.dev.yaml" in err and "allowed: llama3-8b-elastic" in err


def test_timeline_reads_ray_trains_failure_lines():
    t = Timeline()
    t.on_line("\x1b[36m(TrainController pid=7)\x1b[0m [FailurePolicy] RETRY")
    t.on_line("(TrainController pid=7) Detected ready resources for 2 workers in the cluster.")
    t.on_line("(TrainController pid=7) [FailurePolicy] RAISE")
    assert len(t.failures) == 2 and t.retries == 1
    t.on_event({"event": "start", "t": 10.0, "world": 1, "start_step": 6})
    t.on_event({"event": "step", "t": 11.0, "world": 1, "step": 6})
    assert t.starts_after(9.0) == [(10.0, 6, 1)] and t.steps_after(10.5) == [(11.0, 6, 1)]
    assert t.last_step() == 6


@pytest.mark.slow
def test_local_drill_kills_a_node_mid_save_and_training_resumes_from_the_last_whole_checkpoint(
        local_cluster, jax_cache):
    """A Spot-style SIGKILL of a slice node while checkpoint 10 is being written (Orbax's commit is
    held 4 s, slow storage): Ray Train restarts the elastic job on the remaining node, MaxText
    restores checkpoint 5 (never the half-written 10, never step 0), at most a period plus the
    steps run during the save are redone, and step 10 is saved again, whole, later. This is the
    preemption drill with its hardest timing; the plain `preemption` scenario (kill between saves)
    runs in the scheduled drills workflow with the others."""
    dev = _spec("dev")
    job = pick_job(dev, None)
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="td-", dir=ROOT / "build"))  # short: Ray's sockets
    # 0.15 s a step and commits held 2.5 s: room to kill inside a save, little time spent waiting.
    opts = LocalDrillOptions(scenario="mid-save", steps=20, checkpoint_period=5, step_delay=0.15,
                             save_commit_delay_s=2.5, timeout_s=1200, jax_cache_dir=jax_cache)
    try:
        live_before = {n.pid for n in local_cluster.live_workers()}
        drill = LocalDrill(dev, job, run_dir, opts, cluster=local_cluster)
        report = drill.run()
        assert report.ok, report.notes
        # Killed mid-save: the save in flight is never the one restored.
        flying = report.figures["save in flight at the kill"]
        # The first save at or past the kill step (7): 10, or a later one if the poll missed it.
        assert flying % opts.checkpoint_period == 0 and flying >= 2 * opts.checkpoint_period
        assert flying not in drill._committed_at_kill
        assert report.restored_step == max(drill._committed_at_kill) == flying - opts.checkpoint_period
        assert 0 <= report.steps_lost <= report.figures["steps lost allowed"]
        assert report.kill_step >= flying - 1  # a step's event follows its save hook
        # Recovered to the end, every committed checkpoint whole, the interrupted one saved again.
        assert report.final_step == report.target_step == opts.steps - 1
        committed, _ = checkpoint_dirs(drill.ckpt_dir)
        assert flying in committed and committed[-1] == opts.steps - 1
        assert set(drill._committed_at_kill) <= set(committed)
        assert corrupt_checkpoints(drill.ckpt_dir) == []
        # Figures: phases, and goodput lowered by exactly the redone steps.
        assert 0 <= report.detect_s < report.resume_s
        if "detection time taken from the restart (no failure line in the log)" in report.notes:
            # Not Ray's log deduplication (checked in Ray 2.60's source): LogDeduplicator.deduplicate prints the
            # first line of a pattern at once and folds only later ones from another process, and one kill gives
            # one "[FailurePolicy] RETRY" (train/v2/_internal/execution/failure_handling/default.py logs it to the
            # controller's console). The line can legitimately come late: the controller's stderr and the
            # restarted workers' are read by different nodes' log monitors (_private/log_monitor.py, one per node,
            # each polling its own files and publishing to the GCS), with no order between them, so under load
            # the workers' first step can reach the driver first (seen once in CI, 2026-11-28 11:58). The drill then
            # says so and splits no phases rather than invent a detection time.
            assert report.phases == {}
        else:
            assert set(report.phases) == {"detect", "reschedule", "process_start", "restore", "first_step"}
        assert report.steps_run == opts.steps + report.steps_lost
        assert report.goodput == pytest.approx(opts.steps / report.steps_run)
        assert report.time_goodput is not None and 0 < report.time_goodput < 1
        written = json.loads((run_dir / "drill.json").read_text())
        assert written["ok"] is True and written["restored_step"] == report.restored_step
        assert {"json", "markdown", "png"} <= set(drill.files)
        # The killed node and the drivers are gone, and a replacement joined: the cluster is
        # whole for the next run (its own processes end with the session: conftest.local_cluster).
        killed = [n.pid for n in local_cluster.nodes if n.killed and n.pid in live_before]
        gone = killed + [d.proc.pid for d in drill.drivers]
        assert len(killed) == 1 and not any(pid_alive(p) for p in gone)
        assert len(local_cluster.live_workers()) == opts.slices
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_cli_flags_reach_the_drill(monkeypatch, tmp_path, capsys):
    """Flag to option mapping only: ``LocalDrill.run`` is replaced (the real drill is the slow
    test above); the report it returns goes through the CLI's printing and JSON writing."""
    from drills import local as drill_local
    from drills.report import DrillReport

    seen = {}

    def fake_run(self):
        seen["opts"], seen["job"] = self.opts, self.job.name
        return DrillReport(target="local:prod/x", job=self.job.name, elastic=False, ok=True)

    monkeypatch.setattr(drill_local.LocalDrill, "run", fake_run)
    report = tmp_path / "r.json"
    code = cli.main(["drill", "--local", "--stack", "prod", "--job", "llama3-8b-multislice",
                     "--slices", "3", "--steps", "12", "--checkpoint-period", "4", "--step-delay", "0",
                     "--kill-after-step", "6", "--kill-node", "0", "--kill-during-save",
                     "--capacity-back-after", "30", "--run-dir", str(tmp_path / "run"),
                     "--report", str(report)])
    assert code == 0
    o = seen["opts"]
    assert seen["job"] == "llama3-8b-multislice"
    assert (o.slices, o.steps, o.checkpoint_period, o.step_delay) == (3, 12, 4, 0.0)
    assert (o.kill_after_step, o.kill_node, o.kill_during_save, o.resubmit_delay_s) == (6, 0, True, 30.0)
    assert json.loads(report.read_text())["ok"] is True
    assert re.search(r"^result\s+recovered$", capsys.readouterr().out, re.M)
    # Defaults: 40 steps, 150 with --scale-up.
    cli.main(["drill", "--local", "--stack", "dev", "--scale-up", "--run-dir", str(tmp_path / "r2")])
    assert seen["opts"].steps == drill_local.SCALE_UP_STEPS and seen["job"] == "llama3-8b-elastic"
    # Scenarios: each reaches the options; a drill that did not pass exits 4.
    for scenario, extra in (("repeated", ["--max-failures", "1"]), ("reshard", []), ("mid-save", [])):
        cli.main(["drill", "--local", "--stack", "dev", "--scenario", scenario, *extra,
                  "--run-dir", str(tmp_path / scenario)])
        assert seen["opts"].scenario == scenario
    assert seen["opts"].kill_during_save is True  # mid-save
    monkeypatch.setattr(drill_local.LocalDrill, "run", lambda self: DrillReport(
        target="local:dev/x", job="x", elastic=True, ok=False, scenario=self.opts.scenario))
    assert cli.main(["drill", "--local", "--stack", "dev", "--scenario", "reshard",
                     "--run-dir", str(tmp_path / "f")]) == 4
    assert re.search(r"^result\s+FAILED$", capsys.readouterr().out, re.M)


@pytest.mark.parametrize("argv, message", [
    (["--scenario", "preemption", "--max-failures", "2"], "--max-failures is for --scenario repeated"),
    (["--scenario", "preemption", "--reference-run", "x"], "--reference-run is for --scenario reshard"),
    (["--scenario", "reshard", "--reference-run", "no-such-dir"], "no summary.json"),
    (["--scenario", "repeated", "--job", "llama3-8b-multislice"], "needs an elastic job"),
])
def test_cli_rejects_scenario_flags_that_do_not_apply(argv, message, capsys):
    assert cli.main(["drill", "--local", "--stack", "prod", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--slices", "0"], "argument --slices: 0 is below 2"),
    (["--slices", "1"], "argument --slices: 1 is below 2"),
    (["--timeout", "0"], "argument --timeout: 0 seconds: allowed more than 0"),
    (["--timeout", "nan"], "argument --timeout: nan seconds"),
    (["--step-delay", "-1"], "argument --step-delay: -1 seconds: allowed 0 or more"),
    (["--checkpoint-period", "0"], "argument --checkpoint-period: 0 is below 1"),
    (["--steps", "ten"], "argument --steps: 'ten' is not a whole number"),
    (["--kill-node", "2"], "--kill-node 2: the local slice nodes are 0 to 1"),
    (["--kill-node", "-1"], "argument --kill-node: -1 is below 0"),
])
def test_cli_refuses_out_of_range_numbers_instead_of_a_default_or_a_traceback(argv, message, capsys):
    assert cli.main(["drill", "--local", "--stack", "dev", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_time_goodput_counts_each_steps_last_run_only():
    """Steps 0-7 at 1 s each, a kill, a restart from checkpoint 5 at t=40, steps 6-9 again: the
    productive time is 10 steps of 1 s (6 and 7's first runs are waste, and so is the gap)."""
    from drills.report import productive_seconds

    steps = [(10.0 + i, i, 2) for i in range(8)] + [(41.0 + i, 6 + i, 1) for i in range(4)]
    starts = [(9.5, 0, 2), (40.0, 6, 1)]
    assert productive_seconds(steps, starts) == pytest.approx(10.0)


def test_goodput_from_the_first_step_leaves_the_cold_start_out():
    """The same timeline: the first step lands 10 s after the job's start (the cold start, reported apart);
    from there to the last step (34 s) the steps that count are 1-5 (first attempt) and 6-9 (the restart):
    9 s. Older reports carry no attempt starts: a step number that does not go up marks one, same answer."""
    from drills.report import DrillReport, goodput_from_first_step

    steps = [(10.0 + i, i, 2) for i in range(8)] + [(41.0 + i, 6 + i, 1) for i in range(4)]
    starts = [(9.5, 0, 2), (40.0, 6, 1)]
    for given in (starts, None):
        t_first, productive, wall = goodput_from_first_step(steps, given)
        assert (t_first, wall) == (10.0, 34.0) and productive == pytest.approx(9.0)
    r = DrillReport(target="local:dev/j", job="j", elastic=True, final_step=9)
    r.measure_from_first_step(steps, starts, t_job=0.0)
    assert r.cold_start_s == 10.0 and r.goodput_after_start == pytest.approx(9 / 34, abs=1e-4)


def test_report_publishes_json_timeline_and_summary(tmp_path):
    """The files a drill leaves and CI publishes, from a report as LocalDrill fills it."""
    from drills.report import DrillReport

    r = DrillReport(target="local:dev/j", job="j", elastic=True, scenario="mid-save", kill_step=7,
                    detect_s=2.0, resume_s=30.0, restored_step=5, steps_lost=2, final_step=9, target_step=9,
                    steps_run=12, ok=True, job_wall_s=44.0, productive_s=10.0,
                    phases={"detect": 2.0, "reschedule": 5.0, "process_start": 15.0, "restore": 6.0,
                            "first_step": 2.0},
                    step_times=[(10.0 + i, i, 2) for i in range(8)] + [(41.0 + i, 6 + i, 1) for i in range(4)],
                    marks=[("kill", 18.0), ("detected", 20.0), ("restored", 40.0), ("resumed", 41.0)],
                    figures={"save in flight at the kill": 10})
    files = r.publish(tmp_path)
    assert set(files) == {"json", "markdown", "png"}
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    written = json.loads(files["json"].read_text())
    assert written["time_goodput"] == pytest.approx(10 / 44) and written["goodput"] == pytest.approx(10 / 12)
    md = files["markdown"].read_text()
    assert md.startswith("### Drill `mid-save` on `local:dev/j`: PASSED")
    assert "| imported -> checkpoint restored | 6.0 s |" in md and "| goodput (time, from job start) | 22.7% |" in md
    assert "```mermaid\ngantt" in md and "section recovery" in md and "![timeline](timeline.png)" in md


def test_drill_history_tables_runs_newest_first(tmp_path):
    import importlib.util

    from drills.report import DrillReport

    spec = importlib.util.spec_from_file_location("drill_history", ROOT / "benchmarks" / "drill_history.py")
    history = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(history)
    for run, resume, ok in (("101", 95.0, True), ("202", 41.5, False)):
        DrillReport(target="local:dev/j", job="j", elastic=True, resume_s=resume, ok=ok,
                    phases={"detect": 2.0}).write(tmp_path / run / "drill-preemption" / "drill.json")
    (tmp_path / "202" / "drill-reshard").mkdir(parents=True)
    (tmp_path / "202" / "drill-reshard" / "drill.json").write_text("{not json")
    rows = history.rows(tmp_path)
    assert [(r["run"], r["drill"]) for r in rows] == [("202", "preemption"), ("202", "reshard"),
                                                      ("101", "preemption")]
    assert rows[0]["kill -> resumed (s)"] == 41.5 and rows[0]["result"] == "FAILED"
    assert rows[1]["result"].startswith("unreadable")
    table = history.markdown(rows)
    assert table.splitlines()[2].startswith("| 202 | preemption | preemption | FAILED | 41.5 | 2.0 |")


def test_a_refused_or_cold_spare_fails_the_drill(tmp_path):
    """Warm spares that silently stop serving restarts (a raylet refusing the request, as one does to a request
    without the token under Ray's token auth) fail the drill, with the refusals in its figures."""
    import types

    prod = _spec("prod")
    cluster = types.SimpleNamespace(spares=2, spares_refused=[("slice-0", "UNAUTHENTICATED: token missing")],
                                    live_workers=lambda: [1, 2])
    drill = LocalDrill(prod, pick_job(prod, None), tmp_path, LocalDrillOptions(), cluster=cluster)
    drill.timeline.on_event({"event": "spare_requested", "t": 1.0, "world": 2})
    drill.timeline.on_event({"event": "spare_refused", "t": 2.0, "world": 2, "error": "UNAUTHENTICATED: no token"})
    drill.report.figures["restarted on a warm spare"] = False
    problems = drill._spare_problems()
    assert drill.report.figures["spare requests refused"] == 2
    assert drill.report.figures["spares requested by the workers"] == 1
    assert any("UNAUTHENTICATED: no token" in p for p in problems)
    assert any("slice-0: UNAUTHENTICATED" in p for p in problems)
    assert any("did not run in its node's spare" in p for p in problems)
    # Served by a spare, none refused: no problem.
    cluster.spares_refused.clear()
    drill.timeline.spares_refused.clear()
    drill.report.figures["restarted on a warm spare"] = True
    assert drill._spare_problems() == []


def test_local_clusters_run_with_the_stacks_ray_auth():
    """prod and multi set ray.auth token: their local clusters run with Ray's token auth, a token of their own each
    (made as Ray makes one), on every node and driver; a stack without it runs with auth off."""
    from drills.localray import LocalRayCluster, auth_env

    assert _spec("prod").ray.auth == "token" and _spec("dev").ray.auth == "disabled"
    one, two = auth_env("token"), auth_env("token")
    assert one["RAY_AUTH_MODE"] == "token" and len(one["RAY_AUTH_TOKEN"]) == 64
    assert one["RAY_AUTH_TOKEN"] != two["RAY_AUTH_TOKEN"]
    assert auth_env("disabled") == auth_env(None) == {"RAY_AUTH_MODE": "disabled"}
    cluster = LocalRayCluster(Path("/tmp/unused"), auth="token")  # not started: its nodes' and drivers' environment
    assert cluster.auth_env["RAY_AUTH_MODE"] == "token" and len(cluster.auth_env["RAY_AUTH_TOKEN"]) == 64
