"""The engine's own registration of a program's resources: what the SDK's ``register_resource`` sends and resolves,
without its per-value coroutines, its request message and the Struct round trip.

``pulumi.Resource.__init__`` ends in ``register_resource(self, t, name, custom, remote, DependencyResource, props,
opts, typ, package_ref)`` (``pulumi/resource.py:1142-1153``, a name it imports from ``pulumi.runtime.resource``).
While a program runs with the shortcuts, the engine puts :func:`register_resource` under that name. For a resource
whose options it handles (:func:`_handled`) it does what the SDK's does (``pulumi/runtime/resource.py:1115-1426``),
in the same order and with the SDK's own helpers:

- the URN and id outputs, made by the SDK's own ``resource_output`` (``runtime/resource.py:556``); an output per
  property (:func:`transfer_properties`, one future each where the SDK's ``rpc.transfer_properties`` makes four
  and a task), resolved by the SDK's own ``rpc.resolve_outputs`` (``rpc.py:1480``, with the state deserialized,
  as :class:`offline.pulumi_runtime.Answer` hands it);
- one coroutine per resource under the SDK's RPC manager (``_get_rpc_manager().do_rpc("register resource", ...)``,
  ``runtime/resource.py:1426``), failing each output with the exception and re-raising it as the SDK does
  (``runtime/resource.py:1361-1369`` and ``1415-1424``), with ``prepare_resource``'s wrapping of a ``ValueError`` or
  ``AssertionError`` ("While processing resource: ...", ``runtime/resource.py:1190-1199``);
- the inputs: :func:`_serialize`, a synchronous walk that mirrors ``rpc.serialize_property`` (``rpc.py:355-824``)
  for what the program sends (dicts, lists, strings, numbers, booleans, ``None``, ``...Args`` input types and
  outputs already resolved with known, non-secret values) and gives the values the SDK's Struct round trip gives
  (numbers as floats, a nested dict's ``None`` dropped after its null moved the other keys in the map's order:
  ``RegisterResourceRequest.object`` read back by
  ``rpc.deserialize_properties``); an output not resolved yet is awaited, then the walk starts again; anything
  else (a secret, an unknown, a resource reference, an asset, an awaitable, a translated key, a subclass) takes
  the SDK's own ``rpc.serialize_properties`` and the Struct round trip, so its value and its errors are the SDK's;
- the dependencies, parent, provider reference and option translations through the SDK's own
  ``_resolve_depends_on_urns``, ``_expand_dependencies``, ``_create_provider_ref``, ``convert_providers``,
  ``_translate_ignore_changes`` and ``_translate_replace_on_changes`` (``runtime/resource.py:203-317``, ``1220-1229``);
- the answer: :meth:`offline.pulumi_runtime.RecordingMonitor.answer`, what ``MockMonitor.RegisterResource`` answers
  (``runtime/mocks.py:308-334``), with the registration recorded as the request would have been.

Everything else (the root stack, a remote component, a package reference, transforms, hooks, imports,
``deleted_with``, ``replace_with``, a replacement trigger, custom timeouts, a deployment that is not a preview)
takes the SDK's ``register_resource`` unchanged. Aliases and additional secret outputs, which only the engine
reads and the mocks leave alone, are made by the SDK's helpers for their errors. It reaches private names of the
SDK (``rpc.transfer_properties``, ``rpc._expand_dependencies``, ``_types`` helpers, ...): held to the SDK's public
path, every registration through ``MockMonitor.RegisterResource``, by ``tests/test_engine_differential.py``.
"""

from __future__ import annotations

import asyncio
import functools
from collections import abc
from typing import Any, get_args, get_origin

import pulumi
from google.protobuf import struct_pb2
from pulumi import _types
from pulumi.runtime import resource as runtime_resource
from pulumi.runtime import rpc, settings
from pulumi.runtime._depends_on import _resolve_depends_on_urns
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import _get_rpc_manager

from offline import lazy_outputs

SDK_REGISTER = runtime_resource.register_resource
_IDENTITY = pulumi.Resource.translate_input_property  # returns the name as it is; a resource may override it
_DICTS = (dict, abc.Mapping)


class _Fallback(Exception):
    """A value the walk leaves to the SDK's own serializer."""


class _Pending(Exception):
    """An output not resolved yet: awaited, then the walk starts again."""

    def __init__(self, future: asyncio.Future):
        super().__init__()
        self.future = future


