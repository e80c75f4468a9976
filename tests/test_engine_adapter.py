"""The offline engine's hold on the Pulumi runtime (offline/pulumi_runtime.py), against the installed Pulumi.

Each test names what a Pulumi upgrade would have broken. Only the Pulumi engine is mocked
(``set_mocks`` with a recording monitor), as in the offline engine itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re

import pulumi
import pulumi.runtime
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2

from offline import pulumi_runtime

UPGRADE = "a Pulumi upgrade changed what offline/pulumi_runtime.py relies on: "


def test_public_runtime_api_is_there():
    exported = set(pulumi.runtime.__all__)
    for name in ("reset_options", "set_mocks", "set_all_config", "test", "get_root_resource", "Mocks", "rpc"):
        assert name in exported, UPGRADE + f"pulumi.runtime.{name} is no longer exported"
    params = inspect.signature(pulumi.runtime.set_mocks).parameters
    for name in ("mocks", "project", "stack", "preview", "monitor"):
        assert name in params, UPGRADE + f"set_mocks() lost its {name!r} parameter"
    params = inspect.signature(pulumi.runtime.reset_options).parameters
    for name in ("project", "stack", "preview"):
        assert name in params, UPGRADE + f"reset_options() lost its {name!r} parameter"
    for name in ("deserialize_properties", "is_rpc_secret", "unwrap_rpc_secret", "wrap_rpc_secret", "UNKNOWN"):
        assert hasattr(rpc, name), UPGRADE + f"pulumi.runtime.rpc.{name} is gone"


def _struct(value: dict) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


@pytest.mark.parametrize("value", [
    {},
    {"name": "v6e-16-0", "nodeCount": 4, "spot": False, "ratio": 0.5, "gone": None,
     "nodeConfig": {"labels": {"a": "b"}, "taints": [{"key": "k", "effect": "NO_SCHEDULE"}], "empty": {},
                    "scopes": [], "holes": [None, "x", None], "nested": [[1, [2]], {"n": None}]}},
    # What the SDK treats specially, at the top and deep down: the engine leaves those to it.
    {"token": rpc.wrap_rpc_secret("s3cret"), "plain": 1},
    {"deep": {"list": [1, {"secret": rpc.wrap_rpc_secret({"a": 1})}]}},
    {"later": rpc.UNKNOWN}, {"deep": [{"later": rpc.UNKNOWN}]},
    {"asset": {rpc._special_sig_key: rpc._special_asset_sig, "text": "hello"}},
    {"ref": {rpc._special_sig_key: rpc._special_resource_sig, "urn": "urn:pulumi:s::p::t::n", "id": "i"}},
], ids=["empty", "plain", "secret", "deep-secret", "unknown", "deep-unknown", "asset", "reference"])
def test_the_engines_deserialization_is_the_sdks(value, request):
    """The engine's own walk of a request's properties (plain data, twice as fast) answers as the SDK's."""
    assert hasattr(rpc, "_special_sig_key"), UPGRADE + "rpc._special_sig_key is gone"
    struct = _struct(value)
    (got, plain), want = pulumi_runtime.deserialize_properties(struct), rpc.deserialize_properties(struct)
    assert _same(got, want), UPGRADE + f"deserialization changed: {got!r} != {want!r}"
    assert plain == (request.node.callspec.id in ("empty", "plain"))


