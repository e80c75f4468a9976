"""The server-side rules of GKE, GCE, IAM, Kueue and KubeRay the project relies on, each with its source.

Nothing here can be applied, so what the cloud will refuse or do is written down once, beside where it
came from, and each rule names the checks that hold the project to it:

- ``spec:<key>``: the stack spec refuses it (``slicectl lint`` and ``preview`` alike);
- ``policy:<rule>``: the policy pack refuses it in a rendered plan (``preview`` and ``pulumi preview``);
- ``code:<path>``: the program renders it so (a rule with no input to get wrong), tested.

``tests/test_cloud_rules.py`` trips every rule through its checks, and the README's "Cloud rules" table is
this table (a test compares them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CloudRule:
    id: str
    system: str  # GKE, GCE, IAM, Kueue, KubeRay, cluster-autoscaler
    rule: str  # what the system accepts or does
    source: str  # a doc, the provider's or operator's code, an upstream issue
    checks: tuple[str, ...]


RULES: tuple[CloudRule, ...] = (
    CloudRule(
        "gke-tpu-autoscaling-per-zone", "GKE",
        "An autoscaled multi-host TPU pool is validated against its per-zone maximum; with only total limits the "
        "provider sends maxNodeCount 0 and GKE answers 'Maximum node count 0 is not a valid size of TPU pod slice'.",
        "vllm-project/ci-infra#545; terraform-provider-google resource_container_node_pool.go expandNodePool "
        "(ForceSendFields MaxNodeCount); cluster-toolkit modules/compute/gke-node-pool (per-zone limits for TPU)",
        ("policy:tpu-autoscaling-per-zone", "code:infra/slice_pool.py")),
    CloudRule(
        "gke-node-version-with-auto-upgrade", "GKE",
        "A node pool's version and auto-upgrade fight: after GKE's upgrade the pinned version rolls the pool back, "
        "and once the patch leaves the channel new pools are refused. Pools name no version.",
        "pulumi-gcp NodePool.version docstring ('setting both is highly discouraged'); cluster-toolkit gke-node-pool "
        "(version from the channel, changes ignored)",
        ("policy:gke-node-version-unpinned", "code:infra/slice_pool.py", "code:infra/cluster.py")),
    CloudRule(
        "gce-vpc-implied-deny-ingress", "GCE",
        "A VPC denies all ingress unless a firewall rule allows it: each DCN network admits TCP, UDP and ICMP from "
        "its own subnet.",
        "https://cloud.google.com/firewall/docs/firewalls#default_firewall_rules (implied deny ingress); "
        "cluster-toolkit examples/gke-tpu-v6 (an internal allow rule on every extra VPC)",
        ("policy:dcn-network-firewall", "code:infra/network.py")),
    CloudRule(
        "gke-multi-networking-for-extra-nics", "GKE",
        "Node pools with additional node networks need a cluster with multi-networking, which needs Dataplane V2 and "
        "is set only at creation.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods; cluster-toolkit "
        "modules/scheduler/gke-cluster main.tf (derived_enable_multi_networking, preconditions); xpk "
        "commands/cluster.py (--enable-multi-networking)",
        ("policy:gke-multi-networking", "code:infra/cluster.py")),
    CloudRule(
        "gke-dranet-min-version", "GKE",
        "Managed DRANET on Standard needs GKE 1.34.1-gke.1829001 or later, Dataplane V2 and the node label.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/allocate-network-resources-dra; cluster-toolkit "
        "gke-node-pool gpu_direct.tf (dranet_min_version)",
        ("spec:tpu-multislice:cluster.version", "policy:gke-dranet-version")),
    CloudRule(
        "gke-image-streaming-node-sa-role", "IAM",
        "Image streaming with a custom node service account needs roles/serviceusage.serviceUsageConsumer on it "
        "(and the Container File System API); without it images are pulled whole.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements; "
        "terraform-google-kubernetes-engine#2251 and PR #2262",
        ("policy:node-sa-image-streaming-role", "code:bootstrap/ci_components.py", "code:infra/cluster.py")),
    CloudRule(
        "iam-wi-pool-exists", "IAM",
        "A binding to <project>.svc.id.goog principals fails with 'Identity Pool does not exist' until the first "
        "cluster with workload identity has created the pool: the binding waits for the cluster.",
        "terraform-google-kubernetes-engine#916; GoogleCloudPlatform/kubernetes-engine-samples issues on "
        "'Identity Pool does not exist'",
        ("policy:wi-binding-after-cluster", "code:__main__.py")),
    CloudRule(
        "gce-reservation-any-falls-back-on-demand", "GCE",
        "Reservation affinity ANY consumes a matching reservation and otherwise runs the VM on demand, so options "
        "listed after it are reached only when on-demand has no stock.",
        "https://cloud.google.com/compute/docs/instances/reservations-consume (consume any matching reservation); "
        "cluster-toolkit gke-node-pool (reservation pools use SPECIFIC)",
        ("spec:tpu-multislice:slices[].capacity[].affinity",)),
    CloudRule(
        "gke-flex-start-constraints", "GKE",
        "A flex-start pool starts at 0 nodes, autoscales with location policy ANY, consumes no reservation, is not "
        "repaired, not Spot, and keeps VMs at most 7 days.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training; cluster-toolkit "
        "examples/gke-tpu-v6/dws-flex-start; xpk --flex (--enable-autoscaling --num-nodes=0)",
        ("spec:tpu-multislice:slices[].capacity[].maxRunDuration", "code:infra/slice_pool.py")),
    CloudRule(
        "gke-flex-start-labels", "GKE",
        "GKE adds its own node labels to flex-start pools and the provider suppresses only GKE Sandbox's: the "
        "pools ignore label drift, as cluster-toolkit's pools do.",
        "terraform-provider-google node_config.go containerNodePoolLabelsSuppress; cluster-toolkit gke-node-pool "
        "main.tf lifecycle ignore_changes (node_config[0].labels, initial_node_count)",
        ("code:infra/slice_pool.py",)),
    CloudRule(
        "gke-queued-provisioning-only-by-request", "GKE",
        "A pool with queued provisioning grows only through ProvisioningRequests (Kueue's DWS admission check), "
        "never from pending pods.",
        "GKE API NodePool.queuedProvisioning ('can be only obtained through queuing via the Cluster Autoscaler "
        "ProvisioningRequest API'); Kueue site docs admission-check-controllers/provisioning",
        ("policy:kueue-tpu-quota-matches-slices", "code:workloads/kueue.py")),
    CloudRule(
        "ca-dra-scale-from-zero", "cluster-autoscaler",
        "The autoscaler grows a node group from zero for pods with DRA claims only where the cloud provider models "
        "the driver's devices on the template node; GKE documents none for netdev.google.com (unverified: opt-in).",
        "kubernetes/autoscaler cluster-autoscaler/docs/dra_support.md (scale from zero; "
        "NodeGroup.TemplateNodeInfo)",
        ("spec:tpu-multislice:slices[].capacity",)),
    CloudRule(
        "gke-ray-addon-kuberay-version", "GKE",
        "GKE does not publish the KubeRay version of its Ray add-on; authOptions needs KubeRay 1.5.1 and an older "
        "CRD prunes it silently (unverified: opt-in).",
        "https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/concepts/overview; ray-project/kuberay "
        "PR #4200 (authOptions, 1.5.1)",
        ("spec:tpu-multislice:ray.auth",)),
    CloudRule(
        "tpu-zone-offers-generation", "GCE",
        "A TPU node pool can be created only in a zone that offers its generation (the dated table in "
        "stackspec/data/tpu_zones.json); zone names are <region>-<a..f> or AI zones.",
        "https://cloud.google.com/tpu/docs/regions; https://cloud.google.com/compute/docs/regions-zones",
        ("spec:gcp:zone", "spec:tpu-multislice:slices[].generation")),
    CloudRule(
        "gke-system-pool-capacity", "GKE",
        "Pods whose requests the pool's allocatable cannot hold never schedule: the system pool holds every Ray head "
        "with its GCS FUSE sidecar, running submitters, the Kueue controller and GKE's Deployments.",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes; Kueue charts/kueue/values.yaml "
        "v0.19.2 (controller requests)",
        ("spec:tpu-multislice:cluster.systemNodeCount", "spec:tpu-multislice:ray.headCpu")),
    CloudRule(
        "kueue-wait-for-pods-ready", "Kueue",
        "Kueue 0.19 turns WaitForPodsReady on with a 30-minute timeout and recovery timeout: a slow slice's workload "
        "is evicted and requeued. The stack sets a 24 h timeout and no recovery eviction.",
        "kubernetes-sigs/kueue CHANGELOG/CHANGELOG-0.19.md (#11855); apis/config/v1beta2/defaults.go; "
        "site docs tasks/manage/setup_wait_for_pods_ready.md",
        ("code:workloads/kueue.py",)),
    CloudRule(
        "kueue-quota-freed-at-job-end", "Kueue",
        "Kueue frees a RayJob's quota when KubeRay reports it finished, while KubeRay deletes its cluster "
        "ttlSecondsAfterFinished later: a queued job's cluster goes at once.",
        "kubernetes-sigs/kueue pkg/controller/jobs/rayjob (Finished); ray-project/kuberay "
        "ray-operator/controllers/ray/rayjob_controller.go (ttlSecondsAfterFinished)",
        ("spec:tpu-multislice:jobs[].clusterTtlSeconds", "policy:kueue-rayjob-lifecycle")),
    CloudRule(
        "kueue-dra-device-class-mapping", "Kueue",
        "With Kueue's DRA integration (on by default since 0.18), a pod claiming a device class no mapping names is "
        "inadmissible: DRANET's netdev.google.com maps to a quota resource.",
        "kubernetes-sigs/kueue apis/config/v1beta2 (resources.deviceClassMappings); KueueDRAIntegration gate",
        ("code:workloads/kueue.py", "policy:kueue-tpu-quota-matches-slices")),
    CloudRule(
        "kueue-rayjob-rules", "Kueue",
        "Kueue manages a RayJob only with its own cluster (no clusterSelector), shutdownAfterJobFinishes, no "
        "in-tree autoscaling and a suspend field it owns.",
        "kubernetes-sigs/kueue pkg/controller/jobs/rayjob/rayjob_webhook.go",
        ("policy:kueue-rayjob-queue", "policy:kueue-rayjob-lifecycle")),
    CloudRule(
        "kueue-chart-webhook-secret", "Kueue",
        "The chart templates an empty <release>-webhook-server-cert Secret that Kueue's cert rotator fills; a "
        "read-only identity (container.viewer) cannot read Secrets, so the drift check skips that one object.",
        "kubernetes-sigs/kueue charts/kueue/templates/internalcert/secret.yaml; "
        "https://cloud.google.com/kubernetes-engine/docs/how-to/iam (container.viewer excludes Secrets)",
        ("code:.github/workflows/drills.yml",)),
    CloudRule(
        "gke-compact-placement", "GKE",
        "A multi-host TPU pool is created with a COMPACT placement policy carrying its TPU topology, in one zone.",
        "cluster-toolkit modules/compute/gke-node-pool (placement preconditions); xpk --placement-type=COMPACT "
        "--tpu-topology",
        ("policy:tpu-compact-placement",)),
    CloudRule(
        "gke-secrets-kms-key", "GKE",
        "Application-layer Secrets encryption needs the Cloud KMS key to exist, in the cluster's location (its region "
        "for a zonal cluster), with GKE's service agent holding cryptoKeyEncrypterDecrypter on it, before the cluster "
        "uses it: the bootstrap makes the key and the grant, the stack names the key.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets",
        ("code:bootstrap/ci_components.py", "code:infra/cluster.py")),
    CloudRule(
        "gke-notifications-topic-same-project", "GKE",
        "A cluster publishes its notifications (filtered by event type, e.g. SECURITY_BULLETIN_EVENT) only to a "
        "Pub/Sub topic in its own project, named projects/<project>/topics/<topic>.",
        "pulumi-gcp ClusterNotificationConfigPubsubArgs (topic, filter.event_types); "
        "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-notifications",
        ("code:infra/cluster_security.py",)),
    CloudRule(
        "binauthz-project-singleton-policy", "GKE",
        "With evaluation mode PROJECT_SINGLETON_POLICY_ENFORCE the cluster admits a pod only if every image matches "
        "the project's one policy: an allow-list pattern, Google's system policy (globalPolicyEvaluationMode "
        "ENABLE) or the default rule; ALWAYS_DENY in DRYRUN_AUDIT_LOG_ONLY logs what it would refuse and admits it.",
        "https://cloud.google.com/binary-authorization/docs/key-concepts; "
        "https://cloud.google.com/binary-authorization/docs/policy-yaml-reference",
        ("code:infra/cluster_security.py", "spec:tpu-multislice:unverified.binaryAuthorizationEnforce")),
    CloudRule(
        "binauthz-attestation-by-digest", "GKE",
        "A REQUIRE_ATTESTATION rule admits an image only when the pod names it by digest and an attestation of that "
        "path and digest verifies with a public key of the required attestor (for a Cloud KMS key, the key version's "
        "PKIX key); an allow-list pattern admits without a check and takes one wildcard, trailing, that does not "
        "match '/' (no documented exact-digest pattern).",
        "https://cloud.google.com/binary-authorization/docs/key-concepts; "
        "https://cloud.google.com/binary-authorization/docs/making-attestations; Binary Authorization API "
        "AdmissionWhitelistPattern.namePattern; terraform-provider-google binaryauthorization "
        "resource_binary_authorization_attestor.go (pkix_public_key, id)",
        ("code:infra/cluster_security.py", "code:bootstrap/ci_components.py", "code:.github/workflows/image.yml")),
    CloudRule(
        "binauthz-kms-key-id", "GKE",
        "An attestation verifies only against the attestor public key whose id equals its publicKeyId; "
        "gcloud's sign-and-create writes '//cloudkms.googleapis.com/v1/' + the key version's resource name, "
        "and the provider's key version data source already returns its id in that form: the attestor takes "
        "the id as returned.",
        "googlecloudsdk/api_lib/container/binauthz/kms.py GetKeyUri; terraform-provider-google "
        "google/services/kms/data_source_google_kms_crypto_key_version.go (d.SetId with the "
        "//cloudkms.googleapis.com/v1/ prefix); https://cloud.google.com/binary-authorization/docs/creating-"
        "attestors-cli",
        ("code:bootstrap/components/stack_project.py", "code:.github/workflows/image.yml")),
    CloudRule(
        "gce-subnet-ranges-disjoint", "GCE",
        "A subnet's primary and secondary ranges, and those of every subnet a VM's NICs reach, must not overlap; a "
        "VPC-native cluster takes its pod and service ranges from the subnet's named secondary ranges.",
        "https://cloud.google.com/vpc/docs/subnets#valid-ranges; "
        "https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips",
        ("spec:tpu-multislice:network.primary.cidr", "policy:subnets-no-overlap", "code:infra/vpc.py")),
    CloudRule(
        "kueue-multikueue-kubeconfig", "Kueue",
        "MultiKueue reads a worker's kubeconfig from key 'kubeconfig' of a Secret in Kueue's namespace, refuses "
        "token files, CA files, insecure TLS, exec plugins and auth providers, and reconnects when the Secret "
        "changes: one-hour tokens written by a CronJob, no long-lived token Secret.",
        "kubernetes-sigs/kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go "
        "(validateKubeconfig, validateRestConfig, secretHandler); apis/kueue/v1beta2/multikueue_types.go",
        ("code:workloads/multikueue_token.py", "code:workloads/multikueue.py")),
    CloudRule(
        "kueue-multikueue-cluster-queue", "Kueue",
        "A ClusterQueue with more than one MultiKueue check, one applied per flavor, one beside a "
        "ProvisioningRequest check, or naming a missing flavor stays inactive: the manager's queue has one "
        "whole-queue MultiKueue check, the DWS check stays on the workers'.",
        "kubernetes-sigs/kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go (updateQueueStatus, "
        "MultiKueueWithProvisioningRequest); site docs concepts/multikueue.md",
        ("code:workloads/multikueue.py",)),
    CloudRule(
        "kueue-multikueue-dispatch-order", "Kueue",
        "A MultiKueueConfig lists 1 to 20 unique clusters; the incremental dispatcher nominates them in that order "
        "(stepSize at a time, a round every 5 minutes) since 0.19: the stack's regions, cheapest first, one by one.",
        "kubernetes-sigs/kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go (CRD CEL); site docs "
        "concepts/multikueue.md (Incremental; MultiKueueIncrementalDispatcherRespectConfigOrder Beta)",
        ("code:workloads/multikueue.py",)),
    CloudRule(
        "gke-google-identity-rbac-user", "GKE",
        "GKE accepts a Google service account's OAuth token and names it by its email for RBAC (a User subject); "
        "the account needs container.clusters.get, and container.clusters.connect through the DNS-based endpoint "
        "(roles/container.clusterViewer), and nothing else in IAM.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control; "
        "https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint)",
        ("code:workloads/multikueue.py",)),
    CloudRule(
        "kueue-multikueue-clusterprofile-alpha", "Kueue",
        "ClusterProfile access needs Kueue's MultiKueueClusterProfile gate (Alpha, off in 0.19), a credentials "
        "plugin in the controller's pod (no official GKE image yet) and, in GKE's sample, container.developer "
        "project-wide: not the stack's default path.",
        "kubernetes-sigs/kueue v0.19.2 pkg/features/kube_features.go, site docs tasks/manage/setup_multikueue.md; "
        "GoogleCloudPlatform/gke-fleet-management multikueue-clusterprofile (commit dbf58b5)",
        ("code:workloads/multikueue.py",)),
    CloudRule(
        "kueue-metrics-authenticated", "Kueue",
        "Kueue serves /metrics over HTTPS on its metrics port behind authentication and authorization: a scraper "
        "needs a bearer token whose identity holds the chart's <release>-metrics-reader role.",
        "kubernetes-sigs/kueue v0.19.2 cmd/kueue/main.go (SecureServing, WithAuthenticationAndAuthorization); "
        "charts/kueue/templates/rbac/metrics_reader_role.yaml",
        ("code:workloads/multikueue.py",)),
)


def by_id(rule_id: str) -> CloudRule:
    return next(r for r in RULES if r.id == rule_id)
