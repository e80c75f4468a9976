"""The engine's own registration (``offline/registration.py``) against the SDK's ``register_resource``, on programs
that reach every branch of it: the same registrations (URN, parent, inputs, dependencies, provider, options), the
same values read back by the program, and the same errors. The shipped stacks and a 64-slice stack are
``tests/test_engine_differential.py``'s.

Only the Pulumi engine is mocked (``set_mocks`` with the engine's recording monitor), as in the engine itself;
``shortcuts=False`` is the SDK's plain path, every registration through ``MockMonitor.RegisterResource``.
"""

from __future__ import annotations

import json
import re

import pulumi
import pytest
from pulumi.runtime import rpc

from offline import engine, pulumi_runtime, registration


class _Echo(pulumi.runtime.Mocks):
    def new_resource(self, args):
        state = dict(args.inputs)
        if args.typ == "test:index:Thing":
            state["computed"] = {"endpoint": "E", "ports": [1, 2]}
        return f"{args.name}-id", state

    def call(self, args):
        return {}


class _Thing(pulumi.CustomResource):
    def __init__(self, name: str, props: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Thing", name, {**props, "computed": None}, opts)


class _Provider(pulumi.ProviderResource):
    def __init__(self, name: str):
        super().__init__("test", name, {"region": "r"})


_ODD = object()  # one object, so both paths' messages name the same one


def _deploy(program, shortcuts: bool) -> tuple[list[dict], dict, dict]:
    """The registrations as JSON text, the exports, and which path each registration took."""
    seen: list[pulumi_runtime.Registration] = []
    mocks = _Echo()
    monitor = pulumi_runtime.RecordingMonitor(mocks, seen.append, shortcuts=shortcuts)
    pulumi_runtime.start(mocks, monitor, project="registration-test", stack="diff", config={})
    paths = {"engine": 0, "sdk": 0}
    handled = registration._handled

    def counting(*args):
        took = handled(*args)
        paths["engine" if took else "sdk"] += 1
        return took

    registration._handled = counting
    try:
        exports = pulumi_runtime.run(program, shortcuts=shortcuts)
    finally:
        registration._handled = handled
    registrations = []
    for reg in sorted(seen, key=lambda r: r.urn):
        registrations.append(json.dumps({
            "urn": reg.urn, "type": reg.type, "name": reg.name, "parent": reg.parent, "custom": reg.custom,
            "inputs": engine._plain(reg.inputs, keep_secrets=True), "provider": reg.provider,
            "protect": reg.protect, "retainOnDelete": reg.retain_on_delete,
            "dependencies": sorted(reg.dependencies), "ignoreChanges": list(reg.ignore_changes),
            "replaceOnChanges": list(reg.replace_on_changes)}))
    return registrations, json.dumps(exports, default=repr), paths


def _everything():
    """A program reaching each branch of the engine's registration and its fall-backs to the SDK."""
    import pulumi_gcp as gcp

    group = pulumi.ComponentResource("test:index:Group", "group")
    a = _Thing("a", {"n": 2, "f": 0.5, "b": True, "none": None, "s": "x", "l": [1, None, "y", [2, {"z": None}]],
                     "d": {"k": None, "j": 1, "deep": {"e": {}}}, "t": (1, 2), "big": 2 ** 60, "empty": []},
               pulumi.ResourceOptions(parent=group, protect=True, retain_on_delete=True,
                                      ignore_changes=["n"], replace_on_changes=["s"]))
    other = pulumi.ComponentResource("test:index:Group", "other")
    _Thing("child", {"n": 1}, pulumi.ResourceOptions(parent=other))
    _Thing("b", {"fromA": a.n, "nested": {"x": a.l, "y": [a.id, a.urn]}, "computed": a.computed},
           pulumi.ResourceOptions(parent=group, depends_on=[other]))  # a component: its children
    _Thing("pending", {"applied": a.n.apply(lambda v: v + 1), "all": pulumi.Output.all(a.s, a.f)},
           pulumi.ResourceOptions(depends_on=[a]))
    # Left to the SDK's own serializer: a secret, an unknown's sentinel, a resource reference, a tuple of secrets.
    _Thing("secret", {"token": pulumi.Output.secret("s3cret"), "plain": 1})
    _Thing("sentinel", {"later": rpc.UNKNOWN})
    _Thing("reference", {"ref": a})
    _Thing("aliased", {"n": 1}, pulumi.ResourceOptions(aliases=[pulumi.Alias(name="old")],
                                                        additional_secret_outputs=["n"]))
    provider = _Provider("prov")
    _Thing("provided", {"n": 1}, pulumi.ResourceOptions(provider=provider))
    # Typed inputs: ``...Args`` classes, and a dict where the type expects one (keys translated by its metadata;
    # a ``dict[str, str]``'s keys not).
    pool = gcp.container.NodePool(
        "pool", cluster=a.s, location="us-east5-b", node_count=4,
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type="ct6e-standard-4t", labels={"a_b": "c"},
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(key="k", value="v", effect="NO_SCHEDULE")],
            advanced_machine_features={"threads_per_core": 1}),
        autoscaling={"min_node_count": 0, "max_node_count": a.n, "location_policy": None},
        opts=pulumi.ResourceOptions(parent=group))
    pulumi.export("a", {"l": a.l, "d": a.d, "computed": a.computed, "id": a.id, "urn": a.urn})
    pulumi.export("pool", {"nodeConfig": pool.node_config.apply(lambda c: [c.machine_type, c.labels,
                                                                           c.taints[0].effect]),
                           "autoscaling": pool.autoscaling.apply(lambda c: c.max_node_count)})


