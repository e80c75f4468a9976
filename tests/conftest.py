"""Shared test helpers: the tests' own stacks, CRD schemas vendored in ``vendor/`` and the seed tutorial.

The code's tests read their own stack files, ``tests/fixtures/stacks/`` (copies of the examples as they shipped,
headed as fixtures): a team that edits, replaces or removes the examples in ``stacks/`` breaks none of them. Only
``tests/test_examples.py`` reads ``stacks/``, whatever it holds.

The CRDs are vendored (``vendor/README.md`` names their source commits and licences), so a
fresh clone runs every test; ``vendor/SHA256SUMS`` holds their digests.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import kube_cel
import pytest
import yaml

from stackspec import loader as _loader

ROOT = Path(__file__).resolve().parents[1]
# The examples a team replaces (Pulumi.yaml's stackConfigDir): read by tests/test_examples.py only.
EXAMPLE_STACKS = _loader.STACKS_DIR
# The tests' own stacks. Every default that names the stacks directory (the loader, the engine, slicectl's
# --stacks-dir) reads them in this test process; a subprocess gets ``--stacks-dir`` (:data:`STACKS_ARGS`).
FIXTURE_STACKS = ROOT / "tests" / "fixtures" / "stacks"
_loader.STACKS_DIR = FIXTURE_STACKS
STACKS_ARGS = ("--stacks-dir", str(FIXTURE_STACKS))
# The same for a fresh interpreter (``python -c``): its first lines, before anything reads a stack.
FIXTURE_PRELUDE = f"from stackspec import loader\nloader.STACKS_DIR = loader.Path({str(FIXTURE_STACKS)!r})\n"
# ``slicectl`` as its own process, reading the tests' stacks (for the commands without ``--stacks-dir``).
SLICECTL = ("-c", FIXTURE_PRELUDE + "import sys\nfrom slicectl.cli import main\nsys.exit(main(sys.argv[1:]))\n")
# The documentation site's pages (mkdocs.yml): the README is the front page a repository shows, docs/ the rest.
DOCS = ROOT / "docs"


def documentation() -> str:
    """The README and every page under ``docs/``, as one text: a test that holds a section of the documentation to
    the code finds the section on whichever page it lives (pages move; the section's heading is what it names)."""
    return "\n\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))])
REFERENCE = ROOT / "tests" / "reference"  # the tests' own reference data (and escalation/, for now)
VENDOR = ROOT / "vendor"  # third-party copies: vendor/README.md names each one's source, commit and licence
SEED = VENDOR / "seeds" / "gke-multislice-elastic-ray-train-tutorial.txt"
KUBERAY_CRDS = VENDOR / "kuberay"
KUEUE_CRDS = VENDOR / "kueue"
CRD_FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}


def _strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it: unknown fields are not kept.

    A structural schema prunes fields it does not declare, so a misspelt field would
    silently vanish on apply; here it fails validation instead. ``x-kubernetes-*``
    markers are left as they are: jsonschema ignores unknown keywords, and
    int-or-string fields already carry an ``anyOf`` of both types.
    """
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@functools.cache
def load_crd(path: Path) -> dict[str, Any]:
    """A vendored CRD, read once per test process with libyaml's loader: they are large (the RayJob CRD is
    1.4 MB), and the pure-Python loader takes seconds where this takes a fraction of one. Callers deep-copy
    what they change."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(), Loader=loader)  # noqa: S506


def crd_schema(kind: str, version: str = "v1") -> dict[str, Any]:
    doc = load_crd(KUBERAY_CRDS / CRD_FILES[kind])
    served = next(v for v in doc["spec"]["versions"] if v["name"] == version)
    return _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))


# The stack file's key for the paths nothing here can verify (``stackspec.model.Unverified``).
UNVERIFIED = "tpu-multislice:unverified"
# prod's capacity fallbacks as the stack once shipped them (a named reservation, then flex-start, then
# on-demand); prod now holds the seed's fixed on-demand pools, and fallbacks are an opt-in.
FALLBACKS = ({"type": "reservation", "reservation": "v6e-res"},
             {"type": "flex-start", "maxRunDuration": "7d"},
             {"type": "on-demand"})


