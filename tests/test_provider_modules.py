"""infra/provider_modules.py: the program loads only the provider modules in its table, and a name
the table lacks still works (the whole subpackage, recorded as a miss).

Each case runs in a fresh interpreter: in this one, other tests may have imported the providers
whole already, which leaves the stand-ins out and would make "no miss" true for nothing.
The program renders under the offline engine (Pulumi mocks; no GCP, no Pulumi engine).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import FIXTURE_PRELUDE

ROOT = Path(__file__).resolve().parents[1]


# The tests' own stacks in the fresh interpreter too.
PRELUDE = FIXTURE_PRELUDE


def _run(code: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_shipped_stacks_render_without_a_miss_and_load_only_the_table():
    result = _run(
        """
        import json, sys
        from offline import engine
        for stack in ("prod", "dev"):
            engine.render(stack)
        from infra import provider_modules as pm
        light = sorted(n for n, m in sys.modules.items() if isinstance(m, pm.LightPackage))
        loaded = sorted(n for n in sys.modules if n.startswith(("pulumi_gcp.", "pulumi_kubernetes.")))
        print(json.dumps({"misses": pm.MISSES, "light": light, "loaded": loaded}))
        """
    )
    assert result["misses"] == [], (
        f"names missing from infra/provider_modules.py MODULES: {result['misses']} (add their modules to the table)"
    )
    assert {"pulumi_gcp.compute", "pulumi_gcp.container", "pulumi_kubernetes.core.v1"} <= set(result["light"])
    # Only table modules (and what they import: _inputs, outputs, enums) were loaded, not whole packages.
    assert "pulumi_gcp.compute.instance" not in result["loaded"]
    assert "pulumi_kubernetes.core.v1.Pod" not in result["loaded"]


def test_every_table_module_exists_in_the_installed_providers():
    result = _run(
        """
        import importlib.util, json
        from infra import provider_modules as pm
        names = [f"{p}.{m}" for p, mods in pm.MODULES.items() for m in mods]
        absent = [n for n in names if importlib.util.find_spec(n) is None]
        absent += [p for p in pm.MODULES if importlib.util.find_spec(p) is None]
        print(json.dumps({"absent": absent}))
        """
    )
    assert result["absent"] == [], f"a provider upgrade removed modules the table lists: {result['absent']}"


def test_a_name_outside_the_table_falls_back_to_the_whole_subpackage():
    result = _run(
        """
        import json, inspect
        from infra import provider_modules as pm
        import pulumi_gcp as gcp
        import pulumi_kubernetes as k8s
        assert isinstance(gcp.compute, pm.LightPackage)
        network = gcp.compute.Network  # in the table: no miss
        instance = gcp.compute.Instance  # not in the table: the whole compute package
        from pulumi_gcp.compute.instance import Instance
        pod = k8s.core.v1.Pod  # a module named like its class: the class, as the real package gives
        topic = gcp.dns.ManagedZone  # a package the table does not list at all
        from pulumi_gcp.dns.managed_zone import ManagedZone as Topic
        deployment = k8s.apps.v1.Deployment  # ... nor its version package
        from pulumi_kubernetes.apps.v1.Deployment import Deployment
        try:
            gcp.container.NoSuchThing  # not in the real package either: AttributeError, as there
            missing = "no error"
        except AttributeError as e:
            missing = str(e)
        print(json.dumps({
            "misses": pm.MISSES,
            "instance_is_real": instance is Instance,
            "network_kept": gcp.compute.Network is network,
            "pod_is_class": inspect.isclass(pod) and pod.__name__ == "Pod",
            "unlisted_are_real": topic is Topic and deployment is Deployment,
            "firewall_policy": gcp.compute.FirewallPolicy.__module__,
            "missing": missing,
        }))
        """
    )
    assert result["instance_is_real"] and result["network_kept"] and result["pod_is_class"]
    assert result["unlisted_are_real"]
    assert result["firewall_policy"] == "pulumi_gcp.compute.firewall_policy"  # the whole package is there now
    assert result["misses"] == [
        ["pulumi_gcp.compute", "Instance"],
        ["pulumi_kubernetes.core.v1", "Pod"],
        ["pulumi_gcp.dns", "ManagedZone"],
        ["pulumi_kubernetes.apps.v1", "Deployment"],
        ["pulumi_gcp.container", "NoSuchThing"],
    ]
    assert "has no attribute 'NoSuchThing'" in result["missing"]


def test_a_provider_already_imported_is_left_whole():
    result = _run(
        """
        import json, sys
        import pulumi_gcp
        from infra import provider_modules as pm
        print(json.dumps({
            "again": pm.install(),
            "gcp_light": isinstance(sys.modules.get("pulumi_gcp.compute"), pm.LightPackage),
            "k8s_light": isinstance(sys.modules.get("pulumi_kubernetes.core.v1"), pm.LightPackage),
            "network": pulumi_gcp.compute.Network.__module__,
        }))
        """
    )
    assert result == {"again": [], "gcp_light": False, "k8s_light": True, "network": "pulumi_gcp.compute.network"}


_RENDER_ALL = """
    import json, sys
    from offline import engine
    from infra import provider_modules as pm
    out = {}
    for stack in ("prod", "dev"):
        r = engine.render(stack)
        out[stack] = {"resources": [x.to_json() for x in r.resources], "outputs": r.outputs}
    print(json.dumps({"render": out, "misses": pm.MISSES, "sliced": pm.SLICED, "worth": pm.WORTH_SLICING},
                     sort_keys=True, default=str))
