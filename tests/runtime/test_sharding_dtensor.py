"""infralens.sharding against DTensor Shard placements and FSDP2's fully_shard.

One process group per world size places a sweep of tensors with
``distribute_tensor(..., [Shard(0)])`` and wraps a small model with
``fully_shard``; the tests compare what each rank holds with the package.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens import sharding  # noqa: E402

WORLD_SIZES = (2, 3, 4)
NUMELS = (0, 1, 2, 3, 5, 6, 7, 8, 10, 13)  # includes numel < world size and numel = 0
COLS = 3  # each swept tensor is (numel, COLS), so dim 0 is sharded and dim 1 is kept
MESH_2D = (2, 2)
SHAPE_2D = (7, 5)
# (in_features, out_features) of the layers FSDP2 wraps; weights are (out, in),
# so dim 0 is 3, 5 and 2: none divides 4 evenly.
LAYERS = ((4, 3), (3, 5), (5, 2))


def _place(rank: int, world: int) -> dict[str, Any]:
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    mesh = init_device_mesh("cpu", (world,))
    out: dict[str, Any] = {"dtensor": {}}
    for numel in NUMELS:
        full = torch.arange(numel * COLS, dtype=torch.float64).reshape(numel, COLS)
        dt = distribute_tensor(full, mesh, [Shard(0)])
        local = dt.to_local()
        shape, offset = compute_local_shape_and_global_offset(full.shape, mesh, [Shard(0)])
        first_row = int(local[0, 0].item()) // COLS if local.numel() else None
        out["dtensor"][numel] = (tuple(local.shape), tuple(shape), tuple(offset), first_row)

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o in LAYERS))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    fsdp: dict[str, Any] = {}
    for name, param in model.named_parameters():
        fsdp[name] = {"global": tuple(param.shape), "local": tuple(param.to_local().shape)}
    for index, layer in enumerate(model):
        group = layer._get_fsdp_state()._fsdp_param_group
        for fp in group.fsdp_params:
            name = f"{index}.{fp._module_info.param_name}"
            fsdp[name]["padded"] = tuple(fp.padded_sharded_param_size)
            fsdp[name]["padded_numel"] = fp._sharded_param_data.numel()
    out["fsdp"] = fsdp

    if world == MESH_2D[0] * MESH_2D[1]:
        mesh2 = init_device_mesh("cpu", MESH_2D)
        full = torch.arange(SHAPE_2D[0] * SHAPE_2D[1], dtype=torch.float64).reshape(SHAPE_2D)
        dt = distribute_tensor(full, mesh2, [Shard(0), Shard(1)])
        local = dt.to_local()
        corner = (
            (int(local[0, 0].item()) // SHAPE_2D[1], int(local[0, 0].item()) % SHAPE_2D[1])
            if local.numel()
            else None
        )
        out["mesh2d"] = (tuple(mesh2.get_coordinate() or ()), tuple(local.shape), corner)
    return out


def placed(world: int) -> list[dict[str, Any]]:
    return run_on_ranks_cached(_place, world)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("numel", NUMELS)
def test_dtensor_shard0_local_shapes(world: int, numel: int) -> None:
    for rank, per_rank in enumerate(placed(world)):
        local_shape, util_shape, _, _ = per_rank["dtensor"][numel]
        expected = sharding.shard_shape((numel, COLS), world, rank)
        assert local_shape == expected, f"rank {rank}"
        assert util_shape == expected, f"rank {rank}"


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("numel", NUMELS)
def test_dtensor_shard0_offsets_and_values(world: int, numel: int) -> None:
    offsets = sharding.chunk_offsets(numel, world)
    sizes = sharding.chunk_sizes(numel, world)
    for rank, per_rank in enumerate(placed(world)):
        _, _, offset, first_row = per_rank["dtensor"][numel]
        assert offset == (offsets[rank], 0), f"rank {rank}"
        # The values prove the placement: a non-empty shard starts at its offset.
        assert first_row == (offsets[rank] if sizes[rank] else None), f"rank {rank}"


def test_dtensor_2d_mesh_shards_each_dim_by_its_mesh_axis() -> None:
    rows, cols = MESH_2D
    for per_rank in placed(rows * cols):
        (i, j), local_shape, corner = per_rank["mesh2d"]
        expected_shape = (
            sharding.chunk_sizes(SHAPE_2D[0], rows)[i],
            sharding.chunk_sizes(SHAPE_2D[1], cols)[j],
        )
        assert local_shape == expected_shape, f"mesh coordinate {(i, j)}"
        expected_corner = (
            sharding.chunk_offsets(SHAPE_2D[0], rows)[i],
            sharding.chunk_offsets(SHAPE_2D[1], cols)[j],
        )
        assert corner == expected_corner, f"mesh coordinate {(i, j)}"


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_fsdp2_local_shards_follow_torch_chunk(world: int) -> None:
    for rank, per_rank in enumerate(placed(world)):
        for name, info in per_rank["fsdp"].items():
            expected = sharding.shard_shape(info["global"], world, rank)
            assert info["local"] == expected, f"rank {rank} {name}"


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_fsdp2_allocates_the_padded_shard_on_every_rank(world: int) -> None:
    for rank, per_rank in enumerate(placed(world)):
        for name, info in per_rank["fsdp"].items():
            dim0, *rest = info["global"]
            padded = (sharding.padded_shard_size(dim0, world), *rest)
            assert info["padded"] == padded, f"rank {rank} {name}"
            numel_rest = 1
            for d in rest:
                numel_rest *= d
            assert info["padded_numel"] == padded[0] * numel_rest, f"rank {rank} {name}"
            # Every rank's padded buffer is the same size, so one all-gather rebuilds it.
            assert info["padded_numel"] * world >= dim0 * numel_rest
