"""A typed resource's outputs made and translated when first read (``offline/lazy_outputs.py``) against the SDK's
``resolve_outputs``, which translates every one when the engine answers: the same value, type and known-ness of
every property, read before the answer or after it, the same dict when walked, and the SDK's error for a
translation that fails, read or not. Only the Pulumi engine is mocked, as in the engine itself (``set_mocks``);
``shortcuts=False`` is the SDK's plain path.
"""

from __future__ import annotations

import asyncio
import enum
import json
from typing import Any

import pulumi
import pytest
from pulumi import _types
from pulumi.runtime import rpc

from offline import lazy_outputs, pulumi_runtime


class _Echo(pulumi.runtime.Mocks):
    def new_resource(self, args):
        if args.name == "boom":
            raise RuntimeError("the mock refused boom")
        return f"{args.name}-id", {**args.inputs, "name": args.inputs.get("name", args.name)}

    def call(self, args):
        return {}


def _deploy(program, shortcuts: bool) -> str:
    mocks = _Echo()
    monitor = pulumi_runtime.RecordingMonitor(mocks, lambda _reg: None, shortcuts=shortcuts)
    pulumi_runtime.start(mocks, monitor, project="lazy-test", stack="diff", config={})
    return json.dumps(pulumi_runtime.run(program, shortcuts=shortcuts), sort_keys=True)


def _plainly(value: Any) -> Any:
    """A value as the program sees it, with the type of every object in it (an output type's class included)."""
    if _types.is_output_type(type(value)):
        return [type(value).__qualname__,
                {name: _plainly(getattr(value, name)) for name, _, _ in _types._py_properties(type(value))}]
    if isinstance(value, dict):
        return ["dict", {k: _plainly(v) for k, v in value.items()}]
    if isinstance(value, list):
        return ["list", [_plainly(v) for v in value]]
    return [type(value).__name__, value]


async def _seen(output: pulumi.Output) -> list:
    data = await output._data
    return [_plainly(data.value), data.is_known, data.is_secret, sorted(r._name for r in data.resources)]


def _pool(name: str = "pool", **extra):
    import pulumi_gcp as gcp

    return gcp.container.NodePool(
        name, cluster="c", location="us-east5-b", node_count=4,
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type="ct6e-standard-4t", labels={"a_b": "c"}, oauth_scopes=["scope"],
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(key="k", value="v", effect="NO_SCHEDULE")],
            reservation_affinity=gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type="SPECIFIC_RESERVATION", key="k", values=["r"]),
            advanced_machine_features={"threads_per_core": 1}),
        autoscaling={"min_node_count": 0, "max_node_count": 4, "location_policy": "ANY"},
        placement_policy={"type": "COMPACT", "tpu_topology": "4x4"},
        management={"auto_repair": True, "auto_upgrade": True}, **extra)


PROPERTIES = ("autoscaling", "cluster", "initial_node_count", "location", "management", "name", "node_config",
              "node_count", "placement_policy", "project", "network_config", "version", "node_locations")
# Read in the program's body, before the engine answers; the others once it has (inside a callback of the answer).
EARLY = ("node_config", "name", "version")


def _every_property(made: list):
    """Every property of a typed pool read: some before the answer, the rest after it, each exported as the program
    sees it (its value with every type in it, known, secret, its resources)."""
    pool = _pool()
    made.append(pool)
    for prop in EARLY:
        pulumi.export(prop, pulumi.Output.from_input(_seen(getattr(pool, prop))))
    late = pool.urn.apply(lambda _: pulumi.Output.all(**{p: pulumi.Output.from_input(_seen(getattr(pool, p)))
                                                         for p in PROPERTIES if p not in EARLY}))
    pulumi.export("late", late)


def test_every_property_reads_as_the_sdks_before_and_after_the_answer():
    ours: list = []
    sdks: list = []
    fast = _deploy(lambda: _every_property(ours), shortcuts=True)
    plain = _deploy(lambda: _every_property(sdks), shortcuts=False)
    assert fast == plain
    exported = json.loads(fast)
    assert exported["node_config"][0][1]["taints"][1][0][0] == "NodePoolNodeConfigTaint", exported["node_config"]
    assert exported["late"]["autoscaling"][1] is True and exported["version"][1] is False  # known; absent: unknown
    # The engine's way was taken, the answer read without the SDK's resolve_outputs; the SDK's is a plain dict.
    lazy = vars(ours[0])
    assert type(lazy) is lazy_outputs.LazyOutputs and lazy._answer is not None and not lazy._waiting
    assert type(vars(sdks[0])) is dict


def test_an_unread_property_is_never_made():
    made: list = []

    def program():
        pool = _pool()
        made.append(pool)
        pulumi.export("name", pool.name)

    _deploy(program, shortcuts=True)
    lazy = vars(made[0])
    assert {"node_config", "autoscaling", "management"} <= lazy._pending
    assert "name" not in lazy._pending and isinstance(dict.get(lazy, "name"), pulumi.Output)


