"""Import only the pulumi_gcp and pulumi_kubernetes modules the program uses: a preview's shortcut, offline only.

The offline engine (``offline/engine.py``) calls :func:`install` before it runs the program; under a real
``pulumi up``/``pulumi preview`` nothing imports this module, and the program imports the providers as published
(``tests/test_provider_modules.py`` runs the program the way Pulumi's language host does and checks).

``pulumi_gcp.compute``'s ``__init__`` imports all ~290 compute modules, and each builds
dozens of typed classes: importing the packages whole is most of a ``slicectl preview``.
:func:`install` puts a light stand-in for each provider subpackage into ``sys.modules``
before the provider is imported. The provider's own top level stays real
(its ``lazy_import`` of the subpackage returns the stand-in), so ``import pulumi_gcp as gcp;
gcp.compute.NetworkArgs`` works unchanged in infra/ and workloads/ under the offline engine.
On first attribute access a stand-in imports the modules its entry
(:data:`MODULES`) lists and exports their ``__all__``, as the real ``__init__`` would. A name
(or a whole subpackage) the table lacks
never breaks the program: the stand-in runs the real package ``__init__`` into itself and
the miss is kept in :data:`MISSES` (tests assert there are none for the shipped stacks).

A listed package's ``_inputs`` and ``outputs`` modules (one class per nested type: 4.7 MB of
source each for ``compute``, most of a preview's time to build) are loaded sliced: only the
classes the listed resource modules name, and the classes those name, in turn (:func:`slice_source`;
about 1 in 70 for ``compute``). Anything that would need the rest (a name outside the slice, a
module of the package outside the table) first completes the slice from the real source, and
is recorded in :data:`MISSES` as well.

Call :func:`install` before ``pulumi_gcp``/``pulumi_kubernetes`` are imported; a provider already imported
is left alone. Importing this module changes nothing.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib
import importlib.util
import marshal
import os
import re
import stat
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
    "pulumi_gcp.artifactregistry": ("_inputs", "repository", "repository_iam_policy"),
    "pulumi_gcp.binaryauthorization": ("_inputs", "policy", "attestor", "attestor_iam_member"),
    "pulumi_gcp.containeranalysis": ("_inputs", "note", "note_iam_member"),
    "pulumi_gcp.compute": ("_inputs", "network", "subnetwork", "firewall", "router", "router_nat"),
    "pulumi_gcp.container": ("_inputs", "cluster", "node_pool"),
    "pulumi_gcp.iam": ("_inputs", "workload_identity_pool", "workload_identity_pool_provider"),
    "pulumi_gcp.kms": ("_inputs", "key_ring", "crypto_key", "crypto_key_iam_member", "key_ring_iam_member",
                       "get_kms_crypto_key_version"),
    "pulumi_gcp.logging": ("_inputs", "metric"),
    "pulumi_gcp.monitoring": ("_inputs", "alert_policy", "dashboard", "notification_channel"),
    "pulumi_gcp.organizations": ("_inputs", "get_project", "get_client_config", "get_iam_policy"),
    "pulumi_gcp.pubsub": ("_inputs", "topic"),
    "pulumi_gcp.projects": ("_inputs", "iam_member", "service", "service_identity"),
    "pulumi_gcp.serviceaccount": ("_inputs", "account", "iam_member"),
    "pulumi_gcp.storage": ("_inputs", "bucket", "bucket_iam_policy", "get_project_service_account"),
    "pulumi_kubernetes.admissionregistration.v1": ("_inputs", "ValidatingAdmissionPolicy",
                                                   "ValidatingAdmissionPolicyBinding"),
    "pulumi_kubernetes.apiextensions": ("CustomResource",),
    "pulumi_kubernetes.core.v1": ("_enums", "ConfigMap", "Namespace", "Secret", "ServiceAccount"),
    "pulumi_kubernetes.helm.v4": ("_inputs", "Chart"),
    "pulumi_kubernetes.meta.v1": ("_inputs",),
    "pulumi_kubernetes.networking.v1": ("_inputs", "NetworkPolicy"),
    "pulumi_kubernetes.rbac.v1": ("_inputs", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"),
    "pulumi_kubernetes.resource.v1": ("_inputs", "ResourceClaimTemplate"),
}

# (subpackage, name) for every name that was not in the table and loaded the whole subpackage.
MISSES: list[tuple[str, str]] = []

_lock = threading.RLock()


def _miss(package: str, name: str) -> None:
    if (package, name) not in MISSES:  # one name can be missed on two paths (its module, its class)
        MISSES.append((package, name))


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
                _miss(package, name)
                state["_light_full"] = True
                with _long_lived():
                    _complete_slices(package)
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
                _slice_type_modules(self)
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


# ---------------------------------------------------------------------------- sliced type modules

# The generated type modules: a header (imports, ``__all__``), then one top-level block per class
# (``@pulumi.input_type``/``@pulumi.output_type`` and the class, or a ``TypedDict`` class).
TYPE_MODULES = ("outputs", "_inputs")  # outputs first: ``from . import outputs`` finds the slice
_CLASS_START = re.compile(r"\n(?=@|class )")
_CLASS_NAME = re.compile(r"class (\w+)")
_WORDS = re.compile(r"[A-Za-z_]\w*")
# The generated docstrings (``"""..."""``): prose and examples naming other types (core/v1's ``Secret`` docstring
# names pods and containers), which nothing evaluates; a class named only there is not needed. Without them,
# core/v1's outputs slice keeps 9 of its 410 classes where it kept 195 (and so was loaded whole).
_DOCSTRING = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""')


# A ``TypedDict`` class (``ClusterAddonsConfigArgsDict``) is for a type checker: at run time nothing evaluates one (the
# SDK reads the input classes' property getters, ``pulumi/_types.py`` ``_raw_return_hints``; a resource's ``__init__``
# names one only inside a string, ``Union['...Args', '...ArgsDict', ...]``, which is never resolved), so a slice keeps
# none. A program that asks for one by name completes the slice (recorded in :data:`MISSES`). Half of a ``_inputs``
# module is these: without them ``container``'s, which its ``Cluster`` needs most of, is sliced too (334 of its
# 806 classes; 112 ms to 15 for the module, load 8).
_TYPED_DICT = re.compile(r"class (\w+)\(TypedDict\)")


def _names(code: str) -> set[str]:
    """The words of ``code`` outside its docstrings: every name a class's code or annotations could use."""
    return set(_WORDS.findall(_DOCSTRING.sub(" ", code)))


