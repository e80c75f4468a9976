"""The real Pulumi program under mocks (GCP and the Pulumi engine are the only stand-ins).

``engine.render`` runs ``__main__.py`` with ``pulumi.runtime.set_mocks``; these
tests read what it registered, with the inputs as the engine sees them.
"""

import json

import pulumi
import pytest
from conftest import FALLBACKS, policy_bindings, with_fallbacks

from infra.checkpoints import BUCKET_ROLE, workload_identity_principal
from infra.cluster import IMAGE_STREAMING_ROLE, NODE_SA_ROLE, node_roles
from offline import engine
from stackspec import spec as stack_spec
from stackspec import tpu

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
FIREWALL = "gcp:compute/firewall:Firewall"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"


def pool_named(rendering, name: str):
    """The node pool GKE knows as ``name`` (its ``name`` input, whatever its resource name)."""
    (pool,) = [p for p in rendering.by_type(POOL) if p.inputs["name"] == name]
    return pool


def test_components_and_parents(prod):
    components = {(r.type, r.name) for r in prod.resources if not r.custom}
    assert components == {
        ("tpu-multislice:infra:SecondaryNetworks", "maxtext-tpu-dcn"),
        ("tpu-multislice:infra:ClusterNetwork", "maxtext-tpu-network"),
        ("tpu-multislice:infra:ClusterSecurity", "maxtext-tpu-security"),
        ("tpu-multislice:infra:GkeCluster", "maxtext-tpu"),
        ("tpu-multislice:infra:CloudNat", "maxtext-tpu-nat"),
        ("tpu-multislice:infra:SliceNodePool", "v6e-16-0"),
        ("tpu-multislice:infra:SliceNodePool", "v6e-16-1"),
        ("tpu-multislice:infra:CheckpointStore", "maxtext-tpu-checkpoints"),
        ("tpu-multislice:infra:ImageRegistry", "maxtext-tpu-images"),
        ("tpu-multislice:infra:StackMonitoring", "maxtext-tpu-monitoring"),
        # Kueue's pinned release objects, each a resource of the program's (workloads/kueue_install.py).
        ("tpu-multislice:workloads:KueueInstall", "maxtext-tpu-workloads-kueue-install"),
    } | {(r.type, r.name) for r in prod.resources if not r.custom and r.type.startswith("tpu-multislice:workloads")}
    # Every cloud resource sits under a component; child names derive from the component's.
    for r in prod.resources:
        if r.custom and r.type.startswith("gcp:"):
            assert r.parent, r.name
            parent_name = r.parent.split("::")[-1]
            assert r.name.startswith(parent_name), (r.name, parent_name)


def _dcn(rendering, type_: str) -> list:
    """The secondary (DCN) networks' resources, not the cluster's own VPC (infra/vpc.py)."""
    return [r for r in rendering.by_type(type_) if "SecondaryNetworks" in (r.parent or "")]


def test_secondary_networks(prod):
    nets = sorted(_dcn(prod, "gcp:compute/network:Network"), key=lambda r: r.name)
    assert [(n.inputs["name"], n.inputs["mtu"], n.inputs["autoCreateSubnetworks"]) for n in nets] == [
        ("maxtext-tpu-net-1", 8896, False),
        ("maxtext-tpu-net-2", 8896, False),
    ]
    subs = sorted(_dcn(prod, "gcp:compute/subnetwork:Subnetwork"), key=lambda r: r.name)
    assert [(s.inputs["name"], s.inputs["ipCidrRange"], s.inputs["region"]) for s in subs] == [
        ("tpu-subnet-1", "10.50.0.0/16", "us-east5"),
        ("tpu-subnet-2", "10.60.0.0/16", "us-east5"),
    ]