def _handled(ty: str, custom: bool, remote: bool, opts: pulumi.ResourceOptions | None, package_ref) -> bool:
    """Options whose whole effect is the engine's to give (the module docstring lists the rest)."""
    return (opts is not None and not remote and package_ref is None and ty != "pulumi:pulumi:Stack"
            and not opts.transforms and not opts.state_migrations and _no_hooks(opts.hooks)
            and opts.import_ is None and opts.deleted_with is None and not opts.replace_with
            and opts.replacement_trigger is None and opts.custom_timeouts is None
            and settings.is_dry_run() and not settings.is_legacy_apply_enabled())


_HOOKS = ("before_create", "after_create", "before_update", "after_update", "before_delete", "after_delete",
          "on_error")


def _no_hooks(hooks) -> bool:
    """No hook to register: ``_prepare_resource_hooks`` (runtime/resource.py:1537-1596) makes an empty binding
    (the providers' generated code passes an empty ``ResourceHookBinding``)."""
    return not hooks or not any(getattr(hooks, kind, None) for kind in _HOOKS)


def register_resource(res, ty, name, custom, remote, new_dependency, props, opts, typ=None, package_ref=None):
    """``pulumi.runtime.resource.register_resource``, the engine's way for what it handles (module docstring)."""
    monitor = settings.get_monitor()
    answer = getattr(monitor, "answer", None)
    if answer is None or not getattr(monitor, "shortcuts", False) or not _handled(ty, custom, remote, opts,
                                                                                    package_ref):
        return SDK_REGISTER(res, ty, name, custom, remote, new_dependency, props, opts, typ, package_ref)
    # runtime/resource.py:1141-1151: the URN, the id and every property an output resolved later.
    resolve_urn, res.__dict__["urn"] = runtime_resource.resource_output(res)
    resolve_id = None
    if custom:
        resolve_id, res.__dict__["id"] = runtime_resource.resource_output(res)
    lazy = _lazy(res, props, custom, typ)
    resolvers = {} if lazy is not None else transfer_properties(res, props, custom)

    async def do_register() -> None:
        try:
            try:
                prepared = await _prepare(res, ty, custom, props, opts, typ)
            except ValueError as e:  # runtime/resource.py:1190-1199
                raise ValueError(f"While processing resource: {name!r}, type: {ty!r}\n"
                                 f"ValueError has risen: {e}") from e
            except AssertionError as e:
                raise AssertionError(f"While processing resource: {name!r}, type {ty!r}\n"
                                     f"AssertionError has risen: {e}") from e
            parent_urn, inputs, plain, dependencies, provider_ref = prepared
            ignore_changes = runtime_resource._translate_ignore_changes(res, typ, opts.ignore_changes)
            replace_on_changes = runtime_resource._translate_replace_on_changes(res, typ, opts.replace_on_changes)
            # Sent to the engine, which the mocks leave alone (mocks.py:308-334): computed for their errors only.
            secret_outputs = runtime_resource._translate_additional_secret_outputs(res, typ,
                                                                                   opts.additional_secret_outputs)
            _check_options(opts, ignore_changes, secret_outputs, replace_on_changes)
            response = answer(type_=ty, name=name, parent=parent_urn or "", custom=custom,
                              provider=provider_ref or "", inputs=inputs, plain=plain,
                              protect=bool(opts.protect), retain_on_delete=bool(opts.retain_on_delete),
                              dependencies=tuple(dependencies), ignore_changes=tuple(ignore_changes or ()),
                              replace_on_changes=tuple(replace_on_changes or ()))
        except Exception as exn:  # runtime/resource.py:1361-1369
            rpc.resolve_outputs_due_to_exception(resolvers, exn)
            if lazy is not None:
                lazy.failed(exn)
            resolve_urn(None, True, False, exn)
            if resolve_id is not None:
                resolve_id(None, True, False, exn)
            raise
        urn_done = id_done = False
        try:  # runtime/resource.py:1388-1413 (a preview: no unknown outputs, the inputs not merged in)
            resolve_urn(response.urn, True, False, None)
            urn_done = True
            if resolve_id is not None:
                resolve_id(response.id, bool(response.id), False, None)
                id_done = True
            read = None if lazy is None else lazy_outputs.answer_of(res, response.object)
            if read is not None:
                lazy.answered(read)
            else:
                if lazy is not None:  # a translation that may fail: every output made, the SDK's path for all
                    resolvers.update(lazy.every(props))
                rpc.resolve_outputs(res, struct_pb2.Struct(), response.object, {}, resolvers, custom,
                                    typ is not None, True, resolve_missing_as_unknown=False)
        except Exception as exn:  # runtime/resource.py:1415-1424
            rpc.resolve_outputs_due_to_exception(resolvers, exn)
            if lazy is not None:
                lazy.failed(exn)
            if not urn_done:
                resolve_urn(None, True, False, exn)
            if resolve_id is not None and not id_done:
                resolve_id(None, True, False, exn)
            raise

    asyncio.ensure_future(_get_rpc_manager().do_rpc("register resource", do_register)())


