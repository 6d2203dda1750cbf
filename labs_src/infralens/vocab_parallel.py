"""Vocabulary parallelism: the embedding and the cross-entropy over a vocabulary split by TP.

The two ends of a Megatron-LM model are sharded along the vocabulary, not the
hidden size (Shoeybi et al. 2019, §3). The vocabulary is first padded to a
multiple of ``make_vocab_size_divisible_by`` × tp (128 × tp by default), so
every rank holds an equal, contiguous range of rows; the padding rows are
never looked up and their logits never win.

- **Embedding** (``VocabParallelEmbedding``): rank r looks up only the tokens in
  its range and writes zeros for the rest; one all-reduce (a reduce-scatter
  under sequence parallelism) sums the ranks' rows into every token's vector.
- **Cross-entropy** (``vocab_parallel_cross_entropy``): the logits stay split
  by vocabulary. Three all-reduces of one number per token replace a gather of
  V logits per token: MAX of the local maxima, SUM of the target logit (only
  its owner contributes), SUM of the local sums of exponentials. Then
  loss = log(Σ exp(z − max)) − (z_target − max) on every rank.

This module runs the same arithmetic in pure Python, rank by rank, so the
numbers can be checked against ``torch.nn.functional.cross_entropy``.

>>> padded_vocab(128256, tp=8)            # Llama 3's vocabulary on 8 ranks
129024
>>> vocab_range(129024, tp=8, rank=7)
(112896, 129024)
>>> [round(x, 4) for x in parallel_cross_entropy([[1.0, 2.0, 0.5, -1.0]], [1], tp=2)]
[0.4952]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import divisible, positive_int, rank_in

__all__ = [
    "CrossEntropyTraffic",
    "cross_entropy_traffic",
    "padded_vocab",
    "parallel_cross_entropy",
    "parallel_embedding",
    "vocab_range",
]

DIVISIBLE_BY = 128
"""Megatron-LM's ``--make-vocab-size-divisible-by`` default (arguments.py at d98e8a6)."""


