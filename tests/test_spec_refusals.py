"""A spec that refuses what GCP, GKE, Kueue or KubeRay would, says so in words, and accepts the legal stacks.

Each case edits a fixture stack (``tests/fixtures/stacks/``) and runs the real command in-process: ``lint`` and
``preview`` must give the same answer, one line per problem with the file, line, key and value.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS

from slicectl import cli
from slicectl.exits import Exit
from stackspec import names
from stackspec import spec as stack_spec

NS = stack_spec.PROJECT
PROD = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
DEV = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def lint_and_preview(tmp_path: Path, text: str, stack: str = "case") -> tuple[int, str]:
    """lint's exit code and lines; preview must agree on both (same code, same problem lines)."""
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(text)
    lint_code, lint_out, lint_err = _run(["lint", "--stack", stack, "--stacks-dir", str(tmp_path)])
    code, _, err = _run(["preview", "--stack", stack, "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    assert code == lint_code, (lint_err, err)
    if code == Exit.INVALID_SPEC:
        problems = lambda s: sorted(line.removeprefix("error: ") for line in s.splitlines()  # noqa: E731
                                    if ".yaml:" in line)
        assert problems(lint_out + lint_err) == problems(err)
    return code, lint_out + lint_err


def edited(text: str, fn) -> str:
    doc = yaml.safe_load(text)
    fn(doc["config"])
    return yaml.safe_dump(doc, sort_keys=False)


# --------------------------------------------------------------------------- strict input, words not pydantic's


@pytest.mark.parametrize("value", ["'yes'", "'on'", "1", "'true'"])
def test_a_switch_is_true_or_false_only(tmp_path, value):
    """deploy.onPush decides whether a push deploys: pydantic's lax mode read 'yes', 'on' and 1 as true."""
    text = PROD.replace("    onPush: true", f"    onPush: {value}")
    assert text != PROD
    code, out = lint_and_preview(tmp_path, text)
    assert code == Exit.INVALID_SPEC, out
    assert f"{NS}:deploy.onPush = " in out and "must be true or false" in out


def test_an_unquoted_version_is_refused_not_read_as_a_number(tmp_path):
    """YAML reads an unquoted 1.40 as 1.4: the version meant is gone, so the spec asks for it quoted."""
    text = PROD.replace('    version: "1.35"', "    version: 1.40", 1)
    code, out = lint_and_preview(tmp_path, text)
    assert code == Exit.INVALID_SPEC
    assert re.search(rf":14: {NS}:cluster.version = 1.4: a version is text: quote it as written", out), out
    assert "needs at least" not in out  # not the misleading floor message on "1.4"


@pytest.mark.parametrize(("edit", "words"), [
    (lambda c: c[f"{NS}:cluster"].update(systemNodeCount=-3), "cluster.systemNodeCount = -3: must be at least 1"),
    (lambda c: c[f"{NS}:jobs"][0].update(steps=0), ".steps = 0: must be at least 1"),
    (lambda c: c[f"{NS}:slices"][0].update(capacity="spot"),
     'slices[0].capacity = "spot": must be a list (a YAML sequence): one item is a list of one, [{type: spot}]'),
])
def test_messages_are_words_not_pydantic(tmp_path, edit, words):
    code, out = lint_and_preview(tmp_path, edited(PROD, edit))
    assert code == Exit.INVALID_SPEC and words in out, out
    assert "Input should" not in out and "Tuple should" not in out


def test_lint_refuses_a_checkpoint_period_past_the_last_step_as_preview_does(tmp_path):
    """A job on Spot slices saving its first checkpoint at or after its last step saves nothing before a
    preemption: the policy pack refused it in preview only; lint now answers the same."""
    text = DEV.replace("      checkpointPeriod: 10", "      checkpointPeriod: 500")
    assert text != DEV
    code, out = lint_and_preview(tmp_path, text, "dev")
    assert code == Exit.INVALID_SPEC
    assert f"{NS}:jobs[0].checkpointPeriod = 500" in out and "nothing is saved before a preemption" in out


# --------------------------------------------------------------------------- legal stacks accepted


def test_a_40_character_cluster_name_deploys_with_a_short_node_account(tmp_path):
    """GKE takes 40 characters; the node account's ID is derived within IAM's 6-30, distinct per name."""
    name = "a-forty-character-cluster-name-for-ml-ab"
    assert len(name) == 40
    code, out = lint_and_preview(tmp_path, PROD.replace("    name: maxtext-tpu\n", f"    name: {name}\n"))
    assert code == Exit.OK, out
    account = names.node_service_account_id(name)
    other = names.node_service_account_id(name[:-1] + "c")
    assert len(account) <= 30 and account.endswith("-nodes") and account != other
    assert stack_spec.load_stack("case", tmp_path).derived_names()  # every derived name within its limit
    assert names.node_service_account_id("maxtext-tpu") == "maxtext-tpu-nodes"  # short names unchanged


# --------------------------------------------------------------------------- slicectl new and the CLI's rough edges

ACME = ["--project", "acme-ml-x1", "--region", "us-east5", "--ci-project", "acme-ci", "--gke-version", "1.35",
        "--slice-shape", "v6e-16", "--slices", "2"]
REGIONS = ["--regions", "us-east5:us-east5-b,us-east1:us-east1-d"]


def test_new_regions_quotes_versions_and_gives_every_spot_region_an_elastic_job(tmp_path):
    """An elastic job stays in one region (MultiKueue does not dispatch it): with Spot capacity one job per region,
    or the other regions' slices serve nothing. Versions are written quoted, as the spec asks."""
    code, _, err = _run(["new", "acme", *ACME, *REGIONS, "--capacity", "spot", "--stacks-dir", str(tmp_path)])
    assert code == 0, err
    text = (tmp_path / "Pulumi.acme.yaml").read_text()
    assert re.findall(r"version: (.*)", text) == ['"1.35"'] * 3
    s = stack_spec.load_stack("acme", tmp_path)
    assert sorted(j.region for j in s.jobs if j.elastic) == ["us-east1", "us-east5"]


def test_new_next_steps_keep_the_stacks_dir_and_work_when_pasted(tmp_path):
    code, out, err = _run(["new", "acme", *ACME, "--zone", "us-east5-b", "--stacks-dir", str(tmp_path)])
    assert code == 0, err
    first = out.split("1. ", 1)[1].split("  2.", 1)[0].replace("\\\n", " ")
    commands = [c.split() for c in first.split("&&")]
    assert len(commands) == 3
    for argv in commands:
        assert argv[:3] == ["uv", "run", "slicectl"] and "--stacks-dir" in argv, argv
        assert _run(argv[3:])[0] == Exit.OK


def test_version_and_a_help_without_markup():
    code, out, _ = _run(["--version"])
    assert code == 0 and re.fullmatch(r"slicectl \d+\.\d+\.\d+\n", out)
    code, out, _ = _run(["--help"])
    assert code == 0 and "``" not in out and ":mod:" not in out
    assert "(no render)" not in _run(["--help"])[1]


def test_lifecycle_names_its_stack_rather_than_assume_prod(capsys):
    code, _, err = _run(["lifecycle"])
    assert code == Exit.USAGE and "--stack" in err


def test_cost_json_makes_no_directories(tmp_path):
    target = tmp_path / "no" / "such" / "cost.json"
    code, _, err = _run(["cost", "--stack", "prod", "--stacks-dir", str(FIXTURE_STACKS), "--json", str(target)])
    assert code == Exit.USAGE and "no such directory" in err
    assert not (tmp_path / "no").exists()


@pytest.mark.slow
def test_the_fork_check_runs_the_teams_own_stacks(tmp_path):
    """tests/fork_check.sh runs the fast suite with the team's stacks (the working tree's, or FORK_CHECK_STACKS),
    not a canned one: here a stack `new` wrote and nothing committed."""
    import os
    import subprocess

    team = tmp_path / "team"
    team.mkdir()
    assert _run(["new", "acme", *ACME, "--zone", "us-east5-b", "--stacks-dir", str(team)])[0] == 0
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([str(root / "tests" / "fork_check.sh"), "tests/test_examples.py"], cwd=root,
                          env={**os.environ, "FORK_CHECK_STACKS": str(team)}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "fork check: fast suite in a fork with the stacks acme: exit 0" in done.stderr


# --------------------------------------------------------------------------- what GCP, GKE, Kueue or KubeRay refuse

def _dev(edit) -> str:
    return edited(DEV, edit)


def _groups(name: str):
    def edit(c):
        for s in c[f"{NS}:slices"]:
            s["group"] = name
        for j in c[f"{NS}:jobs"]:
            j.pop("group", None)
    return edit


def _control_plane(nets: list[dict]):
    return lambda c: c[f"{NS}:cluster"].update(controlPlane={"access": "authorized-networks",
                                                             "authorizedNetworks": nets})


@pytest.mark.parametrize(("edit", "key", "words"), [
    # Kueue's RayJob webhook: "%q is reserved for the head group"; KubeRay labels its head pod ray.io/group=headgroup.
    (_groups("head"), "slices[0].group", "reserved for the head group (Kueue's RayJob webhook"),
    (_groups("headgroup"), "slices[0].group", "reserved for the head group (KubeRay"),
    # GKE: "Public clusters can have up to 50 authorized network CIDR ranges; private clusters can have up to 100."
    (_control_plane([{"cidr": f"10.200.{i}.0/24"} for i in range(101)]), "cluster.controlPlane.authorizedNetworks",
     "GKE takes at most 100 for a private cluster"),
    (_control_plane([{"cidr": "0.0.0.0/0", "public": True}]), "cluster.controlPlane.authorizedNetworks[0].cidr",
     "opens the control plane's endpoint to the whole internet"),
    # Cloud Storage locations: a zone, an invented name, a place not holding the cluster's region.
    (lambda c: c[f"{NS}:storage"].update(location="us-east5-b"), "storage.location", "a zone is not"),
    (lambda c: c[f"{NS}:storage"].update(location="MOON"), "storage.location", "not a Cloud Storage location"),
    (lambda c: c[f"{NS}:storage"].update(location="EU"), "storage.location",
     "does not hold the cluster's region us-east5"),
    (lambda c: c[f"{NS}:storage"].update(location="europe-west4"), "storage.location", "the cluster runs in us-east5"),
    # Kubernetes int32 fields of the RayJob.
    (lambda c: c[f"{NS}:jobs"][0].update(activeDeadlineSeconds=2**31), "jobs[0].activeDeadlineSeconds",
     "must be at most 2147483647"),
    # An elastic job without checkpoints restarts at step 0 after every preemption.
    (lambda c: c[f"{NS}:jobs"][0].setdefault("maxtext", {}).update(enable_checkpointing=False),
     "jobs[0].maxtext.enable_checkpointing", "restarts at step 0"),
    # Image references a registry refuses: an uppercase path, a digest of the wrong length or case.
    (lambda c: c[f"{NS}:ray"].update(image="rayproject/Ray:2.60.0"), "ray.image", "not an image reference"),
    (lambda c: c[f"{NS}:ray"].update(image="rayproject/ray@sha256:" + "a" * 40), "ray.image", "not an image digest"),
    (lambda c: c[f"{NS}:ray"].update(image="rayproject/ray@sha256:" + "A" * 64), "ray.image", "not an image digest"),
])
def test_what_the_cloud_refuses_the_spec_refuses_at_its_key(tmp_path, edit, key, words):
    code, out = lint_and_preview(tmp_path, _dev(edit), "dev")
    assert code == Exit.INVALID_SPEC, out
    assert any(f"{NS}:{key} = " in line and words in line for line in out.splitlines()), out


def test_what_the_cloud_accepts_the_spec_accepts(tmp_path):
    """The boundaries: 100 private ranges, a public range other than /0 on dev, the bucket in the cluster's
    region's multi-region, a digest of 64 lowercase hex."""
    edits = [_control_plane([{"cidr": f"10.200.{i}.0/24"} for i in range(100)]),
             lambda c: c[f"{NS}:storage"].update(location="US"),
             lambda c: c[f"{NS}:ray"].update(image="rayproject/ray:2.60.0-py312-tpu@sha256:" + "a" * 64)]
    text = DEV
    for edit in edits:
        text = edited(text, edit)
    code, out = lint_and_preview(tmp_path, text, "dev")
    assert code == Exit.OK, out


def test_an_image_pusher_of_another_stack_is_refused(tmp_path):
    """Each ci-image-<stack> signs with its own stack's key only: another stack's pusher's images are never admitted."""
    other = "ci-image-team-eu@my-tpu-ci.iam.gserviceaccount.com"
    code, out = lint_and_preview(tmp_path, edited(PROD, lambda c: c[f"{NS}:image"].update(pusher=other)))
    assert code == Exit.INVALID_SPEC
    assert f'{NS}:image.pusher = "{other}": the image identity of stack team-eu' in out, out
    own = "ci-image-case@my-tpu-ci.iam.gserviceaccount.com"  # this stack's own (the file is Pulumi.case.yaml)
    code, out = lint_and_preview(tmp_path, edited(PROD, lambda c: c[f"{NS}:image"].update(pusher=own)))
    assert code == Exit.OK, out


def test_a_stack_keeping_its_secrets_with_another_stacks_key_is_refused_on_that_line(tmp_path):
    """lint judges the stacks of a directory together: team-eu's file naming prod's Cloud KMS key."""
    for name in ("prod", "team-eu"):
        (tmp_path / f"Pulumi.{name}.yaml").write_text((FIXTURE_STACKS / f"Pulumi.{name}.yaml").read_text())
    path = tmp_path / "Pulumi.team-eu.yaml"
    text = path.read_text()
    path.write_text(re.sub(r"(?m)^secretsprovider: .*$",
                           "secretsprovider: gcpkms://projects/my-tpu-ci/locations/global/keyRings/pulumi/cryptoKeys/prod",
                           text))
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if s.startswith("secretsprovider:"))
    code, out, err = _run(["lint", "--stacks-dir", str(tmp_path)])
    assert code == Exit.INVALID_SPEC, out + err
    assert f"Pulumi.team-eu.yaml:{line}: secretsprovider = " in out + err
    assert "the Cloud KMS key of stack prod" in out + err


def test_a_multi_region_stack_where_one_region_tries_a_reservation_first_previews(tmp_path):
    """It was a traceback (the policy locator read a multi-region stack's slices), then a false mandatory violation
    (the fallback rule mixed the two regions' classes of one name and their pools): now accepted."""
    text = (FIXTURE_STACKS / "Pulumi.multi.yaml").read_text()
    east1 = "capacity: [{type: on-demand, expectedWaitHours: 1.5}]}"
    assert text.count(east1) == 2
    text = text.replace(east1, "capacity: [{type: reservation, reservation: east1-res}, "
                               "{type: on-demand, expectedWaitHours: 1.5}]}")
    text = text.replace("    rayTokenAuth: true\n", "    rayTokenAuth: true\n    draScaleFromZero: true\n")
    code, out = lint_and_preview(tmp_path, text, "multi")
    assert code == Exit.OK, out
