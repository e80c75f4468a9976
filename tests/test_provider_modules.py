"""offline/provider_modules.py: under the offline engine the program loads only the provider modules in its
table, and a name the table lacks still works (the whole subpackage, recorded as a miss); under Pulumi's own
engine (``pulumi up``) the program imports the providers as published.

Each case runs in a fresh interpreter: in this one, other tests may have imported the providers
whole already, which leaves the stand-ins out and would make "no miss" true for nothing.
The program renders under the offline engine (Pulumi mocks; no GCP, no Pulumi engine).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
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


@pytest.fixture(scope="module")
def sliced() -> dict:
    """Every stack rendered in a fresh interpreter under the offline engine (slices on), with what it loaded: one
    process for the tests below that read a render with the stand-ins (``_RENDER_ALL``)."""
    return _run(_RENDER_ALL)


def test_shipped_stacks_render_without_a_miss_and_load_only_the_table(sliced):
    result = sliced
    assert result["misses"] == [], (
        f"names missing from offline/provider_modules.py MODULES: {result['misses']} (add their modules to the table)"
    )
    assert {"pulumi_gcp.compute", "pulumi_gcp.container", "pulumi_kubernetes.core.v1"} <= set(result["light"])
    # Only table modules (and what they import: _inputs, outputs, enums) were loaded, not whole packages.
    assert "pulumi_gcp.compute.instance" not in result["loaded"]
    assert "pulumi_kubernetes.core.v1.Pod" not in result["loaded"]


def test_every_table_module_exists_in_the_installed_providers():
    """Each module the table lists is a file of the installed provider (found on disk: importing a listed package to
    ask ``find_spec`` would run its real ``__init__``, all of its modules)."""
    from offline import provider_modules as pm

    def exists(name: str) -> bool:
        top, *rest = name.split(".")
        (root,) = importlib.util.find_spec(top).submodule_search_locations  # a top-level find_spec imports nothing
        path = Path(root, *rest)
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()

    names = [f"{p}.{m}" for p, mods in pm.MODULES.items() for m in mods]
    absent = [n for n in [*pm.MODULES, *names] if not exists(n)]
    assert absent == [], f"a provider upgrade removed modules the table lists: {absent}"


def test_a_name_outside_the_table_falls_back_to_the_whole_subpackage():
    result = _run(
        """
        import json, inspect
        from offline import provider_modules as pm
        pm.install()  # as the offline engine does, before the providers
        import pulumi_gcp as gcp
        import pulumi_kubernetes as k8s
        assert isinstance(gcp.kms, pm.LightPackage)
        network = gcp.kms.KeyRing  # in the table: no miss
        instance = gcp.kms.EkmConnection  # not in the table: the whole kms package (not compute's 289 modules)
        from pulumi_gcp.kms.ekm_connection import EkmConnection as Instance
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
            "network_kept": gcp.kms.KeyRing is network,
            "pod_is_class": inspect.isclass(pod) and pod.__name__ == "Pod",
            "unlisted_are_real": topic is Topic and deployment is Deployment,
            "firewall_policy": gcp.kms.AutokeyConfig.__module__,
            "missing": missing,
        }))
        """
    )
    assert result["instance_is_real"] and result["network_kept"] and result["pod_is_class"]
    assert result["unlisted_are_real"]
    assert result["firewall_policy"] == "pulumi_gcp.kms.autokey_config"  # the whole package is there now
    assert result["misses"] == [
        ["pulumi_gcp.kms", "EkmConnection"],
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
        from offline import provider_modules as pm
        first = pm.install()
        print(json.dumps({
            "first": first,
            "again": pm.install(),
            "topic": pulumi_gcp.pubsub.Topic.__module__,  # pubsub, not compute's 289 modules: the same question
            "gcp_light": isinstance(sys.modules.get("pulumi_gcp.pubsub"), pm.LightPackage),
            "k8s_light": isinstance(sys.modules.get("pulumi_kubernetes.core.v1"), pm.LightPackage),
        }))
        """
    )
    assert result == {"first": ["pulumi_kubernetes"], "again": [], "gcp_light": False, "k8s_light": True,
                      "topic": "pulumi_gcp.pubsub.topic"}


