"""The offline engine: the real Pulumi program under ``pulumi.runtime.set_mocks``.

No cloud and no ``pulumi`` CLI: GCP and the Pulumi engine are the only things
replaced. Every resource the program registers is recorded with its type token,
name, parent and inputs as the engine sees them (camelCase); Kubernetes objects
are rebuilt from their inputs as the manifests the provider would apply.

What it touches of the Pulumi SDK lives in ``offline/pulumi_runtime.py``: the public mocks API
(``set_mocks`` with its ``monitor=`` and ``logger=`` parameters, ``reset_options``, ``set_all_config``,
``runtime.test``) and, while a program runs, shortcuts that reach private internals
(``rpc._special_sig_key`` for its own protobuf walk, a duck of ``RegisterResourceResponse`` whose state is
handed back deserialized, ``pulumi.runtime.resource._get_stack_trace`` skipped, ``rpc.serialize_property``
answering plain data with itself) plus the cyclic collector off and its own registrations answered on the
event loop's thread (the loop's default executor, a public setting);
``render(..., shortcuts=False)`` is the SDK's plain path, and ``tests/test_engine_differential.py`` renders
every stack both ways. Before the program, the provider packages are replaced by stand-ins that load only the
modules it uses (``offline/provider_modules.py``): a preview's shortcut that ``pulumi up`` never takes.
The engine is process-global and not re-entrant (one render at a time in a process).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline import provider_modules, sdk_modules

# Before anything imports the providers and the SDK: stand-ins that load only the modules the program uses
# (offline only), and the SDK's modules a preview never uses deferred to their first use.
provider_modules.install()
sdk_modules.install()

import pulumi  # noqa: E402

sdk_modules.bind()

from offline import iam_policy, pulumi_runtime  # noqa: E402
from stackspec import spec as stack_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROGRAM = ROOT / "__main__.py"
PROJECT = stack_spec.PROJECT

# Plainly labelled answers for what only the cloud knows.
PLACEHOLDER_PROJECT_NUMBER = "OFFLINE-PROJECT-NUMBER"
PLACEHOLDER_ENDPOINT = "OFFLINE-ENDPOINT"
PLACEHOLDER_CA = "OFFLINE-CLUSTER-CA"
# The etag an authoritative IAM policy resource answers, in each API's shape: Cloud Storage's is base64 of the
# policy's version counter ("CAE=" for a new bucket's policy, "CAI=" once the stack has set it), IAM's (Artifact
# Registry's) base64 of 8 bytes. Nothing in the program reads them: the shape only keeps the mock like the provider.
IAM_POLICIES = {"gcp:storage/bucketIAMPolicy:BucketIAMPolicy": "CAI=",
                "gcp:artifactregistry/repositoryIamPolicy:RepositoryIamPolicy": "BwYAAAAAAAE="}


@dataclass
class Resource:
    urn: str
    type: str
    name: str
    parent: str | None  # parent URN; None for the stack's direct children
    custom: bool
    inputs: dict[str, Any]
    provider: str | None = None
    # Resource options the engine acts on at delete time.
    protect: bool = False
    retain_on_delete: bool = False
    dependencies: tuple[str, ...] = ()  # URNs it waits for: explicit depends_on and the resources of its inputs
    provider_urn: str | None = None  # the explicit provider it is created through (which waits for its own inputs)
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()  # the program's replaceOnChanges (offline/lifecycle.py reads it)

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "provider": self.provider,
            "protect": self.protect,
            "retainOnDelete": self.retain_on_delete,
            "dependencies": list(self.dependencies),
            "ignoreChanges": list(self.ignore_changes),
            "inputs": self.inputs,
        }


@dataclass
class Rendering:
    spec: stack_spec.StackSpec
    resources: list[Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    # RayJobs of suspended shared-cluster jobs: rendered for review, not applied (KubeRay
    # refuses ``suspend`` with ``clusterSelector``, so such a job is held back, not declared).
    held: list[dict[str, Any]] = field(default_factory=list)
    # The warnings the program logged (``pulumi.log.warn``: the day-0 image phase, unverified opt-ins):
    # a preview shows them first.
    warnings: list[str] = field(default_factory=list)
    # The stack file it was rendered from (its lines place policy violations), when there is one.
    document: Any = None

    def by_type(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str) -> Resource:
        return next(r for r in self.resources if r.type == type_ and r.name == name)

    def children(self, parent: Resource) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent.urn]

    @property
    def manifests(self) -> list[dict[str, Any]]:
        """The Kubernetes objects the program applies, as documents, in apply order."""
        docs = [kubernetes_manifest(r) for r in self.resources if is_kubernetes_object(r)]
        return sorted(docs, key=manifest_order)


# Kinds in the order a reader (and kubectl) wants them: what others refer to comes first.
APPLY_ORDER = ("ServiceAccount", "ResourceClaimTemplate", "ConfigMap", "RayCluster", "RayJob")


def manifest_order(doc: dict[str, Any]) -> tuple:
    kind = doc.get("kind", "")
    meta = doc.get("metadata", {})
    rank = APPLY_ORDER.index(kind) if kind in APPLY_ORDER else len(APPLY_ORDER)
    return rank, kind, meta.get("namespace", ""), meta.get("name", "")


def is_kubernetes_object(r: Resource) -> bool:
    return r.custom and r.type.startswith("kubernetes:") and "apiVersion" in r.inputs


def kubernetes_manifest(r: Resource) -> dict[str, Any]:
    doc = {"apiVersion": r.inputs["apiVersion"], "kind": r.inputs["kind"]}
    doc.update({k: v for k, v in r.inputs.items() if k not in doc})
    return _integral(doc)


def _integral(value: Any) -> Any:
    """Mocks hand numbers back as floats; Kubernetes integer fields want ``2``, not ``2.0``."""
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Mocks(pulumi.runtime.Mocks):
    """Answers for resources and invokes: the inputs back, plus labelled placeholders."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        state = dict(args.inputs)
        state.setdefault("name", args.name)
        if args.typ == "gcp:serviceaccount/account:Account":
            state["email"] = (
                f"{args.inputs['accountId']}@{args.inputs.get('project', 'project')}.iam.gserviceaccount.com"
            )
        elif args.typ == "gcp:container/cluster:Cluster":
            state["endpoint"] = PLACEHOLDER_ENDPOINT
            state["masterAuth"] = {"clusterCaCertificate": PLACEHOLDER_CA}
            # The DNS-based endpoint GKE names (gke-<hash>.<location>.gke.goog), kubectl's server with access: dns.
            endpoints = dict(state.get("controlPlaneEndpointsConfig") or {})
            endpoints["dnsEndpointConfig"] = {**(endpoints.get("dnsEndpointConfig") or {}),
                                              "endpoint": PLACEHOLDER_ENDPOINT}
            state["controlPlaneEndpointsConfig"] = endpoints
        elif args.typ == "gcp:storage/bucket:Bucket":
            state["url"] = f"gs://{state['name']}"
        elif args.typ == "gcp:artifactregistry/repository:Repository":
            # The provider's `name` is the repository's id, "repo1" (terraform-provider-google e03b7622
            # resource_artifact_registry_repository.go:903-907; flattenArtifactRegistryRepositoryName, 1498-1502, keeps
            # the last part of the API's projects/.../repositories/repo1), not the Pulumi name.
            state["name"] = args.inputs["repositoryId"]
        elif args.typ in IAM_POLICIES:
            # The API's policy etag (base64 of the policy's version counter, as getIamPolicy returns it).
            state["etag"] = IAM_POLICIES[args.typ]
        return f"{state['name']}-offline-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
        if args.token == "gcp:organizations/getProject:getProject":
            pid = args.args.get("projectId", "project")
            return {"projectId": pid, "number": PLACEHOLDER_PROJECT_NUMBER, "name": pid}
        if args.token == "gcp:organizations/getIAMPolicy:getIAMPolicy":
            return iam_policy.get_iam_policy(args.args)
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"accessToken": "OFFLINE-TOKEN", "project": "project"}
        return {}


