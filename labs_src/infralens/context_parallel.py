"""Context parallelism: the sequence split across ranks, Ulysses' head re-shard, and memory.

Every layer of a transformer except attention treats tokens independently, so
the sequence can be cut into ``cp`` pieces, one per rank. Attention cannot: a
query needs every earlier key and value. This module answers, with exact
integers, which tokens each rank owns (``torch.chunk`` rules), how much
causal attention work that leaves on each rank, what a head re-shard
(DeepSpeed-Ulysses) sends per layer and where it lands, and what activation
memory is left. The other exchange, a ring of K/V blocks (Ring Attention),
and when its transfer hides behind compute, is :mod:`infralens.ring_attention`.

>>> token_ranges(16, 2)
(((0, 8),), ((8, 16),))
>>> token_ranges(16, 2, "load_balanced")      # chunks i and 2*cp - 1 - i
(((0, 4), (12, 16)), ((4, 8), (8, 12)))
>>> causal_work(16, 2), causal_work(16, 2, "load_balanced")
((36, 100), (68, 68))
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import (
    check_choice,
    divisible,
    in_int_range,
    positive_int,
    ranks_cap,
)
from infralens.collectives import all_to_all, ring_bytes_sent
from infralens.memory import activation_bytes_per_layer
from infralens.sharding import chunk_offsets, chunk_sizes

__all__ = [
    "LAYOUTS",
    "MAX_PAIRS",
    "SCORES",
    "UlyssesBytes",
    "activation_bytes_per_rank",
    "causal_work",
    "chunk_order",
    "token_ranges",
    "ulysses_bytes",
    "ulysses_placement",
]

LAYOUTS = ("contiguous", "load_balanced")
"""How the sequence is cut: ``cp`` contiguous pieces, or ``2*cp`` chunks paired head and tail."""

SCORES = ("materialised", "flash", "table2_at_s_over_cp")
"""How the attention-score term of activation memory is counted (see activation_bytes_per_rank)."""


def _tokens(seq_len: int, cp: int) -> int:
    """Tokens per rank, ``seq_len / cp``; the sequence must split evenly."""
    n = ranks_cap("cp", cp)
    return divisible("seq_len", positive_int("seq_len", seq_len), "cp", n) // n


def _head_bytes(micro_batch: int, head_dim: int, bytes_per_element: int) -> int:
    """Bytes of one token of one head for the whole micro-batch."""
    b = positive_int("micro_batch", micro_batch)
    return (
        b
        * positive_int("head_dim", head_dim)
        * positive_int("bytes_per_element", bytes_per_element)
    )


@typed
def chunk_order(cp: int) -> tuple[int, ...]:
    """Sequence chunks in rank-major order under the load-balanced layout.

    The sequence is cut into ``2*cp`` chunks and rank i owns chunks
    ``(i, 2*cp - 1 - i)``; concatenating ranks 0..cp-1 (what an all-gather of
    the shards returns) gives this order.

    >>> chunk_order(2)
    (0, 3, 1, 2)
    >>> chunk_order(1)                # one rank owns both halves, in order
    (0, 1)

    Raises ``ValueError`` if *cp* < 1.
    """
    n = ranks_cap("cp", cp)
    return tuple(c for i in range(n) for c in (i, 2 * n - 1 - i))


def token_ranges(
    seq_len: int, cp: int, layout: str = "contiguous"
) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Half-open token ranges ``(start, stop)`` each rank owns, in rank order.

    ``contiguous``: rank r owns chunk r of ``cp`` (``torch.chunk`` sizes from
    :func:`infralens.sharding.chunk_sizes`). ``load_balanced``: the sequence is
    cut into ``2*cp`` chunks the same way and rank r owns chunks r and
    ``2*cp - 1 - r`` (:func:`chunk_order`).

    >>> token_ranges(8, 4, "load_balanced")[3]
    ((3, 4), (4, 5))
    >>> token_ranges(6, 4)            # torch.chunk: 2, 2, 2, 0 tokens
    (((0, 2),), ((2, 4),), ((4, 6),), ((6, 6),))

    Raises ``ValueError`` if *seq_len* < 1, *cp* < 1 or *layout* is unknown.
    """
    # [start:token-spans]
    s = positive_int("seq_len", seq_len)
    n = ranks_cap("cp", cp)
    mode = check_choice("layout", layout, LAYOUTS)
    pieces = n if mode == "contiguous" else 2 * n
    spans = [
        (o, o + z)
        for o, z in zip(
            chunk_offsets(s, pieces), chunk_sizes(s, pieces), strict=True
        )
    ]
    # [end:token-spans]
    # [start:token-layouts]
    if mode == "contiguous":
        return tuple((span,) for span in spans)
    order = chunk_order(n)
    return tuple((spans[order[2 * r]], spans[order[2 * r + 1]]) for r in range(n))
    # [end:token-layouts]


