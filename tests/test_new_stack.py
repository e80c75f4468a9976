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


def header_free(text: str) -> str:
    """The file without its header comment (the command line that wrote it, or the fixture's header)."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)

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
    assert header_free(text) == header_free(shipped), \
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
    # Spot is an input (the table holds no v6e Spot figure), on-demand from the table.
    assert "v6e-32-0  1  spot" in out and "missing [1]" in out and "table [2]" in out
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


# --------------------------------------------------------------------------- issue 27: what a new user asked of `new`

ACME = ["--project", "acme-ml-prod", "--region", "us-east5", "--ci-project", "acme-ci",
        "--gke-version", "1.35.2-gke.1842000"]


def _new(tmp_path, stack: str, *argv: str) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["new", stack, *ACME, *argv, "--stacks-dir", str(tmp_path)])
    return code, err.getvalue()


def test_the_zone_comment_says_what_the_zone_table_says(tmp_path):
    """us-east5-b is not in the zone table's (incomplete) v5p list: the file must not say it offers v5p."""
    import json

    table = json.loads((ROOT / "stackspec" / "data" / "tpu_zones.json").read_text())["generations"]
    assert "us-east5-b" not in table["v5p"]["zones"] and "us-east5-b" in table["v6e"]["zones"]
    assert _new(tmp_path, "five", "--zone", "us-east5-b", "--slice-shape", "v5p-8", "--slices", "2")[0] == 0
    (zone_line,) = [x for x in (tmp_path / "Pulumi.five.yaml").read_text().splitlines() if "gcp:zone:" in x]
    assert "offers v5p" not in zone_line and "not in stackspec/data/tpu_zones.json for v5p" in zone_line
    # v5p-8 is one host: no DCN networks (the spec refuses them for single-host slices), and it loads.
    s = spec.load_stack("five", tmp_path)
    assert s.slices[0].shape.hosts == 1 and not s.networks
    assert _new(tmp_path, "six", "--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2")[0] == 0
    assert "# offers v6e (stackspec/data/tpu_zones.json)" in (tmp_path / "Pulumi.six.yaml").read_text()


def test_the_ranges_the_spec_asks_to_enlarge_have_flags(tmp_path):
    """64 x v6e-256 is 4,096 hosts: GKE's /24 per node needs a pod range of at least /10 and the nodes' subnet more
    than a /20's 4,092 addresses; the refusal names the flag, and the flags write the ranges."""
    argv = ["--zone", "us-east5-b", "--slice-shape", "v6e-256", "--slices", "64", "--capacity", "flex-start,on-demand"]
    code, err = _new(tmp_path, "big", *argv)
    assert code == 2 and not (tmp_path / "Pulumi.big.yaml").exists()
    assert "(set it with --pod-cidr)" in err and "(set it with --node-cidr)" in err
    code, err = _new(tmp_path, "big", *argv, "--pod-cidr", "10.128.0.0/10", "--node-cidr", "10.0.0.0/16")
    assert code == 0, err
    s = spec.load_stack("big", tmp_path)
    assert (s.cluster.pod_cidr, s.network.primary.cidr) == ("10.128.0.0/10", "10.0.0.0/16")
    assert s.cluster.service_cidr == cmd_new.SERVICE_CIDR
    # The header's command writes the same file again.
    header = " ".join(x.lstrip("# ").strip() for x in (tmp_path / "Pulumi.big.yaml").read_text().splitlines()[1:3])
    assert "--pod-cidr 10.128.0.0/10" in header and "--node-cidr 10.0.0.0/16" in header


def test_a_prod_stack_gets_a_maintenance_window_a_dev_stack_none(tmp_path):
    base = ["--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2"]
    assert _new(tmp_path, "pr", *base)[0] == 0
    assert _new(tmp_path, "dv", *base, "--environment", "dev")[0] == 0
    prod, dev = spec.load_stack("pr", tmp_path), spec.load_stack("dv", tmp_path)
    w = prod.cluster.maintenance.window
    assert w is not None and (w.end - w.start).total_seconds() >= 4 * 3600  # GKE counts windows of 4 h or more
    assert dev.cluster.maintenance.window is None


def test_regions_writes_a_manager_and_a_cluster_per_region_that_lints_and_costs(tmp_path, capsys):
    code, err = _new(tmp_path, "acme", "--regions", "us-east5:us-east5-b,us-east1:us-east1-d",
                     "--slice-shape", "v6e-16", "--slices", "2")
    assert code == 0, err
    s = spec.load_stack("acme", tmp_path)
    assert s.multi_region and s.manager.region == "us-east5"
    assert [(v.region, v.zone, len(v.slices)) for v in s.region_views()] == [("us-east5", "us-east5-b", 2),
                                                                            ("us-east1", "us-east1-d", 2)]
    assert len({v.cluster.name for v in s.region_views()} | {s.manager.name}) == 3
    assert cli.main(["lint", "--stack", "acme", "--stacks-dir", str(tmp_path)]) == 0
    # A region the table does not offer, one entry only, --zone with --regions: refused, nothing written.
    for argv, message in ((["--regions", "us-east5:us-east5-b,us-west1:us-west1-a"], "offers no v6e TPUs"),
                          (["--regions", "us-east5:us-east5-b"], "at least two region:zone entries"),
                          (["--regions", "us-east5:us-east5-b,us-east1:us-east1-d", "--zone", "us-east5-b"],
                           "drop --zone")):
        code, err = _new(tmp_path, "bad", *argv, "--slice-shape", "v6e-16", "--slices", "2")
        assert code == 2 and message in err, (argv, err)
    assert not (tmp_path / "Pulumi.bad.yaml").exists()


