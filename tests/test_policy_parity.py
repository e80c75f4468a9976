"""The pack as ``pulumi preview --policy-pack policies`` runs it, and ``slicectl preview``'s offline
evaluation, give the same verdict on the same stack.

Pulumi starts the pack program (``policies/__main__.py``) in its own process with the stack's
config as JSON in ``PULUMI_CONFIG``, reads the analyzer's port from its stdout, sends the pack
config with ``Configure``, then calls ``Analyze`` for every resource and ``AnalyzeStack`` for
the stack over gRPC. This test does exactly that on loopback: the real pack process, the real
pulumi_policy analyzer server, the real rules. Only the Pulumi engine that would send the
requests is replaced (by this test, from the offline engine's rendering of the real program).
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import grpc
import pytest
from conftest import rendered, with_fallbacks
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as proto
from pulumi.runtime.proto import analyzer_pb2_grpc
from pulumi_policy import proxy
from pulumi_policy.proxy import UnknownValueError

from offline import engine
from policies import offline
from policies import pack as crossguard
from policies.registry import RULES
from stackspec import spec as stack_spec

ROOT = engine.ROOT
LEVELS = {proto.ADVISORY: "advisory", proto.MANDATORY: "mandatory", proto.REMEDIATE: "mandatory"}
Verdict = set[tuple[str, str, str, str]]  # (rule, urn, message, level)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    json_format.ParseDict(value, s)
    return s


class PackProcess:
    """policies/__main__.py as Pulumi runs it: its own process, config in PULUMI_CONFIG."""

    def __init__(self, stack_config: dict[str, str]):
        env = {**os.environ, "PULUMI_CONFIG": json.dumps(stack_config)}
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(ROOT / "policies" / "__main__.py")], cwd=ROOT / "policies", env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        line = self.proc.stdout.readline().decode().strip()
        if not line.isdigit():
            self.close()
            raise AssertionError(f"the pack did not start: {line!r} {self.proc.stderr.read().decode()[-2000:]}")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        self.stub = analyzer_pb2_grpc.AnalyzerStub(self.channel)
        self.configured = b""
        # (Configure request, Analyze request) -> the pack's diagnostics, both as deterministic bytes.
        self.answers: dict[tuple[bytes, bytes], list[proto.AnalyzeDiagnostic]] = {}

    def configure(self, policy_config: dict[str, Any]) -> None:
        """As the CLI does with --policy-pack-config: a level and properties per configured rule."""
        request = proto.ConfigureAnalyzerRequest()
        for rule in RULES:
            value = policy_config.get(rule.name, policy_config.get("all"))
            if value is None:
                continue
            level = value if isinstance(value, str) else value.get("enforcementLevel", rule.enforcement)
            props = {k: v for k, v in value.items() if k != "enforcementLevel"} if isinstance(value, dict) else {}
            request.policyConfig[rule.name].CopyFrom(proto.PolicyConfig(
                enforcementLevel=getattr(proto, level.upper()), properties=_struct(rule.settings(props))))
        self.stub.Configure(request)
        self.configured = request.SerializeToString(deterministic=True)

    def verdict(self, rendering: engine.Rendering) -> Verdict:
        out: Verdict = set()
        custom = [r for r in rendering.resources if r.custom]
        descriptions = {r.name: r.description for r in RULES}

        def take(diagnostics, default_urn: str) -> None:
            for d in diagnostics:
                message = d.message.removeprefix(descriptions[d.policyName]).removeprefix("\n")
                out.add((d.policyName, d.urn or default_urn, message, LEVELS[d.enforcementLevel]))

        by_urn = {r.urn: r for r in rendering.resources}

        def provider(r: engine.Resource) -> proto.AnalyzerProviderResource | None:
            """The explicit provider a resource is created through, as the engine names it (a multi-cluster stack's
            rules tell its clusters' Kubernetes objects apart by it: pulumi_policy's ``PolicyResource.provider``)."""
            if not r.provider_urn:
                return None
            urn = r.provider_urn
            p = by_urn.get(urn)
            return proto.AnalyzerProviderResource(
                type=urn.split("::")[2].rpartition("$")[2], urn=urn, name=urn.rpartition("::")[2],
                properties=_struct(p.inputs if p else {}))

        for r in custom:
            request = proto.AnalyzeRequest(type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name,
                                           provider=provider(r))
            # A resource this process was already sent, byte for byte, under the same Configure: its answer again.
            # The pack keeps nothing between calls (pulumi_policy 1.21.0 policy.py ``Analyze`` reads the request,
            # the config Configure stored and the stack config from PULUMI_CONFIG, fixed for the process), so the
            # answer is the one it would give; every resource a case changes, and every request under another
            # config, still goes to the pack, and AnalyzeStack always does. Most cases change one resource of
            # about 150, and each Analyze is every policy deserializing the resource again (the pack's own cost).
            key = (self.configured, request.SerializeToString(deterministic=True))
            if key not in self.answers:
                self.answers[key] = list(self.stub.Analyze(request).diagnostics)
            take(self.answers[key], r.urn)
        # As the engine sends them: each resource with the URNs it waits for (stack rules read them).
        resources = [proto.AnalyzerResource(type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name,
                                            dependencies=list(r.dependencies), provider=provider(r))
                     for r in custom]
        take(self.stub.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources)).diagnostics, "")
        return out

    def close(self) -> None:
        if getattr(self, "channel", None):
            self.channel.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the process group this test started
            self.proc.wait(timeout=10)


def offline_verdict(rendering: engine.Rendering, policy_config: dict[str, Any] | None = None) -> Verdict:
    return {(v.rule, v.urn or "", v.message, v.enforcement) for v in offline.evaluate(rendering, policy_config)
            if v.enforcement != "disabled"}


@pytest.fixture(scope="module")
def packs() -> Iterator[dict[str, PackProcess]]:
    """One pack process per stack config (Pulumi starts one per preview)."""
    started: dict[str, PackProcess] = {}
    yield started
    for p in started.values():
        p.close()


def pack_for(packs: dict[str, PackProcess], stack: str, config: dict[str, str]) -> PackProcess:
    key = json.dumps(config, sort_keys=True)
    if key not in packs:
        packs[key] = PackProcess(config)
    return packs[key]


def _mutate(rendering: engine.Rendering, type_: str, fn, name: str | None = None) -> engine.Rendering:
    """A rendering with one resource's inputs changed: a program bug the rules must catch."""
    out = copy.copy(rendering)
    out.resources = [copy.deepcopy(r) for r in rendering.resources]
    target = next(r for r in out.resources if r.type == type_ and (name is None or r.name == name))
    fn(target.inputs)
    return out


