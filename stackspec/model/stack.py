"""The stack: its ``gcp:*`` keys, the project's sections, the stack file's own keys, and read-only views of them.

Objects are frozen: what the program, the policies and the CLI read is what was checked. Build them through
:mod:`stackspec.loader`, which names the stack file and YAML line of every problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, model_validator
from pydantic.json_schema import SkipJsonSchema

from .. import checkpoints, cost, limits, names, zones
from .. import quota as tpu_quota
from .. import regions as places
from ..errors import MISSING, Problem, UnknownName
from .cluster import Cluster, Manager
from .jobs import Job
from .network import Network, SecondaryNetwork
from .options import UNVERIFIED, Deploy, Prices, Unverified
from .regions import RegionSite
from .slices import Slice, WorkerGroup
from .types import ENVIRONMENTS, NS, ProjectId, Region, Zone, _ns, resolved
from .workloads import Monitoring, RaySettings, Storage, WorkerImage


class StackSpec(BaseModel):
    """One stack: its ``gcp:*`` keys, the project's sections and the stack file's secrets provider."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, coerce_numbers_to_str=True)

    stack: str
    environment: Literal[ENVIRONMENTS] = Field(alias=_ns("environment"))
    project: ProjectId = Field(alias="gcp:project")
    # The bootstrap's CI project: the CI identities (image pusher, drill user) and the state keys live there.
    ci_project: ProjectId | None = Field(None, alias=_ns("ciProject"))  # required but in a sandbox (sandbox.py)
    # Deployed by hand, without the CI bootstrap (docs/sandbox.md). Strict, as every Section's switch (types.py): it
    # relaxes rules, and lax mode read 'yes', 'on' and 1 as true; Pulumi's text true is decoded to true first.
    sandbox: StrictBool = Field(False, alias=_ns("sandbox"))
    region: Region = Field(alias="gcp:region")
    # Required in a single-region stack (StackSpec._one_place); a multi-region stack names them per region.
    zone: Zone | None = Field(None, alias="gcp:zone")
    cluster: Cluster | None = Field(None, alias=_ns("cluster"))
    network: Network = Field(default_factory=Network, alias=_ns("network"))
    slices: tuple[Slice, ...] | None = Field(None, alias=_ns("slices"))
    storage: Storage = Field(alias=_ns("storage"))
    ray: RaySettings = Field(default_factory=RaySettings, alias=_ns("ray"))
    jobs: tuple[Job, ...] = Field((), alias=_ns("jobs"))
    image: WorkerImage | None = Field(None, alias=_ns("image"))  # absent: ray.image, MaxText installed at start
    monitoring: Monitoring = Field(default_factory=Monitoring, alias=_ns("monitoring"))
    prices: Prices = Field(default_factory=Prices, alias=_ns("prices"))
    unverified: Unverified = Field(default_factory=Unverified, alias=_ns("unverified"))
    # Several regions (README "Regions"): a manager cluster holding the queues, a cluster per region with its
    # zone, networks and slices, and the order MultiKueue offers a queued job to the regions.
    manager: Manager | None = Field(None, alias=_ns("manager"))
    regions: tuple[RegionSite, ...] = Field((), alias=_ns("regions"))
    dispatch: Literal[places.DISPATCH] = Field("cost", alias=_ns("dispatch"))
    deploy: Deploy = Field(default_factory=Deploy, alias=_ns("deploy"))
    quota: tuple[tpu_quota.QuotaEntry, ...] = Field((), alias=_ns("quota"))  # stackspec/quota.py
    # The stack file's own top-level keys (beside config:), as Pulumi writes them.
    secrets_provider: str | None = Field(None, alias="secretsprovider")
    encryption_salt: str | None = Field(None, alias="encryptionsalt")  # present: the passphrase provider
    encrypted_key: str | None = Field(None, alias="encryptedkey")

    # Resolved (stackspec.defaults), never read from the stack file:
    # the file the spec was read from (``--stacks-dir`` moves it), for messages;
    source: SkipJsonSchema[str | None] = resolved()
    # a region view's region and its place in tpu-multislice:regions;
    site: SkipJsonSchema[RegionSite | None] = resolved()
    site_index: SkipJsonSchema[int | None] = resolved()
    # a multi-region stack's region views, in the file's order, and each queued job -> the regions it fits.
    views: SkipJsonSchema[tuple[StackSpec, ...]] = resolved(())
    fits: SkipJsonSchema[dict[str, tuple[int, ...]]] = resolved({})

    # ------------------------------------------------------------------ views

    @property
    def prod(self) -> bool:
        return self.environment == "prod"

    @property
    def mtu(self) -> int:
        return self.network.mtu

    @property
    def networks(self) -> tuple[SecondaryNetwork, ...]:
        return self.network.secondary

    @property
    def dranet(self) -> bool:
        return bool(self.networks)

    @property
    def unverified_paths(self) -> dict[str, str]:
        """The opt-in paths this stack takes that nothing here can verify (spec key -> what is unverified)."""
        on = self.unverified.model_dump(by_alias=True)
        return {_ns(f"unverified.{k}"): why for k, why in UNVERIFIED.items() if on.get(k)}

    @property
    def worker_image(self) -> str:
        """What every Ray container runs: the prebuilt image by digest, or ``ray.image`` (MaxText then installs
        at worker start) when the stack has no prebuilt image or its digest is still pending."""
        if not self.prebuilt_image:
            return self.ray.image
        return names.image_reference(self.image.location, self.project, self.image.repository, self.image.name,
                                     self.image.digest)

    @property
    def prebuilt_image(self) -> bool:
        """The workers run the stack's own image (its digest is set)."""
        return self.image is not None and not self.image.pending

    @cached_property
    def groups(self) -> tuple[WorkerGroup, ...]:
        order: dict[str, list[Slice]] = {}
        for s in self.slices:
            order.setdefault(s.group, []).append(s)
        return tuple(WorkerGroup(g, ss[0].shape, tuple(ss)) for g, ss in order.items())

    def group(self, name: str) -> WorkerGroup:
        return next(g for g in self.groups if g.name == name)

    def step_time(self, job: Job) -> tuple[float, str] | None:
        """Seconds per step and where the figure comes from (:func:`stackspec.checkpoints.job_step_seconds`)."""
        return checkpoints.job_step_seconds(job, self.group(job.group).shape.pod_type)

    @property
    def stack_file(self) -> str:
        """The stack file the spec was read from (``stacks/Pulumi.<stack>.yaml`` unless read elsewhere)."""
        return self.source or names.stack_file(self.stack)

    def job(self, name: str | None = None) -> Job:
        """The named job, or the stack's first; :class:`UnknownName` naming the stack file otherwise."""
        where = self.stack_file
        if not self.jobs:
            raise UnknownName(f"{where}: {NS}:jobs is empty; add a job")
        if name is None:
            return self.jobs[0]
        for job in self.jobs:
            if job.name == name:
                return job
        raise UnknownName(f"{where}: no job named {name!r} in {NS}:jobs; allowed: "
                          f"{', '.join(j.name for j in self.jobs)}")

    def drill_job(self, name: str | None = None) -> Job:
        """The named job, else the first running elastic job (what a preemption drill is for)."""
        if name:
            return self.job(name)
        running = [j for j in self.jobs if j.elastic and not j.suspend]
        elastic = [j for j in self.jobs if j.elastic]
        return (running or elastic or [self.job()])[0]

    def derived_names(self) -> list[names.Derived]:
        """Every name the stack deploys, with the spec key it comes from and its limit."""
        d, c, ray = names.Derived, self.cluster.name, self.ray.cluster_name
        sa = names.node_service_account_id(c)
        out = [
            d(_ns("cluster.name"), c, limits.GKE_CLUSTER, "the GKE cluster"),
            d(_ns("cluster.name"), sa, limits.SERVICE_ACCOUNT_ID, f"the node service account <cluster>-nodes ({sa})"),
            d(_ns("ray.clusterName"), ray, limits.RAY_CLUSTER, "the shared RayCluster"),
            d(_ns("ray.clusterName"), names.trainer_configmap(ray), limits.CONFIG_MAP,
              "the trainer ConfigMap <clusterName>-trainer"),
            d(_ns("storage.namespace"), self.storage.namespace, limits.K8S_NAMESPACE, "the workload namespace"),
            d(_ns("storage.serviceAccount"), self.storage.service_account, limits.K8S_SERVICE_ACCOUNT,
              "the workloads' Kubernetes service account"),
            d("stack", self.stack, limits.LABEL_VALUE, "the tpu-multislice/stack label on every object"),
        ]
        if self.deploy.on_push:
            out.append(d(_ns("deploy.onPush"), names.deploy_account_id(self.stack), limits.SERVICE_ACCOUNT_ID,
                         "the stack's deploy identity ci-deploy-<stack> (bootstrap/)"))
        if self.image is not None:
            out.append(d(_ns("image.repository"), self.image.repository, limits.ARTIFACT_REPOSITORY,
                         "the Artifact Registry repository"))
        primary = self.network.primary
        out += [d(_ns("network.primary.network"), primary.network, limits.COMPUTE_NETWORK, "the cluster's VPC"),
                d(_ns("network.primary.subnet"), primary.subnet, limits.COMPUTE_SUBNETWORK, "the nodes' subnet")]
        for i, net in enumerate(self.networks):
            k = _ns(f"network.secondary[{i}]")
            out += [d(f"{k}.network", net.network, limits.COMPUTE_NETWORK, "a secondary VPC"),
                    d(f"{k}.network", names.dcn_firewall(net.network), limits.COMPUTE_FIREWALL,
                      "its ingress firewall <network>-allow-internal"),
                    d(f"{k}.subnet", net.subnet, limits.COMPUTE_SUBNETWORK, "a secondary subnet")]
        for i, s in enumerate(self.slices):
            k = _ns(f"slices[{i}]")
            out += [d(f"{k}.name", s.name, limits.GKE_NODE_POOL, "the slice's node pool"),
                    d(f"{k}.group", s.group, limits.RAY_WORKER_GROUP, "the Ray worker group")]
            out += [d(f"{k}.name", pool, limits.GKE_NODE_POOL, f"the node pool of its {c.type} option <name>-<suffix>")
                    for c, pool in s.pools if pool != s.name]
        for g in self.groups:
            i = next(n for n, s in enumerate(self.slices) if s.group == g.name)
            # The class name is also a node label value (cloud.google.com/compute-class=<class>).
            out.append(d(_ns(f"slices[{i}].group"), g.compute_class, limits.LABEL_VALUE,
                         "the worker group's ComputeClass <group>-class (a node label value)"))
        for i, j in enumerate(self.jobs):
            k = _ns(f"jobs[{i}]")
            out += [d(f"{k}.name", j.name, limits.RAY_JOB, "the RayJob (KubeRay appends 6 characters for its cluster)"),
                    d(f"{k}.name", names.submitter_job(j.name), limits.LABEL_VALUE,
                      "the submitter Job and the tpu-multislice/job label"),
                    d(f"{k}.name", j.run_name, limits.RUN_NAME, "the MaxText run name <name>-<8 hex>")]
        return out

    # ------------------------------------------------------------------ rules across sections

    @model_validator(mode="before")
    @classmethod
    def _zone_in_region(cls, data: Any, info: ValidationInfo) -> Any:
        # Checked on the raw keys too, so it is reported even when a section is invalid.
        if isinstance(data, Mapping) and info.context is not None:
            zone, region = data.get("gcp:zone"), data.get("gcp:region")
            if isinstance(zone, str) and isinstance(region, str) and not zone.startswith(region + "-"):
                gens = {s.get("generation", "v6e") for s in data.get(_ns("slices")) or [] if isinstance(s, Mapping)}
                hint = "; ".join(zones.suggestion(region, str(g)) for g in sorted(gens, key=str)) or f"e.g. {region}-b"
                info.context.setdefault("problems", []).append(
                    Problem("gcp:zone", zone, f"must be a zone of gcp:region {region} ({hint})"))
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_place(cls, data: Any, info: ValidationInfo) -> Any:
        """A single-region stack names its zone, cluster and slices at the top; a multi-region stack names them
        per region and refuses them at the top (one place per fact)."""
        if not isinstance(data, Mapping):
            return data
        problems = []
        if data.get(_ns("regions")):
            for key, where in (("gcp:zone", "zone"), (_ns("cluster"), "cluster"), (_ns("network"), "network"),
                               (_ns("slices"), "slices")):
                if key in data:
                    problems.append(Problem(key, data[key], f"a stack with {_ns('regions')} names each region's "
                                            f"{where} there (regions[].{where}): move it (one place per fact)"))
            if data.get(_ns("manager")) is None:
                problems.append(Problem(_ns("manager"), MISSING, "required with regions: the cluster that holds the "
                                        "queues, e.g. {name: tpu-manager, version: 1.35.2-gke.1842000} (Autopilot)"))
        else:
            for key in ("gcp:zone", _ns("cluster"), _ns("slices")):
                if data.get(key) is None:
                    problems.append(Problem(key, MISSING, "required"))
            for key in (_ns("manager"), _ns("dispatch")):
                if key in data:
                    problems.append(Problem(key, data[key], f"only with {_ns('regions')} (a multi-region stack)"))
        if problems:
            if info.context is None:
                raise ValueError("; ".join(p.render() for p in problems))
            info.context.setdefault("problems", []).extend(problems)
        return data

    @property
    def multi_region(self) -> bool:
        return bool(self.regions)

    @property
    def home(self) -> tuple[str, str]:
        """(cluster, region) the stack-wide resources are named after and kept in: the stack's cluster, or a
        multi-region stack's manager (the bulletin topic, the image attestor and its signing key)."""
        if self.multi_region:
            return self.manager.name, self.manager.region or self.region
        return self.cluster.name, self.region

    def region_views(self) -> tuple[StackSpec, ...]:
        """Each region as a single-region stack (its zone, cluster, networks, slices and prices, the jobs it may
        run), in the file's order; a single-region stack is its own only view."""
        if not self.regions:
            return (self,)
        return self.views

    def created_here(self) -> tuple[Job, ...]:
        """The jobs whose RayJob is created in this cluster: all of a single-region stack's; in a region view, those
        naming its region (the queued ones are created on the manager and mirrored here by MultiKueue)."""
        if self.site is None:
            return self.jobs
        return tuple(j for j in self.jobs if j.region is not None)

    def placements(self) -> dict[str, tuple[StackSpec, ...]]:
        """Each job queued through the manager -> the region views that can run it, in dispatch order."""
        order = [d.index for d in self.dispatch_order()]
        by_index = {v.site_index: v for v in self.region_views()}
        return {name: tuple(by_index[i] for i in order if i in idx and i in by_index)
                for name, idx in self.fits.items()}

    def dispatch_order(self) -> tuple[cost.Dispatch, ...]:
        """The regions in the order the manager's MultiKueueConfig lists them, and why each is where it is
        (price-sorted dispatch is cost logic: :func:`stackspec.cost.dispatch_order`)."""
        return cost.dispatch_order(self)


def config_keys() -> Mapping[str, str]:
    """The stack file's config keys and what each section is, for messages and docs."""
    return {f.alias or n: n for n, f in StackSpec.model_fields.items() if f.alias}
