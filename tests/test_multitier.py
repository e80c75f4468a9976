"""Multi-tier checkpointing, the unverified opt-in (workloads/multitier.py): what the program renders when a stack
opts in, checked against MaxText's own configuration (the installed release's base.yml and its validation rules)
and against the objects GKE's TPU launcher renders (xpk, vendored shapes named in the module), and absent otherwise."""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE_STACKS, opt_in, policy_bindings
from test_spec_refusals import lint_and_preview

from offline import engine
from slicectl.exits import Exit
from stackspec import checkpoints
from stackspec import spec as stack_spec
from workloads import multitier
from workloads.trainer_args import trainer_argv

NS = stack_spec.PROJECT
KEYS = ("enable_multi_tier_checkpointing", "local_checkpoint_directory", "local_checkpoint_period",
        "multi_tier_checkpointing_backup_interval_minutes")


@pytest.fixture(scope="module")
def rendered():
    config = opt_in(engine.stack_config("prod"), "multiTierCheckpointing")
    storage = f"{NS}:storage"
    config[storage] = json.dumps({**json.loads(config[storage]), "hierarchicalNamespace": True})
    return engine.render("prod", config)


def _maxtext_base() -> dict:
    pkg = importlib.util.find_spec("maxtext").submodule_search_locations[0]
    return yaml.safe_load((Path(pkg) / "configs" / "base.yml").read_text())


def _settings(argv: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in argv[argv.index("--") + 1:])


def test_the_trainer_gets_maxtexts_own_keys_with_values_its_validation_accepts(rendered):
    base = _maxtext_base()
    spec = rendered.spec
    for job in spec.jobs:
        settings = _settings(trainer_argv(spec, job))
        assert set(KEYS) <= set(settings) and all(k in base for k in KEYS)  # keys MaxText 0.2.1 defines
        assert base["enable_multi_tier_checkpointing"] is False  # off unless the stack opts in
        # MaxText's rules (configs/types.py): a directory, a period > 0 and a backup interval > 0.
        assert settings["enable_multi_tier_checkpointing"] == "true" and settings["local_checkpoint_directory"]
        assert int(settings["local_checkpoint_period"]) > 0
        assert int(settings["multi_tier_checkpointing_backup_interval_minutes"]) > 0


