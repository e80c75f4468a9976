"""Imported by every Ray worker process as it starts, before any task reaches it: a warm spare.

A node started with ``RAY_preload_python_modules=warm_worker`` (and this directory on its
PYTHONPATH) keeps idle worker processes that have already imported JAX and MaxText's training
loop, the ~7 s a Train worker otherwise pays at every (re)start (drills/report.py's
"workers up -> MaxText imported"). Ray's worker pool hands an idle worker to an actor whose job
and runtime env match and which has run no task: the workers Ray prestarts at node start (no job,
no runtime env), provided the training workers have no runtime env either, which the trainer's
``--warm-workers`` sees to (the node's environment is theirs, as a pod's is on GKE). Ray 2.60: ``default_worker.py``
(``--worker-preload-modules``, from the raylet's ``preload_python_modules`` config), the raylet's
``num_prestart_python_workers`` (one idle worker per logical CPU at node start).
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import maxtext_trainer  # noqa: E402 - the trainer script's own module, found beside this file

_t = time.time()
maxtext_trainer.preimport()
PREIMPORT_S = round(time.time() - _t, 1)
