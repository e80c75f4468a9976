"""A RayJob lifecycle a GitOps loop can trust: derived run names, KubeRay's lifecycle fields for
the target release (and a guard against fields it lacks), checkpoint periods per job kind and the
storage they cost. Everything runs the real spec model and the real manifest builders; nothing is
mocked (no cloud or Kubernetes call is made here)."""

import copy
import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml
from conftest import load_crd

from offline import engine
from stackspec import checkpoints, kuberay, limits, runs
from stackspec import spec as stack_spec
from stackspec.spec import SpecError
from workloads import manifests

NS = stack_spec.PROJECT
JOBS = f"{NS}:jobs"


def config(stack: str = "prod") -> dict[str, str]:
    return engine.stack_config(stack)


def with_jobs(cfg: dict[str, str], fn, key: str = JOBS) -> dict[str, str]:
    cfg = dict(cfg)
    value = copy.deepcopy(json.loads(cfg[key]))
    fn(value)
    cfg[key] = json.dumps(value)
    return cfg


def load(cfg: dict[str, str], stack: str = "prod"):
    return stack_spec.load(stack, cfg)


def problems(cfg: dict[str, str], stack: str = "prod") -> str:
    with pytest.raises(SpecError) as e:
        load(cfg, stack)
    return str(e.value)


def names_of(cfg: dict[str, str]) -> dict[str, str]:
    return {j.name: j.run_name for j in load(cfg).jobs}


# --------------------------------------------------------------------------- run names


def test_run_names_are_stable_and_fit_their_limits():
    first, second = names_of(config()), names_of(config())
    assert first == second  # same stack twice: same names (no time, no randomness)
    for job, run in first.items():
        assert run.startswith(job + "-") and len(run) == len(job) + 1 + runs.HASH_CHARS
        assert limits.RUN_NAME.check(run) is None and limits.LABEL_VALUE.check(run) is None
    # The longest RayJob name KubeRay allows still gives a valid run name.
    longest = runs.run_name("a" * limits.RAY_JOB.max_len, load(config()).jobs[0].run_identity)
    assert limits.RUN_NAME.check(longest) is None


def test_raising_steps_continues_the_same_run():
    base = names_of(config())
    more = names_of(with_jobs(config(), lambda jobs: [j.update(steps=j["steps"] * 10) for j in jobs]))
    assert more == base


def test_key_order_does_not_change_the_name():
    base = names_of(config())

    def reorder(jobs):
        for j in jobs:
            j["ici"] = dict(reversed(list(j["ici"].items())))
            j.update(dict(reversed(list(j.items()))))
    assert names_of(with_jobs(config(), reorder)) == base


@pytest.mark.parametrize("change", [
    {"model": "llama3.1-8b"},
    {"ici": {"fsdp": 16}},
    {"perDeviceBatchSize": 2},
    {"maxTargetLength": 2048},
    {"maxtext": {"dataset_type": "hf", "hf_path": "allenai/c4"}},
    {"maxtext": {"dataset_type": "synthetic", "weight_dtype": "bfloat16"}},
    {"rerun": 1},
    {"rerun": "after-incident-42"},
])
def test_what_a_checkpoint_must_fit_starts_a_fresh_run(change):
    base = names_of(config())["llama3-8b-multislice"]
    cfg = with_jobs(config(), lambda jobs: jobs[0].update(change))
    assert names_of(cfg)["llama3-8b-multislice"] != base


def test_settings_a_checkpoint_does_not_depend_on_keep_the_run():
    base = names_of(config())["llama3-70b-multislice"]
    cfg = with_jobs(config(), lambda jobs: jobs[1]["maxtext"].update(remat_policy="minimal"))
    assert names_of(cfg)["llama3-70b-multislice"] == base  # recomputation, not the parameter tree


def test_run_name_key_is_refused_with_what_to_do():
    cfg = with_jobs(config(), lambda jobs: jobs[0].update(runName="rayjob-multi-slice"))
    msg = problems(cfg)
    assert f"{JOBS}[0].runName" in msg and "rerun" in msg and "remove runName" in msg


def test_trainer_gets_the_derived_run_name():
    spec = load(config())
    for job in spec.jobs:
        entry = manifests.entrypoint(spec, job)
        assert f"run_name={job.run_name}" in entry and f"--name {job.run_name}" in entry


# --------------------------------------------------------------------------- RayJob lifecycle


