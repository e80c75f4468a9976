"""The offline engine's shortcuts change nothing it renders: every stack in ``stacks/`` and a large test-owned one
(64 slices, three capacity options each) render the same with the shortcuts on (``slicectl preview``'s path) and
off (``shortcuts=False``: every registration through ``MockMonitor.RegisterResource``, the SDK's own source
positions and garbage collection; the plain ``set_mocks`` path of Pulumi's unit-testing guide).

Compared: every resource (URN, type, parent, provider, options, dependencies and inputs), the stack's outputs,
the program's warnings, the held jobs and every manifest. See ``offline/pulumi_runtime.py`` for the shortcuts.
"""

from __future__ import annotations

import json
from pathlib import Path

import conftest
import pytest
import yaml
from conftest import FIXTURE_STACKS

from offline import engine

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checks"
SHIPPED = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"))
# A slice's capacity options as the README's "Capacity" lists them: each its own node pool.
FALLBACKS = ({"type": "reservation", "reservation": "v6e-res"},
             {"type": "flex-start", "maxRunDuration": "7d"},
             {"type": "on-demand"})


def scaled(slices: int, into: Path, stack: str = "snapshot") -> Path:
    """The test-owned single-region fixture with ``slices`` copies of its first slice, each with
    :data:`FALLBACKS`, ranges wide enough for them (as ``benchmarks/scale.py`` scales prod)."""
    doc = yaml.safe_load((FIXTURES / f"Pulumi.{stack}.yaml").read_text())
    config = doc["config"]
    first = {**config["tpu-multislice:slices"][0], "capacity": [dict(c) for c in FALLBACKS]}
    config.setdefault("tpu-multislice:unverified", {})["draScaleFromZero"] = True  # pools from zero need it
    config["tpu-multislice:slices"] = [{**first, "name": f"v6e-16-{i}"} for i in range(slices)]
    config["tpu-multislice:cluster"]["podCidr"] = "10.128.0.0/10"
    config["tpu-multislice:network"].setdefault("primary", {})["cidr"] = "10.0.0.0/16"
    into.mkdir(parents=True, exist_ok=True)
    (into / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return into


def rendered(rendering: engine.Rendering) -> dict:
    return {
        "resources": {r.urn: r.to_json() for r in rendering.resources},
        "order": [r.urn for r in rendering.resources],
        "outputs": rendering.outputs,
        "warnings": rendering.warnings,
        "held": rendering.held,
        "manifests": rendering.manifests,
    }


def _exact(value) -> str:
    """``value`` as JSON text: Python's ``==`` holds ``4 == 4.0`` and ``True == 1``, the JSON a preview writes
    does not (``4`` and ``4.0``)."""
    return json.dumps(value, sort_keys=True, default=repr)


def written(rendering: engine.Rendering, out: Path) -> dict[str, bytes]:
    """Every file ``slicectl preview`` writes for ``rendering`` (resources, outputs, cost, each manifest), by path."""
    from slicectl import cmd_preview

    cmd_preview.write(rendering, out)
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def assert_same_files(fast: engine.Rendering, plain: engine.Rendering, tmp_path: Path) -> None:
    """Byte for byte: key order included, which ``==`` and sorted JSON do not see (a Struct's map does not keep
    the order a dict was written in, and the SDK's path hands the program's values through one)."""
    ours, theirs = written(fast, tmp_path / "fast"), written(plain, tmp_path / "plain")
    assert sorted(ours) == sorted(theirs), "files added or missing"
    assert [p for p in ours if ours[p] != theirs[p]] == [], "written differently"


def assert_same(fast: dict, plain: dict) -> None:
    assert set(fast["resources"]) == set(plain["resources"]), "resources added or missing"
    changed = [u for u in plain["resources"] if _exact(fast["resources"][u]) != _exact(plain["resources"][u])]
    assert changed == [], f"rendered differently with the shortcuts: {changed[:5]}"
    for part in ("order", "outputs", "warnings", "held", "manifests"):
        assert _exact(fast[part]) == _exact(plain[part]), part


@pytest.mark.parametrize("stack", SHIPPED)
def test_a_shipped_stack_renders_the_same_without_the_shortcuts(stack, tmp_path):
    fast = conftest.rendered(stack)  # the shortcuts' path, as the other modules of this process render it
    plain = engine.render(stack, shortcuts=False)
    assert fast.resources, "nothing rendered"
    assert_same(rendered(fast), rendered(plain))
    assert_same_files(fast, plain, tmp_path)


def test_a_large_stack_renders_the_same_without_the_shortcuts(tmp_path):
    stacks_dir = scaled(64, tmp_path / "stacks")
    fast = engine.render("snapshot", stacks_dir=stacks_dir)
    plain = engine.render("snapshot", stacks_dir=stacks_dir, shortcuts=False)
    assert len(fast.by_type("gcp:container/nodePool:NodePool")) > 64 * len(FALLBACKS)  # and the system pool
    assert_same(rendered(fast), rendered(plain))
    assert_same_files(fast, plain, tmp_path)


def test_the_shortcuts_were_taken_and_the_plain_path_took_none(monkeypatch):
    """Not two renders of one path: with the shortcuts the engine answers registrations itself, without them
    every one goes through ``MockMonitor.RegisterResource``."""
    from pulumi.runtime.mocks import MockMonitor

    calls = []
    stock = MockMonitor.RegisterResource
    monkeypatch.setattr(MockMonitor, "RegisterResource", lambda self, req: calls.append(req.type) or stock(self, req))
    fast = engine.render("snapshot", stacks_dir=FIXTURES)
    assert calls == ["pulumi:pulumi:Stack"]
    calls.clear()
    engine.render("snapshot", stacks_dir=FIXTURES, shortcuts=False)
    assert len(calls) == len(fast.resources) + 1
