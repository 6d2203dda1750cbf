"""infralens.expert_dispatch's dispatch and combine against ``all_to_all_single`` on gloo.

Each rank routes its own tokens with :func:`top_k_experts`, packs them with
:func:`send_buffer`, and passes the module's send counts as
``input_split_sizes`` and the transposed counts as ``output_split_sizes``.
Each row carries (source rank, token, expert), so a token that lands on the
wrong rank, or in the wrong order, shows. A second ``all_to_all_single`` with
the splits swapped is the combine; unpermuting must give every rank back its
own tokens in their original order. All cases of one world size share one
process group.
"""

from __future__ import annotations

import random

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.expert_dispatch import received, send_buffer, send_counts  # noqa: E402
from infralens.experts import top_k_experts  # noqa: E402

WORLD_SIZES = (2, 4)
CASES = ("balanced", "hot_expert", "top2_random", "idle_rank")
EXPERTS_PER_RANK = 2


def routes_for(case: str, ep: int) -> list[list[tuple[int, ...]]]:
    """Every EP rank's per-token choices, from router scores through top_k_experts."""
    experts = EXPERTS_PER_RANK * ep
    rng = random.Random(f"{case}-{ep}")
    out = []
    for src in range(ep):
        tokens = 0 if case == "idle_rank" and src == ep - 1 else 6 + src
        if case == "balanced":  # token t prefers expert t mod experts
            scores = [
                [int(x == (t + src) % experts) for x in range(experts)] for t in range(tokens)
            ]
        elif case == "hot_expert":  # expert 0 wins most tokens; ties broken by the rule
            scores = [[int(x == 0 or t % 3 == 0) for x in range(experts)] for t in range(tokens)]
        else:
            scores = [[rng.randint(0, 9) for _ in range(experts)] for _ in range(tokens)]
        out.append(top_k_experts(scores, 1 if case == "balanced" else 2) if tokens else [])
    return out


def _dispatch_and_combine(
    rank: int, world: int
) -> dict[str, tuple[list[list[int]], list[list[int]]]]:
    """For every case: rows received after dispatch, and rows back home after combine."""
    import torch
    import torch.distributed as dist

    results = {}
    for case in CASES:
        # position of each (token, expert) copy in the token-major original order
        own = routes_for(case, world)[rank]
        order = {(t, x): i for i, (t, x) in enumerate((t, x) for t, c in enumerate(own) for x in c)}
        per_rank = routes_for(case, world)
        experts = EXPERTS_PER_RANK * world
        counts = send_counts(per_rank, experts, world)
        send = [
            (rank, t, x) for block in send_buffer(per_rank[rank], experts, world) for t, x in block
        ]
        inp = torch.tensor(send, dtype=torch.int64).reshape(len(send), 3)
        in_splits = counts[rank]
        out_splits = [counts[src][rank] for src in range(world)]
        out = torch.empty(sum(out_splits), 3, dtype=torch.int64)
        dist.all_to_all_single(out, inp, out_splits, in_splits)  # dispatch
        back = torch.empty_like(inp)
        dist.all_to_all_single(back, out, in_splits, out_splits)  # combine: splits swapped
        # unpermute by position only: slot i of the send buffer came from copy `slots[i]`
        slots = [order[(t, x)] for _, t, x in send]
        home: list[list[int]] = [[] for _ in send]
        for i, row in enumerate(back.tolist()):
            home[slots[i]] = row
        results[case] = (out.tolist(), home)
    return results


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_dispatch_lands_where_the_module_predicts(world: int, case: str) -> None:
    predicted = received(routes_for(case, world), EXPERTS_PER_RANK * world, world)
    for rank, got in enumerate(run_on_ranks_cached(_dispatch_and_combine, world)):
        assert got[case][0] == [list(row) for row in predicted[rank]], f"rank {rank}"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_combine_returns_tokens_home_in_original_order(world: int, case: str) -> None:
    per_rank = routes_for(case, world)
    for rank, got in enumerate(run_on_ranks_cached(_dispatch_and_combine, world)):
        original = [[rank, t, x] for t, chosen in enumerate(per_rank[rank]) for x in chosen]
        assert got[case][1] == original, f"rank {rank}"
