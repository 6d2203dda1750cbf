"""infralens.fsdp's predicted collective order and sizes against FSDP2 on gloo.

Each layer of a small model is wrapped with ``fully_shard`` (PyTorch 2.13),
then one forward and backward run while ``dist.all_gather_single`` and
``dist.reduce_scatter_single`` (what FSDP2's default collectives call) are
wrapped to record every call with its size.
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.fsdp import Unit, step_events, unit_padded_numel  # noqa: E402

WORLD_SIZES = (2, 4)
# (in_features, out_features, bias): weights are (out, in), so dims 0 are 5, 6, 3.
LAYERS = ((4, 5, True), (5, 6, False), (6, 3, True))


def units() -> list[Unit]:
    out = []
    for index, (fan_in, fan_out, bias) in enumerate(LAYERS):
        shapes: tuple[tuple[int, ...], ...] = ((fan_out, fan_in),)
        if bias:
            shapes += ((fan_out,),)
        out.append(Unit(f"layer{index}", shapes))
    return out


def _record(rank: int, world: int) -> dict[bool, list[tuple[str, int]]]:
    """Record both reshard settings in one process group (spawning ranks is the slow part)."""
    return {reshard: _record_one(world, reshard) for reshard in (True, False)}


def _record_one(world: int, reshard: bool) -> list[tuple[str, int]]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    calls: list[tuple[str, int]] = []
    all_gather, reduce_scatter = dist.all_gather_single, dist.reduce_scatter_single

    def gather(output: torch.Tensor, input: torch.Tensor, *a: object, **k: object) -> object:
        calls.append(("all_gather", output.numel()))
        return all_gather(output, input, *a, **k)

    def scatter(output: torch.Tensor, input: torch.Tensor, *a: object, **k: object) -> object:
        calls.append(("reduce_scatter", input.numel()))
        return reduce_scatter(output, input, *a, **k)

    dist.all_gather_single, dist.reduce_scatter_single = gather, scatter
    try:
        mesh = init_device_mesh("cpu", (world,))
        torch.manual_seed(0)
        model = torch.nn.Sequential(*(torch.nn.Linear(i, o, bias=b) for i, o, b in LAYERS))
        for layer in model:
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        model(torch.ones(2, LAYERS[0][0])).sum().backward()
    finally:
        dist.all_gather_single, dist.reduce_scatter_single = all_gather, reduce_scatter
    return calls


@pytest.mark.parametrize("reshard", [True, False])
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_fsdp2_collective_order_matches_the_predicted_events(world: int, reshard: bool) -> None:
    layers = units()
    predicted = [
        (e.op, unit_padded_numel(layers[e.unit], world))
        for e in step_events(layers, reshard_after_forward=reshard)
        if e.op in ("all_gather", "reduce_scatter")
    ]
    for rank, observed in enumerate(run_on_ranks_cached(_record, world)):
        assert observed[reshard] == predicted, f"rank {rank}"
