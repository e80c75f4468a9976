"""``slicectl new``: a team's stack from the README's one command, and the shipped team-eu stack it wrote.

The command runs for real (``slicectl.cli.main``) into a temporary stacks directory beside copies of the
repository's stack files (its CI project and GKE version come from them); the file it writes is then
loaded, linted and previewed by the real commands, and must be the team-eu stack it wrote when the example
shipped (the tests' copy, ``tests/fixtures/stacks/Pulumi.team-eu.yaml``) but for its header comment.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS, stack_files

from slicectl import cli, cmd_new, cmd_stacks
from stackspec import spec, tpu, zones

ROOT = Path(__file__).resolve().parents[1]
TEAM_EU = ["team-eu", "--project", "team-eu-tpu", "--region", "europe-west4", "--zone", "europe-west4-a",
           "--slice-shape", "v6e-32", "--slices", "4", "--capacity", "spot,on-demand"]


@pytest.fixture
def stacks_dir(tmp_path) -> Path:
    """The repository's stack files but team-eu, in a directory of their own."""
    return stack_files(tmp_path / "stacks", "team-eu")


def test_slicectl_new_writes_the_shipped_team_eu_stack_and_it_lints_previews_and_costs_clean(stacks_dir, capsys):
    assert cli.main(["new", *TEAM_EU, "--stacks-dir", str(stacks_dir)]) == 0
    out = capsys.readouterr().out
    # The next steps: the bootstrap, the stack's state with its own key, the image's digest.
    written = stacks_dir / "Pulumi.team-eu.yaml"
    provider = "gcpkms://projects/my-tpu-ci/locations/global/keyRings/pulumi/cryptoKeys/team-eu"
    for step in ("cd bootstrap && pulumi up", f'pulumi stack init team-eu --secrets-provider="{provider}"',
                 "encryptedkey", "tpu-multislice:deploy.onPush", "image.digest"):
        assert step in out, step
    text = written.read_text()
    shipped = (FIXTURE_STACKS / "Pulumi.team-eu.yaml").read_text()
    assert cmd_new.header_free(text) == cmd_new.header_free(shipped), \
        "regenerate tests/fixtures/stacks/Pulumi.team-eu.yaml (the fixture below its two-line fixture header)"
    # It loads: four 4x8 slices, Spot first then on-demand, in the zone the table lists, its key named.
    s = spec.load_stack("team-eu", stacks_dir)
    assert s.project == "team-eu-tpu" and s.region == "europe-west4"
    assert s.zone in zones.in_region("europe-west4", "v6e")
    assert [(x.topology, tuple(c.type for c in x.capacity)) for x in s.slices] == [("4x8", ("spot", "on-demand"))] * 4
    assert s.unverified.dra_scale_from_zero and s.prod and not s.deploy.on_push
    assert s.secrets_provider == provider and s.ci_project == spec.load_stack("prod").ci_project
    assert s.cluster.version == spec.load_stack("prod").cluster.version
    doc = yaml.safe_load(text)
    assert "encryptedkey" not in doc and "# it opens nothing without it): commit it." in text
    assert "draScaleFromZero" in text and "ca-dra-scale-from-zero" in text  # the opt-in, and why
    # Lint (model and spec-only policies) and the whole preview (every policy) are clean; cost runs.
    assert cli.main(["lint", "--stack", "team-eu", "--stacks-dir", str(stacks_dir)]) == 0
    assert cli.main(["preview", "--stack", "team-eu", "--stacks-dir", str(stacks_dir)]) == 0
    preview = capsys.readouterr().out
    assert "Policies: all" in preview and "rules pass" in preview
    # In every workflow's lists as every stack is; not deployed or drilled until it opts in.
    lists = cmd_stacks.lists(stacks_dir)
    assert "team-eu" in lists["all"] and "team-eu" not in lists["deploy"]
    [target] = [t for t in lists["image"] if t["stack"] == "team-eu"]
    assert target["image"] == "europe-west4-docker.pkg.dev/team-eu-tpu/tpu-multislice/ray-maxtext"


def test_the_shipped_team_eu_stack_costs_with_the_price_table_and_unknown_as_unknown(capsys):
    assert cli.main(["cost", "--stack", "team-eu"]) == 0
    out = capsys.readouterr().out
    assert "v6e-32-0  1  spot" in out and "table [1]" in out
    assert "unknown" in out and "$0.00" not in out