def _check_options(opts, ignore_changes, secret_outputs, replace_on_changes) -> None:
    """The options' fields of the SDK's ``RegisterResourceRequest`` (runtime/resource.py:1300-1340, the same
    keywords in its order), made for protobuf's checks of their types: a ``protect="yes"`` or an ``ignore_changes``
    of numbers fails the resource with the SDK's ``TypeError``, where the engine would record it. Built only when
    a value is not of its field's type already (7 us a resource otherwise)."""
    if (type(opts.protect) in _FLAG and type(opts.retain_on_delete) in _FLAG
            and type(opts.delete_before_replace) in _FLAG and type(opts.version or "") is str
            and type(opts.plugin_download_url or "") is str and not opts.hide_diffs and not opts.env_var_mappings
            and _strings(ignore_changes) and _strings(secret_outputs) and _strings(replace_on_changes)):
        return
    resource_pb2.RegisterResourceRequest(
        protect=opts.protect, deleteBeforeReplace=opts.delete_before_replace or False,
        deleteBeforeReplaceDefined=opts.delete_before_replace is not None, ignoreChanges=ignore_changes,
        version=opts.version or "", pluginDownloadURL=opts.plugin_download_url or "",
        additionalSecretOutputs=secret_outputs, replaceOnChanges=replace_on_changes or [],
        retainOnDelete=opts.retain_on_delete, hideDiffs=opts.hide_diffs, envVarMappings=opts.env_var_mappings or {})


_FLAG = (bool, type(None))


def _strings(values) -> bool:
    return values is None or (type(values) is list and all(type(v) is str for v in values))


def transfer_properties(res, props, custom: bool) -> dict[str, Any]:
    """``rpc.transfer_properties`` (rpc.py:1187-1247): an output on ``res`` for each property, resolved later by
    its resolver ``(value, is_known, is_secret, deps, failed)``, but one future per property where the SDK makes
    four and a task that gathers them (``Output.__init__``, output.py:139-156). The SDK's task builds the
    ``_OutputData`` from the four; here the resolver builds it, from the same values: the dependencies and the
    resource itself, the value, known and secret, or the resolver's exception (rpc.py:1204-1226)."""
    resolvers: dict[str, Any] = {}
    for name in props:
        if name == "urn" or (name == "id" and custom):
            continue  # rpc.py:1195-1197: handled apart
        data: asyncio.Future = asyncio.Future()
        resolvers[name] = functools.partial(lazy_outputs.resolve_data, res, data)
        res.__dict__[name] = pulumi.Output._from_data(data)
    return resolvers


def _lazy(res, props, custom: bool, typ) -> lazy_outputs.LazyOutputs | None:
    """The resource's ``__dict__`` made a :class:`offline.lazy_outputs.LazyOutputs` holding back every property
    output, for a resource with type metadata whose every property the class reads through a getter; else None."""
    if typ is None:
        return None
    getters = lazy_outputs.getters(type(res))
    order = tuple(name for name in props if not (name == "urn" or (name == "id" and custom)))
    pending = set(order)
    if not pending <= getters:
        return None
    lazy = lazy_outputs.LazyOutputs(res, res.__dict__, pending, order)
    res.__dict__ = lazy
    return lazy


