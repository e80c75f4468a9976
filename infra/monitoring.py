"""Cloud Monitoring for the stack: log-based metrics, notification channels, alert policies, one dashboard.

What an on-call engineer needs at 3 a.m., from signals that exist:

- Ray's own metrics, scraped by Google Managed Prometheus from every Ray node's metrics port
  (``workloads/monitoring.py``): ``ray_tpu_duty_cycle`` (per TPU chip, Ray's reporter agent,
  ``ray/dashboard/modules/reporter/reporter_agent.py``) and ``ray_train_controller_state`` (Ray Train
  V2's controller, 1 for its current state: ``ray/train/v2/_internal/metrics/controller.py``).
  Target labels ``ray_cluster``, ``ray_group``, ``ray_replica`` (one replica is one slice) come from
  KubeRay's pod labels.
- GKE's system metric ``kubernetes.io/container/accelerator/duty_cycle`` (GA; PromQL
  ``kubernetes_io:container_accelerator_duty_cycle``), beside Ray's on the dashboard.
- Log-based counters: MaxText's checkpoint lines (``maxtext.common.checkpointing.print_save_message``:
  "Started an asynchronous checkpoint save for step N" / "Saved a checkpoint at step N."), the
  trainer's per-step progress lines (steps/s), and Compute Engine's ``compute.instances.preempted``
  and ``compute.instances.hostError`` system events for the cluster's nodes.

Alert conditions are PromQL (``condition_prometheus_query_language``), which reads all three sources.
Thresholds come from the spec's ``monitoring`` section. The query text is built by pure functions
(:func:`alert_queries`, :func:`dashboard`) so tests read exactly what is deployed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from stackspec import names
from stackspec.spec import NotificationChannel, StackSpec

SERVICES = ("monitoring.googleapis.com", "logging.googleapis.com")

# Ray's metric names (the ``ray_`` prefix is Ray's exporter's) and the controller's states.
RAY_TPU_DUTY_CYCLE = "ray_tpu_duty_cycle"
RAY_TRAIN_STATE = "ray_train_controller_state"
RUNNING = "RUNNING"
FAILING_STATES = ("ERRORED", "RESTARTING", "RESCHEDULING")
GKE_DUTY_CYCLE = "kubernetes_io:container_accelerator_duty_cycle"  # kubernetes.io/container/accelerator/duty_cycle
# MaxText 0.2.1's checkpoint lines (async saves log the first, synchronous ones the second).
CHECKPOINT_LINES = ("Started an asynchronous checkpoint save for step", "Saved a checkpoint at step")
# The trainer's progress protocol (workloads/trainer/maxtext_trainer.py: PROGRESS, one "step" event per step).
PROGRESS_MARKER = "slicectl-progress"
STEP_EVENT = '"event": "step"'
PREEMPTION_METHODS = ("compute.instances.preempted", "compute.instances.hostError")
# IAM changes in the stack's project, from its Admin Activity audit log (always on): every service's
# SetIamPolicy (projects, service accounts, repositories, keys...), Cloud Storage's bucket IAM call, and custom
# role changes (https://cloud.google.com/logging/docs/audit/understanding-audit-logs; CIS Google Cloud
# Foundations 2.4-2.6 alert on IAM, ownership and custom-role changes the same way).
IAM_CHANGE_METHODS = ("SetIamPolicy", "storage.setIamPermissions", "google.iam.admin.v1.CreateRole",
                      "google.iam.admin.v1.UpdateRole", "google.iam.admin.v1.DeleteRole")
CHANNEL_TYPES = {"email": ("email", "email_address"), "pubsub": ("pubsub", "topic"),
                 "webhook": ("webhook_tokenauth", "url")}


def log_metric_name(spec: StackSpec, what: str, cluster: str | None = None) -> str:
    """A log-based metric's name (of the stack's cluster, or ``cluster``: the manager's); underscores only, so its
    PromQL name is the same text."""
    return f"{cluster or spec.cluster.name}_{what}".replace("-", "_")


def promql_log_metric(spec: StackSpec, what: str, cluster: str | None = None) -> str:
    return f"logging_googleapis_com:user_{log_metric_name(spec, what, cluster)}"


def _sel(spec: StackSpec, **extra: str) -> str:
    """A PromQL selector body for the stack's cluster and workload namespace."""
    pairs = {"cluster": spec.cluster.name, "namespace": spec.storage.namespace, **extra}
    return ", ".join(f'{k}{"=~" if "|" in v else "="}"{v}"' for k, v in pairs.items())


