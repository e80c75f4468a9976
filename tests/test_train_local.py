"""``slicectl train --local``: a real local Ray cluster running the real trainer script and
MaxText on CPU (tiny model). Nothing is mocked. The module trains once (``trained_run``) and
the tests that only read a trained run share it: its own checks and the reshard drill."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import pytest

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
# compilation cache (conftest.jax_cache, shared by the run's drills) serves all but the first.
STEPS, PERIOD = 20, 5


@pytest.fixture(scope="module")
def trained_run(local_cluster, jax_cache):
    spec, job = load_job("dev", None)
    # Short path: Ray's Unix sockets live under the run directory.
    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="tt-", dir=ROOT / "build"))
    try:
        summary = train_local(spec, job, slices=2, run_dir=run_dir, steps=STEPS,
                              checkpoint_period=PERIOD, timeout=900, cluster=local_cluster,
                              jax_cache_dir=jax_cache)
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
    # The driver is gone; the cluster's own processes end with the session (conftest.local_cluster).
    assert summary["driver_pid"] and not pid_alive(summary["driver_pid"])


@pytest.mark.slow
def test_reshard_drill_restores_two_worker_checkpoints_on_one_and_back(trained_run, local_cluster, jax_cache):
    """``slicectl drill --local --scenario reshard`` with the module's run as its reference: the
    checkpoint two workers wrote at step 5 restores on one worker, which trains to the end; its
    step-10 checkpoint restores on two; both continue the reference's loss curve."""
    from drills.local import LocalDrill, LocalDrillOptions
    from drills.reshard import CONTINUATION_LOSS_TOL, FIRST_STEP_LOSS_TOL

    spec, job, ref_dir, _ = trained_run
    run_dir = Path(tempfile.mkdtemp(prefix="tr-", dir=ROOT / "build"))
    opts = LocalDrillOptions(scenario="reshard", steps=STEPS, checkpoint_period=PERIOD, step_delay=0,
                             reference_dir=ref_dir, timeout_s=900, jax_cache_dir=jax_cache)
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
