"""The trainer's elastic restart is sized from the nodes a worker group can start on now.

Ray 2.60's ElasticScalingPolicy reuses a reservation younger than ``GET_RESERVED_RESOURCES_INTERVAL_S``; one read by
the running group's last resize check just before a kill still holds the killed node, and a restart sized from it
waits for that node until ``RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S``: a second failure spent for one kill (the prod
drill's "failure -> new workers up 30.9 s", two retries). The policy (maxtext_trainer.verdict_scaling_policy) is run
here on Ray's own classes; only the cluster's answers (ray.nodes, the autoscaling coordinator's reservation) are
stand-ins, shaped as Ray returns them.
"""

from __future__ import annotations

import socket
import time

import pytest

from workloads.trainer import maxtext_trainer


class _Coordinator:
    def __init__(self, answer):
        self.answer = answer
        self.get_reserved_resources = self

    def remote(self, requester_id, recompute=False):  # noqa: ARG002 - Ray's signature
        assert recompute, "a restart must be sized from a reservation recomputed now"
        return self.answer


@pytest.fixture
def live_raylet():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _policy(monkeypatch, live_port: int, coordinator_answer: dict):
    import ray
    from ray.train.v2.api.config import ScalingConfig

    per_worker = {"CPU": 1, "local_slice": 1}
    policy = maxtext_trainer.verdict_scaling_policy(
        ScalingConfig(num_workers=(1, 2), use_tpu=False, resources_per_worker=per_worker), verdict_wait_s=5)
    nodes = [{"NodeID": "a" * 56, "Alive": True, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": live_port},
             {"NodeID": "b" * 56, "Alive": False, "NodeManagerAddress": "127.0.0.1", "NodeManagerPort": 1}]
    monkeypatch.setattr(ray, "nodes", lambda: nodes)
    monkeypatch.setattr(ray, "get", lambda ref, timeout=None: ref)  # noqa: ARG005 - ray.get's signature
    monkeypatch.setattr(policy, "_maybe_send_resource_request", lambda: None)
    monkeypatch.setattr(type(policy), "_autoscaling_coordinator", _Coordinator(coordinator_answer))  # a property
    policy._requester_id = "train"
    # What the running group's last resize check read, a moment before the kill: both nodes.
    policy._latest_reserved_resources = {"a" * 56: per_worker, "b" * 56: per_worker}
    policy._latest_reserved_resources_query_time = time.monotonic()
    return policy


def test_a_restart_is_not_sized_from_a_reservation_read_before_the_kill(monkeypatch, live_raylet):
    policy = _policy(monkeypatch, live_raylet, {"a" * 56: {"CPU": 1, "local_slice": 1}})
    decision = policy.make_decision_for_non_running_worker_group()
    assert decision.num_workers == 1


def test_a_restart_counts_only_nodes_alive_and_answering(monkeypatch, live_raylet):
    """A reservation that still lists a node the GCS has declared dead does not size the restart."""
    both = {"a" * 56: {"CPU": 1, "local_slice": 1}, "b" * 56: {"CPU": 1, "local_slice": 1}}
    policy = _policy(monkeypatch, live_raylet, both)
    decision = policy.make_decision_for_non_running_worker_group()
    assert decision.num_workers == 1
