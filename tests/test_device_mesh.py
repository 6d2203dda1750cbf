"""infralens.device_mesh: groups partition the mesh, shards cover the tensor."""

from __future__ import annotations

import itertools
from math import prod

import pytest

from infralens import device_mesh
from infralens.topology import Cluster

MESHES = ((4,), (2, 2), (2, 4), (4, 2), (2, 3, 2), (2, 1, 2, 2))


@pytest.mark.parametrize("mesh", MESHES)
def test_each_dimension_partitions_the_ranks(mesh: tuple[int, ...]) -> None:
    world = prod(mesh)
    for k, size in enumerate(mesh):
        groups = device_mesh.mesh_groups(mesh, k)
        assert sorted(r for g in groups for r in g) == list(range(world))
        assert {len(g) for g in groups} == {size}
        # ranks of one group differ by the row-major stride of dimension k
        stride = prod(mesh[k + 1 :])
        assert all(b - a == stride for g in groups for a, b in itertools.pairwise(g))


@pytest.mark.parametrize("shape", [(7, 5), (6, 4), (1, 3), (0, 2)])
@pytest.mark.parametrize("placements", [("S(0)", "S(1)"), ("S(0)", "S(0)"), ("R", "S(1)")])
def test_sharded_pieces_cover_the_tensor_once_per_replica(
    shape: tuple[int, int], placements: tuple[str, str]
) -> None:
    mesh = (2, 3)
    replicas = prod(n for n, p in zip(mesh, placements, strict=True) if p == "R")
    total = sum(
        prod(device_mesh.local_shape(shape, mesh, placements, c))
        for c in itertools.product(*(range(n) for n in mesh))
    )
    assert total == prod(shape) * replicas


def test_fsdp_over_tp_covers_each_tp_shard() -> None:
    for tp, dp in itertools.product((1, 2, 4), (1, 2, 3)):
        for tp_dim in (0, 1, None):
            pieces = [
                device_mesh.fsdp_tp_local_shape(
                    (10, 6), tp_dim=tp_dim, tp=tp, dp=dp, tp_rank=t, dp_rank=d
                )
                for t in range(tp)
                for d in range(dp)
            ]
            copies = tp if tp_dim is None else 1
            assert sum(prod(p) for p in pieces) == 60 * copies


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: device_mesh.mesh_groups((2, 0), 0), r"mesh_shape\[1\]"),
        (lambda: device_mesh.mesh_groups((2,) * 5, 0), "1 to 4 dimensions"),
        (lambda: device_mesh.local_shape((4,), (2,), ("S0",), (0,)), r"placements\[0\]"),
        (lambda: device_mesh.local_shape((4,), (2,), ("R",), (2,)), r"coordinate\[0\]"),
        (lambda: device_mesh.local_shape((4,), (2, 2), ("R",), (0,)), "placements must"),
        (
            lambda: device_mesh.fsdp_tp_local_shape(
                (4,), tp_dim=1, tp=2, dp=2, tp_rank=0, dp_rank=0
            ),
            "tp_dim",
        ),
        (lambda: device_mesh.mesh_dims(Cluster(1, 4), (2, 2), ("a", "a")), "distinct"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
