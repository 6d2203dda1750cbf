"""Properties and error paths of infralens.collectives."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import collectives as c


@st.composite
def per_rank_buffers(draw: st.DrawFn, divisible: bool = False) -> list[list[int]]:
    world = draw(st.integers(1, 8))
    chunk = draw(st.integers(0, 5))
    length = chunk * world if divisible else draw(st.integers(0, 12))
    values = st.integers(-1000, 1000)
    return [draw(st.lists(values, min_size=length, max_size=length)) for _ in range(world)]


def total(per_rank: list[list[int]] | list[list[c.Value]]) -> int | Fraction:
    return sum((sum(row, start=0) for row in per_rank), start=0)


@given(per_rank_buffers())
def test_all_reduce_conserves_the_global_sum_on_every_rank(x: list[list[int]]) -> None:
    out = c.all_reduce(x)
    assert all(sum(row, start=0) == total(x) for row in out)
    assert all(row == out[0] for row in out)


@given(per_rank_buffers(divisible=True))
def test_reduce_scatter_conserves_the_global_sum_across_ranks(x: list[list[int]]) -> None:
    assert total(c.reduce_scatter(x)) == total(x)


@given(per_rank_buffers(divisible=True))
def test_all_reduce_is_reduce_scatter_then_all_gather(x: list[list[int]]) -> None:
    assert c.all_gather(c.reduce_scatter(x)) == c.all_reduce(x)


@given(per_rank_buffers(divisible=True))
def test_all_to_all_is_a_permutation_and_an_involution(x: list[list[int]]) -> None:
    once = c.all_to_all(x)
    assert sorted(v for row in once for v in row) == sorted(v for row in x for v in row)
    assert c.all_to_all(once) == x


@given(per_rank_buffers(), st.data())
def test_broadcast_and_reduce_follow_the_root(x: list[list[int]], data: st.DataObject) -> None:
    root = data.draw(st.integers(0, len(x) - 1))
    assert c.broadcast(x, root=root) == [x[root]] * len(x)
    out = c.reduce(x, root=root)
    assert out[root] == c.all_reduce(x)[0]
    assert [q for q, row in enumerate(out) if row is not None] == [root]


@given(per_rank_buffers())
def test_all_gather_keeps_rank_order(x: list[list[int]]) -> None:
    assert c.all_gather(x)[0] == [v for row in x for v in row]


@pytest.mark.parametrize("n", [1, 2, 3, 8, 64])
def test_bus_bandwidth_factors_match_nccl_tests(n: int) -> None:
    # NCCL-tests doc/PERFORMANCE.md, one factor per collective.
    assert c.bus_bandwidth_factor("all_reduce", n) == Fraction(2 * (n - 1), n)
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert c.bus_bandwidth_factor(op, n) == Fraction(n - 1, n)
    for op in ("broadcast", "reduce"):
        assert c.bus_bandwidth_factor(op, n) == 1


@given(st.sampled_from(c.OPS), st.integers(0, 10**12), st.integers(1, 1024))
def test_ring_bytes_are_factor_times_size(op: str, nbytes: int, n: int) -> None:
    assert c.ring_bytes_sent(op, nbytes, n) == c.bus_bandwidth_factor(op, n) * nbytes


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: c.all_reduce([]), ValueError, "per_rank must hold at least one rank"),
        (lambda: c.all_reduce([[1], [1, 2]]), ValueError, r"lengths are \[1, 2\]"),
        (lambda: c.all_gather("ab"), TypeError, "per_rank must be a sequence"),
        (lambda: c.all_gather([1, 2]), TypeError, "per_rank must be a sequence"),
        (lambda: c.reduce_scatter([[1, 2, 3], [4, 5, 6]]), ValueError, "length 3 % world_size 2"),
        (lambda: c.all_to_all([[1], [2]]), ValueError, "split into world_size equal chunks"),
        (lambda: c.broadcast([[1], [2]], root=2), ValueError, r"root must be in range\(0, 2\)"),
        (lambda: c.reduce([[1], [2]], root=-1), ValueError, "root must be in range"),
        (lambda: c.bus_bandwidth_factor("allreduce", 4), ValueError, "op must be one of"),
        (lambda: c.bus_bandwidth_factor("all_reduce", 0), ValueError, "world_size must be >= 1"),
        (lambda: c.ring_bytes_sent("all_reduce", -1, 4), ValueError, "nbytes must be >= 0"),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
