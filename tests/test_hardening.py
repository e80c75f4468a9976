"""Cluster hardening (issue 10, item 4): what the plan shows, what the policies refuse, what the spec says.

Renderings come from the real program under Pulumi mocks (``offline.engine``: GCP and the Pulumi
engine are the only stand-ins); the policies are the real rules through the offline evaluator;
spec errors come from the real loader reading a stack file written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURE_STACKS, rendered

from offline import engine
from policies import offline
from policies.registry import ADVISORY, MANDATORY, rule
from stackspec import spec as stack_spec

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
HARDENING = ("gke-release-channel", "gke-no-public-control-plane", "gke-private-nodes", "gke-shielded-nodes")
CLUSTER_KEY = f"{stack_spec.PROJECT}:cluster"


def _with_cluster(stack: str, **changes) -> dict[str, str]:
    """The stack's config with keys of its cluster section replaced."""
    config = engine.stack_config(stack)
    cluster = {**json.loads(config[CLUSTER_KEY]), **changes}
    return {**config, CLUSTER_KEY: json.dumps(cluster)}


# --------------------------------------------------------------------------- the plan


def test_prod_cluster_shows_every_hardening_setting(prod):
    (c,) = prod.by_type(CLUSTER)
    i = c.inputs
    assert i["releaseChannel"] == {"channel": "REGULAR"}
    assert i["enableShieldedNodes"] is True
    assert i["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    # DNS-only control plane: IAM on the DNS endpoint, no IP endpoint at all, so no authorized networks.
    assert i["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True},
                                                "ipEndpointsConfig": {"enabled": False}}
    assert "masterAuthorizedNetworksConfig" not in i
    assert i["maintenancePolicy"] == {"recurringWindow": {
        "startTime": "2026-01-03T02:00:00Z", "endTime": "2026-01-03T10:00:00Z",
        "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"}}
    assert i["network"] == "maxtext-tpu-vpc" and i["subnetwork"] == "maxtext-tpu-nodes"
    assert prod.outputs["getCredentials"] == ("gcloud container clusters get-credentials maxtext-tpu "
                                              "--location=us-east5-b --project=my-tpu-project --dns-endpoint")


def test_every_pool_auto_upgrades_and_repairs_with_the_channel(prod):
    pools = prod.by_type(POOL)
    assert {p.name for p in pools} >= {"maxtext-tpu-system", "v6e-16-0", "v6e-16-1"}
    for p in pools:
        flex = p.inputs["nodeConfig"].get("flexStart") is True  # GKE does not repair flex-start VMs
        assert p.inputs["management"] == {"autoRepair": not flex, "autoUpgrade": True}, p.name
    system = prod.one(POOL, "maxtext-tpu-system").inputs["nodeConfig"]
    assert system["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    # TPU pools: no Shielded VM options (unverified for ct6e); the cluster's Shielded GKE Nodes cover them.
    assert "shieldedInstanceConfig" not in prod.one(POOL, "v6e-16-0").inputs["nodeConfig"]


def test_private_nodes_get_cloud_nat_on_the_cluster_network(prod):
    (router,) = prod.by_type("gcp:compute/router:Router")
    (nat,) = prod.by_type("gcp:compute/routerNat:RouterNat")
    assert router.inputs["network"] == prod.one(CLUSTER, "maxtext-tpu").inputs["network"]
    assert router.inputs["region"] == nat.inputs["region"] == "us-east5"
    assert nat.inputs["router"] == router.inputs["name"] == "maxtext-tpu-nat-router"
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY"
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    assert nat.inputs["enableDynamicPortAllocation"] is True
    assert nat.inputs["enableEndpointIndependentMapping"] is False


def test_authorized_networks_and_exclusions_from_the_spec():
    r = engine.render("dev", _with_cluster(
        "dev",
        controlPlane={"access": "authorized-networks", "authorizedNetworks": [{"cidr": "10.0.0.0/8", "name": "corp"}]},
        releaseChannel="STABLE",
        maintenance={
            "window": {"start": "2026-01-05T01:00:00Z", "end": "2026-01-05T05:00:00Z", "recurrence": "FREQ=DAILY"},
            "exclusions": [
                {"name": "llama3-70b-run", "start": "2026-03-02T00:00:00Z", "end": "2026-03-20T00:00:00+02:00"},
                {"name": "hold-minor", "start": "2026-03-01T00:00:00Z", "scope": "NO_MINOR_OR_NODE_UPGRADES"},
            ],
        },
    ))
    (c,) = r.by_type(CLUSTER)
    i = c.inputs
    assert i["releaseChannel"] == {"channel": "STABLE"}
    assert i["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": False},
                                                "ipEndpointsConfig": {"enabled": True}}
    assert i["privateClusterConfig"]["enablePrivateEndpoint"] is True  # private ranges: public address off
    assert i["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "10.0.0.0/8", "displayName": "corp"}],
        "gcpPublicCidrsAccessEnabled": False, "privateEndpointEnforcementEnabled": True}
    assert i["maintenancePolicy"]["recurringWindow"]["recurrence"] == "FREQ=DAILY"
    assert i["maintenancePolicy"]["maintenanceExclusions"] == [
        {"exclusionName": "llama3-70b-run", "startTime": "2026-03-02T00:00:00Z", "endTime": "2026-03-19T22:00:00Z",
         "exclusionOptions": {"scope": "NO_UPGRADES"}},
        {"exclusionName": "hold-minor", "startTime": "2026-03-01T00:00:00Z",
         "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"}},
    ]
    assert "--dns-endpoint" not in r.outputs["getCredentials"]
    assert not any(v.rule in HARDENING for v in offline.evaluate(r))