def policy_bindings(resource) -> dict[str, list[str]]:
    """An authoritative IAM policy resource's bindings, role -> members, from its policyData (the JSON the
    provider's getIAMPolicy data source makes, offline/iam_policy.py)."""
    doc = json.loads(resource.inputs["policyData"])
    assert set(doc) == {"bindings"}, doc  # no etag, version or audit configs in the data source's output
    return {b["role"]: b["members"] for b in doc["bindings"]}


def stack_files(into: Path, *leave_out: str) -> Path:
    """The tests' stack files (but the stacks ``leave_out`` names) copied into ``into``, for a test that
    edits or adds one (``--stacks-dir``)."""
    into.mkdir(parents=True, exist_ok=True)
    for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"):
        if p.name.removeprefix("Pulumi.").removesuffix(".yaml") not in leave_out:
            (into / p.name).write_text(p.read_text())
    return into


def opt_in(config: Mapping[str, str], *keys: str) -> dict[str, str]:
    """A flat stack config with these ``tpu-multislice:unverified`` keys (``draScaleFromZero``,
    ``rayTokenAuth``) turned on beside the ones the stack already sets (prod keeps rayTokenAuth)."""
    out = dict(config)
    out[UNVERIFIED] = json.dumps({**json.loads(out.get(UNVERIFIED) or "{}"), **dict.fromkeys(keys, True)})
    return out


def scale_from_zero(config: Mapping[str, str]) -> dict[str, str]:
    """Opted in to TPU pools that scale from zero with DRANET (capacity fallbacks, flex-start)."""
    return opt_in(config, "draScaleFromZero")


def with_fallbacks(config: Mapping[str, str], capacity: Sequence[Mapping] = FALLBACKS) -> dict[str, str]:
    """Every slice lists ``capacity`` (default: :data:`FALLBACKS`), with the opt-in pools from zero need."""
    key = "tpu-multislice:slices"
    slices = json.loads(config[key])
    for s in slices:
        s["capacity"] = [dict(c) for c in capacity]
    return scale_from_zero({**config, key: json.dumps(slices)})


# What rendered() rendered in this test process: (stack, its config as JSON or "") -> the offline.engine.Rendering,
# pickled.
_RENDERED: dict[tuple[str, str], bytes] = {}
# Where the xdist workers of this run share their renders (pytest's base temporary directory: a new one each run);
# set by _render_share at the start of a worker's session, None until then (a render is then this process's own).
_RENDER_SHARE: Path | None = None


@pytest.fixture(scope="session", autouse=True)
def _render_share(tmp_path_factory):
    """The folder of this run's shared renders: in pytest's base temporary directory, which the xdist workers of
    one run share (each worker's base is a folder of it, as :func:`jax_cache`'s), so both workers read one render
    of each stack instead of each making its own, and a new run starts from none (nothing kept across runs)."""
    import os

    global _RENDER_SHARE
    base = tmp_path_factory.getbasetemp()
    _RENDER_SHARE = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "renders"
    _RENDER_SHARE.mkdir(exist_ok=True)
    yield
    _RENDER_SHARE = None


