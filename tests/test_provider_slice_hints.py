"""The provider slices hold every class the Pulumi SDK will evaluate: for each class a slice keeps and each resource
and function result of the table's modules, the SDK's own annotation readers (``pulumi/_types.py``:
``_raw_return_hints``, which ``input_type_types``/``output_type_types`` and ``input_type_to_dict``'s callers use,
and ``resource_types``) resolve every getter's annotation against the module's globals, as a deploy would, with no
NameError and no slice completed. A class named only in a docstring or only as a ``TypedDict`` twin is left out; a
name the SDK needs must not be. Run in a fresh interpreter (in this one the providers may be whole already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_EVALUATE = """
    import importlib, inspect, json, sys
    from offline import provider_modules as pm
    pm.install()
    import pulumi
    from pulumi import _types

    errors, evaluated = [], 0
    def evaluate(where, cls):
        global evaluated
        try:
            if _types.is_input_type(cls) or _types.is_output_type(cls):
                _types._raw_return_hints(cls)
            elif issubclass(cls, pulumi.Resource):
                _types.resource_types(cls)
            else:
                return
            evaluated += 1
        except Exception as e:  # the failure is the finding: which class, which name
            errors.append([where, cls.__name__, repr(e)[:300]])

    for package, modules in pm.MODULES.items():
        importlib.import_module(package)._light_load()  # the table's modules, type modules sliced
        for name in modules:
            module = sys.modules.get(f"{package}.{name}")
            for export in getattr(module, "__all__", ()):
                if inspect.isclass(cls := module.__dict__.get(export)):
                    evaluate(module.__name__, cls)
    for name in list(pm.SLICED):
        for export in sys.modules[name].__all__:
            evaluate(name, sys.modules[name].__dict__[export])
    print(json.dumps({"errors": errors, "evaluated": evaluated, "misses": pm.MISSES, "sliced": sorted(pm.SLICED)}))
"""


def test_the_sdk_resolves_every_annotation_of_every_sliced_class_and_listed_resource(tmp_path):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_EVALUATE)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "SLICECTL_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert result["misses"] == []  # no slice completed itself along the way: the slices alone answered
    assert {"pulumi_gcp.compute._inputs", "pulumi_gcp.container._inputs",
            "pulumi_kubernetes.core.v1.outputs"} <= set(result["sliced"])
    assert result["evaluated"] > 1000
