"""The resolve step (``stackspec/defaults.py``): from the stack file as written to the spec the program reads.

Defaults are filled in new objects, never written into an existing one, so the order regions, slices or jobs are
listed in decides nothing but the orders it is meant to (the dispatch order under ``dispatch: listed``, the order
of the lists themselves). The stack files are this test's own (``tests/stacks/resolve/``), not the shipped ones.
"""

from __future__ import annotations

import ast
import itertools
import random
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from stackspec import loader

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).with_name("stacks") / "resolve"
NS = "tpu-multislice"


def written(name: str) -> dict:
    return yaml.safe_load((HERE / f"Pulumi.{name}.yaml").read_text())


def load(doc: dict, tmp_path: Path, name: str = "t"):
    """The spec of ``doc`` as stack ``resolve``, written as ``tmp_path/<name>/Pulumi.resolve.yaml`` (read as a stack
    file is)."""
    path = tmp_path / name / "Pulumi.resolve.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return loader.load_file(path)


def reordered(doc: dict, key: str, order) -> dict:
    """``doc`` with the list at ``tpu-multislice:<key>`` (``regions[i].slices`` too) in ``order``."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    config = doc["config"]
    if key.startswith("regions[") and key.endswith("].slices"):
        site = config[f"{NS}:regions"][int(key[len("regions["):-len("].slices")])]
        site["slices"] = [site["slices"][i] for i in order]
    else:
        config[f"{NS}:{key}"] = [config[f"{NS}:{key}"][i] for i in order]
    return doc


def test_the_order_of_regions_does_not_move_the_image_repository(tmp_path):
    """Code review 2.1, reproduced: swapping the two regions moved the protected Artifact Registry repository from
    us-east5 to us-east1, because the first region view's defaults were written into the image section every view
    shared. The repository is stack-wide: it lives in the stack's home region (the manager's)."""
    doc = written("duo")
    as_listed, swapped = load(doc, tmp_path, "a"), load(reordered(doc, "regions", [1, 0]), tmp_path, "b")
    assert as_listed.manager.region == swapped.manager.region == "us-east5"
    assert as_listed.image.location == swapped.image.location == "us-east5"
    assert as_listed.worker_image == swapped.worker_image
    for view in swapped.region_views():
        assert view.image.location == "us-east5", view.region


def test_a_multi_region_image_lives_in_the_managers_region(tmp_path):
    """trio's manager is in us-central1 (gcp:region), its first region us-east5: the repository is the manager's."""
    s = load(written("trio"), tmp_path)
    assert (s.manager.region, s.home, s.image.location) == ("us-central1", ("trio-manager", "us-central1"),
                                                            "us-central1")
    assert {v.image.location for v in s.region_views()} == {"us-central1"}


# --------------------------------------------------------------------------- any order resolves alike


def orders(n: int, seed: int) -> list[list[int]]:
    """Every order of ``n`` items up to 3; beyond, the listed one, its reverse and four seeded shuffles."""
    if n <= 3:
        return [list(p) for p in itertools.permutations(range(n))]
    rng = random.Random(seed)
    out = [list(range(n)), list(reversed(range(n)))]
    while len(out) < 6:
        p = rng.sample(range(n), n)
        if p not in out:
            out.append(p)
    return out


def _section(x) -> dict | None:
    """A section as resolved, with the fields only the resolve step sets."""
    if x is None:
        return None
    out = x.model_dump(mode="json")
    for name, f in type(x).model_fields.items():
        if f.exclude and name not in ("site", "views", "fits", "source"):
            out[name] = getattr(x, name)
    return out


def canonical(s) -> dict:
    """What a resolved spec says, with every list whose order the stack file chooses keyed by name instead."""
    def region(v) -> dict:
        return {
            "zone": v.zone, "cluster": _section(v.cluster), "network": _section(v.network),
            "slices": {x.name: _section(x) | {"capacity": [_section(c) for c in x.capacity]} for x in v.slices},
            "groups": {g.name: (g.shape.key, sorted(x.name for x in g.slices)) for g in v.groups},
            "jobs": {j.name: _section(j) | {"runName": j.run_name, "plan": j.checkpoint_plan.how} for j in v.jobs},
            "createdHere": sorted(j.name for j in v.created_here()),
            "names": sorted((d.name, d.how) for d in v.derived_names()),
            "storage": _section(v.storage), "image": _section(v.image), "workerImage": v.worker_image,
            "prices": _section(v.prices), "home": v.home,
        }
    out = {"storage": _section(s.storage), "image": _section(s.image), "workerImage": s.worker_image,
           "manager": _section(s.manager), "home": s.home, "jobs": {j.name: _section(j) for j in s.jobs}}
    if s.multi_region:
        out["regions"] = {v.region: region(v) for v in s.region_views()}
        out["fits"] = {job: sorted(v.region for v in vs) for job, vs in s.placements().items()}
    else:
        out["regions"] = {s.region: region(s)}
    return out


def dispatch(s) -> list[str]:
    return [d.view.region for d in s.dispatch_order()]


def usd(s) -> dict[str, float | None]:
    return {d.view.region: d.usd_per_chip_hour for d in s.dispatch_order()}


LISTS = [("duo", "regions"), ("duo", "jobs"), ("trio", "regions"), ("trio", "jobs"), ("trio", "regions[0].slices"),
         ("quad", "slices"), ("quad", "jobs")]


@pytest.mark.parametrize(("stack", "key"), LISTS, ids=[f"{s}-{k}" for s, k in LISTS])
def test_any_order_of_regions_slices_or_jobs_resolves_to_the_same_spec(stack, key, tmp_path):
    """Reordering a list changes that list's order and, for regions, the dispatch order under ``dispatch: listed``
    (cheapest first under ``cost``, ties in the listed order); the bucket, the image repository, every name, every
    job's resolved settings and where each queued job fits stay as they were."""
    doc = written(stack)
    base = load(doc, tmp_path, "base")
    want = canonical(base)
    config = doc["config"]
    if key.startswith("regions["):
        n = len(config[f"{NS}:regions"][int(key[len("regions["):-len("].slices")])]["slices"])
    else:
        n = len(config[f"{NS}:{key}"])
    listed_dispatch = config.get(f"{NS}:dispatch", "cost") == "listed"
    for k, order in enumerate(orders(n, seed=n * 1000 + len(key))):
        s = load(reordered(doc, key, order), tmp_path, f"p{k}")
        assert canonical(s) == want, (key, order)
        if key == "regions":
            listed = [config[f"{NS}:regions"][i]["region"] for i in order]
            assert [v.region for v in s.region_views()] == listed
            if listed_dispatch:
                assert dispatch(s) == listed
            else:
                prices = usd(base)
                assert dispatch(s) == sorted(listed, key=lambda r: (prices[r] is None, prices[r] or 0.0))
        elif s.multi_region:
            assert dispatch(s) == dispatch(base)


