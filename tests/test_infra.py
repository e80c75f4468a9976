"""The real Pulumi program under mocks (GCP and the Pulumi engine are the only stand-ins).

``engine.render`` runs ``__main__.py`` with ``pulumi.runtime.set_mocks``; these
tests read what it registered, with the inputs as the engine sees them.
"""

import pulumi
import pytest

from infra.checkpoints import BUCKET_ROLE, workload_identity_principal
from offline import engine
from stackspec import tpu

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"


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
        # Kueue's pinned chart: a component the provider expands (helm.v4.Chart).
        ("kubernetes:helm.sh/v4:Chart", "maxtext-tpu-workloads-kueue-chart"),
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


def test_cluster(prod):
    (c,) = prod.by_type("gcp:container/cluster:Cluster")
    i = c.inputs
    assert i["name"] == "maxtext-tpu" and i["location"] == "us-east5-b"
    assert i["minMasterVersion"] == "1.35.2-gke.1842000"
    assert i["datapathProvider"] == "ADVANCED_DATAPATH"  # Dataplane V2
    assert i["workloadIdentityConfig"] == {"workloadPool": "my-tpu-project.svc.id.goog"}
    assert i["addonsConfig"]["rayOperatorConfigs"][0]["enabled"] is True
    assert i["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
    assert i["removeDefaultNodePool"] is True
    assert i["deletionProtection"] is True


def test_system_pool_runs_the_ray_head(prod):
    pool = prod.one(POOL, "maxtext-tpu-system")
    cfg = pool.inputs["nodeConfig"]
    assert cfg["machineType"] == "n1-standard-16"
    assert cfg["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert cfg["serviceAccount"].startswith("maxtext-tpu-nodes@")


def test_nodes_use_a_dedicated_least_privilege_account(prod):
    (role,) = prod.by_type("gcp:projects/iAMMember:IAMMember")
    assert role.inputs["role"] == "roles/container.defaultNodeServiceAccount"
    assert role.inputs["member"].startswith("serviceAccount:maxtext-tpu-nodes@")
    assert not prod.by_type("gcp:serviceaccount/key:Key")


@pytest.mark.parametrize("name", ["v6e-16-0", "v6e-16-1"])
def test_slice_node_pools_match_the_seed(prod, name):
    # The preferred option's pool (any reservation, <name>-rsv) keeps the slice's resource name; with
    # fallbacks (flex-start <name>-flex, on-demand <name>-std) every option's pool scales from 0 to one
    # slice (tests/test_compute_class.py).
    i = prod.one(POOL, name).inputs
    shape = tpu.resolve("v6e", "4x4", "ct6e-standard-4t")
    assert i["name"] == f"{name}-rsv" and i["autoscaling"]["totalMaxNodeCount"] == shape.hosts == 4
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
    assert cfg["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    flex = next(p.inputs for p in prod.by_type(POOL) if p.inputs["name"] == f"{name}-flex")["nodeConfig"]
    assert flex["flexStart"] is True
    assert flex["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}  # flex-start consumes none
    std = next(p.inputs for p in prod.by_type(POOL) if p.inputs["name"] == f"{name}-std")
    assert "reservationAffinity" not in std["nodeConfig"]  # as the seed: GCE's default for on-demand
    # The release channel upgrades every pool; runs hold upgrades off with maintenance exclusions.
    assert std["management"] == {"autoRepair": True, "autoUpgrade": True}


def test_dev_slice_is_spot_and_two_hosts(dev):
    # dev: Spot first, flex-start as its fallback; both pools scale 0 <-> one 2-host slice.
    pool = dev.one(POOL, "v6e-8-0")
    assert pool.inputs["name"] == "v6e-8-0-spot" and pool.inputs["autoscaling"]["totalMaxNodeCount"] == 2
    assert pool.inputs["placementPolicy"]["tpuTopology"] == "2x4"
    cfg = pool.inputs["nodeConfig"]
    assert cfg["spot"] is True
    assert cfg["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}


def test_checkpoint_bucket_is_safe(prod, dev):
    (b,) = prod.by_type("gcp:storage/bucket:Bucket")
    i = b.inputs
    assert i["name"] == "my-tpu-project-maxtext-checkpoints"
    assert (i["location"], i["storageClass"]) == ("us-east5", "STANDARD")
    assert i["uniformBucketLevelAccess"] is True and i["publicAccessPrevention"] == "enforced"
    assert i["deletionPolicy"] == "PREVENT" and i["forceDestroy"] is False
    (d,) = dev.by_type("gcp:storage/bucket:Bucket")
    assert d.inputs["deletionPolicy"] == "DELETE"


def test_bucket_iam_is_the_ksa_principal(prod):
    (m,) = prod.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert m.inputs["role"] == BUCKET_ROLE == "roles/storage.objectUser"
    assert m.inputs["bucket"] == "my-tpu-project-maxtext-checkpoints"
    assert m.inputs["member"] == (
        f"principal://iam.googleapis.com/projects/{engine.PLACEHOLDER_PROJECT_NUMBER}/locations/global/"
        "workloadIdentityPools/my-tpu-project.svc.id.goog/subject/ns/maxtext/sa/maxtext-ksa"
    )
    (ksa,) = [d for d in prod.manifests if d["kind"] == "ServiceAccount"]
    assert ksa["metadata"]["name"] == "maxtext-ksa" and ksa["metadata"]["namespace"] == "maxtext"


def test_workloads_use_the_cluster_provider(prod):
    (provider,) = prod.by_type("pulumi:providers:kubernetes")
    kubeconfig = provider.inputs["kubeconfig"]
    assert "gke-gcloud-auth-plugin" in kubeconfig and engine.PLACEHOLDER_ENDPOINT in kubeconfig
    k8s = [r for r in prod.resources if r.custom and r.type.startswith("kubernetes:")]
    assert k8s and all(r.provider == provider.name + "-offline-id" for r in k8s)


def test_outputs(prod):
    assert sorted(prod.outputs["sliceNodePools"]) == sorted(f"v6e-16-{i}-{o}" for i in (0, 1)
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
                version="1.35.2-gke.1842000",
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
            project="p", version="1.35.2-gke.1842000", node_service_account="n@p.iam.gserviceaccount.com"))

        def verify(_):
            sent = mocks.inputs["s1"]
            for key, value in expected.items():
                assert sent["nodeConfig"][key] == value, key
            if cap.type == "flex-start":
                assert "nodeCount" not in sent and sent["initialNodeCount"] == 0
                assert sent["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": shape.hosts,
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
    (member,) = dev.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert member.inputs["role"] == "roles/storage.objectUser"
    assert member.inputs["member"].endswith("/subject/ns/maxtext/sa/maxtext-ksa")


def test_cluster_pins_pod_and_service_ranges(prod):
    # Pinned as the cluster subnet's secondary ranges (infra/vpc.py), named to GKE.
    policy = prod.one(CLUSTER, "maxtext-tpu").inputs["ipAllocationPolicy"]
    assert policy == {"clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"}
    subnet = prod.one("gcp:compute/subnetwork:Subnetwork", "maxtext-tpu-network-subnet").inputs
    assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
        "pods": prod.spec.cluster.pod_cidr, "services": prod.spec.cluster.service_cidr}