def _same(a, b) -> bool:
    """Equal values, and of the same types (``1.0 == True``; an asset compares by identity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__"):  # an asset or a resource: by its fields
        return _same(vars(a), vars(b))
    return a == b


def test_register_resource_request_has_the_fields_read():
    fields = resource_pb2.RegisterResourceRequest.DESCRIPTOR.fields_by_name
    for name in pulumi_runtime.REQUEST_FIELDS:
        assert name in fields, UPGRADE + f"RegisterResourceRequest has no field {name!r}"
    for name in ("protect", "retainOnDelete"):
        assert fields[name].has_presence, UPGRADE + f"RegisterResourceRequest.{name} is no longer optional"
    assert callable(getattr(MockMonitor, "RegisterResource", None)), UPGRADE + "MockMonitor.RegisterResource is gone"


def test_secrets_and_unknowns_survive_deserialization():
    struct = struct_pb2.Struct()
    struct.update({"token": rpc.wrap_rpc_secret("s3cret"), "later": rpc.UNKNOWN, "plain": 1})
    props = rpc.deserialize_properties(struct)  # as the recording monitor calls it
    assert pulumi_runtime.is_secret(props["token"]), UPGRADE + "secrets no longer deserialize as wrapped secrets"
    assert pulumi_runtime.unwrap_secret(props["token"]) == "s3cret"
    # An unknown input is left out (the rendering then shows no value), or marked unknown: never a raw sentinel.
    assert "later" not in props or pulumi_runtime.is_unknown(props["later"]), UPGRADE + "unknowns changed shape"
    assert not pulumi_runtime.is_secret(props["plain"]) and not pulumi_runtime.is_unknown(props["plain"])
    kept = rpc.deserialize_properties(struct, keep_unknowns=True)["later"]
    assert pulumi_runtime.is_unknown(kept), UPGRADE + "kept unknowns are no longer pulumi.output.Unknown"


class _Echo(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


class _Thing(pulumi.CustomResource):
    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Thing", name, props, opts)


def _deploy(program, stack: str = "adapter"):
    seen: list[pulumi_runtime.Registration] = []
    mocks = _Echo()
    monitor = pulumi_runtime.RecordingMonitor(mocks, seen.append)
    pulumi_runtime.start(mocks, monitor, project="adapter-test", stack=stack, config={"adapter-test:x": "1"})
    exports = pulumi_runtime.run(program)
    return seen, exports


def test_a_program_runs_and_every_registration_is_seen():
    def program():
        assert pulumi.Config("adapter-test").require("x") == "1", "set_all_config did not reach the program"
        parent = pulumi.ComponentResource("test:index:Group", "group")
        thing = _Thing(
            "thing",
            {"size": 2, "token": pulumi.Output.secret("s3cret")},
            pulumi.ResourceOptions(parent=parent, protect=True, retain_on_delete=True),
        )
        pulumi.export("thingId", thing.id)
        pulumi.export("size", 2)

    seen, exports = _deploy(program)
    by_name = {r.name: r for r in seen}
    assert set(by_name) >= {"group", "thing"}, UPGRADE + f"registrations seen: {sorted(by_name)}"
    thing = by_name["thing"]
    assert thing.type == "test:index:Thing" and thing.custom
    assert thing.urn.endswith("::thing") and thing.parent == by_name["group"].urn
    assert thing.protect and thing.retain_on_delete, UPGRADE + "protect/retainOnDelete no longer reach the monitor"
    assert thing.inputs["size"] == 2
    assert pulumi_runtime.is_secret(thing.inputs["token"]), UPGRADE + "secret inputs arrive unwrapped"
    assert not by_name["group"].custom
    assert exports == {"thingId": "thing-id", "size": 2}, UPGRADE + f"stack exports read back as {exports}"


def test_each_start_is_a_fresh_deployment():
    _deploy(lambda: pulumi.export("first", 1), stack="one")
    seen, exports = _deploy(lambda: pulumi.export("second", 2), stack="two")
    assert exports == {"second": 2}, UPGRADE + "exports of an earlier run leak into the next"
    stacks = [r for r in seen if r.type == "pulumi:pulumi:Stack"]
    assert [s.name for s in stacks] == ["adapter-test-two"], UPGRADE + "no fresh root stack per run"


def test_a_failing_program_raises_after_the_rpcs_drain():
    def program():
        _Thing("before", {"n": 1})
        raise pulumi.RunError("bad spec")

    seen: list[pulumi_runtime.Registration] = []
    mocks = _Echo()
    pulumi_runtime.start(mocks, pulumi_runtime.RecordingMonitor(mocks, seen.append), "adapter-test", "fail", {})
    with pytest.raises(pulumi.RunError, match="bad spec"):
        pulumi_runtime.run(program)
    assert "before" in {r.name for r in seen}, UPGRADE + "registrations before the error were not drained"


class _Answering(_Echo):
    """Mocks that answer with more (and less) than the inputs, as the engine's do."""

    def new_resource(self, args):
        state = {k: v for k, v in args.inputs.items() if k != "dropped"}
        return f"{args.name}-id", {**state, "computed": {"endpoint": "E"}, "size": args.inputs["size"] + 1}


def _read_back(obj):
    """What the SDK's ``register_resource`` makes of an answer's ``object`` (unknowns made comparable)."""
    def plain(v):
        if isinstance(v, pulumi.output.Unknown):
            return "<unknown>"
        return {k: plain(x) for k, x in v.items()} if isinstance(v, dict) else \
            [plain(x) for x in v] if isinstance(v, list) else v
    return plain(rpc.deserialize_properties(obj, keep_unknowns=True))


