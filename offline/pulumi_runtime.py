"""Every place the offline engine touches the Pulumi runtime, in one small adapter.

The engine uses only Pulumi's public runtime API (``reset_options``, ``set_mocks``,
``set_all_config``, ``test``, ``get_root_resource``, the ``rpc`` helpers) plus two things
that are public but not documented as stable: subclassing ``MockMonitor`` to see each
``RegisterResource`` request (answered here with one deserialization and no event loop, where
``MockMonitor`` deserializes, serializes back through asyncio, and the recording deserialized again),
the fields of that gRPC request, and ``pulumi.runtime.resource._get_stack_trace``, which walks the
Python stack for every resource to tell the engine its source position (no engine reads it here:
skipped while the program runs, a tenth of a large stack's time). While a program runs, the SDK's
per-output bookkeeping (``rpc.transfer_properties``, ``Output._track``) is done leaner, to the same
effect (:data:`REPLACED`). They live here, and
``tests/test_engine_adapter.py`` checks each of them against the installed Pulumi, so an
upgrade that moves one fails there, by name, rather than as a wrong rendering.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi.runtime
import pulumi.runtime.settings
from google.protobuf import struct_pb2
from pulumi import _types as pulumi_types
from pulumi import output as pulumi_output
from pulumi.runtime import resource as runtime_resource
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2, source_pb2

_ABSENT = object()
# Fields of ``pulumirpc.RegisterResourceRequest`` the engine reads.
REQUEST_FIELDS = ("type", "name", "parent", "custom", "provider", "object", "protect", "retainOnDelete",
                  "dependencies", "ignoreChanges")


@dataclass(frozen=True)
class Registration:
    """One ``RegisterResource`` request, as plain values."""

    urn: str
    type: str
    name: str
    parent: str | None  # parent URN as sent (the stack's URN for its direct children)
    custom: bool
    inputs: dict[str, Any]  # deserialized: secrets wrapped, unknowns as ``rpc.UNKNOWN``
    provider: str | None  # provider reference ``urn::id`` as sent
    protect: bool
    retain_on_delete: bool
    dependencies: tuple[str, ...] = ()  # URNs this resource waits for (depends_on and its inputs' resources)
    ignore_changes: tuple[str, ...] = ()
    # ``inputs`` are plain data, no secret or unknown in them, in objects of their own (the engine's walk).
    plain: bool = False


class RecordingMonitor(MockMonitor):
    """The stock mock monitor, calling ``on_register`` with each resource it registers."""

    def __init__(self, mocks: pulumi.runtime.Mocks, on_register: Callable[[Registration], None]):
        super().__init__(mocks)
        self._on_register = on_register

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method name)
        if request.type == "pulumi:pulumi:Stack" or request.transforms:
            response = super().RegisterResource(request)
            inputs, plain = rpc.deserialize_properties(request.object), False
        else:
            response, inputs, plain = self._register(request)
        self._on_register(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                inputs=inputs,
                provider=request.provider or None,
                protect=request.HasField("protect") and request.protect,
                retain_on_delete=request.HasField("retainOnDelete") and request.retainOnDelete,
                dependencies=tuple(request.dependencies),
                ignore_changes=tuple(request.ignoreChanges),
                plain=plain,
            )
        )
        return response

    def _register(self, request) -> tuple[Answer, dict[str, Any], bool]:
        """``MockMonitor.RegisterResource`` with one deserialization, no event loop and no Struct back.

        The answer is the request's own properties with what the mocks changed: the same values
        ``MockMonitor`` would serialize back for the SDK to deserialize (the mocks return plain data and
        never change an input in place), handed over deserialized (:class:`Answer`). Only what the mocks
        changed takes the round trip, so it reads back exactly as through a Struct.
        """
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs, plain = deserialize_properties(request.object)
        id_, state = self.mocks.new_resource(pulumi.runtime.MockResourceArgs(
            typ=request.type, name=request.name, inputs=dict(inputs), provider=request.provider,
            resource_id=request.importId, custom=request.custom or False))
        changed = {k: v for k, v in state.items() if inputs.get(k, _ABSENT) != v}
        outputs = {k: v for k, v in state.items() if k not in changed}
        if changed:
            struct = struct_pb2.Struct()
            struct.update(changed)
            outputs.update(rpc.deserialize_properties(struct))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return Answer(urn=urn, id=id_ or "", object=outputs), inputs, plain


class _Special(Exception):
    """A value :func:`deserialize_properties` leaves to the SDK (an unknown, a secret, an asset, a reference)."""


def deserialize_properties(struct: struct_pb2.Struct) -> tuple[dict[str, Any], bool]:
    """``rpc.deserialize_properties(struct)``, the same values, twice as fast for plain data (every node pool),
    and whether they are plain (no secret, no unknown, nothing else the SDK treats specially).

    A walk of the protobuf values that drops a dict's nulls, as the SDK does; at the first value the SDK
    treats specially (the unknown sentinel, a dict with Pulumi's signature key) it leaves the whole struct
    to the SDK, so the values are always the SDK's (``tests/test_engine_adapter.py``)."""
    try:
        return _struct(struct), True
    except _Special:
        return rpc.deserialize_properties(struct), False


def _struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    out = {}
    for key, value in struct.fields.items():
        if key == rpc._special_sig_key:
            raise _Special
        plain = _value(value)
        if plain is not None:
            out[key] = plain
    return out


def _value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        if value.string_value == rpc.UNKNOWN:
            raise _Special
        return value.string_value
    if kind == "struct_value":
        return _struct(value.struct_value)
    if kind == "list_value":
        return [_value(v) for v in value.list_value.values]
    if kind == "number_value":
        return value.number_value
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value


@dataclass(frozen=True)
class Answer:
    """A ``RegisterResourceResponse`` as the SDK's ``register_resource`` reads it, its ``object`` (the
    resource's state) already deserialized.

    The SDK passes ``object`` to ``rpc.deserialize_properties``, which hands deserialized values back as
    they are (``tests/test_engine_adapter.py`` checks both), so the state is not written to a Struct only
    for the SDK to read it back: at 1,024 slices that was a tenth of the preview.
    """

    urn: str
    id: str
    object: dict[str, Any]
    result: int = resource_pb2.Result.SUCCESS
    propertyDependencies: dict[str, Any] = field(default_factory=dict)  # noqa: N815 (the gRPC field name)
    unknown: bool = False


def start(
    mocks: pulumi.runtime.Mocks, monitor: MockMonitor, project: str, stack: str, config: dict[str, str],
    logger: logging.Logger | None = None,
) -> None:
    """A fresh deployment under mocks: new settings, a new root stack, ``config`` as the stack's config.

    ``logger`` gets what the program logs (``pulumi.log.warn`` and the like, through the mock engine).
    """
    _ensure_event_loop()
    pulumi.runtime.reset_options(project=project, stack=stack, preview=True)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True, monitor=monitor, logger=logger)
    pulumi.runtime.set_all_config(dict(config))


