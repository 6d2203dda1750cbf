"""Each simulated collective in infralens.collectives against real gloo collectives.

One process group per world size runs every case; the tests then compare
element by element. Inputs are distinct integers per (rank, index), so a
wrong placement or a wrong order cannot cancel out.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens import collectives  # noqa: E402

WORLD_SIZES = (2, 3, 4)
LENGTHS = (1, 7, 12)  # free lengths: all_reduce, all_gather, broadcast, reduce
CHUNKS = (1, 3, 5)  # per-rank chunk lengths: reduce_scatter, all_to_all (length = chunk * world)


def rank_input(rank: int, length: int) -> list[int]:
    return [1000 * (rank + 1) + i for i in range(length)]


def inputs(world: int, length: int) -> list[list[int]]:
    return [rank_input(r, length) for r in range(world)]


def _run_all(rank: int, world: int) -> dict[tuple[Any, ...], list[float] | None]:
    import torch
    import torch.distributed as dist

    def t(length: int) -> torch.Tensor:
        return torch.tensor(rank_input(rank, length), dtype=torch.float64)

    out: dict[tuple[Any, ...], list[float] | None] = {}
    for n in LENGTHS:
        x = t(n)
        dist.all_reduce(x)
        out[("all_reduce", n)] = x.tolist()
        gathered = torch.empty(n * world, dtype=torch.float64)
        dist.all_gather_into_tensor(gathered, t(n))
        out[("all_gather", n)] = gathered.tolist()
        for root in range(world):
            x = t(n)
            dist.broadcast(x, src=root)
            out[("broadcast", n, root)] = x.tolist()
            x = t(n)
            dist.reduce(x, dst=root)
            out[("reduce", n, root)] = x.tolist() if rank == root else None
    for c in CHUNKS:
        scattered = torch.empty(c, dtype=torch.float64)
        dist.reduce_scatter_tensor(scattered, t(c * world))
        out[("reduce_scatter", c)] = scattered.tolist()
        exchanged = torch.empty(c * world, dtype=torch.float64)
        dist.all_to_all_single(exchanged, t(c * world))
        out[("all_to_all", c)] = exchanged.tolist()
    return out


def gloo_results(world: int) -> list[dict[tuple[Any, ...], list[float] | None]]:
    return run_on_ranks_cached(_run_all, world)


def observed(world: int, key: tuple[Any, ...]) -> list[list[int] | None]:
    rows = [per_rank[key] for per_rank in gloo_results(world)]
    return [None if row is None else [int(v) for v in row] for row in rows]


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("n", LENGTHS)
def test_all_reduce(world: int, n: int) -> None:
    assert observed(world, ("all_reduce", n)) == collectives.all_reduce(inputs(world, n))


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("n", LENGTHS)
def test_all_gather(world: int, n: int) -> None:
    assert observed(world, ("all_gather", n)) == collectives.all_gather(inputs(world, n))


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("c", CHUNKS)
def test_reduce_scatter(world: int, c: int) -> None:
    expected = collectives.reduce_scatter(inputs(world, c * world))
    assert observed(world, ("reduce_scatter", c)) == expected


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("c", CHUNKS)
def test_all_to_all(world: int, c: int) -> None:
    expected = collectives.all_to_all(inputs(world, c * world))
    assert observed(world, ("all_to_all", c)) == expected


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("n", LENGTHS)
def test_broadcast_from_every_root(world: int, n: int) -> None:
    for root in range(world):
        expected = collectives.broadcast(inputs(world, n), root=root)
        assert observed(world, ("broadcast", n, root)) == expected, f"root={root}"


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("n", LENGTHS)
def test_reduce_to_every_root(world: int, n: int) -> None:
    for root in range(world):
        predicted = collectives.reduce(inputs(world, n), root=root)
        got = observed(world, ("reduce", n, root))
        assert got[root] == predicted[root], f"root={root}"
        assert all(p is None for q, p in enumerate(predicted) if q != root)