def test_the_recording_monitor_answers_as_the_mock_monitor_would():
    """The engine's own RegisterResource answer (no serialize round trip, no Struct back) reads back in the SDK
    as MockMonitor's does, field for field."""
    request = resource_pb2.RegisterResourceRequest(type="test:index:Thing", name="t", custom=True)
    request.object.update({"size": 2, "dropped": "x", "token": rpc.wrap_rpc_secret("s"), "later": rpc.UNKNOWN,
                           "nested": {"secret": rpc.wrap_rpc_secret("n"), "list": [1, rpc.UNKNOWN]}})
    mocks = _Answering()
    pulumi_runtime.start(mocks, MockMonitor(mocks), project="adapter-test", stack="answer", config={})
    stock = MockMonitor(mocks).RegisterResource(request)
    ours = pulumi_runtime.RecordingMonitor(mocks, lambda reg: None).RegisterResource(request)
    assert (ours.urn, ours.id, ours.result, dict(ours.propertyDependencies)) == \
        (stock.urn, stock.id, stock.result, dict(stock.propertyDependencies))
    assert _read_back(ours.object) == _read_back(stock.object), UPGRADE + \
        "MockMonitor.RegisterResource answers differently from the engine's faster copy"
    assert _read_back(ours.object)["computed"] == {"endpoint": "E"} and _read_back(ours.object)["size"] == 3


def test_register_resource_reads_only_what_the_answer_has():
    """The SDK reads these fields of a RegisterResource response, and deserializes ``object``: an
    :class:`offline.pulumi_runtime.Answer` has each, its ``object`` already deserialized."""
    from pulumi.runtime import resource as runtime_resource

    source = inspect.getsource(runtime_resource.register_resource)
    read = set(re.findall(r"\bresp\.(\w+)", source))
    answer = {f.name for f in dataclasses.fields(pulumi_runtime.Answer)}
    assert read <= answer, UPGRADE + f"register_resource reads {sorted(read - answer)} of a response"
    assert "deserialize_properties(outputs" in inspect.getsource(rpc.resolve_outputs), UPGRADE + \
        "resolve_outputs no longer deserializes the response's object"


def test_what_runs_lean_is_there():
    """The engine skips the SDK's source positions while a program runs (no engine reads them offline), answers
    the SDK's type analysis from a cache, and runs monitor calls inline; all of it is put back after."""
    from pulumi.runtime import resource as runtime_resource

    assert callable(getattr(runtime_resource, "_get_stack_trace", None)), UPGRADE + "_get_stack_trace is gone"
    assert "_get_stack_trace()" in inspect.getsource(runtime_resource.register_resource), UPGRADE + \
        "register_resource no longer gets its stack trace from _get_stack_trace"
    originals = {name: getattr(module, name, None) for module, name in pulumi_runtime.MEMOIZED}
    for (module, name), function in zip(pulumi_runtime.MEMOIZED, originals.values(), strict=True):
        assert callable(function), UPGRADE + f"{module.__name__}.{name} is gone"
    seen_loops = []
    original = runtime_resource._get_stack_trace
    _deploy(lambda: seen_loops.append(asyncio.get_event_loop()) or _Thing("t", {"n": 1}))
    assert runtime_resource._get_stack_trace is original, "the engine did not put the SDK back"
    assert {name: getattr(module, name) for module, name in pulumi_runtime.MEMOIZED} == originals, \
        "the engine did not put the SDK's type analysis back"
    assert isinstance(seen_loops[0], pulumi_runtime._InlineLoop), "the program ran on another event loop"


def test_memoized_type_analysis_answers_as_the_sdk():
    """Each memoized function answers as the SDK's own for the types the providers use."""
    import pulumi_gcp as gcp
    from pulumi import _types as pulumi_types

    node_pool_types = pulumi_types.resource_types(gcp.container.NodePool)
    cached = {name: pulumi_runtime._memoized(getattr(module, name)) for module, name in pulumi_runtime.MEMOIZED}
    assert cached["resource_types"](gcp.container.NodePool) == node_pool_types
    assert cached["resource_types"](gcp.container.NodePool) == node_pool_types  # from the cache
    for typ in node_pool_types.values():
        for _ in range(2):
            assert cached["unwrap_type"](typ) == pulumi_types.unwrap_type(typ)
            assert cached["unwrap_optional_type"](typ) == pulumi_types.unwrap_optional_type(typ)
    # The node pool's nested input types and their output twins: names, types and properties as the SDK's.
    for typ in (gcp.container.NodePoolNodeConfigArgs, gcp.container.NodePoolAutoscalingArgs):
        for _ in range(2):
            assert cached["input_type_types"](typ) == pulumi_types.input_type_types(typ)
            assert cached["input_type_py_to_pulumi_names"](typ) == pulumi_types.input_type_py_to_pulumi_names(typ)
            assert cached["_py_properties"](typ) == pulumi_types._py_properties(typ)
    for typ in (gcp.container.outputs.NodePoolNodeConfig, gcp.container.outputs.NodePoolAutoscaling):
        for _ in range(2):
            assert cached["output_type_types"](typ) == pulumi_types.output_type_types(typ)
            assert cached["_py_properties"](typ) == pulumi_types._py_properties(typ)


