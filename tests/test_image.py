"""The prebuilt worker image: Dockerfile facts, the Artifact Registry repository, the image by digest.

The real program runs under Pulumi's mocks (offline.engine.render); only GCP and the engine are
stand-ins. Nothing here builds the image (no Docker daemon): the workflow does, on main.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS, rendered
from packaging import tags
from packaging.utils import parse_wheel_filename

from offline import engine
from stackspec import names
from stackspec import spec as stack_spec
from workloads import manifests
from workloads.trainer import maxtext_trainer as trainer

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
IMAGE_REQUIREMENTS = "workloads/trainer/image-requirements.txt"
NS = stack_spec.PROJECT


def arg(name: str) -> str:
    return re.search(rf"^ARG {name}=(.*)$", DOCKERFILE, re.M).group(1).strip().strip('"')


def containers(doc: dict) -> list[tuple[str, dict]]:
    """Every container of a RayCluster/RayJob, with where it is."""
    body = doc["spec"]
    out = []
    if doc["kind"] == "RayJob":
        out += [("submitter", c) for c in body.get("submitterPodTemplate", {}).get("spec", {}).get("containers", [])]
        body = body.get("rayClusterSpec", {})
    if body:
        out += [("head", c) for c in body["headGroupSpec"]["template"]["spec"]["containers"]]
        for g in body["workerGroupSpecs"]:
            out += [(g["groupName"], c) for c in g["template"]["spec"]["containers"]]
    return out


def test_dockerfile_builds_from_the_prod_ray_image_and_installs_what_workers_installed():
    prod = stack_spec.load_stack("prod")
    assert arg("RAY_IMAGE") == prod.ray.image
    assert "FROM ${RAY_IMAGE}@${RAY_IMAGE_DIGEST}" in DOCKERFILE  # by digest only: an empty one fails the build
    # What the workers installed: WORKER_PACKAGES, as the lock's worker-image group (exported with hashes).
    group = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["worker-image"]
    assert group == trainer.WORKER_PACKAGES
    assert re.search(r"^maxtext==0\.2\.1 ", (ROOT / IMAGE_REQUIREMENTS).read_text(), re.M)
    assert f"COPY {IMAGE_REQUIREMENTS} /tmp/image-requirements.txt" in DOCKERFILE
    # The trainer is copied in, and the build context holds nothing else.
    assert "COPY --chown=ray:users workloads/trainer/maxtext_trainer.py" in DOCKERFILE
    assert (ROOT / ".dockerignore").read_text().split("\n")[-3:] == [
        f"!{IMAGE_REQUIREMENTS}", "!workloads/trainer/maxtext_trainer.py", ""]


def _installs(dockerfile: str) -> list[list[str]]:
    """Every `pip install` of the Dockerfile's RUN instructions, as words (continuations joined)."""
    text = dockerfile.replace("\\\n", " ")
    return [cmd.split() for line in text.splitlines() if line.startswith("RUN ")
            for cmd in re.split(r"&&|;", line[4:]) if re.search(r"\bpip install\b", cmd)]


# Packages of the image's tree that ship no wheel for the image's platform (linux x86_64, CPython 3.12): pip builds
# their hashed sdist with the base image's setuptools. promise 2.3: PyPI has only its sdist (uv.lock).
SDIST_ONLY = {"promise"}


def test_the_image_the_job_signs_is_built_from_hashed_code():
    """image.yml's build job is credentialed and signs what `docker build` produced: every package the Dockerfile
    installs is checked against uv.lock's sha256 (REVIEW-trust.md B4). What is built from source is named, and the
    list may not grow unnoticed."""
    (install,) = _installs(DOCKERFILE)
    assert {"--require-hashes", "--no-deps", "--no-build-isolation"} <= set(install)
    assert install[install.index("--only-binary") + 1] == ":all:"
    assert install[install.index("-r") + 1] == "/tmp/image-requirements.txt"
    no_binary = set(install[install.index("--no-binary") + 1].split(","))
    lock = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    pins = dict(re.findall(r"^([a-z0-9][a-z0-9._-]*)==(\S+)", (ROOT / IMAGE_REQUIREMENTS).read_text(), re.M))
    assert len(pins) > 100 and all(lock[n]["version"] == v for n, v in pins.items())

    # The tags pip accepts on the base image (CPython 3.12, x86_64, glibc 2.35: Ubuntu 22.04).
    platforms = [f"manylinux_2_{m}_x86_64" for m in range(35, 4, -1)] + [
        "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    supported = {*tags.cpython_tags((3, 12), platforms=platforms),
                 *tags.compatible_tags((3, 12), "cp312", platforms)}

    def has_wheel(name: str) -> bool:
        return any(supported & parse_wheel_filename(w["url"].rsplit("/", 1)[1])[3]
                   for w in lock[name].get("wheels", []))

    assert {n for n in pins if not has_wheel(n)} == SDIST_ONLY == no_binary
    assert all("sdist" in lock[n] for n in SDIST_ONLY)


