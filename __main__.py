"""The Pulumi program: read the stack spec, declare the components, export outputs.

Runs unchanged under ``pulumi up``/``pulumi preview`` and under the offline
engine (``slicectl preview``), which drives it with ``pulumi.runtime.set_mocks``.
"""

import functools

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from infra.checkpoints import CheckpointStore, CheckpointStoreArgs, SharedCheckpointBucket, bucket_members
from infra.cluster import GkeCluster, GkeClusterArgs, get_credentials, node_roles
from infra.cluster_security import ClusterSecurity, ClusterSecurityArgs
from infra.manager import ManagerCluster, ManagerClusterArgs
from infra.monitoring import SharedMonitoring, SharedMonitoringArgs, StackMonitoring, StackMonitoringArgs
from infra.network import SecondaryNetworks, SecondaryNetworksArgs
from infra.registry import ImageRegistry, ImageRegistryArgs, image_streaming_api
from infra.sandbox import SandboxProject, SandboxProjectArgs, wait_for_apis
from infra.slice_pool import SliceNodePool, SliceNodePoolArgs
from infra.vpc import ClusterNetwork, ClusterNetworkArgs
from stackspec import names
from stackspec import spec as stack_spec
from workloads import kueue, multikueue, multitier
from workloads.component import QueuedRayJobs, QueuedRayJobsArgs, RayWorkloads, RayWorkloadsArgs
from workloads.multikueue_component import (
    MultiKueueManager,
    MultiKueueManagerArgs,
    MultiKueueWorker,
    MultiKueueWorkerArgs,
)
from workloads.namespace import WorkloadNamespace, WorkloadNamespaceArgs

# Validate everything before declaring anything: a bad spec deploys nothing. Each problem
# is logged as one line (file, line, key, value, what is allowed), with no traceback.
try:
    spec = stack_spec.from_pulumi()
except stack_spec.SpecError as e:
    for problem in e.problems:
        pulumi.log.error(problem.render(e.source))
    raise pulumi.RunError(f"{len(e.problems)} problem(s) in {e.source}; nothing was declared") from None
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


@functools.cache
def project_number(project: str) -> pulumi.Output[str]:
    """The project's number, looked up once per project (a multi-region stack's regions share theirs)."""
    return gcp.organizations.get_project_output(project_id=project).number


def replicators(views) -> list[pulumi.Output[str]]:
    """GKE's checkpoint replicator principal (project-wide) once, if any of ``views`` uses multi-tier checkpointing."""
    project = views[0].project
    return ([project_number(project).apply(lambda n: multitier.replicator_principal(n, project))]
            if any(multitier.enabled(v) for v in views) else [])


def declare_region(view, security, registry, *, shared_bucket=None, shared_monitoring=None,
                   multikueue_worker=False, streaming_api=None, sandbox=None):
    """One cluster with its networks, pools, namespace, checkpoint KSA and workloads (a single-region stack's
    whole program; each region of a multi-region stack). ``security`` and ``registry`` are callables: a
    single-region stack creates them between its VPC and its cluster (its resources keep their order). ``sandbox``:
    a sandbox stack's own APIs and node account (infra/sandbox.py), before its cluster."""
    name = view.cluster.name
    dcn = SecondaryNetworks(f"{name}-dcn", SecondaryNetworksArgs(networks=view.networks, region=view.region,
                                                                 mtu=view.mtu))
    vpc = ClusterNetwork(f"{name}-network", ClusterNetworkArgs(network=view.network.primary, cluster=view.cluster,
                                                              region=view.region, project=view.project))
    security = security()
    # Image streaming's API before the cluster, and so before every pool that streams (they wait for the cluster).
    if streaming and streaming_api is None:
        streaming_api = image_streaming_api(f"{name}-security", view.project, security)
    gke = GkeCluster(
        name,
        GkeClusterArgs(cluster=view.cluster, project=view.project, region=view.region, network=vpc.network.name,
                       subnetwork=vpc.subnet.name, notifications_topic=security.topic.id, image_streaming=streaming,
                       multi_networking=view.dranet, kubernetes_tokens_via_dns=multikueue_worker,
                       multi_tier_checkpointing=multitier.enabled(view), secrets_encryption=sandbox is None),
        # The policy's API and the policy itself before the cluster evaluates it.
        opts=pulumi.ResourceOptions(depends_on=[*security.services, security.policy, vpc.subnet,
                                                *([streaming_api] if streaming_api else []),
                                                *(sandbox.ready if sandbox else [])]),
    )
    registry = registry(gke)
    pools = [
        SliceNodePool(
            s.name if shared_bucket is None else f"{name}-{s.name}",
            SliceNodePoolArgs(
                slice=s,
                cluster_name=gke.cluster.name,
                location=view.cluster.location,
                project=view.project,
                node_service_account=gke.node_service_account_email,
                additional_networks=tuple((net.name, sub.name) for net, sub in zip(dcn.networks, dcn.subnets,
                                                                                   strict=True)),
                image_streaming=streaming,
            ),
            opts=pulumi.ResourceOptions(depends_on=[gke.system_pool]),
        )
        for s in view.slices
    ]

    # Workloads reach the cluster through a provider built from its outputs.
    provider = k8s.Provider(
        names.k8s_provider(name),
        kubeconfig=gke.kubeconfig,
        enable_server_side_apply=True,
        opts=pulumi.ResourceOptions(depends_on=[gke.system_pool]),
    )

    # The workload namespace (Pod Security labels) before anything namespaced.
    namespace = WorkloadNamespace(f"{name}-namespace", WorkloadNamespaceArgs(spec=view, k8s_provider=provider))
    in_namespace = [namespace.namespace] if namespace.namespace else []

    # GKE's checkpoint replicator backs the local tier up to the bucket (multi-tier checkpointing): a member of the
    # bucket's one authoritative policy, as the workloads' principal is.
    replicator = replicators([view]) if shared_bucket is None else []  # a shared bucket has the stack's
    checkpoints = CheckpointStore(
        f"{name}-checkpoints",
        CheckpointStoreArgs(
            storage=view.storage, project=view.project, project_number=project_number(view.project),
            k8s_provider=provider,
            workload_pool=[gke.cluster], namespace=in_namespace, shared=shared_bucket, more_members=replicator,
        ),
    )

    # The DRANET claim, trainer ConfigMap, RayCluster and RayJobs; pods run as the checkpoint KSA,
    # after its bucket role is granted (a job's first checkpoint write must not race the grant).
    workloads = RayWorkloads(
        f"{name}-workloads",
        RayWorkloadsArgs(spec=view, k8s_provider=provider, depends_on=[checkpoints.service_account,
                                                                        checkpoints.policy],
                         namespace=in_namespace,
                         created=None if view.site is None else [j.name for j in view.created_here()]),
    )
    monitoring = (StackMonitoring(f"{name}-monitoring", StackMonitoringArgs(spec=view, shared=shared_monitoring))
                  if view.monitoring.enabled else None)
    return {"gke": gke, "vpc": vpc, "pools": pools, "provider": provider, "checkpoints": checkpoints,
            "workloads": workloads, "monitoring": monitoring, "security": security, "registry": registry,
            "namespace": in_namespace}


