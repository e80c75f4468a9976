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
class Quote:
    """The words a rule relies on, verbatim (whitespace and comment markers aside), and where they are: a URL, or
    ``owner/name@<commit>:<path>:<line>[-<line>]`` in a public repository (``tests/reference/cloud-rule-sources.json``
    holds those lines as read at that commit)."""

    text: str
    where: str


@dataclass(frozen=True)
class CloudRule:
    id: str
    system: str  # GKE, GCE, IAM, Kueue, KubeRay, cluster-autoscaler
    rule: str  # what the system accepts or does
    source: str  # a doc, the provider's or operator's code, an upstream issue
    checks: tuple[str, ...]
    quotes: tuple[Quote, ...] = ()


# The repositories quoted, at the commits read.
TF = "hashicorp/terraform-provider-google@e03b7622a26cf4e878f90bdccaca6aa3d03a7999"
CT = "GoogleCloudPlatform/cluster-toolkit@1047080375afbb44da4b596be314634e7486af4a"
XPK = "AI-Hypercomputer/xpk@367c838253bea41e7d7716145ad6513f44c1a21e"
KU = "kubernetes-sigs/kueue@8eab68778fc1b52affe165fdf5af29d1e9b4f3cb"  # v0.19.2
KR = "ray-project/kuberay@3fe72c3c876d2a530b50870f14b76a8e94bb1f9b"  # v1.6.0
KR151 = "ray-project/kuberay@9e8a2c085b7b7c96cf7cc5d857787bc2d78406c6"  # ray-operator/v1.5.1
CA = "kubernetes/autoscaler@55c37cd5eb550756c5ccc5a89e9068d77797e575"