@typed
def padded_vocab(vocab: int, *, tp: int, divisible_by: int = DIVISIBLE_BY) -> int:
    """The vocabulary Megatron-LM allocates: *vocab* rounded up to divisible_by × tp.

    padded = ceil(V / (divisible_by · tp)) · divisible_by · tp

    >>> padded_vocab(50257, tp=1), padded_vocab(50257, tp=8)   # GPT-2's tokenizer
    (50304, 51200)
    >>> padded_vocab(128, tp=1)            # already a multiple: no padding
    128
    >>> padded_vocab(0, tp=2)
    Traceback (most recent call last):
    ...
    ValueError: vocab must be >= 1, got 0

    Raises ``ValueError`` for a size below 1.
    """
    v = positive_int("vocab", vocab)
    multiple = positive_int("divisible_by", divisible_by) * positive_int("tp", tp)
    return -(-v // multiple) * multiple


@typed
def vocab_range(padded: int, *, tp: int, rank: int) -> tuple[int, int]:
    """Rows [start, end) of the (padded) vocabulary that *rank* holds.

    start = rank · V_p / tp, end = start + V_p / tp

    >>> vocab_range(51200, tp=8, rank=0), vocab_range(51200, tp=8, rank=7)
    ((0, 6400), (44800, 51200))
    >>> vocab_range(50257, tp=8, rank=0)
    Traceback (most recent call last):
    ...
    ValueError: padded must be divisible by tp: 50257 % 8 = 1

    Raises ``ValueError`` for a vocabulary that does not split evenly (pad it with
    :func:`padded_vocab` first) or a rank outside ``range(tp)``.
    """
    t = positive_int("tp", tp)
    per_rank = divisible("padded", positive_int("padded", padded), "tp", t) // t
    r = rank_in("rank", rank, t)
    return r * per_rank, (r + 1) * per_rank


def _split(rows: int, tp: int) -> list[tuple[int, int]]:
    return [vocab_range(rows, tp=tp, rank=r) for r in range(tp)]


@typed
def parallel_embedding(
    tokens: Sequence[int], table: Sequence[Sequence[float]], *, tp: int
) -> list[list[float]]:
    """Look *tokens* up in *table* split over *tp* ranks, then sum the ranks' rows.

    out[i] = Σ_r (table[tokens[i]] if start_r <= tokens[i] < end_r else 0)

    >>> table = [[float(i), 10.0 * i] for i in range(4)]
    >>> parallel_embedding([3, 0, 2], table, tp=2)
    [[3.0, 30.0], [0.0, 0.0], [2.0, 20.0]]
    >>> parallel_embedding([4], table, tp=2)
    Traceback (most recent call last):
    ...
    ValueError: tokens[0] must lie in [0, 4), got 4

    Raises ``ValueError`` for a token outside the table or rows that do not split
    evenly over *tp*.
    """
    width = len(table[0]) if table else 0
    for i, t in enumerate(tokens):
        if not 0 <= t < len(table):
            raise ValueError(f"tokens[{i}] must lie in [0, {len(table)}), got {t}")
    out = [[0.0] * width for _ in tokens]
    for start, end in _split(len(table), tp):
        # [start:masked-lookup]
        for i, token in enumerate(tokens):  # one rank's lookup
            inside = start <= token < end  # input_mask is the complement
            row = table[token] if inside else [0.0] * width
            # all-reduce SUM: exactly one rank contributes a non-zero row
            out[i] = [a + b for a, b in zip(out[i], row, strict=True)]
        # [end:masked-lookup]
    return out


@typed
def parallel_cross_entropy(
    logits: Sequence[Sequence[float]], targets: Sequence[int], *, tp: int
) -> list[float]:
    """Per-token cross-entropy with the logits split by vocabulary over *tp* ranks.

    m = max_r max_j z_j;  S = Σ_r Σ_j exp(z_j − m);  loss = log S − (z_target − m)

    >>> logits = [[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 0.0, 0.0]]
    >>> [round(x, 6) for x in parallel_cross_entropy(logits, [1, 3], tp=2)]
    [0.495182, 1.386294]
    >>> parallel_cross_entropy(logits, [1, 3], tp=1) == parallel_cross_entropy(
    ...     logits, [1, 3], tp=4)
    True
    >>> parallel_cross_entropy(logits, [1, 3], tp=3)
    Traceback (most recent call last):
    ...
    ValueError: padded must be divisible by tp: 4 % 3 = 1

    Raises ``ValueError`` for a target outside the vocabulary, rows of unequal
    width, or a vocabulary that does not split evenly over *tp*.
    """
    if len(logits) != len(targets):
        raise ValueError(
            f"logits and targets must have one row per token, got "
            f"{len(logits)} and {len(targets)}"
        )
    vocab = len(logits[0]) if logits else 0
    losses = []
    for i, (row, target) in enumerate(zip(logits, targets, strict=True)):
        if len(row) != vocab:
            raise ValueError(
                f"logits[{i}] must have {vocab} entries, got {len(row)}"
            )
        if not 0 <= target < vocab:
            raise ValueError(f"targets[{i}] must lie in [0, {vocab}), got {target}")
        shards = [row[a:b] for a, b in _split(vocab, tp)]
        ranges = _split(vocab, tp)
        # [start:three-all-reduces]
        # 1. all-reduce MAX of each rank's local maximum
        top = max(max(z) for z in shards)
        # 2. all-reduce SUM of the target's logit: only its owner holds it
        picked = sum(
            z[target - a] - top if a <= target < b else 0.0
            for z, (a, b) in zip(shards, ranges, strict=True)
        )
        # 3. all-reduce SUM of each rank's Σ exp(z − max)
        total = sum(sum(math.exp(x - top) for x in z) for z in shards)
        losses.append(math.log(total) - picked)  # log S − (z_t − m)
        # [end:three-all-reduces]
    return losses


@dataclass(frozen=True)
class CrossEntropyTraffic:
    """Bytes each TP rank sends per step for the loss, two ways."""

    three_all_reduces: int  # 3 fp32 numbers per token, ring all-reduce
    gather_logits: int  # all-gather of every rank's bf16 logit shard

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def cross_entropy_traffic(
    *, tokens: int, vocab: int, tp: int
) -> CrossEntropyTraffic:
    """Bytes one rank sends: three fp32 all-reduces against gathering bf16 logits.

    all-reduces: 3 · 2(t − 1)/t · 4 · tokens; gather: (t − 1)/t · 2 · V · tokens

    >>> cross_entropy_traffic(tokens=8192, vocab=129024, tp=8)
    CrossEntropyTraffic(three_all_reduces=172032, gather_logits=1849688064)
    >>> cross_entropy_traffic(tokens=8192, vocab=129024, tp=1)   # nothing to send
    CrossEntropyTraffic(three_all_reduces=0, gather_logits=0)
    >>> cross_entropy_traffic(tokens=8192, vocab=129024, tp=0)
    Traceback (most recent call last):
    ...
    ValueError: tp must be >= 1, got 0

    Raises ``ValueError`` for a size below 1, a vocabulary that does not split
    evenly over *tp*, or *tokens* × *vocab* logits too many to count in 63 bits.
    """
    t = positive_int("tp", tp)
    n = positive_int("tokens", tokens)
    v = divisible("vocab", positive_int("vocab", vocab), "tp", t)
    if 2 * v * n >= 2**63:  # the bytes must fit the counts the package keeps
        raise ValueError(f"tokens x vocab must be below 2**62, got {n} x {v}")
    return CrossEntropyTraffic(
        three_all_reduces=3 * 2 * (t - 1) * 4 * n // t,
        gather_logits=(t - 1) * 2 * v * n // t,
    )