class _Log(logging.Handler):
    """The program's log as the mock engine hands it on (``pulumi.log`` -> ``MockEngine`` -> a logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def at(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


def _log() -> tuple[logging.Logger, _Log]:
    handler = _Log()
    logger = logging.Logger("offline-engine", logging.INFO)  # not registered: nothing else logs to it; no SDK debug
    logger.addHandler(handler)
    return logger, handler


def _record(recorded: list[Resource], reg: pulumi_runtime.Registration, keep_secrets: bool = False) -> None:
    """Keeps what the stock mock monitor drops: each registration's parent and provider."""
    if reg.type == "pulumi:pulumi:Stack":
        return
    parent = reg.parent
    if parent and parent.split("::")[2] == "pulumi:pulumi:Stack":
        parent = None
    recorded.append(
        Resource(
            urn=reg.urn,
            type=reg.type,
            name=reg.name,
            parent=parent,
            custom=reg.custom,
            # The engine's own walk made plain inputs afresh; the mocks and the SDK only read them.
            inputs=reg.inputs if reg.plain else _plain(reg.inputs, keep_secrets),
            provider=reg.provider.split("::")[-1] or None if reg.provider else None,
            protect=reg.protect,
            retain_on_delete=reg.retain_on_delete,
            # Sorted: the SDK sends them from a set, in an order that changes with the hash seed.
            dependencies=tuple(sorted(d for d in reg.dependencies if d.split("::")[2] != "pulumi:pulumi:Stack")),
            ignore_changes=reg.ignore_changes,
            replace_on_changes=reg.replace_on_changes,
            provider_urn=reg.provider.rsplit("::", 1)[0] if reg.provider else None,
        )
    )


