"""The stack spec: typed, frozen, and every bad value refused with one clear error."""

import copy
import json
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS

from offline import engine
from stackspec import spec
from stackspec.spec import SpecError

NS = spec.PROJECT


def prod_config() -> dict[str, str]:
    return engine.stack_config("prod")


def edit(config: dict[str, str], key: str, fn) -> dict[str, str]:
    """A copy of ``config`` with the JSON value at ``key`` changed by ``fn``."""
    config = dict(config)
    value = json.loads(config[key]) if config[key][:1] in "[{" else config[key]
    value = copy.deepcopy(value)
    result = fn(value)
    config[key] = json.dumps(result if result is not None else value)
    return config


def problems(config, stack="prod") -> str:
    with pytest.raises(SpecError) as e:
        spec.load(stack, config)
    return str(e.value)


def test_prod_is_the_seed_deployment():
    s = spec.load("prod", prod_config())
    assert s.prod and s.project == "my-tpu-project" and s.region == "us-east5"
    assert s.cluster.version == "1.35" and s.cluster.deletion_protection
    # The seed's n1-standard-16 is not offered in us-east5 (stackspec/data/machine_regions.csv): N2, 16 vCPUs too.
    assert s.cluster.system_machine_type == "n2-standard-16"
    assert [(n.network, n.subnet, n.cidr) for n in s.networks] == [
        ("maxtext-tpu-net-1", "tpu-subnet-1", "10.50.0.0/16"),
        ("maxtext-tpu-net-2", "tpu-subnet-2", "10.60.0.0/16"),
    ]
    assert s.mtu == 8896
    assert [(x.name, x.shape.topology, x.shape.hosts, x.shape.machine_type.name) for x in s.slices] == [
        ("v6e-16-0", "4x4", 4, "ct6e-standard-4t"),
        ("v6e-16-1", "4x4", 4, "ct6e-standard-4t"),
    ]
    assert s.storage.storage_class == "STANDARD" and s.storage.location == "us-east5"
    assert s.storage.namespace == "maxtext" and s.storage.protected
    (group,) = s.groups
    assert (group.name, group.replicas, group.shape.hosts) == ("tpu-group", 2, 4)


def test_dev_is_small_and_spot():
    s = spec.load("dev", engine.stack_config("dev"))
    assert not s.prod and len(s.slices) == 1 and s.slices[0].preferred.spot
    assert not s.storage.protected and not s.cluster.deletion_protection


def test_spec_objects_are_frozen():
    s = spec.load("prod", prod_config())
    with pytest.raises(ValueError, match="frozen"):
        s.cluster.name = "other"


def test_bad_topology_names_file_key_value_and_allowed():
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(topology="4x5")))
    assert msg.startswith("1 problem(s) in stacks/Pulumi.prod.yaml:\nstacks/Pulumi.prod.yaml:")  # a config, no file
    assert f'{NS}:slices[0].topology = "4x5"' in msg
    assert "allowed: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16" in msg


def test_machine_type_must_fit_topology():
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[1].update(machineType="ct6e-standard-8t")))
    assert f'{NS}:slices[1].machineType = "ct6e-standard-8t"' in msg and "allowed: ct6e-standard-4t" in msg


def test_unknown_generation():
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(generation="v7")))
    assert f'{NS}:slices[0].generation = "v7": allowed: v6e, v5e, v5p, v4, tpu7x' in msg


def test_one_group_one_shape():
    def change(v):
        v[1].update(topology="4x8")

    msg = problems(edit(prod_config(), f"{NS}:slices", change))
    assert "a worker group holds slices of one shape only" in msg


def test_duplicate_slice_names():
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[1].update(name="v6e-16-0")))
    assert "slice names must be unique" in msg


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        ({"type": "preemptible"}, "allowed: on-demand, spot, reservation, flex-start"),
        ({"type": "spot", "reservation": "r1"}, "only allowed when type is reservation, not spot"),
        ({"type": "flex-start", "reservation": "r1"}, "only allowed when type is reservation, not flex-start"),
        ({"type": "reservation"}, "required when type is reservation with SPECIFIC affinity"),
        ({"type": "reservation", "reservation": "r1", "affinity": "SOME"}, "allowed: SPECIFIC, ANY"),
    ],
)
def test_capacity_rules(capacity, expected):
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(capacity=capacity)))
    assert expected in msg


def test_reservation_capacity_is_accepted():
    cfg = edit(
        prod_config(), f"{NS}:slices",
        lambda v: [x.update(capacity={"type": "reservation", "reservation": "v6e-res"}) for x in v] and None
    )
    s = spec.load("prod", cfg)
    assert s.slices[0].capacity == (spec.Capacity(type="reservation", reservation="v6e-res", affinity="SPECIFIC"),)


