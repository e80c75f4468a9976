"""A job with its own trainer (``jobs[].trainer``) shown and run as itself, not as MaxText.

No MaxText model, parameter count or measured Llama step time in its preview and cost (it declares its step time,
``expectedStepSeconds``, and its checkpoint size, ``trainer.checkpointGb``); no MaxText setting in its script's
config; MaxText's keys refused on it. Fixture: ``tests/fixtures/rough/Pulumi.own.yaml`` (job ``tiny-own``).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS
from pydantic import ValidationError
from test_spec_refusals import lint_and_preview

from slicectl import cli
from slicectl.exits import Exit
from stackspec import spec as stack_spec
from stackspec import trainer as own_trainer
from workloads import manifests

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "rough"
NS = stack_spec.PROJECT


def _own(tmp_path: Path, edit) -> Path:
    doc = yaml.safe_load((FIXTURES / "Pulumi.own.yaml").read_text())
    edit(doc["config"][f"{NS}:jobs"][0])
    (tmp_path / "Pulumi.own.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp_path


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue() + err.getvalue()


def test_the_preview_shows_the_script_and_the_declared_checkpoint_size(tmp_path):
    code, out = _run(["preview", "--stack", "own", "--stacks-dir", str(FIXTURES), "--out", str(tmp_path)])
    assert code == 0, out
    row = next(line for line in out.splitlines() if line.strip().startswith("tiny-own "))
    assert "own: trainers/tiny_jax.py" in row and "llama" not in row
    block = out.split("  tiny-own: run ", 1)[1].split("\n  llama3-8b-elastic", 1)[0]
    assert "(trainer.checkpointGb)" in block and "params" not in block


def test_its_cost_uses_its_own_step_time_or_says_unknown(tmp_path):
    def step(directory: Path) -> object:
        code, out = _run(["cost", "--stack", "own", "--stacks-dir", str(directory), "--format", "json"])
        assert code == 0, out
        return next(j for j in json.loads(out)["jobs"] if j["job"] == "tiny-own")["expectedStepSeconds"]

    assert step(FIXTURES) == 0.05  # the job's expectedStepSeconds
    # Without it: unknown, never the measured step of the MaxText model the job's defaults would name.
    assert step(_own(tmp_path, lambda j: j.pop("expectedStepSeconds"))) is None


def test_no_maxtext_setting_reaches_the_scripts_config():
    s = stack_spec.load_stack("own", FIXTURES)
    argv = shlex.split(manifests.ray_job(s, s.job("tiny-own"))["spec"]["entrypoint"])
    settings = dict(a.split("=", 1) for a in argv[argv.index("--") + 1:])
    assert set(settings) == {"base_output_directory", "run_name", "steps", "checkpoint_period",
                             *s.job("tiny-own").trainer.config}
    code, out = _run(["submit", "--stack", "own", "--stacks-dir", str(FIXTURES), "--job", "tiny-own",
                      "--steps", "50"])
    assert code == 0, out
    for key in ("model_name=", "per_device_batch_size=", "max_target_length=", "enable_goodput_recording="):
        assert key not in out


@pytest.mark.parametrize(("edit", "key", "words"), [
    (lambda j: j.update(model="llama3-8b"), "model", "MaxText's, and this job runs its own trainer"),
    (lambda j: j.update(perDeviceBatchSize=4), "perDeviceBatchSize", "MaxText's"),
    (lambda j: j.update(maxtext={"dataset_type": "synthetic"}), "maxtext", "MaxText's"),
    (lambda j: j.update(ici={"fsdp": 8}), "ici", "MaxText's"),
    (lambda j: j.update(cluster="shared", trainer={**j["trainer"], "image": "r.example/p/i@sha256:" + "a" * 64}),
     "trainer.image", "needs a cluster of its own"),
])
def test_what_a_trainer_job_cannot_use_is_refused_at_its_key(tmp_path, edit, key, words):
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load_stack("own", _own(tmp_path, edit))
    rendered = [p.render() for p in e.value.problems]
    assert any(p.startswith(f"{NS}:jobs[0].{key}") and words in p for p in rendered), rendered


def test_a_script_linked_from_outside_the_repository_is_refused(tmp_path, monkeypatch):
    repo, outside = tmp_path / "repo", tmp_path / "outside.py"
    (repo / "trainers").mkdir(parents=True)
    outside.write_text("def train_loop_per_worker(config):\n    pass\n")
    (repo / "trainers" / "linked.py").symlink_to(outside)
    (repo / "trainers" / "inside.py").write_text(outside.read_text())
    monkeypatch.setattr(own_trainer, "ROOT", repo)
    assert own_trainer.Trainer(script="trainers/inside.py").script == "trainers/inside.py"
    with pytest.raises(ValidationError, match="leads outside it"):
        own_trainer.Trainer(script="trainers/linked.py")


def test_under_blocking_binary_authorization_a_trainer_image_lives_in_the_stacks_repository(tmp_path):
    """The attestor signs only what image.yml pushed to the stack's repository: any other trainer image would be
    refused at pod admission once Binary Authorization blocks."""
    digest = "@sha256:" + "a" * 64
    repo = "us-east5-docker.pkg.dev/my-tpu-project-own/tpu-multislice"

    def stack(image: str, with_repository: bool) -> Path:
        doc = yaml.safe_load((FIXTURES / "Pulumi.own.yaml").read_text())
        config = doc["config"]
        config[f"{NS}:unverified"]["binaryAuthorizationEnforce"] = True
        if with_repository:
            config[f"{NS}:image"] = {"repository": "tpu-multislice", "name": "ray-maxtext"}
        config[f"{NS}:jobs"][0]["trainer"]["image"] = image
        where = tmp_path / image.replace("/", "_").replace("@", "_").replace(":", "_") / str(with_repository)
        where.mkdir(parents=True)
        (where / "Pulumi.own.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return where

    key = f"{NS}:jobs[0].trainer.image"
    for image, with_repository in ((f"docker.io/acme/trainer{digest}", True), (f"{repo}/trainer{digest}", False)):
        with pytest.raises(stack_spec.SpecError) as e:
            stack_spec.load_stack("own", stack(image, with_repository))
        assert any(p.key == key and "Binary Authorization blocks" in p.message for p in e.value.problems)
    assert stack_spec.load_stack("own", stack(f"{repo}/trainer{digest}", True)).job("tiny-own").trainer.image


AR = "us-east5-docker.pkg.dev/my-tpu-project-own/tpu-multislice"


@pytest.mark.parametrize("image", [
    f"{AR}/own:v1@sha256:{'a' * 64}",  # a tag beside the digest: the runtime pulls by the digest (ray.image takes it)
    f"{AR}/own@sha512:{'b' * 128}",  # go-digest's sha512 (limits.DIGEST_HEX), as ray.image takes it
    f"localhost:5000/own@sha256:{'c' * 64}",  # a registry with a port
])
def test_a_trainer_image_any_registry_client_parses_by_digest_is_accepted(image):
    """One image grammar for every image key (stackspec/limits.py image_reference, distribution/reference's)."""
    assert own_trainer.Trainer(script="trainers/tiny_jax.py", image=image).image == image


@pytest.mark.parametrize(("image", "words"), [
    (f"{AR}//own@sha256:{'a' * 64}", "not an image reference"),  # an empty path component
    (f"{AR}/-own@sha256:{'a' * 64}", "not an image reference"),  # a component starting with '-'
    (f"{AR}/own__@sha256:{'a' * 64}", "not an image reference"),  # a trailing separator
    (f"{AR}/own@sha256:{'A' * 64}", "not an image digest"),
    (f"{AR}/own:v1", "by digest"),  # a tag can move under a run
    (f"{AR}/own", "by digest"),
])
def test_a_trainer_image_a_registry_refuses_or_without_a_digest_is_refused(image, words):
    with pytest.raises(ValidationError, match=words):
        own_trainer.Trainer(script="trainers/tiny_jax.py", image=image)


def _multi_with_trainer(tmp_path: Path, name: str, **job) -> tuple[Path, str, int]:
    """The fixture multi-region stack (tests/fixtures/stacks) whose first queued job runs its own trainer, with
    ``job``'s keys: its directory, its text and the job's index."""
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.multi.yaml").read_text())
    jobs = doc["config"][f"{NS}:jobs"]
    i = next(n for n, j in enumerate(jobs) if "region" not in j)
    for key in ("model", "perDeviceBatchSize", "maxTargetLength", "ici", "dcn", "maxtext"):
        jobs[i].pop(key, None)
    jobs[i].update(trainer={"script": "trainers/tiny_jax.py"}, **job)
    (tmp_path / name).mkdir()
    return tmp_path / name, yaml.safe_dump(doc, sort_keys=False), i


@pytest.mark.parametrize(("job", "refused_at"), [
    ({}, "trainer.script"),  # queued through the manager: may run twice after a re-dispatch
    ({"region": "us-east1"}, None),  # pinned to a region: created there, never re-dispatched
    ({"region": "us-east5"}, None),
    ({"suspend": True}, "region"),  # held outside Kueue: not queued, so it needs a region (the other refusal)
    ({"suspend": True, "region": "us-east1"}, None),
])
def test_a_team_trainer_is_refused_exactly_when_queued_through_the_multi_region_manager(tmp_path, job, refused_at):
    """A queued multi-region job may run twice after a re-dispatch; the writer lease that keeps the second copy from
    writing the run's checkpoints is MaxText's trainer's alone: a team's own loop there is refused at its key (lint
    and preview alike), the same job pinned to a region (no re-dispatch) is not, and a job not queued gets the
    region's refusal, not this one. A single-region stack's own trainer previews (the tests above, tiny-own)."""
    where, text, i = _multi_with_trainer(tmp_path, "case", **job)
    code, out = lint_and_preview(where, text, "multi")
    lease = [line for line in out.splitlines() if "writer lease" in line]
    if refused_at is None:
        assert code == Exit.OK and not lease, out
        return
    assert code == Exit.INVALID_SPEC
    problems = [line for line in out.splitlines() if f"{NS}:jobs[{i}]." in line]
    assert len(problems) == 1 and f"{NS}:jobs[{i}].{refused_at} = " in problems[0], out
    if refused_at == "trainer.script":
        assert problems == lease and '= "trainers/tiny_jax.py": ' in lease[0], lease
        assert "(allowed: us-east5, us-east1), or run MaxText" in lease[0], lease


def test_a_stale_mount_re_executes_the_teams_trainer_not_maxtext(monkeypatch):
    """The head's ConfigMap mount may lag the RayJob: the driver waits, then execs the refreshed script with the
    same arguments. For a job's own trainer those arguments must still name it (--custom-trainer and its script),
    else the re-executed maxtext_trainer.py would train MaxText in its place. The exec itself cannot run here: the
    real ensure_script_version is called with an execv that records the command line."""
    import importlib
    import os

    from workloads.trainer import maxtext_trainer  # noqa: F401  (puts the trainer's directory on sys.path: first)

    custom_trainer = importlib.import_module("workloads.trainer.custom_trainer")
    mt = custom_trainer.mt  # the sibling module custom_trainer.py calls, as on the head

    s = stack_spec.load_stack("own", FIXTURES)
    argv = shlex.split(manifests.ray_job(s, s.job("tiny-own"))["spec"]["entrypoint"])[2:]  # after python <script>
    real, execs = mt.ensure_script_version, []

    class Exec(Exception):
        pass

    def execv(exe, command):  # os.execv never returns
        execs.append(command)
        raise Exec

    def check(expected, path, args, **_):
        # What the head sees once the kubelet refreshed it: the rendered digest in path's directory.
        seen = iter(["stale", expected])
        monkeypatch.setattr(mt, "file_sha256", lambda _path: next(seen))
        real(expected, path, args, wait_s=5, poll_s=0.01, execv=execv)

    monkeypatch.setattr(mt, "ensure_script_version", check)
    with pytest.raises(Exec):
        custom_trainer.main(argv)
    (command,) = execs
    assert command[1] == os.path.abspath(mt.__file__)
    assert command[2:] == argv, command  # --custom-trainer <script> kept
