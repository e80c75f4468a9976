"""Benchmark: what one more slice costs the whole ``slicectl preview`` process.

Run: ``uv run python benchmarks/scale.py [--slices 2,64,256,1024] [--runs 3] [--on-demand-only]``.
Prints figures; asserts nothing.

The stack is prod with ``n`` copies of its first slice (``v6e-16-<i>``), each with three capacity options
(a reservation, flex-start, on-demand: three node pools per slice, so 1,024 slices are 3,072 node pools;
``--on-demand-only`` keeps prod's one). Each size runs ``--runs`` whole ``slicectl preview`` processes; per
size it prints the resources, the median wall and CPU (user + system) seconds, milliseconds of wall time per
resource, the marginal cost of a resource over the smallest stack, and the processes' peak RSS.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLICECTL = Path(sys.executable).parent / "slicectl"
# Wide enough for a node's /24 pod range at 4,096 TPU hosts (1,024 slices of 4), clear of the DCN subnets.
SCALED_POD_CIDR = "10.128.0.0/10"
SCALED_NODE_CIDR = "10.0.0.0/16"
# The capacity fallbacks a slice can list (README "Capacity"): each its own node pool.
FALLBACKS = ({"type": "reservation", "reservation": "v6e-res"},
             {"type": "flex-start", "maxRunDuration": "7d"},
             {"type": "on-demand"})


def scaled_stack(slices: int, stacks_dir: Path, stack: str = "prod", fallbacks: bool = False) -> Path:
    """``stacks/Pulumi.<stack>.yaml`` with ``slices`` copies of its first slice (``v6e-16-<i>``), in ``stacks_dir``.

    ``fallbacks``: each slice lists :data:`FALLBACKS` (opted in to pools that scale from zero, which they need).
    """
    import yaml

    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    config = doc["config"]
    first = config["tpu-multislice:slices"][0]
    if fallbacks:
        first = {**first, "capacity": [dict(c) for c in FALLBACKS]}
        config.setdefault("tpu-multislice:unverified", {})["draScaleFromZero"] = True
    config["tpu-multislice:slices"] = [{**first, "name": f"v6e-16-{i}"} for i in range(slices)]
    config["tpu-multislice:cluster"]["podCidr"] = SCALED_POD_CIDR
    # The nodes' subnet holds every host (4 per slice): a /16 at 1,024 slices.
    config["tpu-multislice:network"].setdefault("primary", {})["cidr"] = SCALED_NODE_CIDR
    stacks_dir.mkdir(parents=True, exist_ok=True)
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