# --------------------------------------------------------------------------- policies


def _turned_off() -> engine.Rendering:
    """dev with every hardening setting turned off through spec keys: as a sandbox stack, the only kind the spec lets
    open the control plane to the whole internet (stackspec/rules/gke.py control_plane)."""
    return engine.render("dev", {**_with_cluster(
        "dev", releaseChannel="UNSPECIFIED", privateNodes=False, shieldedNodes=False,
        controlPlane={"access": "authorized-networks",
                      "authorizedNetworks": [{"cidr": "0.0.0.0/0", "name": "anywhere", "public": True}]},
    ), f"{stack_spec.PROJECT}:sandbox": "true"})


@pytest.fixture(scope="module")
def off() -> engine.Rendering:
    return _turned_off()


def test_dev_with_hardening_off_renders_it_off(off):
    (c,) = off.by_type(CLUSTER)
    i = c.inputs
    assert i["releaseChannel"] == {"channel": "UNSPECIFIED"} and i["enableShieldedNodes"] is False
    assert "privateClusterConfig" not in i and not off.by_type("gcp:compute/routerNat:RouterNat")
    assert i["masterAuthorizedNetworksConfig"]["cidrBlocks"] == [{"cidrBlock": "0.0.0.0/0", "displayName": "anywhere"}]


@pytest.mark.parametrize("name", HARDENING)
def test_each_policy_only_warns_in_dev(off, name):
    found = [v for v in offline.evaluate(off) if v.rule == name]
    assert found, name
    assert {v.enforcement for v in found} == {ADVISORY}
    assert rule(name).level("dev") == ADVISORY and rule(name).level("prod") == MANDATORY


@pytest.mark.parametrize("name", HARDENING)
def test_each_policy_refuses_the_same_resources_in_prod(off, name):
    found = [v for v in offline.evaluate_resources(offline.resources_of(off), "prod") if v.rule == name]
    assert found and all(v.mandatory for v in found), name


def test_public_control_plane_messages_name_what_is_open(off):
    messages = [v.message for v in offline.evaluate(off) if v.rule == "gke-no-public-control-plane"]
    assert any("public IP endpoint is on" in m for m in messages)
    assert any("['0.0.0.0/0'] (the whole internet)" in m for m in messages)


@pytest.mark.parametrize("name", HARDENING)
def test_prod_rendering_passes(prod, name):
    assert [v for v in offline.evaluate(prod) if v.rule == name] == []


