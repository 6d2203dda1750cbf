"""Invariants, error paths and paper numbers of infralens.experts and infralens.expert_dispatch."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.collectives import all_to_all, bus_bandwidth_factor
from infralens.expert_dispatch import (
    all_to_all_bytes,
    expert_rank,
    layer_seconds,
    rank_tokens,
    received,
    send_buffer,
    send_counts,
    transpose,
)
from infralens.experts import expert_capacity, load_balancing_loss, route, top_k_experts
from infralens.plan import ParallelPlan


@st.composite
def routings(draw: st.DrawFn) -> tuple[int, int, int, list[list[tuple[int, ...]]]]:
    """(experts, ep, top_k, per-rank routes) with every token picking top_k distinct experts."""
    ep = draw(st.sampled_from([1, 2, 4]))
    experts = ep * draw(st.integers(1, 3))
    k = draw(st.integers(1, experts))
    tokens = st.permutations(range(experts)).map(lambda p: tuple(p[:k]))
    per_rank = [draw(st.lists(tokens, max_size=6)) for _ in range(ep)]
    return experts, ep, k, per_rank


# --- top-k routing -------------------------------------------------------------------------


@given(
    st.lists(st.lists(st.integers(-3, 3), min_size=4, max_size=4), max_size=8), st.integers(1, 4)
)
def test_top_k_picks_the_highest_scores_lowest_index_on_ties(rows: list[list[int]], k: int) -> None:
    for row, chosen in zip(rows, top_k_experts(rows, k), strict=True):
        assert len(set(chosen)) == k
        rest = [e for e in range(4) if e not in chosen]
        for e in chosen:  # nothing left out beats a chosen expert, ties included
            assert all((row[e], -e) > (row[r], -r) for r in rest)
        assert [row[e] for e in chosen] == sorted((row[e] for e in chosen), reverse=True)


def test_top_k_errors() -> None:
    with pytest.raises(ValueError, match=r"top_k must be <= experts: 3 > 2"):
        top_k_experts([[1, 2]], top_k=3)
    with pytest.raises(ValueError, match="top_k must be >= 1, got 0"):
        top_k_experts([[1, 2]], top_k=0)
    with pytest.raises(ValueError, match="row 1 differs"):
        top_k_experts([[1, 2], [1]], top_k=1)
    with pytest.raises(TypeError, match="scores must be numbers, got str"):
        top_k_experts([[1, "2"]], top_k=1)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="scores must not be NaN: row 0"):
        top_k_experts([[1.0, float("nan")]], top_k=1)


# --- capacity and drops ---------------------------------------------------------------------


def test_switch_eq_3_at_figure_3s_factors() -> None:
    # Fedus et al. (2022), eq. 3 with Figure 3's factors 1.0 and 1.5 on three experts, six tokens.
    assert expert_capacity(6, 3, capacity_factor=1.0) == 2
    assert expert_capacity(6, 3, capacity_factor=1.5) == 3


@given(st.integers(0, 5000), st.integers(1, 64), st.integers(1, 4), st.integers(1, 300))
def test_capacity_is_the_smallest_buffer_holding_the_scaled_share(
    tokens: int, experts: int, k: int, cf_percent: int
) -> None:
    cf = Fraction(cf_percent, 100)
    c = expert_capacity(tokens, experts, k, cf)
    assert c * experts >= cf * tokens * k > (c - 1) * experts


def test_capacity_errors() -> None:
    with pytest.raises(ValueError, match="capacity_factor must be > 0, got 0"):
        expert_capacity(8, 2, capacity_factor=0)
    with pytest.raises(ValueError, match="capacity_factor must be > 0, got -1"):
        expert_capacity(8, 2, capacity_factor=-1)
    with pytest.raises(ValueError, match="experts must be >= 1, got 0"):
        expert_capacity(8, 0)
    with pytest.raises(ValueError, match="tokens must be >= 0, got -1"):
        expert_capacity(-1, 2)


@given(routings(), st.integers(0, 6))
def test_route_conserves_copies_and_drops_the_latest_arrivals(
    case: tuple[int, int, int, list[list[tuple[int, ...]]]], cap: int
) -> None:
    experts, _, k, per_rank = case
    routes = [t for r in per_rank for t in r]
    r = route(routes, experts, capacity=cap)
    assert sum(r.load) == k * len(routes)
    assert all(kept == min(n, cap) for kept, n in zip(r.kept, r.load, strict=True))
    assert [n - kp for n, kp in zip(r.load, r.kept, strict=True)] == list(r.dropped)
    # arrival order: each expert keeps its first `cap` tokens and loses every later one
    arrivals = [[t for t, chosen in enumerate(routes) if x in chosen] for x in range(experts)]
    assert sorted(r.lost) == sorted((t, x) for x in range(experts) for t in arrivals[x][cap:])
    dropless = route(routes, experts)
    assert dropless.kept == dropless.load and dropless.lost == ()


def test_route_errors() -> None:
    with pytest.raises(ValueError, match=r"routes\[1\] expert must be in range\(0, 2\), got 2"):
        route([(0,), (2,)], experts=2)
    with pytest.raises(ValueError, match=r"routes\[0\] picks an expert twice: \(1, 1\)"):
        route([(1, 1)], experts=2)
    with pytest.raises(ValueError, match="capacity must be >= 0, got -1"):
        route([(0,)], experts=2, capacity=-1)


# --- placement -------------------------------------------------------------------------------


@given(st.integers(1, 8), st.integers(1, 8))
def test_every_expert_lives_on_exactly_one_rank(ep: int, per: int) -> None:
    experts = ep * per
    ranks = [expert_rank(x, experts, ep) for x in range(experts)]
    assert ranks == sorted(ranks)  # contiguous blocks
    assert [ranks.count(r) for r in range(ep)] == [per] * ep  # experts / ep on each rank


def test_placement_errors() -> None:
    with pytest.raises(ValueError, match="experts must be divisible by ep: 6 % 4 = 2"):
        expert_rank(0, 6, 4)
    with pytest.raises(ValueError, match=r"expert must be in range\(0, 8\), got 8"):
        expert_rank(8, 8, 4)


def test_ep_groups_come_from_the_plan_inside_dp() -> None:
    plan = ParallelPlan(tp=2, dp=4, ep=2)
    for group in plan.groups("ep"):
        assert len(group) == 2
        assert len({plan.coords(r)["tp"] for r in group}) == 1  # same TP slice
        assert {plan.coords(r)["ep"] for r in group} == {0, 1}
    with pytest.raises(
        ValueError, match=r"ep must divide dp \(experts are carved out of dp\): 6 % 4"
    ):
        ParallelPlan(dp=6, ep=4)


# --- dispatch and combine --------------------------------------------------------------------


@given(routings())
def test_dispatch_delivers_every_copy_to_its_experts_rank_once(
    case: tuple[int, int, int, list[list[tuple[int, ...]]]],
) -> None:
    experts, ep, _, per_rank = case
    counts = send_counts(per_rank, experts, ep)
    got = received(per_rank, experts, ep)
    sent = {(s, t, x) for s, routes in enumerate(per_rank) for t, c in enumerate(routes) for x in c}
    assert sorted(c for rows in got for c in rows) == sorted(sent)
    for dst, rows in enumerate(got):
        assert all(expert_rank(x, experts, ep) == dst for _, _, x in rows)
        assert len(rows) == sum(transpose(counts)[dst])  # column = output_split_sizes
        assert [s for s, _, _ in rows] == sorted(s for s, _, _ in rows)  # source-rank order
    assert transpose(transpose(counts)) == counts


def test_balanced_dispatch_is_the_equal_split_all_to_all() -> None:
    # each rank sends one token to every expert: equal chunks, so collectives.all_to_all applies
    experts, ep = 4, 4
    per_rank = [[(x,) for x in range(experts)] for _ in range(ep)]
    buffers = [[t for block in send_buffer(r, experts, ep) for t, _ in block] for r in per_rank]
    moved = all_to_all([[10 * s + t for t in b] for s, b in enumerate(buffers)])
    assert moved == [[10 * s + t for s, t, _ in rows] for rows in received(per_rank, experts, ep)]


@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 4), st.integers(1, 64))
def test_balanced_bytes_follow_the_all_to_all_bus_factor(ep: int, k: int, per_dst: int) -> None:
    counts = [[per_dst * k] * ep for _ in range(ep)]
    payload = ep * per_dst * k * 4096 * 2  # one rank's whole dispatch buffer
    assert (
        all_to_all_bytes(counts, 4096, 2) == [bus_bandwidth_factor("all_to_all", ep) * payload] * ep
    )


def test_dispatch_errors() -> None:
    with pytest.raises(ValueError, match="one list per EP rank: 1 != 2"):
        send_counts([[(0,)]], experts=2, ep=2)
    with pytest.raises(ValueError, match="counts must be >= 0, got -1"):
        all_to_all_bytes([[0, -1], [0, 0]], 8, 2)
    with pytest.raises(ValueError, match="hidden must be >= 1, got 0"):
        all_to_all_bytes([[0]], 0, 2)
    with pytest.raises(ValueError, match=r"counts must be square \(ep x ep\), got 1 rows"):
        all_to_all_bytes([[0, 1]], 8, 2)
    with pytest.raises(ValueError, match="experts must be divisible by ep: 3 % 2 = 1"):
        send_buffer([(0,)], experts=3, ep=2)


# --- stragglers and balance ------------------------------------------------------------------


@given(st.lists(st.integers(0, 50), min_size=8, max_size=8), st.sampled_from([1, 2, 4, 8]))
def test_the_slowest_rank_sets_the_layer_time(load: list[int], ep: int) -> None:
    ranks = rank_tokens(load, ep)
    assert ranks == [
        sum(n for x, n in enumerate(load) if expert_rank(x, 8, ep) == r) for r in range(ep)
    ]
    assert layer_seconds(load, ep, 3, 6) == Fraction(max(ranks) * 3, 6)
    balanced = [sum(load) // 8] * 8
    assert layer_seconds(load, ep, 1, 1) >= layer_seconds(balanced, ep, 1, 1)


def test_capacity_caps_the_straggler_at_the_padded_buffer() -> None:
    hot, cap = [18, 2, 2, 2, 2, 2, 2, 2], 5
    assert layer_seconds(hot, 4, 1, 1) == hot[0] + hot[1]  # rank 0 holds experts 0 and 1
    assert layer_seconds(hot, 4, 1, 1, capacity=cap) == 2 * cap  # two full padded buffers
    dropped = route([(x,) for x, n in enumerate(hot) for _ in range(n)], 8, cap).dropped
    assert dropped == (hot[0] - cap,) + (0,) * 7  # only the hot expert overflows


def test_layer_time_errors() -> None:
    with pytest.raises(ValueError, match="flops_per_second must be > 0, got 0"):
        layer_seconds([1, 1], 1, 1, 0)
    with pytest.raises(ValueError, match="experts must be divisible by ep: 3 % 2 = 1"):
        layer_seconds([1, 1, 1], 2, 1, 1)
    with pytest.raises(ValueError, match="load must be >= 0, got -1"):
        layer_seconds([-1, 1], 1, 1, 1, capacity=2)
    with pytest.raises(ValueError, match="capacity must be >= 0, got -1"):
        layer_seconds([1, 1], 1, 1, 1, capacity=-1)


def test_switch_loss_is_alpha_when_uniform_and_alpha_n_when_collapsed() -> None:
    # Fedus et al. (2022), eq. 4 and the text after it: uniform routing gives sum f_i P_i = 1/N,
    # so the loss is alpha (10^-2 in the paper) for any N.
    alpha, n = Fraction(1, 100), 8
    uniform = load_balancing_loss([[Fraction(1, n)] * n] * 16, [2] * n, alpha)
    collapsed = load_balancing_loss([[1] + [0] * (n - 1)] * 16, [16] + [0] * (n - 1), alpha)
    assert (uniform, collapsed) == (alpha, alpha * n)


def test_loss_errors() -> None:
    with pytest.raises(ValueError, match="one row of 2 probabilities per token"):
        load_balancing_loss([[1, 0, 0]], [1, 0])
    with pytest.raises(ValueError, match="load must route at least one token, got 0"):
        load_balancing_loss([[1, 0]], [0, 0])
