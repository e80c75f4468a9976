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
    # The files are read back by PyYAML's pure-Python parser for dev (an implementation apart from libyaml's
    # emitter, which wrote them) and by libyaml's for prod and multi, with the same safe constructor: the
    # pure-Python parser took about 14 s of CPU for multi's 341 files, 40 times libyaml's.
    loader = yaml.SafeLoader if stack == "dev" else yaml.CSafeLoader
    written = {p.relative_to(tmp_path / "manifests").as_posix(): yaml.load(p.read_text(), Loader=loader)  # noqa: S506
               for p in sorted((tmp_path / "manifests").glob("*/*.yaml"))}
    expected = {f"{cluster}/{cmd_preview.manifest_filename(i, doc)}": doc
                for cluster, docs in cmd_preview.manifests_by_cluster(rendering).items()
                for i, doc in enumerate(docs, start=1)}
    expected |= {f"held/{cmd_preview.manifest_filename(i, doc)}": doc for i, doc in enumerate(rendering.held, 1)}
    assert written == expected
    # A multi-line script among them, folded by the emitter: still the same text.
    assert any("\n" in v for doc in expected.values() for v in (doc.get("data") or {}).values()), stack
    assert json.loads((tmp_path / "resources.json").read_text()) == [r.to_json() for r in rendering.resources]


@pytest.mark.parametrize("stack", ["prod", "dev", "multi"])
def test_manifests_are_written_as_yaml_dump_writes_them(stack):
    """``yaml_text`` builds the nodes itself: the text is ``yaml.dump``'s with libyaml's emitter, byte for byte."""
    rendering = rendered(stack)
    docs = [*rendering.manifests, *rendering.held]
    dumped = [yaml.dump(d, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=False) for d in docs]
    assert [cmd_preview.yaml_text(d) for d in docs] == dumped


def test_values_beyond_a_manifests_are_written_as_yaml_dump_writes_them():
    """Floats, keys that are not strings, strings YAML would read as another type, a tuple, a dict held twice
    (an anchor and an alias): the same text as ``yaml.dump``."""
    shared = {"a": 1}
    for doc in ({"f": [1.5, 2.0, 1e-05, float("inf"), float("nan")], "k": {3: "n", None: 1, True: "t"},
                 "s": ["yes", "1", "", "- x", "null", "é\nz", "a: b"], "b": [True, False, None]},
                {"p": shared, "q": shared}, {"t": (1, 2)}, {"l": [[1], [1]]}):
        assert cmd_preview.yaml_text(doc) == yaml.dump(doc, Dumper=yaml.CSafeDumper, sort_keys=False,
                                                       allow_unicode=False), doc


def test_a_second_preview_leaves_none_of_the_lasts_other_files(tmp_path):
    """Rewritten files are overwritten in place; the last preview's files this one does not write (flat, in a
    cluster's folder, held) are removed; what is left is exactly what this preview wrote."""
    rendering = rendered("dev")
    cmd_preview.write(rendering, tmp_path)
    first = sorted(p.relative_to(tmp_path) for p in (tmp_path / "manifests").rglob("*.yaml"))
    stale = [tmp_path / "manifests" / "old.yaml", tmp_path / "manifests" / "gone" / "01-configmap-x.yaml",
             tmp_path / "manifests" / "held" / "09-rayjob-old.yaml", tmp_path / first[0]]
    for path in stale:
        path.parent.mkdir(exist_ok=True)
        path.write_text("stale: true\n")
    cmd_preview.write(rendering, tmp_path)
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "manifests").rglob("*.yaml")) == first
    assert "stale" not in (tmp_path / first[0]).read_text()


def test_a_manifest_path_that_is_a_symlink_is_replaced_not_written_through(tmp_path):
    """Overwriting in place must not follow a symlink left at a manifest's path (a checked-out output folder can
    hold one): the link is replaced by the manifest, and its target, outside the folder, is untouched (as when
    every old file was removed first)."""
    rendering = rendered("dev")
    out = tmp_path / "out"
    cmd_preview.write(rendering, out)
    first = sorted((out / "manifests").rglob("*.yaml"))[0]
    text = first.read_text()
    target = tmp_path / "outside.txt"
    target.write_text("not a manifest\n")
    first.unlink()
    first.symlink_to(target)
    cmd_preview.write(rendering, out)
    assert target.read_text() == "not a manifest\n"
    assert not first.is_symlink() and first.read_text() == text


