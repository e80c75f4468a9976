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
from infra.monitoring import StackMonitoring, StackMonitoringArgs
from infra.network import SecondaryNetworks, SecondaryNetworksArgs
from infra.refusals import enforce as enforce_refusals
from infra.registry import ImageRegistry, ImageRegistryArgs
from infra.slice_pool import SliceNodePool, SliceNodePoolArgs
from stackspec import spec as stack_spec
from workloads.component import RayWorkloads, RayWorkloadsArgs

# Validate everything before declaring anything: a bad spec deploys nothing. Each problem
# is logged as one line (file, line, key, value, what is allowed), with no traceback.
try:
    spec = stack_spec.from_pulumi()
except stack_spec.SpecError as e:
    for problem in e.problems:
        pulumi.log.error(problem.render(e.source))
    raise pulumi.RunError(f"{len(e.problems)} problem(s) in {e.source}; nothing was declared") from None
name = spec.cluster.name
# What `pulumi up` refuses, before anything is declared: previews (offline and real) warn, an update stops.
refusals = []
# No registry holds the placeholder digest.
if spec.image is not None and spec.image.placeholder:
    refusals.append(f"tpu-multislice:image.digest is unset, so the workers' image is the placeholder "
                    f"{spec.worker_image}: set it to the digest .github/workflows/image.yml printed")
enforce_refusals(refusals)
streaming = spec.image is not None and spec.image.streaming

dcn = SecondaryNetworks(f"{name}-dcn", SecondaryNetworksArgs(networks=spec.networks, region=spec.region, mtu=spec.mtu))
gke = GkeCluster(name, GkeClusterArgs(cluster=spec.cluster, project=spec.project, region=spec.region,
                                      image_streaming=streaming))
registry = (
    ImageRegistry(
        f"{name}-images",
        ImageRegistryArgs(image=spec.image, project=spec.project, node_service_account=gke.node_service_account.email,
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
            version=spec.cluster.version,
            node_service_account=gke.node_service_account.email,
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

project_number = gcp.organizations.get_project_output(project_id=spec.project).number
checkpoints = CheckpointStore(
    f"{name}-checkpoints",
    CheckpointStoreArgs(
        storage=spec.storage, project=spec.project, project_number=project_number, k8s_provider=provider
    ),
)

# The DRANET claim, trainer ConfigMap, RayCluster and RayJobs; pods run as the checkpoint KSA,
# after its bucket role is granted (a job's first checkpoint write must not race the grant).
workloads = RayWorkloads(
    f"{name}-workloads",
    RayWorkloadsArgs(spec=spec, k8s_provider=provider, depends_on=[checkpoints.service_account, checkpoints.binding]),
)

monitoring = StackMonitoring(f"{name}-monitoring", StackMonitoringArgs(spec=spec)) if spec.monitoring.enabled else None

pulumi.export("cluster", gke.cluster.name)
pulumi.export("workerImage", spec.worker_image)
pulumi.export("location", spec.cluster.location)
pulumi.export("bucket", checkpoints.bucket.name)
pulumi.export("kubernetesServiceAccount", f"{spec.storage.namespace}/{spec.storage.service_account}")
# Every option's pool of every slice (a slice with capacity fallbacks has one per option).
pulumi.export("sliceNodePools", [np.name for p in pools for np in p.node_pools])
pulumi.export("getCredentials", get_credentials(spec.cluster, spec.project))
