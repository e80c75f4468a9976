"""``slicectl train --local`` as its own process, each with a cluster of its own: the double Ctrl-C leaves no Ray
process behind, and a run from a long checkout path under the longest stack name trains. Their own module (not
``tests/test_train_local.py``'s, whose runs share one cluster in order): scheduled by file, each runs beside the
other Ray runs instead of after them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, SLICECTL

from drills.local_train import ROOT


def _tree(pid: int) -> dict[int, str]:
    """pid -> start time (from /proc) of ``pid`` and every live descendant."""
    from drills.localray import _descendants

    out = {}
    for p in [pid, *_descendants(pid)]:
        try:
            out[p] = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[19]
        except OSError:
            pass
    return out


def _same_process_alive(pid: int, started: str) -> bool:
    """Whether that very process (same start time) still runs; a zombie (ended, waiting for its
    reaper, here the sandbox's init) does not."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] != "Z"


@pytest.mark.slow
def test_double_ctrl_c_leaves_no_ray_process_behind(tmp_path):
    """A real ``slicectl train --local`` in its own process group gets Ctrl-C twice (SIGINT to
    the group, as a terminal sends it) while its Ray workers start: it exits 130 and every process
    it started (nodes, raylets, GCS, workers, the driver) is gone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="ti-", dir=ROOT / "build"))
    proc = subprocess.Popen(
        [sys.executable, *SLICECTL, "train", "--local", "--stack", "dev", "--steps", "50",
         "--run-dir", str(run_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        # As a terminal starts it: Ctrl-C's default action. A test run launched in the background by a shell
        # without job control inherits SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        seen: dict[int, str] = {}
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            tree = _tree(proc.pid)
            seen |= tree
            cmdlines = []
            for p in tree:
                try:
                    cmdlines.append(Path(f"/proc/{p}/cmdline").read_bytes())
                except OSError:
                    pass
            # Ray Train's controller is up (a Ray worker process): the nodes, raylets, GCS, driver
            # and Ray workers all exist, and the train workers are being started.
            if any(b"TrainController" in c for c in cmdlines):
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read()
        assert len(seen) > 5  # slicectl, three `ray start`, raylets, GCS, driver, workers...
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)  # the impatient second one, during cleanup
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 130, out[-3000:]
        deadline = time.time() + 10  # SIGKILLed processes vanish within moments
        while (left := [p for p, started in seen.items() if _same_process_alive(p, started)]) and \
                time.time() < deadline:
            time.sleep(0.5)
        def describe(p: int) -> str:
            try:
                return f"{p} {Path(f'/proc/{p}/cmdline').read_bytes().replace(b'\0', b' ')[:120]!r}"
            except OSError:
                return f"{p} (gone)"

        assert not left, f"still running: {[describe(p) for p in left]}\n{out[-3000:]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
def test_train_local_runs_from_a_long_checkout_path_under_a_20_character_stack_name():
    """A fresh clone in a deep directory and the longest stack name ``slicectl new`` allows: the run directory
    is far past what Ray's Unix sockets could hold under it (AF_UNIX: 107 bytes), and the run still trains, with
    Ray's logs kept in the run directory and nothing of the cluster left under /tmp."""
    import json
    import subprocess
    import sys

    from drills.localray import SHORT_TEMP_PREFIX, SHORT_TEMP_ROOT

    stack = "dev-long-stack-name1"
    assert len(stack) == 20
    (ROOT / "build").mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="tl-", dir=ROOT / "build"))
    try:
        stacks = base / "stacks"
        stacks.mkdir()
        shutil.copy(FIXTURE_STACKS / "Pulumi.dev.yaml", stacks / f"Pulumi.{stack}.yaml")
        run_dir = base / ("a-checkout-path-" * 6) / "build" / stack / "train-000000"
        assert len(str(run_dir / "ray" / "session_2026-11-25_15-10-00_701130_4194304" / "sockets")) > 107
        proc = subprocess.run(
            [sys.executable, "-m", "slicectl.cli", "train", "--local", "--stack", stack, "--stacks-dir", str(stacks),
             "--slices", "2", "--steps", "3", "--run-dir", str(run_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["ok"] and summary["checkpoint_step"] == 2
        assert list((run_dir / "ray").glob("session_*/logs/raylet*.out"))  # Ray's logs, copied back
        temp = Path(summary["ray_temp_dir"])
        assert temp.parent == SHORT_TEMP_ROOT and temp.name.startswith(SHORT_TEMP_PREFIX) and not temp.exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
