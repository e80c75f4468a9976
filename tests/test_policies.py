"""The policy pack: every rule passes the real dev/prod renderings and fails on one changed field.

Renderings come from the real program under Pulumi mocks (``offline.engine``: GCP and the
Pulumi engine are the only things replaced). Failing cases deep-copy those resources and
change one field (or add one resource), then run the real rules through the offline
evaluator, as ``slicectl preview`` does.
"""

from __future__ import annotations

import copy
import io
import json
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi_policy
import pytest
from conftest import FIXTURE_STACKS, rendered, with_fallbacks
from pulumi.runtime import config as runtime_config
from pulumi_policy.proxy import unknown_checking_proxy

from offline import engine
from policies import offline, registry, report
from policies.rules.common import COMPUTE_CLASS, RAY_CLUSTER, RAY_JOB, Res, parse_entrypoint
from stackspec import kube, tpu
from stackspec import spec as stack_spec

ROOT = Path(__file__).resolve().parents[1]
KUEUE_CLUSTER_QUEUE = f"kubernetes:{kube.KUEUE_GROUP}/v1beta2:ClusterQueue"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"


def _only_job(stack: str, name: str) -> dict[str, str]:
    """The stack's config with ``name`` as its only job, declared (not ``suspend``-ed):
    the stack file's jobs each want every slice, so they are rendered one at a time."""
    config = engine.stack_config(stack)
    key = f"{stack_spec.PROJECT}:jobs"
    job = next(j for j in json.loads(config[key]) if j["name"] == name)
    job.pop("suspend", None)
    return {**config, key: json.dumps([job])}


@pytest.fixture(scope="module")
def renderings() -> dict[str, engine.Rendering]:
    return {
        "prod": rendered("prod"),
        "dev": rendered("dev"),
        "prod-8b": rendered("prod", _only_job("prod", "llama3-8b-multislice")),
        "prod-70b": rendered("prod", _only_job("prod", "llama3-70b-multislice")),
        "prod-elastic": rendered("prod", _only_job("prod", "llama3-8b-elastic")),
        # prod with capacity fallbacks (opted in): every option's pool autoscales 0 <-> one slice.
        "prod-fallbacks": rendered("prod", with_fallbacks(engine.stack_config("prod"))),
        # A manager and two regions (the multi fixture): the rules across clusters.
        "multi": rendered("multi"),
    }


def _resources(renderings, stack: str) -> list[Res]:
    return copy.deepcopy(offline.resources_of(renderings[stack]))


def _env(renderings, stack: str) -> str:
    return renderings[stack].spec.environment


def _find(resources: list[Res], type_: str, name: str | None = None) -> Res:
    """The resource of ``type_`` named ``name`` (Pulumi name, ``name`` prop or metadata.name)."""
    for r in resources:
        names = {r.name, r.props.get("name"), (r.props.get("metadata") or {}).get("name")}
        if r.type == type_ and (name is None or name in names):
            return r
    raise LookupError(f"no {type_} {name}")


def _messages(resources: list[Res], env: str, rule: str, config: dict | None = None) -> list[str]:
    found = offline.evaluate_resources(resources, env, config)
    return [v.message for v in found if v.rule == rule]


def _worker_group(r: Res) -> dict[str, Any]:
    spec = r.props["spec"].get("rayClusterSpec", r.props["spec"])
    return spec["workerGroupSpecs"][0]


def _worker(r: Res) -> dict[str, Any]:
    return _worker_group(r)["template"]["spec"]["containers"][0]


def _cluster_spec(r: Res) -> dict[str, Any]:
    """A RayCluster's spec, or the spec of the cluster a RayJob brings."""
    return r.props["spec"].get("rayClusterSpec", r.props["spec"])


def _head(r: Res) -> dict[str, Any]:
    return _cluster_spec(r)["headGroupSpec"]["template"]["spec"]["containers"][0]


def _set_arg(r: Res, flag_or_key: str, value: str) -> None:
    """Change one trainer flag (``--slices``) or MaxText key (``steps``) in a RayJob entrypoint."""
    words = r.props["spec"]["entrypoint"].split(" ")
    if flag_or_key.startswith("--"):
        i = words.index(flag_or_key)
        words[i + 1] = value
    else:
        i = next(i for i, w in enumerate(words) if w.startswith(f"{flag_or_key}="))
        words[i] = f"{flag_or_key}={value}"
    r.props["spec"]["entrypoint"] = " ".join(words)


def _pool(rs): return _find(rs, NODE_POOL, "v6e-16-0").props  # noqa: E704
def _fallback_pool(rs): return _find(rs, NODE_POOL, "v6e-16-0-std").props  # noqa: E704
def _dev_pool(rs): return _find(rs, NODE_POOL, "v6e-8-0-spot").props  # noqa: E704
def _cluster(rs): return _find(rs, CLUSTER).props  # noqa: E704
def _bucket(rs): return _find(rs, BUCKET).props  # noqa: E704
# The long-lived RayCluster where a stack has one, else the first cluster a (Kueue-queued) job brings.
def _raycluster(rs): return next((r for r in rs if r.type == RAY_CLUSTER), None) or _dedicated(rs)  # noqa: E704
def _dedicated(rs): return next(r for r in rs if r.type == RAY_JOB and "rayClusterSpec" in r.props["spec"])  # noqa: E704
def _any_cluster(rs): return next(r for r in rs if r.type == RAY_CLUSTER or (r.type == RAY_JOB and "rayClusterSpec" in r.props["spec"]))  # noqa: E501,E704
def _job(rs, name): return _find(rs, RAY_JOB, name)  # noqa: E704


def _key_resource(rs: list[Res]) -> None:
    rs.append(Res("gcp:serviceaccount/key:Key", "nodes-key", "urn:nodes-key",
                  {"serviceAccountId": "maxtext-tpu-nodes"}))


