"""offline/sdk_modules.py against the real paths. Its stand-ins fail as an import would: a deferred module whose
code raises raises the same error at every use (Python drops a module whose import failed from ``sys.modules``,
so the next import runs it again and raises again); two threads using a stand-in for the first time both get the
module's name; the SDK behaves as the deferral assumes; the CrossGuard policy pack never sees a stand-in.
In a fresh interpreter: this one has imported the SDK already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), "TRACEPARENT": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_deferred_module_whose_code_fails_raises_its_error_at_every_use():
    # pulumi.dynamic imports dill (pulumi/dynamic/dynamic.py); without it the SDK's own import fails.
    got = _run("""
        import json, sys
        sys.modules["dill"] = None  # import dill raises ImportError
        from offline import sdk_modules
        sdk_modules.install()
        import pulumi
        sdk_modules.bind()
        errors = []
        for _ in range(2):
            try:
                pulumi.dynamic.ResourceProvider
            except Exception as e:  # noqa: BLE001 - the test reports what was raised
                errors.append(f"{type(e).__name__}: {e}")
        print(json.dumps({"errors": errors}))
    """)
    assert len(got["errors"]) == 2, got
    first, again = got["errors"]
    assert first == again and first.startswith("ModuleNotFoundError") and "dill" in first, got["errors"]


def test_two_threads_first_using_a_stand_in_both_get_the_name():
    got = _run("""
        import json, threading, time
        from offline import sdk_modules
        sdk_modules.install()
        import pulumi
        sdk_modules.bind()
        out = {}

        def use():
            try:
                out["thread"] = pulumi.automation.LocalWorkspace.__name__
            except Exception as e:  # noqa: BLE001 - the test reports what was raised
                out["thread"] = f"{type(e).__name__}: {e}"

        with sdk_modules._lock:  # the second thread asks while the first is loading the module
            t = threading.Thread(target=use)
            t.start()
            time.sleep(0.5)
            out["main"] = pulumi.automation.LocalWorkspace.__name__
        t.join()
        print(json.dumps(out))
    """)
    assert got == {"main": "LocalWorkspace", "thread": "LocalWorkspace"}, got


def test_the_sdk_sets_up_nothing_for_tracing_without_traceparent():
    """The deferral of ``pulumi.runtime._instrumentation`` rests on the SDK's import of it doing nothing without
    ``TRACEPARENT`` (pulumi 3.272.0 pulumi/runtime/_instrumentation.py ``_initialize_tracing``: ``if not
    traceparent: return``). Checked on the SDK as published, no stand-in: a version that sets up anything there
    (a tracer provider, a context) fails this before a preview would silently skip it."""
    got = _run("""
        import json, sys
        from opentelemetry import context, trace
        before = (type(trace.get_tracer_provider()).__name__, context.get_current())
        import pulumi
        from pulumi.runtime import _instrumentation as inst
        after = (type(trace.get_tracer_provider()).__name__, context.get_current())
        print(json.dumps({"same": before == after, "provider": inst._tracer_provider is None,
                          "root": inst._root_context is None, "offline": [n for n in sys.modules
                                                                         if n.split(".")[0] == "offline"]}))
    """)
    assert got == {"same": True, "provider": True, "root": True, "offline": []}, got


def test_the_policy_pack_as_crossguard_runs_it_loads_the_sdk_whole():
    """``pulumi preview --policy-pack policies`` runs policies/__main__.py (PulumiPolicy.yaml, runtime python): it
    must not import the offline engine, so the SDK's modules are the published ones, loaded by ``import pulumi``.
    ``PolicyPack`` is replaced by a recorder (building it starts the analyzer's gRPC server and blocks)."""
    got = _run("""
        import json, runpy, sys, types
        import pulumi_policy
        built = []
        pulumi_policy.PolicyPack = lambda **kw: built.append(sorted(kw))
        runpy.run_path("policies/__main__.py", run_name="__main__")
        print(json.dumps({
            "built": built,
            "offline": sorted(n for n in sys.modules if n.split(".")[0] == "offline"),
            "sdk": {n: type(sys.modules[n]) is types.ModuleType for n in
                    ("pulumi.automation", "pulumi.dynamic", "pulumi.runtime._instrumentation")},
        }))
    """)
    assert got["built"] and got["offline"] == [], got
    assert all(got["sdk"].values()), got["sdk"]
