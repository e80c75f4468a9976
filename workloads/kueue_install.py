"""Kueue itself, from its vendored release manifest, each object a resource of the program's own.

Why not ``helm.v4.Chart``: a Chart is a component the Kubernetes provider constructs, and a provider whose kubeconfig
comes from a cluster the same update creates (day 0, a region added, a cluster replaced) is not configured at
preview, so Pulumi skips ``Construct`` and the saved plan holds none of the chart's objects; ``up --plan`` then
refuses each of them ("create is not allowed by the plan: no steps were expected for this resource"). pulumi/pulumi
sdk/go/common/resource/plugin/provider_plugin.go:2006-2030 and pkg/resource/deploy/step_generator.go:449-455 at
1b5949891b3c; ``offline/journey.py`` models it and ``tests/test_journey.py`` holds every stack to it. Objects the
program registers itself are in the plan whatever the provider knows, with the inputs the reviewer reads.

The manifest is Kueue's release artifact for the pinned version (``workloads/data/kueue-<version>/README.md``:
source, commit, digest, licence), the way cluster-toolkit's ``kubectl-apply`` module and xpk install Kueue. What
the program changes, and nothing else: the manager's configuration (the ConfigMap the Deployment mounts) is the
stack's (``workloads/kueue.py`` ``manager_config``), the image is pulled ``IfNotPresent`` (as the chart's values
set it before), the ``kueue-system`` Namespace is the program's own (``workloads/kueue.py`` ``namespace``), and each
object carries the stack's labels beside Kueue's (policies: required-labels; no selector reads them).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import sys
from pathlib import Path
from typing import Any

import msgspec
import pulumi
import yaml

from workloads import kueue

DATA = Path(__file__).resolve().parent / "data" / f"kueue-{kueue.KUEUE_VERSION}"
MANIFEST = DATA / "manifests.yaml"
# The manifest's objects as JSON, made from it by ``python -m workloads.kueue_install`` (this module's parse, which
# ``tests/test_kueue.py`` holds to PyYAML's safe loader): composing the 1.7 MB of YAML (mostly CRD schemas) was a
# tenth of a second of every preview, decoding the same objects 4 ms. Both files are in ``SHA256SUMS`` and both
# digests are checked; ``tests/test_kueue_json.py`` holds the JSON to the manifest.
OBJECTS = DATA / "manifests.json"
CONFIG_MAP = f"{kueue.RELEASE}-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
DEPLOYMENT = f"{kueue.RELEASE}-controller-manager"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def release_objects() -> tuple[dict[str, Any], ...]:
    """The release manifest's objects, checked against the vendored digest."""
    sums = dict(line.split()[::-1] for line in (DATA / "SHA256SUMS").read_text().splitlines() if line.strip())
    for path in (MANIFEST, OBJECTS):
        raw = path.read_bytes()
        if hashlib.sha256(raw).hexdigest() != sums.get(path.name):
            raise ValueError(f"{path} does not match {DATA / 'SHA256SUMS'}: re-vendor it as its README says")
    return tuple(msgspec.json.decode(raw, type=list[dict[str, Any]]))


def parsed_release() -> list[dict[str, Any]]:
    """The manifest's objects as this module's parse makes them (empty documents left out): what ``OBJECTS`` holds."""
    return [d for d in _documents(MANIFEST.read_bytes()) if d]


def objects_json(objects: list[dict[str, Any]]) -> bytes:
    """``OBJECTS``' text for ``objects``: compact JSON, a newline at the end; refused if JSON would not give them
    back exactly (a YAML date, a float written as an int, a shared node)."""
    encoded = msgspec.json.encode(objects)
    seen: set[int] = set()
    if msgspec.json.decode(encoded) != objects or any(_shares(d, seen) for d in objects):
        raise ValueError(f"{MANIFEST} holds a value JSON does not keep as it is: read it with the YAML parse")
    return encoded + b"\n"


def _shares(value: Any, seen: set[int]) -> bool:
    """Whether a dict or list occurs twice in ``value`` (a YAML alias: one object, where JSON would make two)."""
    if type(value) is dict or type(value) is list:
        if id(value) in seen:
            return True
        seen.add(id(value))
        return any(_shares(v, seen) for v in (value.values() if type(value) is dict else value))
    return False


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_FLATTENED = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")  # keys flatten_mapping rewrites


def _documents(raw: bytes) -> list[Any]:
    """``list(yaml.load_all(raw, Loader=_LOADER))``, the composed nodes' strings, mappings and sequences built
    directly (SafeConstructor's generic dispatch per node was a third of reading the 1.7 MB manifest, in every
    preview); other scalars (ints, bools, nulls, timestamps) by the constructor itself, and a document with a merge
    key (``<<``) or a collection as a key wholly by it (``tests/test_kueue.py`` compares the two)."""
    loader = _LOADER(raw)
    try:
        out = []
        while loader.check_node():
            node = loader.get_node()
            try:
                out.append(_build(node, loader, {}))
            except _Unusual:
                out.append(loader.construct_document(node))
        return out
    finally:
        loader.dispose()


