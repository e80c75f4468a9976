"""The offline engine's hold on the Pulumi runtime (offline/pulumi_runtime.py), against the installed Pulumi.

Each test names what a Pulumi upgrade would have broken. Only the Pulumi engine is mocked
(``set_mocks`` with a recording monitor), as in the offline engine itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import signal
import threading

import pulumi
import pulumi.runtime
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2

from offline import pulumi_runtime

UPGRADE = "a Pulumi upgrade changed what offline/pulumi_runtime.py relies on: "
# A run whose answer never comes waits for good: a registration's exception dropped on its way to the SDK (a
# future answered with None instead, rev-pview's mutation of ``_InlineFirst.submit``) hung the test rather than
# failing it. Each test here has this deadline: an interval timer, nothing to pay until it fires, whose signal
# raises in the main thread (where the loop waits; pytest-xdist runs its tests there too). At load 26 every test
# here but the thousand invokes took under 2 s; that one, 15 s, has a deadline of its own (``deadline``).
DEADLINE_S = 20


def deadline(seconds: float):
    """A test's own deadline, for one that renders more than a few resources."""
    def mark(test):
        test.deadline_s = seconds
        return test
    return mark


@pytest.fixture(autouse=True)
def _deadline(request):
    if threading.current_thread() is not threading.main_thread():  # signals reach only the main thread
        yield
        return
    seconds = getattr(request.function, "deadline_s", DEADLINE_S)

    def expired(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s: the run waits on a registration whose answer (or "
                           "error) was lost")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


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


def test_the_answer_has_every_field_of_the_response():
    """The engine's answer stands in for a ``RegisterResourceResponse``: it has each field of the message
    (whatever the SDK reads of it is there); that the SDK reads it back as MockMonitor's is the test above."""
    fields = set(resource_pb2.RegisterResourceResponse.DESCRIPTOR.fields_by_name)
    answer = {f.name for f in dataclasses.fields(pulumi_runtime.Answer)}
    assert fields <= answer, UPGRADE + f"the response has fields the answer lacks: {sorted(fields - answer)}"


def test_what_runs_lean_is_put_back():
    """The engine skips the SDK's source positions and the cyclic collector while a program runs; both are put
    back after, and the program runs on an ordinary event loop (monitor calls on its default executor)."""
    import gc

    from pulumi.runtime import resource as runtime_resource

    assert callable(getattr(runtime_resource, "_get_stack_trace", None)), UPGRADE + "_get_stack_trace is gone"
    seen = []
    original = runtime_resource._get_stack_trace
    assert gc.isenabled()
    _deploy(lambda: seen.append((asyncio.get_event_loop(), runtime_resource._get_stack_trace, gc.isenabled()))
            or _Thing("t", {"n": 1}))
    loop, during, collecting = seen[0]
    assert during is not original and not collecting, "the shortcuts were not on while the program ran"
    assert runtime_resource._get_stack_trace is original and gc.isenabled(), "the engine did not put the SDK back"
    assert type(loop) is type(asyncio.new_event_loop()), "the program ran on a loop of the engine's own"


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


# A program that makes one provider lookup per resource (the review's reproduction, code.md appendix A): a
# data source per slice or per region is ordinary Pulumi, and the SDK's own ``set_mocks`` path renders it.
MANY_INVOKES = """\
import os
import pulumi_gcp as gcp

for i in range(int(os.environ["MANY_INVOKES"])):
    number = gcp.organizations.get_project_output(project_id=f"proj-{i:04d}").number
    gcp.storage.Bucket(f"b{i}", location="US", labels={"n": number})
"""


@deadline(300)
def test_a_program_with_a_thousand_invokes_renders(tmp_path, monkeypatch):
    """Each invoke answers through ``MockMonitor.Invoke``, which waits on the event loop (``_sync_await``):
    monitor calls must not run on the loop's own thread, or each pending one nests a pump of the loop
    (an inline executor did, and ~300 invokes raised RecursionError)."""
    from offline import engine

    program = tmp_path / "__main__.py"
    program.write_text(MANY_INVOKES)
    monkeypatch.setenv("MANY_INVOKES", "1000")
    rendering = engine.render("dev", program=program)
    buckets = rendering.by_type("gcp:storage/bucket:Bucket")
    assert len(buckets) == 1000
    # The engine's mocks answer getProject with its labelled placeholder (offline/engine.py _Mocks.call).
    assert {b.inputs["labels"]["n"] for b in buckets} == {engine.PLACEHOLDER_PROJECT_NUMBER}


def test_registrations_run_on_the_loops_thread_and_invokes_on_the_pool(monkeypatch):
    """With the shortcuts, the engine's own ``RegisterResource`` answer runs on the event loop's thread (no thread
    hand-off per resource); ``MockMonitor.Invoke``, which waits on the loop, still runs on a thread of the pool, and
    without the shortcuts every call does, as the SDK makes them."""
    import threading

    class Echo(_Echo):
        threads: list[tuple[str, str]] = []

        def new_resource(self, args):
            self.threads.append(("register", threading.current_thread().name))
            return super().new_resource(args)

        def call(self, args):
            self.threads.append(("invoke", threading.current_thread().name))
            return {"number": "1"}

    def program():
        for i in range(3):
            number = pulumi.runtime.invoke_output("test:index:getThing", {"i": i}).apply(lambda r: r["number"])
            _Thing(f"t{i}", {"n": number})

    main = threading.current_thread().name
    for shortcuts in (True, False):
        Echo.threads = []
        mocks = Echo()
        monitor = pulumi_runtime.RecordingMonitor(mocks, lambda reg: None, shortcuts=shortcuts)
        pulumi_runtime.start(mocks, monitor, project="adapter-test", stack="threads", config={})
        pulumi_runtime.run(program, shortcuts=shortcuts)
        registers = [t for kind, t in Echo.threads if kind == "register"]
        invokes = [t for kind, t in Echo.threads if kind == "invoke"]
        assert len(registers) == 3 and len(invokes) == 3  # the mocks see three things (not the root stack)
        assert main not in invokes, "an invoke ran on the loop's thread: it would nest a pump of the loop"
        if shortcuts:
            assert registers == [main] * 3, f"registrations ran on {registers}"
        else:
            assert main not in registers, "without the shortcuts every monitor call runs on the pool"


class _Renaming(pulumi.CustomResource):
    def translate_input_property(self, prop: str) -> str:
        return prop.upper()


@pytest.mark.parametrize("value", [
    None, "s", rpc.UNKNOWN, 0, 1.5, True, [], {}, {"a": None},
    {"spec": {"versions": [{"name": "v1", "served": True, "schema": {"type": "object", "n": 2.5,
                                                                    "items": [[], {}, None]}}]}},
    # Not plain: the SDK's own walk (a tuple, a key that is no string, a dict subclass, an Output inside).
    (1, 2), {1: "a"}, {"a": (1,)}, "output",
], ids=lambda v: type(v).__name__ + str(v)[:20])
@pytest.mark.parametrize("transformer", ["none", "identity", "renaming"])
def test_plain_data_serializes_as_the_sdks_walk_serializes_it(value, transformer):
    """The engine answers ``rpc.serialize_property`` for plain data with the value itself: the same as the SDK's
    walk, with no type, with the identity translator a resource has by default, and not taken with one that
    renames keys (nor for anything that is not plain data)."""
    pulumi_runtime._ensure_event_loop()
    if value == "output":
        value = {"o": pulumi.Output.from_input("x")}
    resource = {"none": None, "identity": _Thing, "renaming": _Renaming}[transformer]
    translate = None if resource is None else resource.__new__(resource).translate_input_property

    async def one(serialize):
        deps: list = []
        try:
            return await serialize(value, deps, "k", None, translate), deps
        except Exception as e:  # noqa: BLE001 (a renaming translator fails on a key that is no string, both ways)
            return repr(e), deps

    async def both():
        (sdk, sdk_deps), (ours, ours_deps) = await one(rpc.serialize_property), \
            await one(pulumi_runtime._serialize_property)
        return sdk, ours, sdk_deps, ours_deps

    sdk, ours, sdk_deps, ours_deps = asyncio.get_event_loop().run_until_complete(both())
    assert ours == sdk and ours_deps == sdk_deps
    if transformer == "renaming" and isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        assert ours is not value, "a renaming translator must take the SDK's walk"
    if pulumi_runtime.is_plain(value) and transformer != "renaming":
        assert ours is value, "plain data was not answered as it is"


def test_plain_data_serializes_without_the_sdks_walk_only_while_a_program_runs(monkeypatch):
    """While a program runs with the shortcuts, ``rpc.serialize_property`` is the engine's; it is put back after."""
    original = rpc.serialize_property
    seen = []
    _deploy(lambda: seen.append(rpc.serialize_property) or _Thing("t", {"n": {"a": [1, "b"]}}))
    assert seen == [pulumi_runtime._serialize_property] and rpc.serialize_property is original


@pytest.mark.parametrize("kind", ["args", "dict"])
def test_plain_data_with_a_type_takes_the_sdks_walk(kind):
    """With type metadata (``typ``: a pulumi-gcp ``...Args`` input type, or a ``dict[str, T]``) the SDK's walk
    translates keys by the type (rpc.serialize_property's ``is_input_type(typ)`` branch): a plain dict with a
    type is not answered as it is."""
    from pulumi_gcp.container import NodePoolAutoscalingArgs  # an @input_type: keys become the schema's camelCase

    typ = {"args": NodePoolAutoscalingArgs, "dict": dict[str, int]}[kind]
    pulumi_runtime._ensure_event_loop()
    value = {"min_node_count": 1, "total_max_node_count": 4}

    async def both():
        return (await rpc.serialize_property(value, [], "autoscaling", None, None, typ),
                await pulumi_runtime._serialize_property(value, [], "autoscaling", None, None, typ))

    sdk, ours = asyncio.get_event_loop().run_until_complete(both())
    assert ours == sdk
    if kind == "args":
        assert sdk == {"minNodeCount": 1, "totalMaxNodeCount": 4}


@pytest.mark.parametrize("shortcuts", [True, False])
def test_a_mock_that_raises_fails_the_run_the_same_way_inline_or_not(shortcuts):
    """A registration answered on the loop's thread (``_InlineFirst``) hands its exception to the SDK as a pool's
    worker does: the run raises the mock's own error, and the other resources are still registered."""
    class Refusing(_Echo):
        def new_resource(self, args):
            if args.name == "t1":
                raise ValueError("the mock refused t1")
            return super().new_resource(args)

    def program():
        for i in range(3):
            _Thing(f"t{i}", {"n": i})

    mocks, registered = Refusing(), []
    monitor = pulumi_runtime.RecordingMonitor(mocks, registered.append, shortcuts=shortcuts)
    pulumi_runtime.start(mocks, monitor, project="adapter-test", stack="refusing", config={})
    with pytest.raises(ValueError, match="the mock refused t1"):
        pulumi_runtime.run(program, shortcuts=shortcuts)
    names = sorted(r.name for r in registered)
    if shortcuts:  # answered on the loop's thread: every other registration is done when the run raises
        assert names == ["adapter-test-refusing", "t0", "t2"]
    else:  # the pool's workers: the run raises as soon as t1 fails, t0's or t2's answer may still be in flight
        assert "t1" not in names and {"adapter-test-refusing"} <= set(names) <= {"adapter-test-refusing", "t0", "t2"}
