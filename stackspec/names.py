"""Every name the project derives, computed here once and checked against its system's limit.

A name can be fine as typed and too long once something is appended to it (the node
service account ``<cluster>-nodes`` has at most 30 characters): ``StackSpec.derived_names``
lists each derived name with the spec key it comes from, and the spec model checks them all.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from . import limits

PROJECT = "tpu-multislice"  # the Pulumi project's name (Pulumi.yaml); also the config namespace
PART_OF = PROJECT  # app.kubernetes.io/part-of on every Kubernetes object

_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight")


def stack_file(stack: str) -> str:
    return f"stacks/Pulumi.{stack}.yaml"


def node_service_account_id(cluster: str) -> str:
    """The GCP service account the cluster's nodes run as (never the default compute one): ``<cluster>-nodes``, or
    for a cluster name too long for it (GKE takes 40 characters; an account ID "must be 6-30 characters long, and
    match the regular expression [a-z]([-a-z0-9]*[a-z0-9])", terraform-provider-google
    website/docs/r/google_service_account.html.markdown) the name's first 18 characters, a 5-character digest of the
    whole name (two long names sharing a prefix stay apart) and ``-nodes``."""
    full = f"{cluster}-nodes"
    if len(full) <= limits.SERVICE_ACCOUNT_ID.max_len:
        return full
    digest = hashlib.sha256(cluster.encode()).hexdigest()[:5]
    return f"{cluster[:18].rstrip('-')}-{digest}-nodes"


def node_service_account_email(cluster: str, project: str) -> str:
    """The nodes' account, which the bootstrap creates in the stack's project."""
    return f"{node_service_account_id(cluster)}@{project}.iam.gserviceaccount.com"


def multikueue_account_id(manager: str) -> str:
    """The Google service account a multi-region stack's token CronJob runs as (MultiKueue's keyless access to the
    workers): ``<manager, first 19 characters>-multikueue``, at most 30 characters. The bootstrap creates it."""
    return f"{manager[:19]}-multikueue"


def multikueue_account_email(manager: str, project: str) -> str:
    return f"{multikueue_account_id(manager)}@{project}.iam.gserviceaccount.com"


# MultiKueue across regions (workloads/multikueue.py renders them; slicectl, the policies and the tests read them).
def multikueue_check(manager: str) -> str:
    """The manager's MultiKueue AdmissionCheck and the MultiKueueConfig it names: ``<manager>-multikueue``."""
    return f"{manager}-multikueue"


def multikueue_cluster(cluster: str) -> str:
    """A worker's MultiKueueCluster: the GKE cluster's own name (a Workload's ``status.clusterName`` names it)."""
    return cluster


def multikueue_kubeconfig_secret(cluster: str) -> str:
    """The Secret in kueue-system on the manager holding a worker's kubeconfig: ``<worker cluster>-multikueue``."""
    return f"{cluster}-multikueue"


def multikueue_worker_role(manager: str) -> str:
    """The Role in the job namespace (writes) and, with ``-read``, the ClusterRole (reads) on each worker granting
    the manager what MultiKueue does there, each with its binding."""
    return f"{manager}-multikueue"


def multikueue_token_role(manager: str) -> str:
    """The Role (and its binding) on each worker letting the manager's Google identity mint its tokens."""
    return f"{multikueue_worker_role(manager)}-token"


# The ServiceAccount in kueue-system on each worker the manager acts as (Kueue's example names it multikueue-sa).
MULTIKUEUE_WORKER_SA = "multikueue"
# The token CronJob on the manager: its Kubernetes service account, Role, ConfigMap and CronJob (workload identity
# binds this KSA to the account of multikueue_account_id).
MULTIKUEUE_MANAGER_KSA = "multikueue-token"
# Kueue's metrics on every cluster of a multi-region stack: the metrics-reader ServiceAccount in kueue-system, the
# Secret holding its one-hour token (the PodMonitoring's bearer), and the PodMonitoring itself.
KUEUE_METRICS_SA = "kueue-metrics"
KUEUE_METRICS_SECRET = f"{KUEUE_METRICS_SA}-token"
KUEUE_NAMESPACE = "kueue-system"  # Kueue's own namespace (its chart's), where MultiKueue reads kubeconfig Secrets
# The manager's token CronJob (workloads/multikueue.py token_job, named MULTIKUEUE_MANAGER_KSA): its container, its
# period and the tokens' lifetime (three runs per token), which the manager's alerts read too (infra/monitoring.py).
MULTIKUEUE_TOKEN_CONTAINER = "token"
MULTIKUEUE_TOKEN_PERIOD_MINUTES = 20
MULTIKUEUE_TOKEN_SECONDS = 3600
KUEUE_METRICS_TOKEN_JOB = f"{KUEUE_METRICS_SA}-token"  # a single-region cluster's own token job (KSA, Role, CronJob)
KUEUE_METRICS_MONITORING = "kueue-metrics"


def network_name(cluster: str, index: int) -> str:
    """The default VPC of the ``index``-th (1-based) secondary network."""
    return f"{cluster}-net-{index}"