RULES: tuple[CloudRule, ...] = (
    CloudRule(
        "gke-tpu-autoscaling-per-zone", "GKE",
        "An autoscaled multi-host TPU pool is validated against its per-zone maximum; with only total limits the "
        "provider sends maxNodeCount 0 and GKE answers 'Maximum node count 0 is not a valid size of TPU pod slice'.",
        "vllm-project/ci-infra#545; terraform-provider-google resource_container_node_pool.go expandNodePool "
        "(ForceSendFields MaxNodeCount); cluster-toolkit modules/compute/gke-node-pool (per-zone limits for TPU)",
        ("policy:tpu-autoscaling-per-zone", "code:infra/slice_pool.py"),
        quotes=(
            Quote("GKE validates a multi-host slice against the per-zone `max_node_count`, which is zero when "
                  "`total_max_node_count` is used instead.",
                  "https://github.com/vllm-project/ci-infra/pull/545"),
            Quote("ForceSendFields:   []string{\"MinNodeCount\", \"MaxNodeCount\", \"TotalMinNodeCount\", "
                  "\"TotalMaxNodeCount\"},",
                  f"{TF}:google/services/container/resource_container_node_pool.go:1265"),
            Quote("Per-zone limits (min_node_count/max_node_count) are required to workaround a # Terraform "
                  "provider bug when using TPU Flex Start.",
                  f"{CT}:modules/compute/gke-node-pool/main.tf:111-112"),
        )),
    CloudRule(
        "gke-node-version-with-auto-upgrade", "GKE",
        "A node pool's version and auto-upgrade fight: after GKE's upgrade the pinned version rolls the pool back, "
        "and once the patch leaves the channel new pools are refused. Pools name no version.",
        "terraform-provider-google resource_container_node_pool.go version ('setting both is highly discouraged'); "
        "cluster-toolkit gke-node-pool sets no version on its pools",
        ("policy:gke-node-version-unpinned", "code:infra/slice_pool.py", "code:infra/cluster.py"),
        quotes=(
            Quote("Note that if this field and auto_upgrade are both specified, they will fight each other for what"
                  " the node version should be, so setting both is highly discouraged.",
                  f"{TF}:google/services/container/resource_container_node_pool.go:548"),
        )),
    CloudRule(
        "gce-vpc-implied-deny-ingress", "GCE",
        "A VPC denies all ingress unless a firewall rule allows it: each DCN network admits TCP, UDP and ICMP from "
        "its own subnet.",
        "https://cloud.google.com/firewall/docs/firewalls#default_firewall_rules (implied deny ingress); "
        "cluster-toolkit examples/gke-tpu-v6e/gke-tpu-v6e.yaml (an internal allow rule on every extra VPC)",
        ("policy:dcn-network-firewall", "code:infra/network.py"),
        quotes=(
            Quote("firewall_rules: - name: $(vars.deployment_name)-internal-1 ranges: [192.168.0.0/16] allow: - "
                  "protocol: tcp",
                  f"{CT}:examples/gke-tpu-v6e/gke-tpu-v6e.yaml:101-105"),
        )),
    CloudRule(
        "gke-multi-networking-for-extra-nics", "GKE",
        "Node pools with additional node networks run on a cluster with multi-networking, which needs Dataplane V2, as "
        "both peers set it (GKE's tutorial attaches the networks without it); the flag updates in place.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods; cluster-toolkit "
        "modules/scheduler/gke-cluster main.tf (derived_enable_multi_networking); xpk commands/cluster.py "
        "(--enable-multi-networking); terraform-provider-google resource_container_cluster.go (updated in place)",
        ("policy:gke-multi-networking", "code:infra/cluster.py"),
        quotes=(
            Quote("derived_enable_multi_networking = coalesce(var.enable_multi_networking, "
                  "length(var.additional_networks) > 0)",
                  f"{CT}:modules/scheduler/gke-cluster/main.tf:44"),
            Quote("derived_enable_dataplane_v2 = coalesce(var.enable_dataplane_v2, "
                  "local.derived_enable_multi_networking)",
                  f"{CT}:modules/scheduler/gke-cluster/main.tf:47"),
            Quote("' --enable-multi-networking'",
                  f"{XPK}:src/xpk/commands/cluster.py:1347"),
            Quote("if d.HasChange(\"enable_multi_networking\") {",
                  f"{TF}:google/services/container/resource_container_cluster.go:4283"),
        )),
    CloudRule(
        "gke-dranet-min-version", "GKE",
        "Managed DRANET on Standard needs GKE 1.34.1-gke.1829001 or later, Dataplane V2 and the node label.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/allocate-network-resources-dra; cluster-toolkit "
        "gke-node-pool gpu_direct.tf (dranet_min_version)",
        ("spec:tpu-multislice:cluster.version", "policy:gke-dranet-version"),
        quotes=(
            Quote("dranet_min_version = \"1.34.1-gke.1829001\"",
                  f"{CT}:modules/compute/gke-node-pool/gpu_direct.tf:68"),
        )),
    CloudRule(
        "gke-image-streaming-node-sa-role", "IAM",
        "Image streaming with a custom node service account needs roles/serviceusage.serviceUsageConsumer on it "
        "(and the Container File System API); without it images are pulled whole.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming#requirements; "
        "terraform-google-kubernetes-engine#2251 and PR #2262",
        ("policy:node-sa-image-streaming-role", "code:bootstrap/components/stack_project.py", "code:infra/cluster.py"),
        quotes=(
            Quote("it does not include the roles/serviceusage.serviceUsageConsumer permission, which is required "
                  "for image streaming to function correctly. This results in pods failing to start on affected "
                  "nodes.",
                  "https://github.com/terraform-google-modules/terraform-google-kubernetes-engine/issues/2251"),
        )),
    CloudRule(
        "iam-wi-pool-exists", "IAM",
        "A binding to <project>.svc.id.goog principals fails with 'Identity Pool does not exist' until the first "
        "cluster with workload identity has created the pool: the binding waits for the cluster.",
        "terraform-google-kubernetes-engine#916; googleforgames/global-multiplayer-demo#39",
        ("policy:wi-binding-after-cluster", "code:__main__.py"),
        quotes=(
            Quote("googleapi: Error 400: Identity Pool does not exist (<project_id>.svc.id.goog).",
                  "https://github.com/terraform-google-modules/terraform-google-kubernetes-engine/issues/916"),
            Quote("Only seems to happen on a project that has never created a Workload Identity Pool before.",
                  "https://github.com/googleforgames/global-multiplayer-demo/issues/39"),
        )),
    CloudRule(
        "gce-reservation-any-falls-back-on-demand", "GCE",
        "Reservation affinity ANY consumes a matching reservation and otherwise runs the VM on demand, so options "
        "listed after it are reached only when on-demand has no stock.",
        "https://cloud.google.com/compute/docs/instances/reservations-consume (consume any matching reservation); "
        "cluster-toolkit gke-node-pool (reservation pools use SPECIFIC)",
        ("spec:tpu-multislice:slices[].capacity[].affinity",),
        quotes=(
            Quote("`\"ANY_RESERVATION\"`: Consume any non-specific reservation available, with a fallback to "
                  "on-demand capacity in case of none reservaition being claimable.",
                  f"{TF}:website/docs/r/container_cluster.html.markdown:1654"),
        )),
    CloudRule(
        "gke-flex-start-constraints", "GKE",
        "A flex-start pool starts at 0 nodes, autoscales with location policy ANY, consumes no reservation, is not "
        "repaired, not Spot, and keeps VMs at most 7 days.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/dws-flex-start-training; cluster-toolkit "
        "examples/gke-consumption-options/dws-flex-start/gke-tpu-v6e; xpk --flex (--enable-autoscaling --num-nodes=0)",
        ("spec:tpu-multislice:slices[].capacity[].maxRunDuration", "code:infra/slice_pool.py"),
        quotes=(
            Quote("Flex-start lets you dynamically provision GPUs and TPUs as needed, for up to seven days",
                  "https://cloud.google.com/kubernetes-engine/docs/concepts/provisioning-model"),
            Quote("auto_repair: false # flex-start dependency",
                  f"{CT}:examples/gke-consumption-options/dws-flex-start/gke-tpu-v6e/gke-tpu-v6e.yaml:205"),
        )),
    CloudRule(
        "gke-flex-start-labels", "GKE",
        "The provider suppresses only GKE Sandbox's out-of-band node labels, and whether GKE labels flex-start pools "
        "is not documented: the pools ignore label drift defensively, as cluster-toolkit does on every pool.",
        "terraform-provider-google node_config.go containerNodePoolLabelsSuppress; cluster-toolkit gke-node-pool "
        "main.tf lifecycle ignore_changes (node_config[0].labels, initial_node_count)",
        ("code:infra/slice_pool.py",),
        quotes=(
            Quote("Right now, GKE only applies its own out-of-band labels when you enable // Sandbox.",
                  f"{TF}:google/services/container/node_config.go:3238-3239"),
            Quote("ignore_changes = [ node_config[0].labels, initial_node_count,",
                  f"{CT}:modules/compute/gke-node-pool/main.tf:310-312"),
        )),
    CloudRule(
        "gke-queued-provisioning-only-by-request", "GKE",
        "A pool with queued provisioning grows only through ProvisioningRequests (Kueue's DWS admission check), "
        "never from pending pods.",
        "GKE API NodePool.queuedProvisioning ('can be only obtained through queuing via the Cluster Autoscaler "
        "ProvisioningRequest API'); Kueue site docs admission-check-controllers/provisioning",
        ("policy:kueue-tpu-quota-matches-slices", "code:workloads/kueue.py"),
        quotes=(
            Quote("Whether nodes in this node pool are obtainable solely through the ProvisioningRequest API",
                  f"{TF}:google/services/container/resource_container_node_pool.go:404"),
        )),
    CloudRule(
        "ca-dra-scale-from-zero", "cluster-autoscaler",
        "The autoscaler grows a node group from zero for pods with DRA claims only where the cloud provider models "
        "the driver's devices on the template node; GKE documents none for netdev.google.com (unverified: opt-in).",
        "kubernetes/autoscaler cluster-autoscaler/docs/dra_support.md (scale from zero; "
        "NodeGroup.TemplateNodeInfo)",
        ("spec:tpu-multislice:slices[].capacity",),
        quotes=(
            Quote("scaling such a DRA NodeGroup up from 0 Nodes only works if your chosen cloud provider has "
                  "explicitly implemented support for it.",
                  f"{CA}:cluster-autoscaler/docs/dra_support.md:70-71"),
        )),
    CloudRule(
        "gke-ray-addon-kuberay-version", "GKE",
        "GKE does not publish the KubeRay version of its Ray add-on; authOptions needs KubeRay 1.5.1 and an older "
        "CRD prunes it silently (unverified: opt-in).",
        "https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/concepts/overview; ray-project/kuberay "
        "PR #4200 (authOptions, 1.5.1)",
        ("spec:tpu-multislice:ray.auth",),
        quotes=(
            Quote("AuthOptions *AuthOptions `json:\"authOptions,omitempty\"`",
                  f"{KR151}:ray-operator/apis/ray/v1/raycluster_types.go:16"),
        )),
    CloudRule(
        "tpu-zone-offers-generation", "GCE",
        "A TPU node pool can be created only in a zone that offers its generation (the dated table in "
        "stackspec/data/tpu_zones.json); zone names are <region>-<a..f> or AI zones.",
        "https://cloud.google.com/tpu/docs/regions; https://cloud.google.com/compute/docs/regions-zones",
        ("spec:gcp:zone", "spec:tpu-multislice:slices[].generation"),
        quotes=(
            Quote("When you create a TPU node, you specify the zone in which you want to create it.",
                  "https://cloud.google.com/tpu/docs/regions-zones"),
        )),
    CloudRule(
        "gce-zone-offers-machine-type", "GCE",
        "A node pool's VMs are created in its zones with its machine type, which each zone offers or not: a machine "
        "type no zone of the region lists (stackspec/data/machine_regions.csv, a gcloud machine-types export) is "
        "refused for system pools, a Standard manager and TPU pools; so is a zone the last per-zone export lists "
        "without it where it lists it in others of the region (stackspec/data/machine_zones.csv), and a Standard "
        "manager's regional pool where fewer than the three zones it takes offer it.",
        "https://cloud.google.com/compute/docs/regions-zones; Cyclenerd/google-cloud-pricing-cost-calculator "
        "tools/machinetyperegion.csv at 8bf3293a3561 (gcloud compute machine-types list, daily) and "
        "tools/machinetypezone.csv at 4ed73c63446f (2023-05-02); "
        "https://cloud.google.com/kubernetes-engine/docs/concepts/regional-clusters",
        ("spec:tpu-multislice:cluster.systemMachineType", "spec:tpu-multislice:manager.systemMachineType",
         "spec:tpu-multislice:slices[].machineType"),
        quotes=(
            Quote("See the Available regions & zones section for a complete description of a zone's available "
                  "machine types and features.", "https://cloud.google.com/compute/docs/regions-zones/"),
        )),
    CloudRule(
        "gke-system-pool-capacity", "GKE",
        "Pods whose requests the pool's allocatable cannot hold never schedule: the system pool holds every Ray head "
        "with its GCS FUSE sidecar, running submitters, the Kueue controller and GKE's Deployments.",
        "https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes; Kueue charts/kueue/values.yaml "
        "v0.19.2 (controller requests)",
        ("spec:tpu-multislice:cluster.systemNodeCount", "spec:tpu-multislice:ray.headCpu"),
        quotes=(
            Quote("requests: cpu: 500m memory: 512Mi",
                  f"{KU}:charts/kueue/values.yaml:63-65"),
        )),
    CloudRule(
        "kueue-wait-for-pods-ready", "Kueue",
        "Kueue 0.19 turns WaitForPodsReady on with a 30-minute timeout and recovery timeout: a slow slice's workload "
        "is evicted and requeued. The stack sets a 24 h timeout and no recovery eviction.",
        "kubernetes-sigs/kueue CHANGELOG/CHANGELOG-0.19.md (#11855); apis/config/v1beta2/defaults.go; "
        "site docs tasks/manage/setup_wait_for_pods_ready.md",
        ("code:workloads/kueue.py",),
        quotes=(
            Quote("WaitForPodsReady is now enabled by default.",
                  f"{KU}:CHANGELOG/CHANGELOG-0.19.md:215"),
            Quote("(30 minute timeout, 30 minute recovery timeout)",
                  f"{KU}:CHANGELOG/CHANGELOG-0.19.md:215"),
        )),
    CloudRule(
        "kueue-quota-freed-at-job-end", "Kueue",
        "Kueue frees a RayJob's quota when KubeRay reports it finished, while KubeRay deletes its cluster "
        "ttlSecondsAfterFinished later: a queued job's cluster goes at once.",
        "kubernetes-sigs/kueue pkg/controller/jobs/rayjob (Finished); ray-project/kuberay "
        "ray-operator/controllers/ray/rayjob_controller.go (ttlSecondsAfterFinished)",
        ("spec:tpu-multislice:jobs[].clusterTtlSeconds", "policy:kueue-rayjob-lifecycle"),
        quotes=(
            Quote("finished = j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed || "
                  "j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete",
                  f"{KU}:pkg/controller/jobs/rayjob/rayjob_controller.go:225"),
            Quote("ttlSeconds := rayJob.Spec.TTLSecondsAfterFinished",
                  f"{KR}:ray-operator/controllers/ray/rayjob_controller.go:1365"),
        )),
    CloudRule(
        "kueue-dra-device-class-mapping", "Kueue",
        "With Kueue's DRA integration (on by default since 0.18), a pod claiming a device class no mapping names is "
        "inadmissible: DRANET's netdev.google.com maps to a quota resource.",
        "kubernetes-sigs/kueue apis/config/v1beta2 (resources.deviceClassMappings); KueueDRAIntegration gate",
        ("code:workloads/kueue.py", "policy:kueue-tpu-quota-matches-slices"),
        quotes=(
            Quote("DeviceClassMappings defines mappings from device classes to logical resources // for Dynamic "
                  "Resource Allocation support.",
                  f"{KU}:apis/config/v1beta2/configuration_types.go:601-602"),
        )),
    CloudRule(
        "kueue-rayjob-rules", "Kueue",
        "Kueue manages a RayJob only with its own cluster (no clusterSelector), shutdownAfterJobFinishes, no "
        "in-tree autoscaling and a suspend field it owns.",
        "kubernetes-sigs/kueue pkg/controller/jobs/rayjob/rayjob_webhook.go",
        ("policy:kueue-rayjob-queue", "policy:kueue-rayjob-lifecycle"),
        quotes=(
            Quote("\"a kueue managed job should not use an existing cluster\"",
                  f"{KU}:pkg/controller/jobs/rayjob/rayjob_webhook.go:120"),
            Quote("\"a kueue managed job should delete the cluster after finishing\"",
                  f"{KU}:pkg/controller/jobs/rayjob/rayjob_webhook.go:139"),
        )),
    CloudRule(
        "kueue-chart-webhook-secret", "Kueue",
        "The chart templates an empty <release>-webhook-server-cert Secret that Kueue's cert rotator fills; a "
        "read-only identity (container.viewer) cannot read Secrets, so the drift check skips it and every other "
        "Secret the stack manages (the Kueue metrics tokens, multi's MultiKueue kubeconfigs), each its own --exclude.",
        "kubernetes-sigs/kueue charts/kueue/templates/internalcert/secret.yaml; "
        "https://cloud.google.com/kubernetes-engine/docs/how-to/iam (container.viewer excludes Secrets)",
        ("code:.github/workflows/drills.yml",),
        quotes=(
            Quote("name: '{{ include \"kueue.fullname\" . }}-webhook-server-cert'",
                  f"{KU}:charts/kueue/templates/internalcert/secret.yaml:25"),
        )),
    CloudRule(
        "gke-compact-placement", "GKE",
        "A multi-host TPU pool is created with a COMPACT placement policy carrying its TPU topology, in one zone.",
        "cluster-toolkit modules/compute/gke-node-pool (placement preconditions); xpk --placement-type=COMPACT "
        "--tpu-topology",
        ("policy:tpu-compact-placement",),
        quotes=(
            Quote("error_message = \"Compact placement is only available for node pools operating in a single zone.\"",
                  f"{CT}:modules/compute/gke-node-pool/main.tf:385"),
            Quote("command += ' --placement-type=COMPACT' command += f' --tpu-topology={system.topology}'",
                  f"{XPK}:src/xpk/core/nodepool.py:364-365"),
        )),
    CloudRule(
        "gke-secrets-kms-key", "GKE",
        "Application-layer Secrets encryption needs the Cloud KMS key to exist, in the cluster's location (its region "
        "for a zonal cluster), with GKE's service agent holding cryptoKeyEncrypterDecrypter on it, before the cluster "
        "uses it: the bootstrap makes the key and the grant, the stack names the key.",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets",
        ("code:bootstrap/components/stack_project.py", "code:infra/cluster.py"),
        quotes=(
            Quote("Ensure that the key is in the same location as the cluster to decrease latency and to prevent "
                  "cases where resources depend on services spread across multiple failure domains.",
                  "https://cloud.google.com/kubernetes-engine/docs/how-to/encrypting-secrets"),
        )),
    CloudRule(
        "gke-notifications-topic-same-project", "GKE",
        "A cluster publishes its notifications (filtered by event type, e.g. SECURITY_BULLETIN_EVENT) only to a "
        "Pub/Sub topic in its own project, named projects/<project>/topics/<topic>.",
        "terraform-provider-google resource_container_cluster.go (notification_config.pubsub.topic); "
        "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-notifications",
        ("code:infra/cluster_security.py",),
        quotes=(
            Quote("The pubsub topic to push upgrade notifications to. Must be in the same project as the cluster. "
                  "Must be in the format: projects/{project}/topics/{topic}.",
                  f"{TF}:google/services/container/resource_container_cluster.go:1552"),
        )),
    CloudRule(
        "binauthz-project-singleton-policy", "GKE",
        "With evaluation mode PROJECT_SINGLETON_POLICY_ENFORCE the cluster admits a pod only if every image matches "
        "the project's one policy: an allow-list pattern, Google's system policy (globalPolicyEvaluationMode "
        "ENABLE) or the default rule; ALWAYS_DENY in DRYRUN_AUDIT_LOG_ONLY logs what it would refuse and admits it.",
        "https://cloud.google.com/binary-authorization/docs/key-concepts; "
        "https://cloud.google.com/binary-authorization/docs/policy-yaml-reference",
        ("code:infra/cluster_security.py", "spec:tpu-multislice:unverified.binaryAuthorizationEnforce"),
        quotes=(
            Quote("ValidateFunc:  validation.StringInSlice([]string{\"DISABLED\", "
                  "\"PROJECT_SINGLETON_POLICY_ENFORCE\"}, false),",
                  f"{TF}:google/services/container/resource_container_cluster.go:1059"),
            Quote("The action when a pod creation is denied by the admission rule. Possible values: "
                  "[\"ENFORCED_BLOCK_AND_AUDIT_LOG\", \"DRYRUN_AUDIT_LOG_ONLY\"]",
                  f"{TF}:google/services/binaryauthorization/resource_binary_authorization_policy.go:163"),
        )),
    CloudRule(
        "binauthz-attestation-by-digest", "GKE",
        "A REQUIRE_ATTESTATION rule admits an image only when the pod names it by digest and an attestation of that "
        "path and digest verifies with a public key of the required attestor (for a Cloud KMS key, the key version's "
        "PKIX key, its id the //cloudkms.googleapis.com/v1/... name the provider returns); an allow-list pattern "
        "admits without a check and takes one trailing wildcard: * not matching '/', or ** matching subdirectories "
        "(no documented exact-digest pattern).",
        "https://cloud.google.com/binary-authorization/docs/key-concepts; "
        "https://cloud.google.com/binary-authorization/docs/making-attestations; Binary Authorization API "
        "AdmissionWhitelistPattern.namePattern; terraform-provider-google "
        "data_source_google_kms_crypto_key_version.go (the id)",
        ("code:infra/cluster_security.py", "code:bootstrap/components/stack_project.py",
         "code:.github/workflows/image.yml"),
        quotes=(
            Quote("This supports a trailing * as a wildcard, but this is allowed only in text after the registry/ "
                  "part. * wildcard does not match /, i.e., gcr.io/nginx* matches gcr.io/nginx@latest, but it does "
                  "not match gcr.io/nginx/image. This also supports a trailing ** wildcard which matches "
                  "subdirectories, i.e., gcr.io/nginx** matches",
                  "https://cloud.google.com/dotnet/docs/reference/Google.Cloud.BinaryAuthorization.V1Beta1/latest/Google.Cloud.BinaryAuthorization.V1Beta1.AdmissionWhitelistPattern"),
            Quote("d.SetId(fmt.Sprintf(\"//cloudkms.googleapis.com/v1/%s/cryptoKeyVersions/%d\", d.Get(\"crypto_key\"),"
                  " d.Get(\"version\")))",
                  f"{TF}:google/services/kms/data_source_google_kms_crypto_key_version.go:169"),
        )),
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
        ("code:bootstrap/components/stack_project.py", "code:.github/workflows/image.yml"),
        quotes=(
            Quote('d.SetId(fmt.Sprintf("//cloudkms.googleapis.com/v1/%s/cryptoKeyVersions/%d", d.Get("crypto_key"), '
                  'd.Get("version")))',
                  f"{TF}:google/services/kms/data_source_google_kms_crypto_key_version.go:169"),
        )),
    CloudRule(
        "gce-subnet-ranges-disjoint", "GCE",
        "A subnet's primary and secondary ranges, and those of every subnet a VM's NICs reach, must not overlap; a "
        "VPC-native cluster takes its pod and service ranges from the subnet's named secondary ranges.",
        "https://cloud.google.com/vpc/docs/subnets#valid-ranges; "
        "https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips",
        ("spec:tpu-multislice:network.primary.cidr", "policy:subnets-no-overlap", "code:infra/vpc.py"),
        quotes=(
            Quote("Ranges must be unique and non-overlapping within a network.",
                  f"{TF}:google/services/compute/resource_compute_subnetwork.go:478-479"),
        )),
    CloudRule(
        "kueue-multikueue-kubeconfig", "Kueue",
        "MultiKueue reads a worker's kubeconfig from key 'kubeconfig' of a Secret in Kueue's namespace, refuses "
        "token files, CA files, insecure TLS, exec plugins and auth providers, and reconnects when the Secret "
        "changes: one-hour tokens written by a CronJob, no long-lived token Secret.",
        "kubernetes-sigs/kueue v0.19.2 pkg/controller/admissionchecks/multikueue/multikueuecluster.go "
        "(validateKubeconfig, validateRestConfig, secretHandler); apis/kueue/v1beta2/multikueue_types.go",
        ("code:workloads/multikueue_token.py", "code:workloads/multikueue.py"),
        quotes=(
            Quote("return errors.New(\"tokenFile is not allowed\")",
                  f"{KU}:pkg/controller/admissionchecks/multikueue/multikueuecluster.go:968"),
            Quote("return fmt.Errorf(\"insecure TLS verification is not allowed for cluster %s\", name)",
                  f"{KU}:pkg/controller/admissionchecks/multikueue/multikueuecluster.go:976"),
            Quote("return errors.New(\"bearerTokenFile is not allowed\")",
                  f"{KU}:pkg/controller/admissionchecks/multikueue/multikueuecluster.go:1006"),
        )),
    CloudRule(
        "kueue-multikueue-cluster-queue", "Kueue",
        "A ClusterQueue with more than one MultiKueue check, one applied per flavor, one beside a "
        "ProvisioningRequest check, or naming a missing flavor stays inactive: the manager's queue has one "
        "whole-queue MultiKueue check, the DWS check stays on the workers'.",
        "kubernetes-sigs/kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go (updateQueueStatus, "
        "MultiKueueWithProvisioningRequest); site docs concepts/multikueue.md",
        ("code:workloads/multikueue.py",),
        quotes=(
            Quote("\"Cannot specify MultiKueue AdmissionCheck per flavor, found: %s\"",
                  f"{KU}:pkg/cache/scheduler/clusterqueue.go:341"),
            Quote("\"Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: %s, %s\"",
                  f"{KU}:pkg/cache/scheduler/clusterqueue.go:346"),
        )),
    CloudRule(
        "kueue-multikueue-dispatch-order", "Kueue",
        "A MultiKueueConfig lists 1 to 20 unique clusters; the incremental dispatcher nominates them in that order "
        "(stepSize at a time, a round every 5 minutes) since 0.19: the stack's regions, cheapest first, one by one.",
        "kubernetes-sigs/kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go (CRD CEL); site docs "
        "concepts/multikueue.md (Incremental; MultiKueueIncrementalDispatcherRespectConfigOrder Beta)",
        ("code:workloads/multikueue.py",),
        quotes=(
            Quote("Clusters are considered in the order they are listed in `MultiKueueConfig.spec.clusters`, so you"
                  " control the nomination priority by listing the most preferred clusters first.",
                  f"{KU}:site/content/en/docs/concepts/multikueue.md:106-107"),
            Quote("+kubebuilder:validation:MinItems=1 // +kubebuilder:validation:MaxItems=20",
                  f"{KU}:apis/kueue/v1beta2/multikueue_types.go:155-156"),
        )),
    CloudRule(
        "gke-google-identity-rbac-user", "GKE",
        "GKE accepts a Google service account's OAuth token and names it by its email for RBAC (a User subject); "
        "the account needs container.clusters.get, and container.clusters.connect through the DNS-based endpoint "
        "(roles/container.clusterViewer), and nothing else in IAM. A Kubernetes service-account token reaches the "
        "DNS-based endpoint only with enableK8sTokensViaDns on (off by default).",
        "https://cloud.google.com/kubernetes-engine/docs/how-to/role-based-access-control; "
        "https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation (DNS-based endpoint); "
        "terraform-provider-google resource_container_cluster.go (enable_k8s_tokens_via_dns)",
        ("code:workloads/multikueue.py",),
        quotes=(
            Quote("Controls whether the k8s token auth is allowed via dns.",
                  f"{TF}:google/services/container/resource_container_cluster.go:2114"),
            Quote("GKE's DNS-based endpoint is one example: when Kubernetes tokens via DNS are disabled, "
                  "TokenReview returns HTTP 401 or 403",
                  "https://github.com/hashicorp/web-unified-docs/pull/3252"),
        )),
    CloudRule(
        "kueue-multikueue-clusterprofile-alpha", "Kueue",
        "ClusterProfile access needs Kueue's MultiKueueClusterProfile gate (Alpha, off in 0.19), a credentials "
        "plugin in the controller's pod (no official GKE image yet) and, in GKE's sample, container.developer "
        "project-wide: not the stack's default path.",
        "kubernetes-sigs/kueue v0.19.2 pkg/features/kube_features.go, site docs tasks/manage/setup_multikueue.md; "
        "GoogleCloudPlatform/gke-fleet-management multikueue-clusterprofile (commit dbf58b5)",
        ("code:workloads/multikueue.py",),
        quotes=(
            Quote("{Version: version.MustParse(\"0.15\"), Default: false, PreRelease: featuregate.Alpha},",
                  f"{KU}:pkg/features/kube_features.go:791"),
        )),
    CloudRule(
        "kueue-metrics-authenticated", "Kueue",
        "Kueue serves /metrics over HTTPS on its metrics port behind authentication and authorization: a scraper "
        "needs a bearer token whose identity holds the chart's <release>-metrics-reader role.",
        "kubernetes-sigs/kueue v0.19.2 cmd/kueue/main.go (SecureServing, WithAuthenticationAndAuthorization); "
        "charts/kueue/templates/rbac/metrics_reader_role.yaml",
        ("code:workloads/multikueue.py",),
        quotes=(
            Quote("SecureServing:  true, FilterProvider: filters.WithAuthenticationAndAuthorization,",
                  f"{KU}:cmd/kueue/main.go:190-191"),
        )),
)


def by_id(rule_id: str) -> CloudRule:
    return next(r for r in RULES if r.id == rule_id)
