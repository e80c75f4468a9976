"""Every place the offline engine touches the Pulumi runtime, in one small adapter.

The engine runs the program the way Pulumi's unit-testing guide does (``pulumi.runtime.set_mocks`` with
``Mocks``, ``pulumi.runtime.test``), on a fresh default asyncio event loop, with two of ``set_mocks``'
public parameters: ``monitor=`` (a :class:`RecordingMonitor`, a ``MockMonitor`` subclass that sees each
``RegisterResource`` request) and ``logger=``. Beyond that public path it takes six shortcuts, each
on only while a program runs (``shortcuts=True``, the default) and each compared with the SDK's own path
by a test:

- **its own ``RegisterResource`` answer** (:meth:`RecordingMonitor._register`): ``MockMonitor`` deserializes
  the request, asks the mocks, serializes the state back through the event loop (``_sync_await``) for the SDK
  to deserialize again; here the request is read once by a protobuf walk (:func:`deserialize_properties`,
  which leaves anything special, a secret, an unknown, an asset, a reference, to ``rpc.deserialize_properties``;
  it reads the private ``rpc._special_sig_key`` to spot those) and the answer (:class:`Answer`, a duck of
  ``RegisterResourceResponse``) hands the state back already deserialized, relying on
  ``rpc.deserialize_properties`` passing plain values through. A request with ``transforms`` and the root
  stack take ``MockMonitor``'s own path. Checked: ``tests/test_engine_adapter.py`` (the walk against
  ``rpc.deserialize_properties``, the answer against ``MockMonitor.RegisterResource``'s, read back by the SDK)
  and ``tests/test_engine_differential.py`` (every shipped stack and a large one, shortcuts on and off);
- **no source positions**: ``pulumi.runtime.resource._get_stack_trace`` (private) walks the Python stack for
  every resource to tell the engine where it was declared; no engine reads it under mocks, so it answers an
  empty ``StackTrace`` (a tenth of a large stack's time);
- **plain data serialized as it is**: ``rpc.serialize_property`` (private to the SDK's module, and called by itself
  for each nested value: a coroutine per value) answers a value made only of dicts, lists, strings, numbers,
  booleans and ``None``, with no type metadata and no key translation to apply, with the value itself, which is
  what its walk returns for such data (:func:`_serialize_property`; a Kueue CRD's schema is thousands of values);
  checked by ``tests/test_engine_adapter.py`` against the SDK's walk;
- **no cyclic garbage collection** (``gc.disable``): the SDK's futures and outputs live until the program ends,
  and each full collection walks them all.

- **monitor calls on the loop's thread**: the SDK hands each monitor call to the loop's default executor; the
  engine's executor (:class:`_InlineFirst`, a ``ThreadPoolExecutor``) runs it at once on the loop's thread, and the
  part that waits on an event loop (``MockMonitor.Invoke``, ``ReadResource``, ``RegisterResource``) on a thread of
  the pool (:func:`_off_the_loop`), as under ``pulumi up`` (an executor running every call inline made each
  ``Invoke`` nest a pump of the loop: about 300 invokes raised ``RecursionError``), with no exception raised
  through the SDK's ``except grpc.RpcError``. Checked: ``tests/test_engine_adapter.py`` (which thread each call
  ran on);
- **the engine's own registration** of the program's resources (``offline/registration.py``: one coroutine per
  resource, no request message, no Struct round trip, one future per property output), checked by
  ``tests/test_engine_registration.py`` and ``tests/test_engine_differential.py``.

Nothing else of the SDK is replaced: the SDK's type analysis and output translation are its own (the registration
only defers a typed resource's translation to the program's first read of that output: ``offline/lazy_outputs.py``).
``shortcuts=False`` is the SDK's plain path, the differential test's reference.

The engine is process-global and not re-entrant: ``set_mocks`` and the SDK's settings are globals, the
shortcuts patch the SDK's module for the run, and the engine changes directory; one render at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import gc
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi.resource as sdk_resource
import pulumi.runtime
from google.protobuf import struct_pb2
from pulumi.runtime import resource as runtime_resource
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2, source_pb2

from offline import registration

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
    replace_on_changes: tuple[str, ...] = ()
    # ``inputs`` are plain data, no secret or unknown in them, in objects of their own (the engine's walk).
    plain: bool = False


class RecordingMonitor(MockMonitor):
    """The stock mock monitor, calling ``on_register`` with each resource it registers.

    ``shortcuts``: answer with :meth:`_register` (one deserialization, no Struct back); off, every request
    takes ``MockMonitor.RegisterResource``, the SDK's own path."""

    def __init__(self, mocks: pulumi.runtime.Mocks, on_register: Callable[[Registration], None],
                 shortcuts: bool = True):
        super().__init__(mocks)
        self._on_register = on_register
        self.shortcuts = shortcuts

    def RegisterResource(self, request):  # noqa: N802 (the gRPC method name)
        if not self.shortcuts or request.type == "pulumi:pulumi:Stack" or request.transforms:
            # MockMonitor's path waits on an event loop: a thread of the pool.
            response = _off_the_loop(super().RegisterResource, request)
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
                replace_on_changes=tuple(request.replaceOnChanges),
                plain=plain,
            )
        )
        return response

    # MockMonitor's calls that wait on the event loop (``_sync_await``) or hand back callbacks: never inline.
    def Invoke(self, request):  # noqa: N802
        return _off_the_loop(super().Invoke, request)

    def ReadResource(self, request):  # noqa: N802
        return _off_the_loop(super().ReadResource, request)

    def RegisterStackTransform(self, request):  # noqa: N802
        return _off_the_loop(super().RegisterStackTransform, request)

    def RegisterStackInvokeTransform(self, request):  # noqa: N802
        return _off_the_loop(super().RegisterStackInvokeTransform, request)

    def _register(self, request) -> tuple[Answer, dict[str, Any], bool]:
        """``MockMonitor.RegisterResource`` with one deserialization, no event loop and no Struct back
        (:meth:`_answer`)."""
        inputs, plain = deserialize_properties(request.object)
        return self._answer(request.type, request.name, request.parent, request.custom or False, request.provider,
                            request.importId, inputs), inputs, plain

    def _answer(self, type_: str, name: str, parent: str, custom: bool, provider: str, import_id: str,
                inputs: dict[str, Any]) -> Answer:
        """What ``MockMonitor.RegisterResource`` answers (``pulumi/runtime/mocks.py:308-334``).

        The answer is the request's own properties with what the mocks changed: the same values
        ``MockMonitor`` would serialize back for the SDK to deserialize (the mocks return plain data and
        never change an input in place), handed over deserialized (:class:`Answer`). Only what the mocks
        changed takes the round trip, so it reads back exactly as through a Struct.
        """
        urn = self.make_urn(parent, type_, name)
        id_, state = self.mocks.new_resource(pulumi.runtime.MockResourceArgs(
            typ=type_, name=name, inputs=dict(inputs), provider=provider, resource_id=import_id, custom=custom))
        changed = {k: v for k, v in state.items() if inputs.get(k, _ABSENT) != v}
        # What came back unchanged is read as through the response's Struct (a dict's keys in its order, an int a
        # float: equal to an input's float, it is not what the SDK hands back).
        outputs = {k: _struct_ordered(v) for k, v in state.items() if k not in changed}
        if changed:
            struct = struct_pb2.Struct()
            struct.update(changed)
            outputs.update(rpc.deserialize_properties(resource_pb2.RegisterResourceResponse(object=struct).object))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, id_, state)
        return Answer(urn=urn, id=id_ or "", object=outputs)

    def answer(self, *, type_: str, name: str, parent: str, custom: bool, provider: str, inputs: dict[str, Any],
               plain: bool, protect: bool, retain_on_delete: bool, dependencies: tuple[str, ...],
               ignore_changes: tuple[str, ...], replace_on_changes: tuple[str, ...]) -> Answer:
        """A registration made by the engine itself (``offline/registration.py``): answered as :meth:`_register`
        answers the request it stands for, and recorded as :meth:`RegisterResource` records that request."""
        response = self._answer(type_, name, parent, custom, provider, "", inputs)
        self._on_register(Registration(
            urn=response.urn, type=type_, name=name, parent=parent or None, custom=custom, inputs=inputs,
            provider=provider or None, protect=protect, retain_on_delete=retain_on_delete,
            dependencies=dependencies, ignore_changes=ignore_changes, replace_on_changes=replace_on_changes,
            plain=plain))
        return response