def test_the_programs_log_reaches_the_engines_logger():
    import logging

    records: list[logging.LogRecord] = []
    logger = logging.Logger("adapter-test", logging.INFO)
    logger.addHandler(type("H", (logging.Handler,), {"emit": lambda self, r: records.append(r)})())
    mocks = _Echo()
    pulumi_runtime.start(mocks, pulumi_runtime.RecordingMonitor(mocks, lambda reg: None), "adapter-test", "log", {},
                         logger=logger)
    pulumi_runtime.run(lambda: pulumi.log.warn("careful"))
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.WARNING, "careful")], \
        UPGRADE + "pulumi.log no longer reaches the mocks' logger"


class _Bare:
    """Stands in for a resource where only its ``__dict__`` and identity are used (the resolvers' target)."""

    def __init__(self, name: str):
        self._name = name


@pytest.mark.parametrize("resolution", [
    ("plain", {"size": 2.0}, True, False),
    ("unknown in preview", None, False, False),
    ("secret", "s3cret", True, True),
    ("holds an unknown", [1, pulumi.output.UNKNOWN], True, False),
    ("failed", RuntimeError("refused"), None, None),
], ids=lambda r: r[0])
def test_lean_outputs_hold_what_the_sdks_hold(resolution):
    """The engine's per-property outputs (one future each, no task) resolve, fail and leave the run's set of
    outstanding outputs exactly as the SDK's do: every field of the SDK's output state is compared."""
    from pulumi.runtime.settings import SETTINGS

    _, value, known, secret = resolution
    pulumi_runtime._ensure_event_loop()
    loop = asyncio.get_event_loop()
    dep = _Bare("dep")
    states = []
    for transfer, track in ((rpc.transfer_properties, pulumi.Output._track),
                            (pulumi_runtime._transfer_properties, pulumi_runtime._track)):
        original = pulumi.Output._track
        pulumi.Output._track = track
        try:
            res = _Bare("thing")
            resolvers = transfer(res, {"urn": None, "id": None, "size": None}, True)
        finally:
            pulumi.Output._track = original
        assert set(resolvers) == {"size"}, "urn and id are the SDK's to resolve"
        out = res.__dict__["size"]
        assert out._data in SETTINGS.outputs, "an output's state is outstanding until it completes"
        if isinstance(value, Exception):
            resolvers["size"](None, False, False, {dep}, value)
            with pytest.raises(RuntimeError, match="refused"):
                loop.run_until_complete(out._data)
            assert out._data in SETTINGS.outputs, "a failed output stays for the run to raise"
            SETTINGS.outputs.discard(out._data)
            states.append("failed")
            continue
        resolvers["size"](value, known, secret, {dep}, None)
        data = loop.run_until_complete(out._data)
        loop.run_until_complete(asyncio.sleep(0))  # the done callbacks
        assert out._data not in SETTINGS.outputs, "a completed output is no longer outstanding"
        state = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)}
        state["resources"] = sorted(r._name for r in state["resources"])  # each round has its own resource
        states.append(state)
    sdk, lean = states
    assert lean == sdk, UPGRADE + "the SDK's output state changed shape or meaning"
    if isinstance(sdk, dict):
        assert sdk["resources"] == ["dep", "thing"]


def test_the_replaced_sdk_functions_are_there():
    """What the engine replaces while a program runs exists where it replaces it, and is put back after."""
    from pulumi.runtime import resource as runtime_resource

    for owner, name, _ in pulumi_runtime.REPLACED:
        assert callable(owner.__dict__.get(name)), UPGRADE + f"{owner.__name__}.{name} is gone"
    assert "rpc.transfer_properties(res, props, custom)" in inspect.getsource(runtime_resource.register_resource), \
        UPGRADE + "register_resource no longer makes its outputs with rpc.transfer_properties"
    assert callable(getattr(pulumi.Output, "_from_data", None)), UPGRADE + "Output._from_data is gone"
    before = {name: owner.__dict__[name] for owner, name, _ in pulumi_runtime.REPLACED}
    _deploy(lambda: _Thing("t", {"n": 1}))
    assert {name: owner.__dict__[name] for owner, name, _ in pulumi_runtime.REPLACED} == before