def test_overlapping_subnets():
    msg = problems(edit(prod_config(), f"{NS}:network", lambda v: v["secondary"][1].update(cidr="10.50.128.0/17")))
    assert "overlaps 10.50.0.0/16" in msg


def test_public_range_is_refused():
    msg = problems(edit(prod_config(), f"{NS}:network", lambda v: v["secondary"][0].update(cidr="8.8.0.0/16")))
    assert "must lie in a private range" in msg


def test_mtu_range():
    msg = problems(edit(prod_config(), f"{NS}:network", lambda v: v.update(mtu=9000)))
    assert f"{NS}:network.mtu = 9000" in msg


def test_dranet_needs_a_recent_gke():
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(version="1.33.5-gke.1000000")))
    assert "DRANET" in msg and "1.34.1-gke.1829001" in msg


def test_bad_version_format():
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(version="latest")))
    assert "must be a GKE minor such as 1.35" in msg
    # A minor prefix holds DRANET's floor only if every patch of it does: 1.34 may be below 1.34.1-gke.1829001.
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(version="1.34")))
    assert "DRANET" in msg and "1.34.1-gke.1829001" in msg


def test_prod_refuses_nightly_images():
    # (auth off: a nightly tag names no Ray release, which token auth refuses first)
    msg = problems(edit(prod_config(), f"{NS}:ray",
                        lambda v: v.update(image="rayproject/ray:nightly-py312-tpu", auth="disabled")))
    assert "prod pins a released image" in msg


def test_prod_checkpoints_stay_protected():
    msg = problems(edit(prod_config(), f"{NS}:storage", lambda v: v.update(protected=False)))
    assert "must be protected from deletion" in msg


def test_zone_must_be_in_region():
    cfg = dict(prod_config(), **{"gcp:zone": "europe-west4-a"})
    assert "must be a zone of gcp:region us-east5" in problems(cfg)


def test_missing_and_unknown_keys():
    cfg = dict(prod_config())
    del cfg["gcp:project"]
    cfg[f"{NS}:slice"] = "[]"
    msg = problems(cfg)
    assert "gcp:project = (missing): required" in msg
    assert f"{NS}:slice = " in msg and "unknown key (did you mean tpu-multislice:slices?); allowed:" in msg


def test_wrong_types():
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(systemNodeCount="two")))
    assert "must be an integer" in msg


def test_job_ici_must_tile_the_slice():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[0].update(ici={"fsdp": 4, "tensor": 8})))
    assert "ICI mesh must tile the 16 chips of a v6e-16 slice" in msg


def test_job_dcn_must_tile_the_slices():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[1].update(dcn={"fsdp": 4, "data": 1})))
    assert "DCN mesh must tile 2 slice(s)" in msg


def test_job_cannot_ask_for_more_slices_than_exist():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[0].update(slices=3)))
    assert "worker group tpu-group has only 2 slice(s); allowed: 1..2" in msg


def test_elastic_bounds():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[2].update(minSlices=3, maxSlices=2)))
    assert "must be at most maxSlices (2)" in msg


def test_jobs_on_spot_are_elastic():
    def to_spot(slices):
        for s in slices:
            s["capacity"] = {"type": "spot"}

    cfg = edit(prod_config(), f"{NS}:slices", to_spot)
    msg = problems(cfg)
    assert f"{NS}:jobs[0].mode" in msg and "runs on Spot capacity: jobs there must be elastic" in msg


def test_maxtext_passthrough_cannot_override_job_keys():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[0]["maxtext"].update(ici_fsdp_parallelism="2")))
    assert "set through the job's own key" in msg


def test_unknown_job_group():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[0].update(group="gpu-group")))
    assert f'{NS}:jobs[0].group = "gpu-group": no such worker group; allowed: tpu-group' in msg


def test_several_problems_are_reported_together():
    cfg = edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(topology="4x5"))
    cfg = edit(cfg, f"{NS}:network", lambda v: v.update(mtu=1500000))
    cfg = edit(cfg, f"{NS}:cluster", lambda v: v.update(name="Bad_Name"))
    msg = problems(cfg)
    assert "3 problem(s)" in msg


