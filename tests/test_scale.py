"""A 1,024-slice stack (``benchmarks/preview.py``'s scale run) renders every slice as the 2-slice stack
renders one: the engine's fast paths (its own RegisterResource answer, no GC or source positions while
the program runs) change nothing at scale."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from offline import engine

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from scale import scaled_stack  # noqa: E402

NODE_POOL = "gcp:container/nodePool:NodePool"
SLICE_POOL = "tpu-multislice:infra:SliceNodePool"


def _renamed(value, old: str, new: str):
    return json.loads(re.sub(rf"{re.escape(old)}(?![0-9])", new, json.dumps(value)))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scale")
    return (engine.render("prod", stacks_dir=scaled_stack(2, tmp / "2").parent),
            engine.render("prod", stacks_dir=scaled_stack(1024, tmp / "1024").parent))


def test_1024_slices_render_every_slice(pair):
    small, large = pair
    per_slice = len(small.by_type(NODE_POOL)) - 1  # the system pool is the cluster's
    options = len(small.spec.slices[0].capacity)
    assert per_slice == 2 * options
    assert len(large.by_type(NODE_POOL)) == 1024 * options + 1
    assert len(large.by_type(SLICE_POOL)) == 1024
    assert len(large.resources) == len(small.resources) + 1022 * (options + 1)


@pytest.mark.parametrize("index", [1, 517, 1023])
def test_a_sample_slice_renders_as_the_small_stacks_slice(pair, index):
    small, large = pair
    for pool in small.by_type(NODE_POOL):
        if not pool.name.startswith("v6e-16-1"):
            continue
        name = pool.name.replace("v6e-16-1", f"v6e-16-{index}", 1)
        got = large.one(NODE_POOL, name)
        want = _renamed(pool.to_json(), "v6e-16-1", f"v6e-16-{index}")
        assert got.to_json() == want, name


def test_resources_json_is_the_standard_librarys_text(pair):
    """``slicectl preview`` writes resources.json with msgspec (for speed): the text ``json.dumps`` would write,
    on the 2- and the 1,024-slice renderings; floats with an exponent read back as the same numbers."""
    from slicectl.cmd_preview import json_text
    from stackspec import cost

    for rendering in pair:
        value = [r.to_json() for r in rendering.resources]
        assert json_text(value) == json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        # cost.json and outputs.json keep their keys in the order written.
        for value in (cost.compute(rendering.spec), rendering.outputs):
            assert json_text(value, sort_keys=False) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    odd = {"b": [{}, [], None, True, 4.0, 1.5, 10**20, 1e-05, 1e300, -0.0], "a": "é—\u2028\"\\\n",
           "c": {"z": 1, "y": []}}
    assert json.loads(json_text(odd)) == odd
    assert json_text(odd).split("\n")[1] == json.dumps(odd, indent=2, sort_keys=True, ensure_ascii=False).split("\n")[1]


@pytest.mark.parametrize("stack", ["dev", "no-such-stack"])
def test_preview_in_process_leaves_the_cyclic_collector_as_it_found_it(stack, tmp_path):
    """``slicectl preview`` keeps the collector off through its render (leftovers frozen); a caller in the same
    process (these tests) gets it back on, after a render and after a refusal alike."""
    import gc

    from slicectl import cli

    assert gc.isenabled()
    code = cli.main(["preview", "--stack", stack, "--out", str(tmp_path / "out")])
    assert code in (0, 1) if stack == "dev" else code == 2
    assert gc.isenabled()
