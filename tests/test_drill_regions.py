"""``slicectl drill --local --scenario region-loss``: what the drill judges by, without Ray.

The drill itself (two real local Ray clusters, one lost whole) is the slow test in
test_drill_region_loss.py, where the module's local cluster stands in for region B.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from kubectl_standin import MultiRegion

from drills import regions
from drills.report import DrillReport
from drills.reshard import CONTINUATION_LOSS_TOL, FIRST_STEP_LOSS_TOL
from offline import engine
from slicectl import cli
from stackspec import spec as stack_spec


@pytest.fixture
def short_dir():
    """A run directory short enough for Ray's Unix sockets (pytest's tmp_path is not)."""
    path = Path(tempfile.mkdtemp(prefix="rl-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _spec(stack: str) -> stack_spec.StackSpec:
    return stack_spec.load(stack, engine.stack_config(stack))


def test_the_job_resumes_on_another_slice_count_only_where_its_spec_allows():
    prod = _spec("prod")
    elastic, multislice = prod.job("llama3-8b-elastic"), prod.job("llama3-8b-multislice")
    assert regions.workers_in(elastic, 2, 1) == (2, 1)  # elastic: any count from minSlices
    assert regions.workers_in(elastic, 2, 4) == (2, 2)  # no more than it ran on (its maxSlices here)
    assert regions.workers_in(multislice, 2, 3) == (2, 2)
    with pytest.raises(ValueError, match="multislice on exactly 2 slice.*DCN mesh is in its run name.*has 1"):
        regions.workers_in(multislice, 2, 1)
    with pytest.raises(ValueError, match="at least one slice"):
        regions.workers_in(elastic, 2, 0)
    strict = elastic.model_copy(update={"min_slices": 2})
    with pytest.raises(ValueError, match="region B has 1 slice.*minSlices 2"):
        regions.workers_in(strict, 2, 1)


def test_regions_come_from_the_stack_when_it_has_them():
    dev = _spec("dev")
    job = dev.drill_job(None)
    assert regions.stack_regions(dev, job) == [regions.Region("us-east5", 1)]
    a, b = regions.default_regions(dev, job)  # one region: the local stand-ins
    assert (a, b) == (regions.Region("region-a", 2), regions.Region("region-b", 1))
    prod = _spec("prod")
    job = prod.job("llama3-8b-elastic")
    multi = MultiRegion(prod, [("us-east5", "us-east5-b", "tpu-east5", 2), ("us-south1", "us-south1-a",
                                                                             "tpu-south1", 1)])
    assert regions.default_regions(multi, job) == (regions.Region("us-east5", 2), regions.Region("us-south1", 1))


def test_a_multi_region_stack_drills_a_queued_job_in_its_dispatch_order_with_each_regions_slices():
    """``multi``: the regions, their slices and their order are the manager's (its MultiKueueConfig's
    clusters, from ``StackSpec.placements``), not the local stand-ins; the trainer's arguments for each
    region come from that region's view (a multi-region spec has no top-level slices)."""
    from workloads.trainer_args import trainer_argv

    multi = _spec("multi")
    assert multi.slices is None
    job = regions.pick_job(multi, None)
    order = [v.region for v in multi.placements()[job.name]]
    assert job.region is None and len(order) >= 2  # queued on the manager, dispatchable to two regions
    want = [regions.Region(v.region, next(g.replicas for g in v.groups if g.name == v.job(job.name).group))
            for v in multi.placements()[job.name]]
    assert regions.stack_regions(multi, job) == want
    a, b = regions.default_regions(multi, job)
    assert (a.name, b.name) == tuple(order[:2]) and a.site.region == a.name and b.site.region == b.name
    argv = trainer_argv(b.site, b.site.job(job.name), local=True, data_dir="/x", local_slices=b.slices)
    assert argv == trainer_argv(multi, job, local=True, data_dir="/x", local_slices=b.slices)
    assert f"run_name={job.run_name}" in argv
    # A job pinned to one region cannot move: refused by name, never picked by default.
    pinned = [j for j in multi.jobs if j.region is not None]
    for j in pinned:
        with pytest.raises(ValueError, match=f"runs in {j.region} only"):
            regions.pick_job(multi, j.name)