def single_region() -> None:
    name = spec.cluster.name

    def security():
        # Security bulletins' topic and the Binary Authorization policy (Kueue's controller image admitted beside
        # GKE's).
        return ClusterSecurity(f"{name}-security", ClusterSecurityArgs(spec=spec,
                                                                        system_images=(kueue.IMAGE,)))

    def registry(gke):
        if spec.image is None:
            return None
        return ImageRegistry(
            f"{name}-images",
            ImageRegistryArgs(image=spec.image, project=spec.project,
                              node_service_account=gke.node_service_account_email, protected=spec.prod),
        )

    # A sandbox stack has no bootstrap: it makes its project's APIs and its nodes' account itself (infra/sandbox.py).
    sandbox = (SandboxProject(f"{name}-sandbox", SandboxProjectArgs(project=spec.project, cluster=name,
                                                                   node_roles=node_roles(streaming)))
               if spec.sandbox else None)
    if sandbox is not None:
        wait_for_apis(sandbox.services)
    r = declare_region(spec, security, registry, sandbox=sandbox)
    pulumi.export("cluster", r["gke"].cluster.name)
    pulumi.export("workerImage", spec.worker_image)
    pulumi.export("location", spec.cluster.location)
    pulumi.export("bucket", r["checkpoints"].bucket.name)
    pulumi.export("namespace", spec.storage.namespace)
    pulumi.export("network", r["vpc"].network.name)
    pulumi.export("securityBulletinsTopic", r["security"].topic.name)
    pulumi.export("kubernetesServiceAccount", f"{spec.storage.namespace}/{spec.storage.service_account}")
    # Every option's pool of every slice (a slice with capacity fallbacks has one per option).
    pulumi.export("sliceNodePools", [np.name for p in r["pools"] for np in p.node_pools])
    pulumi.export("getCredentials", get_credentials(spec.cluster, spec.project))


