"""One digest over the trainer's files as its ConfigMap ships them (the script and every module beside it): the
renderer puts it on the ConfigMap and each RayJob (workloads/manifests.py), the driver checks its mounted directory
against it before it trains (maxtext_trainer.ensure_script_version). Over every file, not the script alone: a change
to a sibling module alone must replace the RayJob (Pulumi replaces it on any change to its metadata or spec) and must
not let a head whose mount still holds the old module run it. Imports nothing of the project: it ships too."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping


def files_sha256(files: Mapping[str, str | bytes]) -> str:
    """sha256 over each file's name and content's sha256, in name order (a name cannot hide in another's text)."""
    h = hashlib.sha256()
    for name in sorted(files):
        text = files[name]
        data = text.encode() if isinstance(text, str) else text
        h.update(f"{name}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return h.hexdigest()


def directory_sha256(directory: str) -> str:
    """:func:`files_sha256` of a directory's files as the kubelet mounts a ConfigMap: one entry per key, its own
    ``..data`` and ``..<timestamp>`` entries (and anything else starting with a dot) left out."""
    files = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if not name.startswith(".") and os.path.isfile(path):
            with open(path, "rb") as f:
                files[name] = f.read()
    return files_sha256(files)