async def _prepare(res, ty, custom, props, opts, typ):
    """``prepare_resource`` (runtime/resource.py:203-317) for a resource :func:`_handled` admits: the parent URN,
    the inputs as the engine reads them, whether they are plain, the dependencies and the provider reference."""
    explicit: set[str] = set()
    if opts.depends_on is not None:  # runtime/resource.py:213-217
        explicit = await _resolve_depends_on_urns(opts._depends_on_list(), from_resource=res)
    inputs, property_deps, plain = await _inputs(res, props, typ)
    parent_urn = ""  # runtime/resource.py:245-253
    if opts.parent is not None:
        parent_urn = await opts.parent.urn.future()
    else:
        root = settings.get_root_resource()
        if root is not None:
            parent_urn = await root.urn.future()
    provider_ref = None  # runtime/resource.py:255-267 (not remote)
    if custom and opts.provider is not None:
        provider_ref = await runtime_resource._create_provider_ref(opts.provider)
    if not custom:  # runtime/resource.py:269-275: awaited (a failed provider fails the component), not recorded
        for provider in runtime_resource.convert_providers(opts.provider, opts.providers).values():
            await runtime_resource._create_provider_ref(provider)
    dependencies = set(explicit)  # runtime/resource.py:277-282
    for deps in property_deps.values():
        dependencies |= set((await rpc._expand_dependencies(deps, from_resource=res)).keys())
    # runtime/resource.py:288-291: aliases go to the engine, which the mocks leave alone; made for their errors.
    await runtime_resource.prepare_aliases(
        res, opts, settings.monitor_supports_feature(resource_pb2.RESOURCE_MONITOR_FEATURE_ALIAS_SPECS))
    return parent_urn, inputs, plain, dependencies, provider_ref


async def _inputs(res, props, typ) -> tuple[dict[str, Any], dict[str, list], bool]:
    """The resource's inputs as ``rpc.serialize_properties`` (rpc.py:163-256) sends them and the engine reads them
    back, the resources each property depends on, and whether the engine's walk made them (plain)."""
    translate = res.translate_input_property if typ is None else None  # runtime/resource.py:225-227
    while True:
        try:
            inputs, property_deps = _serialize_top(res, props, translate, typ)
            return inputs, property_deps, True
        except _Pending as pending:
            await asyncio.wait([pending.future])  # its result (or its error) is read by the next walk
        except _Fallback:
            break
    property_deps: dict[str, list] = {}
    struct = await rpc.serialize_properties(props, property_deps, res, translate, typ, keep_output_values=False,
                                            exclude_resource_refs_from_deps=False)
    return rpc.deserialize_properties(struct), property_deps, False  # as MockMonitor reads it (mocks.py:317)


_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def struct_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """The order a dict with ``keys`` (in this order) reads back in after the SDK's path: written into a Struct
    (``rpc.serialize_properties``, ``struct[k] = v``; a nested dict by ``Struct.update``), copied into the
    request or response message, read by ``rpc.deserialize_properties``. Protobuf's map (upb's hash table)
    does not keep insertion order, and a manifest is written in its object's order; found once per key
    sequence by protobuf itself."""
    order = _ORDERS.get(keys)
    if order is None:
        struct = struct_pb2.Struct()
        struct.update({"k": dict.fromkeys(keys)})
        copied = resource_pb2.RegisterResourceRequest(object=struct).object
        order = _ORDERS[keys] = tuple(copied.fields["k"].struct_value.fields)
    return order


def ordered(value: dict) -> dict:
    """``value`` in :func:`struct_order`: the same object if that is its order already."""
    keys = tuple(value)
    order = struct_order(keys)
    return value if order == keys else {k: value[k] for k in order}


def _serialize_top(res, props, translate, typ):
    # rpc.py:214-254
    if translate is not None and getattr(translate, "__func__", None) is not _IDENTITY:
        raise _Fallback
    get_type = _no_type
    if typ is not None:
        names = _types.input_type_py_to_pulumi_names(typ)
        types = _types.input_type_types(typ)
        translate = _translator(names)
        get_type = lambda k: types.get(translate(k))  # noqa: E731 (as the SDK's)
    out: dict[str, Any] = {}
    property_deps: dict[str, list] = {}
    for k in props:
        deps: list = []
        value = _serialize(props[k], deps, _unwrap(get_type(k)))
        if value is not None:
            key = translate(k) if translate is not None else k
            if type(key) is not str:
                raise _Fallback
            out[key] = value
            property_deps[key] = deps
    return ordered(out), property_deps


def _no_type(_key):
    return None


def _translator(names: dict[str, str]):
    return lambda k: names.get(k) or k


_UNWRAPPED: dict[Any, Any] = {}
_ELEMENTS: dict[Any, Any] = {}