def test_new_writes_the_prices_it_knows_and_a_placeholder_for_each_it_lacks(tmp_path, capsys):
    """The file's comments give each price the table has, with its page and dates (the table's own entries), and a
    placeholder key for each it lacks: filled in, the cost table has no unknown price left."""
    import json
    import re

    assert _new(tmp_path, "acme", "--zone", "us-east5-b", "--slice-shape", "v6e-64", "--slices", "2",
                "--capacity", "flex-start,on-demand")[0] == 0
    text = (tmp_path / "Pulumi.acme.yaml").read_text()
    table = json.loads((ROOT / "stackspec" / "data" / "prices.json").read_text())
    (od,) = [e for e in table["tpu"] if (e["generation"], e["capacity"], e["region"]) == ("v6e", "on-demand",
                                                                                          "us-east5")]
    assert (f"v6e on-demand in us-east5: ${od['usdPerChipHour']:g} per chip-hour ({od['source']}, published "
            f"{od['published']}, read {od['read']})") in text
    unknown = json.loads(_cost_json(tmp_path, "acme", capsys))["missing"]
    # The table lacks flex-start; it prices the system pool's n2-standard-16 in us-east5.
    assert "prices.v6e.flexStart" in unknown and "prices.machines.n2-standard-16" not in unknown
    # Uncomment the placeholder section with figures: every price key it names becomes known.
    lines = text.splitlines()
    start = lines.index("  # tpu-multislice:prices:")
    block = []
    for line in lines[start:]:
        if not line.startswith("  # ") or (line != "  # tpu-multislice:prices:" and not line.startswith("  #   ")):
            break
        block.append(re.sub(r"<[^>]*>", "1.5", line.replace("  # ", "  ", 1)))
    filled = "\n".join(lines[:start] + block + lines[start + len(block):]) + "\n"
    (tmp_path / "Pulumi.acme.yaml").write_text(filled)
    after = json.loads(_cost_json(tmp_path, "acme", capsys))["missing"]
    assert not [k for k in after if k.startswith("prices.")], after
    # The quota the slices need, commented the same way: 2 x 64 chips of each type the options draw on.
    assert "#   - {region: us-east5, generation: v6e, preemptible: 128, onDemand: 128}" in text


def _cost_json(stacks_dir, stack: str, capsys) -> str:
    capsys.readouterr()
    assert cli.main(["cost", "--stack", stack, "--stacks-dir", str(stacks_dir), "--format", "json"]) == 0
    return capsys.readouterr().out


def test_a_sandbox_stack_previews_without_the_ci_bootstrap_and_no_workflow_acts_on_it(tmp_path, capsys):
    """``--sandbox``: no CI project, image section or KMS key; the whole preview (every policy) passes; the workflows'
    lists leave it out; what needs the bootstrap is refused at its key."""
    import yaml

    code, err = _new(tmp_path, "sand", "--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2",
                     "--sandbox")
    assert code == 0, err
    doc = yaml.safe_load((tmp_path / "Pulumi.sand.yaml").read_text())
    config = doc["config"]
    assert config["tpu-multislice:sandbox"] is True and config["tpu-multislice:environment"] == "dev"
    assert "tpu-multislice:ciProject" not in config and "tpu-multislice:image" not in config
    assert "secretsprovider" not in doc
    assert cli.main(["preview", "--stack", "sand", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "b")]) == 0
    preview = capsys.readouterr().out
    assert "Policies: all" in preview and "rules pass" in preview
    lists = cmd_stacks.lists(tmp_path)
    assert lists["sandbox"] == ["sand"] and all("sand" not in str(lists[k]) for k in ("all", "deploy", "image"))
    # What needs the bootstrap, each refused at its key; a CI stack without ciProject is refused too.
    for edit, key in (({"tpu-multislice:environment": "prod"}, "tpu-multislice:environment"),
                      ({"tpu-multislice:deploy": {"onPush": True}}, "tpu-multislice:deploy.onPush"),
                      ({"tpu-multislice:image": {"repository": "r", "name": "n"}}, "tpu-multislice:image"),
                      ({"tpu-multislice:sandbox": False}, "tpu-multislice:ciProject")):
        bad = {**doc, "config": {**config, **edit}}
        (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump(bad, sort_keys=False))
        with pytest.raises(spec.SpecError) as e:
            spec.load_stack("bad", tmp_path)
        assert any(p.key == key and "docs/sandbox.md" in p.message for p in e.value.problems), (key, e.value)
    assert (ROOT / "docs" / "sandbox.md").is_file()


def test_the_next_steps_deploy_a_bootstrap_stack_through_ci_only(tmp_path, capsys):
    """`up` on a stack the bootstrap serves runs in CI only, day 0 included (docs/ci-trust.md, the operator rule):
    the steps `slicectl new` prints never tell an administrator to run it by hand; a sandbox's steps do (no CI)."""
    assert cli.main(["new", "acme", *ACME, "--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2",
                     "--stacks-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "onPush" in out and "pulumi up --stack" not in out
    assert cli.main(["new", "sand", *ACME, "--zone", "us-east5-b", "--slice-shape", "v6e-16", "--slices", "2",
                     "--sandbox", "--stacks-dir", str(tmp_path)]) == 0
    assert "pulumi up --stack sand" in capsys.readouterr().out