# The workload namespace (never ``default``: anyone who may create a pod there could run as the checkpoint KSA).
DEFAULT_NAMESPACE = "maxtext"
# Namespaces Kubernetes, GKE, Google Managed Prometheus and Kueue own: the stack never creates or labels them.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "gmp-system", "gmp-public", "gke-managed-system",
                     "gke-gmp-system", "kueue-system")


def cluster_network(cluster: str) -> str:
    """The cluster's own (primary) VPC: ``<cluster>-vpc``."""
    return f"{cluster}-vpc"


def cluster_subnet(cluster: str) -> str:
    """The cluster's nodes' subnet in its VPC: ``<cluster>-nodes``."""
    return f"{cluster}-nodes"


# The secondary ranges of the cluster's subnet (VPC-native pods and services).
POD_RANGE = "pods"
SERVICE_RANGE = "services"


# The bootstrap's defaults for the stacks' state keys (bootstrap/Pulumi.example.yaml: kmsLocation, keyRing).
STACK_KEYS_LOCATION = "global"
STACK_KEY_RING = "pulumi"


def stack_key_id(ci_project: str, stack: str, location: str = STACK_KEYS_LOCATION,
                 key_ring: str = STACK_KEY_RING) -> str:
    """The stack's own Cloud KMS key (its state's secrets), named after it, which the bootstrap makes in the CI
    project."""
    return f"projects/{ci_project}/locations/{location}/keyRings/{key_ring}/cryptoKeys/{stack}"


def stack_secrets_provider(ci_project: str, stack: str, location: str = STACK_KEYS_LOCATION,
                           key_ring: str = STACK_KEY_RING) -> str:
    """What a stack file carries as ``secretsprovider``: its own key (:func:`stack_key_id`)."""
    return f"gcpkms://{stack_key_id(ci_project, stack, location, key_ring)}"


def secrets_key_ring(cluster: str) -> str:
    """The Cloud KMS key ring (in the cluster's region) the bootstrap makes for the cluster's Secrets key."""
    return f"{cluster}-gke"


def secrets_key(cluster: str) -> str:
    """The Cloud KMS key GKE encrypts the cluster's Secrets with (application-layer secrets encryption)."""
    return f"{cluster}-secrets"


def secrets_key_id(project: str, region: str, cluster: str) -> str:
    ring = f"projects/{project}/locations/{region}/keyRings/{secrets_key_ring(cluster)}"
    return f"{ring}/cryptoKeys/{secrets_key(cluster)}"


def image_signing_key(cluster: str) -> str:
    """The Cloud KMS asymmetric key (in the Secrets key's ring) ci-image signs the pushed worker image's digest with."""
    return f"{cluster}-image-signer"


# The signing key's one version: asymmetric keys do not rotate by themselves, and the attestor holds this version's
# public key (the bootstrap reads it); a new version needs the attestor's key list and image.yml changed together.
IMAGE_SIGNING_KEY_VERSION = 1


def image_signing_key_version_id(project: str, region: str, cluster: str) -> str:
    ring = f"projects/{project}/locations/{region}/keyRings/{secrets_key_ring(cluster)}"
    return f"{ring}/cryptoKeys/{image_signing_key(cluster)}/cryptoKeyVersions/{IMAGE_SIGNING_KEY_VERSION}"


def image_attestor(cluster: str) -> str:
    """The Binary Authorization attestor (and its Container Analysis note, same name) of the worker image."""
    return f"{cluster}-ci-image"


def image_attestor_id(project: str, cluster: str) -> str:
    return f"projects/{project}/attestors/{image_attestor(cluster)}"


def gke_service_agent(project_number: str) -> str:
    """GKE's service agent in a project (https://cloud.google.com/iam/docs/service-agents)."""
    return f"service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


def notifications_topic(cluster: str) -> str:
    """The Pub/Sub topic GKE publishes the cluster's security bulletins to."""
    return f"{cluster}-gke-notifications"


def dcn_firewall(network: str) -> str:
    """The ingress firewall of a secondary (DCN) network: ``<network>-allow-internal``."""
    return f"{network}-allow-internal"


def trainer_configmap(ray_cluster: str) -> str:
    return f"{ray_cluster}-trainer"


def claim_template(networks: int) -> str:
    """``two-netdev`` for two secondary networks, as the seed names it."""
    return f"{_NUMBER_WORDS[networks]}-netdev" if networks < len(_NUMBER_WORDS) else f"netdev-{networks}"


def submitter_job(ray_job: str) -> str:
    """KubeRay names the Kubernetes Job that runs ``ray job submit`` after its RayJob."""
    return ray_job


def kube_context(project: str, location: str, cluster: str) -> str:
    """The kubeconfig context ``gcloud container clusters get-credentials`` writes for a GKE cluster."""
    return f"gke_{project}_{location}_{cluster}"


def registry_host(location: str) -> str:
    """Artifact Registry's Docker host for a location (GKE image streaming serves these only)."""
    return f"{location}-docker.pkg.dev"


def repository_path(location: str, project: str, repository: str) -> str:
    """An Artifact Registry Docker repository's path: ``<loc>-docker.pkg.dev/<project>/<repo>``."""
    return f"{registry_host(location)}/{project}/{repository}"