def test_every_branch_registers_as_the_sdk_registers():
    ours, our_exports, paths = _deploy(_everything, shortcuts=True)
    sdks, sdk_exports, sdk_paths = _deploy(_everything, shortcuts=False)
    # As JSON text in the order read: key order is part of what a manifest writes.
    assert len(ours) == len(sdks) > 10
    assert [o for o, s in zip(ours, sdks, strict=True) if o != s] == [], "registered differently"
    assert our_exports == sdk_exports
    assert json.loads(our_exports)["pool"]["nodeConfig"] == ["ct6e-standard-4t", {"a_b": "c"}, "NO_SCHEDULE"]
    # Not two runs of one path: the engine took every resource of the program (the root stack is registered
    # before it runs); without the shortcuts its registration is not in place.
    assert paths == {"engine": len(ours) - 1, "sdk": 0}, paths
    assert sdk_paths == {"engine": 0, "sdk": 0}


@pytest.mark.parametrize("case", ["failed-output", "illegal-input", "bad-list-type", "missing-dependency"])
def test_an_error_reads_as_the_sdks(case):
    """Every input gets the SDK's answer: the same exception type and message, from either path."""
    def program():
        import pulumi_gcp as gcp

        if case == "failed-output":
            _Thing("t", {"x": pulumi.Output.from_input(1).apply(lambda v: v / 0)})
        elif case == "illegal-input":
            _Thing("t", {"x": {"y": _ODD}})
        elif case == "bad-list-type":
            gcp.container.NodePool("p", cluster="c", node_config={"oauth_scopes": {"not": "a list"}})
        else:
            _Thing("t", {"n": 1}, pulumi.ResourceOptions(depends_on=["not a resource"]))

    errors = []
    for shortcuts in (True, False):
        with pytest.raises(Exception) as caught:  # noqa: PT011 (compared below, type and text)
            _deploy(program, shortcuts=shortcuts)
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]
    assert errors[0][1]


class _Strict(_Echo):
    """Mocks that drop an input, answer ``None`` for another, and fail one resource and one invoke."""

    def new_resource(self, args):
        if args.name == "boom":
            raise RuntimeError("the mock refused boom")
        if args.name == "valueless":
            raise ValueError("the mock found no value")
        id_, state = super().new_resource(args)
        state.pop("dropped", None)
        if "nulled" in state:
            state["nulled"] = None
        return id_, state

    def call(self, args):
        if args.token == "test:index:fail":
            raise RuntimeError("the mock refused the invoke")
        return {"echo": dict(args.args), "order": ["z", "a"]}


class _Read(pulumi.CustomResource):
    def __init__(self, name: str, id_: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("test:index:Thing", name, {"computed": None, "n": None},
                         pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id_)))


def _deploy_with(mocks, program, shortcuts: bool):
    seen: list[pulumi_runtime.Registration] = []
    monitor = pulumi_runtime.RecordingMonitor(mocks, seen.append, shortcuts=shortcuts)
    pulumi_runtime.start(mocks, monitor, project="registration-test", stack="diff", config={})
    exports = pulumi_runtime.run(program, shortcuts=shortcuts)
    return sorted(json.dumps({"urn": r.urn, "parent": r.parent, "provider": r.provider,
                              "inputs": engine._plain(r.inputs, keep_secrets=True),
                              "dependencies": sorted(r.dependencies)}) for r in seen), \
        json.dumps(exports, default=repr)


def _edges():
    """The options and values the brief names beyond ``_everything``: a providers map on a component, aliases
    with a parent, a secret inside a list, a component's reference, a mock's ``None`` and missing outputs, a read,
    and invokes made from inside running callbacks (one nested in another's result)."""
    provider = _Provider("mapped")
    group = pulumi.ComponentResource("test:index:Group", "group",
                                     opts=pulumi.ResourceOptions(providers={"test": provider}))
    a = _Thing("a", {"n": 1, "dropped": "x", "nulled": "y", "l": [pulumi.Output.secret("s"), 1]},
               pulumi.ResourceOptions(parent=group, aliases=[pulumi.Alias(name="old", parent=group)]))
    _Thing("ref", {"component": group, "n": a.n}, pulumi.ResourceOptions(version="1.2.3",
                                                                         plugin_download_url="https://x"))
    read = _Read("read", "read-id", pulumi.ResourceOptions(parent=group))

    def invoke(token, args):
        return pulumi.runtime.invoke(token, args).value

    first = a.n.apply(lambda n: invoke("test:index:echo", {"n": n}))
    nested = first.apply(lambda r: invoke("test:index:echo", {"inner": r["echo"], "z": 1, "a": 2}))
    after = _Thing("after", {"fromInvoke": nested, "read": read.computed})
    # A preview reads a missing or ``None`` output as unknown (rpc.resolve_properties): not exported.
    pulumi.export("a", {"l": a.l, "n": a.n})
    pulumi.export("nested", nested)
    pulumi.export("after", [after.fromInvoke, after.read])


