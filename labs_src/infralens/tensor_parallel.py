"""Tensor parallelism: which weight slice each rank holds of a column- or row-parallel layer.

Megatron-LM splits each transformer block across ``tp`` ranks so that only
one collective joins the pieces per block and pass (Shoeybi et al. 2019,
§3): the first linear layer is *column-parallel* (each rank owns some output
features), the second is *row-parallel* (each rank owns the matching input
features and produces a partial sum).

This module answers: what local weight shape does rank r hold (PyTorch's
``ColwiseParallel``/``RowwiseParallel``, ``torch.chunk`` rules for uneven
sizes). Which collectives join the pieces, and how long they take, is
:mod:`infralens.tensor_parallel_comm`.

>>> shards = mlp_shards(hidden=8, ffn_hidden=32, tp=4, rank=0)
>>> [(s.name, s.style, s.weight) for s in shards]
[('fc1', 'colwise', (8, 8)), ('fc2', 'rowwise', (8, 8))]
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields
from infralens._validate import check_choice, divisible, flag, positive_int, rank_in
from infralens.sharding import chunk_size, shard_shape

__all__ = [
    "STYLES",
    "LocalLinear",
    "attention_shards",
    "linear_shard",
    "mlp_shards",
]


STYLES = ("colwise", "rowwise")
"""PyTorch's ``ColwiseParallel`` and ``RowwiseParallel`` styles for an ``nn.Linear``."""


@dataclass(frozen=True)
class LocalLinear:
    """The shapes one rank holds of an ``nn.Linear`` (weight is ``(out, in)``)."""

    name: str
    style: str
    weight: tuple[int, int]
    bias: tuple[int] | None

    def __post_init__(self) -> None:
        check_fields(self)


def linear_shard(
    style: str,
    in_features: int,
    out_features: int,
    tp: int,
    rank: int,
    *,
    bias: bool = True,
    name: str = "linear",
) -> LocalLinear:
    """Local weight and bias shapes of *rank* for a column- or row-parallel linear layer.

    ``nn.Linear`` stores its weight as ``(out_features, in_features)``.
    ``colwise`` shards weight dim 0 and the bias (``Shard(0)``): rank r owns
    ``chunk_sizes(out_features, tp)[r]`` output features. ``rowwise`` shards
    weight dim 1 (``Shard(1)``) and replicates the bias, which is added once
    after the partial sums are reduced. *name* only labels the result.

    >>> linear_shard("colwise", 16, 64, 4, 1)
    LocalLinear(name='linear', style='colwise', weight=(16, 16), bias=(16,))
    >>> linear_shard("rowwise", 64, 16, 4, 1)
    LocalLinear(name='linear', style='rowwise', weight=(16, 16), bias=(16,))
    >>> linear_shard("colwise", 8, 6, 4, 3, bias=False)   # torch.chunk: 2, 2, 2, 0 rows
    LocalLinear(name='linear', style='colwise', weight=(0, 8), bias=None)

    Raises ``ValueError`` for an unknown *style*, a size or *tp* below 1, or
    a rank outside ``range(tp)``.
    """
    check_choice("style", style, STYLES)
    flag("bias", bias)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    # [start:colwise-or-rowwise]
    i = positive_int("in_features", in_features)
    o = positive_int("out_features", out_features)
    t = positive_int("tp", tp)
    r = rank_in("rank", rank, t)
    if style == "colwise":
        rows, cols = shard_shape((o, i), t, r)
        return LocalLinear(name, style, (rows, cols), (rows,) if bias else None)
    return LocalLinear(
        name, style, (o, chunk_size(i, t, r)), (o,) if bias else None
    )
    # [end:colwise-or-rowwise]


def mlp_shards(
    *, hidden: int, ffn_hidden: int, tp: int, rank: int, bias: bool = True
) -> tuple[LocalLinear, LocalLinear]:
    """What *rank* holds of Megatron's MLP: column-parallel fc1, local GeLU, row-parallel fc2.

    fc1 is ``Linear(hidden, ffn_hidden)`` split by output features, so each
    rank computes ``GeLU`` on its own ``ffn_hidden / tp`` columns with no
    communication; fc2 is ``Linear(ffn_hidden, hidden)`` split by the same
    features on its input side, leaving a partial sum that ``g`` reduces.

    >>> fc1, fc2 = mlp_shards(hidden=12288, ffn_hidden=4 * 12288, tp=8, rank=0)
    >>> fc1.weight, fc2.weight, fc2.bias
    ((6144, 12288), (12288, 6144), (12288,))
    >>> [f.weight for f in mlp_shards(hidden=4, ffn_hidden=10, tp=4, rank=3)]  # uneven
    [(1, 4), (4, 1)]

    Raises ``ValueError`` for a size below 1 (naming *hidden*, *ffn_hidden*
    or *tp*) or a rank outside ``range(tp)``.
    """
    h, f = positive_int("hidden", hidden), positive_int("ffn_hidden", ffn_hidden)
    return (
        linear_shard("colwise", h, f, tp, rank, bias=bias, name="fc1"),
        linear_shard("rowwise", f, h, tp, rank, bias=bias, name="fc2"),
    )


def attention_shards(
    *,
    hidden: int,
    heads: int,
    tp: int,
    rank: int,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    bias: bool = False,
) -> tuple[LocalLinear, LocalLinear, LocalLinear, LocalLinear]:
    """What *rank* holds of self-attention: Q, K, V split by heads, the output projection by rows.

    Each rank owns ``heads / tp`` query heads and ``kv_heads / tp`` key and
    value heads (grouped-query attention when ``kv_heads < heads``), so
    attention runs locally per head. ``q``, ``k`` and ``v`` are
    ``Linear(hidden, heads * head_dim)`` (``kv_heads`` for k and v) with
    ``colwise``; the output projection ``o`` is
    ``Linear(heads * head_dim, hidden)`` with ``rowwise``. *head_dim*
    defaults to ``hidden // heads``.

    >>> q, k, v, o = attention_shards(hidden=4096, heads=32, kv_heads=8, tp=8, rank=0)
    >>> q.weight, k.weight, v.weight, o.weight
    ((512, 4096), (128, 4096), (128, 4096), (4096, 512))
    >>> attention_shards(hidden=768, heads=12, tp=8, rank=0)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 12 % 8 = 4

    Raises ``ValueError`` if *heads* or *kv_heads* is not divisible by *tp*,
    if *heads* is not divisible by *kv_heads*, or if *head_dim* is omitted
    and *hidden* is not divisible by *heads*.
    """
    h = positive_int("hidden", hidden)
    a = positive_int("heads", heads)
    t = positive_int("tp", tp)
    kv = a if kv_heads is None else positive_int("kv_heads", kv_heads)
    divisible("heads", a, "kv_heads", kv)
    if head_dim is None:
        d = divisible("hidden", h, "heads", a) // a
    else:
        d = positive_int("head_dim", head_dim)
    divisible("heads", a, "tp", t)
    divisible("kv_heads", kv, "tp", t)
    return (
        linear_shard("colwise", h, a * d, t, rank, bias=bias, name="q"),
        linear_shard("colwise", h, kv * d, t, rank, bias=bias, name="k"),
        linear_shard("colwise", h, kv * d, t, rank, bias=bias, name="v"),
        linear_shard("rowwise", a * d, h, t, rank, bias=bias, name="o"),
    )