def image_path(location: str, project: str, repository: str, image: str) -> str:
    """An Artifact Registry image's path: ``<loc>-docker.pkg.dev/<project>/<repo>/<image>``."""
    return f"{repository_path(location, project, repository)}/{image}"


def image_reference(location: str, project: str, repository: str, image: str, digest: str) -> str:
    """An Artifact Registry image by digest: ``<loc>-docker.pkg.dev/<project>/<repo>/<image>@sha256:...``."""
    return f"{image_path(location, project, repository, image)}@{digest}"


def k8s_provider(cluster: str) -> str:
    return f"{cluster}-k8s"


# The CI identities bootstrap/ creates in a stack's project (their account ids), written once:
# the stack grants the drill identity its in-cluster RBAC and the image identity its repository.
CI_ACCOUNTS = {"preview": "ci-preview", "deploy": "ci-deploy", "drill": "ci-drill", "image": "ci-image"}


def deploy_account_id(stack: str) -> str:
    """The deploy identity of one stack (bootstrap/): each deploying stack has its own, acting on its project only."""
    return f"{CI_ACCOUNTS['deploy']}-{stack}"


def deploy_environment(stack: str) -> str:
    """The GitHub environment deploy.yml applies ``stack`` in (required reviewers, main only)."""
    return f"deploy-{stack}"


def drill_environment(stack: str) -> str:
    """The GitHub environment drills.yml's cluster drill of ``stack`` runs in."""
    return f"drill-{stack}"


def preview_account_id(stack: str) -> str:
    """The reader of one stack (bootstrap/): its project's viewer roles, its state and key, nothing of other stacks."""
    return f"{CI_ACCOUNTS['preview']}-{stack}"


def drill_account_id(stack: str) -> str:
    """The cluster drill identity of one stack (bootstrap/; the stack's in-cluster drill RBAC names it)."""
    return f"{CI_ACCOUNTS['drill']}-{stack}"


def drill_account_email(stack: str, project: str) -> str:
    return f"{drill_account_id(stack)}@{project}.iam.gserviceaccount.com"


def image_account_id(stack: str) -> str:
    """The worker image's pusher and signer of one stack (bootstrap/): writer on that stack's repository only (the
    stack grants it, infra/registry.py), signer with that stack's key only."""
    return f"{CI_ACCOUNTS['image']}-{stack}"


def image_account_email(stack: str, project: str) -> str:
    return f"{image_account_id(stack)}@{project}.iam.gserviceaccount.com"


def image_environment(stack: str) -> str:
    """The GitHub environment image.yml builds, pushes and signs ``stack``'s worker image in (required reviewers)."""
    return f"image-{stack}"


def pr_preview_environment(stack: str) -> str:
    """The GitHub environment pr.yml's cloud preview of ``stack`` runs in (required reviewers)."""
    return f"pr-preview-{stack}"


def read_environment(stack: str) -> str:
    """The GitHub environment deploy.yml's preview and drills.yml's drift of ``stack`` run in (its OIDC subject)."""
    return f"read-{stack}"


# A slice with capacity fallbacks has one node pool per option: ``<slice>-<suffix>``.
POOL_SUFFIXES = {"reservation": "rsv", "flex-start": "flex", "spot": "spot", "on-demand": "std"}


def slice_pool(slice_name: str, capacity_type: str) -> str:
    """The node pool serving one capacity option of a slice (``v6e-16-0-flex``)."""
    return f"{slice_name}-{POOL_SUFFIXES[capacity_type]}"


# Capacity and admission (GKE ComputeClass, Kueue): one name per worker group, shared by the
# ComputeClass, the node pools that serve it, Kueue's ResourceFlavor and the pods' selectors.
def compute_class(group: str) -> str:
    """The ``cloud.google.com/v1`` ComputeClass of a worker group (cluster-scoped)."""
    return f"{group}-class"


def resource_flavor(group: str) -> str:
    """Kueue's ResourceFlavor for a worker group's slice shape (cluster-scoped)."""
    return f"{group}-flavor"


def cluster_queue(ray_cluster: str) -> str:
    """The one Kueue ClusterQueue holding the stack's TPU quota."""
    return f"{ray_cluster}-tpu"


def local_queue(ray_cluster: str) -> str:
    """The Kueue LocalQueue jobs name (``kueue.x-k8s.io/queue-name``) in the workload namespace."""
    return f"{ray_cluster}-queue"


def pod_flavor(ray_cluster: str) -> str:
    """Kueue's ResourceFlavor for CPU and memory (no node labels: heads, submitters and TPU workers alike)."""
    return f"{ray_cluster}-pods"


def provisioning_check(ray_cluster: str) -> str:
    """Kueue's AdmissionCheck and ProvisioningRequestConfig for flex-start slices (Dynamic Workload Scheduler)."""
    return f"{ray_cluster}-dws"


@dataclass(frozen=True)
class Derived:
    key: str  # the spec key the name comes from (where an error points)
    name: str
    rule: limits.NameRule
    how: str  # how it is derived, for the message