def _struct_ordered(value: Any) -> Any:
    """Plain data as it reads back from a Struct copied into a message: each dict in
    :func:`offline.registration.struct_order`, an int a float (a Struct's ``number_value``); new objects only
    where that changes something. Any other value (a secret, a resource, ...) equal to its input is the input's."""
    kind = type(value)
    if kind is int:
        return float(value)
    if kind is dict:
        items = {k: _struct_ordered(v) for k, v in value.items()}
        return registration.ordered(items)
    if kind is list:
        return [_struct_ordered(v) for v in value]
    return value


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


# --------------------------------------------------------------------------- monitor calls on the loop's thread

_here = threading.local()  # ``executor``: a monitor call running on the loop's own thread (:class:`_InlineFirst`)


def _off_the_loop(call: Callable[[Any], Any], request: Any) -> Any:
    """``call(request)`` on a thread of the loop's executor when it was asked of the loop's own thread (inline), its
    result (or its exception) back here: ``MockMonitor``'s calls that wait on an event loop (``_sync_await``) run on a
    thread with a loop of its own, as every call does without the shortcuts, never pumping the program's loop from
    inside one of its callbacks (which nested: about 300 invokes raised ``RecursionError``).

    Nothing is raised through the SDK's ``except grpc.RpcError`` around a monitor call (``pulumi/runtime/invoke.py``,
    ``resource.py``): an exception passing one evaluates ``grpc.RpcError``, which would load grpc
    (``offline/sdk_modules.py`` defers it) on every invoke."""
    executor = getattr(_here, "executor", None)
    if executor is None:
        return call(request)
    # In this call's context (the SDK's settings are context variables; its own hand-off wraps the call in it).
    return executor.on_a_thread(contextvars.copy_context().run, call, request).result()


