"""Observability rendered from the spec: GMP PodMonitoring (against the vendored CRD), Cloud Monitoring
log metrics, notification channels, alert policies and the dashboard.

The real program runs under Pulumi's mocks (offline.engine.render); only GCP and the engine are stand-ins.
The PodMonitoring schema is GMP's own CRD (vendor/gmp/, GoogleCloudPlatform/prometheus-engine).
"""

from __future__ import annotations

import ast
import copy
import importlib.metadata
import json
import re
from pathlib import Path

import pytest
from conftest import rendered

from infra import monitoring
from offline import engine
from stackspec import kube
from stackspec import spec as stack_spec
from workloads import monitoring as gmp
from workloads.trainer import maxtext_trainer as trainer

ROOT = Path(__file__).resolve().parents[1]
NS = stack_spec.PROJECT
ALERT = "gcp:monitoring/alertPolicy:AlertPolicy"


def ray_clusters(r: engine.Rendering) -> dict[str, tuple[dict, dict]]:
    """Each RayCluster the stack runs, by the PodMonitoring selector that should find its pods."""
    out = {}
    for d in r.manifests:
        if d["kind"] == "RayCluster":
            out[json.dumps({kube.RAY_CLUSTER_LABEL: d["metadata"]["name"]})] = (d, d["spec"])
        elif d["kind"] == "RayJob" and "rayClusterSpec" in d["spec"]:
            out[json.dumps({kube.JOB_LABEL: d["metadata"]["name"]})] = (d, d["spec"]["rayClusterSpec"])
    return out


def test_pod_monitoring_scrapes_head_and_workers_of_each_ray_cluster(prod, pod_monitoring_validator):
    spec = prod.spec
    pms = [d for d in prod.manifests if d["kind"] == "PodMonitoring"]
    clusters = ray_clusters(prod)
    assert pms and len(pms) == len(clusters)
    for pm in pms:
        assert pm["apiVersion"] == "monitoring.googleapis.com/v1"
        assert pod_monitoring_validator(pm) == []
        sel = pm["spec"]["selector"]
        _, body = clusters[json.dumps(sel["matchLabels"])]  # one PodMonitoring per RayCluster
        assert sel["matchExpressions"] == [
            {"key": kube.RAY_NODE_TYPE_LABEL, "operator": "In", "values": ["head", "worker"]}]
        assert pm["spec"]["endpoints"][0]["port"] == spec.ray.metrics_export_port
        # The port the selected pods export on: the head and every worker group start Ray with it.
        groups = [body["headGroupSpec"], *body["workerGroupSpecs"]]
        assert {g["rayStartParams"]["metrics-export-port"] for g in groups} == {str(spec.ray.metrics_export_port)}
        mapped = {m["to"] for m in pm["spec"]["targetLabels"]["fromPod"]}
        assert {"ray_cluster", "ray_group", "ray_replica"} <= mapped


def test_schema_check_is_live(prod, pod_monitoring_validator):
    pm = copy.deepcopy(next(d for d in prod.manifests if d["kind"] == "PodMonitoring"))
    pm["spec"]["endpoints"][0]["intervall"] = "30s"
    assert any("intervall" in e for e in pod_monitoring_validator(pm))


def test_a_dedicated_job_gets_its_own_pod_monitoring_on_its_pods_label():
    cfg = engine.stack_config("dev")
    jobs = json.loads(cfg[f"{NS}:jobs"])
    jobs[0]["cluster"] = "dedicated"
    cfg[f"{NS}:jobs"] = json.dumps(jobs)
    spec = stack_spec.load("dev", cfg)
    (pm,) = gmp.pod_monitorings(spec)
    assert pm["spec"]["selector"]["matchLabels"] == {kube.JOB_LABEL: jobs[0]["name"]}
    from workloads import manifests

    job = manifests.ray_job(spec, spec.jobs[0])
    groups = [job["spec"]["rayClusterSpec"]["headGroupSpec"], *job["spec"]["rayClusterSpec"]["workerGroupSpecs"]]
    assert all(g["template"]["metadata"]["labels"][kube.JOB_LABEL] == jobs[0]["name"] for g in groups)


