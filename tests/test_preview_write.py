"""``slicectl preview``'s files read back as what was rendered: every Kubernetes object under ``manifests/``
(libyaml's emitter writes them, ``slicectl/cmd_preview.py`` ``yaml_text``) and ``resources.json``."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import rendered

from slicectl import cmd_preview


@pytest.mark.parametrize("stack", ["prod", "dev", "multi"])
def test_written_manifests_read_back_as_rendered(stack, tmp_path):
    rendering = rendered(stack)
    cmd_preview.write(rendering, tmp_path)
    written = {p.relative_to(tmp_path / "manifests").as_posix(): yaml.safe_load(p.read_text())
               for p in sorted((tmp_path / "manifests").glob("*/*.yaml"))}
    expected = {f"{cluster}/{cmd_preview.manifest_filename(i, doc)}": doc
                for cluster, docs in cmd_preview.manifests_by_cluster(rendering).items()
                for i, doc in enumerate(docs, start=1)}
    expected |= {f"held/{cmd_preview.manifest_filename(i, doc)}": doc for i, doc in enumerate(rendering.held, 1)}
    assert written == expected
    # A multi-line script among them, folded by the emitter: still the same text.
    assert any("\n" in v for doc in expected.values() for v in (doc.get("data") or {}).values()), stack
    assert json.loads((tmp_path / "resources.json").read_text()) == [r.to_json() for r in rendering.resources]