# --------------------------------------------------------------------------- nothing written, nothing shared


def test_resolving_leaves_the_spec_as_written_untouched(tmp_path):
    from stackspec import defaults
    from stackspec.model import StackSpec

    for name in ("duo", "trio", "quad"):
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text((HERE / path.name).read_text())
        config, doc = loader.stack_config(name, tmp_path)
        data = loader._decode(config) | {"stack": name}
        written_ = StackSpec.model_validate(data, context={"problems": []})
        before = written_.model_dump(mode="json")
        resolved = defaults.resolve(written_)
        assert resolved is not written_
        assert written_.model_dump(mode="json") == before, name
        if not written_.multi_region:
            assert written_.cluster.location is None and resolved.cluster.location == written_.zone


def _objects(x, seen: dict[int, object], skip: tuple[str, ...] = ()) -> dict[int, object]:
    """Every mutable object (models, dicts, lists, sets) reachable from ``x``, by id."""
    if isinstance(x, BaseModel):
        if id(x) in seen:
            return seen
        seen[id(x)] = x
        for name in type(x).model_fields:
            if name not in skip:
                _objects(getattr(x, name), seen)
    elif isinstance(x, dict | list | set):
        if id(x) not in seen:
            seen[id(x)] = x
            for v in (x.values() if isinstance(x, dict) else x):
                _objects(v, seen)
    elif isinstance(x, tuple):
        for v in x:
            _objects(v, seen)
    return seen


def test_region_views_share_no_object_with_the_stack_or_each_other(tmp_path):
    for name in ("duo", "trio"):
        s = load(written(name), tmp_path, name)
        held = [_objects(s, {}, skip=("views",)), *(_objects(v, {}) for v in s.region_views())]
        for a, b in itertools.combinations(range(len(held)), 2):
            shared = held[a].keys() & held[b].keys()
            assert not shared, (name, a, b, [type(held[a][i]).__name__ for i in shared][:5])


def test_nothing_in_stackspec_writes_into_an_existing_object():
    """No ``object.__setattr__`` and no write through ``__dict__`` anywhere in stackspec/ (the model is frozen:
    what the program, the policies and the CLI read is what was checked)."""
    found = []
    for path in sorted((ROOT / "stackspec").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "object.__setattr__":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} object.__setattr__")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign | ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and ast.unparse(t.value).endswith("__dict__"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(t)} =")
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("__dict__.update"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} __dict__.update")
    assert not found, found


def test_a_resolved_field_is_not_a_stack_file_key(tmp_path):
    doc = written("quad")
    doc["config"][f"{NS}:cluster"]["location"] = "us-east5-a"
    with pytest.raises(loader.SpecError) as e:
        load(doc, tmp_path)
    assert "cluster.location" in str(e.value) and "not a stack-file key" in str(e.value)