_ALL = re.compile(r"^__all__ = \[.*?^\]\n", re.M | re.S)

# A slice is compiled from source once, then its bytecode is cached (below); the real module's own
# bytecode loads faster than a slice keeping most of it. Counted against all the module's classes, its TypedDicts
# too: container's Cluster names 334 of the 806 in its _inputs (sliced), 334 of the 663 in its outputs (whole).
WORTH_SLICING = 0.45
# module -> (classes kept, classes in the real module), for the benchmark and the README.
SLICED: dict[str, tuple[int, int]] = {}


def _class_blocks(source: str) -> tuple[str, dict[str, str]]:
    """The header and ``{class name: its block}`` of a generated type module, in file order."""
    parts = _CLASS_START.split(source)
    header, blocks, decorators = parts[0] + "\n", {}, ""
    for part in parts[1:]:
        if part.startswith("@") and "\nclass " not in part:
            decorators += part + "\n"  # the split falls between a decorator and its class
            continue
        match = _CLASS_NAME.search(part)
        if match is None:  # a top-level statement this format does not have: keep the module whole
            raise ValueError(f"unexpected top-level block: {part[:60]!r}")
        blocks[match.group(1)] = decorators + part + "\n"
        decorators = ""
    return header, blocks


def slice_source(source: str, roots: set[str]) -> tuple[str, list[str]]:
    """``source`` (a generated type module) with only the classes in ``roots`` and every class
    they name outside their docstrings, transitively (names in annotations are strings: a word match finds them),
    but no ``TypedDict`` class (:data:`_TYPED_DICT`)."""
    header, blocks = _class_blocks(source)
    typed_dicts = set(_TYPED_DICT.findall(source))
    keep: set[str] = set()
    todo = [r for r in roots if r in blocks and r not in typed_dicts]
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo += [w for w in _names(blocks[name]) if w in blocks and w not in keep and w not in typed_dicts]
    kept = [n for n in blocks if n in keep]
    header, found = _ALL.subn(lambda _: f"__all__ = {kept!r}\n", header, count=1)
    if not found:
        raise ValueError("no __all__ list in the header")
    return header + "".join(blocks[n] for n in kept), kept


