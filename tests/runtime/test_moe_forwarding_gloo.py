"""Two-hop dispatch (network to the same-rail peer, then intra-node fan-out) on gloo.

Four ranks play two nodes of two GPUs. Each rank routes 12 tokens top-3 over 8
experts (2 per rank). Hop 1 is an ``all_to_all_single`` inside each rail group
(ranks with the same local index, one per node): a token goes once to every node
that holds one of its experts, carrying its expert list. Hop 2 is an
``all_to_all_single`` inside each node: the peer fans each row out once to every
local rank holding one of its experts. Expanding the rows into (source, token,
expert) must give each rank exactly what the flat dispatch of
:func:`infralens.expert_dispatch.received` gives, and the rows that crossed nodes
in hop 1 must equal :func:`infralens.moe_systems.network_copies`' ``forwarded``.
"""

from __future__ import annotations

import random

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.expert_dispatch import expert_rank, received  # noqa: E402
from infralens.moe_systems import network_copies  # noqa: E402

WORLD, GPUS, EXPERTS, TOP_K, TOKENS = 4, 2, 8, 3, 12


def routes(rank: int) -> list[tuple[int, ...]]:
    rng = random.Random(rank)
    return [tuple(rng.sample(range(EXPERTS), TOP_K)) for _ in range(TOKENS)]


def _two_hops(rank: int, world: int) -> tuple[list[list[int]], int]:
    """Rows (source, token, expert) this rank's experts receive, and rows it sent off-node."""
    import torch.distributed as dist

    nodes = world // GPUS
    rails = [dist.new_group([n * GPUS + g for n in range(nodes)]) for g in range(GPUS)]
    locals_ = [dist.new_group([n * GPUS + g for g in range(GPUS)]) for n in range(nodes)]
    node, local = divmod(rank, GPUS)

    # hop 1: one row per (token, destination node), to the peer with my local index
    by_node: list[list[list[int]]] = [[] for _ in range(nodes)]
    for t, chosen in enumerate(routes(rank)):
        for n in sorted({expert_rank(x, EXPERTS, world) // GPUS for x in chosen}):
            by_node[n].append([rank, t, *chosen])
    sent_off_node = sum(len(b) for n, b in enumerate(by_node) if n != node)
    hop1 = _exchange(by_node, rails[local])
    # hop 2: inside my node, one row per (token, destination local rank)
    by_local: list[list[list[int]]] = [[] for _ in range(GPUS)]
    for r in hop1:
        dests = {expert_rank(x, EXPERTS, world) for x in r[2:]}
        for g in range(GPUS):
            if node * GPUS + g in dests:
                by_local[g].append(r)
    hop2 = _exchange(by_local, locals_[node])
    mine = sorted(
        [src, t, x]
        for src, t, *chosen in hop2
        for x in chosen
        if expert_rank(x, EXPERTS, world) == rank
    )
    return mine, sent_off_node


def _exchange(blocks: list[list[list[int]]], group: object) -> list[list[int]]:
    """``all_to_all_single`` of variable blocks of (2 + TOP_K)-wide int rows in *group*."""
    import torch as t
    import torch.distributed as d

    width = 2 + TOP_K
    send = t.tensor([r for b in blocks for r in b], dtype=t.int64).reshape(-1, width)
    counts = t.tensor([len(b) for b in blocks], dtype=t.int64)
    recv_counts = t.empty_like(counts)
    d.all_to_all_single(recv_counts, counts, group=group)
    out = t.empty(int(recv_counts.sum()), width, dtype=t.int64)
    d.all_to_all_single(out, send, recv_counts.tolist(), counts.tolist(), group=group)
    return [list(map(int, r)) for r in out.tolist()]


def test_two_hops_deliver_the_flat_dispatch_and_send_the_forwarded_count() -> None:
    predicted = received([routes(r) for r in range(WORLD)], EXPERTS, WORLD)
    for rank, (mine, off_node) in enumerate(run_on_ranks_cached(_two_hops, WORLD)):
        assert mine == sorted(list(r) for r in predicted[rank]), f"rank {rank}"
        copies = network_copies(
            routes(rank), experts=EXPERTS, ep=WORLD, gpus_per_node=GPUS, rank=rank
        )
        assert off_node == copies.forwarded < copies.direct, f"rank {rank}"
