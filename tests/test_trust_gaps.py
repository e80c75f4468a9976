"""Skeptic's review (REVIEW-trust.md): what the real tools would do with the workflows and the bootstrap's
repository settings as written. Every test here FAILS on this branch; each docstring names the upstream source.

    uv run pytest tests/test_trust_gaps.py -q
"""

from __future__ import annotations

import re
from pathlib import Path

from test_workflows import all_workflows, load, steps, trusted_jobs, uses

from bootstrap.access import TRUST_PATHS

ROOT = Path(__file__).resolve().parents[1]


def test_setup_uv_verifies_the_uv_it_downloads_in_credentialed_jobs():
    """astral-sh/setup-uv@20cfd1bf (v10.0.1) src/download/checksum/checksum.ts: with no `checksum` input it looks
    the version up in KNOWN_CHECKSUMS (src/download/checksum/known-checksums.ts, whose newest entry at that commit
    is 0.12.4) and, when absent, `core.debug("No checksum found ...")` and returns: the uv 0.13.8 binary every
    credentialed job runs is downloaded unverified (src/download/download-version.ts: 'For the default
    astral-sh/versions source, checksum validation relies on user input or the built-in KNOWN_CHECKSUMS table')."""
    missing = []
    for name, wf in all_workflows().items():
        for job_name, job in trusted_jobs(wf).items():
            for s in uses(job, "astral-sh/setup-uv"):
                if not re.fullmatch(r"[0-9a-f]{64}", str(s.get("with", {}).get("checksum", ""))):
                    missing.append(f"{name}:{job_name}")
    assert missing == [], f"setup-uv downloads uv without a checksum in: {missing}"


def test_the_pulumi_cli_of_credentialed_jobs_is_hashed():
    """pulumi/actions@8e5e406f (v7.0.0) src/libs/pulumi-cli.ts downloadCli: `tc.downloadTool(downloads[platform])`
    then extracts and runs it; no checksum is compared. The CLI is the engine that runs with ci-deploy's token."""
    unhashed = []
    for name, wf in all_workflows().items():
        for job_name, job in trusted_jobs(wf).items():
            for s in uses(job, "pulumi/actions"):
                if "pulumi-version" in s.get("with", {}):
                    unhashed.append(f"{name}:{job_name}")
    assert unhashed == [], f"the Pulumi CLI is downloaded unverified (pulumi/actions) in: {unhashed}"


def test_image_yml_signs_with_a_gcloud_command_that_exists_in_the_stack_project():
    """Google Cloud SDK surface/container/binauthz/attestations/sign_and_create.py:
    `@base.ReleaseTracks(base.ReleaseTrack.BETA, base.ReleaseTrack.ALPHA)` -- GA `gcloud container binauthz
    attestations` has only `create` and `list` (https://cloud.google.com/sdk/gcloud/reference/container/binauthz/
    attestations); and Run() creates the occurrence in `properties.VALUES.core.project`, which
    google-github-actions/auth@7c6bc770 sets (src/main.ts: exportVariable('CLOUDSDK_CORE_PROJECT', projectID), the
    project taken from the account's email: my-tpu-ci) -- where ci-image holds no containeranalysis.occurrences.create
    and the Container Analysis API is not enabled (bootstrap/access.py HOME_SERVICES)."""
    job = load("image.yml")["jobs"]["build"]
    (step,) = [s for s in steps(job) if "sign-and-create" in s.get("run", "")]
    run = step["run"]
    assert re.search(r"gcloud (beta|alpha) container binauthz attestations sign-and-create", run), \
        "GA gcloud has no `container binauthz attestations sign-and-create`: the step exits 2 (invalid choice)"
    assert "--project" in run, "the occurrence would be created in core/project (the CI project), not the stack's"


def test_the_image_the_job_signs_is_built_from_hashed_code():
    """image.yml's build job is credentialed (id-token: write) and signs what `docker build` produced; the
    Dockerfile installs uv and maxtext[tpu] and its whole dependency tree from PyPI with no hash
    (`pip install uv==...`, `uv pip install --resolution=lowest maxtext[tpu]==0.2.1`): the attested image
    contains unverified code."""
    text = (ROOT / "Dockerfile").read_text()
    installs = [line for line in text.splitlines() if re.search(r"\bpip install\b", line)]
    assert all("--require-hashes" in line or "--no-deps" in line for line in installs), installs


def test_code_owners_cover_what_credentialed_jobs_execute():
    """Branch protection requires a code owner's review only for TRUST_PATHS. The credentialed jobs also execute:
    __main__.py and Pulumi.yaml (`pulumi preview`/`up` as ci-preview/ci-deploy; Pulumi.yaml's runtime options
    choose the program), slicectl/ and offline/ (`slicectl preview` in deploy.yml's preview job, which holds
    id-token: write for every step), drills/ (`slicectl drill` as ci-drill); and tests/ holds the checks that
    guard all of this (test_escalation.py, test_workflows.py). A change to any of them needs one approval from any
    writer, then runs unreviewed on main as ci-preview-<stack> (read-<stack> has no reviewer)."""
    executed = ["/__main__.py", "/Pulumi.yaml", "/slicectl/", "/offline/", "/drills/", "/tests/"]
    uncovered = [p for p in executed if not any(p.startswith(t) for t in TRUST_PATHS)]
    assert uncovered == [], f"not owned by the reviewers: {uncovered}"


def test_pulumis_own_uv_sync_stays_in_the_locked_base_set():
    """Pulumi.yaml `runtime.options.toolchain: uv`: pulumi/pulumi sdk/python/toolchain/uv.go
    (*uv).Command runs `uv sync --inexact` before every program run ("To maintain uv's behaviour that `uv run ...`
    should keep the venv up-to-date, we run `uv sync` first"): no --locked, no --no-default-groups. With
    pyproject.toml `[tool.uv] default-groups = ["dev", "bootstrap"]`, every `pulumi preview`/`up` in a
    credentialed job installs the dev and bootstrap groups too -- the install the workflows' own boundary test
    forbids ('an install beyond the locked base set (extras, groups ...)'). Nothing in the job env stops it
    (UV_NO_DEFAULT_GROUPS / UV_LOCKED / UV_FROZEN)."""
    import tomllib

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text()).get("tool", {}).get("uv", {}).get("default-groups")
    leaks = []
    for name, wf in all_workflows().items():
        for job_name, job in trusted_jobs(wf).items():
            runs_pulumi = uses(job, "pulumi/actions") and any(
                "pulumi " in s.get("run", "") or s.get("with", {}).get("command") for s in steps(job))
            if not runs_pulumi:
                continue
            env = {**wf.get("env", {}), **job.get("env", {})}
            if groups and not (env.get("UV_NO_DEFAULT_GROUPS") and (env.get("UV_LOCKED") or env.get("UV_FROZEN"))):
                leaks.append(f"{name}:{job_name}")
    assert leaks == [], f"Pulumi's `uv sync --inexact` installs default groups {groups} in: {leaks}"
