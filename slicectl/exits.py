"""The command line's exit codes: one per kind of outcome, documented in the README.

| code | meaning |
|---|---|
| 0 | clean: rendered, trained or drilled, and every mandatory policy passed |
| 1 | a mandatory policy violation (``slicectl preview``) |
| 2 | usage or file-system error: a bad flag, an unknown stack or job, a missing or invalid file, an unwritable output |
| 3 | the stack spec is invalid (every problem is listed, with file, line and key) |
| 4 | a local training run or a drill ran and did not pass |
| 124 | ``slicectl jobs --wait``: the timeout came before the job finished (xpk's code for it) |
| 125 | ``slicectl jobs --wait``: the job finished and did not succeed (xpk's code) |
| 130 | interrupted (Ctrl-C) |
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    POLICY_VIOLATION = 1
    USAGE = 2  # argparse's own code for usage errors
    INVALID_SPEC = 3
    FAILED = 4
    # AI-Hypercomputer/xpk docs/usage/workloads.md, "Workload List ... Return codes": "124: Timeout was reached before
    # workload finished. 125: Workload finished but did not complete successfully."
    JOB_TIMEOUT = 124
    JOB_FAILED = 125
    INTERRUPTED = 130


class UsageError(Exception):
    """A command-line or file problem the user can fix; printed as ``error: ...``, exit 2."""
