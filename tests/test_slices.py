"""The slice model: the one table every other part derives from."""

import pytest

from stackspec import tpu
from stackspec.tpu import SliceError

# GKE's v6e table (Plan TPUs in GKE): topology -> (chips, hosts, machine type).
V6E = {
    ("1x1", "ct6e-standard-1t"): (1, 1),
    ("2x2", "ct6e-standard-4t"): (4, 1),
    ("2x4", "ct6e-standard-8t"): (8, 1),
    ("2x4", "ct6e-standard-4t"): (8, 2),
    ("4x4", "ct6e-standard-4t"): (16, 4),
    ("4x8", "ct6e-standard-4t"): (32, 8),
    ("8x8", "ct6e-standard-4t"): (64, 16),
    ("8x16", "ct6e-standard-4t"): (128, 32),
    ("16x16", "ct6e-standard-4t"): (256, 64),
}


def test_v6e_table_is_gkes():
    got = {(s.topology, s.machine_type.name): (s.chips, s.hosts) for s in tpu.table() if s.generation.name == "v6e"}
    assert got == V6E


@pytest.mark.parametrize(("topo", "mt"), list(V6E))
def test_v6e_shapes_are_consistent(topo, mt):
    s = tpu.resolve("v6e", topo, mt)
    assert s.hosts * s.chips_per_host == s.chips
    assert s.gke_accelerator == "tpu-v6e-slice"
    assert s.ray_accelerator_type == "TPU-V6E"
    assert s.pod_type == f"v6e-{s.chips}"
    assert s.node_selector == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": topo,
    }
    assert s.multi_host == (s.hosts > 1)


def test_seed_slice():
    s = tpu.resolve("v6e", "4x4", "ct6e-standard-4t")
    assert (s.chips, s.hosts, s.chips_per_host, s.pod_type) == (16, 4, 4, "v6e-16")
    assert s.workers(2) == 8  # the seed's num_workers=8 for two slices


def test_machine_type_is_inferred_when_unique():
    assert tpu.resolve("v6e", "4x4").machine_type.name == "ct6e-standard-4t"
    assert tpu.resolve("v6e", "1x1").machine_type.name == "ct6e-standard-1t"


def test_2x4_needs_a_machine_type():
    with pytest.raises(SliceError, match="needs an explicit machine type; allowed: ct6e-standard-4t, ct6e-standard-8t"):
        tpu.resolve("v6e", "2x4")


def test_unknown_topology_lists_the_valid_ones():
    with pytest.raises(SliceError) as e:
        tpu.resolve("v6e", "4x5", "ct6e-standard-4t")
    assert "topology '4x5' is not offered for v6e" in str(e.value)
    assert "allowed: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16" in str(e.value)


def test_machine_type_that_does_not_fit():
    with pytest.raises(SliceError, match="'ct6e-standard-8t' does not fit v6e topology 4x4; allowed: ct6e-standard-4t"):
        tpu.resolve("v6e", "4x4", "ct6e-standard-8t")
    with pytest.raises(SliceError, match="not a v6e machine type"):
        tpu.resolve("v6e", "4x4", "ct5lp-hightpu-4t")


def test_unknown_generation():
    with pytest.raises(SliceError, match="allowed: v6e, v5e, v5p, v4, tpu7x"):
        tpu.resolve("v9", "4x4")


@pytest.mark.parametrize(
    ("gen", "topo", "pod_type", "hosts", "label", "ray"),
    [
        ("v5e", "4x4", "v5litepod-16", 4, "tpu-v5-lite-podslice", "TPU-V5LITEPOD"),
        ("v5p", "2x2x2", "v5p-16", 2, "tpu-v5p-slice", "TPU-V5P"),  # pod types count cores
        ("v4", "2x2x4", "v4-32", 4, "tpu-v4-podslice", "TPU-V4"),
        ("tpu7x", "2x2x1", "v7x-8", 1, "tpu7x", "TPU-V7X"),
    ],
)
def test_other_generations(gen, topo, pod_type, hosts, label, ray):
    s = tpu.resolve(gen, topo)
    assert (s.pod_type, s.hosts, s.gke_accelerator, s.ray_accelerator_type) == (pod_type, hosts, label, ray)


def test_shape_from_node_labels_and_machine_type():
    assert tpu.from_node_labels("tpu-v6e-slice", "2x4", 4).hosts == 2
    assert tpu.from_node_labels("tpu-v6e-slice", "2x4", 8).hosts == 1
    assert tpu.from_machine_type("ct6e-standard-4t", "8x8").hosts == 16
    with pytest.raises(SliceError, match="no host with 3 chips"):
        tpu.from_node_labels("tpu-v6e-slice", "4x4", 3)
    with pytest.raises(SliceError, match="not a TPU machine type"):
        tpu.from_machine_type("n1-standard-16", "4x4")


@pytest.mark.parametrize(
    ("level", "axes", "target", "ok"),
    [
        ("ici", {"fsdp": 4, "tensor": 4}, 16, True),  # the seed's 8B job
        ("ici", {"tensor": 4}, 16, True),  # fsdp auto (-1) takes the rest
        ("ici", {"fsdp": 4, "tensor": 8}, 16, False),
        ("ici", {"fsdp": 3}, 16, False),
        ("dcn", {"fsdp": 2, "data": 1}, 2, True),  # the seed's 70B job
        ("dcn", {}, 2, True),  # data auto
        ("dcn", {"fsdp": 2, "data": 1}, 1, False),
        ("dcn", {"fsdp": -1, "data": -1}, 2, False),
    ],
)
def test_mesh(level, axes, target, ok):
    assert (tpu.mesh_error(level, axes, target) is None) == ok
