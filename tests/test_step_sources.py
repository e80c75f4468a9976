"""The measured step times the cost and Young/Daly's checkpoint period use are the published runs' own figures.

Each entry of ``stackspec.checkpoints.STEP_SECONDS`` names its source by title (a preview and ``cost.json`` print
it; no file path); here each title is looked up in the copies of those publications under
``vendor/seeds/`` (``vendor/README.md``), and the log line with the step's seconds and tokens
per second must be in it.
"""

from __future__ import annotations

import re

import pytest
from conftest import VENDOR

from stackspec.checkpoints import STEP_SECONDS

# The publications' titles, as the sources name them, and their vendored text.
PUBLISHED = {
    "Multislice and elastic training on TPUs using Ray Train": "gke-multislice-elastic-ray-train-tutorial.txt",
    "TPUs are a first-class accelerator in Ray": "ray-tpu-first-class-announcement.txt",
}


@pytest.mark.parametrize("key", sorted(STEP_SECONDS))
def test_each_step_time_is_in_the_run_log_its_source_names(key):
    seconds, source = STEP_SECONDS[key]
    titles = [t for t in PUBLISHED if f'"{t}"' in source]
    assert len(titles) == 1, f"{source!r} names none of the publications in vendor/seeds/"
    assert "/" not in source.split(",")[0], f"{source!r}: a title, not a file path"
    text = (VENDOR / "seeds" / PUBLISHED[titles[0]]).read_text()
    step = re.search(r"step (\d+), ([\d ]+) tokens/s/device", source)
    assert step, source
    tokens = int(step.group(2).replace(" ", ""))
    lines = [line for line in text.splitlines()
             if f"completed step: {step.group(1)}, seconds: {seconds:.3f}," in line
             and (m := re.search(r"Tokens/s/device: ([\d.]+)", line)) and round(float(m.group(1))) == tokens]
    assert lines, f"no log line with step {step.group(1)}, {seconds} s and {tokens} tokens/s/device in {titles[0]}"