class _Unusual(Exception):
    """A ``<<`` or ``=`` key (SafeConstructor's ``flatten_mapping`` applies) or a key that is a collection."""


def _build(node: yaml.Node, loader: yaml.BaseLoader, built: dict[int, Any]) -> Any:
    """A node's value, as SafeConstructor makes it; ``built``: collections by node (an alias is the same object)."""
    tag = node.tag
    if tag == _STR and type(node) is yaml.ScalarNode:
        return node.value
    if tag == _MAP or tag == _SEQ:
        if id(node) in built:
            return built[id(node)]
        if tag == _SEQ:
            items: list[Any] = []
            built[id(node)] = items
            items.extend(_build(child, loader, built) for child in node.value)
            return items
        mapping: dict[Any, Any] = {}
        built[id(node)] = mapping
        for key, value in node.value:
            # ``=`` (YAML's ``value`` tag) is made the string key "=" by ``flatten_mapping`` (PyYAML 6.0.3
            # constructor.py, SafeConstructor.flatten_mapping): the constructor's own path, as ``<<`` is.
            if key.tag in _FLATTENED or type(key) is not yaml.ScalarNode:
                raise _Unusual
            mapping[_build(key, loader, built)] = _build(value, loader, built)
        return mapping
    return loader.construct_object(node, deep=True)


def objects(config_yaml: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    """Kueue's objects for one cluster, its manager configured with ``config_yaml`` (Helm values' equivalent),
    each labelled ``labels`` too."""
    out = []
    for doc in release_objects():
        if doc["kind"] == "Namespace":
            continue  # the program's own, with its labels (workloads/kueue.py namespace)
        meta = doc["metadata"]
        doc = {**doc, "metadata": {**meta, "labels": {**(meta.get("labels") or {}), **labels}}}
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == CONFIG_MAP:
            doc = {**doc, "data": {**doc["data"], CONFIG_KEY: config_yaml}}
        elif doc["kind"] == "Deployment" and doc["metadata"]["name"] == DEPLOYMENT:
            doc = copy.deepcopy(doc)
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if c["image"] == kueue.IMAGE:
                    c["imagePullPolicy"] = "IfNotPresent"
        out.append(doc)
    return out


def type_token(doc: dict[str, Any]) -> str:
    """The Kubernetes provider's type token: ``kubernetes:<group>/<version>:<kind>``, the core group as ``core``."""
    api = doc["apiVersion"] if "/" in doc["apiVersion"] else f"core/{doc['apiVersion']}"
    return f"kubernetes:{api}:{doc['kind']}"


class ManifestObject(pulumi.CustomResource):
    """One object of the manifest, applied whole by the Kubernetes provider (server-side apply)."""

    def __init__(self, name: str, doc: dict[str, Any], opts: pulumi.ResourceOptions):
        super().__init__(type_token(doc), name, dict(doc), opts)


class KueueInstall(pulumi.ComponentResource):
    """Kueue's release objects on one cluster, CRDs first (the rest may be read by Kueue only once they exist)."""

    def __init__(self, name: str, config_yaml: str, labels: dict[str, str], namespace: pulumi.Resource,
                 opts: pulumi.ResourceOptions):
        super().__init__("tpu-multislice:workloads:KueueInstall", name, None, opts)
        docs = objects(config_yaml, labels)
        # A component's depends_on is not its children's: each object waits for the namespace itself.
        base = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        crds = [ManifestObject(f"{name}-crd-{d['metadata']['name']}", d, base)
                for d in docs if d["kind"] == "CustomResourceDefinition"]
        after_crds = pulumi.ResourceOptions(parent=self, depends_on=[namespace, *crds])
        # The webhook Secret is templated empty and filled by Kueue's cert rotator: its data is never the program's.
        secret = pulumi.ResourceOptions.merge(after_crds, pulumi.ResourceOptions(ignore_changes=["data", "stringData"]))
        self.objects = {f"{d['kind']}/{d['metadata']['name']}": ManifestObject(
            f"{name}-{d['kind'].lower()}-{d['metadata']['name']}", d, secret if d["kind"] == "Secret" else after_crds)
            for d in docs if d["kind"] != "CustomResourceDefinition"}
        self.register_outputs({"version": kueue.KUEUE_VERSION, "objects": len(docs)})


if __name__ == "__main__":  # re-vendoring: ``python -m workloads.kueue_install`` writes OBJECTS from MANIFEST
    OBJECTS.write_bytes(objects_json(parsed_release()))
    sys.stdout.write(f"wrote {OBJECTS}; add its sha256 to {DATA / 'SHA256SUMS'}\n")
