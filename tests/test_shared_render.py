"""``conftest.rendered``: the render a run shares (between its tests and its xdist workers) is the engine's, and
each caller gets a copy of its own."""

from __future__ import annotations

import copy

import conftest

from offline import engine


def test_a_shared_render_is_a_fresh_copy_of_the_engines():
    shared = conftest.rendered("dev")
    assert shared == engine.render("dev")  # what the real engine renders now, field by field
    assert conftest._RENDER_SHARE is not None and any(conftest._RENDER_SHARE.glob("*.pickle"))  # shared this run
    again = conftest.rendered("dev")
    assert again == shared and again is not shared
    # Nothing shared between two copies (as copy.deepcopy): an edit to one leaves the other as rendered.
    first = again.resources[0]
    assert first is not shared.resources[0] and first.inputs is not shared.resources[0].inputs
    before = copy.deepcopy(shared)
    first.inputs["edited"] = True
    again.outputs["edited"] = True
    again.spec.slices[0].__dict__["name"] = "edited"
    assert conftest.rendered("dev") == before == shared