def _running(spec: StackSpec, by: str) -> str:
    return f"max by ({by}) ({RAY_TRAIN_STATE}{{{_sel(spec, ray_train_controller_state=RUNNING)}}}) == 1"


def _quoted(text: str) -> str:
    """Text inside a Logging query string literal: double quotes escaped."""
    return text.replace('"', '\\"')


def log_filters(spec: StackSpec) -> dict[str, str]:
    """The Cloud Logging filters of the stack's log-based metrics."""
    pods = (f'resource.type="k8s_container" AND resource.labels.cluster_name="{spec.cluster.name}" '
            f'AND resource.labels.namespace_name="{spec.storage.namespace}"')
    saves = " OR ".join(f'textPayload:"{line}"' for line in CHECKPOINT_LINES)
    methods = " OR ".join(f'protoPayload.methodName="{m}"' for m in PREEMPTION_METHODS)
    return {
        "checkpoint_saves": f"{pods} AND ({saves})",
        "train_steps": f'{pods} AND textPayload:"{PROGRESS_MARKER}" AND textPayload:"{_quoted(STEP_EVENT)}"',
        "preemptions": (f'resource.type="gce_instance" AND logName="projects/{spec.project}/logs/'
                        f'cloudaudit.googleapis.com%2Fsystem_event" AND ({methods}) '
                        f'AND protoPayload.resourceName:"/instances/gke-"'),
        "iam_changes": (f'logName="projects/{spec.project}/logs/cloudaudit.googleapis.com%2Factivity" AND ('
                        + " OR ".join(f'protoPayload.methodName:"{m}"' for m in IAM_CHANGE_METHODS) + ")"),
    }


@dataclass(frozen=True)
class Alert:
    key: str
    display_name: str
    query: str
    duration: str
    severity: str
    documentation: str


def alert_queries(spec: StackSpec) -> list[Alert]:
    m = spec.monitoring
    low, minutes, age = m.duty_cycle_low_percent, m.duty_cycle_low_minutes, m.checkpoint_max_age_minutes
    c = spec.cluster.name
    failing = "|".join(FAILING_STATES)
    return [
        Alert(
            "duty-cycle-low",
            f"{c}: TPU duty cycle below {low:g}% for {minutes} min while training",
            f"avg by (ray_cluster) ({RAY_TPU_DUTY_CYCLE}{{{_sel(spec)}}}) < {low:g}\n"
            f"and on (ray_cluster)\n{_running(spec, 'ray_cluster')}",
            f"{minutes * 60}s",
            "WARNING",
            "A Ray Train run is RUNNING but its TPUs have been mostly idle: input-bound, stuck in a "
            "collective (a lost slice peer), or compiling in a loop. Check the RayJob's logs and the "
            "per-slice duty cycle on the dashboard; a hung multislice job holds every slice it has.",
        ),
        Alert(
            "run-failed-or-restarted",
            f"{c}: Ray Train run failed or restarted",
            f"max by (ray_cluster, ray_train_run_name, ray_train_controller_state) (max_over_time("
            f"{RAY_TRAIN_STATE}{{{_sel(spec, ray_train_controller_state=failing)}}}[5m])) > 0",
            "0s",
            "ERROR",
            "The Ray Train controller entered ERRORED (the run is over: the RayJob fails) or is restarting "
            "or rescheduling its worker group after a worker failure (a preemption spends maxFailures). "
            "Check the RayJob status, `slicectl drill` figures, and the preemption chart.",
        ),
        Alert(
            "node-preempted",
            f"{c}: a node of the cluster was preempted or lost to a host error",
            f"sum(increase({promql_log_metric(spec, 'preemptions')}[10m])) > 0",
            "0s",
            "WARNING",
            "Compute Engine preempted (Spot) or lost a GKE node VM. A slice is all-or-nothing: its node pool "
            "recreates the slice; elastic jobs continue on the remaining slices, multislice jobs fail.",
        ),
        Alert(
            "iam-changed",
            f"{c}: IAM changed in project {spec.project}",
            f"sum(increase({promql_log_metric(spec, 'iam_changes')}[10m])) > 0",
            "0s",
            "WARNING",
            # A sandbox has no CI: no deploy.yml run to match a change to (docs/sandbox.md).
            "A SetIamPolicy (or custom role change) in the stack's project. "
            + ("A `pulumi up` of the sandbox makes some (its node account's role, its bucket's bindings): match it "
               "to one of yours; anything else is a grant the stack did not make." if spec.sandbox else
               "A deploy of the stack makes some (its bucket's and repository's bindings, the MultiKueue account's "
               "workload identity): match it to a deploy.yml run; anything else is a grant no reviewed change made "
               "(docs/ci-trust.md)."),
        ),
        Alert(
            "checkpoint-stale",
            f"{c}: no checkpoint saved for {age} min while training",
            f"(sum(increase({promql_log_metric(spec, 'checkpoint_saves')}[{age}m])) or on() vector(0)) == 0\n"
            f"and on ()\n{_running(spec, '')}",
            "300s",
            "ERROR",
            f"A run is RUNNING but MaxText has not started a checkpoint save for {age} minutes: a preemption "
            "now loses everything since the last one. Check checkpoint_period against the step time and the "
            "bucket (GCS FUSE errors in the worker logs).",
        ),
    ]


