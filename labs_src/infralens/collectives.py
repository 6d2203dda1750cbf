"""What each collective leaves on each rank, and what it costs a ring.

Every function takes ``per_rank``: one list of numbers per rank, in rank
order, standing for the buffer each rank passes in. It returns what each rank
holds afterwards, again in rank order. Values stay exact (``int`` or
``fractions.Fraction``), so results compare with ``==``.

>>> x = [[1, 2, 3, 4], [10, 20, 30, 40]]
>>> all_reduce(x)
[[11, 22, 33, 44], [11, 22, 33, 44]]
>>> reduce_scatter(x)
[[11, 22], [33, 44]]
>>> all_gather(reduce_scatter(x)) == all_reduce(x)
True

The cost side follows NCCL-tests' ``doc/PERFORMANCE.md``: bus bandwidth is
algorithm bandwidth times a factor per collective, chosen so that a ring
implementation moves ``factor * S`` bytes through each rank's link for a
buffer of ``S`` bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from infralens._validate import (
    check_choice,
    nonnegative_int,
    positive_int,
    rank_in,
    same_lengths,
)

__all__ = [
    "OPS",
    "Value",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "bus_bandwidth_factor",
    "reduce",
    "reduce_scatter",
    "ring_bytes_sent",
]

Value = int | Fraction
"""A number held by a rank: exact, so doctests and comparisons are deterministic."""

OPS = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "all_to_all",
    "broadcast",
    "reduce",
)
"""The collectives this module models, by the names NCCL-tests uses (with underscores)."""


def _sum(per_rank: Sequence[Sequence[Value]]) -> list[Value]:
    same_lengths("per_rank", per_rank)
    return [sum(column, start=0) for column in zip(*per_rank, strict=True)]


def _split(name: str, per_rank: Sequence[Sequence[Value]]) -> int:
    """Check each buffer splits into world_size equal chunks; return the chunk length."""
    length = same_lengths(name, per_rank)
    world = len(per_rank)
    if length % world:
        raise ValueError(
            f"{name}: each rank's list must split into world_size equal chunks: "
            f"length {length} % world_size {world} = {length % world}"
        )
    return length // world


def all_reduce(per_rank: Sequence[Sequence[Value]]) -> list[list[Value]]:
    """Every rank ends with the element-wise sum over ranks.

    ``out[r][i] = sum(per_rank[q][i] for q in ranks)`` for every rank r.

    >>> all_reduce([[1, 2], [3, 4], [5, 6], [7, 8]])
    [[16, 20], [16, 20], [16, 20], [16, 20]]
    >>> all_reduce([[5]])          # one rank: nothing to add
    [[5]]

    Raises ``ValueError`` if there are no ranks or the lists differ in length.
    """
    total = _sum(per_rank)
    return [list(total) for _ in per_rank]


def reduce_scatter(per_rank: Sequence[Sequence[Value]]) -> list[list[Value]]:
    """Rank r ends with chunk r of the element-wise sum.

    With ``c = len(per_rank[0]) // world_size``, rank r holds
    ``sum[r*c : (r+1)*c]`` (``reduce_scatter_tensor`` semantics).

    >>> reduce_scatter([[1, 2, 3, 4], [10, 20, 30, 40], [0, 0, 0, 0], [1, 1, 1, 1]])
    [[12], [23], [34], [45]]
    >>> reduce_scatter([[], []])   # empty buffers give empty chunks
    [[], []]

    Raises ``ValueError`` if the lists differ in length or their length is not
    a multiple of the number of ranks.
    """
    c = _split("per_rank", per_rank)
    total = _sum(per_rank)
    return [total[r * c : (r + 1) * c] for r in range(len(per_rank))]


def all_gather(per_rank: Sequence[Sequence[Value]]) -> list[list[Value]]:
    """Every rank ends with all inputs concatenated in rank order.

    ``out[r] = per_rank[0] + per_rank[1] + ... + per_rank[world_size - 1]``
    (``all_gather_into_tensor`` semantics: equal-sized inputs).

    >>> all_gather([[1], [2], [3], [4]])
    [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    >>> all_gather([[1, 2]])
    [[1, 2]]

    Raises ``ValueError`` if there are no ranks or the lists differ in length.
    """
    same_lengths("per_rank", per_rank)
    gathered = [v for row in per_rank for v in row]
    return [list(gathered) for _ in per_rank]


def all_to_all(per_rank: Sequence[Sequence[Value]]) -> list[list[Value]]:
    """Rank j ends with chunk j of every rank, in source-rank order.

    Each rank's list is split into ``world_size`` equal chunks; chunk j of
    rank i goes to rank j, and rank j concatenates what it receives by i
    (``all_to_all_single`` with equal splits). It is a transpose of the
    (source rank, chunk) grid.

    >>> all_to_all([[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]])
    [[0, 10, 20, 30], [1, 11, 21, 31], [2, 12, 22, 32], [3, 13, 23, 33]]
    >>> all_to_all([[1, 2, 3, 4], [5, 6, 7, 8]])   # chunks of two
    [[1, 2, 5, 6], [3, 4, 7, 8]]

    Raises ``ValueError`` if the lists differ in length or cannot be split
    into ``world_size`` equal chunks.
    """
    c = _split("per_rank", per_rank)
    world = len(per_rank)
    return [
        [v for src in per_rank for v in src[j * c : (j + 1) * c]]
        for j in range(world)
    ]


def broadcast(
    per_rank: Sequence[Sequence[Value]], root: int = 0
) -> list[list[Value]]:
    """Every rank ends with a copy of rank *root*'s list.

    >>> broadcast([[1, 2], [0, 0], [0, 0]], root=0)
    [[1, 2], [1, 2], [1, 2]]
    >>> broadcast([[1], [2], [3]], root=2)
    [[3], [3], [3]]

    Raises ``ValueError`` if the lists differ in length or *root* is not a
    rank.
    """
    same_lengths("per_rank", per_rank)
    r = rank_in("root", root, len(per_rank))
    return [list(per_rank[r]) for _ in per_rank]


def reduce(
    per_rank: Sequence[Sequence[Value]], root: int = 0
) -> list[list[Value] | None]:
    """Rank *root* ends with the element-wise sum; other ranks' buffers are unspecified.

    PyTorch documents only the destination rank's result for
    ``torch.distributed.reduce``, so the other entries are ``None``: a reader
    must not rely on what they hold.

    >>> reduce([[1, 2], [3, 4], [5, 6]], root=1)
    [None, [9, 12], None]
    >>> reduce([[7]], root=0)
    [[7]]

    Raises ``ValueError`` if the lists differ in length or *root* is not a
    rank.
    """
    total = _sum(per_rank)
    r = rank_in("root", root, len(per_rank))
    return [list(total) if q == r else None for q in range(len(per_rank))]


def bus_bandwidth_factor(op: str, world_size: int) -> Fraction:
    """NCCL-tests' factor that turns algorithm bandwidth into bus bandwidth.

    ``busbw = algbw * factor`` with, for n ranks: all_reduce ``2(n-1)/n``;
    reduce_scatter, all_gather and all_to_all ``(n-1)/n``; broadcast and
    reduce ``1``. For reduce_scatter and all_gather the size behind algbw is
    the *total* buffer (n times one rank's chunk).

    >>> bus_bandwidth_factor("all_reduce", 8)
    Fraction(7, 4)
    >>> bus_bandwidth_factor("all_gather", 8)
    Fraction(7, 8)
    >>> bus_bandwidth_factor("all_reduce", 1)   # one rank moves nothing
    Fraction(0, 1)

    Raises ``ValueError`` for an unknown *op* or *world_size* < 1.
    """
    # [start:bus-factor-by-op]
    check_choice("op", op, OPS)
    n = positive_int("world_size", world_size)
    if op in ("broadcast", "reduce"):
        return Fraction(1)
    # a ring pass sends n - 1 chunks of S/n; all-reduce = RS pass + AG pass
    per_pass = Fraction(n - 1, n)
    return 2 * per_pass if op == "all_reduce" else per_pass
    # [end:bus-factor-by-op]


def ring_bytes_sent(op: str, nbytes: int, world_size: int) -> Fraction:
    """Bytes the busiest rank sends when a ring runs *op* on *nbytes*.

    ``bus_bandwidth_factor(op, n) * nbytes``. A ring all-reduce is a
    reduce-scatter pass plus an all-gather pass, each sending ``n - 1`` chunks
    of ``nbytes / n``; a ring broadcast or reduce forwards the whole buffer
    once through every rank but the last. *nbytes* is the full buffer (for
    all_gather the output, for reduce_scatter the input).

    >>> ring_bytes_sent("all_reduce", 1_000_000, 4)
    Fraction(1500000, 1)
    >>> rs = ring_bytes_sent("reduce_scatter", 1_000_000, 4)
    >>> 2 * rs == ring_bytes_sent("all_reduce", 1_000_000, 4)   # RS + AG passes
    True
    >>> ring_bytes_sent("broadcast", 0, 4)
    Fraction(0, 1)

    Raises ``ValueError`` for an unknown *op*, negative *nbytes* or
    *world_size* < 1.
    """
    return bus_bandwidth_factor(op, world_size) * nonnegative_int("nbytes", nbytes)