def _render_pickled(stack: str, config: Mapping[str, str] | None, key: tuple[str, str]) -> bytes:
    """The render of ``key``, pickled: made here by the real engine, or by the other worker of this run, which
    rendered the same stack files with the same config (a lock per key: one renders, the other waits and reads)."""
    import fcntl
    import hashlib
    import pickle

    from offline import engine

    def render() -> bytes:
        return pickle.dumps(engine.render(stack, None if config is None else dict(config)),
                            protocol=pickle.HIGHEST_PROTOCOL)

    if _RENDER_SHARE is None:
        return render()
    name = hashlib.sha256(json.dumps(key).encode()).hexdigest()
    path = _RENDER_SHARE / f"{name}.pickle"
    with open(_RENDER_SHARE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists():
            return path.read_bytes()
        data = render()
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(path)  # whole or absent, whatever happens to this worker
        return data


def rendered(stack: str, config: Mapping[str, str] | None = None):
    """``offline.engine.render(stack, config)`` of the tests' stacks, rendered once per test run: many modules
    render the same stack, or the same edited config, on both workers, and a render is most of a second (prod was
    rendered about 66 times a run). Each caller gets its own copy, unpickled: a test that edits what it reads cannot
    leak into another (``pickle.loads`` makes the same copy as ``copy.deepcopy``, shared references kept, in a fifth
    of its time: ``test_a_shared_render_is_a_fresh_copy_of_the_engines``).
    Not for a test that changes what a render does (a monkeypatch): that one calls ``engine.render`` itself."""
    import pickle

    key = (stack, "" if config is None else json.dumps(dict(config), sort_keys=True))
    if key not in _RENDERED:
        _RENDERED[key] = _render_pickled(stack, config, key)
    return pickle.loads(_RENDERED[key])  # noqa: S301 (this run's own render)


@pytest.fixture(scope="module")
def prod():
    """The fixture prod stack (``tests/fixtures/stacks/Pulumi.prod.yaml``) as the program declares it
    (``offline.engine.Rendering``)."""
    return rendered("prod")


@pytest.fixture(scope="module")
def dev():
    """The fixture dev stack as the program declares it."""
    return rendered("dev")


@pytest.fixture(scope="module")
def multi():
    """The fixture two-region stack (a manager and two regions) as the program declares it."""
    return rendered("multi")


@pytest.fixture(scope="module")
def prod_fallbacks():
    """prod with capacity fallbacks (:data:`FALLBACKS`) on every slice, opted in to pools from zero."""
    from offline import engine

    return rendered("prod", with_fallbacks(engine.stack_config("prod")))


@pytest.fixture(scope="session")
def seed_text() -> str:
    return SEED.read_text()


@pytest.fixture(scope="session")
def kuberay_validator() -> Callable[[dict[str, Any]], list[str]]:
    """``validate(doc)`` -> the schema errors of a RayCluster/RayJob document (empty: valid)."""
    validators = {kind: jsonschema.Draft7Validator(crd_schema(kind)) for kind in CRD_FILES}

    def validate(doc: dict[str, Any]) -> list[str]:
        v = validators[doc["kind"]]
        errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in v.iter_errors(doc)]
        return errors + kube_cel.failures(kube_cel.evaluate(v.schema, doc))

    return validate


KUEUE_KINDS = {
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "AdmissionCheck": "kueue.x-k8s.io_admissionchecks.yaml",
    "ProvisioningRequestConfig": "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "Topology": "kueue.x-k8s.io_topologies.yaml",
    "Cohort": "kueue.x-k8s.io_cohorts.yaml",
    "MultiKueueCluster": "kueue.x-k8s.io_multikueueclusters.yaml",
    "MultiKueueConfig": "kueue.x-k8s.io_multikueueconfigs.yaml",
    "Workload": "kueue.x-k8s.io_workloads.yaml",
}

def _python_patterns(schema: Any) -> Any:
    """Go's RE2 takes ``^(?i)...``; Python's re wants a global flag first: ``(?i)^...``."""
    if isinstance(schema, dict):
        out = {k: _python_patterns(v) for k, v in schema.items()}
        if isinstance(out.get("pattern"), str) and out["pattern"].startswith("^(?i)"):
            out["pattern"] = "(?i)^" + out["pattern"][len("^(?i)"):]
        return out
    if isinstance(schema, list):
        return [_python_patterns(v) for v in schema]
    return schema


def kueue_schema(kind: str, version: str) -> dict[str, Any]:
    doc = load_crd(KUEUE_CRDS / KUEUE_KINDS[kind])
    served = next(v for v in doc["spec"]["versions"] if v["name"] == version and v.get("served"))
    return _python_patterns(_strict(copy.deepcopy(served["schema"]["openAPIV3Schema"])))


@pytest.fixture(scope="session")
def kueue_validator() -> Callable[[dict[str, Any]], list[str]]:
    """``validate(doc)`` -> schema errors of a Kueue object (its apiVersion picks the served version)."""
    cache: dict[tuple[str, str], jsonschema.Draft7Validator] = {}

    def validate(doc: dict[str, Any]) -> list[str]:
        group, _, version = doc["apiVersion"].partition("/")
        assert group == "kueue.x-k8s.io", doc["apiVersion"]
        key = (doc["kind"], version)
        if key not in cache:
            cache[key] = jsonschema.Draft7Validator(kueue_schema(*key))
        errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                  for e in cache[key].iter_errors(doc)]
        # The CRD's CEL rules (x-kubernetes-validations, which jsonschema does not read), as on a create.
        return errors + kube_cel.failures(kube_cel.evaluate(cache[key].schema, doc))

    return validate


