"""Expert parallelism: top-k routing, expert capacity, all-to-all dispatch and stragglers.

A mixture-of-experts (MoE) layer sends each token's hidden vector to the
``top_k`` experts its router scores highest. With expert parallelism (EP) the
experts live on different ranks, so one all-to-all carries every token to the
ranks holding its experts (*dispatch*) and a second brings the results back
(*combine*). This module answers: which experts does each token pick, how
many tokens an expert may keep (capacity) and how many it drops, which rank
sends how many tokens to which, how many bytes that is, and how one hot
expert sets the layer's time.

>>> routes = top_k_experts([[5, 1, 0, 2], [0, 3, 3, 1], [4, 0, 9, 9]], top_k=2)
>>> routes
[(0, 3), (1, 2), (2, 3)]
>>> route(routes, experts=4, capacity=1)
Routing(load=(1, 1, 2, 2), kept=(1, 1, 1, 1), dropped=(0, 0, 1, 1), lost=((2, 2), (2, 3)))
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
from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from infralens._typecheck import typed
from infralens._validate import (
    divisible,
    nonnegative_int,
    nonnegative_number,
    positive_int,
    positive_number,
    rank_in,
    same_lengths,
)
from infralens.collectives import Value

__all__ = [
    "Routing",
    "all_to_all_bytes",
    "expert_capacity",
    "expert_rank",
    "layer_seconds",
    "load_balancing_loss",
    "rank_tokens",
    "received",
    "route",
    "send_buffer",
    "send_counts",
    "top_k_experts",
    "transpose",
]


@typed
def top_k_experts(scores: Sequence[Sequence[Value | float]], top_k: int) -> list[tuple[int, ...]]:
    """Each token's ``top_k`` experts, highest score first; ties go to the lower index.

    Token t takes the first ``top_k`` experts e sorted by
    ``(-scores[t][e], e)``, so equal scores never depend on a kernel's choice.

    >>> top_k_experts([[0.1, 0.7, 0.2], [1, 1, 0]], top_k=1)
    [(1,), (0,)]
    >>> top_k_experts([[3, 3, 3, 3]], top_k=4)     # a full tie: index order
    [(0, 1, 2, 3)]

    Raises ``ValueError`` if the rows differ in length, a score is NaN or
    ``top_k`` exceeds the number of experts, ``TypeError`` if a score is not
    a number.
    """
    k = positive_int("top_k", top_k)
    out = []
    for t, row in enumerate(scores):
        if len(row) != len(scores[0]):
            raise ValueError(f"scores rows must all hold one score per expert: row {t} differs")
        if k > len(row):
            raise ValueError(f"top_k must be <= experts: {k} > {len(row)}")
        for s in row:
            if isinstance(s, bool) or not isinstance(s, int | float | Fraction):
                raise TypeError(f"scores must be numbers, got {type(s).__name__}")
            if s != s:
                raise ValueError(f"scores must not be NaN: row {t}")
        out.append(tuple(sorted(range(len(row)), key=lambda e: (-row[e], e))[:k]))
    return out


def expert_capacity(
    tokens: int, experts: int, top_k: int = 1, capacity_factor: Value | float = 1
) -> int:
    """Token slots per expert: ``ceil(capacity_factor * tokens * top_k / experts)``.

    Switch Transformer's eq. 3 (tokens per batch / experts x capacity factor)
    counting ``top_k`` copies per token, since a top-k layer (GShard's top-2)
    must buffer every copy; at k = 1 it is Switch's rule exactly. The factor
    is converted exactly (``Fraction``), so 1.25 is 5/4.

    >>> expert_capacity(6, 3), expert_capacity(6, 3, capacity_factor=1.5)  # Switch's Fig. 3
    (2, 3)
    >>> expert_capacity(4096, 64, top_k=2, capacity_factor=1.25)
    160
    >>> expert_capacity(0, 8)
    0

    Raises ``ValueError`` if *experts* or *top_k* < 1, *tokens* < 0 or
    *capacity_factor* <= 0.
    """
    n = nonnegative_int("tokens", tokens)
    e = positive_int("experts", experts)
    k = positive_int("top_k", top_k)
    cf = positive_number("capacity_factor", capacity_factor)
    return ceil(cf * n * k / e)


@dataclass(frozen=True)
class Routing:
    """Per-expert token copies: routed (``load``), ``kept`` and ``dropped`` (``load - kept``).

    ``lost`` lists the dropped copies as ``(token, expert)`` pairs.
    """

    load: tuple[int, ...]
    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    lost: tuple[tuple[int, int], ...] = ()


def _checked(routes: Sequence[Sequence[int]], experts: int) -> int:
    e = positive_int("experts", experts)
    for t, chosen in enumerate(routes):
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"routes[{t}] picks an expert twice: {tuple(chosen)}")
        for x in chosen:
            rank_in(f"routes[{t}] expert", x, e)
    return e


@typed
def route(routes: Sequence[Sequence[int]], experts: int, capacity: int | None = None) -> Routing:
    """Count each expert's tokens and keep at most *capacity*, in order of arrival.

    Arrival order is token order, and a token's choices best first; once an
    expert holds *capacity* tokens, later ones are dropped (they skip the
    layer through the residual). ``capacity=None`` is dropless: nothing is
    dropped. Priority routing (V-MoE's, or GShard filling every first choice
    before any second) would drop other tokens; the counts below assume
    arrival order.

    >>> route([(0,), (0,), (0,), (1,)], experts=2, capacity=2)   # token 2 arrives third
    Routing(load=(3, 1), kept=(2, 1), dropped=(1, 0), lost=((2, 0),))
    >>> route([(0,), (0,)], experts=2)                     # dropless
    Routing(load=(2, 0), kept=(2, 0), dropped=(0, 0), lost=())

    Raises ``ValueError`` if a token names an expert outside
    ``range(experts)`` or twice, or *capacity* < 0.
    """
    e = _checked(routes, experts)
    cap = None if capacity is None else nonnegative_int("capacity", capacity)
    load, kept, lost = [0] * e, [0] * e, []
    for t, chosen in enumerate(routes):
        for x in chosen:
            load[x] += 1
            if cap is None or kept[x] < cap:
                kept[x] += 1
            else:
                lost.append((t, x))
    dropped = tuple(n - k for n, k in zip(load, kept, strict=True))
    return Routing(tuple(load), tuple(kept), dropped, tuple(lost))


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

    Raises ``ValueError`` as :func:`route` and :func:`expert_rank` do.
    """
    _checked(routes, experts)
    _experts_per_rank(experts, ep)
    blocks: list[list[tuple[int, int]]] = [[] for _ in range(ep)]
    copies = sorted((x, t) for t, chosen in enumerate(routes) for x in chosen)
    for x, t in copies:
        blocks[expert_rank(x, experts, ep)].append((t, x))
    return blocks


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
    h = positive_int("hidden", hidden) * positive_int("bytes_per_element", bytes_per_element)
    if same_lengths("counts", counts) != len(counts):
        raise ValueError(f"counts must be square (ep x ep), got {len(counts)} rows")
    return [
        h * sum(nonnegative_int("counts", c) for j, c in enumerate(row) if j != i)
        for i, row in enumerate(counts)
    ]


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
        sum(nonnegative_int("per_expert", n) for n in per_expert[r * per : (r + 1) * per])
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
    >>> layer_seconds(hot, 4, 1, 1, capacity=5) / layer_seconds(balanced, 4, 1, 1, capacity=5)
    Fraction(1, 1)

    Raises ``ValueError`` for a non-positive rate, a negative load or
    capacity, or experts not divisible by *ep*.
    """
    f = positive_int("flops_per_token", flops_per_token)
    rate = positive_number("flops_per_second", flops_per_second)
    tokens = rank_tokens([nonnegative_int("load", n) for n in load], ep)
    if capacity is not None:
        tokens = rank_tokens([nonnegative_int("capacity", capacity)] * len(load), ep)
    return max(tokens) * f / rate


@typed
def load_balancing_loss(
    probs: Sequence[Sequence[Value | float]], load: Sequence[int], alpha: Value | float = 1
) -> Fraction:
    """Switch Transformer's auxiliary loss: ``alpha * N * sum_i f_i * P_i``.

    ``f_i = load[i] / sum(load)`` is the fraction of routed copies sent to
    expert i, ``P_i`` the mean router probability for expert i over the
    tokens (*probs*, one row per token), N the number of experts. Uniform
    routing gives ``alpha``; everything on one expert gives ``alpha * N``.

    >>> n = 4
    >>> load_balancing_loss([[Fraction(1, n)] * n] * 8, [2] * n, alpha=Fraction(1, 100))
    Fraction(1, 100)
    >>> load_balancing_loss([[1, 0, 0, 0]] * 8, [8, 0, 0, 0])
    Fraction(4, 1)

    Raises ``ValueError`` if rows and *load* disagree on N, or nothing was
    routed.
    """
    n = len(load)
    if not probs or any(len(row) != n for row in probs):
        raise ValueError(f"probs must hold one row of {n} probabilities per token")
    total = sum(nonnegative_int("load", x) for x in load)
    if total == 0:
        raise ValueError("load must route at least one token, got 0")
    a = Fraction(nonnegative_number("alpha", alpha))
    mean_p = [sum(Fraction(row[i]) for row in probs) / len(probs) for i in range(n)]
    return Fraction(a * n * sum(Fraction(load[i], total) * mean_p[i] for i in range(n)))