def test_each_secondary_network_admits_its_own_subnet(prod, dev):
    """A VPC denies ingress by default: each DCN network gets <network>-allow-internal, TCP, UDP and ICMP
    from its own subnet only."""
    for r in (prod, dev):
        nets = {n.urn: n.inputs for n in r.by_type("gcp:compute/network:Network")}
        rules = r.by_type(FIREWALL)
        assert len(rules) == len(r.spec.networks) == 2
        for fw, net in zip(sorted(rules, key=lambda f: f.name), r.spec.networks, strict=True):
            i = fw.inputs
            assert i["name"] == f"{net.network}-allow-internal"
            assert i["direction"] == "INGRESS" and i["sourceRanges"] == [net.cidr]
            assert sorted(a["protocol"] for a in i["allows"]) == ["icmp", "tcp", "udp"]
            assert not any(a.get("ports") for a in i["allows"])  # every port: megascale picks its own
            # On the network itself (its id), which it waits for.
            (vpc,) = [u for u in fw.dependencies if u in nets]
            assert nets[vpc]["name"] == net.network


def test_cluster(prod):
    (c,) = prod.by_type("gcp:container/cluster:Cluster")
    i = c.inputs
    assert i["name"] == "maxtext-tpu" and i["location"] == "us-east5-b"
    assert i["minMasterVersion"] == "1.35"  # GKE's alias: the channel's newest 1.35 patch, never a pinned patch
    assert i["datapathProvider"] == "ADVANCED_DATAPATH"  # Dataplane V2
    assert i["workloadIdentityConfig"] == {"workloadPool": "my-tpu-project.svc.id.goog"}
    assert i["addonsConfig"]["rayOperatorConfigs"][0]["enabled"] is True
    assert i["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert i["removeDefaultNodePool"] is True
    assert i["deletionProtection"] is True
    assert i["enableMultiNetworking"] is True  # the DCN NICs (network.secondary)
    # Even the short-lived default pool runs as the dedicated node account (the bootstrap's).
    assert i["nodeConfig"]["serviceAccount"] == "maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"


def test_no_multi_networking_without_secondary_networks():
    cfg = dict(engine.stack_config("dev"))
    cfg["tpu-multislice:network"] = '{"secondary": []}'
    (c,) = engine.render("dev", cfg).by_type(CLUSTER)
    assert "enableMultiNetworking" not in c.inputs


def test_system_pool_runs_the_ray_head(prod):
    pool = prod.one(POOL, "maxtext-tpu-system")
    cfg = pool.inputs["nodeConfig"]
    assert cfg["machineType"] == "n2-standard-16"
    assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert cfg["serviceAccount"].startswith("maxtext-tpu-nodes@")
    # No pinned version: the pool follows the control plane through auto-upgrade.
    assert "version" not in pool.inputs


def test_nodes_use_a_dedicated_least_privilege_account(prod, dev):
    """Every pool runs as <cluster>-nodes, never the default compute account. The account and its project roles
    are the bootstrap's (the deploy identity cannot create accounts or change project IAM; tests/test_bootstrap.py):
    GKE's minimal node role, and Service Usage Consumer where the stack streams its image (prod)."""
    for r, account in ((prod, "maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"),
                       (dev, "maxtext-dev-nodes@my-tpu-project-dev.iam.gserviceaccount.com")):
        pools = r.by_type(POOL)
        assert pools and {p.inputs["nodeConfig"]["serviceAccount"] for p in pools} == {account}
        assert not r.by_type("gcp:serviceaccount/account:Account") and not r.by_type(IAM_MEMBER)
        assert not r.by_type("gcp:serviceaccount/key:Key")
    assert (NODE_SA_ROLE, IMAGE_STREAMING_ROLE) == (
        "roles/container.defaultNodeServiceAccount", "roles/serviceusage.serviceUsageConsumer")
    assert (node_roles(True), node_roles(False)) == ((NODE_SA_ROLE, IMAGE_STREAMING_ROLE), (NODE_SA_ROLE,))


@pytest.mark.parametrize("name", ["v6e-16-0", "v6e-16-1"])
def test_slice_node_pools_match_the_seed(prod, name):
    # As the seed's `node-pools create --num-nodes=4`: one on-demand pool per slice, named for the slice,
    # the whole slice held (no autoscaling); fallbacks are an opt-in (test_fallback_pools_scale_from_zero).
    pool = prod.one(POOL, name)
    i = pool.inputs
    shape = tpu.resolve("v6e", "4x4", "ct6e-standard-4t")
    assert i["name"] == name and i["nodeCount"] == shape.hosts == 4
    assert "autoscaling" not in i and "initialNodeCount" not in i and "version" not in i
    assert [p.inputs["name"] for p in prod.children(prod.one("tpu-multislice:infra:SliceNodePool", name))] == [name]
    assert i["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
    assert i["networkConfig"]["additionalNodeNetworkConfigs"] == [
        {"network": "maxtext-tpu-net-1", "subnetwork": "tpu-subnet-1"},
        {"network": "maxtext-tpu-net-2", "subnetwork": "tpu-subnet-2"},
    ]
    cfg = i["nodeConfig"]
    assert cfg["machineType"] == "ct6e-standard-4t"
    assert cfg["advancedMachineFeatures"]["threadsPerCore"] == 1
    assert cfg["gvnic"] == {"enabled": True}
    assert cfg["labels"]["cloud.google.com/gke-networking-dra-driver"] == "true"
    assert cfg["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert not cfg["serviceAccount"].endswith("-compute@developer.gserviceaccount.com")
    assert cfg["spot"] is False and not cfg.get("flexStart")
    assert cfg["labels"]["cloud.google.com/compute-class"] == "tpu-group-class"
    assert "reservationAffinity" not in cfg  # as the seed: GCE's default for on-demand
    # The release channel upgrades every pool; runs hold upgrades off with maintenance exclusions.
    assert i["management"] == {"autoRepair": True, "autoUpgrade": True}
    # initialNodeCount is a creation value; the pool waits for the system pool (and the cluster).
    assert pool.ignore_changes == ("initialNodeCount",)
    assert {prod.one(POOL, "maxtext-tpu-system").urn, prod.one(CLUSTER, "maxtext-tpu").urn} <= set(pool.dependencies)


@pytest.mark.parametrize("name", ["v6e-16-0", "v6e-16-1"])
def test_fallback_pools_scale_from_zero(prod_fallbacks, name):
    """With fallbacks (opted in: tpu-multislice:unverified.draScaleFromZero) every option's pool scales
    between 0 and one whole slice, per zone; the reservation is named, flex-start consumes none."""
    r = prod_fallbacks
    system = r.one(POOL, "maxtext-tpu-system").urn
    for suffix in ("rsv", "flex", "std"):
        pool = pool_named(r, f"{name}-{suffix}")
        i = pool.inputs
        assert i["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"}
        assert i["initialNodeCount"] == 0 and "nodeCount" not in i and "version" not in i
        assert i["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
        flex = suffix == "flex"
        assert pool.ignore_changes == (("initialNodeCount", "nodeConfig.labels") if flex else ("initialNodeCount",))
        assert system in pool.dependencies
    rsv = pool_named(r, f"{name}-rsv").inputs["nodeConfig"]
    assert rsv["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                         "key": "compute.googleapis.com/reservation-name", "values": ["v6e-res"]}
    flex = pool_named(r, f"{name}-flex").inputs["nodeConfig"]
    assert flex["flexStart"] is True
    assert flex["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}  # flex-start consumes none
    std = pool_named(r, f"{name}-std").inputs
    assert "reservationAffinity" not in std["nodeConfig"]  # as the seed: GCE's default for on-demand
    assert std["management"] == {"autoRepair": True, "autoUpgrade": True}


def test_fallbacks_with_dranet_need_the_opt_in():
    cfg = dict(engine.stack_config("prod"))
    slices = json.loads(cfg["tpu-multislice:slices"])
    for s in slices:
        s["capacity"] = [dict(c) for c in FALLBACKS]
    cfg["tpu-multislice:slices"] = json.dumps(slices)
    with pytest.raises(stack_spec.SpecError) as e:
        engine.render("prod", cfg)
    assert "tpu-multislice:unverified.draScaleFromZero: true" in str(e.value)
    assert "tpu-multislice:slices[0].capacity" in str(e.value) and "tpu-multislice:slices[1].capacity" in str(e.value)
    spec = stack_spec.load("prod", with_fallbacks(engine.stack_config("prod")))
    assert all(s.autoscaled for s in spec.slices)
    assert set(spec.unverified_paths) == {"tpu-multislice:unverified.draScaleFromZero",
                                          "tpu-multislice:unverified.rayTokenAuth"}


def test_dev_slice_is_spot_and_two_hosts(dev):
    # dev: Spot first, flex-start as its fallback (opted in: draScaleFromZero); both pools scale 0 <-> one
    # 2-host slice, per zone.
    assert dev.spec.unverified.dra_scale_from_zero
    pool = pool_named(dev, "v6e-8-0-spot")
    assert pool.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 2, "locationPolicy": "ANY"}
    assert pool.inputs["placementPolicy"]["tpuTopology"] == "2x4"
    cfg = pool.inputs["nodeConfig"]
    assert cfg["spot"] is True
    assert cfg["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    flex = pool_named(dev, "v6e-8-0-flex")
    assert flex.inputs["autoscaling"] == pool.inputs["autoscaling"]
    assert flex.ignore_changes == ("initialNodeCount", "nodeConfig.labels")


def test_checkpoint_bucket_is_safe(prod, dev):
    (b,) = prod.by_type("gcp:storage/bucket:Bucket")
    i = b.inputs
    assert i["name"] == "my-tpu-project-maxtext-checkpoints"
    assert (i["location"], i["storageClass"]) == ("us-east5", "STANDARD")
    assert i["uniformBucketLevelAccess"] is True and i["publicAccessPrevention"] == "enforced"
    assert i["deletionPolicy"] == "PREVENT" and i["forceDestroy"] is False
    (d,) = dev.by_type("gcp:storage/bucket:Bucket")
    assert d.inputs["deletionPolicy"] == "DELETE"


def test_bucket_binding_waits_for_the_cluster(prod, dev):
    """The workload identity pool <project>.svc.id.goog exists once the cluster does: the binding waits."""
    for r in (prod, dev):
        (m,) = r.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
        (c,) = r.by_type(CLUSTER)
        assert c.urn in m.dependencies


def test_bucket_iam_is_the_ksa_principal(prod):
    """The bucket's policy is authoritative and whole: the KSA's object access and no other member, not even GCS's
    convenience values for the project's basic roles (a foreign grant is removed by the next `up`)."""
    (m,) = prod.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    assert m.inputs["bucket"] == "my-tpu-project-maxtext-checkpoints"
    assert policy_bindings(m) == {
        BUCKET_ROLE: [f"principal://iam.googleapis.com/projects/{engine.PLACEHOLDER_PROJECT_NUMBER}/locations/"
                      "global/workloadIdentityPools/my-tpu-project.svc.id.goog/subject/ns/maxtext/sa/maxtext-ksa"],
    }
    assert BUCKET_ROLE == "roles/storage.objectUser"
    # No additive grant beside it on the same bucket (they would fight: infra/iam_policy.py).
    assert not prod.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert not prod.by_type("gcp:storage/bucketIAMBinding:BucketIAMBinding")
    (ksa,) = [d for d in prod.manifests
              if d["kind"] == "ServiceAccount" and d["metadata"]["namespace"] != "kueue-system"]
    assert ksa["metadata"]["name"] == "maxtext-ksa" and ksa["metadata"]["namespace"] == "maxtext"


def test_workloads_use_the_cluster_provider(prod):
    (provider,) = prod.by_type("pulumi:providers:kubernetes")
    kubeconfig = provider.inputs["kubeconfig"]
    assert "gke-gcloud-auth-plugin" in kubeconfig and engine.PLACEHOLDER_ENDPOINT in kubeconfig
    k8s = [r for r in prod.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s and all(r.provider == provider.name + "-offline-id" for r in k8s)


def test_outputs(prod, prod_fallbacks):
    assert sorted(prod.outputs["sliceNodePools"]) == ["v6e-16-0", "v6e-16-1"]
    assert sorted(prod_fallbacks.outputs["sliceNodePools"]) == sorted(f"v6e-16-{i}-{o}" for i in (0, 1)
                                                                      for o in ("rsv", "flex", "std"))
    assert prod.outputs["getCredentials"].startswith("gcloud container clusters get-credentials maxtext-tpu")


def test_principal_format():
    assert workload_identity_principal("123", "p", "ns", "sa") == (
        "principal://iam.googleapis.com/projects/123/locations/global/"
        "workloadIdentityPools/p.svc.id.goog/subject/ns/ns/sa/sa"
    )


# Component-level tests in the manner of Pulumi's SDK tests: set_mocks, @pulumi.runtime.test,
# assertions inside apply so they run when the Output resolves.


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self):
        self.inputs: dict[str, dict] = {}

    def new_resource(self, args):
        self.inputs[args.name] = args.inputs
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args):
        return {}


@pytest.fixture
def mocks():
    pulumi.runtime.settings.ROOT.set(None)
    m = _Mocks()
    pulumi.runtime.set_mocks(m, project="tpu-multislice", stack="unit", preview=False)
    return m


@pytest.mark.parametrize(
    ("topology", "machine", "hosts", "placement"),
    [
        ("2x4", "ct6e-standard-4t", 2, True),
        ("2x4", "ct6e-standard-8t", 1, False),  # one host: no multi-host placement
        ("16x16", "ct6e-standard-4t", 64, True),
    ],
)
def test_slice_node_pool_component(mocks, topology, machine, hosts, placement):
    from infra.slice_pool import SliceNodePool, SliceNodePoolArgs
    from stackspec.spec import Capacity, Slice

    cap = Capacity(type="spot")

    @pulumi.runtime.test
    def check():
        pool = SliceNodePool(
            "s0",
            SliceNodePoolArgs(
                slice=Slice(name="s0", topology=topology, machine_type=machine, capacity=cap),
                cluster_name="c",
                location="us-east5-b",
                project="p",
                node_service_account="n@p.iam.gserviceaccount.com",
            ),
        )

        def verify(args):
            count, policy = args
            assert count == hosts
            assert (policy is not None) == placement
            if placement:
                assert policy == {"type": "COMPACT", "tpu_topology": topology}
            sent = mocks.inputs["s0"]  # what the engine would send the provider
            # No secondary networks: no DRANET label, no additional node networks.
            assert "cloud.google.com/gke-networking-dra-driver" not in sent["nodeConfig"]["labels"]
            assert "networkConfig" not in sent
            assert sent["nodeConfig"]["spot"] is True
            assert sent["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
            # One option: the whole slice held, no autoscaling, no pinned version.
            assert "autoscaling" not in sent and "version" not in sent

        return pulumi.Output.all(pool.node_pool.node_count, pool.node_pool.placement_policy).apply(verify)

    check()


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        (("reservation", "v6e-res", "SPECIFIC"),
         {"reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                                  "key": "compute.googleapis.com/reservation-name", "values": ["v6e-res"]},
          "spot": False}),
        (("reservation", None, "ANY"),
         {"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}, "spot": False}),
        (("flex-start", None, None),
         {"reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}, "spot": False,
          "flexStart": True}),
    ],
)
def test_slice_node_pool_capacity(mocks, capacity, expected):
    """Reservations and flex-start as GKE takes them; flex-start pools start empty and
    scale to one whole slice."""
    from infra.slice_pool import SliceNodePool, SliceNodePoolArgs
    from stackspec.spec import Capacity, Slice

    shape = tpu.resolve("v6e", "4x4", "ct6e-standard-4t")
    cap = Capacity(**dict(zip(("type", "reservation", "affinity"), capacity, strict=False)))

    @pulumi.runtime.test
    def check():
        pool = SliceNodePool("s1", SliceNodePoolArgs(
            slice=Slice(name="s1", topology="4x4", machine_type="ct6e-standard-4t", capacity=cap),
            cluster_name="c", location="us-east5-b",
            project="p", node_service_account="n@p.iam.gserviceaccount.com"))

        def verify(_):
            sent = mocks.inputs["s1"]
            for key, value in expected.items():
                assert sent["nodeConfig"][key] == value, key
            if cap.type == "flex-start":
                assert "nodeCount" not in sent and sent["initialNodeCount"] == 0
                # Per-zone limits: totals alone send a per-zone maximum of 0, which GKE refuses for a slice.
                assert sent["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": shape.hosts,
                                               "locationPolicy": "ANY"}
                assert sent["management"]["autoRepair"] is False
            else:
                assert sent["nodeCount"] == shape.hosts and "autoscaling" not in sent

        return pool.node_pool.name.apply(verify)

    check()


def test_prod_is_protected_from_deletion_and_dev_is_not(prod, dev):
    """Pulumi's protect/retainOnDelete, as the engine records them from the registrations."""
    for r in (prod.one(CLUSTER, "maxtext-tpu"), prod.by_type(BUCKET)[0]):
        assert r.protect, r.name
    assert prod.by_type(BUCKET)[0].retain_on_delete
    assert prod.one(CLUSTER, "maxtext-tpu").inputs["deletionProtection"] is True
    for r in (*dev.by_type(CLUSTER), *dev.by_type(BUCKET)):
        assert not r.protect and not r.retain_on_delete, r.name
    assert dev.by_type(CLUSTER)[0].inputs["deletionProtection"] is False


def test_dev_networks_and_bucket_access(dev):
    nets = {n.name: n.inputs for n in _dcn(dev, "gcp:compute/network:Network")}
    assert {i["name"] for i in nets.values()} == {"maxtext-dev-net-1", "maxtext-dev-net-2"}
    assert all(i["mtu"] == 8896 and i["autoCreateSubnetworks"] is False for i in nets.values())
    subnets = {s.inputs["name"]: s.inputs["ipCidrRange"] for s in _dcn(dev, "gcp:compute/subnetwork:Subnetwork")}
    assert subnets == {"dev-tpu-subnet-1": "10.50.0.0/16", "dev-tpu-subnet-2": "10.60.0.0/16"}
    (policy,) = dev.by_type("gcp:storage/bucketIAMPolicy:BucketIAMPolicy")
    (member,) = policy_bindings(policy)["roles/storage.objectUser"]
    assert member.endswith("/subject/ns/maxtext/sa/maxtext-ksa")


def test_cluster_pins_pod_and_service_ranges(prod):
    # Pinned as the cluster subnet's secondary ranges (infra/vpc.py), named to GKE.
    policy = prod.one(CLUSTER, "maxtext-tpu").inputs["ipAllocationPolicy"]
    assert policy == {"clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"}
    subnet = prod.one("gcp:compute/subnetwork:Subnetwork", "maxtext-tpu-network-subnet").inputs
    assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
        "pods": prod.spec.cluster.pod_cidr, "services": prod.spec.cluster.service_cidr}


def test_the_offline_policy_data_is_the_providers():
    """offline/iam_policy.py answers getIAMPolicy as terraform-provider-google's data source computes it
    (data_source_google_iam_policy.go dataSourceGoogleIamPolicyRead): one binding per role, members a set and
    sorted, bindings sorted by role, Go's compact JSON with its HTML escapes, the id the text's crc32."""
    import zlib

    from offline.iam_policy import get_iam_policy

    got = get_iam_policy({"bindings": [
        {"role": "roles/storage.objectUser", "members": ["user:b@example.com", "user:a@example.com"]},
        {"role": "roles/artifactregistry.reader", "members": ["serviceAccount:x@p.iam.gserviceaccount.com"]},
        {"role": "roles/storage.objectUser", "members": ["user:a@example.com", "user:c<d>@example.com"]},
    ]})
    assert got["policyData"] == (
        '{"bindings":[{"members":["serviceAccount:x@p.iam.gserviceaccount.com"],"role":"roles/artifactregistry.reader"},'
        '{"members":["user:a@example.com","user:b@example.com","user:c\\u003cd\\u003e@example.com"],'
        '"role":"roles/storage.objectUser"}]}')
    assert got["id"] == str(zlib.crc32(got["policyData"].encode()))
    # A conditional binding of the same role stays apart, after the unconditional one, with its condition first.
    cond = {"expression": "request.time < timestamp('2030-01-01T00:00:00Z')", "title": "until-2030"}
    got = get_iam_policy({"bindings": [{"role": "roles/x", "members": ["user:a@example.com"], "condition": cond},
                                       {"role": "roles/x", "members": ["user:b@example.com"]}]})
    assert [list(b) for b in json.loads(got["policyData"])["bindings"]] == [["members", "role"],
                                                                            ["condition", "members", "role"]]
