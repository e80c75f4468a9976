"""offline/sdk_modules.py: under the offline engine ``import pulumi`` leaves the Automation API, dynamic providers,
the tracing set-up and grpc unloaded until first used; used, they are the SDK's modules; with ``TRACEPARENT`` set the
tracing set-up loads as Pulumi does. In a fresh interpreter: this one has imported the SDK already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_STACKS = ROOT / "tests" / "fixtures" / "stacks"

_PROBE = """
import json, pathlib, sys
from offline import engine, sdk_modules
import pulumi
deferred = sorted(n for n, m in sys.modules.items() if isinstance(m, sdk_modules.Deferred)
                  and not m.__dict__.get("_deferred_loaded"))
loaded_before = sorted(n for n in sys.modules if n.startswith(("pulumi.automation.", "pulumi.dynamic.", "dill")))
engine.render("dev", stacks_dir=pathlib.Path(sys.argv[1]))  # the tests' own dev (a fork may hold no dev)
after_render = sorted(n for n in sys.modules if n.startswith(("pulumi.automation.", "pulumi.dynamic.", "grpc._")))
import grpc
rpc_error = grpc.RpcError.__module__
channel = grpc.aio.insecure_channel.__module__
workspace = pulumi.automation.LocalWorkspace.__module__
provider = pulumi.dynamic.ResourceProvider.__module__
trace = pulumi.runtime._instrumentation._initialize_tracing.__module__
print(json.dumps({"deferred": deferred, "loaded_before": loaded_before, "after_render": after_render,
                  "workspace": workspace, "provider": provider, "trace": trace, "rpc_error": rpc_error,
                  "channel": channel, "cygrpc": "grpc._cython.cygrpc" in sys.modules,
                  "instrumentation_type": type(sys.modules["pulumi.runtime._instrumentation"]).__name__}))
"""


def _probe(**env: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(FIXTURE_STACKS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_sdk_modules_a_preview_never_uses_load_on_first_use():
    result = _probe(TRACEPARENT="")
    assert result["deferred"] == ["grpc", "grpc.aio", "pulumi.automation", "pulumi.dynamic",
                                  "pulumi.runtime._instrumentation"]
    assert result["loaded_before"] == []
    assert result["after_render"] == [], "a render used a deferred module (grpc: an exception through the SDK's " \
        "'except grpc.RpcError', offline/pulumi_runtime.py _off_the_loop)"
    assert (result["rpc_error"], result["channel"], result["cygrpc"]) == ("grpc", "grpc.aio._channel", True)
    assert result["workspace"] == "pulumi.automation._local_workspace"  # the SDK's own classes, once used
    assert result["provider"] == "pulumi.dynamic.dynamic"
    assert result["trace"] == "pulumi.runtime._instrumentation"


def test_with_traceparent_the_tracing_set_up_loads_as_pulumi_does():
    result = _probe(TRACEPARENT="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    assert "pulumi.runtime._instrumentation" not in result["deferred"]
    assert result["instrumentation_type"] == "module"