def test_on_demand_only_gets_a_multislice_job_and_no_opt_in(stacks_dir):
    request = cmd_new.NewStack(stack="team-us", project="team-us-tpu", region="us-east5", zone="us-east5-b",
                               slice_shape="v6e-16", slices=2, capacity=("on-demand",), ci_project="my-tpu-ci",
                               gke_version="1.35.2-gke.1842000")
    assert cmd_new.problems(request, stacks_dir) == []
    (stacks_dir / "Pulumi.team-us.yaml").write_text(cmd_new.render(request))
    s = spec.load_stack("team-us", stacks_dir)
    assert [j.mode for j in s.jobs] == ["multislice", "elastic"] and not s.unverified.dra_scale_from_zero
    shape = tpu.resolve("v6e", "4x4")
    assert all(x.shape.key == shape.key for x in s.slices) and s.jobs[0].slices == 2
    assert "unverified" not in (stacks_dir / "Pulumi.team-us.yaml").read_text()


@pytest.mark.parametrize(
    ("edits", "messages"),
    [
        ({"stack": "prod"}, ["Pulumi.prod.yaml: the stack 'prod' exists already"]),
        ({"stack": "Team_EU"}, ["stack 'Team_EU': lowercase letters"]),
        ({"stack": "a-very-long-team-name-x"}, ["its deploy identity ci-deploy-a-very-long-team-name-x"]),
        ({"--zone": "europe-west4-b"}, ["--zone 'europe-west4-b': offers no v6e TPUs; v6e zones of europe-west4: "
                                        "europe-west4-a"]),
        ({"--zone": "us-east5-b"}, ["--zone 'us-east5-b': not a zone of europe-west4"]),
        ({"--region": "europe"}, ["--region 'europe': a GCP region"]),
        ({"--slice-shape": "v6e-24"}, ["--slice-shape 'v6e-24': not in the slice table", "v6e-32"]),
        ({"--capacity": "spot,spot"}, ["each option once"]),
        ({"--capacity": "reservation"}, ["a reservation needs its name"]),
        ({"--project": "my-tpu-ci"}, ["the CI project holds no stack"]),
        ({"--slice-shape": "v6e-33", "--zone": "europe-west4-c", "--project": "X"},
         ["--slice-shape 'v6e-33'", "--project 'X'"]),
    ],
)
def test_slicectl_new_refuses_with_one_line_per_problem_and_writes_nothing(stacks_dir, capsys, edits, messages):
    argv = list(TEAM_EU)
    for key, value in edits.items():
        if key == "stack":
            argv[0] = value
        else:
            argv[argv.index(key) + 1] = value
    before = sorted(p.name for p in stacks_dir.iterdir())
    assert cli.main(["new", *argv, "--stacks-dir", str(stacks_dir)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and all(line.startswith("error: ") for line in err.splitlines())
    for m in messages:
        assert m in err, (m, err)
    assert sorted(p.name for p in stacks_dir.iterdir()) == before


def test_slicectl_new_without_stack_files_needs_the_ci_project_and_gke_version(tmp_path, capsys):
    assert cli.main(["new", *TEAM_EU, "--stacks-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--ci-project: required" in err and "--gke-version: required" in err
    assert cli.main(["new", *TEAM_EU, "--stacks-dir", str(tmp_path), "--ci-project", "my-tpu-ci", "--gke-version",
                     "1.35.2-gke.1842000"]) == 0
    assert spec.load_stack("team-eu", tmp_path).ci_project == "my-tpu-ci"


def test_slicectl_new_takes_the_minor_not_an_exact_patch(stacks_dir, capsys):
    """A stack file that still pins an exact patch: the new stack gets its minor (GKE's alias ``1.35``, the
    channel's newest 1.35 patch at creation), never the patch, which fails to create once it leaves the channel."""
    prod = stacks_dir / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace('version: "1.35"', "version: 1.35.2-gke.1842000", 1))
    assert spec.load_stack("prod", stacks_dir).cluster.version == "1.35.2-gke.1842000"
    assert cli.main(["new", *TEAM_EU, "--stacks-dir", str(stacks_dir)]) == 0
    assert spec.load_stack("team-eu", stacks_dir).cluster.version == "1.35"