class _InlineFirst(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor while a program runs with the shortcuts: a monitor call (``SupportsFeature``,
    ``RegisterResourceOutputs``, an invoke) runs at once on the loop's thread, its future done when ``submit``
    returns; the part of one that waits on an event loop (``MockMonitor.Invoke``, ``ReadResource``,
    ``RegisterResource``: ``_sync_await``) runs on a thread of the pool (:func:`_off_the_loop`), as every call does
    without the shortcuts. A thread hand-off per call (its wake-up of the loop, the GIL passed back and forth) was a
    fifth of a 1,024-slice preview, when registrations went through here."""

    def __init__(self) -> None:
        super().__init__(thread_name_prefix="asyncio")
        self.inline = False

    def on_a_thread(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        return super().submit(fn, *args, **kwargs)

    def submit(self, fn, /, *args, **kwargs):
        if self.inline and getattr(_here, "executor", None) is None:
            future: concurrent.futures.Future = concurrent.futures.Future()
            _here.executor = self
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 (as a pool's worker hands any exception to the future)
                future.set_exception(e)
            else:
                future.set_result(result)
            finally:
                _here.executor = None
            return future
        return super().submit(fn, *args, **kwargs)


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
    # Every other field of the response message, as MockMonitor leaves them (unset).
    stable: bool = False
    stables: tuple[str, ...] = ()


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


def _ensure_event_loop() -> None:
    """A current, open event loop for the futures the runtime makes (the root stack's first): the default one
    Python makes, as a program under ``pulumi up`` gets."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12 warns when it has to make one
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:  # no loop and no implicit one (later Pythons)
            loop = None
    if loop is None or loop.is_closed():
        asyncio.set_event_loop(asyncio.new_event_loop())


def run(program: Callable[[], None], shortcuts: bool = True) -> dict[str, Any]:
    """Run ``program``, wait for every registration, and return the stack's exports (known values).

    Exceptions from the program (``pulumi.RunError`` included) propagate after the
    outstanding RPCs are drained, as under ``pulumi up``. ``shortcuts``: see the module docstring.
    """
    exports: dict[str, Any] = {}

    def body() -> pulumi.Output:
        program()
        root = pulumi.runtime.get_root_resource()
        # Resolved by ``test`` before it returns; unknown exports leave ``exports`` empty.
        return pulumi.Output.from_input(dict(root.outputs)).apply(lambda v: exports.update(v or {}))

    with _lean(shortcuts):
        pulumi.runtime.test(body)()
    return exports


def _inline_first(loop: asyncio.AbstractEventLoop) -> _InlineFirst:
    """The loop's :class:`_InlineFirst` executor (made its default executor the first time)."""
    executor = getattr(loop, "_slicectl_executor", None)
    if executor is None:
        executor = _InlineFirst()
        loop.set_default_executor(executor)
        loop._slicectl_executor = executor  # one per loop: its threads are reused by the next render
    return executor


@contextlib.contextmanager
def _lean(shortcuts: bool = True):
    """While a program runs: no source positions (``_get_stack_trace``) and no cyclic garbage collection
    (see the module docstring). ``shortcuts=False``: as the SDK is."""
    if not shortcuts:
        yield
        return
    stack_trace, collecting = runtime_resource._get_stack_trace, gc.isenabled()
    register = sdk_resource.register_resource
    executor = _inline_first(asyncio.get_event_loop())
    runtime_resource._get_stack_trace = _NO_STACK_TRACE
    rpc.serialize_property = _serialize_property
    sdk_resource.register_resource = registration.register_resource
    executor.inline = True
    gc.disable()
    try:
        yield
    finally:
        executor.inline = False
        sdk_resource.register_resource = register
        rpc.serialize_property = _SERIALIZE_PROPERTY
        runtime_resource._get_stack_trace = stack_trace
        if collecting:
            gc.enable()


_SERIALIZE_PROPERTY = rpc.serialize_property
_SCALARS = (str, int, float, bool, type(None))
_IDENTITY = pulumi.Resource.translate_input_property  # returns the name as it is; a resource may override it


def is_plain(value: Any) -> bool:
    """Only dicts with string keys, lists, strings, numbers, booleans and ``None`` (exact types, no subclass)."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and is_plain(v) for k, v in value.items())
    if kind is list:
        return all(is_plain(v) for v in value)
    return kind in _SCALARS


async def _serialize_property(value, deps, property_key, resource_obj=None, input_transformer=None, typ=None,
                              keep_output_values=False, exclude_resource_refs_from_deps=False,
                              return_protobuf_value=False):
    """``rpc.serialize_property``, answering plain data with itself (its walk builds the same dicts and lists, adds
    no dependency and translates no key when there is no type and the translator is the identity)."""
    if (typ is None and not return_protobuf_value and is_plain(value)
            and (input_transformer is None or getattr(input_transformer, "__func__", None) is _IDENTITY)):
        return value
    return await _SERIALIZE_PROPERTY(value, deps, property_key, resource_obj, input_transformer, typ,
                                     keep_output_values, exclude_resource_refs_from_deps, return_protobuf_value)


def _NO_STACK_TRACE() -> source_pb2.StackTrace:  # noqa: N802 (stands in for a function)
    return source_pb2.StackTrace()


def is_secret(value: Any) -> bool:
    return rpc.is_rpc_secret(value)


def unwrap_secret(value: Any) -> Any:
    return rpc.unwrap_rpc_secret(value)


def is_unknown(value: Any) -> bool:
    """An unknown as ``deserialize_properties`` hands it back (the sentinel string, or ``Unknown`` if kept)."""
    return (isinstance(value, str) and value == rpc.UNKNOWN) or isinstance(value, pulumi.output.Unknown)
