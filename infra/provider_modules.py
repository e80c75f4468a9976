"""Import only the pulumi_gcp and pulumi_kubernetes modules the program uses.

``pulumi_gcp.compute``'s ``__init__`` imports all ~290 compute modules, and each builds
dozens of typed classes: importing the packages whole is most of a ``slicectl preview``.
:func:`install` puts a light stand-in for each provider subpackage into ``sys.modules``
before the provider is imported. The provider's own top level stays real
(its ``lazy_import`` of the subpackage returns the stand-in), so ``import pulumi_gcp as gcp;
gcp.compute.NetworkArgs`` works unchanged in infra/ and workloads/, under the offline engine
and under ``pulumi up``. On first attribute access a stand-in imports the modules its entry
(:data:`MODULES`) lists and exports their ``__all__``, as the real ``__init__`` would. A name
(or a whole subpackage) the table lacks
never breaks the program: the stand-in runs the real package ``__init__`` into itself and
the miss is kept in :data:`MISSES` (tests assert there are none for the shipped stacks).

Import this module before ``pulumi_gcp``/``pulumi_kubernetes``; a provider already imported
is left alone.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import os
import sys
import threading
import types

# The one table: subpackage -> the modules of it the program uses (``_inputs`` holds the nested
# ``...Args`` types; resource modules import it and ``outputs`` anyway). Packages in between
# (``pulumi_kubernetes.core``) become stand-ins with no modules of their own.
# Entries beyond today's program (Artifact Registry, monitoring, KMS, IAM, Helm, NetworkPolicy,
# Namespace) are here up front so new resources rarely fall back to the whole package; a listed
# module costs nothing until its package is used, then a few ms.
MODULES: dict[str, tuple[str, ...]] = {
    "pulumi_gcp.artifactregistry": ("_inputs", "repository", "repository_iam_member"),
    "pulumi_gcp.compute": ("_inputs", "network", "subnetwork"),
    "pulumi_gcp.container": ("_inputs", "cluster", "node_pool"),
    "pulumi_gcp.iam": ("_inputs", "workload_identity_pool", "workload_identity_pool_provider"),
    "pulumi_gcp.kms": ("_inputs", "key_ring", "crypto_key", "crypto_key_iam_member", "key_ring_iam_member"),
    "pulumi_gcp.monitoring": ("_inputs", "alert_policy", "dashboard", "notification_channel"),
    "pulumi_gcp.organizations": ("get_project", "get_client_config"),
    "pulumi_gcp.projects": ("_inputs", "iam_member", "service", "service_identity"),
    "pulumi_gcp.serviceaccount": ("_inputs", "account", "iam_member"),
    "pulumi_gcp.storage": ("_inputs", "bucket", "bucket_iam_member", "get_project_service_account"),
    "pulumi_kubernetes.apiextensions": ("CustomResource",),
    "pulumi_kubernetes.core.v1": ("_enums", "ConfigMap", "Namespace", "ServiceAccount"),
    "pulumi_kubernetes.helm.v4": ("_inputs", "Chart"),
    "pulumi_gcp.logging": ("_inputs", "metric"),
    "pulumi_kubernetes.meta.v1": ("_inputs",),
    "pulumi_kubernetes.networking.v1": ("_inputs", "NetworkPolicy"),
    "pulumi_kubernetes.resource.v1": ("_inputs", "ResourceClaimTemplate"),
}

# (subpackage, name) for every name that was not in the table and loaded the whole subpackage.
MISSES: list[tuple[str, str]] = []

_lock = threading.RLock()


class LightPackage(types.ModuleType):
    """A provider subpackage holding only the modules :data:`MODULES` lists for it."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name != "__all__":
            raise AttributeError(name)  # dunder probes (copy, inspect, pickle) are not names
        package = self.__name__
        with _lock:
            state = self.__dict__
            if not state.get("_light_loaded") and not state.get("_light_loading"):
                self._light_load()
                if name in state:
                    return state[name]
            # A submodule (``outputs``, ``v1``) imports as it would anyway, unless it exports its own
            # name (k8s ``Pod.py`` holds ``Pod``, gcp ``get_project.py`` ``get_project``): the real
            # package hands out the export there, so that is a name the table lacks.
            if name != "__all__":
                qualified = f"{package}.{name}"
                if qualified not in sys.modules:
                    _stand_in(qualified, os.path.join(self.__path__[0], name))  # a subpackage: ours too
                if qualified in sys.modules or importlib.util.find_spec(qualified) is not None:
                    module = importlib.import_module(qualified)
                    if isinstance(module, LightPackage) or name not in getattr(module, "__all__", ()):
                        setattr(self, name, module)
                        return module
            if state.get("_light_loading"):
                raise AttributeError(name)  # asked mid-load (``from . import x``): not there yet
            if not state.get("_light_full"):
                # Not in the table: the whole subpackage, as its real __init__ builds it.
                MISSES.append((package, name))
                state["_light_full"] = True
                with _long_lived():
                    exec(self.__spec__.loader.get_code(package), state)  # noqa: S102 (the package's own code)
                if name in state:
                    return state[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def _light_load(self) -> None:
        """The table's modules and their exports, in order, as the real ``from .x import *`` lines."""
        state = self.__dict__
        state["_light_loading"] = True
        try:
            with _long_lived():
                for module_name in MODULES.get(self.__name__, ()):
                    qualified = f"{self.__name__}.{module_name}"
                    try:
                        module = importlib.import_module(qualified)
                    except ModuleNotFoundError as e:
                        if e.name != qualified:
                            raise
                        MISSES.append((self.__name__, module_name))  # gone in this provider version
                        continue
                    # Exports replace a same-named submodule (k8s: ``ServiceAccount`` the class, not the file).
                    state.update({n: getattr(module, n) for n in getattr(module, "__all__", ())})
        finally:
            state["_light_loading"] = False
        state["_light_loaded"] = True


@contextlib.contextmanager
def _long_lived():
    """No collection while provider classes are built; then none over them again.

    They are tens of thousands of typing objects that live as long as the process: the
    collector's passes over them (and the interpreter's final ones at exit, most of a second
    here) find nothing to free.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
        gc.freeze()


def install(providers: tuple[str, ...] = ("pulumi_gcp", "pulumi_kubernetes")) -> list[str]:
    """Put the stand-ins in ``sys.modules`` for each provider not imported yet; returns those done.

    Every subpackage gets one, listed or not, so a package the table lacks is a recorded miss too.
    """
    done = []
    with _lock:
        for provider in providers:
            listed = [p for p in MODULES if p.split(".", 1)[0] == provider]
            # The packages between the top level and a listed one too, or the real ``core`` would
            # import its whole ``v1`` instead of ours.
            nested = {".".join(p.split(".")[:i]) for p in listed for i in range(3, p.count(".") + 2)}
            if provider in sys.modules or any(p in sys.modules for p in listed):
                continue  # imported already, or stand-ins in place: leave it as it is
            top = importlib.util.find_spec(provider)  # a top-level find_spec imports nothing
            if top is None or not top.submodule_search_locations:
                continue
            (root,) = top.submodule_search_locations
            # Found by path: find_spec of a subpackage would import the real top level first.
            with os.scandir(root) as entries:
                subpackages = [e.name for e in entries if e.is_dir() and e.name.isidentifier()]
            for name in subpackages:
                _stand_in(f"{provider}.{name}", os.path.join(root, name))  # none where no __init__.py
            for package in sorted(nested):
                parent, _, name = package.rpartition(".")
                if parent in sys.modules:
                    _stand_in(package, os.path.join(sys.modules[parent].__path__[0], name))
            done.append(provider)
    return done


def _stand_in(package: str, directory: str) -> LightPackage | None:
    """A stand-in for the package in ``directory`` (none if it is not one), in ``sys.modules`` and on its parent."""
    init = os.path.join(directory, "__init__.py")
    if not os.path.isfile(init):
        return None
    spec = importlib.util.spec_from_file_location(package, init, submodule_search_locations=[directory])
    module = LightPackage(package)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__path__ = [directory]
    module.__package__ = package
    sys.modules[package] = module
    parent, _, name = package.rpartition(".")
    if isinstance(sys.modules.get(parent), LightPackage):
        setattr(sys.modules[parent], name, module)
    return module


install()
