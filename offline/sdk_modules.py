"""Defer the Pulumi SDK's modules a preview never uses until something uses them: a preview's shortcut, offline only.

``import pulumi`` runs ``from . import runtime, dynamic, policy, automation`` and, for its side effects,
``from .runtime import _instrumentation``. Under the offline engine nothing calls the Automation API
(``pulumi.automation``: workspaces, the CLI wrapper, its gRPC server), no dynamic provider is declared
(``pulumi.dynamic``, which imports ``dill``), and ``_instrumentation`` only sets up OpenTelemetry tracing when
``TRACEPARENT`` is set (``pulumi/runtime/_instrumentation.py``, ``_initialize_tracing``): together about a third
of ``import pulumi`` (``python -X importtime``: 32, 11 and 32 ms of 215 on this project's machine). grpc (and
``grpc.aio``, which ``pulumi/runtime/_callbacks.py`` takes by ``from grpc import aio``) is imported by the SDK's
runtime modules but only used to talk to a real engine, or when an exception passes an ``except grpc.RpcError``
(``offline/pulumi_runtime.py`` raises none through one): deferred too.

:func:`install` puts a :class:`Deferred` stand-in for each into ``sys.modules`` before ``pulumi`` is imported.
Its first use of a name (``pulumi.automation.LocalWorkspace``) runs the module's own code into the stand-in, which
then is the module (the same object everyone holds), so nothing can tell but the time it was loaded. With
``TRACEPARENT`` set, ``_instrumentation`` is imported as Pulumi does (its side effect is wanted). Under a real
``pulumi up`` nothing imports this module (``tests/test_provider_modules.py`` checks the deploy program imports no
``offline`` module); ``tests/test_sdk_modules.py`` checks the deferral and the modules' loading on use.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import types

# The modules ``pulumi/__init__.py`` imports that a preview does not use (see the module docstring).
DEFERRED = ("pulumi.automation", "pulumi.dynamic", "pulumi.runtime._instrumentation", "grpc", "grpc.aio")

_lock = threading.RLock()


class Deferred(types.ModuleType):
    """A module whose code runs into it at the first name asked of it."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name not in ("__all__", "__path__"):
            raise AttributeError(name)  # dunder probes (the import system, copy, inspect) are not uses
        with _lock:
            here = self.__dict__
            if name in here:
                return here[name]  # another thread loaded the module while this one waited
            child = sys.modules.get(f"{self.__name__}.{name}")
            if isinstance(child, Deferred) and not here.get("_deferred_loaded"):
                return child  # ``from grpc import aio``: the deferred submodule, its parent still unloaded
            if not here.get("_deferred_loaded"):
                here["_deferred_loaded"] = True
                try:
                    exec(self.__spec__.loader.get_code(self.__name__), here)  # noqa: S102 (the SDK's own code)
                except BaseException:
                    # As a failed import: the next use runs the code again and raises the same error, never a
                    # bare AttributeError that hides it.
                    here["_deferred_loaded"] = False
                    raise
                if name in here:
                    return here[name]
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


def install(modules: tuple[str, ...] = DEFERRED) -> list[str]:
    """Stand-ins for ``modules`` not imported yet (``_instrumentation`` only without ``TRACEPARENT``);
    returns those put in place. Call before ``pulumi`` is imported; an imported SDK is left alone."""
    done = []
    with _lock:
        if "pulumi" in sys.modules:
            return done
        top = importlib.util.find_spec("pulumi")  # a top-level find_spec imports nothing
        if top is None or not top.submodule_search_locations:
            return done
        (pulumi_root,) = top.submodule_search_locations
        for name in modules:
            if name in sys.modules or (name.endswith("._instrumentation") and os.environ.get("TRACEPARENT")):
                continue
            root, relative = pulumi_root, name.split(".")[1:]
            if not name.startswith("pulumi."):  # a package of its own (grpc): where it is installed
                top_name, *relative = name.split(".")
                found = importlib.util.find_spec(top_name)
                if found is None or not found.submodule_search_locations:
                    continue
                (root,) = found.submodule_search_locations
            package = os.path.join(root, *relative)
            is_package = os.path.isfile(os.path.join(package, "__init__.py"))
            origin = os.path.join(package, "__init__.py") if is_package else package + ".py"
            if not os.path.isfile(origin):
                continue  # another SDK layout: imported as Pulumi does
            spec = importlib.util.spec_from_file_location(
                name, origin, submodule_search_locations=[package] if is_package else None)
            module = Deferred(name)
            module.__spec__, module.__loader__, module.__file__ = spec, spec.loader, origin
            module.__package__ = name if is_package else name.rpartition(".")[0]
            if is_package:
                module.__path__ = [package]
            sys.modules[name] = module
            done.append(name)
    return done


def bind() -> None:
    """Each stand-in as its parent's attribute (``pulumi.runtime._instrumentation``), as an import would set it;
    call after ``import pulumi``."""
    for name, module in list(sys.modules.items()):
        if isinstance(module, Deferred):
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, module)
