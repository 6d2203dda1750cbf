"""Incidents: the Xid table and node response, PaLM's spike rewind, and ring summation order."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.collectives import all_reduce
from infralens.incidents import ACTIONS, XID, node_response, ring_order, ring_sum, spike_rewind


def test_table_is_consistent() -> None:
    assert set(XID) == {13, 31, 43, 48, 63, 64, 74, 79, 94, 95, 119, 120, 140, 155}
    for code, event in XID.items():
        assert event.code == code and event.action in ACTIONS
        assert event.scope in ("process", "gpu", "node")
    # a contained error restarts only the process; an uncontained one needs a GPU reset
    assert XID[94].action == "restart_process" and XID[95].action == "reset_gpu"
    assert XID[79].action == "drain_node"
    # NVIDIA's immediate buckets (Xid catalog): a remap event needs nothing, a
    # remap failure a reset (and a support case); GSP timeouts and errors a reset
    assert (XID[63].nvidia, XID[63].action) == ("IGNORE", "none")
    assert XID[64].nvidia == "RESET_GPU" and XID[64].action == "drain_node"
    assert {XID[c].nvidia for c in (13, 31, 94)} == {"RESTART_APP"}
    assert {XID[c].nvidia for c in (95, 119, 120, 140, 155)} == {"RESET_GPU"}
    assert XID[79].nvidia == "RESTART_BM"
    # the job never does less than NVIDIA's bucket asks for
    floor = {"IGNORE": "none", "RESTART_APP": "restart_process", "RESET_GPU": "reset_gpu"}
    for event in XID.values():
        if event.nvidia in floor:
            assert ACTIONS.index(event.action) >= ACTIONS.index(floor[event.nvidia])


@given(st.lists(st.sampled_from(sorted(XID)), max_size=6))
def test_node_response_is_the_strongest_action(codes: list[int]) -> None:
    got = node_response(codes)
    if not codes:
        assert got == "none"
        return
    assert got in {XID[c].action for c in codes}
    assert all(ACTIONS.index(got) >= ACTIONS.index(XID[c].action) for c in codes)


@given(st.integers(0, 10**6), st.integers(1, 5000), st.integers(0, 500), st.integers(0, 1000))
def test_spike_rewind_restarts_on_a_checkpoint_before_the_spike(
    step: int, every: int, back: int, skip: int
) -> None:
    restart, skipped = spike_rewind(step, checkpoint_every=every, lookback=back, skip=skip)
    assert restart % every == 0 and restart <= max(0, step - back)
    assert max(0, step - back) - restart < every  # the latest such checkpoint
    assert skipped.start == restart and skipped.stop == step + skip


def test_palm_counts_the_replayed_batches_among_the_skipped() -> None:
    """PaLM skipped 200-500 batches in all, those between restart and spike included."""
    restart, skipped = spike_rewind(48_730, checkpoint_every=100, lookback=100, skip=200)
    assert restart == 48_600 and 200 <= len(skipped) <= 500


@given(st.integers(1, 64), st.integers(0, 200))
def test_ring_order_visits_every_rank_once(n: int, chunk: int) -> None:
    order = ring_order(n, chunk)
    assert sorted(order) == list(range(n)) and order[0] == chunk % n


def test_float_ring_sums_depend_on_the_order_exact_sums_do_not() -> None:
    """Same values, different chunk (hence start rank): float sums differ, Fractions agree."""
    rng = random.Random(0)
    differ = 0
    for _ in range(200):
        values = [rng.uniform(-1, 1) * 10 ** rng.randint(-8, 8) for _ in range(8)]
        sums = {ring_sum(values, chunk=c) for c in range(8)}
        differ += len(sums) > 1
        exact = all_reduce([[Fraction(v)] for v in values])[0][0]
        assert all(
            abs(Fraction(s) - exact) <= abs(exact) * Fraction(1, 10**12) + Fraction(1, 10**6)
            for s in sums
        )
    assert differ > 100  # most inputs give more than one float result


def test_world_size_changes_the_bits() -> None:
    """Eight values on 8 ranks, or pre-summed in pairs on 4: another order, other bits."""
    values = [1e16, 1.0, -1e16, 1.0, 3.0, 1e-3, -3.0, 1e-3]
    on_8 = ring_sum(values, chunk=0)
    on_4 = ring_sum([values[i] + values[i + 1] for i in range(0, 8, 2)], chunk=0)
    assert on_8 != on_4


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="Xid codes in XID"):
        node_response([94, 12])
    with pytest.raises(ValueError, match="spike_step must be >= 0"):
        spike_rewind(-1, checkpoint_every=10)
    with pytest.raises(ValueError, match="per_rank must hold one value"):
        ring_sum([], chunk=0)
    with pytest.raises(ValueError, match="chunk must be >= 0"):
        ring_order(4, -1)