"""


def test_sliced_type_modules_render_exactly_what_the_whole_modules_render(monkeypatch):
    """The slices (only the classes the listed resources name) change nothing in the plan:
    every resource's inputs and the outputs are the same as with the real modules loaded whole."""
    sliced = _run(_RENDER_ALL)
    monkeypatch.setenv("SLICECTL_WHOLE_TYPE_MODULES", "1")
    whole = _run(_RENDER_ALL)
    assert sliced["misses"] == [] and whole["misses"] == []
    assert whole["sliced"] == {}
    # compute (4.7 MB of types each) is cut to a small part; container's Cluster names most of its own.
    for module in ("pulumi_gcp.compute._inputs", "pulumi_gcp.compute.outputs"):
        kept, total = sliced["sliced"][module]
        assert 0 < kept < total / 10, (module, kept, total)
    assert all(kept <= total * sliced["worth"] for kept, total in sliced["sliced"].values())
    assert "pulumi_gcp.container._inputs" not in sliced["sliced"]  # Cluster needs most of it: loaded whole
    assert sliced["render"] == whole["render"]


def test_a_slice_completes_itself_for_a_name_or_a_module_outside_it():
    result = _run(
        """
        import json, sys
        from infra import provider_modules as pm
        import pulumi_gcp as gcp
        network = gcp.compute.Network  # the table's: compute's type modules are sliced now
        inputs = sys.modules["pulumi_gcp.compute._inputs"]
        before = len(inputs.__all__)
        cls = inputs.InstanceBootDiskArgs  # a class outside the slice: the whole module
        after = len(inputs.__all__)
        gcp.storage.Bucket  # sliced too
        from pulumi_gcp.storage.bucket import Bucket  # listed: stays sliced
        still = "pulumi_gcp.storage._inputs" in pm.SLICED
        from pulumi_gcp.storage.transfer_job import TransferJob  # not listed: whole first
        print(json.dumps({
            "before": before, "after": after, "cls": cls.__name__, "misses": pm.MISSES, "still": still,
            "storage_whole": "pulumi_gcp.storage._inputs" not in pm.SLICED,
            "transfer_args": hasattr(sys.modules["pulumi_gcp.storage._inputs"], "TransferJobScheduleArgs"),
        }))
        """
    )
    assert result["before"] < result["after"] and result["cls"] == "InstanceBootDiskArgs"
    assert result["still"] and result["storage_whole"] and result["transfer_args"]
    assert result["misses"] == [["pulumi_gcp.compute._inputs", "InstanceBootDiskArgs"],
                                ["pulumi_gcp.storage", "transfer_job"]]