def test_a_walk_of_the_resources_dict_sees_the_sdks():
    """Anything that walks ``vars(resource)`` makes every output first: the same keys, in the same order."""
    walked = {}

    def program(shortcuts):
        pool = _pool()
        pulumi.export("keys", list(vars(pool)))
        walked[shortcuts] = (list(vars(pool).keys()), len(vars(pool)), sorted(k for k, _ in vars(pool).items()),
                             "node_config" in vars(pool))
        walked[shortcuts, "reversed"] = list(reversed(vars(_pool(f"{shortcuts}"))))  # dict's own __reversed__

    assert _deploy(lambda: program(True), True) == _deploy(lambda: program(False), False)
    assert walked[True] == walked[False]
    assert walked[True, "reversed"] == walked[False, "reversed"]


@pytest.mark.parametrize("read", ["unread", "read-early", "read-late"])
@pytest.mark.parametrize("case", ["list-as-dict", "nan-as-int", "registration-fails"])
def test_a_failure_is_the_sdks_whether_read_or_not(case, read):
    """A translation that would fail (a dict where the type wants a list) fails the resource as the SDK's does, read
    or not, through the SDK's ``resolve_outputs``; a failed registration fails every output, made before or after."""
    def program():
        import pulumi_gcp as gcp

        if case == "list-as-dict":
            pool = gcp.container.NodePool("p", cluster="c", node_config={"oauth_scopes": {"not": "a list"}})
        elif case == "nan-as-int":  # int(float("nan")) raises in the SDK's translation (rpc.py:1406-1407)
            pool = gcp.container.NodePool("p", cluster="c", node_count=float("nan"))
        else:
            pool = _pool("boom")
        if read == "read-early":
            pulumi.export("n", pool.node_config.apply(lambda c: c.oauth_scopes))
        elif read == "read-late":
            pulumi.export("n", pool.urn.apply(lambda _: pool.name))

    errors = []
    for shortcuts in (True, False):
        with pytest.raises(Exception) as caught:  # noqa: PT011 (compared below, type and text)
            _deploy(program, shortcuts=shortcuts)
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]
    expected = {"list-as-dict": "Unexpected type", "nan-as-int": "cannot convert float NaN to integer",
                "registration-fails": "the mock refused boom"}
    assert expected[case] in errors[0][1]


def test_outputs_made_before_a_failure_or_after_it_fail_with_it():
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        res = object.__new__(pulumi.CustomResource)
        lazy = lazy_outputs.LazyOutputs(res, {}, {"a", "b"})
        before = lazy.get("a")
        boom = RuntimeError("boom")
        lazy.failed(boom)
        after = lazy["b"]
        for output in (before, after):
            assert output._data.exception() is boom
        assert not lazy._pending and "a" in lazy
        with pytest.raises(KeyError):
            lazy["c"]
    finally:
        asyncio.set_event_loop(None)
        loop.close()


class _Colour(str, enum.Enum):  # noqa: UP042 (as the providers generate their enums)
    RED = "red"


@pulumi.output_type
class _Typed:
    def __init__(self, colour: _Colour | None = None, items: list[str] | None = None,
                 labels: dict[str, str] | None = None):
        pulumi.set(self, "colour", colour)
        pulumi.set(self, "items", items)
        pulumi.set(self, "labels", labels)

    @property
    @pulumi.getter
    def colour(self) -> _Colour | None:
        return pulumi.get(self, "colour")

    @property
    @pulumi.getter
    def items(self) -> list[str] | None:
        return pulumi.get(self, "items")

    @property
    @pulumi.getter
    def labels(self) -> dict[str, str] | None:
        return pulumi.get(self, "labels")


@pulumi.output_type
class _Refuses:
    def __init__(self, x=None):
        raise TypeError("this output type refuses to be built")

    @property
    @pulumi.getter
    def x(self) -> str | None:
        return pulumi.get(self, "x")


_CASES = [
    ("s", str), (1.0, int), (True, bool), (None, str), ("red", _Colour), ("blue", _Colour), ({"a": "b"}, str),
    (["a"], dict[str, str]), ({"items": ["a"], "colour": "red", "labels": {"k": "v"}}, _Typed),
    ({"items": {"not": "a list"}}, _Typed), ({"colour": "green"}, _Typed), ({"labels": ["x"]}, _Typed),
    ({"x": "y"}, _Refuses), ([{"colour": "red"}], list[_Typed]), ({"k": ["v"]}, dict[str, list[str]]),
    ({"k": {"v": 1.0}}, None), ([1.0, "a", [None]], None), ({rpc._special_sig_key: rpc._special_secret_sig,
                                                            "value": "s"}, str),
    (rpc.UNKNOWN, str), ({"a": 1.0}, _Typed | None), (float("nan"), int), (float("inf"), int),
    ({"n": [float("-inf")]}, dict[str, list[int]]), (float("nan"), float),
]


