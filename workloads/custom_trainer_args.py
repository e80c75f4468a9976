"""A job with its own trainer (``jobs[].trainer``, stackspec/trainer.py): the same command line as a MaxText job's,
led by ``--custom-trainer <script>`` and followed by the script's own settings.

``workloads/trainer/maxtext_trainer.py`` hands such a command line to ``custom_trainer.py`` beside it, which runs the
team's ``train_loop_per_worker`` under the same Ray Train JaxTrainer (workers, slices, failure budget, storage), so
the RayJob, its Kueue queue, its checkpoints and the drills are a MaxText job's. On the cluster the script travels in
the stack's trainer ConfigMap beside the driver (:func:`configmap_files`); locally it is read from the checkout.
"""

from __future__ import annotations

from pathlib import Path

from stackspec.spec import Job, StackSpec

ROOT = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).resolve().parent / "trainer" / "custom_trainer.py"
FLAG = "--custom-trainer"


def script_key(job: Job) -> str:
    """The script's file name in the trainer ConfigMap, from its path (a ConfigMap key takes no ``/``): one per
    script, whatever job runs it (a one-off run of the job, ``slicectl submit``, finds it too)."""
    return "own--" + job.trainer.script.replace("/", "--")


def wrap(job: Job, argv: list[str], local: bool, mount: str) -> list[str]:
    """``argv`` (the MaxText job's, ``--`` then ``key=value`` settings) for the job's own script: the script's path
    first (the checkout's locally, the ConfigMap mount's ``mount`` on the cluster), its config after the settings."""
    script = str(ROOT / job.trainer.script) if local else f"{mount}/{script_key(job)}"
    return [FLAG, script, *argv, *(f"{k}={_value(v)}" for k, v in job.trainer.config.items())]


def _value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def configmap_files(spec: StackSpec) -> dict[str, str]:
    """What the trainer ConfigMap holds beside maxtext_trainer.py when a job has its own trainer: the driver and each
    such job's script."""
    own = [j for j in spec.jobs if j.trainer is not None]
    if not own:
        return {}
    return {DRIVER.name: DRIVER.read_text(), **{script_key(j): (ROOT / j.trainer.script).read_text() for j in own}}


def with_image(body: dict, job: Job) -> dict:
    """A dedicated job's RayCluster with the trainer's own image on every Ray container (head and workers)."""
    if job.trainer is None or job.trainer.image is None or "rayClusterSpec" not in body:
        return body
    spec = body["rayClusterSpec"]
    for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"]):
        for c in group["template"]["spec"]["containers"]:
            if c.get("name", "").startswith("ray-"):
                c["image"] = job.trainer.image
    return body
