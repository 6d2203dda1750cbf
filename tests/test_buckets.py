"""Invariants and error paths of infralens.buckets."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import buckets

sizes = st.lists(st.integers(0, 5000), max_size=30)
limits = st.lists(st.integers(1, 6000), min_size=1, max_size=4)


@given(sizes, limits, st.data())
def test_every_tensor_lands_in_exactly_one_single_dtype_bucket(
    s: list[int], lim: list[int], data: st.DataObject
) -> None:
    kinds = data.draw(st.lists(st.sampled_from("ab"), min_size=len(s), max_size=len(s)))
    result = buckets.assign_buckets(s, lim, dtypes=kinds)
    assert sorted(i for b in result for i in b) == list(range(len(s)))
    assert all(len({kinds[i] for i in b}) == 1 for b in result)
    assert [min(b) for b in result] == sorted(min(b) for b in result)


@given(sizes, st.integers(1, 6000))
def test_only_the_last_bucket_of_a_dtype_may_stay_under_the_limit(s: list[int], cap: int) -> None:
    result = buckets.assign_buckets(s, [cap])
    for b in result[:-1]:
        assert sum(s[i] for i in b) >= cap
        assert sum(s[i] for i in b[:-1]) < cap  # it closed at the first tensor that reached it


def test_ddp_limits_depend_on_whether_the_cap_was_set() -> None:
    assert buckets.ddp_bucket_limits() == [2**20, 25 * 2**20]
    assert buckets.ddp_bucket_limits(25) == [25 * 2**20]


def test_smaller_buckets_start_communication_earlier_but_pay_latency() -> None:
    layers = [Fraction(1)] * 8
    grads = [4 * 10**6] * 8

    def exposed(cap: int, latency: Fraction) -> Fraction:
        return buckets.overlap(
            layers, grads, [cap], world_size=8, bandwidth_bytes_per_s=10**7, latency_s=latency
        ).exposed

    assert exposed(4 * 10**6, Fraction(0)) < exposed(32 * 10**6, Fraction(0))
    assert exposed(4 * 10**6, Fraction(1)) > exposed(4 * 10**6, Fraction(0))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: buckets.assign_buckets([-1], [10]), r"sizes_bytes\[0\] must be >= 0"),
        (lambda: buckets.assign_buckets([1], []), "bucket_limits must hold at least one limit"),
        (lambda: buckets.assign_buckets([1], [0]), r"bucket_limits\[0\] must be >= 1"),
        (lambda: buckets.assign_buckets([1, 2], [5], dtypes=["a"]), "1 labels for 2 sizes"),
        (lambda: buckets.ddp_bucket_limits(0), "bucket_cap_mb must be >= 1"),
        (lambda: buckets.ddp_rebuilt_buckets([1, 2], [0, 0]), "ready_order must list every"),
        (lambda: buckets.ddp_rebuilt_buckets([1, 2], [1, 0], dtypes=["a"]), "1 labels for 2"),
        (
            lambda: buckets.overlap([1], [1, 2], [5], world_size=2, bandwidth_bytes_per_s=1),
            "one entry per layer: 1 != 2",
        ),
        (
            lambda: buckets.overlap([-1], [1], [5], world_size=2, bandwidth_bytes_per_s=1),
            r"backward_seconds\[0\] must be >= 0",
        ),
        (
            lambda: buckets.overlap([1], [1], [5], world_size=2, bandwidth_bytes_per_s=0),
            "bandwidth_bytes_per_s must be >= 1",
        ),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@given(st.lists(st.integers(0, 3 * 2**20), max_size=20), st.booleans())
def test_one_first_iteration_bucket_unless_only_find_unused_parameters_is_set(
    sizes: list[int], find_unused: bool
) -> None:
    # PyTorch 2.13 _BucketCapacityConfig.compute_bucket_size_limits:
    # [sys.maxsize] if static_graph or not find_unused_parameters
    one = [list(range(len(sizes)))] if sizes else []
    assert (
        buckets.ddp_initial_buckets(sizes, static_graph=True, find_unused_parameters=find_unused)
        == one
    )
    assert buckets.ddp_initial_buckets(sizes) == one
    walked = buckets.ddp_initial_buckets(sizes, find_unused_parameters=True)
    assert [i for b in walked for i in b] == list(range(len(sizes)))  # registration order, no split
    for b in walked[:-1]:  # every closed bucket reached its limit: 1 MiB first, then 25 MiB
        limit = 2**20 if b is walked[0] else 25 * 2**20
        assert sum(sizes[i] for i in b) >= limit


def test_initial_bucket_flags_must_be_bools() -> None:
    with pytest.raises(TypeError, match="static_graph must be a bool"):
        buckets.ddp_initial_buckets([1], static_graph=1)  # type: ignore[arg-type]