# GMP's PodMonitoring CRD (vendor/README.md has its source and commit).
GMP_CRD = VENDOR / "gmp" / "monitoring.googleapis.com_podmonitorings.yaml"


@pytest.fixture(scope="session")
def pod_monitoring_validator() -> Callable[[dict[str, Any]], list[str]]:
    doc = load_crd(GMP_CRD)
    (v1,) = [v for v in doc["spec"]["versions"] if v["name"] == "v1"]
    validator = jsonschema.Draft7Validator(_strict(copy.deepcopy(v1["schema"]["openAPIV3Schema"])))
    return lambda d: ([f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(d)]
                      + kube_cel.failures(kube_cel.evaluate(validator.schema, d)))


@pytest.fixture(scope="session")
def local_cluster():
    """One real local Ray cluster (a head and two slice nodes, separate processes) for the real runs of every
    module a pytest process (an xdist worker) runs, as a platform team keeps a dev cluster between jobs: each run
    saves a cluster start (15-27 s here, measured 2026-11-28) and the drills replace the nodes they kill when they
    end (each module's tests check it is whole again). Started by the first module that asks for it; when the
    session is done every process of the cluster is gone."""
    import shutil
    import tempfile

    from drills.localray import LocalRayCluster, pid_alive

    (ROOT / "build").mkdir(exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="lc-", dir=ROOT / "build"))  # short: Ray's sockets
    cluster = LocalRayCluster(run_dir, slices=2)
    try:
        with cluster:
            yield cluster
        pids = [n.pid for n in cluster.nodes]
        assert pids and not any(pid_alive(p) for p in pids), "local cluster processes left behind"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def jax_cache(tmp_path_factory) -> Path:
    """The persistent JAX compilation cache every real run of this test run shares (MaxText's ``jax_cache_dir``): a
    run that compiles a shape another run compiled (same model, steps and worker count) loads it instead. In pytest's
    base temporary directory, shared by the xdist workers (each worker's base is a folder of it), so a run starts from
    an empty cache as a fresh clone does and nothing persists past it (not ``build/jax-cache``, which the CLI keeps
    between a person's runs). JAX reads a half-written entry as a miss and compiles."""
    import os

    base = tmp_path_factory.getbasetemp()
    path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "jax-cache"
    path.mkdir(exist_ok=True)
    return path


# The modules that take longest, longest first (measured: ``--durations``, docs/tests.md "Time"): the real Ray runs
# (wall: each waits on its cluster), then the fast tier's heaviest. A module not listed comes after them; a name
# listed but gone changes nothing.
LONGEST_FIRST = (
    "test_train_local.py",
    "test_drill_local.py",
    "test_drill_warm_spares.py",  # its own cluster and a 120-step run (its spares' window): it was scheduled last
    "test_drill_region_loss.py",
    "test_train_local_own.py",
    "test_warm_spares.py",
    "test_train_local_process.py",
    "test_spec_refusals.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n 2``) the tests are scheduled by file (``--dist loadfile``, pyproject's addopts): the
    real Ray/MaxText runs of one module stay on one worker, in order, sharing their module fixtures (the local
    cluster, test_train_local's trained run), and a module's own module fixtures (test_bootstrap's rendered
    bootstrap) are built once; the two workers take the files. Each run waits much of its time (cluster start,
    Ray Train's controller, the kill and the failure verdict), so two side by side use the two cores. All share the
    persistent compilation cache (:func:`jax_cache`).
    (``--dist loadgroup`` would schedule by ``xdist_group`` marks, but under pytest 9.2 it silently spreads every
    group over the workers: pytest-dev/pytest-xdist#1386, reproduced here.)

    The files go out in the order this leaves them (``--no-loadscope-reorder``): the longest first
    (:data:`LONGEST_FIRST`), then the rest by their number of tests, most first (xdist's own order), so that the
    worker that ends last ends with a short file, not a Ray module started alone at the end. A file's tests keep
    their order. Without xdist the order is the same."""
    ranks = {name: i for i, name in enumerate(LONGEST_FIRST)}
    counts: dict[str, int] = {}
    for item in items:
        counts[item.path.name] = counts.get(item.path.name, 0) + 1
    items.sort(key=lambda item: (ranks.get(item.path.name, len(ranks)), -counts[item.path.name], item.path.name))