_RENDER_ALL = """
    import json, sys
    from offline import engine
    from offline import provider_modules as pm
    out = {}
    for stack in ("prod", "dev"):
        r = engine.render(stack)
        out[stack] = {"resources": [x.to_json() for x in r.resources], "outputs": r.outputs}
    print(json.dumps({"render": out, "misses": pm.MISSES, "sliced": pm.SLICED, "worth": pm.WORTH_SLICING,
                      "light": sorted(n for n, m in sys.modules.items() if isinstance(m, pm.LightPackage)),
                      "loaded": sorted(n for n in sys.modules if n.startswith(("pulumi_gcp.", "pulumi_kubernetes.")))},
                     sort_keys=True, default=str))
"""


def test_sliced_type_modules_render_exactly_what_the_whole_modules_render(sliced, monkeypatch):
    """The slices (only the classes the listed resources name) change nothing in the plan:
    every resource's inputs and the outputs are the same as with the real modules loaded whole."""
    monkeypatch.setenv("SLICECTL_WHOLE_TYPE_MODULES", "1")
    whole = _run(_RENDER_ALL)
    assert sliced["misses"] == [] and whole["misses"] == []
    assert whole["sliced"] == {}
    # compute (4.7 MB of types each) is cut to a small part; container's Cluster names most of its own. core/v1's
    # outputs too: its resources' docstrings name pods and containers, and a docstring is not a use.
    for module in ("pulumi_gcp.compute._inputs", "pulumi_gcp.compute.outputs", "pulumi_kubernetes.core.v1.outputs"):
        kept, total = sliced["sliced"][module]
        assert 0 < kept < total / 10, (module, kept, total)
    assert all(kept <= total * sliced["worth"] for kept, total in sliced["sliced"].values())
    # Cluster needs most of container's input classes, but none of their TypedDict twins: sliced to under half.
    kept, total = sliced["sliced"]["pulumi_gcp.container._inputs"]
    assert 0 < kept < total / 2, (kept, total)
    assert "pulumi_gcp.container.outputs" not in sliced["sliced"]  # Cluster needs half of it: loaded whole
    assert sliced["render"] == whole["render"]


def test_a_slice_keeps_what_code_and_annotations_name_not_what_a_docstring_names():
    from offline import provider_modules as pm

    source = textwrap.dedent('''\
        __all__ = [
            'Root', 'Used', 'Nested', 'OnlyInProse',
        ]

        @pulumi.output_type
        class Root(dict):
            """A Root. See `OnlyInProse` and a "quoted" word; an escaped \\""" stays inside."""
            def __init__(__self__, *, used: Optional['outputs.Used'] = None):
                pulumi.set(__self__, "used", used)

        class Used(dict):
            """Holds a Nested."""
            x: Nested

        class Nested(dict):
            pass

        class OnlyInProse(dict):
            pass
        ''')
    sliced, kept = pm.slice_source(source, {"Root"})
    assert kept == ["Root", "Used", "Nested"]
    assert "class OnlyInProse" not in sliced and "__all__ = ['Root', 'Used', 'Nested']" in sliced


def test_a_slice_keeps_no_typeddict_and_a_program_naming_one_gets_the_whole_module():
    """A TypedDict twin (``...ArgsDict``) is left out of a slice, even where a resource's annotations name it; asked
    for by name, the slice completes itself from the real module and records the miss."""
    from offline import provider_modules as pm

    source = textwrap.dedent('''\
        __all__ = [
            'RootArgs', 'RootArgsDict',
        ]

        class RootArgsDict(TypedDict):
            x: NotRequired[pulumi.Input[Optional['RootArgsDict']]]

        @pulumi.input_type
        class RootArgs:
            def __init__(__self__, *, x: pulumi.Input[Optional['RootArgs']] = None):
                pulumi.set(__self__, "x", x)
        ''')
    assert pm.slice_source(source, {"RootArgs", "RootArgsDict"})[1] == ["RootArgs"]
    result = _run(
        """
        import json
        from offline import provider_modules as pm
        pm.install()
        import pulumi_gcp as gcp
        gcp.container.Cluster  # the package loaded, its _inputs sliced
        before = "pulumi_gcp.container._inputs" in pm.SLICED
        typed = gcp.container.ClusterAddonsConfigArgsDict
        print(json.dumps({"before": before, "typed": typed.__name__, "required": sorted(typed.__required_keys__),
                          "misses": pm.MISSES, "after": "pulumi_gcp.container._inputs" in pm.SLICED}))
        """
    )
    assert result["before"] and not result["after"]
    assert result["typed"] == "ClusterAddonsConfigArgsDict" and result["required"] == []  # NotRequired, as published
    assert ["pulumi_gcp.container", "ClusterAddonsConfigArgsDict"] in result["misses"]


