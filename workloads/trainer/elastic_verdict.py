"""Elastic restarts sized without a node the cluster has not yet declared dead: Ray Train's scaling policy with a
verdict wait (the driver installs it for ``--mode elastic``). Shipped beside ``maxtext_trainer.py`` in the trainer
ConfigMap."""

from __future__ import annotations

import time

# raylet no longer answers, before restarting without it. A restart sized while the GCS still
# counts the lost node waits for it, times out and spends one of max_failures.
VERDICT_WAIT_S = 60.0
PROBE_TIMEOUT_S = 1.0
# While no restart can be decided, the controller's loop asks again at once (it never awaits):
# pause between questions instead of taking a whole core from the workers.
UNDECIDED_PAUSE_S = 0.5


def raylet_reachable(address: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a node's raylet accepts a connection: a preempted node's does not, well before
    the GCS's health checks (a few missed periods) declare it dead."""
    import socket

    try:
        with socket.create_connection((address, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def verdict_scaling_policy(scaling_config, verdict_wait_s: float = VERDICT_WAIT_S):
    """Ray Train V2's elastic policy, made to restart only at a size the cluster can hold.

    Ray 2.60's ``ElasticScalingPolicy`` sizes a restart from the autoscaling coordinator's
    reservation, which refreshes its node list every 20 s (``TICK_INTERVAL_S``): right after a
    preemption it still counts the lost node, the worker group waits for it until
    ``RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S`` and that failed start spends one of
    ``max_failures``. This policy (1) waits, while any node the GCS calls alive has a raylet
    that does not answer, for the GCS's verdict (at most ``verdict_wait_s``, then leaves the
    node out), and (2) asks the coordinator for a reservation recomputed from the current node
    list (``recompute=True``) instead of the last tick's.
    """
    import logging

    import ray
    from ray.train.v2._internal.execution.scaling_policy import ElasticScalingPolicy, NoopDecision
    from ray.train.v2._internal.execution.scaling_policy.autoscaling_coordinator_client import (
        AUTOSCALING_REQUESTS_GET_TIMEOUT_S,
    )

    log = logging.getLogger("ray.train")

    class VerdictElasticScalingPolicy(ElasticScalingPolicy):
        def __init__(self, config, wait_s: float):
            super().__init__(config)
            self.verdict_wait_s = wait_s
            self._suspect_since: dict[str, float] = {}
            self._excluded: set[str] = set()

        def _unreachable_alive_nodes(self) -> list[str]:
            return [n["NodeID"] for n in ray.nodes()
                    if n.get("Alive") and n.get("NodeManagerPort")
                    and not raylet_reachable(n["NodeManagerAddress"], n["NodeManagerPort"])]

        def make_decision_for_non_running_worker_group(self):
            now = time.monotonic()
            suspects = self._unreachable_alive_nodes()
            self._suspect_since = {n: self._suspect_since.get(n, now) for n in suspects}
            waiting = [n for n, since in self._suspect_since.items() if now - since < self.verdict_wait_s]
            if waiting:
                if len(waiting) != getattr(self, "_logged_waiting", 0):
                    log.info("[VerdictScaling] node(s) %s do not answer but the GCS still counts them: "
                             "waiting for its verdict before sizing the restart", [n[:8] for n in waiting])
                    self._logged_waiting = len(waiting)
                self._maybe_send_resource_request()
                time.sleep(UNDECIDED_PAUSE_S)
                return NoopDecision()
            self._logged_waiting = 0
            if suspects:
                log.warning("[VerdictScaling] no verdict on node(s) %s after %.0f s: restarting without them",
                            [n[:8] for n in suspects], self.verdict_wait_s)
            self._excluded = set(suspects)
            # Never size a restart from a reservation read before the failure: Ray's policy reuses one younger
            # than GET_RESERVED_RESOURCES_INTERVAL_S, and one read by the running group's last resize check (every
            # elastic_resize_monitor_interval_s) just before the kill still holds the lost node: a worker group of
            # that size waits for it until RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S and the failed start spends one
            # more of max_failures (drill-prod's "failure -> new workers up 30.9 s", two retries for one kill).
            self._latest_reserved_resources_query_time = float("-inf")
            decision = super().make_decision_for_non_running_worker_group()
            if isinstance(decision, NoopDecision):
                time.sleep(UNDECIDED_PAUSE_S)
            return decision

        def _get_reserved_resources(self):
            now = time.monotonic()
            if now - self._latest_reserved_resources_query_time < self.GET_RESERVED_RESOURCES_INTERVAL_S:
                return self._latest_reserved_resources
            reserved = None
            try:
                reserved = ray.get(
                    self._autoscaling_coordinator.get_reserved_resources.remote(
                        self._requester_id, recompute=True),
                    timeout=AUTOSCALING_REQUESTS_GET_TIMEOUT_S)
                # Only nodes a worker group can start on now: the GCS calls them alive and their raylet answers.
                live = {n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("NodeManagerPort")
                        and raylet_reachable(n["NodeManagerAddress"], n["NodeManagerPort"])}
                reserved = {nid: r for nid, r in reserved.items() if nid not in self._excluded and nid in live}
            except Exception:  # noqa: BLE001 - as Ray's own policy: no decision this round
                log.warning("[VerdictScaling] could not get reserved resources; no resize this round",
                            exc_info=True)
            self._latest_reserved_resources_query_time = time.monotonic()
            self._latest_reserved_resources = reserved
            return reserved

    return VerdictElasticScalingPolicy(scaling_config, verdict_wait_s)


def install_verdict_policy(verdict_wait_s: float) -> None:
    """Make ``JaxTrainer.fit`` build :func:`verdict_scaling_policy` for elastic runs. Ray 2.60
    has no public hook for a scaling policy; ``fit`` takes it from this module-level factory
    (tests/test_trainer_args.py fails loudly when an upgrade moves it)."""
    from ray.train.v2.api import data_parallel_trainer as dpt

    ray_factory = dpt.create_scaling_policy

    def create_scaling_policy(scaling_config):
        if scaling_config.elasticity_enabled:
            return verdict_scaling_policy(scaling_config, verdict_wait_s)
        return ray_factory(scaling_config)

    dpt.create_scaling_policy = create_scaling_policy
