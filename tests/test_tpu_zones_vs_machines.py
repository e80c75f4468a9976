"""The two vendored availability tables agree: a TPU generation whose zone list is marked complete (so checked:
a slice elsewhere is refused) names a zone, or says why it names none, in every region where the Compute Engine
export (stackspec/data/machine_regions.csv, gcloud of 2026-08-17) lists its host machine types.

Found: the export lists ct6e in us-east4 and us-west1 (and five regions in Asia and South America) while the zone
table (the TPU page of 2025-09-09) listed none, so a v6e stack in us-east4-a was refused. Google's TPU regions page
as later published (https://cloud-dot-devsite-v2-prod.appspot.com/tpu/docs/types-zones?hl=de, v6e, US) lists
us-east5-c, us-east4-a and us-east4-b (single-tenant) and us-west1-c (single-tenant, no Spot quota) beside the
general zones.
"""

from __future__ import annotations

from stackspec import machine_regions, spec, zones
from stackspec.errors import SpecError

HOSTS = {"v6e": "ct6e-", "v5p": "ct5p-", "v5e": "ct5lp-", "v4": "ct4p-"}


def test_a_complete_zone_list_covers_every_region_compute_engine_lists_its_hosts_in():
    table = zones.table()
    for generation, entry in table["generations"].items():
        if not entry["complete"]:
            continue
        listed = {z.rsplit("-", 1)[0] for z in entry["zones"] + entry.get("singleTenant", [])}
        unlisted = {r["region"]: r for r in entry.get("unlistedRegions", [])}
        assert all(r["why"] and r["source"] for r in unlisted.values())
        hosts = {r for name, regions in machine_regions.table().items() if name.startswith(HOSTS[generation])
                 for r in regions}
        assert sorted(hosts - listed - set(unlisted)) == [], f"{generation}: regions with hosts but no zone"
        assert not listed & set(unlisted), f"{generation}: a region both listed and unlisted"


def test_a_single_tenant_v6e_zone_is_not_refused_and_a_general_zone_is_suggested_first():
    assert zones.zone_error("us-east4-a", "v6e") is None
    assert zones.zone_error("us-east5-c", "v6e") is None
    assert "us-east5-a, us-east5-b" in zones.suggestion("us-east5", "v6e")
    assert zones.zone_error("us-central1-a", "v6e")  # the general rule still refuses a zone with no v6e


def test_a_region_compute_engine_lists_but_the_page_does_not_is_refused_saying_so():
    msg = zones.zone_error("asia-east1-a", "v6e")
    assert msg and "Compute Engine lists v6e hosts in asia-east1" in msg and "asia-east1" in msg


def test_spec_accepts_a_v6e_stack_in_a_single_tenant_zone():
    from test_cloud_rules import config
    try:
        spec.load("prod", config(**{"gcp:zone": "us-east4-a", "gcp:region": "us-east4"}))
    except SpecError as e:
        assert "offers no v6e" not in str(e), str(e)