def test_a_slice_completes_itself_for_a_name_or_a_module_outside_it():
    result = _run(
        """
        import json, sys
        from offline import provider_modules as pm
        pm.install()  # as the offline engine does, before the providers
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


# The program as Pulumi's language host runs it (pulumi/pulumi sdk/python/cmd/pulumi-language-python-exec:
# ``pulumi.runtime.configure(settings)``, then ``runpy.run_path(args.PROGRAM, run_name="__main__")`` in the
# project directory), with the engine's gRPC monitor replaced by the SDK's own ``set_mocks``, as Pulumi's
# unit-testing guide does: nothing of offline/ is imported.
_AS_PULUMI_RUNS_IT = """
    import importlib.metadata, json, os, runpy, sys
    import pulumi, pulumi.runtime
    from stackspec import spec as stack_spec

    stack = sys.argv[1]
    config, _ = stack_spec.stack_config(stack)

    class Mocks(pulumi.runtime.Mocks):
        # Shaped as GCP answers: a project's number, a service account's email, the rest echoed back.
        def new_resource(self, args):
            state = dict(args.inputs)
            if args.typ == "gcp:serviceaccount/account:Account":
                state["email"] = f"{args.inputs['accountId']}@project.iam.gserviceaccount.com"
            return [args.name + "-id", state]

        def call(self, args):
            if args.token == "gcp:organizations/getProject:getProject":
                return {"projectId": args.args.get("projectId"), "number": "123456789012"}
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="tpu-multislice", stack=stack, preview=True)
    pulumi.runtime.set_all_config(config)
    pulumi.runtime.test(lambda: runpy.run_path("__main__.py", run_name="__main__"))()

    providers = {}
    for dist in ("pulumi_gcp", "pulumi_kubernetes"):
        files = importlib.metadata.distribution(dist).files
        providers[dist] = {os.path.realpath(f.locate()) for f in files if str(f).endswith(".py")}
    loaded = {n: m for n, m in list(sys.modules.items()) if n.split(".")[0] in providers}
    print(json.dumps({
        "offline": sorted(n for n in sys.modules if n == "offline" or n.startswith("offline.")),
        # Module objects of Python and of the Pulumi SDK (the providers' lazy_import makes pulumi._utils._LazyModule).
        "module_types": sorted({f"{type(m).__module__}.{type(m).__qualname__}" for m in loaded.values()}),
        "not_published_files": sorted(n for n, m in loaded.items()
                                      if os.path.realpath(m.__file__) not in providers[n.split(".")[0]]),
        "finders": [getattr(f, "__name__", type(f).__name__) for f in sys.meta_path],
        "compute_instance": "pulumi_gcp.compute.instance" in sys.modules,
        "k8s_pod": "pulumi_kubernetes.core.v1.Pod" in sys.modules,
        "loaded": len(loaded),
        "cache": os.listdir(os.environ["SLICECTL_CACHE_DIR"]),
    }))
"""


def test_under_pulumi_the_program_imports_the_providers_as_published(tmp_path):
    """The deploy program (``__main__.py`` run by Pulumi, not through offline/) imports ``pulumi_gcp`` and
    ``pulumi_kubernetes`` as their wheels ship them: plain modules from the published files, each package's own
    ``__init__`` (which imports all of its modules), no finder of ours, no bytecode cut from them."""
    stack = min(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
    cache = tmp_path / "cache"
    cache.mkdir()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_AS_PULUMI_RUNS_IT), stack], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SLICECTL_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["offline"] == [], "the deploy program imported the offline engine's modules"
    assert result["loaded"] > 100
    assert set(result["module_types"]) <= {"builtins.module", "pulumi._utils._LazyModule"}, result["module_types"]
    assert result["not_published_files"] == []
    assert "_OutsideTheTable" not in result["finders"]
    # The published __init__s ran: they import every module of the package, used or not.
    assert result["compute_instance"] and result["k8s_pod"]
    assert result["cache"] == []