# What a secret input becomes with ``keep_secrets`` (offline/journey.py writes it as Pulumi serialises a secret).
SECRET = "<secret>"


def _plain(value: Any, keep_secrets: bool = False) -> Any:
    """Unknowns and secrets as the JSON a reader expects (a secret kept as ``{SECRET: value}`` when asked)."""
    if pulumi_runtime.is_secret(value):
        inner = _plain(pulumi_runtime.unwrap_secret(value), keep_secrets)
        return {SECRET: inner} if keep_secrets else inner
    if isinstance(value, dict):
        return {k: _plain(v, keep_secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, keep_secrets) for v in value]
    if pulumi_runtime.is_unknown(value):
        return "<computed>"
    return value


def stack_config(stack: str, stacks_dir: Path | None = None) -> dict[str, str]:
    """The flat config map Pulumi would hand the program for ``stack``.

    Raises :class:`stackspec.spec.StackFileError` when there is no such file and
    :class:`stackspec.spec.SpecError` when it is not a readable stack file (YAML, duplicate keys).
    """
    config, doc = stack_spec.stack_config(stack, stacks_dir)
    if doc.problems:
        raise stack_spec.SpecError(doc.source, doc.problems)
    return config


def render(
    stack: str,
    config: dict[str, str] | None = None,
    stacks_dir: Path | None = None,
    program: Path = PROGRAM,
    shortcuts: bool = True,
    mocks: _Mocks | None = None,
    keep_secrets: bool = False,
) -> Rendering:
    """Run the real program for ``stack`` under mocks and return what it declared.

    ``config`` overrides the stack file (tests pass edited copies). A bad spec
    raises :class:`stackspec.spec.SpecError` before any resource is registered.
    ``program`` is the Pulumi program to run (default: the project's ``__main__.py``);
    it runs with its own directory as the working directory and first on ``sys.path``.
    ``mocks`` answers for the cloud instead of :class:`_Mocks` (offline/journey.py tags what the cloud computes);
    ``keep_secrets`` keeps secret inputs marked (:data:`SECRET`).
    ``shortcuts=False`` renders through the SDK's plain ``set_mocks`` path (``offline/pulumi_runtime.py``):
    the same rendering, slower (``tests/test_engine_differential.py``).
    """
    # Fail fast, outside the engine: a bad spec never reaches a resource. The stack file is read once
    # (at 1,024 slices it is 11,000 lines): its config, unless ``config`` replaces it, and its lines.
    try:
        file_config, document = stack_spec.stack_config(stack, stacks_dir)
    except stack_spec.StackFileError:
        if config is None:
            raise
        file_config, document = {}, None  # an edited config for a stack without a file
    as_written = config is None  # the stack file's own config: held to what lint checks (deploy.clusterDrill)
    if config is None:
        config = file_config  # the file's own problems (a duplicate key) come with the config's, as lint gives them
    # An edited copy of a stack with a file takes its lines from the file.
    spec = stack_spec.load(stack, config, document, as_written=as_written)

    recorded: list[Resource] = []
    mocks = mocks or _Mocks()
    monitor = pulumi_runtime.RecordingMonitor(mocks, lambda reg: _record(recorded, reg, keep_secrets),
                                              shortcuts=shortcuts)
    logger, log = _log()
    pulumi_runtime.start(mocks, monitor, project=PROJECT, stack=stack, config=config, logger=logger)  # fresh root

    program = Path(program).resolve()
    # The project root stays importable (stackspec, infra, ...) for a program kept elsewhere.
    paths = list(dict.fromkeys([str(program.parent), str(ROOT)]))

    def run_program() -> None:
        sys.path[:0] = paths
        try:
            runpy.run_path(str(program), run_name="__main__")
        finally:
            for path in paths:
                sys.path.remove(path)

    cwd = os.getcwd()
    # The program's log reaches ``logger`` (the rendering keeps its warnings); anything else the SDK
    # prints under mocks stays out of the CLI's output.
    # The program's from_pulumi() takes its lines from the file read here (--stacks-dir), not stacks/.
    with contextlib.redirect_stderr(io.StringIO()), stack_spec.stack_file_of_run(document):
        try:
            os.chdir(program.parent)
            outputs = pulumi_runtime.run(run_program, shortcuts=shortcuts)
        finally:
            os.chdir(cwd)
    from workloads import manifests

    held = [manifests.ray_job(spec, j) for j in manifests.held_jobs(spec)]
    # Registration order follows the engine's async scheduling: sort, so builds diff cleanly.
    resources = sorted(recorded, key=lambda r: r.urn)
    return Rendering(spec=spec, resources=resources, outputs=_plain(outputs), held=held,
                     warnings=log.at(logging.WARNING), document=document)