def test_a_linked_folder_in_the_manifests_folder_is_neither_swept_nor_written_through(tmp_path):
    """A symlink to a folder outside, under ``manifests/`` (a cluster's name or another): the sweep of the last
    preview's files does not follow it (the preview never makes a link, so what is behind one is not its own), and
    a cluster's folder that is a link is replaced by a folder of its own, not written through."""
    rendering = rendered("dev")
    out = tmp_path / "out"
    cmd_preview.write(rendering, out)
    mdir = out / "manifests"
    cluster = sorted(p for p in mdir.iterdir() if p.is_dir() and p.name != "held")[0]
    files = sorted(p.name for p in cluster.glob("*.yaml"))
    elsewhere, theirs = tmp_path / "elsewhere", tmp_path / "theirs"
    for d in (elsewhere, theirs):
        d.mkdir()
        (d / "user.yaml").write_text("mine: true\n")
    (mdir / "linked").symlink_to(theirs)
    for f in cluster.glob("*.yaml"):
        f.unlink()
    cluster.rmdir()
    cluster.symlink_to(elsewhere)
    cmd_preview.write(rendering, out)
    assert [p.name for p in theirs.iterdir()] == ["user.yaml"], "the sweep followed a link out of the folder"
    assert [p.name for p in elsewhere.iterdir()] == ["user.yaml"], "a cluster's manifests went through a link"
    assert not cluster.is_symlink() and sorted(p.name for p in cluster.glob("*.yaml")) == files


def test_no_file_of_the_previews_is_written_through_a_symlink(tmp_path, capsys):
    """``resources.json``, ``outputs.json``, ``cost.json``, the policy report and the ``manifests`` folder: a
    symlink left at any of their paths (a checked-out output folder can hold one) is replaced by the preview's
    own, and its target, outside the folder, is untouched. Through the CLI, as a user runs it."""
    from slicectl import cli
    out = tmp_path / "out"
    argv = ["preview", "--stack", "dev", "--out", str(out)]
    assert cli.main(argv) == 0
    files = ["resources.json", "outputs.json", "cost.json", "policy.json"]
    texts = {name: (out / name).read_text() for name in files}
    manifests = sorted(p.relative_to(out) for p in (out / "manifests").rglob("*.yaml"))
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in files:
        (outside / name).write_text("theirs\n")
        (out / name).unlink()
        (out / name).symlink_to(outside / name)
    theirs = tmp_path / "theirs"
    (theirs / "default").mkdir(parents=True)
    (theirs / "user.yaml").write_text("mine: true\n")
    (theirs / "default" / "user.yaml").write_text("mine: true\n")
    for f in sorted((out / "manifests").rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    (out / "manifests").rmdir()
    (out / "manifests").symlink_to(theirs)
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert {p.name: p.read_text() for p in outside.iterdir()} == dict.fromkeys(files, "theirs\n")
    assert sorted(p.relative_to(theirs).as_posix() for p in theirs.rglob("*")) == [
        "default", "default/user.yaml", "user.yaml"], "the manifests went through a link, or its files were swept"
    for name in files:
        assert not (out / name).is_symlink() and (out / name).read_text() == texts[name], name
    assert not (out / "manifests").is_symlink()
    assert sorted(p.relative_to(out) for p in (out / "manifests").rglob("*.yaml")) == manifests


def test_a_link_made_between_the_check_and_the_write_is_not_followed(tmp_path, monkeypatch):
    """The race a check-then-write leaves open: a link put back at the path right after the preview removed one (what
    another process writing in the folder could do). The write refuses it at the open; the target, outside the
    folder, is never written, and a link that keeps coming back is an error naming the file, not a write through."""
    from pathlib import Path
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n")
    path = tmp_path / "cost.json"
    path.symlink_to(outside)
    unlink = Path.unlink
    relinked = []

    def racing_unlink(self, missing_ok=False):
        unlink(self, missing_ok=missing_ok)
        if self == path and len(relinked) < 1:  # the attacker's move, once
            relinked.append(self)
            self.symlink_to(outside)

    monkeypatch.setattr(Path, "unlink", racing_unlink)
    cmd_preview._write_own(path, "ours\n")
    assert outside.read_text() == "theirs\n", "written through a link made after the check"
    assert not path.is_symlink() and path.read_text() == "ours\n"
    relinked.clear()
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: (unlink(self), self.symlink_to(outside)))
    path.unlink()
    with pytest.raises(OSError, match="keeps reappearing"):
        cmd_preview._write_own(path, "ours\n")
    assert outside.read_text() == "theirs\n"


