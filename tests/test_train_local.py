"""``slicectl train --local``: a real local Ray cluster running the real trainer script and
MaxText on CPU (tiny model). Nothing is mocked. The module trains once (``trained_run``) and
the tests that only read a trained run share it: its own checks and the reshard drill."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, SLICECTL

from drills.local_train import ROOT, load_job, parse_line, train_local
from drills.localray import pid_alive


def test_parse_line_reads_progress_through_rays_prefixes():
    line = ('\x1b[36m(RayTrainWorker pid=1)\x1b[0m slicectl-progress {"event": "step", "t": 1.0, '
            '"world": 2, "step": 4}\x1b[32m [repeated 2x across cluster]\x1b[0m')
    assert parse_line(line) == ("progress", {"event": "step", "t": 1.0, "world": 2, "step": 4})
    assert parse_line('slicectl-result {"ok": true}') == ("result", {"ok": True})
    assert parse_line("completed step: 3, seconds: 0.1") is None


# One real two-slice training run for the module: its assertions here, and the reshard drill's
# reference (its losses and the checkpoints two workers wrote). 20 steps, a checkpoint every 5:
# the drills in test_drill_local.py run 20 steps too, so every run compiles the same train step
# (the learning-rate schedule, which spans the steps, is part of it) and the persistent
# compilation cache (build/jax-cache) serves all but the first.
STEPS, PERIOD = 20, 5


@pytest.fixture(scope="module")
def trained_run(local_cluster):
    spec, job = load_job("dev", None)
    # Short path: Ray's Unix sockets live under the run directory.
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tt-", dir=ROOT / "build"))
    try:
        summary = train_local(spec, job, slices=2, run_dir=run_dir, steps=STEPS,
                              checkpoint_period=PERIOD, timeout=900, cluster=local_cluster)
        yield spec, job, run_dir, summary
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
def test_train_local_dev_two_slices_trains_and_checkpoints(trained_run):
    _, job, run_dir, summary = trained_run
    assert summary["ok"], summary
    assert summary["steps"] == list(range(STEPS))
    losses = summary["losses"]
    assert sorted(losses) == list(range(STEPS))
    assert all(math.isfinite(v) for v in losses.values())
    assert losses[STEPS - 1] < losses[0]  # it learns
    assert summary["checkpoint_step"] == STEPS - 1
    ckpt = run_dir / "out" / job.run_name / "checkpoints"
    committed = sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit())
    # Every checkpoint_period steps plus the final step, all committed.
    assert committed == sorted(set(range(0, STEPS, PERIOD)) | {STEPS - 1})
    # Two workers: real multi-process SPMD, one per local slice node.
    assert summary["world_size"] == 2
    assert summary["result"]["ok"] is True
    # The driver is gone; the cluster's own processes end with the module (conftest.local_cluster).
    assert summary["driver_pid"] and not pid_alive(summary["driver_pid"])


@pytest.mark.slow
def test_reshard_drill_restores_two_worker_checkpoints_on_one_and_back(trained_run, local_cluster):
    """``slicectl drill --local --scenario reshard`` with the module's run as its reference: the
    checkpoint two workers wrote at step 5 restores on one worker, which trains to the end; its
    step-10 checkpoint restores on two; both continue the reference's loss curve."""
    from drills.local import CONTINUATION_LOSS_TOL, FIRST_STEP_LOSS_TOL, LocalDrill, LocalDrillOptions

    spec, job, ref_dir, _ = trained_run
    run_dir = Path(tempfile.mkdtemp(prefix="tr-", dir=ROOT / "build"))
    opts = LocalDrillOptions(scenario="reshard", steps=STEPS, checkpoint_period=PERIOD, step_delay=0,
                             reference_dir=ref_dir, timeout_s=900)
    try:
        drill = LocalDrill(spec, job, run_dir, opts, cluster=local_cluster)
        report = drill.run()
        assert report.ok, report.notes
        f = report.figures
        assert (f["down: restored step"], f["down: workers"]) == (PERIOD, "2 -> 1")
        assert (f["up: restored step"], f["up: workers"]) == (2 * PERIOD, "1 -> 2")
        for way in ("down", "up"):
            assert f[f"{way}: first step |loss - writer's|"] <= FIRST_STEP_LOSS_TOL
            assert f[f"{way}: max |loss - ref|"] <= CONTINUATION_LOSS_TOL
            # The check can tell a wrong restore: a period's loss change is far above the tolerance.
            assert f[f"{way}: one period's loss change"] > CONTINUATION_LOSS_TOL
        assert {"json", "markdown", "png"} <= set(drill.files)
        assert "reshard" in (run_dir / "summary.md").read_text()
        pids = [d.proc.pid for d in drill.drivers]
        assert len(pids) == 2 and not any(pid_alive(p) for p in pids)  # down and up
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _tree(pid: int) -> dict[int, str]:
    """pid -> start time (from /proc) of ``pid`` and every live descendant."""
    from drills.localray import _descendants

    out = {}
    for p in [pid, *_descendants(pid)]:
        try:
            out[p] = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except OSError:
            pass
    return out