def test_the_install_check_sees_an_unhashed_install():
    """The check above is live: the old install line (uv from PyPI, MaxText resolved at build time) fails it."""
    old = DOCKERFILE.replace("pip install --no-cache-dir --require-hashes",
                             'pip install --no-cache-dir "uv==0.13.8" && uv pip install --resolution=lowest '
                             '"maxtext[tpu]==0.2.1" && pip install --require-hashes')
    assert len(_installs(old)) == 3 and not all("--require-hashes" in words for words in _installs(old)[:2])


def test_prod_creates_the_repository_with_reader_and_pusher(prod):
    (repo,) = prod.by_type("gcp:artifactregistry/repository:Repository")
    spec = prod.spec
    assert (repo.inputs["repositoryId"], repo.inputs["format"], repo.inputs["location"]) == (
        spec.image.repository, "DOCKER", spec.region)
    assert repo.inputs["dockerConfig"] == {"immutableTags": True}
    assert repo.protect  # prod keeps it
    members = {(m.inputs["role"], m.inputs["member"]) for m in
               prod.by_type("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember")}
    assert members == {
        ("roles/artifactregistry.reader", f"serviceAccount:maxtext-tpu-nodes@{spec.project}.iam.gserviceaccount.com"),
        ("roles/artifactregistry.writer", f"serviceAccount:ci-image@{spec.ci_project}.iam.gserviceaccount.com"),
    }
    apis = {s.inputs["service"] for s in prod.by_type("gcp:projects/service:Service")}
    assert {"artifactregistry.googleapis.com", "containerfilesystem.googleapis.com"} <= apis


DIGEST = "sha256:" + "ab" * 32


def with_digest(digest: str = DIGEST) -> dict[str, str]:
    """prod's config with image.digest set (image.yml's output, as a PR sets it)."""
    cfg = engine.stack_config("prod")
    cfg[f"{NS}:image"] = json.dumps(json.loads(cfg[f"{NS}:image"]) | {"digest": digest})
    return cfg


def ray_containers(r: engine.Rendering) -> tuple[list[dict], set[str]]:
    """The RayClusters/RayJobs (applied and held) and where their containers are."""
    docs = [d for d in (*r.manifests, *r.held) if d["kind"] in ("RayCluster", "RayJob")]
    return docs, {w if w in ("head", "submitter") else "worker" for d in docs for w, _ in containers(d)}


def test_first_phase_runs_the_ray_image_and_installs_maxtext(prod):
    """No digest yet (day 0: this update creates the repository the image is pushed to): every Ray container
    runs ray.image, the workers install MaxText at start, and each object says the image is pending."""
    spec = prod.spec
    assert spec.image is not None and spec.image.pending and not spec.prebuilt_image
    assert spec.worker_image == spec.ray.image == "rayproject/ray:2.60.0-py312-tpu"
    docs, seen = ray_containers(prod)
    assert seen == {"head", "worker", "submitter"}
    for d in docs:
        assert all(c["image"] == spec.ray.image for _, c in containers(d)), d["metadata"]["name"]
        assert d["metadata"]["annotations"][manifests.IMAGE_DIGEST_ANNOTATION] == "pending"
        if d["kind"] == "RayJob":
            assert "--prebuilt-image" not in d["spec"]["entrypoint"].split()
    # The repository and its pusher's grant are there for image.yml to push to.
    assert prod.by_type("gcp:artifactregistry/repository:Repository")


def test_every_ray_container_runs_the_image_by_digest():
    r = engine.render("prod", with_digest())
    spec = r.spec
    assert spec.prebuilt_image and not spec.image.pending
    image = spec.worker_image
    assert image == (f"{names.registry_host(spec.region)}/{spec.project}/{spec.image.repository}/"
                     f"{spec.image.name}@{DIGEST}")
    docs, seen = ray_containers(r)
    assert seen == {"head", "worker", "submitter"}
    for d in docs:
        for where, c in containers(d):
            assert c["image"] == image, (d["metadata"]["name"], where)
        # A known digest: no annotation.
        assert manifests.IMAGE_DIGEST_ANNOTATION not in d["metadata"].get("annotations", {})
        # Workers install nothing at start: the trainer is told the image holds MaxText.
        if d["kind"] == "RayJob":
            assert "--prebuilt-image" in d["spec"]["entrypoint"].split()


