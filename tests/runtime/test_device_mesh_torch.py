"""infralens.device_mesh and infralens.hsdp against a 2 x 2 DeviceMesh on four gloo ranks.

One group builds the meshes and places tensors with ``distribute_tensor``,
composes tensor parallelism with FSDP2 on a ``("dp", "tp")`` mesh, and runs
HSDP (``fully_shard`` on a ``("replicate", "shard")`` mesh) for one forward
and backward while recording every collective FSDP2 issues and its group.
The tests compare what each rank saw with the package.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens import device_mesh  # noqa: E402
from infralens.fsdp import Unit  # noqa: E402
from infralens.hsdp import sharding_step  # noqa: E402

WORLD = 4
MESH = (2, 2)
GLOBAL = (7, 5)  # uneven on both dims: torch.chunk leaves the last rank short
PLACEMENTS = (("S(0)", "S(1)"), ("S(0)", "S(0)"), ("R", "S(0)"), ("S(1)", "R"), ("R", "R"))
# (in, out, style): weights are (out, in). The column-parallel weight's 6 rows split
# tp first (3, 3 -> 2, 1 by dp rank) differ from dp first (3, 3 -> 2, 1 by tp rank).
TP_LAYERS = ((5, 6, "colwise"), (6, 7, "rowwise"))
HSDP_LAYERS = ((4, 3), (3, 5), (5, 2))


def _ranks(group: Any) -> tuple[int, ...]:
    import torch.distributed as dist

    return tuple(dist.get_process_group_ranks(group))


def _mesh_case(rank: int, world: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    out: dict[str, Any] = {}
    mesh = init_device_mesh("cpu", MESH, mesh_dim_names=("dp", "tp"))
    out["coordinate"] = tuple(mesh.get_coordinate() or ())
    out["groups"] = [_ranks(mesh.get_group(k)) for k in range(2)]
    full = torch.arange(GLOBAL[0] * GLOBAL[1], dtype=torch.float64).reshape(GLOBAL)
    place = {"R": Replicate(), "S(0)": Shard(0), "S(1)": Shard(1)}
    out["dtensor"] = {
        p: tuple(distribute_tensor(full, mesh, [place[x] for x in p]).to_local().shape)
        for p in PLACEMENTS
    }

    # TP inside the "tp" dimension, then FSDP2 over the "dp" dimension
    torch.manual_seed(0)
    tp_model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o, _ in TP_LAYERS))
    styles = {"colwise": ColwiseParallel(), "rowwise": RowwiseParallel()}
    plan = {str(k): styles[s] for k, (_, _, s) in enumerate(TP_LAYERS)}
    parallelize_module(tp_model, mesh["tp"], plan)
    for layer in tp_model:
        fully_shard(layer, mesh=mesh["dp"])
    out["fsdp_tp"] = {
        name: (tuple(p.shape), tuple(p.to_local().shape)) for name, p in tp_model.named_parameters()
    }

    # HSDP: replicate across the outer dimension, shard inside the inner one
    hsdp = init_device_mesh("cpu", MESH, mesh_dim_names=("replicate", "shard"))
    model = torch.nn.Sequential(*(torch.nn.Linear(i, o) for i, o in HSDP_LAYERS))
    for layer in model:
        fully_shard(layer, mesh=hsdp)
    fully_shard(model, mesh=hsdp)
    out["hsdp_params"] = {
        name: (tuple(p.shape), tuple(p.to_local().shape), tuple(str(x) for x in p.placements))
        for name, p in model.named_parameters()
    }
    info = model[0]._get_fsdp_state()._fsdp_param_group.mesh_info
    out["hsdp_groups"] = (_ranks(info.shard_process_group), _ranks(info.replicate_process_group))

    calls: list[tuple[str, tuple[int, ...], int]] = []
    saved = dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce

    def gather(output: Any, input: Any, *a: Any, **k: Any) -> Any:
        calls.append(("all_gather", _ranks(k["group"]), output.numel()))
        return saved[0](output, input, *a, **k)

    def scatter(output: Any, input: Any, *a: Any, **k: Any) -> Any:
        calls.append(("reduce_scatter", _ranks(k["group"]), input.numel()))
        return saved[1](output, input, *a, **k)

    def reduce(tensor: Any, *a: Any, **k: Any) -> Any:
        calls.append(("all_reduce", _ranks(k["group"]), tensor.numel()))
        return saved[2](tensor, *a, **k)

    dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce = gather, scatter, reduce
    try:
        model(torch.ones(2, HSDP_LAYERS[0][0])).sum().backward()
    finally:
        dist.all_gather_single, dist.reduce_scatter_single, dist.all_reduce = saved
    out["hsdp_calls"] = calls
    return out


def results() -> list[dict[str, Any]]:
    return run_on_ranks_cached(_mesh_case, WORLD)


def test_mesh_coordinates_are_row_major_and_groups_match() -> None:
    for rank, r in enumerate(results()):
        assert r["coordinate"] == divmod(rank, MESH[1])
        for k in range(2):
            mine = [g for g in device_mesh.mesh_groups(MESH, k) if rank in g]
            assert [list(r["groups"][k])] == mine, f"rank {rank} mesh dim {k}"


@pytest.mark.parametrize("placements", PLACEMENTS)
def test_distribute_tensor_local_shapes(placements: tuple[str, str]) -> None:
    for rank, r in enumerate(results()):
        expected = device_mesh.local_shape(GLOBAL, MESH, placements, r["coordinate"])
        assert r["dtensor"][placements] == expected, f"rank {rank}"


def test_fsdp2_on_tensor_parallel_shards_splits_tp_first() -> None:
    tp_dims = {"colwise": {"weight": 0, "bias": 0}, "rowwise": {"weight": 1, "bias": None}}
    for rank, r in enumerate(results()):
        dp_rank, tp_rank = r["coordinate"]
        for name, (global_shape, local) in r["fsdp_tp"].items():
            index, kind = name.split(".")
            tp_dim = tp_dims[TP_LAYERS[int(index)][2]][kind]
            expected = device_mesh.fsdp_tp_local_shape(
                global_shape, tp_dim=tp_dim, tp=MESH[1], dp=MESH[0], tp_rank=tp_rank,
                dp_rank=dp_rank,
            )  # fmt: skip
            assert local == expected, f"rank {rank} {name}"


def test_hsdp_shards_inside_and_replicates_across() -> None:
    for rank, r in enumerate(results()):
        for name, (global_shape, local, placements) in r["hsdp_params"].items():
            assert placements == ("R", "S(0)"), name  # str(Replicate()), str(Shard(0))
            expected = device_mesh.local_shape(global_shape, MESH, ("R", "S(0)"), r["coordinate"])
            assert local == expected, f"rank {rank} {name}"
        shard, replicate = r["hsdp_groups"]
        assert [list(shard)] == [g for g in device_mesh.mesh_groups(MESH, 1) if rank in g]
        assert [list(replicate)] == [g for g in device_mesh.mesh_groups(MESH, 0) if rank in g]


def test_hsdp_collectives_run_on_the_predicted_groups() -> None:
    """Every call, its group and its size, against sharding_step (one byte per element)."""
    from collections import Counter

    from infralens.topology import Cluster

    units = [Unit(str(k), ((o, i), (o,))) for k, (i, o) in enumerate(HSDP_LAYERS)]
    cluster = Cluster(nodes=2, gpus_per_node=2)  # a 2 x 2 mesh: shard inside, replicate across
    step = sharding_step(cluster, units, shard=MESH[1], param_bytes=1, reduce_bytes=1)
    expected = Counter[tuple[str, int, int]]()
    for c in step.collectives:
        expected[(c.op, c.group_size, c.nbytes)] += c.calls
    assert {c.link for c in step.collectives if c.dim == "replicate"} == {"network"}
    for rank, r in enumerate(results()):
        shard, replicate = r["hsdp_groups"]
        for op, group, _ in r["hsdp_calls"]:
            assert group == (replicate if op == "all_reduce" else shard), f"rank {rank} {op}"
        seen = Counter((op, len(group), numel) for op, group, numel in r["hsdp_calls"])
        assert seen == expected, f"rank {rank}"