@pytest.mark.parametrize(("value", "typ"), _CASES, ids=[str(i) for i in range(len(_CASES))])
def test_translates_says_yes_only_where_the_sdk_translates(value, typ):
    """:func:`offline.lazy_outputs.translates` never says yes where the SDK's translation raises; where it says no,
    the engine takes the SDK's own path, so a no costs time, not correctness (the cases above hold both)."""
    try:
        rpc.translate_output_properties(value, lambda k: k, typ, True)
        sdk_ok = True
    except Exception:  # noqa: BLE001 (any of the SDK's errors)
        sdk_ok = False
    ours = lazy_outputs.translates(value, typ)
    assert not ours or sdk_ok, (value, typ)
    special = isinstance(value, dict) and rpc._special_sig_key in value or value == rpc.UNKNOWN
    assert ours == sdk_ok or special, (value, typ, ours, sdk_ok)  # only the SDK's special values are left to it


class _ForkMocks(_Echo):
    """As a provider answers a preview: an output-only property it holds as null (``selfLink``), one it computes."""

    def new_resource(self, args):
        name, state = super().new_resource(args)
        return name, {**state, "selfLink": None, "url": f"gs://{args.name}"}


class _Group(pulumi.ComponentResource):
    """A team's component: a typed child with nested output types, whose outputs the component registers."""

    def __init__(self, name: str):
        import pulumi_gcp as gcp

        super().__init__("fork:index:Group", name)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket", location="US", uniform_bucket_level_access=True, versioning={"enabled": True},
            lifecycle_rules=[{"action": {"type": "Delete"}, "condition": {"age": 30, "with_state": "ARCHIVED"}}],
            labels={"team": "x"}, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"url": self.bucket.url, "rules": self.bucket.lifecycle_rules})


def _fork_shaped(made: list):
    """Resources this project does not declare, read the ways a fork's program reads them: a Kubernetes object and a
    secret, a bucket inside a component, the stack's massage of a resource object, ``Output.all``, a late read."""
    import pulumi_kubernetes as k8s
    from pulumi.runtime.stack import massage

    async def text(output):  # the observation as text: an unknown inside it would make the whole export unknown
        return json.dumps(await _seen(output), default=lambda x: type(x).__name__, sort_keys=True)

    def see(output):
        return pulumi.Output.from_input(text(output))

    group = _Group("g")
    config = k8s.core.v1.ConfigMap("cm", metadata={"name": "cm", "labels": {"a": "b"}}, data={"k": "v"})
    secret = k8s.core.v1.Secret("s", metadata={"name": "s"}, string_data={"p": "x"})
    bucket = group.bucket
    made.extend((bucket, config, secret))
    for label, res in (("bucket", bucket), ("cm", config)):
        pulumi.export(label, see(pulumi.Output.from_input(massage(res, []))))
    pulumi.export("self_link", see(bucket.self_link))
    pulumi.export("metadata", see(config.metadata))
    pulumi.export("secret", see(secret.string_data))
    pulumi.export("all", see(pulumi.Output.all(bucket.versioning, bucket.lifecycle_rules, config.data, secret.data)))
    pulumi.export("late", bucket.urn.apply(lambda _: see(bucket.lifecycle_rules)))


def test_fork_shaped_resources_read_as_the_sdks():
    """Every observation of resources a team's fork declares is the SDK's, including a property the answer holds as
    null (unknown in a preview, ``rpc.py:1604-1614``)."""
    seen, made = [], []
    for shortcuts in (True, False):
        mocks = _ForkMocks()
        monitor = pulumi_runtime.RecordingMonitor(mocks, lambda _reg: None, shortcuts=shortcuts)
        pulumi_runtime.start(mocks, monitor, project="lazy-test", stack="fork", config={})
        seen.append(pulumi_runtime.run(lambda: _fork_shaped(made), shortcuts=shortcuts))
    assert seen[0] == seen[1]
    assert set(seen[0]) == {"bucket", "cm", "self_link", "metadata", "secret", "all", "late"}, seen[0]
    assert json.loads(seen[0]["self_link"])[1] is False  # held as null: unknown
    assert json.loads(seen[0]["secret"])[2] is True
    assert "BucketLifecycleRuleCondition" in seen[0]["late"]
    # The engine's way was taken for each (the secret's answer left to the SDK's resolve_outputs, translates() no).
    assert [type(vars(res)) for res in made] == [lazy_outputs.LazyOutputs] * 3 + [dict] * 3
    assert vars(made[0])._answer is not None and vars(made[2])._answer is None