def test_each_alert_policy_has_its_promql_condition_and_the_channels(prod):
    spec = prod.spec
    channels = prod.by_type("gcp:monitoring/notificationChannel:NotificationChannel")
    assert [(c.inputs["type"], c.inputs["labels"]) for c in channels] == [
        ("email", {"email_address": "tpu-oncall@example.com"})]
    policies = {p.inputs["userLabels"]["alert"]: p for p in prod.by_type(ALERT)}
    assert set(policies) == {"duty-cycle-low", "run-failed-or-restarted", "node-preempted", "checkpoint-stale",
                             "iam-changed"}
    for key, p in policies.items():
        (cond,) = p.inputs["conditions"]
        q = cond["conditionPrometheusQueryLanguage"]
        assert q["query"] == next(a.query for a in monitoring.alert_queries(spec) if a.key == key)
        assert p.inputs["notificationChannels"] == [f"{channels[0].name}-offline-id"]
    m = spec.monitoring
    duty = policies["duty-cycle-low"].inputs["conditions"][0]["conditionPrometheusQueryLanguage"]
    assert duty["duration"] == f"{m.duty_cycle_low_minutes * 60}s"
    assert "ray_tpu_duty_cycle{" in duty["query"] and f"< {m.duty_cycle_low_percent:g}" in duty["query"]
    assert 'ray_train_controller_state="RUNNING"' in duty["query"]
    stale = policies["checkpoint-stale"].inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert f"[{m.checkpoint_max_age_minutes}m]" in stale
    assert monitoring.promql_log_metric(spec, "checkpoint_saves") in stale
    failed = policies["run-failed-or-restarted"].inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert 'ray_train_controller_state=~"ERRORED|RESTARTING|RESCHEDULING"' in failed


def _installed(distribution: str, path: str) -> ast.Module:
    """A module of an installed package, parsed from its file (importing Ray and MaxText for six names took a
    fresh worker half a minute of CPU: JAX, TensorFlow's protobufs, Ray's core)."""
    return ast.parse(Path(importlib.metadata.distribution(distribution).locate_file(path)).read_text())


def _top(tree: ast.Module | ast.ClassDef, kind: type, name: str):
    return next(n for n in tree.body if isinstance(n, kind) and getattr(n, "name", None) == name)


def _assigned(tree: ast.Module | ast.ClassDef, name: str) -> ast.expr:
    def targets(n: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
        return n.targets if isinstance(n, ast.Assign) else [n.target]

    return next(n.value for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)
                and any(getattr(t, "id", None) == name for t in targets(n)))


def test_the_signals_alerts_read_are_what_ray_maxtext_and_the_trainer_emit():
    """Metric names and log lines, checked against the installed Ray's and MaxText's source and the trainer."""
    reporter = _installed("ray", "ray/dashboard/modules/reporter/reporter_agent.py")
    gauges = {ast.literal_eval(key) for key in _assigned(reporter, "METRICS_GAUGES").keys}
    assert "tpu_duty_cycle" in gauges  # exported as ray_tpu_duty_cycle
    metrics = _top(_installed("ray", "ray/train/v2/_internal/metrics/controller.py"), ast.ClassDef, "ControllerMetrics")
    assert monitoring.RAY_TRAIN_STATE == "ray_" + ast.literal_eval(_assigned(metrics, "CONTROLLER_STATE"))
    assert ast.literal_eval(_assigned(metrics, "CONTROLLER_STATE_TAG_KEY")) == "ray_train_controller_state"
    state_type = _top(_installed("ray", "ray/train/v2/_internal/execution/controller/state.py"), ast.ClassDef,
                      "TrainControllerStateType")
    states = {t.id for n in state_type.body if isinstance(n, ast.Assign) for t in n.targets}
    assert {monitoring.RUNNING, *monitoring.FAILING_STATES} <= states
    save = ast.unparse(_top(_installed("maxtext", "maxtext/common/checkpointing.py"), ast.FunctionDef,
                            "print_save_message"))
    assert all(line in save for line in monitoring.CHECKPOINT_LINES)
    assert monitoring.PROGRESS_MARKER == trainer.PROGRESS
    assert monitoring.STEP_EVENT in json.dumps({"event": "step"})