@pytest.mark.parametrize(("digest", "message"), [
    ("latest", "an image digest sha256:<64 hex digits>"),
    (stack_spec.PLACEHOLDER_IMAGE_DIGEST, "the offline placeholder is not an image"),
])
def test_bad_digests_are_refused(digest, message):
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load("prod", with_digest(digest))
    assert message in str(e.value) and "image.digest" in str(e.value)


@pytest.mark.parametrize("dry_run", [True, False], ids=["preview", "update"])
def test_an_unset_digest_deploys_the_first_phase_with_a_warning(monkeypatch, dry_run):
    """`pulumi up` without a digest is the first phase, not a refusal: it declares everything and warns
    (as the preview does) that the workers run ray.image until image.digest is set."""
    import pulumi

    warnings: list[str] = []
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(str(msg)))
    r = engine.render("prod")
    assert r.by_type("gcp:container/cluster:Cluster") and r.by_type("gcp:artifactregistry/repository:Repository")
    (first,) = [w for w in warnings if "image.digest is unset" in w]
    assert "first phase" in first and r.spec.ray.image in first
    assert not [w for w in warnings if "image.digest" in w and w != first]
    # Set, the warning goes.
    warnings.clear()
    engine.render("prod", with_digest())
    assert not [w for w in warnings if "image.digest" in w]


def test_image_streaming_on_every_pool_with_the_image(prod):
    pools = prod.by_type("gcp:container/nodePool:NodePool")
    assert pools and all(p.inputs["nodeConfig"]["gcfsConfig"] == {"enabled": True} for p in pools)
    dev = rendered("dev")  # no image section: ray.image from Docker Hub, which GKE cannot stream
    assert all("gcfsConfig" not in p.inputs["nodeConfig"] for p in dev.by_type("gcp:container/nodePool:NodePool"))
    assert not dev.by_type("gcp:artifactregistry/repository:Repository")
    ray = [d for d in dev.manifests if d["kind"] in ("RayCluster", "RayJob")]
    assert ray and all(c["image"] == dev.spec.ray.image for d in ray for _, c in containers(d))


def test_image_workflow_pushes_by_digest_as_its_own_identity():
    wf = yaml.safe_load((ROOT / ".github/workflows/image.yml").read_text())
    wf["on"] = wf.pop(True)
    assert wf["on"]["push"]["branches"] == ["main"] and "Dockerfile" in wf["on"]["push"]["paths"]
    build = wf["jobs"]["build"]
    # actions: read for the check of its approval environment (`image`, required reviewers, main only).
    assert build["permissions"] == {"contents": "read", "id-token": "write", "actions": "read"}
    assert build["environment"] == "image"
    run = " ".join(s.get("run", "") for s in build["steps"])
    # One push per stack with an image section (the stacks job's list), each signed digest in the job summary.
    assert build["strategy"]["matrix"] == {"target": "${{ fromJSON(needs.stacks.outputs.image) }}"}
    (step,) = [s for s in build["steps"] if "docker push" in s.get("run", "")]
    assert step["env"] == {"IMAGE": "${{ matrix.target.image }}"}
    assert 'docker push "$IMAGE:$GITHUB_SHA"' in run and 'digest="${ref##*@}"' in run
    (sign,) = [s for s in build["steps"] if "sign-and-create" in s.get("run", "")]
    assert sign["env"]["DIGEST"] == "${{ steps.push.outputs.digest }}"
    assert sign["env"]["ATTESTOR"] == "${{ matrix.target.attestor }}"
    assert "tpu-multislice:image.digest: $DIGEST" in run and "stacks/Pulumi.$STACK.yaml" in run


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_the_preview_shows_the_first_phase_warning_first(fmt, tmp_path, capsys):
    """The program's warnings (the day-0 image phase, the unverified opt-ins) come first, on their stack-file
    line, before the policies and the plan, in the terminal and in the PR comment (markdown)."""
    from slicectl import cli

    assert cli.main(["preview", "--stack", "prod", "--out", str(tmp_path), "--format", fmt]) == 0
    out = capsys.readouterr().out
    first = out.index("image.digest is unset: first phase")
    assert first < out.index("Policies") < out.index("Plan")
    assert "unverified, opted in with tpu-multislice:unverified.rayTokenAuth" in out[:out.index("Plan")]
    line = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text().splitlines().index("  tpu-multislice:image:") + 1
    assert f"Pulumi.prod.yaml:{line}: tpu-multislice:image.digest is unset" in out
    rendering = rendered("prod")
    assert rendering.warnings[0].startswith("tpu-multislice:image.digest is unset: first phase")
