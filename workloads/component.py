"""RayWorkloads: the training objects of a stack, applied through the cluster's provider.

The documents come from ``workloads/manifests.py`` (pure functions of the spec); this
component only declares them: the DRANET ResourceClaimTemplate, the trainer ConfigMap,
the shared RayCluster and one RayJob per job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from stackspec.rules.kueue import MULTIKUEUE_CONTROLLER
from stackspec.spec import StackSpec
from workloads import compute_class, manifests, multitier, security
from workloads import monitoring as gmp
from workloads.queueing import KueueQueueing, KueueQueueingArgs


@dataclass(frozen=True)
class RayWorkloadsArgs:
    spec: StackSpec
    k8s_provider: k8s.Provider
    # What the pods need before they start: the checkpoint store's KSA (workload identity).
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # The workload namespace (workloads/namespace.py): every namespaced object here waits for it.
    namespace: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # The trainer script's text; None reads workloads/trainer/maxtext_trainer.py.
    trainer_source: str | None = None
    # The jobs whose RayJob is created in this cluster; None: every declared job. A region of a multi-region stack
    # creates only the jobs naming it (StackSpec.created_here): the queued ones come from the manager through
    # MultiKueue, and their heads' NetworkPolicies and monitoring are still declared here.
    created: Sequence[str] | None = None


def _custom(name: str, doc: dict, opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    return k8s.apiextensions.CustomResource(
        name,
        api_version=doc["apiVersion"],
        kind=doc["kind"],
        metadata=doc["metadata"],
        spec=doc["spec"],
        opts=opts,
    )


def _rbac(name: str, doc: dict, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    rbac = k8s.rbac.v1
    if doc["kind"] in ("Role", "ClusterRole"):
        cls = rbac.Role if doc["kind"] == "Role" else rbac.ClusterRole
        return cls(name, metadata=doc["metadata"], rules=doc["rules"], opts=opts)
    cls = rbac.RoleBinding if doc["kind"] == "RoleBinding" else rbac.ClusterRoleBinding
    return cls(name, metadata=doc["metadata"], role_ref=doc["roleRef"], subjects=doc["subjects"], opts=opts)


class RayWorkloads(pulumi.ComponentResource):
    """ResourceClaimTemplate, trainer ConfigMap, RayCluster and RayJobs of one stack."""

    claim_template: k8s.resource.v1.ResourceClaimTemplate | None
    trainer: k8s.core.v1.ConfigMap
    cluster: k8s.apiextensions.CustomResource | None
    jobs: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: RayWorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:RayWorkloads", name, None, opts)
        spec = args.spec
        base = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=list(args.namespace))
        needs = list(args.depends_on)

        self.claim_template = None
        if spec.dranet:
            doc = manifests.resource_claim_template(spec)
            self.claim_template = k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-netdev",
                metadata=doc["metadata"],
                spec=doc["spec"],
                # The template is immutable in Kubernetes: a new device count means a new one.
                opts=pulumi.ResourceOptions.merge(
                    base, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
                ),
            )
            needs.append(self.claim_template)

        doc = manifests.trainer_configmap(spec, args.trainer_source)
        self.trainer = k8s.core.v1.ConfigMap(f"{name}-trainer", metadata=doc["metadata"], data=doc["data"], opts=base)
        needs.append(self.trainer)

        # One ComputeClass per worker group (cluster-scoped): the pods that select it come after.
        self.compute_classes = [
            _custom(f"{name}-{doc['metadata']['name']}", doc, base) for doc in compute_class.compute_classes(spec)
        ]
        needs += self.compute_classes
        # Multi-tier checkpointing (an unverified opt-in): GKE's CheckpointConfiguration before pods mount its volume.
        if multitier.enabled(spec):
            cpc = multitier.checkpoint_configuration(spec)
            needs.append(_custom(f"{name}-{cpc['metadata']['name']}", cpc, base))

        # Each Ray head's NetworkPolicy exists before its pods do (no window with the head open).
        policies = security.network_policies(spec, manifests.needs_shared_cluster(spec), manifests.declared_jobs(spec))
        self.network_policies = [
            k8s.networking.v1.NetworkPolicy(f"{name}-{np['metadata']['name']}", metadata=np["metadata"],
                                            spec=np["spec"], opts=base)
            for np in policies
        ]
        needs += self.network_policies
        # What the drill identity may delete (label checks RBAC cannot make), in force before its RBAC binds ...
        admission = k8s.admissionregistration.v1
        self.drill_admission = []
        for policy, binding in [security.drill_admission_policy(spec)] if security.drill_user(spec) else []:
            vap = admission.ValidatingAdmissionPolicy(f"{name}-drill-admission", metadata=policy["metadata"],
                                                      spec=policy["spec"], opts=base)
            self.drill_admission = [vap, admission.ValidatingAdmissionPolicyBinding(
                f"{name}-drill-admission-binding", metadata=binding["metadata"], spec=binding["spec"],
                opts=pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(depends_on=[vap])))]
        # ... and its RBAC: exactly what drills/cluster.py calls.
        after_admission = pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(depends_on=self.drill_admission))
        self.drill_rbac = [_rbac(f"{name}-drill-{d['kind'].lower()}", d, after_admission)
                           for d in security.drill_rbac(spec)]

        # Kueue and the stack's queues: the RayCluster and RayJobs it manages come once its webhook serves.
        self.queueing = KueueQueueing(f"{name}-kueue", KueueQueueingArgs(spec=spec, k8s_provider=args.k8s_provider,
                                                                         namespace=tuple(args.namespace)),
                                      pulumi.ResourceOptions(parent=self))
        needs.append(self.queueing)

        self.cluster = None
        if manifests.needs_shared_cluster(spec):
            self.cluster = _custom(
                f"{name}-cluster",
                manifests.ray_cluster(spec),
                pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(depends_on=needs)),
            )

        # KubeRay acts on a RayJob once: any change to it (the trainer files' digest in its
        # annotations included) must replace it so the job runs again.
        job_needs = needs + ([self.cluster] if self.cluster else [])
        self.jobs = {
            job.name: _custom(
                f"{name}-{job.name}",
                manifests.ray_job(spec, job, args.trainer_source),
                pulumi.ResourceOptions.merge(
                    base,
                    pulumi.ResourceOptions(
                        depends_on=job_needs,
                        replace_on_changes=["spec", "metadata"],
                        delete_before_replace=True,
                    ),
                ),
            )
            for job in manifests.declared_jobs(spec)
            if args.created is None or job.name in args.created
        }

        # Google Managed Prometheus scrapes the Ray metrics port of each RayCluster's head and workers.
        monitors = gmp.pod_monitorings(spec)
        self.pod_monitorings = [_custom(f"{name}-{doc['metadata']['name']}", doc, base) for doc in monitors]

        self.register_outputs(
            {
                "podMonitorings": [doc["metadata"]["name"] for doc in monitors],
                "networkPolicies": [np["metadata"]["name"] for np in policies],
                "drillUser": security.drill_user(spec),
                "claimTemplate": manifests.claim_template_name(spec) if spec.dranet else None,
                "trainerConfigMap": manifests.trainer_configmap_name(spec),
                "trainerSha256": doc["metadata"]["annotations"][manifests.TRAINER_HASH_ANNOTATION],
                "rayCluster": spec.ray.cluster_name if self.cluster else None,
                "rayJobs": list(self.jobs),
                "computeClasses": [g.compute_class for g in spec.groups],
            }
        )


@dataclass(frozen=True)
class QueuedRayJobsArgs:
    # (region view, job): each job queued through the manager, rendered from the first region that can run it (the
    # policy queued-rayjob-same-in-every-region checks every region would render it alike).
    jobs: Sequence[tuple[StackSpec, object]]
    k8s_provider: k8s.Provider
    # What must serve first: the manager's Kueue (its webhook sets spec.managedBy) and the workload namespace.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)


class QueuedRayJobs(pulumi.ComponentResource):
    """The RayJobs of a multi-region stack, created on the manager with spec.managedBy kueue.x-k8s.io/multikueue
    (:func:`queued`; Kueue v0.19.2 site/content/en/docs/tasks/run/multikueue/kuberay.md: the value Kueue defaults
    there), so KubeRay leaves them alone and MultiKueue mirrors each to the region that admits it."""

    jobs: dict[str, k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: QueuedRayJobsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:workloads:QueuedRayJobs", name, None, opts)
        # The DRANET claim template the jobs' workers name, on the manager too: its Kueue reads it to count the
        # devices against quota (kueue v0.19.2 pkg/dra/claims.go:130-146,168-178; a missing template leaves
        # the Workload inadmissible, pkg/controller/core/workload_controller.go:470-494), as upstream's
        # test/e2e/multikueue/dra/dra_test.go:162-176 creates it on the manager. Inert there: no pod uses it.
        ns = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider, depends_on=list(args.depends_on))
        templates = {}
        for view, _job in args.jobs:
            if view.dranet and manifests.claim_template_name(view) not in templates:
                doc = manifests.resource_claim_template(view)
                templates[doc["metadata"]["name"]] = k8s.resource.v1.ResourceClaimTemplate(
                    f"{name}-{doc['metadata']['name']}", metadata=doc["metadata"], spec=doc["spec"],
                    opts=pulumi.ResourceOptions.merge(ns, pulumi.ResourceOptions(
                        replace_on_changes=["spec"], delete_before_replace=True)))
        self.claim_templates = templates
        base = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider,
                                      depends_on=[*args.depends_on, *templates.values()],
                                      replace_on_changes=["spec", "metadata"], delete_before_replace=True)
        self.jobs = {job.name: _custom(f"{name}-{job.name}", queued(manifests.ray_job(view, job)), base)
                     for view, job in args.jobs}
        self.register_outputs({"rayJobs": list(self.jobs), "claimTemplates": list(templates)})


def queued(doc: dict) -> dict:
    """A RayJob created on the manager, handed to MultiKueue from its creation: ``spec.managedBy`` is what Kueue's
    webhook would default (jobframework/defaults.go:127-148), set by the stack so that it does not depend on the
    webhook's caches having seen the LocalQueue, ClusterQueue and AdmissionCheck yet (the default is silently
    skipped otherwise, and the field is immutable: KubeRay CRD CEL ``self == oldSelf``); MultiKueue clears it on
    the worker's copy (ray_multikueue_adapter.go:217-218 setManagedBy nil)."""
    return {**doc, "spec": {**doc["spec"], "managedBy": MULTIKUEUE_CONTROLLER}}