def _unwrap(typ):
    """``_types.unwrap_type`` (rpc.py:399), remembered per type; ``Any`` as ``None`` (rpc.py:436-437)."""
    if typ is None:
        return None
    try:
        return _UNWRAPPED[typ]
    except KeyError:
        unwrapped = _types.unwrap_type(typ)
        _UNWRAPPED[typ] = None if unwrapped is Any else unwrapped
        return _UNWRAPPED[typ]
    except TypeError:  # unhashable
        unwrapped = _types.unwrap_type(typ)
        return None if unwrapped is Any else unwrapped


def _element_type(typ):
    """``rpc._get_list_element_type`` (rpc.py:143), remembered per type."""
    if typ is None:
        return None
    try:
        return _ELEMENTS[typ]
    except KeyError:
        try:
            element = rpc._get_list_element_type(typ)
        except AssertionError:
            raise _Fallback from None  # the SDK raises it, with its wrapping
        _ELEMENTS[typ] = element
        return element
    except TypeError:
        raise _Fallback from None


def _serialize(value: Any, deps: list, typ) -> Any:
    """``rpc.serialize_property(value, deps, key, res, identity, typ)`` (rpc.py:355-824) as the engine reads it back
    from the request's Struct, for the values the module docstring lists; raises :class:`_Fallback` for any other
    and :class:`_Pending` for an output not resolved yet. ``typ`` is already unwrapped."""
    kind = type(value)
    if kind is str:
        if value == rpc.UNKNOWN:
            raise _Fallback  # read back as an unknown
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        return float(value)  # a Struct's number_value
    if kind is float:
        return value
    if kind is list or kind is tuple:  # rpc.py:441-459
        element = _unwrap(_element_type(typ))
        return [_serialize(v, deps, element) for v in value]
    if kind is dict:
        return _serialize_dict(value, deps, typ)
    if isinstance(value, pulumi.Output):  # rpc.py:648-702
        data_future = value._data
        if not data_future.done():
            raise _Pending(data_future)
        if data_future.cancelled() or data_future.exception() is not None:
            raise _Fallback
        data = data_future.result()
        if not data.is_known or data.is_secret or rpc.contains_unknowns(data.value):
            raise _Fallback
        deps.extend(data.resources)
        inner: list = []
        out = _serialize(data.value, inner, typ)
        deps.extend(inner)
        data.resources.update(inner)  # as the SDK does (rpc.py:670)
        return out
    if _types.is_input_type(kind):  # rpc.py:704-721
        types = _types.input_type_types(kind)
        out = {k: _serialize(v, deps, _unwrap(types.get(k))) for k, v in _types.input_type_to_dict(value).items()}
        return _read_back(out)
    raise _Fallback  # a subclass, a resource, an asset, an unknown, an awaitable, ...


def _serialize_dict(value: dict, deps: list, typ) -> dict:
    """rpc.py:723-786, ``input_transformer`` the identity (the only one :func:`_serialize_top` admits)."""
    get_type, translate = _no_type, None
    if typ is not None:
        case = _types.reduce_discriminated_union(typ, value, _types._py_name_for)
        if case is not None:
            typ = case
        if _types.is_input_type(typ):
            names = _types.input_type_py_to_pulumi_names(typ)
            types = _types.input_type_types(typ)
            translate = _translator(names)
            get_type = types.get
        elif typ is dict or get_origin(typ) in (dict, abc.Mapping):
            args = get_args(typ)
            if len(args) == 2 and args[0] is str:
                element = args[1]
                get_type = lambda _k: element  # noqa: E731
    out = {}
    for k in value:
        key = translate(k) if translate is not None else k
        if type(key) is not str or key == rpc._special_sig_key:
            raise _Fallback
        out[key] = _serialize(value[k], deps, _unwrap(get_type(key)))
    return _read_back(out)


def _read_back(value: dict) -> dict:
    """A dict the SDK writes into a Struct as it is (rpc.py:704-786: a ``None`` becomes a null, a key of the map),
    as ``rpc.deserialize_properties`` reads it back: in :func:`struct_order` of every key written, the nulls among
    them included (they change where the others lie in upb's map), and the nulls dropped."""
    keys = tuple(value)
    order = struct_order(keys)
    if order == keys and None not in value.values():
        return value
    return {k: value[k] for k in order if value[k] is not None}