def test_preview_refuses_a_bad_stack_file(tmp_path, capsys):
    """The CLI path: exit 3 (invalid spec), the error on stderr, nothing written."""
    from slicectl import cli

    src = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    (tmp_path / "Pulumi.broken.yaml").write_text(src.replace("topology: 4x4", "topology: 4x5", 1))
    out = tmp_path / "out"
    code = cli.main(["preview", "--stack", "broken", "--stacks-dir", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 3
    assert f"{tmp_path}/Pulumi.broken.yaml:" in err and "topology" in err and "allowed: 1x1" in err
    assert not out.exists()


def test_unknown_stack_lists_the_stacks(capsys):
    from slicectl import cli

    assert cli.main(["preview", "--stack", "staging", "--out", "/nonexistent/x"]) == 2
    assert "stacks here: dev, multi, prod" in capsys.readouterr().err


def test_running_jobs_must_fit_the_shared_slices():
    # Jobs on the long-lived cluster are not queued by Kueue: together they must fit its slices.
    def two_shared(jobs):
        for j in jobs[:2]:
            j["cluster"] = "shared"

    msg = problems(edit(prod_config(), f"{NS}:jobs", two_shared))
    assert f"{NS}:jobs[1].suspend = false" in msg  # named on the last job that does not fit
    assert "together ask for 4 slice(s) of worker group tpu-group, which has 2" in msg
    # Queued (dedicated) jobs may together want more than exists: Kueue admits them in turn.
    assert spec.load("prod", prod_config())


@pytest.mark.parametrize(
    ("key", "fn", "expected"),
    [
        (f"{NS}:slices", lambda v: v[0].update(capcity={"type": "spot"}),
         f"{NS}:slices[0].capcity = " + '{"type": "spot"}: unknown key (did you mean capacity?); allowed: capacity'),
        (f"{NS}:cluster", lambda v: v.update(deletionProtecton=False),
         f"{NS}:cluster.deletionProtecton = false: unknown key (did you mean deletionProtection?)"),
        (f"{NS}:storage", lambda v: v.update(bukcet="x"), f"{NS}:storage.bukcet"),
        (f"{NS}:network", lambda v: v["secondary"][0].update(cidrs="10.70.0.0/16"),
         f"{NS}:network.secondary[0].cidrs"),
        (f"{NS}:network", lambda v: v.update(mtus=8896), f"{NS}:network.mtus"),
        (f"{NS}:ray", lambda v: v.update(imgae="rayproject/ray:2.60.0-py312-tpu"), "did you mean image?"),
        (f"{NS}:jobs", lambda v: v[2].update(maxFailure=2), f"{NS}:jobs[2].maxFailure = 2: unknown key "
                                                             "(did you mean maxFailures?)"),
        (f"{NS}:slices", lambda v: v[0].update(capacity={"type": "spot", "preemptible": True}),
         f"{NS}:slices[0].capacity[0].preemptible = true: unknown key; allowed: affinity, expectedWaitHours, "
         "maxRunDuration, project, queuedProvisioning, reservation, type"),
    ],
)
def test_misspelt_keys_inside_sections_are_refused(key, fn, expected):
    """A typo must not silently fall back to a default (a Spot slice becoming on-demand)."""
    assert expected in problems(edit(prod_config(), key, fn))


def test_prod_cluster_keeps_deletion_protection():
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(deletionProtection=False)))
    assert f"{NS}:cluster.deletionProtection = false: a production cluster keeps deletion protection on" in msg


def test_reservation_name_needs_specific_affinity():
    cap = {"type": "reservation", "reservation": "r1", "affinity": "ANY"}
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(capacity=cap)))
    assert "a reservation name needs affinity SPECIFIC, not ANY" in msg


def test_single_host_slices_take_no_secondary_networks():
    msg = problems(edit(prod_config(), f"{NS}:slices",
                        lambda v: [v[0] | {"topology": "2x2"}]), stack="prod")
    assert "additional node networks are for multi-host slices; single-host slices: ['v6e-16-0']" in msg


def test_each_secondary_network_needs_its_own_vpc():
    def same_vpc(v):
        for n in v["secondary"]:
            n["network"] = "dcn"

    msg = problems(edit(prod_config(), f"{NS}:network", same_vpc))
    assert "each secondary network needs its own VPC" in msg


def test_bucket_name_rules():
    msg = problems(edit(prod_config(), f"{NS}:storage", lambda v: v.update(bucket="Bad Bucket")))
    assert f"{NS}:storage.bucket" in msg and "not a valid bucket name" in msg


def test_job_names_are_unique_and_elastic_jobs_take_ranges():
    def dup(v):
        v[1]["name"] = v[0]["name"]
    assert "job names must be unique" in problems(edit(prod_config(), f"{NS}:jobs", dup))
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[2].update(slices=2)))
    assert f"{NS}:jobs[2].slices = 2: elastic jobs take minSlices and maxSlices" in msg
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[0].update(minSlices=1)))
    assert f"{NS}:jobs[0].minSlices = 1: multislice jobs take slices" in msg


def test_names_are_dns_labels():
    msg = problems(edit(prod_config(), f"{NS}:slices", lambda v: v[0].update(name="V6E_16")))
    assert f'{NS}:slices[0].name = "V6E_16": not a valid GKE node pool name' in msg


def test_cluster_ranges_stay_off_the_dcn_subnets():
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(podCidr="10.48.0.0/14")))
    assert f'{NS}:cluster.podCidr = "10.48.0.0/14": overlaps 10.50.0.0/16 at {NS}:network.secondary[0].cidr' in msg
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.update(serviceCidr="10.100.0.0/20")))
    assert "overlaps 10.100.0.0/14" in msg


