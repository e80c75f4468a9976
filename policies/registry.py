"""Every rule of the pack, once: name, description, enforcement, kind, remediation, config.

``policies/__main__.py`` wraps these in CrossGuard policies and ``policies/offline.py``
runs them over the offline rendering; neither lists a rule of its own.

Enforcement: ``mandatory`` for anything that would fail on GKE, waste TPU hours or
expose data; ``advisory`` for style and operations hygiene.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stackspec import spec as stack_spec

from .rules import cluster, gke, queueing, regions, safety, slice_shape, stack
from .rules.common import BUCKET, CLUSTER, COMPUTE_CLASS, NODE_POOL, SUBNETWORK

MANDATORY = "mandatory"
ADVISORY = "advisory"
RESOURCE = "resource"
STACK = "stack"

# The stack config key that tells a rule it is looking at production (see Context).
ENVIRONMENT_KEY = f"{stack_spec.PROJECT}:environment"
_NS = stack_spec.PROJECT


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    enforcement: str  # mandatory | advisory
    kind: str  # resource | stack
    check: Callable[..., Any]
    remediation: str
    # JSON-schema properties of what an organisation may tune, each with its default.
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The level in a dev stack when it differs (a prod-mandatory rule that only warns in dev).
    dev_enforcement: str | None = None
    # Set when the rule needs only the spec (a valid stack file can trip it): ``slicectl lint`` runs it
    # too. Resource type ("*": any) -> the spec field it judges, under the resource's own spec entry
    # (``capacity`` of a node pool's slice) or a whole key (``gcp:region``); see policies/locate.py.
    spec: Mapping[str, str] | None = None

    @property
    def spec_only(self) -> bool:
        return self.spec is not None

    def level(self, environment: str) -> str:
        """The rule's level for a stack's environment (anything but dev is held to prod's)."""
        return self.dev_enforcement if environment == "dev" and self.dev_enforcement else self.enforcement

    def settings(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Defaults from the schema, overridden by the pack config given for this rule."""
        out = {k: v.get("default") for k, v in self.config.items() if "default" in v}
        out.update({k: v for k, v in (overrides or {}).items() if k != "enforcementLevel"})
        return out


def _r(name, description, enforcement, kind, check, remediation, config=None, dev=None, spec=None) -> Rule:
    return Rule(name, description, enforcement, kind, check, remediation, config or {}, dev, spec)


_STRINGS = {"type": "array", "items": {"type": "string"}}


RULES: tuple[Rule, ...] = (
    # ---------------------------------------------------------------- slice shape: node pools
    _r("tpu-topology-valid", "A TPU node pool's tpuTopology is offered by its TPU generation.",
       MANDATORY, RESOURCE, slice_shape.node_pool_topology,
       "Set the slice's topology in stacks/Pulumi.<stack>.yaml to one listed in the message; "
       "the node pool takes it from stackspec.tpu."),
    _r("tpu-machine-type-fits", "A TPU node pool's machine type matches its generation and "
       "the topology's chips per host.",
       MANDATORY, RESOURCE, slice_shape.node_pool_machine_type,
       "Use one of the machine types listed for the topology (or drop machineType when only "
       "one fits)."),
    _r("tpu-node-count-matches-hosts", "A TPU slice node pool has exactly as many nodes as "
       "its topology has hosts.",
       MANDATORY, RESOURCE, slice_shape.node_pool_node_count,
       "Derive nodeCount from the slice model (SliceShape.hosts), never type it by hand."),
    _r("tpu-compact-placement", "Multi-host TPU node pools use a COMPACT placement policy "
       "carrying tpuTopology.",
       MANDATORY, RESOURCE, slice_shape.node_pool_compact_placement,
       "Set placementPolicy {type: COMPACT, tpuTopology: <topology>} on multi-host slice pools."),
    _r("dranet-label-needs-networks", "The DRANET node label only with additional node "
       "networks present, and gVNIC on.",
       MANDATORY, RESOURCE, slice_shape.node_pool_dranet,
       "Attach the secondary networks (networkConfig.additionalNodeNetworkConfigs), label the "
       "pool cloud.google.com/gke-networking-dra-driver=true and enable gVNIC together."),
    # ---------------------------------------------------------------- capacity fallbacks (ComputeClass)
    _r("compute-class-fits-jobs", "Every capacity option of a worker group's ComputeClass provisions the "
       "group's slice shape, and every RayJob's MaxText mesh fits each option.",
       MANDATORY, STACK, slice_shape.compute_class_fits_jobs,
       "List only options of the slice's own generation, topology and machine type under slices[*].capacity; "
       "a fallback of another shape needs its own worker group and jobs meshed for it."),
    _r("compute-class-has-fallback", "A TPU worker group's ComputeClass lists at least "
       f"{slice_shape.MIN_FALLBACK_OPTIONS} capacity options (mandatory in prod, a warning in dev).",
       MANDATORY, STACK, slice_shape.compute_class_fallbacks,
       "Add a fallback under slices[*].capacity, e.g. [{type: flex-start}, {type: on-demand}] or "
       "[{type: reservation, reservation: NAME}, {type: on-demand}].", dev=ADVISORY,
       spec={COMPUTE_CLASS: "capacity"}),
    _r("compute-class-pool-tainted", "A node pool labelled for a ComputeClass carries the class's NoSchedule "
       "taint.",
       MANDATORY, RESOURCE, slice_shape.node_pool_compute_class,
       "Taint the pool cloud.google.com/compute-class=<class>:NoSchedule beside its label "
       "(infra/slice_pool.py does)."),
    # ---------------------------------------------------------------- networks
    _r("dcn-network-mtu", "Networks attached to TPU node pools as extra NICs use MTU 8896.",
       MANDATORY, STACK, stack.dcn_network_mtu,
       f"Set network.mtu: {stack_spec.DCN_MTU} in the stack file (the DCN needs jumbo frames).",
       spec={"*": f"{_NS}:network.mtu"}),
    _r("subnets-no-overlap", "Subnet ranges overlap neither each other nor the cluster's "
       "(or reserved) ranges.",
       MANDATORY, STACK, stack.dcn_subnets_no_overlap,
       "Pick disjoint private CIDRs for network.secondary[*].cidr, and pin the cluster's pod and "
       "service ranges (cluster.podCidr, cluster.serviceCidr) away from them.",
       {"reservedRanges": {**_STRINGS, "default": [],
                           "description": "CIDRs already used elsewhere (e.g. the cluster VPC)."},
        "requirePinnedClusterRanges": {"type": "boolean", "default": True,
                                       "description": "With DRANET, the cluster's pod and service "
                                                      "ranges must be pinned, not left to GKE."}},
       spec={SUBNETWORK: "cidr", CLUSTER: "podCidr"}),
    # ---------------------------------------------------------------- Ray worker groups
    _r("ray-worker-hosts-match-topology", "A Ray TPU worker group's numOfHosts equals the "
       "hosts of the topology in its node selector.",
       MANDATORY, RESOURCE, slice_shape.worker_hosts,
       "Render numOfHosts from SliceShape.hosts of the group's slice shape."),
    _r("ray-worker-tpu-request", "google.com/tpu request = limit = chips per host of the "
       "selected topology.",
       MANDATORY, RESOURCE, slice_shape.worker_tpu_request,
       "Request and limit google.com/tpu with SliceShape.chips_per_host."),
    _r("ray-worker-selects-node-pool", "A TPU worker group's accelerator/topology selectors "
       "match an existing slice node pool.",
       MANDATORY, STACK, stack.worker_selects_node_pool,
       "Declare a slice of that shape in the stack file, or fix the group's nodeSelector."),
    _r("ray-worker-replicas-fit", "A worker group's replicas and maxReplicas are at most the "
       "slice node pools of its shape.",
       MANDATORY, STACK, stack.worker_replicas_fit,
       "Add slices of the shape to the stack file or lower replicas/maxReplicas."),
    _r("ray-netdev-claims", "TPU worker pods claim one netdev device per secondary network.",
       MANDATORY, STACK, stack.netdev_claims,
       "Render the ResourceClaimTemplate count from the stack's secondary networks and list "
       "the claim in the worker container's resources.claims."),
    # ---------------------------------------------------------------- RayJobs
    _r("rayjob-worker-count", "A RayJob's workers (slices x hosts per slice) are what its "
       "worker group brings up, with matching shape arguments.",
       MANDATORY, STACK, stack.rayjob_worker_count,
       "Derive the trainer arguments (workloads/trainer_args.py) and the group's replicas from "
       "the same job and slice shape."),
    _r("rayjob-elastic-range", "Elastic jobs range over whole slices: 1 <= min <= max <= "
       "slices available.",
       MANDATORY, STACK, stack.rayjob_elastic_range,
       "Set jobs[*].minSlices >= 1 and maxSlices <= the slices of the job's worker group."),
    _r("rayjob-maxtext-mesh", "MaxText ICI parallelism tiles a slice's chips; DCN "
       "parallelism tiles the slice count.",
       MANDATORY, STACK, stack.rayjob_maxtext_mesh,
       "Make the product of jobs[*].ici equal chips per slice and of jobs[*].dcn the slice "
       "count (or leave one axis -1)."),
    _r("rayjob-spot-elastic", "Jobs on Spot slices are elastic, retry (max failures >= "
       f"{stack_spec.MIN_ELASTIC_MAX_FAILURES}) and checkpoint to the bucket.",
       MANDATORY, STACK, stack.rayjob_spot_elastic,
       f"Use mode: elastic with maxFailures >= {stack_spec.MIN_ELASTIC_MAX_FAILURES}, "
       "base_output_directory on the GCS FUSE "
       "bucket mount, and a checkpointPeriod shorter than steps."),
    _r("rayjob-bounded", "A RayJob has a deadline, and a job-owned cluster shuts down after "
       "the job.",
       MANDATORY, RESOURCE, safety.rayjob_bounded,
       "Set activeDeadlineSeconds, and shutdownAfterJobFinishes: true with rayClusterSpec."),
    # ---------------------------------------------------------------- queued admission (Kueue)
    _r("kueue-rayjob-queue", "Every RayJob with its own cluster names a LocalQueue (and priority class) "
       "the stack declares; a RayJob on the long-lived cluster names none.",
       MANDATORY, STACK, queueing.rayjob_names_a_queue,
       "Render the kueue.x-k8s.io/queue-name label from names.local_queue(ray.clusterName) and "
       "jobs[*].priority from the declared WorkloadPriorityClasses (workloads/kueue.py)."),
    _r("kueue-rayjob-lifecycle", "A RayJob or RayCluster Kueue manages has its own cluster, "
       "shutdownAfterJobFinishes, no in-tree autoscaling and no suspend of ours.",
       MANDATORY, STACK, queueing.queued_rayjob_lifecycle,
       "Give the job cluster: dedicated; leave spec.suspend and enableInTreeAutoscaling unset (Kueue "
       "suspends and resumes it); keep shutdownAfterJobFinishes: true."),
    _r("kueue-tpu-quota-matches-slices", "The ClusterQueue's google.com/tpu quota per slice shape is "
       "the chips the stack's slices provision.",
       MANDATORY, STACK, queueing.tpu_quota_matches_slices,
       "Derive the quota from the slices (chips per slice x slices per group, workloads/kueue.py); "
       "never type it by hand."),
    # ---------------------------------------------------------------- across regions (multi-region stacks only)
    _r("multikueue-same-kueue", "Kueue's chart is the same version on every cluster of a multi-region stack, "
       "the manager included.",
       MANDATORY, STACK, regions.same_versions,
       "Install Kueue from workloads/kueue.py's one pinned release (KUEUE_VERSION) on the manager "
       "(MultiKueueManager) and every region (KueueQueueing); upgrade them together."),
    _r("gke-version-skew-across-clusters", "The GKE versions of a multi-region stack's clusters are within "
       f"{regions.MAX_MINOR_SKEW} minor version of each other (each runs the KubeRay of its GKE version).",
       MANDATORY, STACK, regions.gke_version_skew,
       "Set manager.version and regions[*].cluster.version within one minor version; upgrade the regions "
       "one after the other.", spec={CLUSTER: "version"}),
    _r("one-checkpoint-location", "A multi-region stack has one checkpoint bucket, and every region's "
       "checkpoint identity binds it.",
       MANDATORY, STACK, regions.one_checkpoint_location,
       "Keep one tpu-multislice:storage bucket in a dual- or multi-region holding every region "
       "(infra/checkpoints.py SharedCheckpointBucket)."),
    _r("queued-job-placeable", "Every RayJob queued on the manager fits at least one region: its slice shapes "
       "and counts.",
       MANDATORY, STACK, regions.queued_jobs_placeable,
       "Add slices of the job's shape to a region, or give the job fewer slices (jobs[*].slices)."),
    _r("multikueue-manager-quota", "The manager's MultiKueue ClusterQueue holds exactly the workers' total quota, "
       "flavor by flavor.",
       MANDATORY, STACK, regions.manager_quota_is_workers_total,
       "Render the manager's queue from the regions' queues (workloads/multikueue.py total_quota); never type it."),
    _r("multikueue-consistent", "Kueue's ClusterQueue rules hold on every cluster; the MultiKueueConfig lists "
       "declared workers only; every worker mirrors the manager's LocalQueues and priority classes.",
       MANDATORY, STACK, regions.multikueue_consistent,
       "Render the manager's and workers' Kueue objects from one spec (workloads/multikueue.py manager_objects, "
       "workloads/kueue.py all_objects)."),
    # ------------------------------------------------- the cloud's own rules (stackspec/rules/catalogue.py)
    _r("tpu-autoscaling-per-zone", "An autoscaled multi-host TPU pool sets its per-zone maximum to the slice's "
       "hosts (GKE validates the slice against it).",
       MANDATORY, RESOURCE, gke.tpu_autoscaling_per_zone,
       "Set autoscaling minNodeCount/maxNodeCount (per zone), not the total limits (infra/slice_pool.py does)."),
    _r("gke-node-version-unpinned", "A node pool that auto-upgrades names no version.",
       MANDATORY, RESOURCE, gke.node_version_unpinned,
       "Drop the node pool's version: it follows the control plane and the release channel."),
    _r("dcn-network-firewall", "Every network attached to TPU pools as an extra NIC admits TCP from its subnet.",
       MANDATORY, STACK, gke.dcn_network_firewall,
       "Declare an INGRESS firewall per DCN network allowing tcp/udp/icmp from its subnet (infra/network.py)."),
    _r("gke-multi-networking", "A cluster whose pools attach extra node networks has multi-networking and "
       "Dataplane V2.",
       MANDATORY, STACK, gke.gke_multi_networking,
       "Set enableMultiNetworking: true and datapathProvider: ADVANCED_DATAPATH at cluster creation."),
    _r("node-sa-image-streaming-role", "Node pools with image streaming run as an account holding "
       "roles/serviceusage.serviceUsageConsumer.",
       MANDATORY, STACK, gke.node_sa_image_streaming_role,
       "Grant the node service account roles/serviceusage.serviceUsageConsumer (infra/cluster.py does with "
       "image.streaming)."),
    _r("wi-binding-after-cluster", "IAM bindings to workload identity principals wait for the cluster that "
       "creates the pool.",
       MANDATORY, STACK, gke.wi_binding_after_cluster,
       "depends_on the Cluster (infra/checkpoints.py's workload_pool)."),
    # ---------------------------------------------------------------- cluster
    _r("gke-dranet-version", "With DRANET the cluster and its TPU pools run at least "
       f"{stack_spec.DRANET_MIN_VERSION}.",
       MANDATORY, STACK, stack.gke_dranet_version,
       f"Pin cluster.version >= {stack_spec.DRANET_MIN_VERSION} in the stack file."),
    _r("gke-ray-operator-and-gcsfuse", "The cluster runs the Ray operator add-on and the "
       "GCS FUSE CSI driver.",
       MANDATORY, RESOURCE, cluster.ray_operator_and_gcsfuse,
       "Enable addonsConfig.rayOperatorConfigs and gcsFuseCsiDriverConfig on the cluster."),
    _r("gke-workload-identity", "Workload identity on the cluster and GKE_METADATA on TPU "
       "node pools.",
       MANDATORY, RESOURCE, cluster.workload_identity,
       "Set workloadIdentityConfig.workloadPool=<project>.svc.id.goog and "
       "workloadMetadataConfig.mode=GKE_METADATA on the pools."),
    # ---------------------------------------------------------------- cluster hardening (mandatory in prod)
    _r("gke-release-channel", "The cluster is in a release channel (REGULAR, STABLE or EXTENDED); every "
       "node pool auto-upgrades and auto-repairs with it.",
       MANDATORY, RESOURCE, cluster.release_channel,
       "Set cluster.releaseChannel (REGULAR by default) and keep management.autoUpgrade/autoRepair true; "
       "hold upgrades off a run with cluster.maintenance.exclusions.", dev=ADVISORY,
       spec={CLUSTER: "releaseChannel"}),
    _r("gke-no-public-control-plane", "The control plane is reached through its DNS endpoint (IAM) or a "
       "private IP endpoint: no public endpoint, no public authorized network.",
       MANDATORY, RESOURCE, cluster.no_public_control_plane,
       "Use cluster.controlPlane.access: dns (the default), or authorized-networks with private ranges only.",
       dev=ADVISORY, spec={CLUSTER: "controlPlane"}),
    _r("gke-private-nodes", "Nodes have internal IPs only (egress through Cloud NAT).",
       MANDATORY, RESOURCE, cluster.private_nodes,
       "Keep cluster.privateNodes true (the default); the stack adds Cloud NAT for egress.", dev=ADVISORY,
       spec={CLUSTER: "privateNodes"}),
    _r("gke-shielded-nodes", "Shielded GKE Nodes on the cluster; no node pool turns secure boot or "
       "integrity monitoring off.",
       MANDATORY, RESOURCE, cluster.shielded_nodes,
       "Keep cluster.shieldedNodes true (the default).", dev=ADVISORY, spec={CLUSTER: "shieldedNodes"}),
    # ---------------------------------------------------------------- safety
    _r("bucket-uniform-access", "The checkpoint bucket uses uniform bucket-level access.",
       MANDATORY, RESOURCE, safety.bucket_uniform_access,
       "Set uniformBucketLevelAccess=true on the bucket."),
    _r("bucket-public-access-prevention", "Public access prevention is enforced on the bucket.",
       MANDATORY, RESOURCE, safety.bucket_public_access_prevention,
       "Set publicAccessPrevention='enforced' on the bucket."),
    _r("bucket-protected-in-prod", "In prod the bucket cannot be deleted (forceDestroy false, "
       "deletionPolicy PREVENT).",
       MANDATORY, RESOURCE, safety.bucket_protected_in_prod,
       "Keep storage.protected true for prod: forceDestroy=false, deletionPolicy=PREVENT "
       "(and Pulumi protect/retainOnDelete)."),
    _r("iam-bucket-scoped", "Storage roles are bound on the bucket with object access only, "
       "never project-wide, never public.",
       MANDATORY, RESOURCE, safety.iam_bucket_scoped,
       "Grant roles/storage.objectUser to the workload identity principal in the checkpoint bucket's "
       "gcp.storage.BucketIAMPolicy, and nothing else (not GCS's legacy bucket roles: infra/iam_policy.py).",
       {"bucketAllowedRoles": {**_STRINGS, "default": safety.DEFAULT_BUCKET_ROLES,
                               "description": "Roles a bucket binding may grant (least privilege)."},
        "projectWideForbiddenRoles": {**_STRINGS, "default": safety.DEFAULT_FORBIDDEN_ROLES,
                                      "description": "Project roles forbidden besides "
                                                     "roles/storage.*."}}),
    _r("no-service-account-keys", "No service-account or HMAC keys.",
       MANDATORY, RESOURCE, safety.no_service_account_keys,
       "Use workload identity (pods) and workload identity federation (CI) instead of keys."),
    _r("ray-head-not-public", "The Ray head/dashboard is not exposed (no LoadBalancer, "
       "NodePort, external IPs or Ingress).",
       MANDATORY, RESOURCE, safety.ray_head_not_public,
       "Keep the head service ClusterIP and reach the dashboard with kubectl port-forward."),
    _r("no-mutable-images-in-prod", "Prod pins released images (no latest/nightly/untagged).",
       MANDATORY, RESOURCE, safety.no_mutable_images_in_prod,
       "Set ray.image to a released tag (e.g. rayproject/ray:2.60.0-py312-tpu) or a digest.",
       {"mutableTags": {**_STRINGS, "default": safety.DEFAULT_MUTABLE_TAGS,
                        "description": "Tags that move (refused in prod)."}}),
    _r("privileged-only-for-tpu", "No privileged container unless privilegedAllowed names it with a reason "
       "(GKE >= 1.28 gives TPU containers their devices unprivileged); no hostNetwork.",
       MANDATORY, RESOURCE, safety.privileged_only_for_tpu,
       "Drop securityContext.privileged (TPU containers need only their google.com/tpu request), or name the "
       "container in the pack config's privilegedAllowed with why it needs it.",
       {"privilegedAllowed": {"type": "object", "additionalProperties": {"type": "string"}, "default": {},
                              "description": "Container name -> why it must run privileged (e.g. TPU "
                                             "containers on GKE before 1.28)."}}),
    # ---------------------------------------------------------------- in-cluster access (prod: mandatory, dev: warn)
    _r("ray-head-network-policy", "Every RayCluster (and RayJob with its own cluster) has a "
       "NetworkPolicy restricting ingress to its head.",
       MANDATORY, STACK, safety.ray_head_network_policy,
       "Keep the workloads' NetworkPolicies (workloads/security.py renders one per RayCluster head).",
       dev=ADVISORY),
    # Mandatory in dev too: a dev stack runs Ray without token authentication, so this policy is the workers' only
    # guard (issue 35: any pod in the cluster could run tasks as the trainer account).
    _r("ray-worker-network-policy", "Every Ray worker group (of a RayCluster or a RayJob with its own cluster) has a "
       "NetworkPolicy restricting its ingress.",
       MANDATORY, STACK, safety.ray_worker_network_policy,
       "Keep the workloads' NetworkPolicies (workloads/security.py renders <cluster>-worker-ingress per RayCluster)."),
    _r("ray-pods-no-token-automount", "Ray pods (head, workers, submitter) set "
       "automountServiceAccountToken: false.",
       MANDATORY, RESOURCE, safety.ray_pods_no_token_automount,
       "Set automountServiceAccountToken: false on the pod template (workloads/manifests.py).", dev=ADVISORY),
    _r("ray-auth-version", "A Ray cluster with token authentication names Ray >= 2.52.0 (rayVersion), as "
       "KubeRay requires.",
       MANDATORY, RESOURCE, safety.ray_auth_version,
       "Pin ray.image to a released tag >= 2.52.0, or set ray.auth: disabled."),
    # ---------------------------------------------------------------- organisation
    _r("allowed-locations", "Clusters, node pools, subnets and buckets stay in the allowed "
       "regions and zones.",
       MANDATORY, RESOURCE, safety.allowed_locations,
       "Move gcp:region/gcp:zone (and storage.location) to an allowed location, or ask for "
       "the pack config to allow it.",
       {"allowedRegions": {**_STRINGS, "default": [], "description": "Empty: any region."},
        "allowedZones": {**_STRINGS, "default": [], "description": "Empty: any zone."}},
       spec={CLUSTER: "gcp:zone", NODE_POOL: "gcp:zone", SUBNETWORK: "gcp:region",
             BUCKET: f"{_NS}:storage.location"}),
    _r("required-labels", "Kubernetes objects and labelled GCP resources carry the "
       "organisation's labels.",
       ADVISORY, RESOURCE, safety.required_labels,
       "Add the missing labels where the component builds the resource's metadata/labels.",
       {"kubernetesLabels": {**_STRINGS, "default": safety.DEFAULT_K8S_LABELS,
                             "description": "Labels every Kubernetes object carries."},
        "gcpLabels": {**_STRINGS, "default": [],
                      "description": "Labels buckets, clusters and node pools carry."}}),
)

BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
assert len(BY_NAME) == len(RULES), "rule names must be unique"


def rule(name: str) -> Rule:
    return BY_NAME[name]