def _project_storage_admin(rs: list[Res]) -> None:
    rs.append(Res("gcp:projects/iAMMember:IAMMember", "nodes-storage", "urn:nodes-storage",
                  {"project": "my-tpu-project", "role": "roles/storage.admin",
                   "member": "serviceAccount:maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com"}))


def _node_account_made_here(rs: list[Res]) -> None:
    """The plan makes the node account (as the stack once did) but grants it nothing for image streaming."""
    rs.append(Res("gcp:serviceaccount/account:Account", "maxtext-tpu-nodes", "urn:maxtext-tpu-nodes",
                  {"accountId": "maxtext-tpu-nodes", "project": "my-tpu-project"}))


BUCKET_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"


def _policy_grant(rs: list[Res], role: str, member: str, name: str | None = None) -> None:
    """A binding added to the checkpoint bucket's authoritative policy data (as a foreign grant would be)."""
    props = _find(rs, BUCKET_POLICY, name).props
    doc = json.loads(props["policyData"])
    doc["bindings"].append({"members": [member], "role": role})
    props["policyData"] = json.dumps(doc, separators=(",", ":"))


def _policy_bucket(rs: list[Res], bucket: str, name: str | None = None) -> None:
    _find(rs, BUCKET_POLICY, name).props.update(bucket=bucket)


def _binding_before_the_cluster(rs: list[Res]) -> None:
    i = rs.index(_find(rs, BUCKET_POLICY))
    rs[i] = Res(rs[i].type, rs[i].name, rs[i].urn, rs[i].props, ())


def _dedicated_job(rs: list[Res]) -> None:
    """The elastic job on its own cluster (as prod queues it, or moved off the shared one) that outlives it."""
    job = _job(rs, "llama3-8b-elastic")
    if job.props["spec"].pop("clusterSelector", None) is not None:
        job.props["spec"]["rayClusterSpec"] = copy.deepcopy(_find(rs, RAY_CLUSTER).props["spec"])
    job.props["spec"]["shutdownAfterJobFinishes"] = False