QUEUED = "llama3-8b-queued"


def variants():
    """prod's jobs: one on its own cluster, paused by its operator and kept 600 s after it ends, the same
    job queued in Kueue (its cluster goes when it ends), one on the shared cluster kept after it ends,
    and a shared one that KubeRay deletes when it ends."""
    def change(jobs):
        jobs.append(dict(jobs[0], name=QUEUED, cluster="dedicated"))
        jobs[0].update(cluster="dedicated", suspend=True, clusterTtlSeconds=600, activeDeadlineSeconds=7200,
                       backoffLimit=2)
        jobs[1].update(cluster="shared", suspend=True, backoffLimit=0)
        jobs[2].update(cluster="shared", jobTtlSeconds=86400, backoffLimit=0)
    return load(with_jobs(config(), change))


def controller_problems(doc) -> list[str]:
    """KubeRay's own RayJob checks for the lifecycle fields (ray-operator utils/validation.go,
    validateDeletionConfiguration/validateDeletionRules at the vendored commit; the gate is on from 1.6)."""
    s, out = doc["spec"], []
    if s.get("ttlSecondsAfterFinished", 0) > 0 and not s.get("shutdownAfterJobFinishes"):
        out.append("ttlSecondsAfterFinished needs shutdownAfterJobFinishes")
    if s.get("backoffLimit", 0) > 0 and "clusterSelector" in s:
        out.append("backoffLimit is incompatible with clusterSelector")
    rules = s.get("deletionStrategy", {}).get("deletionRules", [])
    if rules and s.get("shutdownAfterJobFinishes"):
        out.append("deletionRules and shutdownAfterJobFinishes are exclusive")
    seen = set()
    for r in rules:
        cond = r["condition"]
        if ("jobStatus" in cond) == ("jobDeploymentStatus" in cond):
            out.append("exactly one of jobStatus and jobDeploymentStatus")
        if "clusterSelector" in s and r["policy"] in ("DeleteCluster", "DeleteWorkers"):
            out.append(f"{r['policy']} with clusterSelector")
        key = (r["policy"], cond.get("jobStatus"), cond.get("jobDeploymentStatus"))
        if key in seen:
            out.append(f"duplicate rule {key}")
        seen.add(key)
    return out


def test_lifecycle_fields_render_and_validate(kuberay_validator):
    spec = variants()
    docs = {j.name: manifests.ray_job(spec, j) for j in spec.jobs}
    for job in spec.jobs:
        doc, s = docs[job.name], docs[job.name]["spec"]
        assert kuberay_validator(doc) == [], job.name
        assert controller_problems(doc) == [], job.name
        assert s["activeDeadlineSeconds"] == job.active_deadline_seconds
        assert s["backoffLimit"] == job.backoff_limit
        assert kuberay.unknown_fields(s, spec.ray.kuberay_version) == []
    dedicated = docs["llama3-8b-multislice"]["spec"]
    assert dedicated["suspend"] is True  # an operator's pause, outside the queue: it may keep its cluster
    assert (dedicated["shutdownAfterJobFinishes"], dedicated["ttlSecondsAfterFinished"]) == (True, 600)
    assert (dedicated["activeDeadlineSeconds"], dedicated["backoffLimit"]) == (7200, 2)
    assert "deletionStrategy" not in dedicated  # Kueue needs shutdownAfterJobFinishes, exclusive with rules
    queued = docs[QUEUED]["spec"]
    assert next(j for j in spec.jobs if j.name == QUEUED).queued
    # Kueue frees the quota when the job ends: the cluster goes at once (clusterTtlSeconds defaults to 0).
    assert (queued["shutdownAfterJobFinishes"], queued["ttlSecondsAfterFinished"]) == (True, 0)
    assert "suspend" not in queued and "deletionStrategy" not in queued
    kept = docs["llama3-70b-multislice"]["spec"]
    assert kept["shutdownAfterJobFinishes"] is False and "deletionStrategy" not in kept
    deleted = docs["llama3-8b-elastic"]["spec"]
    rules = deleted["deletionStrategy"]["deletionRules"]
    assert "shutdownAfterJobFinishes" not in deleted
    assert {r["policy"] for r in rules} == {"DeleteSelf"}
    assert {r["condition"].get("jobStatus") or r["condition"]["jobDeploymentStatus"] for r in rules} == {
        "SUCCEEDED", "FAILED", "Failed"}
    assert all(r["condition"]["ttlSeconds"] == 86400 for r in rules)


