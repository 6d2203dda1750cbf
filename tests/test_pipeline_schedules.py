"""Invariants, error paths and paper numbers of infralens.pipeline_orders and pipeline_schedules.

The simulated timelines are checked against the closed forms of infralens.pipeline.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.pipeline import bubble_fraction, idle_fraction, zb_h1_bubble_fraction
from infralens.pipeline_memory import in_flight
from infralens.pipeline_orders import SCHEDULES, schedule_order, torch_round_size
from infralens.pipeline_schedules import measured_bubble, measured_idle, simulate

sizes = st.integers(1, 6)


@st.composite
def cases(draw: st.DrawFn, names: tuple[str, ...] = SCHEDULES) -> tuple[str, int, int, int]:
    """(schedule, p, m, v) that Megatron's rules accept."""
    name = draw(st.sampled_from(names))
    p = draw(sizes)
    if name != "interleaved":
        return name, p, draw(st.integers(1, 12)), 1
    return name, p, p * draw(st.integers(1, 4)), draw(st.integers(1, 4))


@given(cases(("gpipe", "1f1b", "interleaved")), st.integers(1, 3), st.integers(1, 4))
def test_measured_idle_time_agrees_with_both_formulas(
    case: tuple[str, int, int, int], f: int, b: int
) -> None:
    name, p, m, v = case
    t = simulate(name, stages=p, microbatches=m, chunks=v, forward=f, backward=b)
    assert measured_bubble(t) == bubble_fraction(stages=p, microbatches=m, chunks=v)
    assert measured_idle(t) == idle_fraction(stages=p, microbatches=m, chunks=v)
    # every stage waits equally: (p - 1) (F + B) / v in total
    assert all(t.idle(s) == Fraction((p - 1) * (f + b), v) for s in range(p))
    assert t.makespan == m * (f + b) + Fraction((p - 1) * (f + b), v)