def multi_region() -> None:
    """A manager and a cluster per region (README "Regions"): one `pulumi up` creates every cluster and configures
    Kueue in each, through providers built from the clusters' outputs."""
    m, views = spec.manager, spec.region_views()
    order = spec.dispatch_order()
    for d in order:
        pulumi.log.info(f"dispatch {order.index(d) + 1}: {d.view.region} ({d.view.cluster.name}): {d.reason}")
    # Stack-wide: one bulletin topic and Binary Authorization policy (a project has one), one image repository
    # every region's nodes read, one checkpoint bucket every region reads; named after the manager.
    # Binary Authorization admits Kueue's controller and the MultiKueue token job's image beside GKE's.
    stack_security = ClusterSecurity(f"{m.name}-security", ClusterSecurityArgs(
        spec=views[0], system_images=multikueue.SYSTEM_IMAGES, owner=spec.home[0]))
    readers = tuple((v.cluster.name, names.node_service_account_email(v.cluster.name, spec.project)) for v in views)
    stack_registry = (
        ImageRegistry(f"{m.name}-images", ImageRegistryArgs(image=spec.image, project=spec.project,
                                                            node_service_account=None,
                                                            more_readers=readers, protected=spec.prod))
        if spec.image is not None else None
    )
    # The bucket's one policy holds what every region needs: the workloads' KSA (project-wide) and GKE's replicator
    # when any region checkpoints in tiers.
    bucket = SharedCheckpointBucket(f"{m.name}-checkpoints", spec.storage, spec.project, bucket_members(
        project_number(spec.project), spec.project, spec.storage, replicators(views)))
    # One set of notification channels (each region's alerts notify them) and the scheduling dashboard.
    shared_monitoring = (SharedMonitoring(f"{m.name}-monitoring", SharedMonitoringArgs(spec=spec))
                         if spec.monitoring.enabled else None)
    stack_streaming = image_streaming_api(f"{m.name}-security", spec.project, stack_security) if streaming else None
    regions = {v.cluster.name: declare_region(v, lambda: stack_security, lambda _gke: stack_registry,
                                              shared_bucket=bucket, shared_monitoring=shared_monitoring,
                                              multikueue_worker=True, streaming_api=stack_streaming)
               for v in views}

    manager = ManagerCluster(m.name, ManagerClusterArgs(
        spec=spec, notifications_topic=stack_security.topic.id,
        depends_on=(*stack_security.services, stack_security.policy)))
    manager_ns = WorkloadNamespace(f"{m.name}-namespace", WorkloadNamespaceArgs(spec=views[0],
                                                                                k8s_provider=manager.provider))
    # The manager's Kueue with MultiKueue (README "Across regions: MultiKueue"): a MultiKueueCluster per region in
    # dispatch order, the MultiKueueConfig and its AdmissionCheck, the ClusterQueue with the workers' total quota,
    # the LocalQueue and priorities; the token CronJob reaching each worker's DNS endpoint; its Google identity.
    ordered = [d.view for d in order]
    mkm = multikueue.manager_of(spec)
    mk_manager = MultiKueueManager(f"{m.name}-multikueue", MultiKueueManagerArgs(
        manager=mkm, regions=ordered, k8s_provider=manager.provider,
        endpoints=[regions[v.cluster.name]["gke"].endpoint.apply(lambda e: f"https://{e}") for v in ordered],
        namespace=[manager_ns.namespace] if manager_ns.namespace else [], cluster=[manager.cluster]))
    # On each worker: the ServiceAccount the manager acts as, its RBAC, Kueue's metrics (after the region's Kueue).
    for v in ordered:
        r = regions[v.cluster.name]
        MultiKueueWorker(f"{v.cluster.name}-multikueue", MultiKueueWorkerArgs(
            region=v, manager=mkm, k8s_provider=r["provider"], queueing=[r["workloads"].queueing]))
    # The queued RayJobs once the manager's Kueue serves (its webhook sets spec.managedBy) and its queues exist.
    kueue_ready: list[pulumi.Resource] = [mk_manager.install, *mk_manager.objects.values()]
    queued = [(vs[0], vs[0].job(job)) for job, vs in spec.placements().items() if vs]
    jobs = QueuedRayJobs(f"{m.name}-jobs", QueuedRayJobsArgs(
        jobs=queued, k8s_provider=manager.provider,
        depends_on=([manager_ns.namespace] if manager_ns.namespace else []) + kueue_ready))

    pulumi.export("manager", manager.cluster.name)
    pulumi.export("managerLocation", m.region)
    pulumi.export("clusters", {n: r["gke"].cluster.name for n, r in regions.items()})
    pulumi.export("locations", {v.cluster.name: v.cluster.location for v in views})
    pulumi.export("dispatchOrder", [d.view.cluster.name for d in order])
    pulumi.export("workerImage", spec.worker_image)
    pulumi.export("bucket", bucket.bucket.name)
    pulumi.export("namespace", spec.storage.namespace)
    pulumi.export("securityBulletinsTopic", stack_security.topic.name)
    pulumi.export("kubernetesServiceAccount", f"{spec.storage.namespace}/{spec.storage.service_account}")
    pulumi.export("queuedRayJobs", list(jobs.jobs))
    pulumi.export("multikueueServiceAccount", mk_manager.google_service_account)  # the bootstrap's account
    pulumi.export("sliceNodePools", {n: [np.name for p in r["pools"] for np in p.node_pools]
                                     for n, r in regions.items()})
    pulumi.export("getCredentials", {v.cluster.name: get_credentials(v.cluster, spec.project) for v in views}
                  | {m.name: get_credentials(m.as_cluster(), spec.project)})


if spec.multi_region:
    multi_region()
else:
    single_region()