def _slice_type_modules(package: LightPackage) -> None:
    """Load the package's type modules sliced to what its listed resource modules name."""
    listed = [m for m in MODULES.get(package.__name__, ()) if not m.startswith("_") and m not in TYPE_MODULES]
    if not listed or os.environ.get("SLICECTL_WHOLE_TYPE_MODULES"):
        return  # a package of types only (meta/v1), or asked for the real modules: as they are
    directory = package.__path__[0]
    listed_paths = [p for p in (os.path.join(directory, m + ".py") for m in listed) if os.path.isfile(p)]
    roots: set[str] | None = None
    modules = []
    for module_name in TYPE_MODULES:
        qualified = f"{package.__name__}.{module_name}"
        path = os.path.join(directory, module_name + ".py")
        if qualified in sys.modules or not os.path.isfile(path):
            continue
        key = _cache_key(qualified, [path, *listed_paths])
        cached = _cache_read(key)
        if cached is None:
            if roots is None:
                roots = set()
                for listed_path in listed_paths:
                    with open(listed_path, encoding="utf-8") as f:
                        roots.update(_names(f.read()))
            cached = _slice_code(path, roots)
            _cache_write(key, cached)
        kept, total, code = cached
        if code is None:
            continue  # not the generated layout, or most of it needed: the real module, from its bytecode
        module = types.ModuleType(qualified)
        module.__file__ = path
        module.__package__ = package.__name__
        module.__spec__ = importlib.util.spec_from_file_location(qualified, path)
        module.__dict__["_light_slice"] = kept
        module.__dict__["__getattr__"] = _slice_getattr(module)
        modules.append((module, code, total))
        sys.modules[qualified] = module
        setattr(package, module_name, module)
    for module, code, total in modules:
        exec(code, module.__dict__)  # noqa: S102 (the provider's own code)
        SLICED[module.__name__] = (module.__dict__["_light_slice"], total)


