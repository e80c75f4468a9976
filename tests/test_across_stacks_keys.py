"""Another stack's Cloud KMS key is refused wherever the bootstrap keeps the keys.

The bootstrap makes one key per stack, named after it, in its ``kmsLocation`` and ``keyRing``
(``bootstrap/Pulumi.example.yaml``; ``global``/``pulumi`` by default) and grants each stack's identities their own
key only. A team whose bootstrap keeps the keys elsewhere (``kmsLocation: us``) writes that location in every stack
file: a stack naming another's key there was accepted, as only the default location was compared.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS

from slicectl import cli
from slicectl.exits import Exit


def _lint(stacks_dir: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["lint", "--stacks-dir", str(stacks_dir)])
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue() + err.getvalue()


def _write(tmp_path: Path, keys: dict[str, str]) -> Path:
    for name, key in keys.items():
        text = (FIXTURE_STACKS / f"Pulumi.{name}.yaml").read_text()
        (tmp_path / f"Pulumi.{name}.yaml").write_text(
            re.sub(r"(?m)^secretsprovider: .*$", f"secretsprovider: gcpkms://{key}", text))
    return tmp_path


def _key(location: str, ring: str, stack: str) -> str:
    return f"projects/my-tpu-ci/locations/{location}/keyRings/{ring}/cryptoKeys/{stack}"


@pytest.mark.parametrize(("location", "ring"), [("us", "pulumi"), ("global", "stacks"), ("europe-west4", "keys")])
def test_another_stacks_key_outside_the_default_ring_is_refused(tmp_path, location, ring):
    d = _write(tmp_path, {"prod": _key(location, ring, "prod"), "team-eu": _key(location, ring, "prod")})
    code, out = _lint(d)
    assert code == Exit.INVALID_SPEC, out
    line = next(s for s in out.splitlines() if "Pulumi.team-eu.yaml:" in s and "secretsprovider = " in s)
    assert "the Cloud KMS key of stack prod" in line and f"use gcpkms://{_key(location, ring, 'team-eu')}" in line


def test_each_stack_with_its_own_key_outside_the_default_ring_is_accepted(tmp_path):
    d = _write(tmp_path, {"prod": _key("us", "pulumi", "prod"), "team-eu": _key("us", "pulumi", "team-eu")})
    code, out = _lint(d)
    assert "secretsprovider" not in out and code != Exit.INVALID_SPEC, out