def test_log_metrics_filters(prod):
    metrics = {m.inputs["name"]: m for m in prod.by_type("gcp:logging/metric:Metric")}
    spec = prod.spec
    kinds = ("checkpoint_saves", "train_steps", "preemptions", "iam_changes")
    assert set(metrics) == {monitoring.log_metric_name(spec, k) for k in kinds}
    pre = metrics[monitoring.log_metric_name(spec, "preemptions")]
    assert 'protoPayload.methodName="compute.instances.preempted"' in pre.inputs["filter"]
    assert set(pre.inputs["labelExtractors"]) == {"event", "instance"}
    ck = metrics[monitoring.log_metric_name(spec, "checkpoint_saves")].inputs["filter"]
    assert f'resource.labels.cluster_name="{spec.cluster.name}"' in ck
    apis = {s.inputs["service"] for s in prod.by_type("gcp:projects/service:Service")}
    assert {"monitoring.googleapis.com", "logging.googleapis.com"} <= apis


def test_dashboard_json_is_valid_and_charts_the_signals(prod):
    (dash,) = prod.by_type("gcp:monitoring/dashboard:Dashboard")
    layout = json.loads(dash.inputs["dashboardJson"])
    tiles = layout["mosaicLayout"]["tiles"]
    queries = " ".join(t["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"]
                       for t in tiles if "xyChart" in t["widget"])
    spec = prod.spec
    logs = [monitoring.promql_log_metric(spec, k) for k in ("train_steps", "preemptions", "checkpoint_saves")]
    for needle in ("ray_tpu_duty_cycle", "ray_replica", monitoring.GKE_DUTY_CYCLE, *logs):
        assert needle in queries, needle
    alerts = [t["widget"]["alertChart"]["name"] for t in tiles if "alertChart" in t["widget"]]
    assert len(alerts) == len(monitoring.alert_queries(spec))  # one tile per alert policy
    # Tiles stay inside the 48-column grid and do not overlap.
    cells = set()
    for t in tiles:
        assert t["xPos"] + t["width"] <= 48
        xs, ys = range(t["xPos"], t["xPos"] + t["width"]), range(t["yPos"], t["yPos"] + t["height"])
        box = {(x, y) for x in xs for y in ys}
        assert not cells & box
        cells |= box


def test_a_stack_without_channels_still_alerts_and_says_so():
    r = rendered("dev")
    assert not r.by_type("gcp:monitoring/notificationChannel:NotificationChannel")
    assert all(p.inputs.get("notificationChannels", []) == [] for p in r.by_type(ALERT)) and r.by_type(ALERT)
    assert any("notify no one" in w for w in r.warnings)  # the program's pulumi.log.warn, kept by the engine


def test_bad_channels_and_thresholds_are_refused():
    cfg = engine.stack_config("prod")
    mon = json.loads(cfg[f"{NS}:monitoring"])
    mon["notificationChannels"].append({"name": "ops", "type": "pubsub", "address": "ops-topic"})
    mon["dutyCycleLowPercent"] = 0
    cfg[f"{NS}:monitoring"] = json.dumps(mon)
    with pytest.raises(stack_spec.SpecError) as e:
        stack_spec.load("prod", cfg)
    text = str(e.value)
    assert "projects/<project>/topics/<topic>" in text and "dutyCycleLowPercent" in text
    assert re.search(r"monitoring", text)