def test_elastic_jobs_budget_two_failures_per_preemption():
    msg = problems(edit(prod_config(), f"{NS}:jobs", lambda v: v[2].update(maxFailures=1)))
    assert f"{NS}:jobs[2].maxFailures = 1: must be at least 2: one preemption spends two" in msg


def test_cluster_ranges_are_pinned_together_and_with_dcn_networks():
    def unpin(v):
        v.pop("podCidr")
        v.pop("serviceCidr")

    msg = problems(edit(prod_config(), f"{NS}:cluster", unpin))
    assert f"{NS}:cluster.podCidr = (missing): required with secondary networks" in msg
    msg = problems(edit(prod_config(), f"{NS}:cluster", lambda v: v.pop("serviceCidr") and None))
    assert f"{NS}:cluster.serviceCidr = (missing): podCidr and serviceCidr are pinned together" in msg


# --------------------------------------------------------------------------- --stacks-dir: the file the run reads


def test_preview_of_a_stack_in_another_stacks_dir_names_that_file_and_its_lines(tmp_path, capsys):
    """``slicectl preview --stacks-dir D``: a warning on a key is placed at D's file and line (here three lines
    below stacks/'s), and nothing points at stacks/."""
    from slicectl import cli

    src = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    text = "# a team's copy\n# kept elsewhere\n# three lines longer\n" + src.replace(
        "    serviceAccount: maxtext-ksa\n", "    serviceAccount: maxtext-ksa\n    namespace: default\n", 1)
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    line = text.splitlines().index("    namespace: default") + 1
    code = cli.main(["preview", "--stack", "dev", "--stacks-dir", str(tmp_path), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{path}:{line}: {spec.PROJECT}:storage.namespace is default" in out
    assert "stacks/Pulumi.dev.yaml" not in out


def test_the_program_reads_the_stack_file_the_engine_read(tmp_path):
    """The program's from_pulumi() takes the stack file's own keys (and its lines) from the file the run reads (the
    engine hands it over), not stacks/Pulumi.<stack>.yaml; a config without a file has none."""
    program = engine.ROOT / "tests" / "programs" / "stack_file.py"
    shipped = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    mine = "gcpkms://projects/my-tpu-ci/locations/global/keyRings/pulumi/cryptoKeys/prod-copy"
    assert "secretsprovider: gcpkms://" in shipped and mine not in shipped
    (tmp_path / "Pulumi.prod.yaml").write_text(
        "\n".join(f"secretsprovider: {mine}" if ln.startswith("secretsprovider:") else ln
                  for ln in shipped.splitlines()) + "\n")
    assert engine.render("prod", stacks_dir=tmp_path, program=program).outputs == {"secretsprovider": mine}
    assert engine.render("prod", program=program).outputs["secretsprovider"] in shipped
    # An edited config for a stack without a file anywhere: no file's keys, even when stacks/ has one of that name.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert engine.render("prod", config=prod_config(), stacks_dir=empty, program=program).outputs == {
        "secretsprovider": None}


def test_the_stacks_dir_is_the_projects_stack_config_dir(tmp_path):
    """Pulumi's engine reads Pulumi.<stack>.yaml from the project's stackConfigDir; the CLI and from_pulumi()
    under Pulumi read the same directory (one fact: Pulumi.yaml)."""
    import yaml

    from stackspec import loader

    declared = yaml.safe_load((engine.ROOT / "Pulumi.yaml").read_text())["stackConfigDir"]
    assert loader._stack_config_dir(engine.ROOT) == engine.ROOT / declared == engine.ROOT / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\nstackConfigDir: config/stacks\n")
    assert loader._stack_config_dir(tmp_path) == tmp_path / "config" / "stacks"
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    assert loader._stack_config_dir(tmp_path) == tmp_path  # Pulumi's default: beside Pulumi.yaml


def test_an_unknown_job_names_the_stack_file_it_was_read_from(tmp_path):
    """A spec read from another directory (``--stacks-dir``) names that file when a job is not in it."""
    from stackspec import loader
    from stackspec.spec import UnknownName

    (tmp_path / "Pulumi.prod.yaml").write_text(Path(loader.stack_path("prod")).read_text())
    spec = loader.load_stack("prod", tmp_path)
    assert spec.stack_file.endswith(str(tmp_path / "Pulumi.prod.yaml"))
    with pytest.raises(UnknownName, match=r"Pulumi\.prod\.yaml: no job named 'nope'") as refused:
        spec.job("nope")
    assert str(refused.value).startswith(spec.stack_file)
    assert loader.load_stack("prod").stack_file == "tests/fixtures/stacks/Pulumi.prod.yaml"  # the tests' own