class _InlineLoop(asyncio.SelectorEventLoop):
    """An event loop whose default executor is the calling thread.

    The SDK hands every monitor call (``RegisterResource``, ``Invoke``, ...) to the loop's default thread pool,
    as it would a gRPC call to the engine. The mock monitor answers at once, without I/O or the event loop, so
    here the call runs where it is made and its future is done on return: no thread handoff, no wake-up of the
    loop through its self-pipe, no contention for the GIL, for every resource."""

    def run_in_executor(self, executor, func, *args):
        if executor is not None:
            return super().run_in_executor(executor, func, *args)
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as e:  # noqa: BLE001 (handed to the awaiting coroutine, as the pool would)
            future.set_exception(e)
        return future


def _ensure_event_loop() -> None:
    """A current event loop, an :class:`_InlineLoop`, for the futures the runtime makes (the root stack's first)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12 warns when it has to make one
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # no loop and no implicit one (later Pythons)
            loop = None
    if not isinstance(loop, _InlineLoop) or loop.is_closed():
        asyncio.set_event_loop(_InlineLoop())


def run(program: Callable[[], None]) -> dict[str, Any]:
    """Run ``program``, wait for every registration, and return the stack's exports (known values).

    Exceptions from the program (``pulumi.RunError`` included) propagate after the
    outstanding RPCs are drained, as under ``pulumi up``.
    """
    exports: dict[str, Any] = {}

    def body() -> pulumi.Output:
        program()
        root = pulumi.runtime.get_root_resource()
        # Resolved by ``test`` before it returns; unknown exports leave ``exports`` empty.
        return pulumi.Output.from_input(dict(root.outputs)).apply(lambda v: exports.update(v or {}))

    with _lean():
        pulumi.runtime.test(body)()
    return exports


# The SDK's type analysis, pure functions of a type (or a resource class), which it repeats for every
# property of every resource it serializes or resolves (``unwrap_type`` alone 200,000 times at 1,024 slices,
# ``resource_types`` and ``input_type_types`` rebuilding a class's type hints for each resource and input object,
# ``_py_properties`` walking a class's MRO for each): (module, name), answered from a cache while the program
# runs. None mutates what it returns (``_py_properties`` returns a tuple).
MEMOIZED = ((pulumi_types, "unwrap_type"), (pulumi_types, "unwrap_optional_type"),
            (pulumi_types, "resource_types"), (pulumi_types, "resource_pulumi_to_py_names"),
            (pulumi_types, "input_type_types"), (pulumi_types, "output_type_types"),
            (pulumi_types, "input_type_py_to_pulumi_names"), (pulumi_types, "_py_properties"),
            (rpc, "_get_list_element_type"))


def _memoized(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    cache: dict[Any, Any] = {}

    @functools.wraps(function)
    def cached(key):
        try:
            return cache[key]
        except KeyError:
            value = cache[key] = function(key)
            return value
        except TypeError:  # an unhashable type (none in the providers here): as the SDK would
            return function(key)

    return cached


def _transfer_properties(res: pulumi.Resource, props: dict[str, Any], custom: bool) -> dict[str, rpc.Resolver]:
    """``rpc.transfer_properties``: an output on ``res`` and its resolver for each property, each output's
    state one future (``Output._from_data``, the SDK's own factory) that the resolver completes.

    The SDK makes four futures per property (value, known, secret, resources) and a task that awaits them
    into the same ``_OutputData``: a node pool has some 30 properties, 1,024 slices 90,000, and those tasks
    and their wake-ups were a tenth of the preview. Resolved or failed, each output holds what the SDK's
    would (``tests/test_engine_adapter.py``)."""
    resolvers: dict[str, rpc.Resolver] = {}
    loop = asyncio.get_event_loop()
    for name in props:
        if name == "urn" or (name == "id" and custom):  # handled apart, as in the SDK
            continue
        data = loop.create_future()
        resolvers[name] = functools.partial(_resolve, res, data)
        res.__dict__[name] = pulumi.Output._from_data(data)
    return resolvers


def _resolve(res: pulumi.Resource, data: asyncio.Future, value: Any, is_known: bool, is_secret: bool,
             deps: set[pulumi.Resource] | None, failed: Exception | None) -> None:
    """An :func:`_transfer_properties` resolver (the SDK's ``rpc.Resolver`` arguments after the first two)."""
    if failed is not None:
        data.set_exception(failed)
        return
    resources = set(deps) if deps else set()
    resources.add(res)
    data.set_result(pulumi_output._OutputData(resources=resources, value=value, is_known=is_known,
                                              is_secret=is_secret))


def _track(self: pulumi.Output) -> None:
    """``Output._track`` without its lock: the program and its monitor calls run on one thread here.

    The SDK registers every output's state in the run's set of outstanding outputs (which the run awaits
    before it ends) and removes it when it completes, each under a lock reached through a context
    variable; the same set, the same additions and removals."""
    outputs, data = pulumi.runtime.settings.SETTINGS.outputs, self._data
    outputs.add(data)

    def done(future: asyncio.Future, outputs: set = outputs) -> None:
        if not future.cancelled() and future.exception() is None:  # a failed one stays, for the run to raise
            outputs.discard(future)

    data.add_done_callback(done)


# (owner, name, replacement) for the duration of a run: the SDK's per-output bookkeeping, done leaner.
REPLACED = ((rpc, "transfer_properties", _transfer_properties), (pulumi.Output, "_track", _track))


@contextlib.contextmanager
def _lean():
    """What a program of thousands of resources does not need offline, off while it runs: the source
    positions no engine reads, the cyclic garbage collector (the SDK's futures and outputs are
    alive until the program ends; each full collection walks them all: half of 1,024 slices' time),
    the repeats of the SDK's type analysis (:data:`MEMOIZED`), and the SDK's per-output futures, task and
    lock (:data:`REPLACED`)."""
    stack_trace, collecting = runtime_resource._get_stack_trace, gc.isenabled()
    originals = [(module, name, getattr(module, name)) for module, name in MEMOIZED]
    replaced = [(owner, name, owner.__dict__[name]) for owner, name, _ in REPLACED]
    runtime_resource._get_stack_trace = _NO_STACK_TRACE
    for module, name, function in originals:
        setattr(module, name, _memoized(function))
    for owner, name, replacement in REPLACED:
        setattr(owner, name, replacement)
    gc.disable()
    try:
        yield
    finally:
        runtime_resource._get_stack_trace = stack_trace
        for module, name, function in originals:
            setattr(module, name, function)
        for owner, name, original in replaced:
            setattr(owner, name, original)
        if collecting:
            gc.enable()


def _NO_STACK_TRACE() -> source_pb2.StackTrace:  # noqa: N802 (stands in for a function)
    return source_pb2.StackTrace()


def is_secret(value: Any) -> bool:
    return rpc.is_rpc_secret(value)


def unwrap_secret(value: Any) -> Any:
    return rpc.unwrap_rpc_secret(value)


def is_unknown(value: Any) -> bool:
    """An unknown as ``deserialize_properties`` hands it back (the sentinel string, or ``Unknown`` if kept)."""
    return (isinstance(value, str) and value == rpc.UNKNOWN) or isinstance(value, pulumi.output.Unknown)
