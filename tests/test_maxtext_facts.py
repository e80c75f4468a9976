"""The MaxText facts table (stackspec/data/maxtext.json) is the installed MaxText's, and the spec uses it."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
import yaml

from stackspec import maxtext
from stackspec import spec as stack_spec

NS = stack_spec.PROJECT


def test_table_matches_the_installed_release():
    import importlib.util

    spec = importlib.util.find_spec("maxtext")  # the train extra, which .ci/run installs
    assert spec is not None, "maxtext is not installed: uv sync --all-extras"
    configs = Path(next(iter(spec.submodule_search_locations))) / "configs"
    assert maxtext.version() == metadata.version("maxtext")
    assert set(maxtext.facts()["keys"]) == set(yaml.safe_load((configs / "base.yml").read_text()))
    assert set(maxtext.facts()["models"]) == {p.stem for p in (configs / "models").glob("*.yml")}


def _config(**job):
    config = stack_spec.stack_config("prod")[0]
    import json

    jobs = json.loads(config[f"{NS}:jobs"])
    jobs[0].update(job)
    return {**config, f"{NS}:jobs": json.dumps(jobs)}


@pytest.mark.parametrize(("job", "expected"), [
    ({"model": "llama3-9b"}, "has no model 'llama3-9b'; did you mean"),
    ({"maxtext": {"remat_polcy": "full"}}, "has no config key 'remat_polcy' (did you mean remat_policy?)"),
])
def test_unknown_models_and_keys_are_refused_before_the_job_starts(job, expected):
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load("prod", _config(**job))
    assert expected in str(e.value)