# (rule, stack, mutation, config, expected fragment of the message)
FAILING: list[tuple[str, str, Callable[[list[Res]], Any], dict | None, str]] = [
    ("tpu-topology-valid", "prod",
     lambda rs: _pool(rs)["placementPolicy"].update(tpuTopology="4x5"), None,
     "topology '4x5' is not offered for v6e"),
    ("tpu-machine-type-fits", "prod",
     lambda rs: _pool(rs)["nodeConfig"].update(machineType="ct6e-standard-8t"), None,
     "machine type ct6e-standard-8t (8 chips per host) does not fit v6e topology 4x4"),
    ("tpu-node-count-matches-hosts", "prod",
     lambda rs: _pool(rs).update(nodeCount=3.0), None,
     "nodeCount is 3, a v6e-16 (4x4, ct6e-standard-4t) slice has 4 host(s)"),
    ("tpu-node-count-matches-hosts", "prod-fallbacks",
     lambda rs: _fallback_pool(rs)["autoscaling"].update(maxNodeCount=3.0), None,
     "autoscaling maximum is 3, a v6e-16 (4x4) slice has 4 host(s)"),
    ("tpu-node-count-matches-hosts", "prod-fallbacks",
     lambda rs: _fallback_pool(rs).update(initialNodeCount=3.0), None,
     "starts with 3 node(s), a v6e-16 (4x4) slice has 4 host(s): 0 or 4"),
    ("tpu-compact-placement", "prod",
     lambda rs: _pool(rs)["placementPolicy"].update(type="SPREAD"), None,
     "multi-host topology 4x4 needs placementPolicy.type COMPACT"),
    ("tpu-compact-placement", "prod",
     lambda rs: _pool(rs).pop("placementPolicy"), None,
     "4 TPU hosts without placementPolicy.tpuTopology are separate single-host slices"),
    # An autoscaled pool: its size is the per-zone maximum (dev's pools scale from zero).
    ("tpu-compact-placement", "dev",
     lambda rs: _dev_pool(rs).pop("placementPolicy"), None,
     "2 TPU hosts without placementPolicy.tpuTopology are separate single-host slices"),
    ("tpu-autoscaling-per-zone", "dev",
     lambda rs: _dev_pool(rs).update(autoscaling={"totalMinNodeCount": 0.0, "totalMaxNodeCount": 2.0,
                                                  "locationPolicy": "ANY"}), None,
     "node pool v6e-8-0-spot: autoscaling.maxNodeCount is unset (total limits set instead: the provider sends a "
     "per-zone maximum of 0)"),
    ("tpu-autoscaling-per-zone", "prod-fallbacks",
     lambda rs: _fallback_pool(rs)["autoscaling"].update(maxNodeCount=1.0), None,
     "node pool v6e-16-0-std: autoscaling.maxNodeCount is 1; GKE validates a v6e-16 slice pool"),
    ("gke-node-version-unpinned", "prod",
     lambda rs: _pool(rs).update(version="1.35.2-gke.1842000"), None,
     "node pool v6e-16-0: version 1.35.2-gke.1842000 is pinned while auto-upgrade is on"),
    ("gke-node-version-unpinned", "dev",
     lambda rs: _find(rs, NODE_POOL, "system").props.update(version="1.35.2-gke.1842000"), None,
     "node pool system: version 1.35.2-gke.1842000 is pinned while auto-upgrade is on"),
    ("dcn-network-firewall", "prod",
     lambda rs: rs.__setitem__(slice(None), [r for r in rs if not r.type.endswith(":Firewall")]), None,
     "network maxtext-tpu-net-1: TPU pools attach it as an extra NIC, but no INGRESS firewall allows TCP"),
    ("dcn-network-firewall", "dev",
     lambda rs: _find(rs, "gcp:compute/firewall:Firewall", "maxtext-dev-net-2-allow-internal").props.update(
         sourceRanges=["10.50.0.0/16"]), None,
     "network maxtext-dev-net-2: TPU pools attach it as an extra NIC, but no INGRESS firewall allows TCP on every "
     "port from its subnet(s) ['10.60.0.0/16']"),
    ("dcn-network-firewall", "prod",
     lambda rs: _find(rs, "gcp:compute/firewall:Firewall", "maxtext-tpu-net-1-allow-internal").props.update(
         allows=[{"protocol": "tcp", "ports": ["22"]}]), None,
     "network maxtext-tpu-net-1: TPU pools attach it as an extra NIC, but no INGRESS firewall allows TCP"),
    ("gke-multi-networking", "prod", lambda rs: _cluster(rs).pop("enableMultiNetworking"), None,
     "cluster maxtext-tpu: node pools attach additional node networks but enableMultiNetworking is not true"),
    ("gke-multi-networking", "dev", lambda rs: _cluster(rs).update(datapathProvider="LEGACY_DATAPATH"), None,
     "cluster maxtext-dev: multi-networking needs Dataplane V2"),
    ("node-sa-image-streaming-role", "prod", _node_account_made_here, None,
     "node pool v6e-16-0: image streaming is on but its service account "
     "maxtext-tpu-nodes@my-tpu-project.iam.gserviceaccount.com is not granted roles/serviceusage.serviceUsageConsumer"),
    ("wi-binding-after-cluster", "prod", _binding_before_the_cluster, None,
     "binds ns/maxtext/sa/maxtext-ksa in the workload identity pool before any cluster exists"),
    ("dranet-label-needs-networks", "prod",
     lambda rs: _pool(rs).pop("networkConfig"), None,
     "label cloud.google.com/gke-networking-dra-driver=true without networkConfig"),
    ("dranet-label-needs-networks", "prod",
     lambda rs: _pool(rs)["nodeConfig"]["gvnic"].update(enabled=False), None,
     "additional networks need gVNIC"),
    ("gke-release-channel", "prod",
     lambda rs: _pool(rs)["management"].update(autoUpgrade=False), None,
     "management.autoUpgrade is not true"),
    ("gke-release-channel", "prod",
     lambda rs: _cluster(rs).update(releaseChannel={"channel": "UNSPECIFIED"}), None,
     "releaseChannel.channel is UNSPECIFIED"),
    ("gke-no-public-control-plane", "prod",
     lambda rs: _cluster(rs).update(controlPlaneEndpointsConfig={"ipEndpointsConfig": {"enabled": True}},
                                    privateClusterConfig={"enablePrivateNodes": True}), None,
     "the control plane's public IP endpoint is on"),
    ("gke-private-nodes", "prod", lambda rs: _cluster(rs).pop("privateClusterConfig"), None,
     "privateClusterConfig.enablePrivateNodes is not true"),
    ("gke-shielded-nodes", "prod", lambda rs: _cluster(rs).update(enableShieldedNodes=False), None,
     "enableShieldedNodes is false"),
    ("dcn-network-mtu", "prod",
     lambda rs: _find(rs, "gcp:compute/network:Network", "maxtext-tpu-net-1").props.update(
         mtu=1460.0), None,
     "network maxtext-tpu-net-1 carries TPU DCN traffic with MTU 1460; it must be 8896"),
    ("subnets-no-overlap", "prod",
     lambda rs: _find(rs, "gcp:compute/subnetwork:Subnetwork", "tpu-subnet-2").props.update(
         ipCidrRange="10.50.128.0/17"), None,
     "subnet tpu-subnet-1 10.50.0.0/16 overlaps subnet tpu-subnet-2 10.50.128.0/17"),
    ("subnets-no-overlap", "prod",
     lambda rs: _cluster(rs).update(ipAllocationPolicy={"clusterIpv4CidrBlock": "10.48.0.0/14"}),
     None, "overlaps subnet tpu-subnet-1 10.50.0.0/16"),
    ("subnets-no-overlap", "dev",
     lambda rs: _cluster(rs).update(ipAllocationPolicy={}), None,
     "leaves ipAllocationPolicy.clusterIpv4CidrBlock and servicesIpv4CidrBlock to GKE"),
    ("subnets-no-overlap", "prod", lambda rs: None,
     {"subnets-no-overlap": {"reservedRanges": ["10.60.0.0/20"]}},
     "reserved range 10.60.0.0/20 overlaps subnet tpu-subnet-2 10.60.0.0/16"),
    ("ray-worker-hosts-match-topology", "prod",
     lambda rs: _worker_group(_raycluster(rs)).update(numOfHosts=2.0), None,
     "numOfHosts is 2, topology 4x4 with 4 chips per host has 4 host(s)"),
    ("ray-worker-tpu-request", "prod",
     lambda rs: _worker(_raycluster(rs))["resources"]["limits"].update({"google.com/tpu": "8"}),
     None, "google.com/tpu request 4 != limit 8"),
    ("ray-worker-tpu-request", "prod",
     lambda rs: [_worker(_raycluster(rs))["resources"][k].update({"google.com/tpu": "2"})
                 for k in ("requests", "limits")], None,
     "google.com/tpu is 2, a host of tpu-v6e-slice 4x4 has 4 chips"),
    ("ray-worker-selects-node-pool", "prod",
     lambda rs: _worker_group(_raycluster(rs))["template"]["spec"]["nodeSelector"].update(
         {tpu.TOPOLOGY_LABEL: "4x8"}), None,
     "selects tpu-v6e-slice 4x8 but no node pool provides it"),
    ("ray-worker-replicas-fit", "prod",
     lambda rs: _worker_group(_raycluster(rs)).update(replicas=3.0), None,
     "replicas is 3 but only 2 v6e-16 (4x4) slice node pool(s) exist"),
    ("ray-worker-replicas-fit", "dev",
     lambda rs: _worker_group(_raycluster(rs)).update(maxReplicas=2.0), None,
     "maxReplicas is 2 but only 1 v6e-8 (2x4) slice node pool(s) exist"),
    ("ray-netdev-claims", "prod",
     lambda rs: _find(rs, "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate").props["spec"][
         "spec"]["devices"]["requests"][0]["exactly"].update(count=1), None,
     "claims 1 netdev.google.com device(s), its node pools have 2 secondary network(s)"),
    ("ray-netdev-claims", "prod",
     lambda rs: _worker(_raycluster(rs))["resources"].pop("claims"), None,
     "resources.claims lacks ['netdev']"),
    ("rayjob-worker-count", "prod-8b",
     lambda rs: _set_arg(_job(rs, "llama3-8b-multislice"), "--slices", "1"), None,
     "4 workers (1 slice(s)) but worker group tpu-group brings up 2 x 4 = 8"),
    ("rayjob-worker-count", "prod-70b",
     lambda rs: _set_arg(_job(rs, "llama3-70b-multislice"), "--hosts-per-slice", "2"), None,
     "--hosts-per-slice is 2, worker group tpu-group (v6e-16) needs 4"),
    ("rayjob-elastic-range", "prod-elastic",
     lambda rs: _set_arg(_job(rs, "llama3-8b-elastic"), "--max-slices", "3"), None,
     "--max-slices is 3 but only 2 v6e-16 slice(s) are available"),
    ("rayjob-elastic-range", "prod-elastic",
     lambda rs: _set_arg(_job(rs, "llama3-8b-elastic"), "--min-slices", "0"), None,
     "--min-slices is 0, must be at least 1"),
    ("rayjob-maxtext-mesh", "prod-8b",
     lambda rs: _set_arg(_job(rs, "llama3-8b-multislice"), "ici_tensor_parallelism", "2"), None,
     "ICI mesh must tile the 16 chips of a v6e-16 slice"),
    ("rayjob-maxtext-mesh", "prod-70b",
     lambda rs: _set_arg(_job(rs, "llama3-70b-multislice"), "dcn_fsdp_parallelism", "4"), None,
     "DCN mesh must tile 2 slice(s)"),
    ("rayjob-spot-elastic", "dev",
     lambda rs: _set_arg(_job(rs, "llama3-8b-elastic"), "--max-failures", "1"), None,
     "runs on Spot slices with --max-failures 1: one preemption spends 2"),
    ("rayjob-spot-elastic", "dev",
     lambda rs: _set_arg(_job(rs, "llama3-8b-elastic"), "base_output_directory", "/tmp/out/"),
     None, "base_output_directory '/tmp/out/' is not on the checkpoint bucket"),
    ("rayjob-spot-elastic", "prod-8b",
     lambda rs: _pool(rs)["nodeConfig"].update(spot=True), None,
     "RayJob llama3-8b-multislice runs on Spot v6e-16 slices but is multislice"),
    ("rayjob-bounded", "prod-8b",
     lambda rs: _job(rs, "llama3-8b-multislice").props["spec"].pop("activeDeadlineSeconds"),
     None, "RayJob llama3-8b-multislice: no activeDeadlineSeconds"),
    ("rayjob-bounded", "prod-elastic", _dedicated_job, None,
     "brings its own cluster but shutdownAfterJobFinishes is not true"),
    ("gke-dranet-version", "prod",
     lambda rs: _cluster(rs).update(minMasterVersion="1.33.5-gke.1000"), None,
     f"minMasterVersion 1.33.5-gke.1000 is below {stack_spec.DRANET_MIN_VERSION}"),
    ("gke-dranet-version", "prod", lambda rs: _cluster(rs).pop("minMasterVersion"), None,
     "DRANET is used but minMasterVersion is not pinned"),
    ("gke-ray-operator-and-gcsfuse", "prod",
     lambda rs: _cluster(rs)["addonsConfig"]["rayOperatorConfigs"][0].update(enabled=False),
     None, "the Ray operator add-on is off"),
    ("gke-ray-operator-and-gcsfuse", "dev",
     lambda rs: _cluster(rs)["addonsConfig"].pop("gcsFuseCsiDriverConfig"), None,
     "the GCS FUSE CSI driver is off"),
    ("gke-workload-identity", "prod", lambda rs: _cluster(rs).pop("workloadIdentityConfig"),
     None, "workloadIdentityConfig.workloadPool is unset, must be my-tpu-project.svc.id.goog"),
    ("gke-workload-identity", "prod",
     lambda rs: _pool(rs)["nodeConfig"]["workloadMetadataConfig"].update(mode="GCE_METADATA"),
     None, "workloadMetadataConfig.mode is GCE_METADATA, must be GKE_METADATA"),
    ("bucket-uniform-access", "prod",
     lambda rs: _bucket(rs).update(uniformBucketLevelAccess=False), None,
     "uniformBucketLevelAccess is not true"),
    ("bucket-public-access-prevention", "dev",
     lambda rs: _bucket(rs).update(publicAccessPrevention="inherited"), None,
     "publicAccessPrevention is inherited, must be enforced"),
    ("bucket-protected-in-prod", "prod", lambda rs: _bucket(rs).update(forceDestroy=True), None,
     "forceDestroy is true in prod"),
    ("bucket-protected-in-prod", "prod",
     lambda rs: _bucket(rs).update(deletionPolicy="DELETE"), None,
     "deletionPolicy is DELETE, must be PREVENT in prod"),
    ("iam-bucket-scoped", "prod", _project_storage_admin, None,
     "project IAM grants roles/storage.admin"),
    ("iam-bucket-scoped", "prod", lambda rs: _policy_grant(rs, "roles/storage.objectUser", "allUsers"), None,
     "IAM grants roles/storage.objectUser to allUsers: public"),
    ("iam-bucket-scoped", "dev", lambda rs: _policy_grant(rs, "roles/storage.admin", "user:someone@example.com"),
     None, "IAM grants roles/storage.admin to user:someone@example.com: more than reading and writing"),
    # GCS's convenience value a new bucket holds: its setIamPolicy would let project editors rewrite the bucket's IAM
    # (the program drops it, infra/iam_policy.py; the escalation check refuses it too).
    ("iam-bucket-scoped", "prod",
     lambda rs: _policy_grant(rs, "roles/storage.legacyBucketOwner", "projectEditor:my-tpu-project"), None,
     "IAM grants roles/storage.legacyBucketOwner to projectEditor:my-tpu-project"),
    ("no-service-account-keys", "prod", _key_resource, None,
     "service-account key for maxtext-tpu-nodes"),
    ("ray-head-not-public", "prod",
     lambda rs: _cluster_spec(_raycluster(rs))["headGroupSpec"].update(serviceType="LoadBalancer"),
     None, "serviceType LoadBalancer exposes the Ray dashboard"),
    ("ray-head-not-public", "dev",
     lambda rs: _cluster_spec(_raycluster(rs))["headGroupSpec"].update(
         headService={"spec": {"externalIPs": ["203.0.113.7"]}}), None,
     "externalIPs ['203.0.113.7'] expose the Ray head"),
    ("no-mutable-images-in-prod", "prod",
     lambda rs: _head(_raycluster(rs)).update(image="rayproject/ray:nightly-py312-tpu"), None,
     "image rayproject/ray:nightly-py312-tpu is mutable"),
    ("no-mutable-images-in-prod", "prod",
     lambda rs: _worker(_raycluster(rs)).update(image="rayproject/ray"), None,
     "image rayproject/ray is mutable"),
    ("privileged-only-for-tpu", "prod",
     lambda rs: _dedicated(rs).props["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][
         0].update(securityContext={"privileged": True}), None,
     "container ray-head is privileged but requests no google.com/tpu"),
    ("ray-head-network-policy", "prod",
     lambda rs: rs.__setitem__(slice(None), [r for r in rs if not r.type.endswith(":NetworkPolicy")]), None,
     "no NetworkPolicy in namespace maxtext restricts ingress to its head"),
    ("ray-head-network-policy", "dev",
     lambda rs: rs.__setitem__(slice(None), [r for r in rs if not r.type.endswith(":NetworkPolicy")]), None,
     "no NetworkPolicy in namespace maxtext restricts ingress to its head"),
    # Only the workers' NetworkPolicies removed (the heads' kept): mandatory in dev too, which has no Ray token auth.
    *(("ray-worker-network-policy", stack,
         lambda rs: rs.__setitem__(slice(None), [r for r in rs if not (
             r.type.endswith(":NetworkPolicy") and r.props["metadata"]["name"].endswith("-worker-ingress"))]), None,
         "no NetworkPolicy in namespace maxtext restricts ingress to its worker group") for stack in ("prod", "dev")),
    ("ray-pods-no-token-automount", "prod",
     lambda rs: _dedicated(rs).props["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"].pop(
         "automountServiceAccountToken"), None,
     "automountServiceAccountToken is not false"),
    ("ray-pods-no-token-automount", "dev",
     lambda rs: _worker_group(_any_cluster(rs))["template"]["spec"].update(automountServiceAccountToken=True), None,
     "automountServiceAccountToken is not false"),
    ("ray-auth-version", "prod",
     lambda rs: _dedicated(rs).props["spec"]["rayClusterSpec"].update(authOptions={"mode": "token"},
                                                                      rayVersion="2.51.0"), None,
     "KubeRay refuses it below 2.52.0"),
    ("allowed-locations", "prod", lambda rs: None,
     {"allowed-locations": {"allowedRegions": ["europe-west4"]}},
     "location us-east5-b is outside the allowed regions ['europe-west4']"),
    ("allowed-locations", "prod", lambda rs: None,
     {"allowed-locations": {"allowedRegions": ["us-east5"], "allowedZones": ["us-east5-a"]}},
     "zone us-east5-b is outside the allowed zones ['us-east5-a']"),
    ("required-labels", "prod",
     lambda rs: _find(rs, "kubernetes:core/v1:ConfigMap").props["metadata"].pop("labels"), None,
     "lacks ['app.kubernetes.io/part-of']"),
    ("compute-class-fits-jobs", "prod",
     lambda rs: _find(rs, COMPUTE_CLASS).props["spec"]["priorities"][0]["tpu"].update(topology="4x8"), None,
     "priority 1 (on-demand) provisions v6e-32 4x8"),
    ("compute-class-fits-jobs", "prod-fallbacks",
     lambda rs: _find(rs, COMPUTE_CLASS).props["spec"]["priorities"][2]["tpu"].update(topology="4x8"), None,
     "priority 3 (on-demand) provisions v6e-32 4x8"),
    ("compute-class-has-fallback", "prod-fallbacks",
     lambda rs: _find(rs, COMPUTE_CLASS).props["spec"]["priorities"].__delitem__(slice(1, None)), None,
     "ComputeClass tpu-group-class has 1 capacity option(s) (reservation v6e-res)"),
    # prod's one option passes only while its pools hold whole slices: one that scales from zero has nothing
    # to fall back to.
    ("compute-class-has-fallback", "prod",
     lambda rs: _pool(rs).update(autoscaling={"minNodeCount": 0.0, "maxNodeCount": 4.0, "locationPolicy": "ANY"}),
     None, "ComputeClass tpu-group-class has 1 capacity option(s) (on-demand)"),
    ("compute-class-pool-tainted", "prod",
     lambda rs: _pool(rs)["nodeConfig"].update(taints=[]), None,
     "labelled cloud.google.com/compute-class=tpu-group-class without the taint"),
    ("required-labels", "prod", lambda rs: None, {"required-labels": {"gcpLabels": ["team"]}},
     "Bucket my-tpu-project-maxtext-checkpoints labels lacks ['team']"),
    ("kueue-rayjob-queue", "prod",
     lambda rs: _job(rs, "llama3-8b-elastic").props["metadata"]["labels"].pop(kube.KUEUE_QUEUE_LABEL), None,
     "RayJob llama3-8b-elastic brings its own cluster but names no LocalQueue"),
    ("kueue-rayjob-lifecycle", "prod",
     lambda rs: _job(rs, "llama3-70b-multislice").props["spec"].update(suspend=False), None,
     "RayJob llama3-70b-multislice is queued by Kueue but sets spec.suspend"),
    ("kueue-tpu-quota-matches-slices", "prod",
     lambda rs: _find(rs, KUEUE_CLUSTER_QUEUE).props["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]
     .update(nominalQuota="64"), None,
     "TPU quota for tpu-v6e-slice 4x4 is 64 chips, the slices provision 32"),
]



def _kueue_image(deployments, image: str) -> None:
    """Kueue's controller (workloads/kueue_install.py) on another image."""
    (d,) = [d for d in deployments if d.props["metadata"]["name"] == "kueue-controller-manager"]
    d.props["spec"]["template"]["spec"]["containers"][0]["image"] = image


def _on(rs, cluster, kind):
    """The Kubernetes objects of ``kind`` a multi-region stack applies to ``cluster``."""
    return [r for r in rs if r.provider == f"{cluster}-k8s" and r.type.endswith(f":{kind}")]


def _tpu_quota(cq, chips):
    for g in cq.props["spec"]["resourceGroups"]:
        for f in g["flavors"]:
            for res in f["resources"]:
                if res["name"] == kube.TPU_RESOURCE:
                    res["nominalQuota"] = chips


FAILING += [
    ("multikueue-same-kueue", "multi",
     lambda rs: _kueue_image(_on(rs, "maxtext-east1", "Deployment"), "registry.k8s.io/kueue/kueue:v0.20.0"), None,
     "'maxtext-east1': '0.20.0'"),
    ("gke-version-skew-across-clusters", "multi",
     lambda rs: _find(rs, CLUSTER, "tpu-manager").props.update(minMasterVersion="1.33.5-gke.1080000"), None,
     "cluster maxtext-east5 runs GKE 1.35, more than 1 minor version above tpu-manager"),
    ("one-checkpoint-location", "multi",
     lambda rs: _policy_bucket(rs, "elsewhere", "tpu-manager-checkpoints-iam-policy"), None,
     "binds ['elsewhere'], not the checkpoint bucket"),
    ("queued-job-placeable", "multi",
     lambda rs: rs.__setitem__(slice(None), [r for r in rs if r.props.get("name") != "v6e-16-1"]), None,
     "RayJob llama3-70b-multislice needs 2 x tpu-v6e-slice 4x4 and no worker"),
    ("multikueue-manager-quota", "multi",
     lambda rs: _tpu_quota(_on(rs, "tpu-manager", "ClusterQueue")[0], "32"), None,
     "differs for {'tpu-group-flavor/google.com/tpu': ('32', '64')}"),
    ("multikueue-consistent", "multi",
     lambda rs: rs.remove(_on(rs, "maxtext-east5", "LocalQueue")[0]), None,
     "worker maxtext-east5 lacks the manager's LocalQueues"),
]


def test_every_rule_has_a_failing_case():
    assert {c[0] for c in FAILING} == {r.name for r in registry.RULES}


STACKS = ["prod", "dev", "prod-8b", "prod-70b", "prod-elastic", "prod-fallbacks", "multi"]


@pytest.fixture(scope="module")
def passing_messages(renderings) -> Callable[[str], dict[str, list[str]]]:
    """Each stack's unchanged rendering evaluated once (every rule, as ``_messages`` runs them), its messages by
    rule: the 7 stacks x every rule cases read it instead of re-evaluating every rule per case."""
    by_stack: dict[str, dict[str, list[str]]] = {}

    def messages(stack: str) -> dict[str, list[str]]:
        if stack not in by_stack:
            by_rule: dict[str, list[str]] = {r.name: [] for r in registry.RULES}
            for v in offline.evaluate_resources(_resources(renderings, stack), _env(renderings, stack)):
                by_rule.setdefault(v.rule, []).append(v.message)
            by_stack[stack] = by_rule
        return by_stack[stack]

    return messages


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("rule", [r.name for r in registry.RULES])
def test_rule_passes_rendering(passing_messages, stack, rule):
    assert passing_messages(stack)[rule] == []


@pytest.mark.parametrize(
    "rule,stack,mutate,config,expected", FAILING,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(FAILING)],
)
def test_rule_fails_on_one_changed_field(renderings, rule, stack, mutate, config, expected):
    resources = _resources(renderings, stack)
    mutate(resources)
    messages = _messages(resources, _env(renderings, stack), rule, config)
    assert any(expected in m for m in messages), messages