def test_second_render_of_the_same_commit_is_byte_identical():
    def render() -> list[bytes]:
        spec = variants()
        return [yaml.safe_dump(manifests.ray_job(spec, j), sort_keys=False).encode() for j in spec.jobs]
    assert render() == render()


def test_kueue_and_kuberay_rules_are_spec_errors():
    shared_retries = with_jobs(config(), lambda jobs: jobs[2].update(cluster="shared", backoffLimit=1))
    assert f"{JOBS}[2].backoffLimit" in problems(shared_retries)
    dedicated_self_delete = with_jobs(config(), lambda jobs: jobs[0].update(cluster="dedicated", jobTtlSeconds=60))
    assert "shutdownAfterJobFinishes" in problems(dedicated_self_delete)
    # A queued job's cluster kept after the job holds slices Kueue already counts as free.
    queued_kept = with_jobs(config(), lambda jobs: jobs[0].update(cluster="dedicated", clusterTtlSeconds=600))
    found = problems(queued_kept)
    assert f"{JOBS}[0].clusterTtlSeconds" in found and "0 for a queued job" in found
    paused_kept = with_jobs(config(), lambda jobs: jobs[0].update(cluster="dedicated", suspend=True,
                                                                   clusterTtlSeconds=600))
    assert load(paused_kept).jobs[0].cluster_ttl_seconds == 600


def test_version_guard_refuses_fields_an_older_kuberay_lacks():
    cfg = with_jobs(config(), lambda jobs: jobs[2].update(cluster="shared", jobTtlSeconds=3600, backoffLimit=0))
    load(cfg)  # the default target (1.6.0) knows deletionRules
    old = with_jobs(cfg, lambda ray: ray.update(kuberayVersion="1.5.1"), key=f"{NS}:ray")
    msg = problems(old)
    assert f"{JOBS}[2].jobTtlSeconds" in msg and "spec.deletionStrategy" in msg and "1.6.0" in msg
    # (auth off: KubeRay 1.1.0 has no authOptions either, a problem of its own)
    older = with_jobs(config(), lambda ray: ray.update(kuberayVersion="1.1.0", auth="disabled"), key=f"{NS}:ray")
    assert "spec.backoffLimit" in problems(older) and "1.2.0" in problems(older)
    bad = with_jobs(config(), lambda ray: ray.update(kuberayVersion="latest"), key=f"{NS}:ray")
    assert f"{NS}:ray.kuberayVersion" in problems(bad)
    # A field the table has never heard of is unknown to every release.
    assert kuberay.unknown_fields({"entrypoint": "x", "madeUpField": 1}, "1.7.0") == [("madeUpField", None)]
    assert kuberay.unknown_fields({"preRunningDeadlineSeconds": 60}, "1.5.2") == [
        ("preRunningDeadlineSeconds", "1.6.0")]


def test_version_table_matches_the_vendored_crd():
    """Every field the guard knows exists in the vendored CRD (KubeRay after v1.7)."""
    crd = load_crd(Path(__file__).parents[1] / "vendor/kuberay/ray.io_rayjobs.yaml")
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    missing = []
    for path in kuberay.FIELDS:
        node = props
        for part in path.replace("[]", "").split("."):
            if not isinstance(node, dict) or part not in node:
                missing.append(path)
                break
            node = node[part]
            node = node.get("items", node).get("properties", node)
    assert missing == [], f"fields the version guard knows that the vendored RayJob CRD lacks: {missing}"


# --------------------------------------------------------------------------- checkpoints


def test_young_daly_numbers():
    assert checkpoints.young_daly_seconds(30, 6 * 3600) == pytest.approx(math.sqrt(2 * 30 * 21600))
    plan = checkpoints.elastic_period(30, 360, 1.003, "measured", steps=100_000)
    assert plan.period == round(math.sqrt(2 * 30 * 21600) / 1.003) == 1135
    assert "sqrt(2 x 30 s save x 360 min" in plan.how and "1,138 s" in plan.how
    short = checkpoints.elastic_period(30, 360, 1.003, "measured", steps=100)
    assert short.period == 50 and "capped at half the run" in short.how