def test_region_loss_cli_on_multi_picks_the_stacks_regions(monkeypatch, tmp_path, capsys):
    seen = {}

    def fake_run(self):
        seen["drill"] = self
        return DrillReport(target="local:multi/x", job=self.job.name, elastic=self.job.elastic, ok=True,
                           scenario="region-loss")

    monkeypatch.setattr(regions.RegionLossDrill, "run", fake_run)
    assert cli.main(["drill", "--local", "--stack", "multi", "--scenario", "region-loss",
                     "--run-dir", str(tmp_path / ("deep" * 30) / "r")]) == 0, capsys.readouterr().err
    multi = _spec("multi")
    d = seen["drill"]
    assert [d.opts.region_a.name, d.opts.region_b.name] == [v.region for v in multi.placements()[d.job.name]][:2]
    pinned = next(j for j in multi.jobs if j.region is not None)
    assert cli.main(["drill", "--local", "--stack", "multi", "--scenario", "region-loss", "--job", pinned.name,
                     "--run-dir", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert f"runs in {pinned.region} only" in err and "Traceback" not in err


def _good(**over) -> dict:
    a = {s: 6.0 - 0.01 * s for s in range(0, 9)}
    b = {s: 6.0 - 0.01 * s + 1e-6 for s in range(6, 20)}
    args = dict(period=5, committed_at_kill=[0, 5], in_flight_at_kill=[], restored=5, start_world=1, workers_b=1,
                last_step_a=8, losses_a=a, losses_b=b, final_step=19, target_step=19,
                committed_end=[0, 5, 10, 15, 19], corrupt_end=[], left_a=[], driver_ok=True)
    return args | over


def test_judge_passes_a_resume_from_the_last_commit_that_continues_the_loss_curve():
    problems, figures = regions.judge(**_good())
    assert problems == []
    assert figures["steps lost"] == 3 and figures["steps both regions ran"] == 3
    assert figures["first step |loss - region A's|"] == pytest.approx(1e-6, rel=0.01)


@pytest.mark.parametrize("over, message", [
    ({"restored": 0}, "resumed after checkpoint 0, the last committed at the loss was 5"),
    ({"restored": None}, "region B never started training"),
    ({"committed_at_kill": [0]}, "no checkpoint past step 0"),
    ({"in_flight_at_kill": [5], "committed_at_kill": [0, 5]}, "being written at the loss"),
    ({"last_step_a": 12}, "7 steps lost, more than the checkpoint period 5"),
    ({"start_world": 2}, "region B trains on 2 worker(s), expected 1"),
    ({"losses_b": {6: 6.0 - 0.06 + 2 * FIRST_STEP_LOSS_TOL}}, "first step in region B has loss"),
    ({"losses_b": {6: 5.94, 7: 5.93, 8: 5.92 + 2 * CONTINUATION_LOSS_TOL}}, "step 8: loss"),
    ({"losses_a": {s: 6.0 for s in range(6)}}, "no loss for step 6 from both regions"),
    ({"final_step": 12}, "final step 12, expected 19"),
    ({"committed_end": [0, 10, 15, 19]}, "committed before the loss are gone: [5]"),
    ({"corrupt_end": [10]}, "without Orbax's metadata: [10]"),
    ({"left_a": [4242]}, "1 process(es) of region A still running"),
    ({"driver_ok": False}, "the job failed in region B"),
])
def test_judge_names_each_way_a_cross_region_resume_can_go_wrong(over, message):
    problems, _ = regions.judge(**_good(**over))
    assert any(message in p for p in problems), problems


def test_a_save_in_flight_at_the_loss_adds_the_steps_it_covered_to_the_allowance():
    problems, figures = regions.judge(**_good(in_flight_at_kill=[10], last_step_a=12))
    assert figures["steps lost allowed"] == 5 + 2 and figures["steps lost"] == 7 and problems == []


def test_drill_options_are_checked_before_any_cluster_starts(short_dir):
    tmp_path = short_dir
    dev = _spec("dev")
    job = dev.drill_job(None)
    with pytest.raises(ValueError, match="--steps 8 leaves nothing to resume"):
        regions.RegionLossDrill(dev, job, tmp_path, regions.RegionLossOptions(steps=8))
    with pytest.raises(ValueError, match="first checkpoint past step 0 is 5"):
        regions.RegionLossDrill(dev, job, tmp_path, regions.RegionLossOptions(kill_after_step=3))
    regions.RegionLossDrill(dev, job, tmp_path / ("x" * 120), regions.RegionLossOptions())  # any length
    drill = regions.RegionLossDrill(dev, job, tmp_path, regions.RegionLossOptions())
    # One bucket, one run name, whichever region: the checkpoints directory names no region.
    assert drill.ckpt_dir == tmp_path.resolve() / "bucket" / job.run_name / "checkpoints"
    assert "region" not in job.run_name


def test_report_draws_both_regions_lanes(tmp_path):
    r = DrillReport(target="local:dev/j", job="j", elastic=True, scenario="region-loss", ok=True,
                    step_times=[(30.0 + 0.3 * i, i, 2) for i in range(9)] + [(80.0 + 0.3 * i, 6 + i, 1)
                                                                             for i in range(14)],
                    marks=[("region lost", 33.0), ("detected", 33.1), ("resumed", 80.0)],
                    lanes=[("region-a (2 slices)", "start", 0.0, 30.0),
                           ("region-a (2 slices)", "training steps 0-8", 30.0, 33.0),
                           ("region-a (2 slices)", "lost", 33.0, 90.0),
                           ("region-b (1 slice)", "standby", 0.0, 33.1),
                           ("region-b (1 slice)", "restore", 33.1, 80.0),
                           ("region-b (1 slice)", "training steps 6-19", 80.0, 84.0)])
    files = r.publish(tmp_path)
    assert files["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = files["markdown"].read_text()
    assert "section region-a (2 slices)" in md and "section region-b (1 slice)" in md
    assert re.search(r"^    restore :regionb1slice1, 33, 80$", md, re.M), md
    assert json.loads(files["json"].read_text())["lanes"][2] == ["region-a (2 slices)", "lost", 33.0, 90.0]


def test_cli_flags_reach_the_region_loss_drill(monkeypatch, short_dir, capsys):
    tmp_path = short_dir
    seen = {}

    def fake_run(self):
        seen["drill"] = self
        return DrillReport(target="local:dev/x", job=self.job.name, elastic=True, ok=True, scenario="region-loss")

    monkeypatch.setattr(regions.RegionLossDrill, "run", fake_run)
    code = cli.main(["drill", "--local", "--stack", "dev", "--scenario", "region-loss", "--slices", "3",
                     "--resume-slices", "2", "--steps", "30", "--checkpoint-period", "4", "--step-delay", "0.1",
                     "--kill-after-step", "6", "--worker-lost-timeout", "5", "--run-dir", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    d = seen["drill"]
    o = d.opts
    assert (o.region_a, o.region_b) == (regions.Region("region-a", 3), regions.Region("region-b", 2))
    assert (o.steps, o.checkpoint_period, o.step_delay, o.kill_after_step) == (30, 4, 0.1, 6)
    assert o.worker_lost_timeout_s == 5.0 and (d.a.workers, d.b.workers) == (3, 2)
    assert re.search(r"^result\s+passed$", capsys.readouterr().out, re.M)
    # Defaults: 20 steps, 2 -> 1 slices, a standing (up) standby.
    cli.main(["drill", "--local", "--stack", "dev", "--scenario", "region-loss", "--run-dir", str(tmp_path / "d")])
    assert (seen["drill"].opts.steps, seen["drill"].a.workers, seen["drill"].b.workers) == (20, 2, 1)
    assert seen["drill"].opts.standby == "up"
    cli.main(["drill", "--local", "--stack", "dev", "--scenario", "region-loss", "--standby", "cold",
              "--run-dir", str(tmp_path / "c")])
    assert seen["drill"].opts.standby == "cold"


@pytest.mark.parametrize("argv, message", [
    (["--scenario", "region-loss", "--scale-up"], "--scale-up is not for --scenario region-loss"),
    (["--scenario", "region-loss", "--kill-node", "1"], "--kill-node is not for --scenario region-loss"),
    (["--scenario", "preemption", "--resume-slices", "1"], "--worker-lost-timeout and --standby are for"),
    (["--scenario", "preemption", "--standby", "cold"], "--standby are for --scenario region-loss"),
    (["--scenario", "region-loss", "--job", "llama3-8b-multislice", "--resume-slices", "1"],
     "multislice on exactly 2 slice(s)"),
    (["--scenario", "region-loss", "--resume-slices", "0"], "argument --resume-slices: 0 is below 1"),
    (["--scenario", "region-loss", "--worker-lost-timeout", "-1"], "argument --worker-lost-timeout: -1 seconds"),
])
def test_cli_refuses_what_a_region_loss_drill_cannot_do(argv, message, capsys):
    assert cli.main(["drill", "--local", "--stack", "prod", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_the_summary_table_escapes_a_pipe_in_a_figure(tmp_path):
    """The region-loss drill names figures ``max |loss - region A's|``: an unescaped ``|`` ends a GFM table cell,
    and the row gets four cells in a two-column table."""
    r = DrillReport(target="local:dev/j", job="j", elastic=True, scenario="region-loss", ok=True,
                    figures={"first step |loss - region A's|": 1e-3, "max |loss - region A's| (steps both ran)": 2e-3,
                             "a|b": "x|y"})
    md = r.publish(tmp_path)["markdown"].read_text()
    rows = [line for line in md.splitlines() if line.startswith("|")]
    # A row's cells, as GitHub splits them: on every pipe that no backslash escapes.
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]
    assert all(len(c) == 2 for c in cells), rows
    shown = {c[0].replace("\\|", "|"): c[1].replace("\\|", "|") for c in cells[2:]}
    assert shown["max |loss - region A's| (steps both ran)"] == "0.002" and shown["a|b"] == "x|y"


def test_rays_unix_sockets_fit_whatever_the_run_directory(tmp_path):
    """Ray binds its raylet and plasma sockets under ``<temp dir>/session_<date>_<time>_<usec>_<pid>/sockets``:
    the kernel refuses an AF_UNIX path over 107 bytes. The temp dir is short whatever the run directory (a
    deep checkout, a 20-character stack name), so the longest socket binds; under the run directory it would not."""
    import os
    import socket

    from drills.localray import LocalRayCluster

    run_dir = tmp_path / ("checkout-" * 12) / "build" / "multi-region-stack20" / "region-170000" / "a"
    clusters = [LocalRayCluster(run_dir, slices=1) for _ in range(2)]
    assert clusters[0].temp_dir != clusters[1].temp_dir  # two regions of one drill never share one
    session = f"session_2026-11-25_15-10-00_701130_{4194304}"  # the widest pid Linux hands out

    def bind(temp: Path) -> None:
        sockets = temp / session / "sockets"
        sockets.mkdir(parents=True)
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(sockets / "plasma_store.99"))

    try:
        bind(clusters[0].temp_dir)
    finally:
        shutil.rmtree(clusters[0].temp_dir, ignore_errors=True)
    with pytest.raises(OSError):  # what a temp dir inside the run directory gave
        bind(run_dir / "ray")
    assert not os.path.exists(clusters[1].temp_dir)  # made at start, not at construction


# Region B's worker_up lines of two benchmark runs, 2026-11-28 (benchmarks/recovery.py --region --standbys warm):
# the base's spare was done preloading 2.7 s before the loss; this checkout's was started 15.4 s before it but
# still importing MaxText, ready 2.4 s after it, and the job's actor waited for it (Ray runs the preload first).
UP_READY = {"event": "worker_up", "rank": 0, "t_up": 977.364, "proc_start": 957.84, "ready_at": 972.234}
LOSS_READY = 974.9
UP_PRELOADING = {"event": "worker_up", "rank": 0, "t_up": 1043.75, "proc_start": 1025.85, "ready_at": 1043.597}
LOSS_PRELOADING = 1041.2


def test_a_standby_spare_ready_before_the_loss_served_the_restart():
    from drills.regions import restart_on_standby_spares

    verdict, lines = restart_on_standby_spares([UP_READY], 1, LOSS_READY, LOSS_READY + 0.1, 980.0)
    assert verdict is True and lines == ["rank 0: a standby spare, ready 2.7 s before the loss"]


def test_a_standby_process_still_preloading_at_the_loss_is_not_a_warm_spare():
    from drills.regions import restart_on_standby_spares

    verdict, lines = restart_on_standby_spares([UP_PRELOADING], 1, LOSS_PRELOADING, LOSS_PRELOADING + 0.1, 1047.0)
    assert verdict is False
    assert lines == ["rank 0: a standby process still preloading at the loss (ready 2.4 s after it)"]


def test_every_rank_of_region_bs_group_is_judged():
    """A cold rank beside a spare fails the verdict; a rank without its line leaves it unknown, never a pass."""
    from drills.regions import restart_on_standby_spares

    cold = {"event": "worker_up", "rank": 1, "t_up": 979.0, "proc_start": 976.0, "ready_at": 978.5}
    verdict, lines = restart_on_standby_spares([UP_READY, cold], 2, LOSS_READY, LOSS_READY + 0.1, 980.0)
    assert verdict is False and lines[1] == "rank 1: a process started after the loss (cold)"
    verdict, lines = restart_on_standby_spares([UP_READY], 2, LOSS_READY, LOSS_READY + 0.1, 980.0)
    assert verdict is None and lines[1] == "rank 1: no worker_up line after the dispatch"
    # A line from before the dispatch (region A's, or an earlier start) is not region B's restart.
    verdict, _ = restart_on_standby_spares([UP_READY | {"t_up": 970.0}], 1, LOSS_READY, LOSS_READY + 0.1, 980.0)
    assert verdict is None


def test_the_report_says_which_standby_the_stack_renders_for_the_job():
    """Region B standing before the job (``up``/``warm``) is what a job on the shared RayCluster meets; a dedicated
    RayJob's cluster is created in B only once MultiKueue dispatches it there: its standby is ``cold``, and a warm
    standby's figure is not the stack's own (every RayJob of the multi-region stack is dedicated)."""
    from drills.regions import stack_standby
    from workloads import manifests

    dev = _spec("dev")
    shared = dev.drill_job(None)
    assert shared.cluster == "shared" and stack_standby(shared).startswith("up:")
    multi = _spec("multi")
    for view in multi.region_views():
        for job in view.jobs:
            dedicated = "rayClusterSpec" in manifests.ray_job(view, job)["spec"]
            assert stack_standby(job).startswith("cold:" if dedicated else "up:"), job.name