def test_every_tpu_worker_mounts_gkes_volume_where_maxtext_writes_the_local_tier(rendered):
    jobs = [d for d in rendered.manifests if d["kind"] == "RayJob"]
    assert jobs
    for doc in jobs:
        argv = doc["spec"]["entrypoint"].split()
        local = _settings(argv)["local_checkpoint_directory"]
        for group in doc["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
            pod = group["template"]["spec"]
            drivers = {v["name"]: v.get("csi", {}).get("driver") for v in pod["volumes"]}
            mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
            assert drivers[mounts[local]] == "multitier-checkpoint.csi.storage.gke.io"
        head = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
        assert multitier.VOLUME not in {v["name"] for v in head["volumes"]}  # the head holds no train state


def test_the_checkpoint_configuration_names_the_bucket_the_tpu_hosts_and_a_volume_that_holds_two_copies(rendered):
    spec = rendered.spec
    (cpc,) = [d for d in rendered.manifests if d["kind"] == "CheckpointConfiguration"]
    assert cpc["apiVersion"] == "checkpointing.gke.io/v1" and "namespace" not in cpc["metadata"]
    assert cpc["spec"]["cloudStorageBucketName"] == spec.storage.bucket
    pools = [r for r in rendered.by_type("gcp:container/nodePool:NodePool")
             if r.inputs.get("nodeConfig", {}).get("machineType", "").startswith("ct")]
    assert pools and {p.inputs["nodeConfig"]["machineType"] for p in pools} == {
        cpc["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"]}
    taints = {t["key"] for p in pools for t in p.inputs["nodeConfig"].get("taints", [])}
    assert {t["key"] for t in cpc["spec"]["tolerations"]} <= taints | {"google.com/tpu"}
    size_gib = int(cpc["spec"]["inMemoryVolumeSize"].removesuffix("Gi"))
    for job in spec.jobs:
        state = checkpoints.storage(job.model, job.steps, job.checkpoint_period, job.maxtext)
        hosts = job.slices * spec.group(job.group).shape.hosts
        assert size_gib * 2**30 >= 2 * state.checkpoint_bytes / hosts


def test_the_cluster_gets_the_add_on_the_replicator_its_bucket_grant_and_the_preview_says_unverified(rendered):
    (cluster,) = [r for r in rendered.by_type("gcp:container/cluster:Cluster")]
    assert cluster.inputs["addonsConfig"]["highScaleCheckpointingConfig"] == {"enabled": True}
    (bucket,) = rendered.by_type("gcp:storage/bucket:Bucket")  # the backups' bucket, with hierarchical namespace
    assert bucket.inputs["hierarchicalNamespace"] == {"enabled": True}
    # In the bucket's one authoritative policy, beside the workloads' KSA (a grant of its own would fight it).
    (policy,) = rendered.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    members = policy_bindings(policy)["roles/storage.objectUser"]
    assert len(members) == 2
    assert any(m.endswith("/subject/ns/gke-managed-checkpointing/sa/gke-checkpointing-multitier-node")
               for m in members)
    assert f"{NS}:unverified.multiTierCheckpointing" in rendered.spec.unverified_paths
    assert any("multiTierCheckpointing" in w and "JobSet" in w for w in rendered.warnings)


def test_without_the_opt_in_nothing_of_it_is_rendered():
    r = engine.render("prod")
    assert not [d for d in r.manifests if d["kind"] == "CheckpointConfiguration"]
    for doc in (d for d in r.manifests if d["kind"] == "RayJob"):
        assert not set(KEYS) & set(_settings(doc["spec"]["entrypoint"].split()))
    (cluster,) = r.by_type("gcp:container/cluster:Cluster")
    assert "highScaleCheckpointingConfig" not in cluster.inputs["addonsConfig"]


def test_the_local_period_follows_dalys_optimum_with_the_faster_restore():
    """Daly (2006): √(2·δ·(M + R)). A local save and restore of a host's share (2 GB at the assumed rate: 0.4 s
    each) every 30 min of preemptions at 2 s a step: √(2·0.4·(1800 + 0.4)) = 37.96 s = 19 steps; a preemption
    then costs the restore plus half a period redone, 0.4 + 9.5 × 2 s."""
    share = 2e9
    save = share / checkpoints.LOCAL_BYTES_PER_S
    plan = checkpoints.multi_tier_period(share, 30, 2.0, "measured", 1000)
    assert plan.period == round(math.sqrt(2 * save * (1800 + save)) / 2.0) == 19
    assert f"costs {save + 19 * 2.0 / 2:,.0f} s" in plan.how and "unverified" in plan.how
    # The bucket tier for the same job (a 60 s save to GCS): Young/Daly's period is far longer, so a preemption
    # redoes far more; the local tier is what makes a restore cheap.
    bucket = checkpoints.elastic_period(60, 30, 2.0, "measured", 1000)
    assert bucket.period > 5 * plan.period


def test_a_shared_bucket_grants_what_a_later_region_needs(monkeypatch):
    """multi's one bucket policy holds every region's members: with multi-tier checkpointing in the second region
    only (a region's own opt-in, as a future per-region key would give it), the replicator is in the policy. The
    policy used to be declared with the first region's members and a later region's silently ignored (G5-6)."""
    from workloads import multitier

    order = [r["cluster"]["name"] for r in yaml.safe_load(
        (Path(__file__).parent / "fixtures" / "stacks" / "Pulumi.multi.yaml").read_text())["config"][
        f"{NS}:regions"]]
    later = order[-1]
    monkeypatch.setattr(multitier, "enabled", lambda spec: spec.cluster is not None and spec.cluster.name == later)
    r = engine.render("multi")
    (policy,) = r.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    members = policy_bindings(policy)["roles/storage.objectUser"]
    assert len(members) == 2 and any(m.endswith("/subject/ns/maxtext/sa/maxtext-ksa") for m in members)
    assert any(m.endswith("/subject/ns/gke-managed-checkpointing/sa/gke-checkpointing-multitier-node")
               for m in members)


def _multi_opted_in(edit=lambda config: None) -> str:
    """The fixture multi-region stack (tests/fixtures/stacks) opted in to multi-tier checkpointing, then ``edit``."""
    doc = yaml.safe_load((FIXTURE_STACKS / "Pulumi.multi.yaml").read_text())
    config = doc["config"]
    config[f"{NS}:unverified"]["multiTierCheckpointing"] = True
    config[f"{NS}:storage"]["hierarchicalNamespace"] = True
    edit(config)
    return yaml.safe_dump(doc, sort_keys=False)


def _dir(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def _pin(*names: str, region: str = "us-east1"):
    def edit(config):
        for job in config[f"{NS}:jobs"]:
            if job["name"] in names:
                job["region"] = region
    return edit


def test_a_job_queued_through_the_multi_region_manager_is_refused_multi_tier_checkpointing(tmp_path):
    """Orbax's replicator manager decides each save again inside its inner manager, past the writer lease's pinned
    decision, and GKE's replicator writes the bucket outside the lease (stackspec/rules/regions.py quotes Orbax):
    a job the manager may re-dispatch is refused it, lint and preview alike, at the opt-in's key with its value,
    naming the job and what is allowed; a job pinned to a region is not."""
    jobs = [j["name"] for j in yaml.safe_load(_multi_opted_in())["config"][f"{NS}:jobs"]]
    queued = [j["name"] for j in yaml.safe_load(_multi_opted_in())["config"][f"{NS}:jobs"] if "region" not in j]
    assert len(queued) == 2 and len(jobs) == 3  # the fixture: two queued, one elastic pinned to us-east1

    code, out = lint_and_preview(_dir(tmp_path, "queued"), _multi_opted_in(), "multi")
    assert code == Exit.INVALID_SPEC, out
    (line,) = [line for line in out.splitlines() if "writer lease" in line]
    assert re.search(rf"Pulumi\.multi\.yaml:\d+: {NS}:unverified\.multiTierCheckpointing = true: ", line), line
    assert all(f"{name} ({NS}:jobs[{jobs.index(name)}])" in line for name in queued), line
    assert "allowed: false, or name the region" in line and "us-east5, us-east1" in line, line

    # One pinned, one still queued: the queued one alone is named.
    code, out = lint_and_preview(_dir(tmp_path, "one"), _multi_opted_in(_pin(queued[0])), "multi")
    assert code == Exit.INVALID_SPEC, out
    (line,) = [line for line in out.splitlines() if "writer lease" in line]
    assert queued[1] in line and queued[0] not in line, line

    # Every job pinned to a region (no re-dispatch): accepted.
    code, out = lint_and_preview(_dir(tmp_path, "pinned"), _multi_opted_in(_pin(*queued)), "multi")
    assert code == Exit.OK, out

