"""Kueue's release objects as the program reads them (``workloads/kueue_install.py`` ``release_objects``): the
vendored ``manifests.json`` is the manifest's parse, value for value and type for type, and a JSON or a manifest that
does not match its digest is refused."""

from __future__ import annotations

import msgspec
import pytest

from workloads import kueue_install


def test_the_vendored_objects_are_the_manifest_parsed():
    parsed = kueue_install.parsed_release()
    assert list(kueue_install.release_objects()) == parsed
    # bool, int and float compare equal across types in Python (True == 1 == 1.0): the encodings are compared too
    assert msgspec.json.encode(kueue_install.release_objects()) == msgspec.json.encode(parsed)
    assert kueue_install.OBJECTS.read_bytes() == kueue_install.objects_json(parsed)  # what re-vendoring writes


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """The vendored folder copied, the module pointed at the copy; ``release_objects`` forgotten around the test."""
    for f in ("manifests.yaml", "manifests.json", "SHA256SUMS"):
        (tmp_path / f).write_bytes((kueue_install.DATA / f).read_bytes())
    monkeypatch.setattr(kueue_install, "DATA", tmp_path)
    monkeypatch.setattr(kueue_install, "MANIFEST", tmp_path / "manifests.yaml")
    monkeypatch.setattr(kueue_install, "OBJECTS", tmp_path / "manifests.json")
    kueue_install.release_objects.cache_clear()
    yield tmp_path
    kueue_install.release_objects.cache_clear()


def test_the_copy_as_vendored_is_read(copy):
    assert kueue_install.release_objects()


@pytest.mark.parametrize("name", ["manifests.json", "manifests.yaml"])
def test_a_file_that_does_not_match_its_digest_is_refused(copy, name):
    path = copy / name
    path.write_bytes(path.read_bytes().replace(b"kueue-controller-manager", b"kueue-controller-manageR", 1))
    with pytest.raises(ValueError, match=f"{name} does not match"):
        kueue_install.release_objects()


def test_objects_without_a_digest_line_are_refused(copy):
    sums = copy / "SHA256SUMS"
    kept = [line for line in sums.read_text().splitlines(keepends=True) if "manifests.json" not in line]
    sums.write_text("".join(kept))
    with pytest.raises(ValueError, match="manifests.json does not match"):
        kueue_install.release_objects()


@pytest.mark.parametrize("objects", [
    [{"kind": "A", "spec": {"created": __import__("datetime").date(2026, 1, 1)}}],  # a YAML date
    [{"a": [1], "b": (2, 3)}],  # a tuple would read back as a list
    [{"a": 1.0}],  # JSON keeps 1.0 a float: accepted (the control case)
], ids=["date", "tuple", "float"])
def test_only_what_json_gives_back_exactly_is_written(objects):
    if objects == [{"a": 1.0}]:
        assert msgspec.json.decode(kueue_install.objects_json(objects)) == objects
        return
    with pytest.raises((ValueError, TypeError)):
        kueue_install.objects_json(objects)


def test_a_shared_node_is_refused():
    shared = {"x": 1}
    with pytest.raises(ValueError, match="JSON does not keep"):
        kueue_install.objects_json([{"a": shared, "b": shared}])
    assert kueue_install.objects_json([{"a": {"x": 1}, "b": {"x": 1}}])
