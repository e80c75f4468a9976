"""A resource's property outputs made, and its answer translated into output types, only when the program reads them.

The SDK makes an ``Output`` for every property of a resource when it is declared (``rpc.transfer_properties``,
``rpc.py:1187-1247``) and, once the engine answers, translates every property of the answer into its output type
and resolves every output (``rpc.resolve_outputs``, ``rpc.py:1480-1555``). A program reads few of them: at 1,024
slices it reads about 7,000 outputs (pool, network and cluster names) of about 38,000, and the translation of the
rest (a node pool's ``nodeConfig`` into nested output types) and their futures were a third of the preview's CPU.

For a resource with type metadata (the providers' generated classes: ``typ`` given, so the SDK translates names by
it), a property the class reads through a getter (``pulumi.get(self, name)``, which reads ``self.__dict__.get``)
is left out of the resource's ``__dict__``, which becomes a :class:`LazyOutputs`; its first read makes the output,
resolved at once if the answer is in (with the SDK's own ``rpc.translate_output_properties``, the same arguments
``resolve_outputs`` passes it) or when it comes, or failed with the registration's exception. Anything that walks
the dict (``keys``, ``items``, iteration, ``len``, ``==``, ``vars``) makes every output first, so it sees the
SDK's dict.

What is left unread is never translated, so a translation that would fail must be known beforehand: the answer is
read by :func:`translates`, a walk of the SDK's translation that says whether it succeeds for certain (only plain
values; no secret, unknown, union or asset; an output type's constructor checked once per class). Where it cannot
say so, the engine resolves every output at once through the SDK's ``rpc.resolve_outputs``, which raises its own
error (``offline/registration.py``). Held to the SDK by ``tests/test_engine_lazy_outputs.py`` (every property read
before and after the answer, walks of the dict, failures, fork-shaped resources: Kubernetes, a bucket in a
component; :func:`translates` against the SDK's translation), ``tests/test_engine_registration.py`` (every branch)
and ``tests/test_engine_differential.py`` (every fixture stack and a 64-slice stack).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import typing
from collections import abc
from enum import Enum
from typing import Any, get_args, get_origin

import pulumi
from pulumi import _types
from pulumi.output import _OutputData
from pulumi.runtime import rpc


class LazyOutputs(dict):
    """A resource's ``__dict__`` whose property outputs named in ``pending`` are made when first read."""

    __slots__ = ("_res", "_pending", "_order", "_head", "_waiting", "_answer", "_failed")

    def __init__(self, res, contents: dict, pending: set[str], order: tuple[str, ...] = ()):
        super().__init__(contents)
        self._res = res
        self._pending = pending
        # Where the SDK's dict holds each key: what the resource held when registered, then its properties in the
        # order ``transfer_properties`` set them, then what came later.
        self._head = tuple(contents)
        self._order = order
        self._waiting: dict[str, asyncio.Future] = {}  # read before the answer: resolved when it comes
        self._answer: dict[str, tuple[str, Any]] | None = None  # Python name -> (the answer's key, its value)
        self._failed: BaseException | None = None

    # ------------------------------------------------------------------ reads of one key: that output only
    def get(self, key, default=None):
        if key in self._pending:
            self._make(key)
        return dict.get(self, key, default)

    def __missing__(self, key):
        if key in self._pending:
            self._make(key)
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def __contains__(self, key):
        return key in self._pending or dict.__contains__(self, key)

    def __setitem__(self, key, value):
        self._pending.discard(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        if key in self._pending:
            self._make(key)
        dict.__delitem__(self, key)

    def pop(self, key, *default):
        if key in self._pending:
            self._make(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key, default=None):
        if key in self._pending:
            self._make(key)
        return dict.setdefault(self, key, default)

    # ------------------------------------------------------------------ anything that walks it: every output first
    def _every(self) -> None:
        if not self._pending:
            return
        for key in [*(k for k in self._order if k in self._pending), *self._pending]:
            if key in self._pending:
                self._make(key)
        current = dict(dict.items(self))
        dict.clear(self)
        for key in (*self._head, *self._order):
            if key in current:
                dict.__setitem__(self, key, current.pop(key))
        dict.update(self, current)

    def keys(self):
        self._every()
        return dict.keys(self)

    def values(self):
        self._every()
        return dict.values(self)

    def items(self):
        self._every()
        return dict.items(self)

    def __iter__(self):
        self._every()
        return dict.__iter__(self)

    def __reversed__(self):
        self._every()
        return dict.__reversed__(self)

    def __len__(self):
        self._every()
        return dict.__len__(self)

    def __eq__(self, other):
        self._every()
        return dict.__eq__(self, other)

    __hash__ = None  # as dict's

    def __repr__(self):
        self._every()
        return dict.__repr__(self)

    def copy(self):
        self._every()
        return dict(dict.items(self))

    def popitem(self):
        self._every()
        return dict.popitem(self)

    def update(self, *args, **kwargs):
        other = dict(*args, **kwargs)
        self._pending.difference_update(other)
        dict.update(self, other)

    # ------------------------------------------------------------------ making and resolving
    def _make(self, key: str) -> None:
        """The output of ``key``, as ``transfer_properties`` makes it (one future, ``Output._from_data``)."""
        self._pending.discard(key)
        data: asyncio.Future = asyncio.Future()
        dict.__setitem__(self, key, pulumi.Output._from_data(data))
        if self._failed is not None:
            data.set_exception(self._failed)
        elif self._answer is not None:
            self._settle(key, data)
        else:
            self._waiting[key] = data

    def every(self, props) -> dict[str, Any]:
        """Every output made now, before the answer, and their resolvers in ``props``' order, for the SDK's
        ``resolve_outputs`` (as ``transfer_properties`` makes them)."""
        self._every()
        waiting, self._waiting = self._waiting, {}
        return {key: functools.partial(resolve_data, self._res, waiting[key]) for key in props if key in waiting}

    def _settle(self, key: str, data: asyncio.Future) -> None:
        """``resolve_outputs`` and ``resolve_properties`` (``rpc.py:1480-1555``, a preview) for one property."""
        res = self._res
        found = self._answer.get(key)
        if found is None:  # rpc.py:1549-1553: not in the answer: unknown in a preview
            data.set_result(_OutputData(resources={res}, value=None, is_known=False, is_secret=False))
            return
        answer_key, value = found
        value = rpc.translate_output_properties(value, _same, resource_types(type(res)).get(answer_key), True,
                                                path=rpc._Path(key, resource=f"{res._name}"))
        is_secret = rpc.is_rpc_secret(value)
        value = rpc.unwrap_rpc_secret(value)
        data.set_result(_OutputData(resources={res}, value=value, is_known=value is not None, is_secret=is_secret))

    def answered(self, answer: dict[str, tuple[str, Any]]) -> None:
        """The engine's answer, read by :func:`translates` (keyed by Python name, as ``resolve_outputs`` keys it)."""
        self._answer = answer
        waiting, self._waiting = self._waiting, {}
        # In the SDK's order: the answer's properties, then those it left out (rpc.py:1519-1553).
        for key in [*(k for k in answer if k in waiting), *(k for k in waiting if k not in answer)]:
            self._settle(key, waiting[key])

    def failed(self, exn: BaseException) -> None:
        """``rpc.resolve_outputs_due_to_exception``: every output made fails with ``exn``, and every one made later."""
        self._failed = exn
        waiting, self._waiting = self._waiting, {}
        for data in waiting.values():
            data.set_exception(exn)


def _same(name: str) -> str:
    return name  # rpc.py:1502-1504: with type metadata the nested keys pass through as they are


_RESOURCE_TYPES: dict[type, dict[str, type]] = {}
_NAMES: dict[type, dict[str, str]] = {}
_GETTERS: dict[type, frozenset[str]] = {}


def resource_types(cls: type) -> dict[str, type]:
    """``_types.resource_types(cls)``, once per class (the SDK reads the class's annotations for every resource)."""
    types = _RESOURCE_TYPES.get(cls)
    if types is None:
        types = _RESOURCE_TYPES[cls] = _types.resource_types(cls)
    return types


def py_names(cls: type) -> dict[str, str]:
    """``_types.resource_pulumi_to_py_names(cls)``, once per class."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = _types.resource_pulumi_to_py_names(cls)
    return names


def getters(cls: type) -> frozenset[str]:
    """The names a resource class reads only through a property (its getters): an instance's ``__dict__`` entry of
    such a name is reached by ``pulumi.get`` (``self.__dict__.get``), never by attribute lookup."""
    names = _GETTERS.get(cls)
    if names is None:
        names = _GETTERS[cls] = frozenset(n for n in dir(cls) if isinstance(inspect.getattr_static(cls, n, None),
                                                                             property))
    return names


def answer_of(res, outputs: dict[str, Any]) -> dict[str, tuple[str, Any]] | None:
    """The answer as ``resolve_outputs`` reads it (``deserialize_properties``, names translated by the class's
    metadata), keyed by Python name; None if a property's translation is not certain to succeed (:func:`translates`),
    for the SDK's ``resolve_outputs`` to run."""
    cls = type(res)
    types = resource_types(cls)
    names = py_names(cls)
    read: dict[str, tuple[str, Any]] = {}
    for key, value in rpc.deserialize_properties(outputs, False).items():
        if not translates(value, types.get(key)):
            return None
        read[names.get(key) or key] = (key, value)
    return read


_CONSTRUCTIBLE: dict[type, bool] = {}
_UNWRAPPED: dict[Any, Any] = {}


def _unwrap_optional(typ):
    try:
        return _UNWRAPPED[typ]
    except KeyError:
        unwrapped = _UNWRAPPED[typ] = _types.unwrap_optional_type(typ)
        return unwrapped


def translates(value: Any, typ) -> bool:
    """Whether ``rpc.translate_output_properties(value, _same, typ, True)`` (``rpc.py:1250-1420``) succeeds for
    certain: the same walk, building nothing. Plain values only (dicts, lists, strings, numbers, booleans, ``None``);
    False for a secret, an unknown, a discriminated union, a NaN or infinity where the type wants an int, a dict
    where the type wants no dict, a list where it wants no list, a value its enum refuses, an output type whose
    constructor fails."""
    if typ is not None:
        try:
            typ = _unwrap_optional(typ)
        except TypeError:  # unhashable
            return False
        if typ is Any:
            typ = None
    kind = type(value)
    if kind is dict:
        if rpc._special_sig_key in value:
            return False  # a secret, an asset, a reference
        if typ is None:
            return all(translates(v, None) for v in value.values())
        if _types.is_discriminated_union(typ):
            return False
        if _types.is_output_type(typ):
            if not _constructible(typ):
                return False
            types = _types.output_type_types(typ)
            return all(translates(v, types.get(k)) for k, v in value.items())
        args = get_args(typ) if typ is dict or get_origin(typ) in _MAPPINGS else None
        if args is None:
            return False  # rpc.py:1364-1369: the SDK raises
        element = args[1] if len(args) == 2 and args[0] is str else None
        return all(translates(v, element) for v in value.values())
    if kind is list:
        try:
            element = rpc._get_list_element_type(typ)
        except AssertionError:
            return False
        return all(translates(v, element) for v in value)
    if kind is str:
        if value == rpc.UNKNOWN:
            return False
    elif not (kind is float or kind is bool or kind is int or value is None):
        return False
    elif kind is float and typ is int and not math.isfinite(value):
        return False  # rpc.py:1406-1407: the SDK's int(value) raises for a NaN or an infinity
    if typ is not None and value is not None and inspect.isclass(typ) and issubclass(typ, Enum):
        try:
            typ(value)
        except Exception:  # noqa: BLE001 (the SDK's call raises it: the SDK's path reports it)
            return False
    return True


# The mapping origins the SDK's translation takes for a user's dict (rpc.py:1347-1352).
_MAPPINGS = (dict, typing.Dict, abc.Mapping, typing.Mapping)  # noqa: UP006 (the SDK's own list)


def _constructible(cls: type) -> bool:
    """``_types.output_type_from_dict(cls, ...)`` passes every property by name (``None`` where absent): whether the
    class's constructor takes them, tried once with all of them ``None``."""
    ok = _CONSTRUCTIBLE.get(cls)
    if ok is None:
        try:
            _types.output_type_from_dict(cls, {})
            ok = True
        except Exception:  # noqa: BLE001 (the SDK's path reports it)
            ok = False
        _CONSTRUCTIBLE[cls] = ok
    return ok


def resolve_data(res, data: asyncio.Future, value, is_known: bool, is_secret: bool, deps, failed) -> None:
    """A resolver of ``rpc.transfer_properties``'s (rpc.py:1204-1226), ``(value, is_known, is_secret, deps, failed)``,
    for one future: the ``_OutputData`` the SDK's task builds from its four (``offline/registration.py``)."""
    if failed is not None:
        data.set_exception(failed)
        return
    resources = set(deps) if deps else set()
    resources.add(res)
    data.set_result(_OutputData(resources=resources, value=value, is_known=is_known, is_secret=is_secret))