@pytest.mark.parametrize("stack", STACKS)
def test_whole_rendering_has_no_mandatory_violation(renderings, stack):
    found = offline.evaluate(renderings[stack])
    assert [v for v in found if v.mandatory] == []


def test_dev_may_use_nightly_and_a_deletable_bucket(renderings):
    """The prod-only rules read the stack's environment: dev's seed image and bucket pass."""
    dev = _resources(renderings, "dev")
    assert _head(_raycluster(dev))["image"].split(":")[1].startswith("nightly")
    assert _bucket(dev)["deletionPolicy"] == "DELETE"
    for rule in ("no-mutable-images-in-prod", "bucket-protected-in-prod"):
        assert _messages(dev, "dev", rule) == []
        assert _messages(dev, "prod", rule) != []


def test_config_enforcement_levels_and_unknown_rules(renderings):
    resources = _resources(renderings, "prod")
    _bucket(resources).update(uniformBucketLevelAccess=False)
    advisory = {"bucket-uniform-access": "advisory"}
    found = offline.evaluate_resources(resources, "prod", advisory)
    assert [v.enforcement for v in found if v.rule == "bucket-uniform-access"] == ["advisory"]
    disabled = {"bucket-uniform-access": {"enforcementLevel": "disabled"}}
    assert not [v for v in offline.evaluate_resources(resources, "prod", disabled)
                if v.rule == "bucket-uniform-access"]
    with pytest.raises(ValueError, match="unknown rules \\['no-such-rule'\\]"):
        offline.evaluate_resources(resources, "prod", {"no-such-rule": "advisory"})