def test_periods_per_job_kind():
    spec = load(config())
    by = {j.name: j for j in spec.jobs}
    # Multislice: the seed's (no checkpoint_period: MaxText's 10 000), not every 10 steps.
    for name in ("llama3-8b-multislice", "llama3-70b-multislice"):
        assert by[name].checkpoint_period == checkpoints.SEED_CHECKPOINT_PERIOD == 10_000
    elastic = by["llama3-8b-elastic"]
    assert "Young/Daly" in elastic.checkpoint_plan.how and "run log: step 99" in elastic.checkpoint_plan.how
    assert elastic.checkpoint_period == 50
    assert f"checkpoint_period={elastic.checkpoint_period}" in manifests.entrypoint(spec, elastic)
    # An explicit period wins; an elastic job without the inputs is told which keys to set.
    assert load(config("dev"), "dev").jobs[0].checkpoint_plan.how == "checkpointPeriod in the stack file"
    bare = with_jobs(config(), lambda jobs: [jobs[2].pop(k) for k in ("checkpointSaveSeconds",)])
    assert f"{JOBS}[2].checkpointSaveSeconds" in problems(bare)
    own_step = with_jobs(config(), lambda jobs: jobs[2].update(expectedStepSeconds=2.0, steps=100_000))
    assert load(own_step).jobs[2].checkpoint_period == round(math.sqrt(2 * 30 * 21600) / 2.0)


def test_storage_estimates_are_sane():
    assert checkpoints.parameters("llama3-8b") == pytest.approx(8.03e9, rel=0.01)
    assert checkpoints.parameters("llama3-70b") == pytest.approx(70.6e9, rel=0.01)
    assert checkpoints.parameters("llama3-405b") == pytest.approx(405.9e9, rel=0.01)
    assert checkpoints.bytes_per_parameter() == 12  # fp32 weights + AdamW's two fp32 moments
    assert checkpoints.bytes_per_parameter({"weight_dtype": "bfloat16"}) == 6
    assert checkpoints.checkpoints_saved(100, 10) == 11  # steps 0, 10, ..., 90 and the last
    assert checkpoints.checkpoints_saved(100, 10_000) == 2
    old = checkpoints.storage("llama3-70b", 100, 10)
    assert old.total_bytes == pytest.approx(11 * 12 * 70.55e9, rel=0.01)  # ~9.3 TB: what issue 11 reports
    kept = checkpoints.storage("llama3-70b", 100, 10, {"max_num_checkpoints_to_keep": "2"})
    assert kept.checkpoints == 2 and kept.kept_by == "max_num_checkpoints_to_keep"
    assert checkpoints.storage("mixtral-8x7b", 100, 10) is None  # not a dense shape in the table
    spec = load(config())
    assert all(j.checkpoint_storage.total_bytes <= spec.storage.checkpoint_budget_gb * 1e9 for j in spec.jobs)


@pytest.mark.skipif(importlib.util.find_spec("maxtext") is None, reason="the train extra is not installed")
def test_model_shapes_match_the_installed_maxtext():
    root = Path(importlib.util.find_spec("maxtext").submodule_search_locations[0]) / "configs"
    base = yaml.safe_load((root / "base.yml").read_text())
    keys = ("base_emb_dim", "base_num_decoder_layers", "base_mlp_dim", "base_num_query_heads", "base_num_kv_heads",
            "head_dim", "vocab_size", "logits_via_embedding")
    for model, shape in checkpoints.MODEL_SHAPES.items():
        cfg = {**base, **(yaml.safe_load((root / "models" / f"{model}.yml").read_text()) if model != "default"
                          else {})}
        assert tuple(cfg[k] for k in keys) == (shape.emb, shape.layers, shape.mlp, shape.q_heads, shape.kv_heads,
                                               shape.head_dim, shape.vocab, shape.tied), model
        assert cfg.get("decoder_block", "llama2") in ("llama2", "mistral"), model


def test_preview_shows_run_names_periods_and_storage_warnings():
    from slicectl.cmd_preview import checkpoint_lines

    spec = load(config())
    text = "\n".join(checkpoint_lines(spec))
    for job in spec.jobs:
        assert f"{job.name}: run {job.run_name}" in text
    assert "Young/Daly: sqrt(2 x 30 s save x 360 min" in text and "WARNING" not in text
    tight = with_jobs(config(), lambda st: st.update(checkpointBudgetGb=500), key=f"{NS}:storage")
    warned = [line for line in checkpoint_lines(load(tight)) if "WARNING" in line]
    assert len(warned) == 1 and "1,693 GB" in warned[0] and "checkpointBudgetGb 500 GB" in warned[0]
