"""infralens.overlap: exposed communication, decomposed TP collectives, gathers ahead, launches."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.overlap import (
    decomposed_exposed,
    exposed,
    gather_ahead,
    launch_timeline,
)

times = st.fractions(min_value=0, max_value=100, max_denominator=50)


def _ring_pipeline(comm: Fraction, gemm: Fraction, tp: int) -> Fraction:
    """Event-by-event: shard 0 is local; transfer i+1 runs beside shard i's GEMM."""
    shard, step = gemm / tp, comm / (tp - 1)
    gemm_free = Fraction(0)
    arrived = Fraction(0)  # shard 0 needs no transfer
    link_free = Fraction(0)
    for i in range(tp):
        start = max(gemm_free, arrived)
        if i + 1 < tp:  # the next shard's transfer starts with this shard's GEMM
            link_free = max(link_free, start) + step
            arrived_next = link_free
        gemm_free = start + shard
        arrived = arrived_next if i + 1 < tp else arrived
    return gemm_free - gemm


@given(times, times)
def test_exposed_is_what_outlasts_the_window(comm: Fraction, window: Fraction) -> None:
    e = exposed(comm_s=comm, window_s=window)
    assert 0 <= e <= comm
    assert e + min(comm, window) == comm


@given(times, times, st.integers(min_value=2, max_value=16))
def test_decomposition_matches_an_event_replay(comm: Fraction, gemm: Fraction, tp: int) -> None:
    got = decomposed_exposed(comm_s=comm, gemm_s=gemm, tp=tp)
    assert got == _ring_pipeline(comm, gemm, tp)
    # never worse than not overlapping at all, never better than hiding behind the whole GEMM
    assert exposed(comm_s=comm, window_s=gemm) <= got <= exposed(comm_s=comm, window_s=0)


@given(st.lists(st.tuples(times, times), max_size=12))
def test_gathers_ahead_show_at_least_the_first_and_at_most_all(
    pairs: list[tuple[Fraction, Fraction]],
) -> None:
    fwd = [f for f, _ in pairs]
    gat = [g for _, g in pairs]
    e = gather_ahead(fwd, gat)
    assert e <= sum(gat, start=Fraction(0))
    if pairs:
        assert e >= gat[0]
        # each forward at least as long as the next gather: only the first one shows
        if all(fwd[i] >= gat[i + 1] for i in range(len(pairs) - 1)):
            assert e == gat[0]


def test_without_forward_compute_every_gather_shows() -> None:
    assert gather_ahead([0, 0, 0], [1, 2, 3]) == 6


@given(st.lists(times, max_size=40), times)
def test_launch_timeline_bounds(kernels: list[Fraction], launch: Fraction) -> None:
    t = launch_timeline(kernels, launch_s=launch)
    assert t.busy_s == sum(kernels, start=Fraction(0))
    if kernels:
        # the GPU never runs ahead of the launches nor idles when it has work
        assert t.step_s == max(
            t.busy_s + launch,
            max(
                (i + 1) * launch + sum(kernels[i:], start=Fraction(0)) for i in range(len(kernels))
            ),
        )
        assert t.idle_s >= launch
        graphed = launch_timeline([t.busy_s], launch_s=launch)
        assert graphed.step_s <= t.step_s
    else:
        assert t.step_s == 0 and t.launch_share == 0


def test_free_launches_cost_nothing() -> None:
    t = launch_timeline([1, 2, 3], launch_s=0)
    assert t.step_s == t.busy_s == 6 and t.launch_share == 0


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: exposed(comm_s=1, window_s=-1), ValueError, "window_s"),
        (lambda: exposed(comm_s="1", window_s=0), TypeError, "comm_s"),
        (lambda: decomposed_exposed(comm_s=1, gemm_s=1, tp=True), TypeError, "tp"),
        (lambda: gather_ahead([1, 2], [1]), ValueError, "one entry per bucket"),
        (lambda: gather_ahead([1], [-1]), ValueError, r"gather_s\[0\]"),
        (lambda: gather_ahead("12", "12"), TypeError, "forward_s"),
        (lambda: launch_timeline([1, -2], launch_s=1), ValueError, r"kernel_s\[1\]"),
        (lambda: launch_timeline([1], launch_s=float("inf")), TypeError, "launch_s"),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()  # type: ignore[operator]