def test_entrypoint_parsing_reads_trainer_flags_and_maxtext_keys(renderings):
    job = _job(_resources(renderings, "prod-70b"), "llama3-70b-multislice")
    call = parse_entrypoint(job.props["spec"]["entrypoint"])
    shape = renderings["prod"].spec.groups[0].shape
    assert call.int_flag("--slices") * call.int_flag("--hosts-per-slice") == shape.workers(2)
    assert call.mesh("ici") == {"tensor": 4, "fsdp": 4}
    assert call.mesh("dcn") == {"fsdp": 2, "data": 1}
    assert parse_entrypoint("python train.py --local --mode=elastic -- base.yml steps=5") \
        .flags == {"--local": "true", "--mode": "elastic"}
    assert parse_entrypoint("ray job submit -- python x.py") is None


def test_preview_report_prints_fix_and_writes_policy_json(renderings, tmp_path):
    rendering = copy.copy(renderings["prod"])
    rendering.resources = copy.deepcopy(renderings["prod"].resources)
    pool = next(r for r in rendering.resources if r.type == NODE_POOL and r.name == "v6e-16-0")
    pool.inputs["nodeCount"] = 3.0  # prod's pools hold the whole slice (the seed's)
    out = io.StringIO()
    code = report.check(rendering, tmp_path, out)
    text = out.getvalue()
    assert code == 1
    assert "[mandatory] tpu-node-count-matches-hosts  (gcp:container/nodePool:NodePool v6e-16-0)" \
        in text
    assert f"fix: {registry.rule('tpu-node-count-matches-hosts').remediation}" in text
    # On the stack file's line of the slice the pool was built from.
    line = (FIXTURE_STACKS / "Pulumi.prod.yaml").read_text().splitlines().index("    - name: v6e-16-0") + 1
    assert f"Pulumi.prod.yaml:{line}: tpu-multislice:slices[0]: [mandatory] tpu-node-count-matches-hosts" \
        in text
    doc = json.loads((tmp_path / report.POLICY_FILE).read_text())
    assert doc["passed"] is False and doc["mandatory"] == 1
    assert doc["violations"][0]["urn"] == pool.urn
    clean = io.StringIO()
    assert report.check(renderings["prod"], tmp_path, clean) == 0
    assert json.loads((tmp_path / report.POLICY_FILE).read_text())["passed"] is True