# --------------------------------------------------------------------------- the spec


def _stack_file(tmp_path: Path, stack: str, cluster_lines: str) -> Path:
    """The shipped stack file with lines added to its cluster section (indented 4)."""
    text = (FIXTURE_STACKS / f"Pulumi.{stack}.yaml").read_text()
    anchor = "    serviceCidr: 10.104.0.0/20\n"
    assert anchor in text
    text = text.replace(anchor, anchor + cluster_lines, 1)
    (tmp_path / f"Pulumi.{stack}.yaml").write_text(text)
    return tmp_path


def _problems(tmp_path: Path, stack: str, cluster_lines: str) -> list[str]:
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load_stack(stack, _stack_file(tmp_path, stack, cluster_lines))
    return [p.render(e.value.source) for p in e.value.problems]


def _line_of(tmp_path: Path, stack: str, fragment: str) -> int:
    lines = (tmp_path / f"Pulumi.{stack}.yaml").read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if fragment in line)


BAD_MAINTENANCE = [
    ("no-upgrades-too-long",
     "    maintenance:\n      exclusions:\n        - name: long-run\n          start: 2026-02-01T00:00:00Z\n"
     "          end: 2026-03-15T00:00:00Z\n",
     "end: 2026-03-15", "maintenance.exclusions[0].end", "lasts at most 30 days, this one 42"),
    ("no-upgrades-without-end",
     "    maintenance:\n      exclusions:\n        - name: open-ended\n          start: 2026-02-01T00:00:00Z\n",
     "name: open-ended", "maintenance.exclusions[0].end", "a NO_UPGRADES exclusion needs an end"),
    ("exclusion-ends-first",
     "    maintenance:\n      exclusions:\n        - {name: backwards, start: \"2026-02-02T00:00:00Z\", "
     "end: \"2026-02-01T00:00:00Z\"}\n",
     "name: backwards", "maintenance.exclusions[0].end", "must be after start"),
    ("unknown-scope",
     "    maintenance:\n      exclusions:\n        - {name: x, start: \"2026-02-01T00:00:00Z\", "
     "end: \"2026-02-02T00:00:00Z\", scope: NO_PATCHES}\n",
     "scope: NO_PATCHES", "maintenance.exclusions[0].scope", "NO_MINOR_OR_NODE_UPGRADES"),
    ("duplicate-names",
     "    maintenance:\n      exclusions:\n"
     "        - {name: run, start: \"2026-02-01T00:00:00Z\", end: \"2026-02-02T00:00:00Z\"}\n"
     "        - {name: run, start: \"2026-03-01T00:00:00Z\", end: \"2026-03-02T00:00:00Z\"}\n",
     "exclusions:", "maintenance.exclusions", "exclusion names must be unique: run repeats"),
    ("not-a-time",
     "    maintenance:\n      window: {start: next saturday, end: \"2026-01-03T10:00:00Z\"}\n",
     "start: next saturday", "maintenance.window.start", "not an RFC 3339 time"),
    ("time-without-zone",
     "    maintenance:\n      window: {start: \"2026-01-03T02:00:00\", end: \"2026-01-03T10:00:00Z\"}\n",
     "window:", "maintenance.window.start", "with its zone"),
    ("window-too-short",
     "    maintenance:\n      window: {start: \"2026-01-03T02:00:00Z\", end: \"2026-01-03T04:00:00Z\"}\n",
     "window:", "maintenance.window.end", "at least 4 h"),
    ("window-too-sparse",
     "    maintenance:\n      window: {start: \"2026-01-04T02:00:00Z\", end: \"2026-01-04T10:00:00Z\", "
     "recurrence: \"FREQ=WEEKLY;BYDAY=SU\"}\n",
     "window:", "maintenance.window.recurrence", "leaves 32 h of maintenance in 32 days"),
    ("window-rrule-unchecked",
     "    maintenance:\n      window: {start: \"2026-01-03T02:00:00Z\", end: \"2026-01-03T10:00:00Z\", "
     "recurrence: \"FREQ=MONTHLY\"}\n",
     "window:", "maintenance.window.recurrence", "allowed: FREQ=DAILY"),
]