def _slice_code(path: str, roots: set[str]) -> tuple[int, int, types.CodeType | None]:
    """(classes kept, classes in the module, the slice compiled; None where the real module is better)."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    try:
        sliced, kept = slice_source(source, roots)
    except ValueError:
        return 0, 0, None  # not the generated layout: the real module, whole
    total = len(_class_blocks(source)[1])
    if len(kept) > total * WORTH_SLICING:
        return len(kept), total, None  # most of it is needed anyway: the real module, from its bytecode, is quicker
    return len(kept), total, compile(sliced, path, "exec")


# A slice's bytecode, kept as Python keeps a module's (no source is read, split or compiled again): keyed by the
# interpreter, this file's content (a slice cut by other slicing code is not read, even where an install gives both
# files one size and mtime) and the provider files it was cut from (path, size, mtime), so an upgrade of either
# cuts a new one. ``SLICECTL_CACHE_DIR`` moves it (empty: none); unwritable, it is simply not kept.
# What is read is executed: only a directory and files this user owns and no one else may write are used (a shared
# home or cache on a CI runner, a cache dir another user made, is a trust boundary), and only an entry of the shape
# written here; anything else is ignored as if absent, never a traceback.
def _cache_dir() -> str | None:
    configured = os.environ.get("SLICECTL_CACHE_DIR")
    if configured is not None:
        return configured or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "slicectl", "provider-slices")


@functools.cache
def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _cache_key(qualified: str, paths: list[str]) -> str:
    parts = [sys.version, importlib.util.MAGIC_NUMBER.hex(), qualified, str(WORTH_SLICING), _digest(__file__)]
    for path in paths:
        st = os.stat(path)
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _private(st: os.stat_result) -> bool:
    """Owned by this user, writable by no one else."""
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _cache_read(key: str) -> tuple[int, int, types.CodeType | None] | None:
    directory = _cache_dir()
    if directory is None:
        return None
    try:
        if not _private(os.stat(directory)):
            return None
        fd = os.open(os.path.join(directory, key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, "rb") as f:
            if not _private(os.fstat(fd)):
                return None
            entry = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if (type(entry) is tuple and len(entry) == 3 and type(entry[0]) is int and type(entry[1]) is int
            and (entry[2] is None or type(entry[2]) is types.CodeType)):
        return entry
    return None  # not an entry this code wrote: cut the slice again


def _cache_write(key: str, entry: tuple[int, int, types.CodeType | None]) -> None:
    directory = _cache_dir()
    if directory is None:
        return
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.stat(directory)
        if st.st_uid != os.getuid():
            return  # another user's: what is written there could be replaced
        if not _private(st):  # ours, but open to others (umask 002): closed, and what it held while open dropped
            os.chmod(directory, stat.S_IMODE(st.st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))
            with os.scandir(directory) as entries:
                for held in entries:
                    if not held.is_dir(follow_symlinks=False):
                        os.unlink(held.path)
        tmp = os.path.join(directory, f"{key}.{os.getpid()}.tmp")
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600),
                  "wb") as f:
            marshal.dump(entry, f)
        os.replace(tmp, os.path.join(directory, key))  # whole or not at all, for concurrent runs
    except OSError:
        pass


def _real_source(module: types.ModuleType) -> str:
    with open(module.__file__, encoding="utf-8") as f:
        return f.read()


def _slice_getattr(module: types.ModuleType):
    def __getattr__(name: str):  # noqa: N807 (a module's own __getattr__)
        sliced = "_light_slice" in module.__dict__
        if sliced and not name.startswith("__") and re.search(rf"\nclass {re.escape(name)}\b", _real_source(module)):
            MISSES.append((module.__name__, name))
            _complete(module)
            return module.__dict__[name]
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    return __getattr__


def _complete(module: types.ModuleType) -> None:
    """The real module in place of the slice (same module object: importers keep working)."""
    with _lock:
        if module.__dict__.pop("_light_slice", None) is not None:
            with _long_lived():
                # As published: not this file's postponed annotations (a TypedDict's NotRequired keys read as required).
                code = compile(_real_source(module), module.__file__, "exec", dont_inherit=True)
                exec(code, module.__dict__)  # noqa: S102 (the provider's own code)
            SLICED.pop(module.__name__, None)


def _complete_slices(package: str) -> None:
    for module_name in TYPE_MODULES:
        module = sys.modules.get(f"{package}.{module_name}")
        if module is not None and "_light_slice" in module.__dict__:
            _complete(module)


class _OutsideTheTable:
    """Before a module of a sliced package that the table lacks is imported (``from
    pulumi_gcp.compute.instance import Instance``), its package's type modules become whole."""

    @staticmethod
    def find_spec(fullname: str, path=None, target=None):  # noqa: ARG004
        package, _, name = fullname.rpartition(".")
        parent = sys.modules.get(package)
        # ``_enums``, ``_utilities``: helpers the type modules import themselves, not resources.
        if (isinstance(parent, LightPackage) and not name.startswith("_") and name not in TYPE_MODULES
                and name not in MODULES.get(package, ())
                and any(f"{package}.{m}" in SLICED for m in TYPE_MODULES)
                and os.path.isfile(os.path.join(parent.__path__[0], name + ".py"))):
            _miss(package, name)
            _complete_slices(package)
        return None  # the normal finders import it


def install(providers: tuple[str, ...] = ("pulumi_gcp", "pulumi_kubernetes")) -> list[str]:
    """Put the stand-ins in ``sys.modules`` for each provider not imported yet; returns those done.

    Every subpackage gets one, listed or not, so a package the table lacks is a recorded miss too.
    """
    done = []
    with _lock:
        if _OutsideTheTable not in sys.meta_path:
            sys.meta_path.insert(0, _OutsideTheTable)
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

