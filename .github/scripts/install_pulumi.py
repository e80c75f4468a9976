"""Install the Pulumi CLI of .github/pulumi-cli.json, checked against its sha256; fail closed.

pulumi/actions downloads the CLI it runs without comparing any checksum (pulumi/actions@8e5e406f
src/libs/pulumi-cli.ts:149 `tc.downloadTool(downloads[platform])`, then extracts and runs it). This script
downloads the pinned archive, refuses it unless its SHA-256 is the pinned one (a null pin refuses every
archive, naming what to fill), extracts it under $RUNNER_TEMP, checks that `pulumi version` prints the pinned
version, and puts it first on $GITHUB_PATH. A later pulumi/actions step then finds it: with a CLI on PATH that
satisfies its range (the default `^3`) and is not in its known-bad list, downloadCli returns before
downloading (src/libs/pulumi-cli.ts:77-95). Standard library only.

    python3 .github/scripts/install_pulumi.py [--dry-run] [--pins FILE]
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

PINS = Path(__file__).resolve().parents[1] / "pulumi-cli.json"
SHA256 = re.compile(r"[0-9a-f]{64}")
VERSION = re.compile(r"\d+\.\d+\.\d+")


def problems(pin: dict) -> list[str]:
    """Why the pin cannot be installed (empty: it can)."""
    out = []
    if not isinstance(pin.get("version"), str) or not VERSION.fullmatch(pin["version"]):
        out.append(f"version = {pin.get('version')!r}; want X.Y.Z")
    url = pin.get("url")
    if not isinstance(url, str) or not url.endswith(f"/pulumi-v{pin.get('version')}-linux-x64.tar.gz"):
        out.append(f"url = {url!r}; want the pulumi-v<version>-linux-x64.tar.gz archive of the pinned version")
    if not isinstance(pin.get("sha256"), str) or not SHA256.fullmatch(pin["sha256"]):
        out.append(f"sha256 = {pin.get('sha256')!r}; want the 64 hex digits of pulumi-v{pin.get('version')}-linux-x64"
                   f".tar.gz from the release's checksums file (pulumi-{pin.get('version')}-checksums.txt)")
    return out


def install(pin: dict, dest: Path) -> Path:
    """Download, check and extract the archive; the directory that holds the `pulumi` binary."""
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "pulumi.tar.gz"
        with urllib.request.urlopen(pin["url"], timeout=300) as response, archive.open("wb") as out:  # noqa: S310
            shutil.copyfileobj(response, out)
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != pin["sha256"]:
            raise SystemExit(f"::error file=.github/{PINS.name}::{pin['url']}: sha256 {digest}, pinned "
                             f"{pin['sha256']}: refusing to run it")
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")  # no absolute paths, no links out of dest
    bin_dir = dest / "pulumi"
    version = subprocess.run([str(bin_dir / "pulumi"), "version"], capture_output=True, text=True, check=True,
                             env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}).stdout.strip()
    if version != f"v{pin['version']}":
        raise SystemExit(f"::error file=.github/{PINS.name}::the archive's pulumi prints {version!r}, "
                         f"pinned v{pin['version']}")
    return bin_dir


def main(argv: list[str]) -> int:
    pins = Path(argv[argv.index("--pins") + 1]) if "--pins" in argv else PINS
    pin = json.loads(pins.read_text())
    found = problems(pin)
    for problem in found:
        print(f"::error file=.github/{PINS.name}::{PINS.name}: {problem}", file=sys.stderr)
    if found:
        return 1
    print(f"pulumi {pin['version']} from {pin['url']} (sha256 {pin['sha256']})")
    if "--dry-run" in argv:
        return 0
    bin_dir = install(pin, Path(os.environ.get("RUNNER_TEMP", tempfile.gettempdir())) / "pulumi-cli")
    with open(os.environ["GITHUB_PATH"], "a") as path:
        path.write(f"{bin_dir}\n")
    print(f"installed in {bin_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
