"""The Pulumi program: read the stack spec, declare the components, export outputs.

Runs unchanged under ``pulumi up``/``pulumi preview`` and under the offline
engine (``slicectl preview``), which drives it with ``pulumi.runtime.set_mocks``.
"""

# First: the provider packages load only the modules this program uses (see the module).
import infra.provider_modules  # noqa: F401, I001 (before pulumi_gcp and pulumi_kubernetes)
import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.checkpoints import CheckpointStore, CheckpointStoreArgs
from infra.cluster import GkeCluster, GkeClusterArgs, get_credentials
from infra.cluster_security import ClusterSecurity, ClusterSecurityArgs
from infra.monitoring import StackMonitoring, StackMonitoringArgs
from infra.network import SecondaryNetworks, SecondaryNetworksArgs
from infra.registry import ImageRegistry, ImageRegistryArgs
from infra.slice_pool import SliceNodePool, SliceNodePoolArgs
from infra.vpc import ClusterNetwork, ClusterNetworkArgs
from stackspec import spec as stack_spec
from workloads import kueue
from workloads.component import RayWorkloads, RayWorkloadsArgs
from workloads.namespace import WorkloadNamespace, WorkloadNamespaceArgs

# Validate everything before declaring anything: a bad spec deploys nothing. Each problem
# is logged as one line (file, line, key, value, what is allowed), with no traceback.
try:
    spec = stack_spec.from_pulumi()
except stack_spec.SpecError as e:
    for problem in e.problems:
        pulumi.log.error(problem.render(e.source))
    raise pulumi.RunError(f"{len(e.problems)} problem(s) in {e.source}; nothing was declared") from None
name = spec.cluster.name
# Day 0: the image is built into a repository this same update creates, so without a digest the workers run
# ray.image and install MaxText at start (the seed's way); the next update, with image.digest set, switches them.
if spec.image is not None and spec.image.pending:
    pulumi.log.warn(f"tpu-multislice:image.digest is unset: first phase. This update creates the image repository and "
                    f"its pusher's grant, and the workers run {spec.ray.image}, installing MaxText at start; once "
                    ".github/workflows/image.yml has pushed the image, set image.digest to switch them")
if spec.storage.namespace == "default":
    pulumi.log.warn("tpu-multislice:storage.namespace is default: the stack creates no namespace and sets no Pod "
                    "Security labels; anyone who may create a pod there can run as the checkpoint KSA")
for key, why in spec.unverified_paths.items():
    pulumi.log.warn(f"unverified, opted in with {key}: {why}")
streaming = spec.image is not None and spec.image.streaming

dcn = SecondaryNetworks(f"{name}-dcn", SecondaryNetworksArgs(networks=spec.networks, region=spec.region, mtu=spec.mtu))
vpc = ClusterNetwork(f"{name}-network", ClusterNetworkArgs(network=spec.network.primary, cluster=spec.cluster,
                                                          region=spec.region, project=spec.project))
# Security bulletins' topic and the Binary Authorization policy (Kueue's controller image admitted beside GKE's).
security = ClusterSecurity(f"{name}-security", ClusterSecurityArgs(spec=spec, system_images=(kueue.IMAGE,)))
gke = GkeCluster(
    name,
    GkeClusterArgs(cluster=spec.cluster, project=spec.project, region=spec.region, network=vpc.network.name,
                   subnetwork=vpc.subnet.name, notifications_topic=security.topic.id, image_streaming=streaming,
                   multi_networking=spec.dranet),
    # The policy's API and the policy itself before the cluster evaluates it.
    opts=pulumi.ResourceOptions(depends_on=[*security.services, security.policy, vpc.subnet]),
)
registry = (
    ImageRegistry(
        f"{name}-images",
        ImageRegistryArgs(image=spec.image, project=spec.project, node_service_account=gke.node_service_account_email,
                          protected=spec.prod),
    )
    if spec.image is not None
    else None
)

pools = [
    SliceNodePool(
        s.name,
        SliceNodePoolArgs(
            slice=s,
            cluster_name=gke.cluster.name,
            location=spec.cluster.location,
            project=spec.project,
            node_service_account=gke.node_service_account_email,
            additional_networks=tuple((net.name, sub.name) for net, sub in zip(dcn.networks, dcn.subnets, strict=True)),
            image_streaming=streaming,
        ),
        opts=pulumi.ResourceOptions(depends_on=[gke.system_pool]),
    )
    for s in spec.slices
]

# Workloads reach the cluster through a provider built from its outputs.
provider = k8s.Provider(
    f"{name}-k8s",
    kubeconfig=gke.kubeconfig,
    enable_server_side_apply=True,
    opts=pulumi.ResourceOptions(depends_on=[gke.system_pool]),
)

# The workload namespace (Pod Security labels) before anything namespaced.
namespace = WorkloadNamespace(f"{name}-namespace", WorkloadNamespaceArgs(spec=spec, k8s_provider=provider))
in_namespace = [namespace.namespace] if namespace.namespace else []

project_number = gcp.organizations.get_project_output(project_id=spec.project).number
checkpoints = CheckpointStore(
    f"{name}-checkpoints",
    CheckpointStoreArgs(
        storage=spec.storage, project=spec.project, project_number=project_number, k8s_provider=provider,
        workload_pool=[gke.cluster], namespace=in_namespace,
    ),
)

# The DRANET claim, trainer ConfigMap, RayCluster and RayJobs; pods run as the checkpoint KSA,
# after its bucket role is granted (a job's first checkpoint write must not race the grant).
workloads = RayWorkloads(
    f"{name}-workloads",
    RayWorkloadsArgs(spec=spec, k8s_provider=provider, depends_on=[checkpoints.service_account, checkpoints.binding],
                     namespace=in_namespace),
)

monitoring = StackMonitoring(f"{name}-monitoring", StackMonitoringArgs(spec=spec)) if spec.monitoring.enabled else None

pulumi.export("cluster", gke.cluster.name)
pulumi.export("workerImage", spec.worker_image)
pulumi.export("location", spec.cluster.location)
pulumi.export("bucket", checkpoints.bucket.name)
pulumi.export("namespace", spec.storage.namespace)
pulumi.export("network", vpc.network.name)
pulumi.export("securityBulletinsTopic", security.topic.name)
pulumi.export("kubernetesServiceAccount", f"{spec.storage.namespace}/{spec.storage.service_account}")
# Every option's pool of every slice (a slice with capacity fallbacks has one per option).
pulumi.export("sliceNodePools", [np.name for p in pools for np in p.node_pools])
pulumi.export("getCredentials", get_credentials(spec.cluster, spec.project))
