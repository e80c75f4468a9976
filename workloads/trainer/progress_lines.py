"""The lines the trainer prints for its runner: one ``slicectl-progress {json}`` per event (rank 0 per step, every
rank for some) and the final ``slicectl-result {json}`` (the drills, ``slicectl train`` and the cluster runner parse
them). Shipped beside ``maxtext_trainer.py`` in the trainer ConfigMap."""

from __future__ import annotations

PROGRESS = "slicectl-progress"
RESULT = "slicectl-result"