def test_a_manifest_already_holding_its_text_is_left_untouched_and_a_changed_one_rewritten(tmp_path):
    """A preview that changes nothing rewrites no manifest (truncating a file makes ext4 flush it on close): each
    file keeps its inode and its time; one edited since (same length, other text) is written again."""
    import os

    rendering = rendered("dev")
    cmd_preview.write(rendering, tmp_path)
    files = sorted((tmp_path / "manifests").rglob("*.yaml"))
    old = 1_000_000_000_000_000_000  # 2001, in nanoseconds
    for f in files:
        os.utime(f, ns=(old, old))
    text = files[0].read_bytes()
    files[0].write_bytes(text.replace(b"a", b"b"))  # same length: only the content tells
    os.utime(files[0], ns=(old, old))
    inodes = [f.stat().st_ino for f in files]
    cmd_preview.write(rendering, tmp_path)
    assert files[0].read_bytes() == text and files[0].stat().st_mtime_ns != old
    assert [f.stat().st_mtime_ns for f in files[1:]] == [old] * (len(files) - 1)
    assert [f.stat().st_ino for f in files] == inodes


def _race_a_link_in(monkeypatch, path, target):
    """The first ``lstat`` of ``path`` (a regular file then) is followed at once by a symlink to ``target`` in its
    place: a link put there between the preview's check and its read or write."""
    import os

    real, raced = os.stat, []

    def stat(p, *args, follow_symlinks=True, **kw):
        result = real(p, *args, follow_symlinks=follow_symlinks, **kw)
        if not follow_symlinks and os.fspath(p) == os.fspath(path) and not raced:
            raced.append(p)
            os.unlink(path)
            os.symlink(target, path)
        return result

    monkeypatch.setattr(os, "stat", stat)
    return raced


@pytest.mark.parametrize("same", [True, False], ids=["target-holds-the-text", "target-holds-other-text"])
def test_a_link_put_in_a_manifests_place_after_the_check_is_neither_read_nor_written_through(
        tmp_path, monkeypatch, same):
    rendering = rendered("dev")
    cmd_preview.write(rendering, tmp_path)
    path = sorted((tmp_path / "manifests").rglob("*.yaml"))[0]
    text = path.read_bytes()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_bytes(text if same else b"not the preview's\n")
    path.write_bytes(text + b"# edited\n")
    before = outside.read_bytes()
    raced = _race_a_link_in(monkeypatch, path, outside)
    cmd_preview._write_own(path, cmd_preview.yaml_text(yaml.safe_load(text)))
    monkeypatch.undo()
    assert raced, "the race was not staged: the write made no lstat of the path"
    assert outside.read_bytes() == before, "the manifest was written through a link, out of the folder"
    assert not path.is_symlink(), "a link to a file outside was left as the manifest (read through and compared)"
    assert path.read_bytes() == text


def test_a_fifo_in_a_manifests_place_is_replaced_not_opened(tmp_path):
    """Opening a FIFO to read or write blocks until the other end opens: the preview would hang."""
    import os
    import threading

    rendering = rendered("dev")
    cmd_preview.write(rendering, tmp_path)
    path = sorted((tmp_path / "manifests").rglob("*.yaml"))[0]
    text = path.read_bytes()
    path.unlink()
    os.mkfifo(path)
    done = threading.Thread(target=cmd_preview.write, args=(rendering, tmp_path), daemon=True)
    done.start()
    done.join(60)
    if done.is_alive():  # the thread is a daemon: left blocked, the test fails
        pytest.fail("the preview blocked on a FIFO at a manifest's path")
    assert path.is_file() and path.read_bytes() == text