def test_scheduling_tiles_are_for_the_multi_region_dashboard_only(prod):
    tiles = monitoring.scheduling_tiles(["tpu-use5", "tpu-euw4"], y=64)
    queries = [t["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["prometheusQuery"] for t in tiles]
    for metric in monitoring.KUEUE_WAITS:  # each Kueue wait, per region (GKE cluster) and ClusterQueue
        assert any(f"rate({metric}_sum{{cluster=~\"tpu-use5|tpu-euw4\"}}[1h])" in q
                   and "by (cluster, cluster_queue)" in q for q in queries), metric
    assert any("multikueue_workloads_admitted_total" in q and "exported_cluster" in q for q in queries)
    assert not any("dispatched" in q for q in queries)  # admissions, not dispatch attempts
    assert all(t["yPos"] >= 64 for t in tiles)
    # A single-region stack's dashboard is unchanged: no Kueue tiles.
    text = json.dumps(monitoring.dashboard(prod.spec))
    assert "kueue_" not in text and "multikueue" not in text


def test_an_iam_change_in_the_project_alerts(prod):
    """Any SetIamPolicy (or Cloud Storage's bucket IAM call, or a custom role change) in the stack's project
    counts in a log-based metric read from the Admin Activity audit log, and its alert fires on one."""
    (metric,) = [m for m in prod.by_type("gcp:logging/metric:Metric") if m.inputs["name"].endswith("_iam_changes")]
    flt = metric.inputs["filter"]
    assert f'logName="projects/{prod.spec.project}/logs/cloudaudit.googleapis.com%2Factivity"' in flt
    for method in ("SetIamPolicy", "storage.setIamPermissions", "google.iam.admin.v1.UpdateRole"):
        assert f'protoPayload.methodName:"{method}"' in flt
    (policy,) = [p for p in prod.by_type(ALERT) if p.inputs["userLabels"]["alert"] == "iam-changed"]
    query = policy.inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
    assert monitoring.promql_log_metric(prod.spec, "iam_changes") in query and query.endswith("> 0")


def test_what_stops_every_multi_region_dispatch_alerts(multi):
    """A multi-region stack alerts, once (on the manager), on the token CronJob failing or refreshing nothing, on a
    worker the manager's Kueue cannot connect, and on a ClusterQueue not active on any of its clusters; the filters
    name the CronJob as rendered and the lines its script prints."""
    import inspect

    from stackspec import names
    from workloads import multikueue_token

    spec = multi.spec
    manager = spec.manager.name
    policies = {p.inputs["userLabels"]["alert"]: p for p in multi.by_type(ALERT)
                if p.name.startswith(f"{manager}-monitoring-")}
    expected = {a.key: a for a in monitoring.manager_alert_queries(spec)}
    assert set(policies) == set(expected) == {"multikueue-token-failed", "multikueue-token-stale",
                                              "multikueue-cluster-inactive", "multikueue-pods-ready-timeout",
                                              "clusterqueue-inactive"}
    [channel] = multi.by_type("gcp:monitoring/notificationChannel:NotificationChannel")
    for key, p in policies.items():
        (cond,) = p.inputs["conditions"]
        assert cond["conditionPrometheusQueryLanguage"]["query"] == expected[key].query
        assert p.inputs["notificationChannels"] == [f"{channel.name}-offline-id"]
    metrics = {m.inputs["name"]: m.inputs["filter"] for m in multi.by_type("gcp:logging/metric:Metric")}
    [cronjob] = [d for d in multi.manifests if d["kind"] == "CronJob"
                 and d["metadata"]["name"] == names.MULTIKUEUE_MANAGER_KSA]
    [container] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert cronjob["metadata"]["namespace"] == names.KUEUE_NAMESPACE
    assert cronjob["spec"]["schedule"].startswith(f"*/{names.MULTIKUEUE_TOKEN_PERIOD_MINUTES} ")
    for what in ("multikueue_token_refreshed", "multikueue_token_failed", "multikueue_cluster_errors"):
        flt = metrics[monitoring.log_metric_name(spec, what, manager)]
        assert f'resource.labels.cluster_name="{manager}"' in flt
        assert f'resource.labels.namespace_name="{names.KUEUE_NAMESPACE}"' in flt
        assert monitoring.promql_log_metric(spec, what, manager) in policies[
            {"multikueue_token_refreshed": "multikueue-token-stale", "multikueue_token_failed":
             "multikueue-token-failed", "multikueue_cluster_errors": "multikueue-cluster-inactive"}[what]
        ].inputs["conditions"][0]["conditionPrometheusQueryLanguage"]["query"]
        if what.startswith("multikueue_token"):
            assert f'resource.labels.container_name="{container["name"]}"' in flt
    # The lines the token script prints: a refreshed kubeconfig's ("<secret>: updated (kubeconfig, 3600s)") and
    # a failure's.
    source = inspect.getsource(multikueue_token)
    assert 'return "updated"' in source and "({t['kind']}, {seconds}s)" in source
    assert f'print(f"{monitoring.TOKEN_FAILED} {{e}}", file=sys.stderr)' in source
    assert "updated" + " (kubeconfig" in monitoring.TOKEN_REFRESHED.replace(": ", "")
    stale = expected["multikueue-token-stale"]
    assert int(stale.query.split("[")[1].split("m]")[0]) < names.MULTIKUEUE_TOKEN_SECONDS // 60  # before expiry
    cq = expected["clusterqueue-inactive"].query
    clusters = [manager, *(v.cluster.name for v in spec.region_views())]
    assert f'{monitoring.KUEUE_CQ_STATUS}{{cluster=~"{"|".join(clusters)}", status!="active"}}' in cq
    # A single-region stack has none of these.
    assert not [p for p in multi.by_type(ALERT) if p.inputs["userLabels"]["alert"] in expected
                and not p.name.startswith(f"{manager}-monitoring-")]
