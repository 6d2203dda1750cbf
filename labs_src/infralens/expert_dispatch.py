"""Expert-parallel dispatch: who sends how many tokens to whom, the bytes, and stragglers.

With expert parallelism (EP) the experts of a mixture-of-experts layer live
on different ranks, so one all-to-all carries every token to the ranks
holding its experts (*dispatch*) and a second brings the results back
(*combine*). Given each token's experts (:mod:`infralens.experts`), this
module answers: which rank holds which expert, which rank sends how many
tokens to which, how many bytes that is, and how one hot expert sets the
layer's time.

>>> from infralens.experts import top_k_experts
>>> routes = top_k_experts([[5, 1, 0, 2], [0, 3, 3, 1], [4, 0, 9, 9]], top_k=2)
>>> send_counts([routes, [(0, 1), (2, 3), (3, 0)]], experts=4, ep=2)
[[2, 4], [3, 3]]

EP ranks are carved out of data parallelism (Megatron-Core's
``tp-cp-ep-dp-pp``); :class:`infralens.plan.ParallelPlan` lays the groups out:

>>> from infralens.plan import ParallelPlan
>>> ParallelPlan(tp=2, dp=4, ep=2).groups("ep")
[[0, 2], [1, 3], [4, 6], [5, 7]]
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import (
    divisible,
    nonnegative_int,
    positive_int,
    positive_number,
    rank_in,
    same_lengths,
)
from infralens.collectives import Value
from infralens.experts import _checked

__all__ = [
    "all_to_all_bytes",
    "expert_rank",
    "layer_seconds",
    "rank_tokens",
    "received",
    "send_buffer",
    "send_counts",
    "transpose",
]


def _experts_per_rank(experts: int, ep: int) -> int:
    e, p = positive_int("experts", experts), positive_int("ep", ep)
    return divisible("experts", e, "ep", p) // p


def expert_rank(expert: int, experts: int, ep: int) -> int:
    """EP rank that holds *expert*: ``expert // (experts / ep)`` (contiguous blocks).

    >>> [expert_rank(x, experts=8, ep=4) for x in range(8)]
    [0, 0, 1, 1, 2, 2, 3, 3]

    Raises ``ValueError`` if *experts* is not divisible by *ep* or *expert*
    is not in ``range(experts)``.
    """
    per = _experts_per_rank(experts, ep)
    return rank_in("expert", expert, experts) // per


@typed
def send_buffer(
    routes: Sequence[Sequence[int]], experts: int, ep: int
) -> list[list[tuple[int, int]]]:
    """One source rank's dispatch buffer: ``(token, expert)`` copies grouped by destination.

    Block j holds the copies for experts on rank j, sorted by expert then
    token, so each receiver finds every expert's tokens contiguous (the
    permutation Megatron-style dispatchers apply before ``all_to_all_single``).

    >>> send_buffer([(3, 0), (1,), (2,)], experts=4, ep=2)
    [[(0, 0), (1, 1)], [(2, 2), (0, 3)]]

    Raises ``ValueError`` as :func:`~infralens.experts.route` and :func:`expert_rank` do.
    """
    # [start:send-blocks]
    _checked(routes, experts)
    _experts_per_rank(experts, ep)
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(ep)]
    copies = sorted((x, t) for t, chosen in enumerate(routes) for x in chosen)
    for x, t in copies:
        blocks[expert_rank(x, experts, ep)].append((t, x))
    return blocks
    # [end:send-blocks]


@typed
def send_counts(
    per_rank_routes: Sequence[Sequence[Sequence[int]]], experts: int, ep: int
) -> list[list[int]]:
    """The dispatch send-count matrix: ``counts[i][j]`` copies rank i sends to rank j.

    Row i is rank i's ``input_split_sizes`` and column j is rank j's
    ``output_split_sizes`` for ``torch.distributed.all_to_all_single``
    (PyTorch 2.13). The combine all-to-all uses :func:`transpose`.

    >>> send_counts([[(0,), (3,)], [(1,), (1,)]], experts=4, ep=2)
    [[1, 1], [2, 0]]

    Raises ``ValueError`` unless there is one routes list per EP rank.
    """
    if len(per_rank_routes) != positive_int("ep", ep):
        raise ValueError(
            f"per_rank_routes must hold one list per EP rank: {len(per_rank_routes)} != {ep}"
        )
    return [[len(b) for b in send_buffer(r, experts, ep)] for r in per_rank_routes]


@typed
def transpose(counts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Swap senders and receivers: the combine all-to-all's send counts.

    >>> transpose([[1, 1], [2, 0]])
    [[1, 2], [1, 0]]
    """
    same_lengths("counts", counts)
    return [list(col) for col in zip(*counts, strict=True)]


