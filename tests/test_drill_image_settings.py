"""The stack's image settings in a local drill: each one the cluster gives its TPU workers or its trainer is in the
drill's report, applied or with why a local CPU drill cannot apply it; none is dropped silently."""

from __future__ import annotations

import pytest

from drills import image_settings
from offline import engine
from stackspec import spec as stack_spec

STACKS = ("dev", "prod", "multi", "team-eu")


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_setting_of_every_job_has_a_local_answer(stack):
    from workloads.manifests import _worker_env

    spec = stack_spec.load(stack, engine.stack_config(stack))
    for job in spec.jobs:
        rows = image_settings.image_settings(spec, job)
        names = [name for name, _, _ in rows]
        assert image_settings.UNKNOWN not in [how for _, _, how in rows], (job.name, rows)
        assert names[0] == "worker image" and rows[0][1] == spec.worker_image
        assert {e["name"] for e in _worker_env(spec, job.slices)} <= set(names)
        lines = image_settings.report_lines(spec, job)
        assert len(lines) == len(rows) and all(line.startswith("image setting ") for line in lines)


def test_a_setting_the_cluster_gains_is_reported_without_an_answer_not_dropped(monkeypatch):
    from workloads import manifests

    spec = stack_spec.load("prod", engine.stack_config("prod"))
    real = manifests._worker_env
    monkeypatch.setattr(manifests, "_worker_env", lambda s, n: [*real(s, n), {"name": "NEW_TPU_FLAG", "value": "1"}])
    rows = image_settings.image_settings(spec, spec.drill_job(None))
    assert ("NEW_TPU_FLAG", "1", image_settings.UNKNOWN) in rows


def test_the_multi_region_stacks_lease_is_named_in_the_drill():
    spec = stack_spec.load("multi", engine.stack_config("multi"))
    queued = [j for j in spec.jobs if j.region is None]
    assert queued
    assert any(name == "--lease" for name, _, _ in image_settings.image_settings(spec, queued[0]))


def _rendered_env_names(doc) -> set[str]:
    """Every env var name any container of a rendered manifest sets (walked, not looked up by a helper)."""
    if isinstance(doc, dict):
        found = {e["name"] for e in doc.get("env", [])} if isinstance(doc.get("env"), list) else set()
        return found.union(*(_rendered_env_names(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(_rendered_env_names(v) for v in doc))
    return set()


def _argv_settings(argv: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    cut = argv.index("--")
    own, flags = argv[:cut], {}
    for i, a in enumerate(own):
        if a.startswith("--"):
            flags[a] = own[i + 1] if i + 1 < len(own) and not own[i + 1].startswith("--") else "on"
    return flags, dict(a.split("=", 1) for a in argv[cut + 1:])


@pytest.mark.parametrize("stack", STACKS)
def test_the_report_covers_every_env_var_flag_and_setting_of_the_rendered_rayjob(stack):
    """Against the rendered RayJob itself (its entrypoint parsed, every container's env walked), not the helpers the
    report is built from: every env var is reported, and every trainer flag or MaxText setting whose value the
    local drill's argv does not repeat (missing, or another value: hosts per slice, chips per host, paths)."""
    import shlex

    from workloads import manifests
    from workloads.trainer_args import trainer_argv

    spec = stack_spec.load(stack, engine.stack_config(stack))
    # Each RayJob as rendered where it runs (a multi-region stack's region views; the report takes the stack's).
    for view, job in [(v, j) for v in spec.region_views() for j in v.jobs]:
        rayjob = manifests.ray_job(view, job)
        cluster = rayjob["spec"].get("rayClusterSpec") or manifests.ray_cluster(view)["spec"]
        names = {name for name, _, _ in image_settings.image_settings(spec, job)}
        assert _rendered_env_names(cluster) <= names, (job.name, _rendered_env_names(cluster) - names)
        argv = shlex.split(rayjob["spec"]["entrypoint"])[2:]  # past "python <script>"
        flags, settings = _argv_settings(argv)
        local_flags, local_settings = _argv_settings(trainer_argv(spec, job, local=True, data_dir="/local-run",
                                                                  warm_workers=True))
        differ = {f for f, v in flags.items() if local_flags.get(f) != v}
        differ |= {k for k, v in settings.items() if local_settings.get(k) != v}
        assert differ <= names, (job.name, sorted(differ - names))


def test_a_teams_own_trainer_has_a_local_answer_for_each_setting():
    """A job with its own trainer script (tests/fixtures/rough, tiny-own): its --custom-trainer path differs from the
    local run's (the cluster's is the ConfigMap's copy), which the value comparison reports: with an answer."""
    from pathlib import Path

    spec = stack_spec.load_stack("own", Path(__file__).parent / "fixtures" / "rough")
    for job in spec.jobs:
        rows = image_settings.image_settings(spec, job)
        assert image_settings.UNKNOWN not in [how for _, _, how in rows], (job.name, rows)


def test_the_reported_worker_image_is_the_one_the_rendered_rayjob_runs(tmp_path):
    """A team's trainer with its own image (custom_trainer_args.with_image puts it on every Ray container of its
    dedicated cluster): the report names that image, not the stack's."""
    from pathlib import Path

    import yaml

    from workloads import manifests

    fixtures = Path(__file__).parent / "fixtures" / "rough"
    doc = yaml.safe_load((fixtures / "Pulumi.own.yaml").read_text())
    ns = stack_spec.PROJECT
    doc["config"][f"{ns}:image"] = {"repository": "tpu-multislice", "name": "ray-maxtext"}
    doc["config"][f"{ns}:jobs"][0]["trainer"]["image"] = (
        "us-east5-docker.pkg.dev/my-tpu-project-own/tpu-multislice/trainer@sha256:" + "a" * 64)
    (tmp_path / "Pulumi.own.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = stack_spec.load_stack("own", tmp_path)
    for job in spec.jobs:
        cluster = manifests.ray_job(spec, job)["spec"].get("rayClusterSpec") or manifests.ray_cluster(spec)["spec"]
        groups = (cluster["headGroupSpec"], *cluster["workerGroupSpecs"])
        images = {c["image"] for g in groups for c in g["template"]["spec"]["containers"]
                  if c["name"].startswith("ray-")}
        reported = image_settings.image_settings(spec, job)[0]
        assert reported[0] == "worker image" and images == {reported[1]}, (job.name, images, reported)
