"""Balancing an MoE router: the auxiliary loss's gradient, and DeepSeek-V3's bias instead.

The Switch Transformer loss α·N·Σ f_i·P_i multiplies the fraction f_i of
tokens routed to expert i, a count with no gradient, by the mean router
probability P_i, which has one. So the loss trains the router through P
alone, with f as a fixed weight: the gradient on token t's logit for expert
j is

    ∂L/∂z_tj = (α·N/T) · p_tj · (f_j − Σ_i f_i·p_ti)

positive (gradient descent lowers the logit) when expert j is loaded above the
probability-weighted average load that token sees. DeepSeek-V3 replaces it as
the main balancer by a per-expert bias b_i added to the scores only to choose
the top-k; after each step b_i falls by γ for an overloaded expert and rises
by γ for an underloaded one (DeepSeek-V3 report, §2.1.2).

>>> from fractions import Fraction as F
>>> g = aux_loss_gradient([[F(3, 4), F(1, 4)]], [1, 0], alpha=1)
>>> g                                   # expert 0 has it all: its logit goes down
[[Fraction(3, 8), Fraction(-3, 8)]]
>>> bias_update((F(0), F(0), F(0)), [5, 1, 0], gamma=F(1, 1000))
(Fraction(-1, 1000), Fraction(1, 1000), Fraction(1, 1000))
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import nonnegative_int, nonnegative_number, positive_int

__all__ = ["aux_loss_gradient", "balance_steps", "bias_update", "route_with_bias"]


@typed
def aux_loss_gradient(
    probs: Sequence[Sequence[Fraction]],
    load: Sequence[int],
    *,
    alpha: int | Fraction,
) -> list[list[Fraction]]:
    """Gradient of α·N·Σ_i f_i·P_i with respect to each token's router logits.

    f_i = load_i / Σ load (held fixed: it comes from a top-k, which has no gradient);
    P_i = mean over the T tokens of p_ti = softmax(z_t)_i; then
    ∂L/∂z_tj = (α·N/T) · p_tj · (f_j − Σ_i f_i·p_ti).

    >>> from fractions import Fraction as F
    >>> u = [F(1, 4)] * 4
    >>> aux_loss_gradient([u, u], [2, 2, 2, 2], alpha=F(1, 100))[0]   # balanced: zero
    [Fraction(0, 1), Fraction(0, 1), Fraction(0, 1), Fraction(0, 1)]
    >>> row = aux_loss_gradient([u], [4, 0, 0, 0], alpha=1)[0]
    >>> row, sum(row)          # the hot expert's logit is pushed down, the rest up
    ([Fraction(3, 4), Fraction(-1, 4), Fraction(-1, 4), Fraction(-1, 4)], Fraction(0, 1))
    >>> aux_loss_gradient([u], [0, 0, 0, 0], alpha=1)
    Traceback (most recent call last):
    ...
    ValueError: load must route at least one token, got 0

    Raises ``ValueError`` if rows and *load* disagree on N, a row does not sum to 1,
    nothing was routed, or *alpha* is negative.
    """
    n = len(load)
    if not probs or any(len(row) != n for row in probs):
        raise ValueError(f"probs must hold one row of {n} probabilities per token")
    if any(sum(row) != 1 for row in probs):
        raise ValueError("each row of probs must sum to 1")
    total = sum(nonnegative_int("load", x) for x in load)
    if total == 0:
        raise ValueError("load must route at least one token, got 0")
    a = Fraction(nonnegative_number("alpha", alpha))
    f = [Fraction(x, total) for x in load]
    scale = a * n / len(probs)
    out = []
    for row in probs:
        seen = sum(fi * Fraction(p) for fi, p in zip(f, row, strict=True))
        out.append([scale * Fraction(p) * (f[j] - seen) for j, p in enumerate(row)])
    return out


@typed
def route_with_bias(
    scores: Sequence[Sequence[Fraction]], bias: Sequence[Fraction], *, top_k: int
) -> list[tuple[int, ...]]:
    """Each token's top-k experts by score + bias (ties to the lower index).

    The bias only chooses; the gate that weights an expert's output stays the
    unbiased score (DeepSeek-V3, eq. 16).

    >>> from fractions import Fraction as F
    >>> route_with_bias([[F(5), F(4), F(1)]], [F(0), F(-4), F(0)], top_k=2)
    [(0, 2)]
    >>> route_with_bias([[F(1)]], [F(0)], top_k=2)
    Traceback (most recent call last):
    ...
    ValueError: top_k must be <= the 1 experts, got 2

    Raises ``ValueError`` for rows of another width than *bias* or a *top_k*
    outside [1, experts].
    """
    k = positive_int("top_k", top_k)
    if k > len(bias):
        raise ValueError(f"top_k must be <= the {len(bias)} experts, got {k}")
    routes = []
    for t, row in enumerate(scores):
        if len(row) != len(bias):
            raise ValueError(
                f"scores[{t}] must have {len(bias)} entries, got {len(row)}"
            )
        order = sorted(range(len(row)), key=lambda i: (-(row[i] + bias[i]), i))
        routes.append(tuple(sorted(order[:k])))
    return routes


@typed
def bias_update(
    bias: Sequence[Fraction], load: Sequence[int], *, gamma: Fraction
) -> tuple[Fraction, ...]:
    """One step of auxiliary-loss-free balancing: b_i -= γ·sign(load_i − mean load).

    >>> from fractions import Fraction as F
    >>> bias_update((F(0), F(0)), [3, 3], gamma=F(1, 1000))   # balanced: unchanged
    (Fraction(0, 1), Fraction(0, 1))
    >>> bias_update((F(0),), [1, 2], gamma=F(1))
    Traceback (most recent call last):
    ...
    ValueError: bias and load must have one entry per expert, got 1 and 2

    Raises ``ValueError`` for lengths that disagree or a negative *gamma* or load.
    """
    if len(bias) != len(load):
        raise ValueError(
            f"bias and load must have one entry per expert, got {len(bias)} and {len(load)}"
        )
    g = Fraction(nonnegative_number("gamma", gamma))
    counts = [nonnegative_int("load", x) for x in load]
    mean = Fraction(sum(counts), len(counts))
    return tuple(
        b - g if c > mean else b + g if c < mean else b
        for b, c in zip(bias, counts, strict=True)
    )


@typed
def balance_steps(
    scores: Sequence[Sequence[Fraction]], *, top_k: int, gamma: Fraction, steps: int
) -> list[int]:
    """The busiest expert's load after each of *steps* routings of the same tokens.

    >>> from fractions import Fraction as F
    >>> hot = [[F(3), F(2), F(1), F(0)]] * 8    # every token prefers expert 0
    >>> balance_steps(hot, top_k=1, gamma=F(1), steps=4)
    [8, 8, 8, 8]
    >>> balance_steps(hot, top_k=1, gamma=F(1), steps=0)
    Traceback (most recent call last):
    ...
    ValueError: steps must be >= 1, got 0

    Identical tokens all move together, so the first example never balances; see
    the section's example for tokens that differ. Raises what
    :func:`route_with_bias` and :func:`bias_update` raise.
    """
    n = positive_int("steps", steps)
    bias: tuple[Fraction, ...] = (
        tuple(Fraction(0) for _ in scores[0]) if scores else ()
    )
    peaks = []
    for _ in range(n):
        routes = route_with_bias(scores, bias, top_k=top_k)
        load = [sum(e in r for r in routes) for e in range(len(bias))]
        peaks.append(max(load))
        bias = bias_update(bias, load, gamma=gamma)
    return peaks
