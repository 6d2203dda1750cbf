"""Expert parallelism's router: top-k routing, expert capacity, dropped tokens, balancing loss.

A mixture-of-experts (MoE) layer sends each token's hidden vector to the
``top_k`` experts its router scores highest. This module answers: which
experts does each token pick, how many tokens an expert may keep (capacity)
and how many it drops, and how unbalanced the routing is (Switch
Transformer's auxiliary loss). Where the experts live and what the
all-to-all moves between EP ranks is :mod:`infralens.expert_dispatch`.

>>> routes = top_k_experts([[5, 1, 0, 2], [0, 3, 3, 1], [4, 0, 9, 9]], top_k=2)
>>> routes
[(0, 3), (1, 2), (2, 3)]
>>> route(routes, experts=4, capacity=1)
Routing(load=(1, 1, 2, 2), kept=(1, 1, 1, 1), dropped=(0, 0, 1, 1), lost=((2, 2), (2, 3)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from infralens._typecheck import check_fields, typed
from infralens._validate import (
    describe,
    nonnegative_int,
    nonnegative_number,
    positive_int,
    positive_number,
    rank_in,
)
from infralens.collectives import Value

__all__ = [
    "MAX_EXPERTS",
    "Routing",
    "expert_capacity",
    "load_balancing_loss",
    "route",
    "top_k_experts",
]


@typed
def top_k_experts(
    scores: Sequence[Sequence[Value | float]], top_k: int
) -> list[tuple[int, ...]]:
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
            raise ValueError(
                f"scores rows must all hold one score per expert: row {t} differs"
            )
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

    >>> expert_capacity(6, 3), expert_capacity(6, 3, capacity_factor=1.5)  # Switch Fig. 3
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

    def __post_init__(self) -> None:
        check_fields(self)


MAX_EXPERTS = 2**16
"""Most experts a layer may have (65,536; DeepSeek-V3 routes among 256): counts are kept
per expert, so the work grows with it."""


def _checked(routes: Sequence[Sequence[int]], experts: int) -> int:
    e = positive_int("experts", experts)
    if e > MAX_EXPERTS:
        raise ValueError(f"experts must be <= {MAX_EXPERTS}, got {describe(e)}")
    for t, chosen in enumerate(routes):
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"routes[{t}] picks an expert twice: {tuple(chosen)}")
        for x in chosen:
            rank_in(f"routes[{t}] expert", x, e)
    return e


@typed
def route(
    routes: Sequence[Sequence[int]], experts: int, capacity: int | None = None
) -> Routing:
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
    # [start:route-fill]
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
    # [end:route-fill]


@typed
def load_balancing_loss(
    probs: Sequence[Sequence[Value | float]],
    load: Sequence[int],
    alpha: Value | float = 1,
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
    return Fraction(
        a * n * sum(Fraction(load[i], total) * mean_p[i] for i in range(n))
    )