def causal_work(
    seq_len: int, cp: int, layout: str = "contiguous"
) -> tuple[int, ...]:
    """Unmasked (query, key) pairs of causal attention each rank computes.

    A query at position q attends keys 0..q, so a range ``[a, b)`` of
    queries costs ``sum(q + 1 for q in range(a, b)) = (b(b+1) - a(a+1)) / 2``
    pairs. With ``seq_len = 2*cp`` each token stands for one block, and the
    result counts (query block, key block) pairs with key block <= query block.

    >>> causal_work(8, 4), causal_work(8, 4, "load_balanced")    # blocks
    ((3, 7, 11, 15), (9, 9, 9, 9))
    >>> sum(causal_work(1000, 8, "load_balanced")) == 1000 * 1001 // 2
    True
    >>> causal_work(3, 4)             # a rank with no tokens does no work
    (1, 2, 3, 0)

    Raises ``ValueError`` as :func:`token_ranges` does.
    """
    return tuple(
        sum((b * (b + 1) - a * (a + 1)) // 2 for a, b in ranges)
        for ranges in token_ranges(seq_len, cp, layout)
    )


@dataclass(frozen=True)
class UlyssesBytes:
    """Bytes one rank sends in each of Ulysses' four forward all-to-alls of one layer."""

    q: int
    k: int
    v: int
    out: int

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def total(self) -> int:
        """Sum of the four all-to-alls."""
        return self.q + self.k + self.v + self.out


def ulysses_bytes(
    seq_len: int,
    cp: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    micro_batch: int = 1,
    bytes_per_element: int = 2,
) -> UlyssesBytes:
    """Bytes each rank sends re-sharding Q, K, V to heads and the output back to sequence.

    Each all-to-all starts from a local buffer of
    ``micro_batch * (seq_len / cp) * n_heads * head_dim * bytes_per_element``
    and sends ``ring_bytes_sent("all_to_all", local, cp)`` = (cp - 1) / cp of it;
    Q and the output have *heads* heads, K and V *kv_heads*.

    >>> ulysses_bytes(4096, 4, heads=32, kv_heads=32, head_dim=128)
    UlyssesBytes(q=6291456, k=6291456, v=6291456, out=6291456)
    >>> ulysses_bytes(131072, 16, heads=128, kv_heads=8, head_dim=128)
    Traceback (most recent call last):
    ...
    ValueError: kv_heads must be divisible by cp: 8 % 16 = 8

    Raises ``ValueError`` for a size below 1 or when *seq_len*, *heads* or
    *kv_heads* is not divisible by *cp*, or *heads* by *kv_heads*.
    """
    # [start:ulysses-heads]
    # one head of the local buffer: b * (s / cp) * head_dim * e bytes
    per_head = _tokens(seq_len, cp) * _head_bytes(
        micro_batch, head_dim, bytes_per_element
    )
    divisible("heads", positive_int("heads", heads), "cp", cp)
    divisible("kv_heads", positive_int("kv_heads", kv_heads), "cp", cp)
    divisible("heads", heads, "kv_heads", kv_heads)
    # [end:ulysses-heads]
    if not in_int_range(per_head * heads):
        raise ValueError(
            "seq_len * micro_batch * heads * head_dim * bytes_per_element must be < 2**63 bytes"
        )

    # [start:ulysses-sent]
    def sent(n_heads: int) -> int:
        # the all-to-all keeps 1/cp of the buffer at home, sends (cp - 1) / cp
        return int(ring_bytes_sent("all_to_all", per_head * n_heads, cp))

    return UlyssesBytes(
        q=sent(heads), k=sent(kv_heads), v=sent(kv_heads), out=sent(heads)
    )
    # [end:ulysses-sent]


MAX_PAIRS = 2**14
"""Most ``(token, head)`` pairs :func:`ulysses_placement` lists (16,384): it moves each
one through an all-to-all, so the work grows with ``seq_len * heads``."""


@typed
def ulysses_placement(
    seq_len: int, cp: int, heads: int
) -> list[list[tuple[int, int]]]:
    """``(token, head)`` pairs each rank holds after the sequence-to-heads all-to-all.

    Rank r starts with tokens ``[r*c, (r+1)*c)`` of every head (c = seq_len /
    cp) and lays them out head group by head group, so chunk j of its buffer
    is what rank j needs. :func:`infralens.collectives.all_to_all` then gives
    rank j every token of heads ``[j*g, (j+1)*g)``, g = heads / cp, in
    sequence order.

    >>> ulysses_placement(4, 2, 2)
    [[(0, 0), (1, 0), (2, 0), (3, 0)], [(0, 1), (1, 1), (2, 1), (3, 1)]]
    >>> ulysses_placement(2, 1, 1)    # one rank: nothing moves
    [[(0, 0), (1, 0)]]

    Raises ``ValueError`` unless *seq_len* and *heads* are divisible by *cp*, or if
    ``seq_len * heads`` is above :data:`MAX_PAIRS` (every pair is listed).
    """
    c, n = _tokens(seq_len, cp), ranks_cap("cp", cp)
    g = divisible("heads", positive_int("heads", heads), "cp", n) // n
    if seq_len * heads > MAX_PAIRS:
        raise ValueError(
            f"seq_len * heads must be <= {MAX_PAIRS} to list every pair, got {seq_len * heads}"
        )
    send = [
        [
            t * heads + h
            for j in range(n)
            for t in range(r * c, (r + 1) * c)
            for h in range(j * g, (j + 1) * g)
        ]
        for r in range(n)
    ]
    return [
        [(int(v) // heads, int(v) % heads) for v in row] for row in all_to_all(send)
    ]


def activation_bytes_per_rank(
    *,
    seq_len: int,
    micro_batch_size: int,
    hidden: int,
    heads: int,
    cp: int,
    scores: str = "materialised",
) -> int:
    """Activation bytes one layer keeps per rank when the sequence is split over *cp* ranks.

    Everything but attention scores is Korthikanti's ``34 * (s/cp) * b * h``
    (``activation_bytes_per_layer`` with ``recompute="selective"``). Scores:
    ``flash`` keeps none (recomputed in backward); ``materialised`` keeps
    ``5 * a * b * (s/cp) * s``, the local queries against *all* keys;
    ``table2_at_s_over_cp`` plugs s/cp into Table 2, ``5 * a * b * (s/cp)**2``,
    which no rank of a real CP run achieves.

    >>> kw = dict(seq_len=8192, micro_batch_size=1, hidden=4096, heads=32)
    >>> [activation_bytes_per_rank(**kw, cp=4, scores=m) for m in SCORES]
    [2969567232, 285212672, 956301312]
    >>> activation_bytes_per_rank(**kw, cp=3)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be divisible by cp: 8192 % 3 = 2

    Raises ``ValueError`` for a size below 1, *seq_len* not divisible by *cp*
    or an unknown *scores*.
    """
    local = _tokens(seq_len, cp)
    mode = check_choice("scores", scores, SCORES)

    def table2(recompute: str) -> int:
        return activation_bytes_per_layer(
            seq_len=local,
            micro_batch_size=micro_batch_size,
            hidden=hidden,
            heads=heads,
            recompute=recompute,
        )

    if mode == "table2_at_s_over_cp":
        return table2("none")
    rest = table2("selective")
    return (
        rest
        if mode == "flash"
        else rest + 5 * heads * micro_batch_size * local * seq_len
    )