# --------------------------------------------------------------------------- the Pulumi pack


@pytest.fixture
def registered(monkeypatch) -> dict[str, Any]:
    """Run policies/__main__.py with PolicyPack replaced by a recorder.

    The real PolicyPack starts the analyzer's gRPC server and blocks forever (that is how
    Pulumi talks to it), so the test records the constructor's arguments instead.
    """
    calls: list[dict[str, Any]] = []

    class Recorder:
        def __init__(self, **kwargs: Any) -> None:
            calls.append(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", Recorder)
    runpy.run_path(str(ROOT / "policies" / "__main__.py"), run_name="__main__")
    assert len(calls) == 1
    return calls[0]


def test_pack_registers_every_rule_with_its_level_kind_and_remediation(registered):
    policies = {p.name: p for p in registered["policies"]}
    assert list(policies) == [r.name for r in registry.RULES]
    for rule in registry.RULES:
        p = policies[rule.name]
        kind = (pulumi_policy.ResourceValidationPolicy if rule.kind == registry.RESOURCE
                else pulumi_policy.StackValidationPolicy)
        assert isinstance(p, kind)
        assert p.enforcement_level == pulumi_policy.EnforcementLevel(rule.enforcement)
        assert p.remediation_steps == rule.remediation and p.description == rule.description
        assert (p.config_schema.properties if p.config_schema else {}) == dict(rule.config)
    assert registered["name"] == "tpu-multislice-policies"


def _report() -> tuple[list[tuple[str, str | None]], Callable[..., None]]:
    seen: list[tuple[str, str | None]] = []
    return seen, lambda message, urn=None: seen.append((message, urn))


def test_pack_policies_validate_engine_props(registered, renderings, monkeypatch):
    """The CrossGuard wrappers on props as pulumi_policy hands them (its read-only proxy),
    with the environment from the stack config Pulumi passes in PULUMI_CONFIG."""
    policies = {p.name: p for p in registered["policies"]}
    token = runtime_config.CONFIG.set({})  # as in the analyzer process: only PULUMI_CONFIG
    try:
        resources = _resources(renderings, "dev")
        bucket = _find(resources, BUCKET)
        opts = pulumi_policy.PolicyResourceOptions(False, [], None, [], None, [])

        def validate(name: str, res: Res, env: str) -> list[tuple[str, str | None]]:
            monkeypatch.setenv("PULUMI_CONFIG", json.dumps({registry.ENVIRONMENT_KEY: env}))
            args = pulumi_policy.ResourceValidationArgs(
                res.type, unknown_checking_proxy(copy.deepcopy(dict(res.props))), res.urn,
                res.name, opts, None, {})
            seen, report_violation = _report()
            policies[name].validate(args, report_violation)
            return seen

        assert validate("bucket-protected-in-prod", bucket, "dev") == []
        prod_messages = [m for m, _ in validate("bucket-protected-in-prod", bucket, "prod")]
        assert any("deletionPolicy is DELETE, must be PREVENT in prod" in m
                   for m in prod_messages), prod_messages

        pool = _find(resources, NODE_POOL, "v6e-8-0-spot")
        pool.props["autoscaling"]["maxNodeCount"] = 1.0  # dev's pools have capacity fallbacks: from 0
        assert "autoscaling maximum is 1" in validate("tpu-node-count-matches-hosts", pool, "dev")[0][0]

        _worker_group(_raycluster(resources))["replicas"] = 2.0
        stack_res = [pulumi_policy.PolicyResource(
            r.type, unknown_checking_proxy(copy.deepcopy(dict(r.props))), r.urn, r.name, opts,
            None, None, [], {}) for r in resources]
        seen, report_violation = _report()
        policies["ray-worker-replicas-fit"].validate(
            pulumi_policy.StackValidationArgs(stack_res, {}), report_violation)
        assert seen == [(f"{_raycluster(resources).props['metadata']['name']} worker group "
                         f"{_worker_group(_raycluster(resources))['groupName']}: replicas is 2 "
                         "but only 1 v6e-8 (2x4) slice node pool(s) exist; the extra replicas "
                         "never schedule", _raycluster(resources).urn)]
    finally:
        runtime_config.CONFIG.reset(token)


def test_stack_policies_run_on_preview_outputs_with_unknowns(registered, renderings):
    """In a real first preview a stack policy sees planned outputs: the provider-computed
    ones are unknown (pulumi_policy's sentinels). The rules must still run, not be skipped."""
    from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_OBJECT_VALUE, UNKNOWN_STRING_VALUE

    policies = {p.name: p for p in registered["policies"]}
    opts = pulumi_policy.PolicyResourceOptions(False, [], None, [], None, [])
    resources = _resources(renderings, "prod")
    for r in resources:
        r.props.setdefault("id", UNKNOWN_STRING_VALUE)
        if r.type == "gcp:compute/subnetwork:Subnetwork":
            r.props["secondaryIpRanges"] = UNKNOWN_ARRAY_VALUE
        elif r.type == CLUSTER:
            r.props["clusterIpv4Cidr"] = UNKNOWN_STRING_VALUE
        elif r.type == NODE_POOL and "networkConfig" not in r.props:
            r.props["networkConfig"] = UNKNOWN_OBJECT_VALUE
    # A DCN subnet; its network's firewall admits the subnet's new range (only subnets-no-overlap is to fire).
    walls = [r for r in resources if r.type == "gcp:compute/firewall:Firewall"]
    subnet = next(r for r in resources if r.type == "gcp:compute/subnetwork:Subnetwork"
                  and any(w.props["sourceRanges"] == [r.props["ipCidrRange"]] for w in walls))
    firewall = next(w for w in walls if w.props["sourceRanges"] == [subnet.props["ipCidrRange"]])
    subnet.props["ipCidrRange"] = "10.60.128.0/17"  # now overlaps tpu-subnet-2
    firewall.props["sourceRanges"] = ["10.60.128.0/17"]

    def run(name: str) -> list[tuple[str, str | None]]:
        stack_res = [pulumi_policy.PolicyResource(
            r.type, unknown_checking_proxy(copy.deepcopy(dict(r.props))), r.urn, r.name, opts,
            None, None, [], {}) for r in resources]
        # What each waits for, as the engine hands them (the IAM binding waits for the cluster).
        by_urn = {r.urn: r for r in stack_res}
        for r, res in zip(resources, stack_res, strict=True):
            res.dependencies = [by_urn[u] for u in r.dependencies if u in by_urn]
        seen, report_violation = _report()
        policies[name].validate(pulumi_policy.StackValidationArgs(stack_res, {}), report_violation)
        return seen

    assert any("overlaps" in m for m, _ in run("subnets-no-overlap"))
    for rule in registry.RULES:
        if rule.kind == registry.STACK and rule.name != "subnets-no-overlap":
            assert run(rule.name) == [], rule.name


def test_pack_files_declare_python_runtime_and_requirements():
    import yaml

    doc = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert doc["runtime"]["name"] == "python"
    reqs = (ROOT / "policies" / "requirements.txt").read_text().split()
    assert f"pulumi-policy=={pulumi_policy.version.VERSION}" in reqs


def test_slicectl_preview_runs_the_pack_and_fails_on_a_mandatory_violation(tmp_path, capsys):
    """The CLI path: the same pack config file as ``pulumi --policy-pack-config``."""
    from slicectl import cli

    config = tmp_path / "policy-config.json"
    config.write_text(json.dumps({"allowed-locations": {"allowedRegions": ["europe-west4"]}}))
    out = tmp_path / "out"
    code = cli.main(["preview", "--stack", "prod", "--out", str(out), "--policy-config", str(config)])
    text = capsys.readouterr().out
    assert code == 1
    assert "[mandatory] allowed-locations" in text and "europe-west4" in text
    doc = json.loads((out / report.POLICY_FILE).read_text())
    assert doc["passed"] is False and {v["rule"] for v in doc["violations"]} == {"allowed-locations"}
    assert cli.main(["preview", "--stack", "prod", "--out", str(out), "--format", "markdown"]) == 0
    assert f"All {len(registry.RULES)} rules pass." in capsys.readouterr().out


def test_unpinned_cluster_ranges_can_be_allowed_by_pack_config(renderings):
    resources = _resources(renderings, "prod")
    _cluster(resources)["ipAllocationPolicy"] = {}
    assert _messages(resources, "prod", "subnets-no-overlap")
    allow = {"subnets-no-overlap": {"requirePinnedClusterRanges": False}}
    assert _messages(resources, "prod", "subnets-no-overlap", allow) == []