def test_the_edges_register_as_the_sdk_registers():
    ours = _deploy_with(_Strict(), _edges, shortcuts=True)
    sdks = _deploy_with(_Strict(), _edges, shortcuts=False)
    assert [o for o, s in zip(ours[0], sdks[0], strict=True) if o != s] == [], "registered differently"
    assert ours[1] == sdks[1]
    exported = json.loads(ours[1])
    assert exported["nested"]["echo"]["inner"] == {"n": 1.0}, exported


@pytest.mark.parametrize("case", ["mock-raises", "mock-value-error", "invoke-raises", "failed-depends-on",
                                  "value-error-output", "component-provider", "ignore-changes-not-str",
                                  "protect-not-bool", "version-not-str"])
def test_an_error_from_the_mocks_or_an_option_reads_as_the_sdks(case):
    def program():
        if case == "mock-raises":
            _Thing("boom", {"n": 1})
        elif case == "ignore-changes-not-str":  # options only the request's fields check (protobuf's TypeError)
            _Thing("t", {"n": 1}, pulumi.ResourceOptions(ignore_changes=[1]))
        elif case == "protect-not-bool":
            _Thing("t", {"n": 1}, pulumi.ResourceOptions(protect="yes"))
        elif case == "version-not-str":
            _Thing("t", {"n": 1}, pulumi.ResourceOptions(version=1))
        elif case == "mock-value-error":
            _Thing("valueless", {"n": 1})
        elif case == "value-error-output":
            _Thing("t", {"n": 1, "x": [pulumi.Output.from_input("v").apply(int)]})
        elif case == "invoke-raises":
            a = _Thing("a", {"n": 1})
            _Thing("b", {"n": a.n.apply(lambda _: pulumi.runtime.invoke("test:index:fail", {}).value)})
        elif case == "failed-depends-on":
            _Thing("t", {"n": 1}, pulumi.ResourceOptions(
                depends_on=pulumi.Output.from_input(1).apply(lambda v: [v / 0])))
        else:
            bad = pulumi.Output.from_input(1).apply(lambda v: v / 0)
            prov = _Provider("p")
            prov.__dict__["urn"] = bad
            pulumi.ComponentResource("test:index:Group", "g", opts=pulumi.ResourceOptions(providers=[prov]))

    errors = []
    for shortcuts in (True, False):
        with pytest.raises(Exception) as caught:  # noqa: PT011 (compared below, type and text)
            _deploy_with(_Strict(), program, shortcuts=shortcuts)
        # Each run makes its own objects: their addresses in a message (an input's repr) differ.
        errors.append((type(caught.value), re.sub(r"0x[0-9a-f]+", "0x", str(caught.value))))
    assert errors[0] == errors[1]
    assert errors[0][1]


def _nones():
    """A ``None`` inside a dict (written, or an output resolving to ``None``): the SDK's Struct holds it as a null,
    a key of the map that changes where the others are read back from, and drops it when read back."""
    keys = ["name", "zone", "labels", "taints", "machineType", "diskSizeGb", "spot", "tags", "image", "metadata"]
    written = {k: i for i, k in enumerate(keys)}
    nulled = {**dict(list(written.items())[:3]), "reservation": None, **dict(list(written.items())[3:])}
    later = {**dict(list(written.items())[:3]), "reservation": pulumi.Output.from_input(None),
             **dict(list(written.items())[3:])}
    _Thing("nones", {"nulled": nulled, "later": later, "inList": [nulled]})


def test_a_none_inside_a_dict_reads_back_in_the_sdks_order():
    ours, _, paths = _deploy(_nones, shortcuts=True)
    sdks, _, _ = _deploy(_nones, shortcuts=False)
    assert paths == {"engine": 1, "sdk": 0}, paths
    assert [o for o, s in zip(ours, sdks, strict=True) if o != s] == [], "registered differently"


class _Ints(_Echo):
    """Mocks answering with values equal to the inputs but not as a Struct reads them back: ints (a Struct's
    numbers are floats), in a dict and in a list."""

    def new_resource(self, args):
        id_, state = super().new_resource(args)
        state.update(n=4, d={"x": 2, "y": [3]})
        return id_, state


def test_an_answer_equal_to_the_inputs_reads_back_as_through_a_struct():
    def program():
        a = _Thing("a", {"n": 4, "d": {"x": 2, "y": [3]}})
        pulumi.export("read", pulumi.Output.all(a.n, a.d).apply(repr))

    ours = _deploy_with(_Ints(), program, shortcuts=True)
    sdks = _deploy_with(_Ints(), program, shortcuts=False)
    read = json.loads(sdks[1])["read"]
    assert read.startswith("[4.0, {") and "'x': 2.0" in read and "[3.0]" in read, read
    assert ours == sdks
