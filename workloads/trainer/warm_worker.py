"""Imported by every Ray worker process as it starts, before any task reaches it: a warm spare.

A node started with ``RAY_preload_python_modules=warm_worker`` (and this directory on its
PYTHONPATH) gives every worker process it starts JAX and MaxText's training loop, the 7-10 s a
Train worker otherwise pays at every (re)start (drills/report.py's "workers up -> MaxText
imported"). The idle processes themselves are asked for with Ray's raylet call PrestartWorkers
(``maxtext_trainer.prestart_workers``: at node start, and by each training worker after its first
step); Ray's worker pool hands one to an actor whose job and runtime env match and which has run no
task, which the trainer's ``--warm-workers`` sees to (the training workers have no runtime env: the
node's environment is theirs, as a pod's is on GKE). Ray 2.60: ``default_worker.py``
(``--worker-preload-modules``, from the raylet's ``preload_python_modules`` config).
"""

from __future__ import annotations

import os
import sys
import time

# Appended, not put first: every job's worker on a warm node imports this, and its own modules come first.
sys.path.append(os.path.dirname(os.path.abspath(__file__)))

import maxtext_trainer  # noqa: E402 - the trainer script's own module, found beside this file

_t = time.time()
maxtext_trainer.preimport()
PREIMPORT_S = round(time.time() - _t, 1)
# When this process was ready (the import done): a restart served by a spare is one whose process was ready
# before the failure; a process started for the restart preloads too, but after it (drills/local.py).
READY_AT = time.time()
if _ready_dir := os.environ.get(maxtext_trainer.WARM_READY_DIR_ENV):  # a local drill's node (drills/localray.py)
    _mark = os.path.join(_ready_dir, f"{os.getpid()}")
    with open(_mark + ".tmp", "w") as f:
        f.write(repr(READY_AT))
    os.replace(_mark + ".tmp", _mark + ".ready")  # whole or absent: the drill reads it while this runs