def _broken_worker(inputs: dict) -> None:
    group = inputs["spec"].get("rayClusterSpec", inputs["spec"])["workerGroupSpecs"][0]
    group["numOfHosts"] = 3
    group["template"]["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] = "8"


CASES = {
    "prod": ("prod", None, None),
    "dev": ("dev", None, None),
    "prod, public bucket": ("prod", lambda r: _mutate(r, "gcp:storage/bucket:Bucket",
                                                       lambda i: i.update(publicAccessPrevention="inherited")), None),
    # prod's slice pools hold the whole slice (the seed's): a size that is not a slice.
    "prod, node pool of the wrong size": ("prod", lambda r: _mutate(
        r, "gcp:container/nodePool:NodePool", lambda i: i.update(nodeCount=3), name="v6e-16-0"), None),
    # With capacity fallbacks (opted in) every option's pool autoscales 0 <-> one slice, per zone.
    "prod with fallbacks, autoscaled pool of the wrong size": ("prod", lambda r: _mutate(
        r, "gcp:container/nodePool:NodePool", lambda i: i["autoscaling"].update(maxNodeCount=3),
        name="v6e-16-0-rsv"), None, with_fallbacks),
    "prod with fallbacks, node pool starting with part of a slice": ("prod", lambda r: _mutate(
        r, "gcp:container/nodePool:NodePool", lambda i: i.update(initialNodeCount=3), name="v6e-16-0-std"), None,
        with_fallbacks),
    "prod with fallbacks": ("prod", None, None, with_fallbacks),
    "prod, worker group that does not match its slice": (
        # prod's jobs are queued by Kueue, each on its own cluster: break the one a job brings.
        "prod", lambda r: _mutate(r, "kubernetes:ray.io/v1:RayJob", _broken_worker), None),
    "prod, control plane open to the internet": ("prod", lambda r: _mutate(
        r, "gcp:container/cluster:Cluster", lambda i: i.update(
            controlPlaneEndpointsConfig={"ipEndpointsConfig": {"enabled": True}},
            privateClusterConfig={"enablePrivateNodes": False},
            masterAuthorizedNetworksConfig={"cidrBlocks": [{"cidrBlock": "0.0.0.0/0"}]})), None),
    # Several clusters, each through its own Kubernetes provider, MultiKueue between them.
    "multi": ("multi", None, None),
    "dev, mutable image (allowed in dev)": ("dev", None, {"no-mutable-images-in-prod": "mandatory"}),
    "prod, region not allowed": ("prod", None, {"allowed-locations": {"allowedRegions": ["europe-west4"]}}),
    "prod, reserved range overlapping a subnet": (
        "prod", None, {"subnets-no-overlap": {"reservedRanges": ["10.50.0.0/20"]}}),
    "dev, required GCP labels as mandatory": (
        "dev", None, {"required-labels": {"enforcementLevel": "mandatory", "gcpLabels": ["team"]}}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_pack_and_offline_evaluation_agree(case, packs):
    stack, mutate, policy_config, *edit = CASES[case]
    config = engine.stack_config(stack)
    if edit:  # a variant of the stack file (capacity fallbacks)
        config = edit[0](config)
    rendering = rendered(stack, config)  # rendered once per config in this process (three configs, 13 cases)
    if mutate:
        rendering = mutate(rendering)
    pack = pack_for(packs, stack, config)
    pack.configure(policy_config or {})
    online = pack.verdict(rendering)
    assert online == offline_verdict(rendering, policy_config)
    if mutate or (policy_config and case.startswith("prod")):
        assert any(level == "mandatory" for *_, level in online), f"{case}: the broken stack passed"
    if case in ("prod", "dev", "prod with fallbacks"):
        assert not any(level == "mandatory" for *_, level in online)


def test_environment_comes_from_the_stack_config_on_both_paths(packs):
    """dev's rendering judged with prod's environment fails (its nightly image): the pack reads the
    environment from the config Pulumi passes, through the same model the program uses."""
    dev = rendered("dev")
    prod_env = {**engine.stack_config("dev"), f"{stack_spec.PROJECT}:environment": "prod"}
    pack = pack_for(packs, "dev", prod_env)
    pack.configure({})
    online = pack.verdict(dev)
    assert any(rule == "no-mutable-images-in-prod" for rule, *_ in online)
    as_prod = copy.copy(dev)
    as_prod.spec = dev.spec.model_copy(update={"environment": "prod"})  # the spec itself refuses dev as prod
    assert online == offline_verdict(as_prod)


def _known_through_the_proxy(value):
    """policies.pack.known as it was written first: every value read through pulumi_policy's proxy, each
    UnknownValueError skipped (the reference its direct read of the proxies' containers must equal)."""
    if isinstance(value, Mapping):
        out = {}
        for key in value:
            try:
                out[key] = _known_through_the_proxy(value[key])
            except UnknownValueError:
                continue
        return out
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = []
        for i in range(len(value)):
            try:
                items.append(_known_through_the_proxy(value[i]))
            except UnknownValueError:
                continue
        return items
    return value


def test_known_reads_the_proxies_as_reading_through_them_does():
    """The pack's ``known`` reads pulumi_policy's proxies' containers directly: the same plain data as reading
    through the proxy, every unknown sentinel left out at any depth, on every rendered resource and on props
    holding each kind of unknown (a preview's computed outputs)."""
    unknowns = [proxy.UNKNOWN_BOOLEAN_VALUE, proxy.UNKNOWN_NUMBER_VALUE, proxy.UNKNOWN_STRING_VALUE,
                proxy.UNKNOWN_ARRAY_VALUE, proxy.UNKNOWN_ASSET_VALUE, proxy.UNKNOWN_ARCHIVE_VALUE,
                proxy.UNKNOWN_OBJECT_VALUE]
    props = [r.inputs for r in rendered("prod").resources if r.custom]
    props.append({"id": unknowns[2], "a": {"b": [1, unknowns[0], {"c": unknowns[1], "d": None}], "e": unknowns[3]},
                  "f": [unknowns[4], [unknowns[5], "x", 2.5, True], {"g": unknowns[6]}], "h": "", "i": []})
    for p in props:
        want = _known_through_the_proxy(proxy.unknown_checking_proxy(copy.deepcopy(p)))
        assert crossguard.known(proxy.unknown_checking_proxy(copy.deepcopy(p))) == want
    assert want == {"a": {"b": [1, {"d": None}]}, "f": [["x", 2.5, True], {}], "h": "", "i": []}


def test_the_pack_reads_the_environment_through_the_model():
    for value, expected in (("dev", "dev"), ("prod", "prod"), ("staging", None), (None, None)):
        assert stack_spec.environment_of({f"{stack_spec.PROJECT}:environment": value}) == expected


_SENTINELS = (proxy.UNKNOWN_BOOLEAN_VALUE, proxy.UNKNOWN_NUMBER_VALUE, proxy.UNKNOWN_STRING_VALUE,
              proxy.UNKNOWN_ARRAY_VALUE, proxy.UNKNOWN_ASSET_VALUE, proxy.UNKNOWN_ARCHIVE_VALUE,
              proxy.UNKNOWN_OBJECT_VALUE)


def _with_unknowns(value: Any, counter: list[int], every: int = 5) -> tuple[Any, Any]:
    """(``value`` as a preview's planned outputs: every ``every``-th value at any depth replaced by an unknown
    sentinel (none if 0), an unknown added to every mapping and spliced into every list; the same without them, as
    the rules must see it)."""
    def sentinel() -> str:
        counter[0] += 1
        return _SENTINELS[counter[0] % len(_SENTINELS)]

    if isinstance(value, dict):
        sent, seen = {"plannedOutput": sentinel()}, {}
        for k, v in value.items():
            counter[0] += 1
            if every and counter[0] % every == 0:
                sent[k] = sentinel()
                continue
            sent[k], seen[k] = _with_unknowns(v, counter, every)
        return sent, seen
    if isinstance(value, list):
        sent, seen = [sentinel()], []
        for v in value:
            counter[0] += 1
            if every and counter[0] % every == 0:
                sent.append(sentinel())
                continue
            s, k = _with_unknowns(v, counter, every)
            sent.append(s)
            seen.append(k)
        sent.append(sentinel())
        return sent, seen
    return value, value


def _unknowns_sent(base: engine.Rendering, every: int) -> tuple[engine.Rendering, engine.Rendering]:
    sent, seen = copy.copy(base), copy.copy(base)
    sent.resources, seen.resources, counter = [], [], [0]
    for r in base.resources:
        a, b = copy.copy(r), copy.copy(r)
        if r.custom:
            a.inputs, b.inputs = _with_unknowns(r.inputs, counter, every)
        sent.resources.append(a)
        seen.resources.append(b)
    return sent, seen


def test_the_pack_leaves_out_unknowns_at_any_depth(packs):
    """The public path of ``known`` (which reads pulumi_policy's proxies' private containers): the real pack process
    sent, over gRPC, resources whose values at every depth are unknown sentinels (a first preview's computed outputs,
    in mappings, in lists, in lists inside mappings) judges them as offline evaluation judges the same resources
    without those values, no rule skipped ("can't run policy" diagnostics would differ), on a broken stack too."""
    base = _mutate(_mutate(rendered("prod"), "gcp:storage/bucket:Bucket",
                           lambda i: i.update(publicAccessPrevention="inherited")),
                   "kubernetes:ray.io/v1:RayJob", _broken_worker)  # read through lists: workerGroupSpecs[0]
    sent, seen = _unknowns_sent(base, 5)
    pack = pack_for(packs, "prod", engine.stack_config("prod"))
    pack.configure({})
    online = pack.verdict(sent)
    assert online == offline_verdict(seen)
    assert any(level == "mandatory" for *_, level in online)
    assert online != offline_verdict(base)  # the unknowns changed what the rules judge


def test_the_pack_leaves_out_unknowns_spliced_into_lists(packs):
    """prod with an unknown spliced into every list and added to every mapping, no value replaced: the pack's
    verdict is the offline verdict of the stack as it is. An unknown left in a list reaches the rules as a string
    where they read a range (a subnet's, a firewall's: ``ipaddress`` raises, the pack's Analyze fails)."""
    base = rendered("prod")
    sent, seen = _unknowns_sent(base, 0)
    assert [r.inputs for r in seen.resources] == [r.inputs for r in base.resources]
    pack = pack_for(packs, "prod", engine.stack_config("prod"))
    pack.configure({})
    assert pack.verdict(sent) == offline_verdict(base)