@pytest.mark.parametrize("case", BAD_MAINTENANCE, ids=[c[0] for c in BAD_MAINTENANCE])
def test_bad_maintenance_values_name_file_line_and_key(tmp_path, case):
    _, lines, fragment, key, expected = case
    problems = _problems(tmp_path, "dev", lines)
    line = _line_of(tmp_path, "dev", fragment)
    assert any(f"Pulumi.dev.yaml:{line}: {stack_spec.PROJECT}:cluster.{key}" in p and expected in p
               for p in problems), (line, problems)


PROD_REFUSED = [
    ("releaseChannel: UNSPECIFIED\n", "releaseChannel", "allowed: REGULAR, STABLE, EXTENDED"),
    ("releaseChannel: RAPID\n", "releaseChannel", "allowed: REGULAR, STABLE, EXTENDED"),
    ("privateNodes: false\n", "privateNodes", "no external IPs"),
    ("shieldedNodes: false\n", "shieldedNodes", "Shielded GKE Nodes on"),
    ("controlPlane: {access: authorized-networks, authorizedNetworks: [{cidr: 0.0.0.0/0, public: true}]}\n",
     "controlPlane.authorizedNetworks[0].cidr", "never opens it to the internet"),
]


@pytest.mark.parametrize("lines,key,expected", PROD_REFUSED, ids=[c[1] + "-" + c[0][:20] for c in PROD_REFUSED])
def test_prod_spec_refuses_hardening_off(tmp_path, lines, key, expected):
    problems = _problems(tmp_path, "prod", "    " + lines)
    line = _line_of(tmp_path, "prod", lines.split(":")[0])
    assert any(f"Pulumi.prod.yaml:{line}: {stack_spec.PROJECT}:cluster.{key}" in p and expected in p
               for p in problems), (line, problems)


@pytest.mark.parametrize("value,expected", [
    ({"access": "dns", "authorizedNetworks": [{"cidr": "10.0.0.0/8"}]}, "reached through IAM"),
    ({"access": "authorized-networks"}, "needs at least one range"),
    ({"access": "authorized-networks", "authorizedNetworks": [{"cidr": "203.0.113.0/24"}]}, "must say public: true"),
    ({"access": "authorized-networks", "authorizedNetworks": [{"cidr": "10.0.0.0/8", "public": True}]},
     "is a private range"),
    ({"access": "authorized-networks", "authorizedNetworks": [{"cidr": "10.0.0.1/8"}]}, "not an IPv4 CIDR"),
])
def test_control_plane_keys_are_checked(value, expected):
    config = _with_cluster("dev", controlPlane=value)
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load_stack("dev", config=config)
    assert any(expected in p.render(e.value.source) for p in e.value.problems), e.value.problems


def test_unquoted_yaml_timestamps_load(tmp_path):
    """An unquoted RFC 3339 time is a YAML timestamp: the loader hands it on as text, the model as UTC."""
    d = _stack_file(tmp_path, "dev", "    maintenance:\n      window:\n        start: 2026-01-03T02:00:00Z\n"
                                    "        end: 2026-01-03T10:00:00+02:00\n")
    w = stack_spec.load_stack("dev", d).cluster.maintenance.window
    assert (w.start.isoformat(), w.end.isoformat()) == ("2026-01-03T02:00:00+00:00", "2026-01-03T08:00:00+00:00")


# --------------------------------------------------------------------------- issue 17, item 5