@given(sizes, st.integers(1, 12), st.integers(1, 4))
def test_pytorch_rounds_keep_the_formula_once_m_reaches_p(p: int, m: int, v: int) -> None:
    try:
        t = simulate("interleaved", stages=p, microbatches=m, chunks=v, rules="torch")
    except ValueError:
        assert m % max(1, m // p)
        return
    if m >= p:
        assert measured_bubble(t) == bubble_fraction(stages=p, microbatches=m, chunks=v)
    else:  # fewer microbatches than stages: a round cannot fill the pipeline
        assert measured_bubble(t) >= bubble_fraction(stages=p, microbatches=m, chunks=v)


@given(cases())
def test_every_action_runs_once_after_its_input(case: tuple[str, int, int, int]) -> None:
    name, p, m, v = case
    t = simulate(name, stages=p, microbatches=m, chunks=v)
    end = {}
    for s, row in enumerate(t.rows):
        assert all(a.end <= b.start for a, b in itertools.pairwise(row))
        for slot in row:
            end[(slot.kind, slot.microbatch, slot.chunk * p + s)] = (
                slot.start,
                slot.end,
            )
    assert len(end) == (3 if name == "zb-h1" else 2) * m * p * v
    last = p * v - 1
    for (kind, i, k), (start, _) in end.items():
        if kind == "W":
            dep = ("B", i, k)
        elif kind == "F":
            dep = ("F", i, k - 1)
        else:
            dep = ("B", i, k + 1) if k < last else ("F", i, k)
        if kind != "F" or k > 0:
            assert end[dep][1] <= start


@given(sizes, st.integers(1, 12))
def test_activations_in_flight(p: int, m: int) -> None:
    assert simulate("gpipe", stages=p, microbatches=m).peak_in_flight == (m,) * p
    one = simulate("1f1b", stages=p, microbatches=m).peak_in_flight
    assert one == tuple(min(m, p - s) for s in range(p))


@given(st.integers(2, 6), st.integers(1, 3), st.integers(2, 4))
def test_interleaved_peak_is_megatrons_warmup_plus_one(p: int, rounds: int, v: int) -> None:
    m = p * rounds
    peaks = simulate("interleaved", stages=p, microbatches=m, chunks=v).peak_in_flight
    # Megatron-Core's warm-up (d98e8a6): 2 (p - 1 - s) + (v - 1) p forwards, capped at
    # m·v, plus the one in flight; m = p is no exception
    warmup = [2 * (p - 1 - s) + (v - 1) * p for s in range(p)]
    assert peaks == tuple(min(m * v, w + 1) for w in warmup)


@given(st.integers(2, 8), st.integers(1, 3), st.integers(1, 4))
def test_the_simulator_and_the_memory_count_hold_the_same_chunks_in_flight(
    p: int, rounds: int, v: int
) -> None:
    m = p * rounds
    schedule = "interleaved" if v > 1 else "1f1b"
    peaks = simulate(schedule, stages=p, microbatches=m, chunks=v).peak_in_flight
    assert peaks == tuple(in_flight(s, p, chunks=v, microbatches=m) for s in range(p))


def test_interleaved_with_as_many_microbatches_as_stages_keeps_its_warmup() -> None:
    # p 4, m 4, v 2: the later stages start their backwards before every forward has run
    shape = {"stages": 4, "microbatches": 4, "chunks": 2}
    assert simulate("interleaved", **shape).peak_in_flight == (8, 8, 7, 5)
    assert tuple(in_flight(s, 4, chunks=2, microbatches=4) for s in range(4)) == (8, 8, 7, 5)


@given(sizes, st.integers(0, 8), st.integers(1, 3), st.integers(0, 3), st.integers(0, 3))
def test_zb_h1_matches_qi_et_al_table_2(p: int, extra: int, w: int, more_f: int, more: int) -> None:
    """Bubble (p - 1)(T_F + T_B - T_W) when m >= p and T_W <= T_F, T_B; memory as 1F1B."""
    m, f, t_b = p + extra, w + more_f, w + more  # T_W no longer than T_F or T_B
    t = simulate("zb-h1", stages=p, microbatches=m, forward=f, backward=t_b + w, weight=w)
    assert measured_bubble(t) == zb_h1_bubble_fraction(
        stages=p, microbatches=m, forward=f, backward=t_b + w, weight=w
    )
    assert all(t.idle(s) == (p - 1) * (f + t_b - w) for s in range(p))
    assert t.peak_in_flight == simulate("1f1b", stages=p, microbatches=m).peak_in_flight
    kinds = [slot.kind for slot in t.rows[0]]
    assert kinds.count("F") == kinds.count("B") == kinds.count("W") == m


def test_zb_h1_formula_needs_w_no_longer_than_f() -> None:
    t = simulate("zb-h1", stages=2, microbatches=2, forward=1, backward=4, weight=2)
    assert measured_bubble(t) > zb_h1_bubble_fraction(
        stages=2, microbatches=2, forward=1, backward=4, weight=2
    )


def test_zb_h1_is_a_third_of_1f1b_when_f_b_w_are_equal() -> None:
    one = bubble_fraction(stages=4, microbatches=8)
    zb = measured_bubble(simulate("zb-h1", stages=4, microbatches=8, forward=1, backward=2))
    assert zb == one / 3 == Fraction(1, 8)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: schedule_order("zb", stages=2, microbatches=2), "schedule must be one of"),
        (lambda: schedule_order("gpipe", stages=0, microbatches=2), "stages must be >= 1"),
        (lambda: schedule_order("gpipe", stages=2, microbatches=0), "microbatches must be >= 1"),
        (lambda: schedule_order("1f1b", stages=2, microbatches=2, chunks=2), "chunks must be 1"),
        (
            lambda: schedule_order("interleaved", stages=4, microbatches=6, chunks=2),
            "microbatches must be divisible by stages: 6 % 4 = 2",
        ),
        (
            lambda: schedule_order("1f1b", stages=4, microbatches=3, rules="torch"),
            "microbatches must be >= stages",
        ),
        (lambda: schedule_order("gpipe", stages=2, microbatches=2, rules="x"), "rules must be"),
        (lambda: torch_round_size(stages=4, microbatches=11), r"max\(1, 11 // 4\) = 2"),
        (lambda: simulate("gpipe", stages=2, microbatches=2, backward=0), "backward must be > 0"),
        (lambda: simulate("gpipe", stages=2, microbatches=2, chunks=0), "chunks must be >= 1"),
        (
            lambda: simulate("gpipe", stages=2, microbatches=2, forward=-1),
            "forward must be > 0, got -1",
        ),
        (
            lambda: simulate("1f1b", stages=2, microbatches=2, weight=1),
            "weight applies only to the zb-h1 schedule",
        ),
        (
            lambda: simulate("zb-h1", stages=2, microbatches=2, weight=2),
            "weight must be < backward = 2",
        ),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_float_durations_are_refused_so_timelines_stay_exact() -> None:
    with pytest.raises(TypeError, match=r"forward must be an int or Fraction, not a float"):
        simulate("gpipe", stages=2, microbatches=2, forward=0.5)  # type: ignore[arg-type]


def test_megatron_rules_accept_fewer_microbatches_than_stages_for_1f1b() -> None:
    assert simulate("1f1b", stages=4, microbatches=3).peak_in_flight == (3, 3, 2, 1)
