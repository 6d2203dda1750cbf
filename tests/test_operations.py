"""infralens.operations and infralens.goodput: hangs, stragglers, failures and checkpoint cadence.

Checked against independent constructions (a simulated hang, an injected slow
rank or link), a brute-force optimum, Daly's (2006) published examples and the
Llama 3 report (Dubey et al. 2024, section 3.3.4, Table 5).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.goodput import (
    checkpoint_cost,
    daly_interval,
    expected_loss_per_failure,
    goodput,
    job_mtbf_seconds,
    max_restart_seconds,
    observed_mtbf_seconds,
    young_interval,
)
from infralens.operations import (
    CollectiveRecord,
    find_hang,
    find_straggler,
    hang_culprits,
    optimal_checkpoint_interval,
)

# --- hangs ---------------------------------------------------------------------------------


@st.composite
def hung_jobs(draw: st.DrawFn) -> tuple[dict[int, int], set[int]]:
    """A group in which some ranks stopped at collective k and the rest went on."""
    world = draw(st.integers(2, 32))
    culprits = set(draw(st.sets(st.integers(0, world - 1), min_size=1, max_size=world - 1)))
    k = draw(st.integers(0, 10_000))
    last = {r: k if r in culprits else k + draw(st.integers(1, 3)) for r in range(world)}
    return last, culprits


@given(hung_jobs())
def test_hang_culprits_are_the_ranks_that_stopped_first(
    job: tuple[dict[int, int], set[int]],
) -> None:
    last, culprits = job
    assert hang_culprits(last) == sorted(culprits)


@given(st.integers(1, 64), st.integers(0, 10**6))
def test_no_culprit_when_every_rank_is_in_the_same_collective(world: int, seq: int) -> None:
    assert hang_culprits(dict.fromkeys(range(world), seq)) == []


def _records(last: dict[int, int], low: int, start: int = 1) -> dict[int, list[CollectiveRecord]]:
    # every member started collectives <= low, so those completed; later ones wait
    return {
        r: [CollectiveRecord(s, "all_reduce", 64, s <= low) for s in range(start, n + 1)]
        for r, n in last.items()
    }


@given(hung_jobs(), st.integers(0, 5))
def test_find_hang_agrees_with_hang_culprits(
    job: tuple[dict[int, int], set[int]], dropped: int
) -> None:
    last, culprits = job
    low = min(last.values())
    records = _records(last, low, start=max(1, low - dropped))
    hang = find_hang(records)
    assert hang is not None
    assert hang.seq == low + 1
    assert list(hang.missing) == hang_culprits(last) == sorted(culprits)
    assert set(hang.waiting) == set(last) - culprits
    assert not hang.mismatched


def test_find_hang_is_none_when_every_collective_completed() -> None:
    done = [CollectiveRecord(s, "all_gather", 8, True) for s in range(1, 6)]
    assert find_hang({0: done, 1: done, 2: done[2:]}) is None


def test_find_hang_with_no_records_at_all_is_none() -> None:
    assert find_hang({0: [], 1: []}) is None


def test_find_hang_reports_a_stuck_collective_every_rank_joined() -> None:
    pending = [CollectiveRecord(1, "reduce_scatter", 128)]
    hang = find_hang({0: pending, 1: pending})
    assert hang is not None and hang.missing == () and hang.waiting == (0, 1)


def test_find_hang_flags_a_size_mismatch() -> None:
    hang = find_hang(
        {0: [CollectiveRecord(3, "all_reduce", 64)], 1: [CollectiveRecord(3, "all_reduce", 32)]}
    )
    assert hang is not None and hang.mismatched and hang.missing == ()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hang_culprits({}), "at least one rank"),
        (lambda: hang_culprits({0: -1}), "must be >= 0"),
        (lambda: hang_culprits({0: True}), "must be an int"),
        (lambda: find_hang({}), "at least one rank"),
        (
            lambda: find_hang({0: [CollectiveRecord(1, "x", 1), CollectiveRecord(1, "x", 1)]}),
            "twice",
        ),
    ],
)
def test_hang_bad_input(call: object, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        call()  # type: ignore[operator]


# --- stragglers ----------------------------------------------------------------------------


@given(
    st.integers(2, 8),
    st.integers(1, 4),
    st.floats(0.1, 2.0),
    st.floats(1.5, 4.0),
    st.floats(0.0, 0.2),
    st.data(),
)
def test_an_injected_slow_rank_is_found(
    group_size: int,
    n_groups: int,
    compute: float,
    factor: float,
    base_comm: float,
    data: st.DataObject,
) -> None:
    world = group_size * n_groups
    slow = data.draw(st.integers(0, world - 1))
    extra = compute * (factor - 1)
    groups = [list(range(g * group_size, (g + 1) * group_size)) for g in range(n_groups)]
    mine = next(g for g in groups if slow in g)
    # a collective ends when its last member arrives: the slow rank's peers wait `extra`
    comm = {r: base_comm + (extra if r in mine and r != slow else 0.0) for r in range(world)}
    times = {r: compute * (factor if r == slow else 1.0) for r in range(world)}
    verdict = find_straggler(times, comm, groups=groups)
    assert (verdict.kind, verdict.ranks) == ("slow rank", (slow,))


@given(st.integers(1, 8), st.integers(2, 6), st.floats(0.05, 1.0), st.floats(1.5, 5.0), st.data())
def test_an_injected_slow_link_is_found(
    group_size: int, n_groups: int, comm: float, factor: float, data: st.DataObject
) -> None:
    groups = [list(range(g * group_size, (g + 1) * group_size)) for g in range(n_groups)]
    bad = data.draw(st.integers(0, n_groups - 1))
    world = group_size * n_groups
    times = dict.fromkeys(range(world), 0.5)
    comm_s = {r: comm * (factor if r in groups[bad] else 1.0) for r in range(world)}
    verdict = find_straggler(times, comm_s, groups=groups)
    assert (verdict.kind, verdict.ranks) == ("slow link", tuple(groups[bad]))


@given(st.integers(1, 16), st.floats(0.0, 2.0), st.floats(0.0, 2.0))
def test_a_uniform_job_has_no_straggler(world: int, compute: float, comm: float) -> None:
    verdict = find_straggler(
        dict.fromkeys(range(world), compute),
        dict.fromkeys(range(world), comm),
        groups=[[r] for r in range(world)],
    )
    assert verdict.kind == "none"


def test_straggler_bad_input() -> None:
    with pytest.raises(ValueError, match="cover the same ranks"):
        find_straggler({0: 1.0, 1: 1.0}, {0: 0.0, 1: 0.0}, groups=[[0], [0, 1]])
    with pytest.raises(ValueError, match="must be >= 0"):
        find_straggler({0: -1.0}, {0: 0.0}, groups=[[0]])
    with pytest.raises(ValueError, match="ratio must be > 0"):
        find_straggler({0: 1.0}, {0: 0.0}, groups=[[0]], ratio=0)


# --- goodput and checkpoint cadence --------------------------------------------------------


def test_llama3_interruption_record() -> None:
    # Dubey et al. 2024, section 3.3.4: 466 interruptions (47 planned, 419 unexpected)
    # in a 54-day snapshot; Table 5 lists the 419 by cause and its counts sum to 419.
    table5 = [148, 72, 54, 35, 32, 19, 17, 7, 7, 6, 6, 3, 3, 2, 2, 2, 2, 2]
    assert sum(table5) == 419 and 419 + 47 == 466
    mtbf = observed_mtbf_seconds(interruptions=466, seconds=54 * 86_400)
    assert math.isclose(mtbf / 3600, 54 * 24 / 466)
    # the per-GPU MTBF implied on 16,384 GPUs, turned back into the job's
    gpu = observed_mtbf_seconds(interruptions=419, seconds=54 * 86_400) * 16_384
    assert math.isclose(job_mtbf_seconds(gpus=16_384, gpu_mtbf_seconds=gpu) * 419, 54 * 86_400)


@pytest.mark.parametrize(("hours", "minutes"), [(24, 117), (6, 57), (0.25, 9.1)])
def test_daly_reproduces_his_published_optima(hours: float, minutes: float) -> None:
    # Daly (2006), Figs. 3-5: delta = 5 min, R = 10 min, predicted tau_opt
    tau = daly_interval(checkpoint_seconds=300, mtbf_seconds=hours * 3600)
    assert round(tau / 60, 1 if minutes < 10 else 0) == minutes


def _first_order_waste(tau: float, delta: float, m: float) -> float:
    return delta / tau + tau / (2 * m)


@given(st.floats(1.0, 3600.0), st.floats(3600.0, 10**6))
def test_young_minimises_first_order_waste(delta: float, m: float) -> None:
    tau = young_interval(checkpoint_seconds=delta, mtbf_seconds=m)
    best = _first_order_waste(tau, delta, m)
    for scale in (0.9, 0.99, 1.01, 1.1):
        assert best <= _first_order_waste(tau * scale, delta, m) + 1e-15


@given(st.floats(1.0, 600.0), st.floats(3600.0, 10**6), st.floats(0.0, 3600.0))
def test_daly_is_at_least_as_close_to_the_exact_optimum_as_young(
    delta: float, m: float, restart: float
) -> None:
    def g(tau: float) -> float:
        return goodput(
            interval_seconds=tau, checkpoint_seconds=delta, restart_seconds=restart, mtbf_seconds=m
        )

    lo, hi = 1e-3, 4 * m  # golden-section search for the exact argmax (goodput is unimodal)
    for _ in range(200):
        a, b = hi - (hi - lo) / 1.618033988749895, lo + (hi - lo) / 1.618033988749895
        lo, hi = (lo, b) if g(a) > g(b) else (a, hi)
    best = (lo + hi) / 2
    daly = optimal_checkpoint_interval(checkpoint_seconds=delta, mtbf_seconds=m)
    young = young_interval(checkpoint_seconds=delta, mtbf_seconds=m)
    assert abs(daly - best) <= abs(young - best) + 1e-6 * best
    assert g(daly) >= g(young) - 1e-12


@given(st.floats(1.0, 600.0), st.floats(3600.0, 10**6), st.floats(0.5, 0.99))
def test_max_restart_round_trips_through_goodput(delta: float, m: float, target: float) -> None:
    r = max_restart_seconds(target=target, checkpoint_seconds=delta, mtbf_seconds=m)
    if r >= 0:
        tau = optimal_checkpoint_interval(checkpoint_seconds=delta, mtbf_seconds=m)
        got = goodput(
            interval_seconds=tau, checkpoint_seconds=delta, restart_seconds=r, mtbf_seconds=m
        )
        assert math.isclose(got, target, rel_tol=1e-9)


@given(
    st.floats(60.0, 10**5), st.floats(0.0, 600.0), st.floats(0.0, 3600.0), st.floats(3600.0, 10**7)
)
def test_goodput_matches_first_order_when_failures_are_rare(
    tau: float, delta: float, restart: float, m: float
) -> None:
    exact = goodput(
        interval_seconds=tau, checkpoint_seconds=delta, restart_seconds=restart, mtbf_seconds=m
    )
    loss = expected_loss_per_failure(
        interval_seconds=tau, checkpoint_seconds=delta, restart_seconds=restart
    )
    first = tau / (tau + delta) * (1 - loss / m)
    assert 0 < exact <= 1
    # the first-order form drops terms of order ((tau + delta + R) / M)**2
    assert abs(exact - first) <= 2 * ((tau + delta + restart) / m) ** 2 + 1e-12


def test_async_save_pauses_only_for_the_host_copy() -> None:
    sync = checkpoint_cost(total_bytes=10**12, gpus=100, storage_bytes_per_s=10**11)
    both = checkpoint_cost(
        total_bytes=10**12, gpus=100, storage_bytes_per_s=10**11, staging_bytes_per_s=10**10
    )
    assert sync.blocking_s == both.background_s == 10.0
    assert both.blocking_s == 10**12 / 100 / 10**10


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: young_interval(checkpoint_seconds=0, mtbf_seconds=1), "checkpoint_seconds"),
        (lambda: daly_interval(checkpoint_seconds=1, mtbf_seconds=math.nan), "mtbf_seconds"),
        (lambda: job_mtbf_seconds(gpus=0, gpu_mtbf_seconds=1), "gpus must be >= 1"),
        (lambda: observed_mtbf_seconds(interruptions=0, seconds=1), "interruptions"),
        (lambda: max_restart_seconds(target=1, checkpoint_seconds=1, mtbf_seconds=1), "< 1"),
        (lambda: checkpoint_cost(total_bytes=-1, gpus=1, storage_bytes_per_s=1), "total_bytes"),
        (
            lambda: goodput(
                interval_seconds=1, checkpoint_seconds=-1, restart_seconds=0, mtbf_seconds=1
            ),
            "checkpoint_seconds",
        ),
    ],
)
def test_goodput_bad_input(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