@typed
def received(
    per_rank_routes: Sequence[Sequence[Sequence[int]]], experts: int, ep: int
) -> list[list[tuple[int, int, int]]]:
    """What each EP rank holds after dispatch: ``(source, token, expert)`` in source order.

    PyTorch 2.13's ``all_to_all_single`` leaves on rank j block j of rank 0,
    then of rank 1, ... (concatenated in source-rank order).

    >>> received([[(0,), (3,)], [(1,), (1,)]], experts=4, ep=2)
    [[(0, 0, 0), (1, 0, 1), (1, 1, 1)], [(0, 1, 3)]]

    Raises ``ValueError`` as :func:`send_counts` does.
    """
    send_counts(per_rank_routes, experts, ep)
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(ep)]
    for src, routes in enumerate(per_rank_routes):
        for dst, block in enumerate(send_buffer(routes, experts, ep)):
            out[dst].extend((src, t, x) for t, x in block)
    return out


def all_to_all_bytes(
    counts: Sequence[Sequence[int]], hidden: int, bytes_per_element: int
) -> list[int]:
    """Bytes each rank sends to other ranks: ``sum(counts[i][j] for j != i) * hidden * bytes``.

    The diagonal (copies to a rank's own experts) crosses no link.

    >>> all_to_all_bytes([[2, 2], [3, 1]], hidden=4096, bytes_per_element=2)
    [16384, 24576]
    >>> all_to_all_bytes([[5]], hidden=4096, bytes_per_element=2)    # ep = 1
    [0]

    Raises ``ValueError`` if *hidden* or *bytes_per_element* < 1, *counts*
    is not square, or a count is negative.
    """
    # [start:bytes]
    h = positive_int("hidden", hidden) * positive_int(
        "bytes_per_element", bytes_per_element
    )
    if same_lengths("counts", counts) != len(counts):
        raise ValueError(f"counts must be square (ep x ep), got {len(counts)} rows")
    # bytes[i] = h * e * sum(counts[i][j] for j != i); the diagonal stays home
    return [
        h * sum(nonnegative_int("counts", c) for j, c in enumerate(row) if j != i)
        for i, row in enumerate(counts)
    ]
    # [end:bytes]


@typed
def rank_tokens(per_expert: Sequence[int], ep: int) -> list[int]:
    """Tokens each EP rank processes: the sum over its experts of *per_expert*.

    >>> rank_tokens([10, 2, 2, 2, 2, 2, 2, 2], ep=4)
    [12, 4, 4, 4]

    Raises ``ValueError`` if ``len(per_expert)`` is not divisible by *ep*.
    """
    if not per_expert:
        raise ValueError("per_expert must hold at least one expert")
    per = _experts_per_rank(len(per_expert), ep)
    return [
        sum(
            nonnegative_int("per_expert", n)
            for n in per_expert[r * per : (r + 1) * per]
        )
        for r in range(ep)
    ]


@typed
def layer_seconds(
    load: Sequence[int],
    ep: int,
    flops_per_token: int,
    flops_per_second: Value | float,
    capacity: int | None = None,
) -> Fraction:
    """Expert compute time of one MoE layer: the slowest EP rank sets it.

    ``max over ranks of tokens processed * flops_per_token / flops_per_second``.
    Dropless (``capacity=None``, as DeepSeek-V3 and MegaBlocks run): each
    expert processes its whole *load*. With a capacity every expert computes
    a fixed buffer of *capacity* slots (static shapes, as in Switch), full or
    padded, and the overflow is dropped.

    >>> balanced, hot = [4] * 8, [18, 2, 2, 2, 2, 2, 2, 2]
    >>> layer_seconds(hot, 4, 1, 1) / layer_seconds(balanced, 4, 1, 1)
    Fraction(5, 2)
    >>> capped = {"capacity": 5}
    >>> layer_seconds(hot, 4, 1, 1, **capped) / layer_seconds(balanced, 4, 1, 1, **capped)
    Fraction(1, 1)

    Raises ``ValueError`` for a non-positive rate, a negative load or
    capacity, or experts not divisible by *ep*.
    """
    # [start:layer-time]
    f = positive_int("flops_per_token", flops_per_token)
    rate = positive_number("flops_per_second", flops_per_second)
    if not load:
        raise ValueError("load must hold at least one expert")
    tokens = rank_tokens([nonnegative_int("load", n) for n in load], ep)
    # with a capacity every expert computes its whole buffer, full or padded
    if capacity is not None:
        tokens = rank_tokens(
            [nonnegative_int("capacity", capacity)] * len(load), ep
        )
    # seconds = max over ranks of tokens * flops_per_token / flops_per_second
    return max(tokens) * f / rate
    # [end:layer-time]