def test_prod_cluster_encrypts_secrets_scans_admits_and_notifies(prod):
    (c,) = prod.by_type(CLUSTER)
    i = c.inputs
    assert i["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": "projects/my-tpu-project/locations/us-east5/keyRings/maxtext-tpu-gke/cryptoKeys/maxtext-tpu-secrets"}
    assert i["binaryAuthorization"] == {"evaluationMode": "PROJECT_SINGLETON_POLICY_ENFORCE"}
    (topic,) = prod.by_type("gcp:pubsub/topic:Topic")
    assert topic.inputs["name"] == "maxtext-tpu-gke-notifications" and topic.inputs["project"] == "my-tpu-project"
    pubsub = i["notificationConfig"]["pubsub"]
    assert pubsub["enabled"] is True and pubsub["filter"] == {"eventTypes": ["SECURITY_BULLETIN_EVENT"]}
    assert topic.urn in c.dependencies  # the topic (and the policy, below) exist before the cluster uses them
    (policy,) = prod.by_type("gcp:binaryauthorization/policy:Policy")
    assert policy.urn in c.dependencies
    (repo,) = prod.by_type("gcp:artifactregistry/repository:Repository")
    assert repo.inputs["vulnerabilityScanningConfig"] == {"enablementConfig": "INHERITED"}
    apis = {r.inputs["service"] for r in prod.by_type("gcp:projects/service:Service")}
    assert {"containerscanning.googleapis.com", "binaryauthorization.googleapis.com", "pubsub.googleapis.com"} <= apis


def test_the_kubelet_read_only_port_is_off_on_every_pool(prod):
    (c,) = prod.by_type(CLUSTER)
    assert c.inputs["nodeConfig"]["kubeletConfig"] == {"insecureKubeletReadonlyPortEnabled": "FALSE"}
    assert c.inputs["nodePoolDefaults"] == {"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": "FALSE"}}
    pools = prod.by_type(POOL)
    assert len(pools) == 1 + len(prod.spec.slices)  # the system pool and every TPU slice
    for p in pools:
        assert p.inputs["nodeConfig"]["kubeletConfig"] == {"insecureKubeletReadonlyPortEnabled": "FALSE"}, p.name


def test_the_cluster_has_its_own_vpc_with_private_google_access_and_secondary_ranges(prod):
    (c,) = prod.by_type(CLUSTER)
    vpc = prod.one("gcp:compute/network:Network", "maxtext-tpu-network-vpc")
    subnet = prod.one("gcp:compute/subnetwork:Subnetwork", "maxtext-tpu-network-subnet")
    assert vpc.inputs["name"] == c.inputs["network"] != "default" and vpc.inputs["autoCreateSubnetworks"] is False
    assert subnet.inputs["name"] == c.inputs["subnetwork"] and subnet.inputs["privateIpGoogleAccess"] is True
    assert subnet.inputs["ipCidrRange"] == "10.0.0.0/20" and subnet.inputs["region"] == "us-east5"
    assert subnet.inputs["secondaryIpRanges"] == [{"rangeName": "pods", "ipCidrRange": "10.100.0.0/14"},
                                                  {"rangeName": "services", "ipCidrRange": "10.104.0.0/20"}]
    assert c.inputs["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "pods",
                                              "servicesSecondaryRangeName": "services"}
    assert c.inputs["networkingMode"] == "VPC_NATIVE"
    (router,) = prod.by_type("gcp:compute/router:Router")
    assert router.inputs["network"] == vpc.inputs["name"]