def _chart(title: str, query: str, x: int, y: int, unit: str = "") -> dict[str, Any]:
    ds: dict[str, Any] = {"timeSeriesQuery": {"prometheusQuery": query}, "plotType": "LINE"}
    if unit:
        ds["timeSeriesQuery"]["unitOverride"] = unit
    return {"xPos": x, "yPos": y, "width": 24, "height": 16,
            "widget": {"title": title, "xyChart": {"dataSets": [ds]}}}


def dashboard(spec: StackSpec, policy_names: list[str] | None = None) -> dict[str, Any]:
    """The stack's dashboard (Cloud Monitoring's mosaicLayout JSON)."""
    ck, steps, pre = (promql_log_metric(spec, k) for k in ("checkpoint_saves", "train_steps", "preemptions"))
    gke = f'monitored_resource="k8s_container", cluster_name="{spec.cluster.name}", ' \
          f'namespace_name="{spec.storage.namespace}"'
    tiles = [
        _chart("TPU duty cycle per slice (Ray, %)",
               f"avg by (ray_cluster, ray_group, ray_replica) ({RAY_TPU_DUTY_CYCLE}{{{_sel(spec)}}})", 0, 0, "%"),
        _chart("TPU duty cycle per pod (GKE system metric, %)",
               f"avg by (pod_name) ({GKE_DUTY_CYCLE}{{{gke}}})", 24, 0, "%"),
        _chart("Training steps per second", f"sum(rate({steps}[5m]))", 0, 16),
        _chart("Ray Train controller state (1 = current)",
               f"max by (ray_train_run_name, ray_train_controller_state) ({RAY_TRAIN_STATE}{{{_sel(spec)}}})",
               24, 16),
        _chart("Node preemptions and host errors (per hour)", f"sum by (event) (increase({pre}[1h]))", 0, 32),
        _chart("Checkpoint saves started (per hour)", f"sum(increase({ck}[1h]))", 24, 32),
    ]
    for i, name in enumerate(policy_names or []):
        tiles.append({"xPos": (i % 2) * 24, "yPos": 48 + (i // 2) * 12, "width": 24, "height": 12,
                      "widget": {"title": "Alert", "alertChart": {"name": name}}})
    return {"displayName": f"{spec.cluster.name}: TPU training ({spec.stack})",
            "mosaicLayout": {"columns": 48, "tiles": tiles}}


# Kueue's wait histograms (kubernetes-sigs/kueue pkg/metrics/metrics.go at v0.19.2, subsystem "kueue"; labels
# cluster_queue, priority_class, replica_role; GMP adds the scraping GKE cluster as ``cluster``), scraped from
# each Kueue by the PodMonitoring of workloads/multikueue.py.
KUEUE_WAITS = {
    "kueue_admission_wait_time_seconds": "queued until admitted",
    "kueue_admission_checks_wait_time_seconds": "quota reserved until admitted (DWS, MultiKueue)",
    "kueue_admitted_until_ready_wait_time_seconds": "admitted until every pod ready (slices arrive)",
}
# The manager's admissions on each worker (subsystem "multikueue"; kueue v0.19.2 pkg/metrics/metrics.go:382-388
# ``workloads_admitted_total``, "remote workload admissions on a worker cluster, per 'cluster_queue' and 'cluster'"),
# not its dispatches (``workloads_dispatched_total``, :374-380: a remote copy created, admitted or not). Labelled
# with the worker as "cluster": Prometheus keeps a scraped label that collides with a target label (GMP's cluster)
# as exported_cluster.
KUEUE_ADMITTED = "multikueue_workloads_admitted_total"
# A ClusterQueue's state, 1 on its current one of pending/active/terminating (metrics.go:772-780 at v0.19.2). A
# ClusterQueue is pending, and admits nothing, while an AdmissionCheck it names is inactive; the manager's MultiKueue
# check turns inactive when no MultiKueueCluster of its config is active ("NoUsableClusters",
# pkg/controller/admissionchecks/multikueue/admissioncheck.go:92-100), and stays active with only some ("Some
# ActiveClusters"). Kueue v0.19.2: tag v0.19.2, commit 8eab68778fc1b52affe165fdf5af29d1e9b4f3cb.
KUEUE_CQ_STATUS = "kueue_cluster_queue_status"
# Evictions per ClusterQueue and reason; "PodsReadyTimeout": the workload's pods were not ready within
# waitForPodsReady's timeout (metrics.go:630-642 at v0.19.2). On the manager: a region admitted a job it cannot start.
KUEUE_EVICTED = "kueue_evicted_workloads_total"
# One inactive MultiKueueCluster among several has no Kueue metric (metrics.go has none per MultiKueueCluster): the
# manager's Kueue logs at error level each time it cannot connect one and sets Active=False
# (multikueuecluster.go:896-916: "loading client config failed", "setting client config").
KUEUE_CLUSTER_ERRORS = ("loading client config failed", "setting client config")
# The token CronJob's lines (workloads/multikueue_token.py main): one per refreshed kubeconfig, one on failure.
TOKEN_REFRESHED, TOKEN_FAILED = ": updated (kubeconfig", "multikueue-token:"


def scheduling_tiles(clusters: list[str], y: int = 0) -> list[dict[str, Any]]:
    """Scheduling goodput across regions: mean wait per region (GKE cluster) and ClusterQueue for each of
    Kueue's waits, and the manager's dispatches per region. Only the multi-region dashboard has them (a
    single-region stack renders as before)."""
    sel = f'cluster=~"{"|".join(clusters)}"'
    tiles = []
    for i, (metric, what) in enumerate(KUEUE_WAITS.items()):
        query = (f"sum by (cluster, cluster_queue) (rate({metric}_sum{{{sel}}}[1h]))\n/ "
                 f"sum by (cluster, cluster_queue) (rate({metric}_count{{{sel}}}[1h]))")
        tiles.append(_chart(f"Mean wait, {what} (s, per region and ClusterQueue)", query, (i % 2) * 24,
                            y + (i // 2) * 16, "s"))
    tiles.append(_chart("Jobs admitted per region (MultiKueue, per hour)",
                        f"sum by (exported_cluster) (increase({KUEUE_ADMITTED}[1h]))", 24, y + 16))
    return tiles


def manager_log_filters(spec: StackSpec) -> dict[str, str]:
    """The manager's log-based metrics: its token CronJob's refreshes and failures, its Kueue's lost workers."""
    pods = (f'resource.type="k8s_container" AND resource.labels.cluster_name="{spec.manager.name}" '
            f'AND resource.labels.namespace_name="{names.KUEUE_NAMESPACE}"')
    token = f'{pods} AND resource.labels.container_name="{names.MULTIKUEUE_TOKEN_CONTAINER}"'
    return {
        "multikueue_token_refreshed": f'{token} AND textPayload:"{_quoted(TOKEN_REFRESHED)}"',
        "multikueue_token_failed": f'{token} AND textPayload:"{TOKEN_FAILED}"',
        # Kueue logs JSON (its message in jsonPayload): a global search finds the text in any field.
        "multikueue_cluster_errors": f"{pods} AND (" + " OR ".join(f'"{m}"' for m in KUEUE_CLUSTER_ERRORS) + ")",
    }


def manager_alert_queries(spec: StackSpec) -> list[Alert]:
    """What stops every multi-region dispatch: the token CronJob failing (three missed runs and every worker's
    kubeconfig has expired: workloads/multikueue.py TOKEN_SECONDS, TOKEN_SCHEDULE), a worker the manager cannot
    reach (its MultiKueueCluster Active=False), a ClusterQueue not active on the manager or a region."""
    m = spec.manager.name
    clusters = "|".join([m, *(v.cluster.name for v in spec.region_views())])
    refreshed, failed, lost = (promql_log_metric(spec, k, m) for k in
                               ("multikueue_token_refreshed", "multikueue_token_failed", "multikueue_cluster_errors"))
    period, job = names.MULTIKUEUE_TOKEN_PERIOD_MINUTES, names.MULTIKUEUE_MANAGER_KSA
    stale_min = 2 * period + 5
    return [
        Alert("multikueue-token-failed", f"{m}: the MultiKueue token CronJob failed",
              f"sum(increase({failed}[30m])) > 0", "0s", "WARNING",
              f"A run of kueue-system/{job} on {m} could not refresh a worker's kubeconfig (its log "
              "says which and why: metadata server, the worker's DNS endpoint, IAM, RBAC). Tokens last "
              f"{names.MULTIKUEUE_TOKEN_SECONDS // 60} min and the job runs every {period}: "
              "after three failed runs the manager cannot reach that worker."),
        Alert("multikueue-token-stale", f"{m}: no MultiKueue token refreshed for {stale_min} min",
              f"(sum(increase({refreshed}[{stale_min}m])) or on() vector(0)) == 0", "300s", "ERROR",
              f"No kubeconfig refreshed by kueue-system/{job} for two of its periods (suspended, "
              "failing, not scheduled, its image not pulled): the workers' tokens expire within the hour and "
              "every dispatch stops. `kubectl -n kueue-system get cronjob,jobs,pods` on the manager."),
        Alert("multikueue-cluster-inactive", f"{m}: a MultiKueue worker cluster is unreachable",
              f"sum(increase({lost}[10m])) > 0", "0s", "ERROR",
              "The manager's Kueue cannot connect a worker (its MultiKueueCluster is Active=False: an expired or "
              "missing kubeconfig, the worker's endpoint down). Jobs are dispatched to the other regions only; with "
              "every worker lost the MultiKueue AdmissionCheck turns inactive and nothing is admitted. "
              "`kubectl get multikueuecluster -o wide` on the manager."),
        Alert("multikueue-pods-ready-timeout", f"{m}: a queued job's pods were not ready in its region",
              f'sum by (cluster_queue) (increase({KUEUE_EVICTED}{{cluster="{m}", reason="PodsReadyTimeout"}}[1h]))'
              " > 0", "0s", "WARNING",
              "The manager evicted a job whose worker admitted it but whose slices did not start within the "
              "manager's waitForPodsReady timeout. Kueue dispatches it again from the first region of the "
              "MultiKueueConfig, not the next (docs/multikueue.md, waitForPodsReady): if that region cannot start "
              "it, take it out of the config or its quota to zero."),
        Alert("clusterqueue-inactive", f"{m}: a ClusterQueue is not active",
              f'max by (cluster, cluster_queue) ({KUEUE_CQ_STATUS}{{cluster=~"{clusters}", '
              'status!="active"}) == 1', "600s", "ERROR",
              "A ClusterQueue on the manager or a region has been pending (or terminating) for 10 minutes: it "
              "admits nothing. On the manager: its MultiKueue AdmissionCheck is inactive (no worker reachable) or "
              "a ResourceFlavor is missing; on a region: a missing flavor or check. `kubectl get clusterqueue -o "
              "wide` shows the reason."),
    ]


def _services(name: str, project: str, opts: pulumi.ResourceOptions) -> list[gcp.projects.Service]:
    return [gcp.projects.Service(f"{name}-{svc.split('.')[0]}-api",
                                 gcp.projects.ServiceArgs(project=project, service=svc, disable_on_destroy=False),
                                 opts=opts)
            for svc in SERVICES]


def _channel(name: str, c: NotificationChannel, project: str,
             opts: pulumi.ResourceOptions) -> gcp.monitoring.NotificationChannel:
    kind, label = CHANNEL_TYPES[c.type]
    return gcp.monitoring.NotificationChannel(
        f"{name}-channel-{c.name}",
        gcp.monitoring.NotificationChannelArgs(
            project=project, type=kind, display_name=c.name, labels={label: c.address},
            description=f"tpu-multislice alerts ({c.type})",
        ),
        opts=opts,
    )


def scheduling_dashboard(spec: StackSpec) -> dict[str, Any]:
    """A multi-region stack's own dashboard: scheduling goodput across its manager and regions."""
    clusters = [spec.manager.name, *(v.cluster.name for v in spec.region_views())]
    return {"displayName": f"{spec.manager.name}: scheduling across regions ({spec.stack})",
            "mosaicLayout": {"columns": 48, "tiles": scheduling_tiles(clusters)}}


def _log_metric(name: str, spec: StackSpec, what: str, flt: str, opts: pulumi.ResourceOptions) -> gcp.logging.Metric:
    """A plain counter of the log entries ``flt`` matches (the manager's; a stack's own carry labels, below)."""
    return gcp.logging.Metric(f"{name}-{what.replace('_', '-')}", gcp.logging.MetricArgs(
        name=log_metric_name(spec, what, spec.manager.name), project=spec.project, filter=flt,
        description=f"{what.replace('_', ' ')} of stack {spec.stack} (tpu-multislice)",
        metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(metric_kind="DELTA", value_type="INT64", unit="1"),
    ), opts=opts)


def _policy(name: str, spec: StackSpec, alert: Alert, channel_ids: list, opts: pulumi.ResourceOptions
            ) -> gcp.monitoring.AlertPolicy:
    return gcp.monitoring.AlertPolicy(
        f"{name}-{alert.key}",
        gcp.monitoring.AlertPolicyArgs(
            project=spec.project,
            display_name=alert.display_name,
            combiner="OR",
            severity=alert.severity,
            conditions=[gcp.monitoring.AlertPolicyConditionArgs(
                display_name=alert.display_name,
                condition_prometheus_query_language=(
                    gcp.monitoring.AlertPolicyConditionConditionPrometheusQueryLanguageArgs(
                        query=alert.query, duration=alert.duration, evaluation_interval="60s",
                    )),
            )],
            notification_channels=channel_ids,
            documentation=gcp.monitoring.AlertPolicyDocumentationArgs(
                content=alert.documentation, mime_type="text/markdown", subject=alert.display_name),
            alert_strategy=gcp.monitoring.AlertPolicyAlertStrategyArgs(auto_close="86400s"),
            user_labels={"stack": spec.stack, "alert": alert.key},
        ),
        opts=opts,
    )


@dataclass(frozen=True)
class SharedMonitoringArgs:
    spec: StackSpec  # a multi-region stack


class SharedMonitoring(pulumi.ComponentResource):
    """What a multi-region stack has once, not per region: the monitoring APIs, the notification channels (each
    region's alerts notify these) and the scheduling-goodput dashboard across regions."""

    def __init__(self, name: str, args: SharedMonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:SharedMonitoring", name, None, opts)
        spec, project = args.spec, args.spec.project
        self.services = _services(name, project, pulumi.ResourceOptions(parent=self))
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=self.services)
        self.channels = [_channel(name, c, project, after_apis) for c in spec.monitoring.notification_channels]
        if not self.channels:
            pulumi.log.warn(f"{spec.stack}: no tpu-multislice:monitoring.notificationChannels: alert policies are "
                            "created but notify no one (they show in Cloud Monitoring's incidents only)", self)
        self.dashboard = gcp.monitoring.Dashboard(f"{name}-scheduling", gcp.monitoring.DashboardArgs(
            project=project, dashboard_json=json.dumps(scheduling_dashboard(spec), sort_keys=True)), opts=after_apis)
        self.log_metrics = {what: _log_metric(name, spec, what, flt, after_apis)
                            for what, flt in manager_log_filters(spec).items()}
        self.policies = {a.key: _policy(name, spec, a, [c.id for c in self.channels],
                                        pulumi.ResourceOptions(parent=self, depends_on=[
                                            *self.services, *self.log_metrics.values()]))
                         for a in manager_alert_queries(spec)}
        self.register_outputs({"notificationChannels": [c.id for c in self.channels],
                               "dashboard": self.dashboard.id,
                               "alertPolicies": [p.name for p in self.policies.values()]})


@dataclass(frozen=True)
class StackMonitoringArgs:
    spec: StackSpec
    # A multi-region stack's one set of APIs and channels (every region's alerts notify them); None: its own.
    shared: SharedMonitoring | None = None


class StackMonitoring(pulumi.ComponentResource):
    """Log-based metrics, the spec's notification channels, the alert policies and the dashboard."""

    def __init__(self, name: str, args: StackMonitoringArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-multislice:infra:StackMonitoring", name, None, opts)
        spec = args.spec
        project = spec.project
        shared = args.shared
        self.services = (shared.services if shared is not None
                         else _services(name, project, pulumi.ResourceOptions(parent=self)))
        after_apis = pulumi.ResourceOptions(parent=self, depends_on=self.services)

        labels = {"preemptions": [("event", "protoPayload.methodName", "compute.instances.preempted or hostError"),
                                  ("instance", 'REGEXP_EXTRACT(protoPayload.resourceName, "instances/([^/]+)$")',
                                   "the node VM")]}
        self.log_metrics = {}
        for what, flt in log_filters(spec).items():
            extractors = {k: expr if expr.startswith("REGEXP") else f"EXTRACT({expr})" for k, expr, _ in
                          labels.get(what, [])}
            self.log_metrics[what] = gcp.logging.Metric(
                f"{name}-{what.replace('_', '-')}",
                gcp.logging.MetricArgs(
                    name=log_metric_name(spec, what),
                    project=project,
                    filter=flt,
                    description=f"{what.replace('_', ' ')} of stack {spec.stack} (tpu-multislice)",
                    metric_descriptor=gcp.logging.MetricMetricDescriptorArgs(
                        metric_kind="DELTA", value_type="INT64", unit="1",
                        labels=[gcp.logging.MetricMetricDescriptorLabelArgs(key=k, value_type="STRING", description=d)
                                for k, _, d in labels.get(what, [])] or None,
                    ),
                    label_extractors=extractors or None,
                ),
                opts=after_apis,
            )

        if shared is not None:
            self.channels = shared.channels
        else:
            self.channels = [_channel(name, c, project, after_apis) for c in spec.monitoring.notification_channels]
        if not self.channels and shared is None:
            pulumi.log.warn(f"{spec.stack}: no tpu-multislice:monitoring.notificationChannels: alert policies are "
                            "created but notify no one (they show in Cloud Monitoring's incidents only)", self)
        channel_ids = [c.id for c in self.channels]

        # The log-based metrics must exist before a query naming them is accepted.
        after_metrics = pulumi.ResourceOptions(parent=self, depends_on=[*self.services, *self.log_metrics.values()])
        self.policies = {a.key: _policy(name, spec, a, channel_ids, after_metrics) for a in alert_queries(spec)}

        policy_names = [p.name for p in self.policies.values()]
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            gcp.monitoring.DashboardArgs(
                project=project,
                dashboard_json=pulumi.Output.all(*policy_names).apply(
                    lambda names: json.dumps(dashboard(spec, list(names)), sort_keys=True)),
            ),
            opts=after_apis,
        )
        self.register_outputs({
            "alertPolicies": policy_names,
            "notificationChannels": channel_ids,
            "logMetrics": [m.name for m in self.log_metrics.values()],
        })