def _same_process_alive(pid: int, started: str) -> bool:
    """Whether that very process (same start time) still runs; a zombie (ended, waiting for its
    reaper, here the sandbox's init) does not."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


@pytest.mark.slow
@pytest.mark.xdist_group("ray-ctrl-c")  # its own process and cluster: beside the others
def test_double_ctrl_c_leaves_no_ray_process_behind(tmp_path):
    """A real ``slicectl train --local`` in its own process group gets Ctrl-C twice (SIGINT to
    the group, as a terminal sends it) while its Ray workers start: it exits 130 and every process
    it started (nodes, raylets, GCS, workers, the driver) is gone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="ti-", dir=ROOT / "build"))
    proc = subprocess.Popen(
        [sys.executable, *SLICECTL, "train", "--local", "--stack", "dev", "--steps", "50",
         "--run-dir", str(run_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # As a terminal starts it: Ctrl-C's default action. A test run launched in the background by a shell
        # without job control inherits SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        seen: dict[int, str] = {}
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            tree = _tree(proc.pid)
            seen |= tree
            cmdlines = []
            for p in tree:
                try:
                    cmdlines.append(Path(f"/proc/{p}/cmdline").read_bytes())
                except OSError:
                    pass
            # Ray Train's controller is up (a Ray worker process): the nodes, raylets, GCS, driver
            # and Ray workers all exist, and the train workers are being started.
            if any(b"TrainController" in c for c in cmdlines):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read()
        assert len(seen) > 5  # slicectl, three `ray start`, raylets, GCS, driver, workers...
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)  # the impatient second one, during cleanup
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out[-3000:]
        deadline = time.time() + 10  # SIGKILLed processes vanish within moments
        while (left := [p for p, started in seen.items() if _same_process_alive(p, started)]) and \
                time.time() < deadline:
            time.sleep(0.5)
        def describe(p: int) -> str:
            try:
                return f"{p} {Path(f'/proc/{p}/cmdline').read_bytes().replace(b'\0', b' ')[:120]!r}"
            except OSError:
                return f"{p} (gone)"

        assert not left, f"still running: {[describe(p) for p in left]}\n{out[-3000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(run_dir, ignore_errors=True)


# --------------------------------------------------------------------------- a team's own trainer (issue 27)

FIXTURES = ROOT / "tests" / "fixtures" / "rough"  # Pulumi.own.yaml: job tiny-own runs trainers/tiny_jax.py


def test_a_job_with_its_own_trainer_renders_its_script_into_the_rayjob_and_configmap():
    """On the cluster the job's RayJob runs the same entrypoint (maxtext_trainer.py, checked by its sha256), which
    hands ``--custom-trainer`` to custom_trainer.py; both and the team's script are in the trainer ConfigMap."""
    import shlex

    from stackspec import spec as stack_spec
    from workloads import manifests

    s = stack_spec.load_stack("own", FIXTURES)
    job = s.job("tiny-own")
    argv = shlex.split(manifests.ray_job(s, job)["spec"]["entrypoint"])
    assert argv[:2] == ["python", f"{manifests.TRAINER_DIR}/maxtext_trainer.py"]
    i = argv.index("--custom-trainer")
    script = argv[i + 1]
    cm = manifests.trainer_configmap(s)["data"]
    assert script.startswith(manifests.TRAINER_DIR + "/") and script.rsplit("/", 1)[1] in cm
    assert cm[script.rsplit("/", 1)[1]] == (ROOT / "trainers" / "tiny_jax.py").read_text()
    assert cm["custom_trainer.py"] == (ROOT / "workloads" / "trainer" / "custom_trainer.py").read_text()
    # The trainer's config reaches the script after the job's own settings; the MaxText job is unchanged.
    assert "learning_rate=0.2" in argv and f"steps={job.steps}" in argv
    other = shlex.split(manifests.ray_job(s, s.job("llama3-8b-elastic"))["spec"]["entrypoint"])
    assert "--custom-trainer" not in other


@pytest.mark.parametrize("trainer, message", [
    ({"script": "../outside.py"}, "relative path"),
    ({"script": "trainers/nope.py"}, "no such file"),
    ({"script": "README.md"}, "a .py file"),
    ({"script": "trainers/tiny_jax.py", "config": {"steps": 3}}, "set by the job itself"),
    ({"script": "trainers/tiny_jax.py", "image": "my/image:latest"}, "by digest"),
])
def test_a_trainer_the_spec_cannot_run_is_refused_at_its_key(tmp_path, trainer, message):
    import yaml

    from stackspec import spec as stack_spec

    doc = yaml.safe_load((FIXTURES / "Pulumi.own.yaml").read_text())
    doc["config"]["tpu-multislice:jobs"][0]["trainer"] = trainer
    (tmp_path / "Pulumi.own.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load_stack("own", tmp_path)
    rendered = [p.render() for p in e.value.problems]
    assert any(p.startswith("tpu-multislice:jobs[0].trainer") and message in p for p in rendered), rendered


@pytest.mark.slow
def test_a_teams_own_jax_trainer_trains_checkpoints_and_resumes_locally(local_cluster):
    """``trainers/tiny_jax.py`` under the real JaxTrainer on the local Ray cluster (two slice nodes, two
    workers): every step reported, the loss falls, rank 0's checkpoints land in Ray Train's storage, and a second run
    of the same job with more steps resumes after the last checkpoint instead of starting over."""
    spec, job = load_job("own", "tiny-own", FIXTURES)
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="to-", dir=ROOT / "build"))
    steps, period = 12, 4
    try:
        first = train_local(spec, job, slices=2, run_dir=run_dir, steps=steps, checkpoint_period=period,
                            timeout=900, cluster=local_cluster)
        assert first["ok"], first
        assert first["steps"] == list(range(steps)) and first["world_size"] == 2
        losses = first["losses"]
        assert all(math.isfinite(v) for v in losses.values()) and losses[steps - 1] < losses[0]
        assert first["checkpoint_step"] == steps - 1
        # Ray Train's checkpoint directories (beside them it keeps checkpoint_manager_snapshot.json).
        stored = [p for p in (run_dir / "out" / "ray-results" / job.run_name).glob("checkpoint_*") if p.is_dir()]
        assert len(stored) == steps // period  # steps 3, 7, 11
        second = train_local(spec, job, slices=2, run_dir=run_dir, steps=steps + 4, checkpoint_period=period,
                             timeout=900, cluster=local_cluster)
        assert second["ok"], second
        assert second["steps"] == list(range(steps, steps + 4)), second["steps"]  # resumed, not restarted
        assert second["losses"][steps] < losses[steps - 1]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_submit_renders_a_one_off_rayjob_of_a_stack_job(tmp_path, capsys):
    """``slicectl submit``: the job's RayJob under a name of its own, a fresh run, the steps asked for, queued like the
    job (same Kueue queue and priority), its own trainer script found under the ConfigMap key the stack deploys."""
    import shlex

    import yaml

    from slicectl import cli
    from stackspec import spec as stack_spec
    from workloads import manifests

    out = tmp_path / "one.yaml"
    assert cli.main(["submit", "--stack", "own", "--stacks-dir", str(FIXTURES), "--job", "tiny-own", "--name",
                     "tiny-own-try", "--steps", "7", "--out", str(out)]) == 0
    assert "kubectl apply -f" in capsys.readouterr().err
    body = yaml.safe_load(out.read_text())
    s = stack_spec.load_stack("own", FIXTURES)
    declared = manifests.ray_job(s, s.job("tiny-own"))
    assert body["metadata"]["name"] == "tiny-own-try" != declared["metadata"]["name"]
    assert body["metadata"]["labels"]["tpu-multislice/one-off"] == "true"
    for label in ("kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"):
        assert body["metadata"]["labels"][label] == declared["metadata"]["labels"][label]
    argv = shlex.split(body["spec"]["entrypoint"])
    run = argv[argv.index("--name") + 1]
    assert run != s.job("tiny-own").run_name and "steps=7" in argv
    script = argv[argv.index("--custom-trainer") + 1].rsplit("/", 1)[1]
    assert script in manifests.trainer_configmap(s)["data"]  # the deployed ConfigMap has it
    # Names past the RayJob limit and unknown jobs are refused, nothing written.
    assert cli.main(["submit", "--stack", "own", "--stacks-dir", str(FIXTURES), "--job", "tiny-own", "--name",
                     "x" * 60, "--out", str(tmp_path / "bad.yaml")]) == 3
    assert cli.main(["submit", "--stack", "own", "--stacks-dir", str(FIXTURES), "--job", "nope"]) == 2
    assert not (tmp_path / "bad.yaml").exists()


@pytest.mark.slow
@pytest.mark.xdist_group("ray-long-path")  # its own process and cluster
def test_train_local_runs_from_a_long_checkout_path_under_a_20_character_stack_name():
    """A fresh clone in a deep directory and the longest stack name ``slicectl new`` allows: the run directory
    is far past what Ray's Unix sockets could hold under it (AF_UNIX: 107 bytes), and the run still trains, with
    Ray's logs kept in the run directory and nothing of the cluster left under /tmp."""
    import json
    import subprocess
    import sys

    from drills.localray import SHORT_TEMP_PREFIX, SHORT_TEMP_ROOT

    stack = "dev-long-stack-name1"
    assert len(stack) == 20
    (ROOT / "build").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="tl-", dir=ROOT / "build"))
    try:
        stacks = base / "stacks"
        stacks.mkdir()
        shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", stacks / f"Pulumi.{stack}.yaml")
        run_dir = base / ("a-checkout-path-" * 6) / "build" / stack / "train-000000"
        assert len(str(run_dir / "ray" / "session_2026-11-25_15-10-00_701130_4194304" / "sockets")) > 107
        proc = subprocess.run(
            [sys.executable, "-m", "slicectl.cli", "train", "--local", "--stack", stack, "--stacks-dir", str(stacks),
             "--slices", "2", "--steps", "3", "--run-dir", str(run_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["ok"] and summary["checkpoint_step"] == 2
        assert list((run_dir / "ray").glob("session_*/logs/raylet*.out"))  # Ray's logs, copied back
        temp = Path(summary["ray_temp_dir"])
        assert temp.parent == SHORT_TEMP_ROOT and temp.name.startswith(SHORT_TEMP_PREFIX) and not temp.exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
