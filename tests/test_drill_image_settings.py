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
