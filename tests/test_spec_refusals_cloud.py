"""What Compute Engine, GKE and MaxText refuse, refused by the spec through the front door (lint and preview alike):
network interfaces per TPU host, maintenance exclusion scopes that need a release channel, multi-tier
checkpointing's prerequisites; and every cluster's Secrets key in the cluster's region. Each rule's source is
quoted beside it (stackspec/rules/gcp.py nics, gke.py maintenance, jobs.py multi_tier); the boundaries each side
of a rule are checked, so a rule that refuses too much fails here too."""

from __future__ import annotations

import pytest
from test_spec_refusals import DEV, NS, PROD, edited, lint_and_preview

from slicectl.exits import Exit


def _secondary(n: int):
    return lambda c: c[f"{NS}:network"].update(
        secondary=[{"subnet": f"dev-tpu-subnet-{i + 1}", "cidr": f"10.{50 + i}.0.0/16"} for i in range(n)])


def _exclusion(scope: str, channel: str | None):
    def edit(c):
        if channel is not None:
            c[f"{NS}:cluster"]["releaseChannel"] = channel
        c[f"{NS}:cluster"]["maintenance"] = {"exclusions": [
            {"name": "training-run", "start": "2026-12-01T00:00:00Z", "end": "2027-01-15T00:00:00Z", "scope": scope}]}
    return edit


def _multi_tier(job_edit=None, hns: bool = True):
    def edit(c):
        c.setdefault(f"{NS}:unverified", {})["multiTierCheckpointing"] = True
        c[f"{NS}:storage"]["hierarchicalNamespace"] = hns
        if job_edit is not None:
            job_edit(c[f"{NS}:jobs"][0])
    return edit


def _refused(tmp_path, text: str, stack: str, key: str, words: str) -> None:
    code, out = lint_and_preview(tmp_path, text, stack)
    assert code == Exit.INVALID_SPEC, out
    assert any(f"{NS}:{key} = " in line and words in line for line in out.splitlines()), out


# --------------------------------------------------------------------------- NICs per TPU host

def test_more_networks_than_a_tpu_host_has_interfaces_are_refused(tmp_path):
    """ct6e-standard-4t (180 vCPU) takes at most 8 NICs: nic0 on the primary network and 7 secondary ones."""
    _refused(tmp_path, edited(DEV, _secondary(8)), "dev", "network.secondary",
             "Compute Engine gives ct6e-standard-4t (180 vCPU) at most 8")


def test_seven_secondary_networks_fit_a_tpu_host(tmp_path):
    code, out = lint_and_preview(tmp_path, edited(DEV, _secondary(7)), "dev")
    assert "network interfaces per host" not in out, out


def test_max_nics_follows_the_vcpu_table():
    from stackspec.rules import gcp
    assert [gcp.max_nics(v) for v in (1, 2, 4, 8, 44, 180)] == [2, 2, 4, 8, 8, 8]


# --------------------------------------------------------------------------- maintenance exclusions

@pytest.mark.parametrize("scope", ["NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES"])
def test_a_minor_scope_without_a_release_channel_is_refused(tmp_path, scope):
    _refused(tmp_path, edited(DEV, _exclusion(scope, "UNSPECIFIED")), "dev",
             "cluster.maintenance.exclusions[0].scope", "only on a cluster enrolled in a release channel")


def test_a_minor_scope_on_a_release_channel_is_accepted(tmp_path):
    code, out = lint_and_preview(tmp_path, edited(DEV, _exclusion("NO_MINOR_OR_NODE_UPGRADES", "REGULAR")), "dev")
    assert code == Exit.OK, out


# --------------------------------------------------------------------------- multi-tier checkpointing

def test_multi_tier_checkpointing_on_a_single_slice_job_is_refused(tmp_path):
    """dev's elastic job runs on at most one slice: the replicator has no peer slice."""
    _refused(tmp_path, edited(DEV, _multi_tier()), "dev", "jobs[0].maxSlices", "a job of one slice has none")


@pytest.mark.parametrize("key", ["local_checkpoint_period", "multi_tier_checkpointing_backup_interval_minutes"])
def test_multi_tier_checkpointing_with_a_period_of_zero_is_refused(tmp_path, key):
    text = edited(PROD, _multi_tier(lambda j: j.setdefault("maxtext", {}).update({key: 0})))
    _refused(tmp_path, text, "prod", f"jobs[0].maxtext.{key}", f"needs a positive {key}")


def test_multi_tier_checkpointing_on_a_bucket_without_hierarchical_namespace_is_refused(tmp_path):
    _refused(tmp_path, edited(PROD, _multi_tier(hns=False)), "prod", "storage.hierarchicalNamespace",
             "backs up to a bucket with hierarchical namespace")


def test_multi_tier_checkpointing_on_multislice_jobs_is_accepted(tmp_path):
    text = edited(PROD, _multi_tier(lambda j: j.setdefault("maxtext", {}).update(local_checkpoint_period=5)))
    code, out = lint_and_preview(tmp_path, text, "prod")
    assert code == Exit.OK, out


# --------------------------------------------------------------------------- Cloud KMS keys in their resource's place

# GKE "Encrypt secrets at the application layer" (https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-
# secrets), paraphrased: the key ring is in the cluster's location (a zonal cluster's region). The spec names no
# cluster key itself: the stack derives it in the cluster's region (stackspec/names.py secrets_key_id), so this holds
# for every stack the fixtures hold, single- and multi-region, manager included.
@pytest.mark.parametrize("stack", ["dev", "prod", "multi"])
def test_every_clusters_secrets_key_is_in_the_clusters_region(stack):
    from offline import engine
    r = engine.render(stack, engine.stack_config(stack))
    clusters = r.by_type("gcp:container/cluster:Cluster")
    assert clusters
    for c in clusters:
        location = c.inputs["location"]
        region = location if location.count("-") == 1 else location.rsplit("-", 1)[0]
        key = c.inputs["databaseEncryption"]["keyName"]
        assert f"/locations/{region}/keyRings/" in key, (c.name, location, key)