def test_binary_authorization_logs_by_default_and_blocks_only_when_opted_in(prod):
    attestor = "projects/my-tpu-project/attestors/maxtext-tpu-ci-image"
    (policy,) = prod.by_type("gcp:binaryauthorization/policy:Policy")
    i = policy.inputs
    assert i["globalPolicyEvaluationMode"] == "ENABLE"
    # Day 0: the attestor's rule, logging only; the workers run ray.image, admitted at its tag.
    assert i["defaultAdmissionRule"] == {"evaluationMode": "REQUIRE_ATTESTATION",
                                         "enforcementMode": "DRYRUN_AUDIT_LOG_ONLY",
                                         "requireAttestationsBies": [attestor]}
    patterns = [p["namePattern"] for p in i["admissionWhitelistPatterns"]]
    assert prod.spec.image.pending
    assert patterns == ["gcr.io/gke-release/*", "gke.gcr.io/*", "registry.k8s.io/kueue/kueue:v0.19.2*",
                        "docker.io/rayproject/ray:2.60.0-py312-tpu*"]
    # The digest set, blocking opted in: GKE's and Kueue's patterns only; the workers' image needs the attestation.
    cfg = engine.stack_config("prod")
    image = {**json.loads(cfg[f"{stack_spec.PROJECT}:image"]), "digest": "sha256:" + "a" * 64}
    unverified = {**json.loads(cfg[f"{stack_spec.PROJECT}:unverified"]), "binaryAuthorizationEnforce": True}
    r = engine.render("prod", {**cfg, f"{stack_spec.PROJECT}:image": json.dumps(image),
                               f"{stack_spec.PROJECT}:unverified": json.dumps(unverified)})
    (policy,) = r.by_type("gcp:binaryauthorization/policy:Policy")
    assert policy.inputs["defaultAdmissionRule"] == {"evaluationMode": "REQUIRE_ATTESTATION",
                                                     "enforcementMode": "ENFORCED_BLOCK_AND_AUDIT_LOG",
                                                     "requireAttestationsBies": [attestor]}
    patterns = [p["namePattern"] for p in policy.inputs["admissionWhitelistPatterns"]]
    assert patterns == ["gcr.io/gke-release/*", "gke.gcr.io/*", "registry.k8s.io/kueue/kueue:v0.19.2*"]
    assert "tpu-multislice:unverified.binaryAuthorizationEnforce" in r.spec.unverified_paths
    # A stack without an image repository has no attestor to require: everything else is denied.
    (policy,) = rendered("dev").by_type("gcp:binaryauthorization/policy:Policy")
    assert policy.inputs["defaultAdmissionRule"] == {"evaluationMode": "ALWAYS_DENY",
                                                     "enforcementMode": "DRYRUN_AUDIT_LOG_ONLY"}
    assert "docker.io/rayproject/ray:nightly-py312-tpu*" in [
        p["namePattern"] for p in policy.inputs["admissionWhitelistPatterns"]]


def _prod_problems(tmp_path: Path, old: str, new: str) -> tuple[list[str], int]:
    text = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    assert old in text
    (tmp_path / "Pulumi.prod.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load_stack("prod", tmp_path)
    lines = (tmp_path / "Pulumi.prod.yaml").read_text().splitlines()
    line = next((n for n, x in enumerate(lines, start=1) if new.strip() and new.strip().splitlines()[0] in x), 0)
    return [p.render(e.value.source) for p in e.value.problems], line


def test_prod_refuses_a_stack_file_without_a_secrets_provider(tmp_path):
    text = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text()
    provider = next(x for x in text.splitlines() if x.startswith("secretsprovider:"))
    problems, _ = _prod_problems(tmp_path, provider + "\n", "")
    assert any("Pulumi.prod.yaml" in p and "secretsprovider" in p and "(missing)" in p and "Cloud KMS key" in p
               for p in problems), problems
    # dev may keep its secrets however it likes
    dev = (FIXTURE_STACKS / "Pulumi.dev.yaml").read_text()
    dev = "\n".join(x for x in dev.splitlines() if not x.startswith("secretsprovider:"))
    (tmp_path / "Pulumi.dev.yaml").write_text(dev)
    assert stack_spec.load_stack("dev", tmp_path).secrets_provider is None


def test_the_primary_subnet_may_not_overlap_the_other_ranges(tmp_path):
    problems, _ = _prod_problems(tmp_path, "      cidr: 10.0.0.0/20", "      cidr: 10.50.0.0/20")
    lines = (tmp_path / "Pulumi.prod.yaml").read_text().splitlines()
    dcn = next(n for n, x in enumerate(lines, start=1) if "cidr: 10.50.0.0/16" in x)
    assert any(f"Pulumi.prod.yaml:{dcn}: tpu-multislice:network.secondary[0].cidr" in p and "overlaps 10.50.0.0/20 "
               "at tpu-multislice:network.primary.cidr" in p for p in problems), problems
    problems, line = _prod_problems(tmp_path, "      cidr: 10.0.0.0/20", "      cidr: 10.0.0.0/29")
    assert any(f"Pulumi.prod.yaml:{line}: tpu-multislice:network.primary.cidr" in p and "the cluster has 11 nodes"
               in p for p in problems), problems
