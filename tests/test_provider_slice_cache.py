"""offline/provider_modules.py's cache of provider slices (compiled bytecode, executed when read): what another user
could write is never read (a shared home or cache dir on a CI runner, a directory open to a group or everyone, a
file someone else owns), an entry not of the shape the cache writes is ignored, not a traceback, and a slice cut by
other slicing code is not read by this one, even with the same size and mtime."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from offline import provider_modules as pm

ROOT = Path(__file__).resolve().parents[1]
ENTRY = (1, 10, compile("x = 1", "<slice>", "exec"))
PLANTED = compile("import builtins; builtins.PLANTED_SLICE = True", "<planted>", "exec")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "slices"
    monkeypatch.setenv("SLICECTL_CACHE_DIR", str(directory))
    return directory


def test_an_entry_written_by_this_user_reads_back(cache):
    pm._cache_write("k", ENTRY)
    assert oct(cache.stat().st_mode & 0o777) == "0o700" and oct((cache / "k").stat().st_mode & 0o777) == "0o600"
    kept, total, code = pm._cache_read("k")
    assert (kept, total) == (1, 10) and isinstance(code, types.CodeType)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_directory_others_may_write_is_not_read_until_closed(cache, mode):
    cache.mkdir()
    (cache / "k").write_bytes(marshal.dumps((1, 10, PLANTED)))
    os.chmod(cache / "k", 0o600)
    os.chmod(cache, mode)
    assert pm._cache_read("k") is None
    pm._cache_write("k", ENTRY)  # ours: closed to others, then read
    assert cache.stat().st_mode & 0o022 == 0
    assert pm._cache_read("k")[:2] == (1, 10)


def test_a_file_others_may_write_or_own_is_not_read(cache):
    pm._cache_write("k", (1, 10, PLANTED))
    os.chmod(cache / "k", 0o622)
    assert pm._cache_read("k") is None
    os.chmod(cache / "k", 0o600)
    assert pm._cache_read("k") is not None
    if os.getuid() == 0:  # only root can give a file away: another user's file in our directory
        os.chown(cache / "k", 65534, -1)
        assert pm._cache_read("k") is None
        os.chown(cache, 65534, -1)  # and another user's directory is neither read nor written
        pm._cache_write("j", ENTRY)
        assert not (cache / "j").exists()


@pytest.mark.parametrize("data", [
    marshal.dumps(5), marshal.dumps((1, 2, "import os")), marshal.dumps((1, 2)), marshal.dumps([1, 2, None]),
    marshal.dumps(ENTRY)[:-7], b"", b"\x00garbage",
])
def test_an_entry_of_another_shape_or_cut_short_is_ignored(cache, data):
    pm._cache_write("k", ENTRY)
    (cache / "k").write_bytes(data)
    assert pm._cache_read("k") is None


def test_the_key_follows_the_slicing_codes_content_not_its_size_and_mtime(tmp_path, monkeypatch):
    """Old slicing code and new at one path, one size, one mtime (an install that pins mtimes): two keys."""
    source = Path(pm.__file__).read_text()
    code = tmp_path / "provider_modules.py"
    monkeypatch.setattr(pm, "__file__", str(code))
    keys = []
    for text in (source.replace("WORTH_SLICING = ", "WORTH_SLICING  = ", 1).replace("\n\n\n", "\n\n", 1), source):
        code.write_text(text)
        os.utime(code, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
        pm._digest.cache_clear()  # a new process: nothing remembered
        keys.append((code.stat().st_size, pm._cache_key("pulumi_gcp.compute._inputs", [str(code)])))
    assert keys[0][0] == keys[1][0] and keys[0][1] != keys[1][1]


_LOAD = """
    import builtins, json, sys
    from offline import provider_modules as pm
    pm.install()
    import pulumi_gcp as gcp
    gcp.compute.Network
    print(json.dumps({"planted": getattr(builtins, "PLANTED_SLICE", False), "sliced": sorted(pm.SLICED),
                      "network_args": hasattr(sys.modules["pulumi_gcp.compute._inputs"], "NetworkParamsArgs")}))
"""


def _load(directory: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_LOAD)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "SLICECTL_CACHE_DIR": str(directory),
                                            "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_slices_planted_in_a_cache_dir_open_to_others_are_not_executed(tmp_path):
    """The offline engine's own path: each real key's entry replaced by code of another's, in a directory anyone may
    write (a shared runner's cache): the program loads the real slices and runs none of it."""
    mine = tmp_path / "mine"
    first = _load(mine)
    assert first["sliced"] and not first["planted"]
    shared = tmp_path / "shared"
    shutil.copytree(mine, shared)
    for entry in shared.iterdir():
        entry.write_bytes(marshal.dumps((1, 10, PLANTED)))
    os.chmod(shared, 0o777)
    second = _load(shared)
    assert not second["planted"]
    assert second["sliced"] == first["sliced"] and second["network_args"]
