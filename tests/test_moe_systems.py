"""MoE systems: forwarded dispatch copies, the dropless receive buffer, shared experts, DualPipe."""

from __future__ import annotations

import random
from fractions import Fraction
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.expert_dispatch import all_to_all_bytes, received, send_counts
from infralens.moe_systems import (
    bubble_1f1b,
    bubble_dualpipe,
    bubble_zb1p,
    expected_nodes,
    moe_flops_per_token,
    network_copies,
    receive_rows,
)


def _routes(seed: int, tokens: int, experts: int, k: int) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    return [tuple(rng.sample(range(experts), k)) for _ in range(tokens)]


@given(st.integers(0, 10**6), st.sampled_from([(4, 2), (8, 4), (8, 2), (16, 4)]), st.integers(1, 4))
def test_forwarding_never_sends_more_than_the_flat_all_to_all(
    seed: int, shape: tuple[int, int], k: int
) -> None:
    ep, g = shape
    experts = 2 * ep
    routes = _routes(seed, 12, experts, k)
    for rank in range(ep):
        c = network_copies(routes, experts=experts, ep=ep, gpus_per_node=g, rank=rank)
        assert c.forwarded <= c.nvlink <= c.direct
        assert c.forwarded <= 12 * (ep // g - 1)  # at most one copy per token per other node


def test_direct_copies_are_expert_dispatchs_off_node_bytes() -> None:
    """With one GPU per node every other rank is off-node: direct = the flat all-to-all."""
    per_rank = [_routes(r, 10, 8, 2) for r in range(4)]
    counts = send_counts(per_rank, experts=8, ep=4)
    sent = all_to_all_bytes(counts, hidden=1, bytes_per_element=1)
    for rank in range(4):
        c = network_copies(per_rank[rank], experts=8, ep=4, gpus_per_node=1, rank=rank)
        assert c.direct == sent[rank]
        # a rank receives a copy per (token, expert): the received list counts the same copies
        assert sum(1 for rows in received(per_rank, 8, 4) for s, _, _ in rows if s == rank) == sum(
            counts[rank]
        )


def test_expected_nodes_matches_enumeration() -> None:
    experts, nodes, k = 8, 4, 3
    per = experts // nodes
    picks = list(combinations(range(experts), k))
    mean = Fraction(sum(len({x // per for x in p}) for p in picks), len(picks))
    assert expected_nodes(experts, nodes, k) == mean
    assert expected_nodes(256, 8, 8) < 8 * (1 - Fraction(7, 8) ** 8) + Fraction(1, 10)


def test_receive_rows_worst_case_is_reached() -> None:
    """Every rank's tokens all choosing rank 0's experts fills the worst-case buffer."""
    ep, experts, k, t = 4, 8, 2, 5
    per_rank = [[(0, 1)] * t for _ in range(ep)]
    got = len(received(per_rank, experts, ep)[0])
    assert got == receive_rows(t, ep=ep, experts=experts, top_k=k)[1]
    assert receive_rows(t, ep=ep, experts=experts, top_k=k, per_rank_once=True)[1] == ep * t
    balanced, worst = receive_rows(4096, ep=64, experts=256, top_k=8)
    assert worst // balanced == 32


def test_shared_expert_share_of_deepseek_v3_moe_flops() -> None:
    routed, shared = moe_flops_per_token(7168, 2048, top_k=8, shared=1)
    assert Fraction(shared, routed + shared) == Fraction(1, 9)


def test_dualpipe_table() -> None:
    """DeepSeek-V3 Table 2 with F = W = 1, B = 2 and F&B = F + B (nothing hidden)."""
    assert bubble_1f1b(8, forward=1, backward=2) == 21
    assert bubble_zb1p(8, forward=1, backward=2, weight=1) == 7
    assert bubble_dualpipe(8, overlapped=3, backward=2, weight=1) == 6
    # hiding communication shrinks F&B and with it the bubble
    assert bubble_dualpipe(8, overlapped=Fraction(5, 2), backward=2, weight=1) < 6


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(ValueError, match="rank must be in range"):
        network_copies([(0,)], experts=4, ep=4, gpus_per_node=2, rank=4)
    with pytest.raises(ValueError, match="picks an expert twice"):
        network_copies([(0, 0)], experts=4, ep=4, gpus_per_node=2, rank=0)
    with pytest.raises(ValueError, match="top_k must be <= experts"):
        receive_rows(4, ep=2, experts=4, top_k=5)
    with pytest.raises(ValueError, match="shared must be an int >= 0"):
        moe_flops_per_token(8, 8, top_k=1, shared=-1)
    with pytest.raises(ValueError, match="weight must be < backward"):
        bubble_zb1p(4, forward=1, backward=1, weight=1)
    with pytest.raises(ValueError, match="must be >= 0"):
        bubble_dualpipe(4, overlapped=1, backward=1, weight=1)
