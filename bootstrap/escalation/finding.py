"""One path to more than an identity's row: what the check (``check``, ``stacks``) reports."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    identity: str
    what: str
    accepted: str | None = None  # the reason, for a path the design accepts (reported, not refused)

    def __str__(self) -> str:
        return f"{self.identity}: {self.what}" + (f" [accepted: {self.accepted}]" if self.accepted else "")
