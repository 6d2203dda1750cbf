"""Vocabulary-parallel embedding and cross-entropy: invariants and error paths."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.vocab_parallel import (
    cross_entropy_traffic,
    padded_vocab,
    parallel_cross_entropy,
    parallel_embedding,
    vocab_range,
)


def _reference_loss(row: list[float], target: int) -> float:
    return math.log(sum(math.exp(z) for z in row)) - row[target]


@given(st.integers(1, 300_000), st.sampled_from([1, 2, 4, 8, 16]))
def test_padding_is_the_smallest_multiple_of_128_tp(vocab: int, tp: int) -> None:
    padded = padded_vocab(vocab, tp=tp)
    assert padded % (128 * tp) == 0 and vocab <= padded < vocab + 128 * tp


@given(st.integers(1, 64), st.integers(1, 8))
def test_ranges_tile_the_vocabulary_once(rows_per_rank: int, tp: int) -> None:
    padded = rows_per_rank * tp
    ranges = [vocab_range(padded, tp=tp, rank=r) for r in range(tp)]
    assert ranges[0][0] == 0 and ranges[-1][1] == padded
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


logit = st.floats(-30, 30, allow_nan=False)


@given(
    st.sampled_from([1, 2, 3, 6]),
    st.lists(st.lists(logit, min_size=6, max_size=6), min_size=1, max_size=4),
    st.data(),
)
def test_the_three_all_reduces_give_the_unsharded_loss(
    tp: int, logits: list[list[float]], data: st.DataObject
) -> None:
    targets = [data.draw(st.integers(0, 5)) for _ in logits]
    got = parallel_cross_entropy(logits, targets, tp=tp)
    for row, target, loss in zip(logits, targets, got, strict=True):
        assert loss == pytest.approx(_reference_loss(row, target), rel=1e-9, abs=1e-9)


def test_padding_rows_never_change_the_loss() -> None:
    logits = [[0.3, -1.2, 2.5, 0.0, 1.1]]
    padded = [logits[0] + [-1e4] * 3]  # masked dummy rows: exp underflows to 0
    assert parallel_cross_entropy(padded, [2], tp=2) == pytest.approx(
        parallel_cross_entropy(logits, [2], tp=1)
    )


@given(st.integers(1, 4), st.lists(st.integers(0, 7), min_size=1, max_size=10))
def test_the_embedding_sum_is_a_plain_lookup(tp_pow: int, tokens: list[int]) -> None:
    tp = [1, 2, 4, 8][tp_pow - 1]
    table = [[float(i), float(i * i)] for i in range(8)]
    assert parallel_embedding(tokens, table, tp=tp) == [table[t] for t in tokens]


def test_the_all_reduces_are_a_vanishing_share_of_a_gather() -> None:
    t = cross_entropy_traffic(tokens=8192, vocab=129024, tp=8)
    # per token, 3 fp32 all-reduces move 3 · 2 · 4 (t-1)/t bytes, the gather 2V (t-1)/t
    assert t.gather_logits * 3 * 2 * 4 == t.three_all_reduces * 2 * 129024


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: padded_vocab(10, tp=0), "tp must be >= 1"),
        (lambda: vocab_range(100, tp=8, rank=0), "padded must be divisible by tp"),
        (lambda: vocab_range(128, tp=8, rank=8), "rank must be in range"),
        (lambda: parallel_cross_entropy([[1.0, 2.0]], [2], tp=1), "targets[0] must lie"),
        (lambda: parallel_cross_entropy([[1.0]], [0, 0], tp=1), "one row per token"),
        (lambda: parallel_embedding([-1], [[1.0]], tp=1), "tokens[0] must lie"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        call()  # type: ignore[operator]
