"""What ``pulumi up`` refuses to deploy, declared by the program before it declares any resource.

The program computes its refusals from the spec and hands them to :func:`enforce` once, before the
first resource. A preview (``pulumi preview`` or the offline engine) logs each as a warning that starts
with :data:`PREFIX` and goes on, so a reviewer sees what an update would stop at; an update names
each in the error it stops with, nothing declared. The offline engine reads them back by the prefix
(``offline/engine.py``) and the preview shows them first.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

PREFIX = "pulumi up refuses this stack: "


def enforce(refusals: Sequence[str]) -> None:
    """Warn of each refusal in a preview; stop with all of them (``RunError``, no traceback) in an update."""
    if not refusals:
        return
    if pulumi.runtime.is_dry_run():
        for message in refusals:
            pulumi.log.warn(PREFIX + message)
        return
    raise pulumi.RunError("\n".join(PREFIX + message for message in refusals) + "\nnothing was deployed")
