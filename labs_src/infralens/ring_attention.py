"""Ring attention: K/V blocks passed around the context-parallel group, and when that hides.

With the sequence split over ``cp`` ranks (:mod:`infralens.context_parallel`),
a rank keeps its queries and passes the key/value block it holds to the next
rank, ``cp - 1`` times per layer, merging partial results with an online
softmax (Liu et al., Ring Attention). This module answers, with exact
numbers, whose block each rank holds at each step, how many bytes one step
sends, how long a step computes and transfers at given rates, and how many
tokens per rank let the transfer hide behind the block's attention.

>>> ring_schedule(4)[1]           # rank 1: its own block, then those of ranks 0, 3, 2
(1, 0, 3, 2)
>>> ring_kv_block_bytes(131072, 16, kv_heads=8, head_dim=128)   # one K + one V, bf16
33554432
>>> min_block_tokens(32, 32, flops_per_s=312 * 10**12, bandwidth_bytes_per_s=300 * 10**9)
Fraction(1040, 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import describe, divisible, positive_int, positive_number
from infralens.context_parallel import _head_bytes, _tokens, ulysses_bytes

__all__ = [
    "HybridBytes",
    "RingStep",
    "hybrid_bytes",
    "min_block_tokens",
    "ring_kv_block_bytes",
    "ring_schedule",
    "ring_step",
]


@typed
def ring_schedule(cp: int) -> tuple[tuple[int, ...], ...]:
    """Whose K/V block each rank attends to at each ring step.

    ``schedule[r][t] = (r - t) mod cp``: at step 0 a rank uses its own block;
    between steps every rank sends the block it holds to rank ``r + 1`` and
    receives from ``r - 1``, so there are ``cp - 1`` transfers per pass.

    >>> ring_schedule(3)
    ((0, 2, 1), (1, 0, 2), (2, 1, 0))
    >>> ring_schedule(1)
    ((0,),)

    Raises ``ValueError`` if *cp* < 1, or above 1024: the schedule has
    ``cp ** 2`` entries (context-parallel groups are a few dozen ranks).
    """
    n = positive_int("cp", cp)
    if n > 1024:
        raise ValueError(
            f"cp must be <= 1024 to list a cp x cp schedule, got {describe(n)}"
        )
    return tuple(tuple((r - t) % n for t in range(n)) for r in range(n))


def ring_kv_block_bytes(
    seq_len: int,
    cp: int,
    kv_heads: int,
    head_dim: int,
    *,
    micro_batch: int = 1,
    bytes_per_element: int = 2,
) -> int:
    """Bytes one rank sends per ring step: one K block and one V block.

    ``2 * micro_batch * (seq_len / cp) * kv_heads * head_dim * bytes_per_element``.

    >>> ring_kv_block_bytes(131072, 16, kv_heads=8, head_dim=128)
    33554432
    >>> ring_kv_block_bytes(10, 4, kv_heads=1, head_dim=1)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be divisible by cp: 10 % 4 = 2

    Raises ``ValueError`` for a size below 1 or *seq_len* not divisible by *cp*.
    """
    tokens = _tokens(seq_len, cp)
    return (
        2
        * tokens
        * positive_int("kv_heads", kv_heads)
        * _head_bytes(micro_batch, head_dim, bytes_per_element)
    )


@dataclass(frozen=True)
class RingStep:
    """One ring step on one rank: the K/V transfer and the attention it can hide behind."""

    transfers: int
    bytes_per_step: int
    flops_per_step: int
    compute_s: Fraction
    transfer_s: Fraction

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def bytes_per_layer(self) -> int:
        """Bytes each rank sends in one layer's forward: ``transfers * bytes_per_step``."""
        return self.transfers * self.bytes_per_step

    @property
    def hidden(self) -> bool:
        """True when the step's attention takes at least as long as its transfer."""
        return self.compute_s >= self.transfer_s


def ring_step(
    seq_len: int,
    cp: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    *,
    flops_per_s: int | Fraction,
    bandwidth_bytes_per_s: int | Fraction,
    micro_batch: int = 1,
    bytes_per_element: int = 2,
    causal: bool = False,
) -> RingStep:
    """Compute and transfer time of one forward ring step, with c = seq_len / cp.

    ``flops = 4 * micro_batch * c**2 * heads * head_dim`` (QKᵀ and PV, two
    FLOPs per multiply-add), halved when *causal* (the load-balanced layout
    computes half a block on every step after the first); ``compute_s =
    flops / flops_per_s``; ``transfer_s = ring_kv_block_bytes / bandwidth``.

    >>> step = ring_step(8192, 8, 32, 32, 128, flops_per_s=10**15,
    ...                  bandwidth_bytes_per_s=10**12)
    >>> step.transfers, step.bytes_per_step, step.bytes_per_layer, step.hidden
    (7, 16777216, 117440512, True)
    >>> ring_step(8192, 8, 32, 32, 128, flops_per_s=10**15,
    ...           bandwidth_bytes_per_s=10**11).hidden          # 10x slower link
    False
    >>> ring_step(8, 1, 1, 1, 1, flops_per_s=1, bandwidth_bytes_per_s=1).transfers
    0

    Raises ``ValueError`` for a size below 1, *seq_len* not divisible by *cp*,
    *heads* not divisible by *kv_heads*, or a rate that is not positive.
    """
    # [start:ring-block-bytes]
    # bytes = 2 * b * c * kv_heads * head_dim * e: one K block and one V block
    nbytes = ring_kv_block_bytes(
        seq_len,
        cp,
        kv_heads,
        head_dim,
        micro_batch=micro_batch,
        bytes_per_element=bytes_per_element,
    )
    divisible("heads", positive_int("heads", heads), "kv_heads", kv_heads)
    # [end:ring-block-bytes]
    # [start:ring-step-times]
    c = seq_len // cp
    # flops = 4 * b * c**2 * heads * head_dim (QK^T and PV), halved when causal
    flops = 4 * micro_batch * c * c * heads * head_dim // (2 if causal else 1)
    return RingStep(
        transfers=cp - 1,
        bytes_per_step=nbytes,
        flops_per_step=flops,
        compute_s=flops / positive_number("flops_per_s", flops_per_s),
        transfer_s=nbytes
        / positive_number("bandwidth_bytes_per_s", bandwidth_bytes_per_s),
    )
    # [end:ring-step-times]


def min_block_tokens(
    heads: int,
    kv_heads: int,
    *,
    flops_per_s: int | Fraction,
    bandwidth_bytes_per_s: int | Fraction,
    bytes_per_element: int = 2,
    causal: bool = False,
) -> Fraction:
    """Smallest tokens per rank, c = seq_len / cp, at which a ring step hides its transfer.

    From :func:`ring_step`, compute >= transfer when
    ``c >= F * kv_heads * bytes_per_element / (2 * heads * B)`` (twice that
    when *causal*). With ``kv_heads == heads`` and 2-byte elements this is
    Liu et al.'s ``c >= F / B``.

    >>> min_block_tokens(32, 32, flops_per_s=312 * 10**12,
    ...                  bandwidth_bytes_per_s=300 * 10**9)
    Fraction(1040, 1)
    >>> min_block_tokens(128, 8, flops_per_s=1, bandwidth_bytes_per_s=1, causal=True)
    Fraction(1, 8)

    Raises ``ValueError`` for a size below 1 or a rate that is not positive.
    """
    # [start:min-block]
    a = positive_int("heads", heads)
    kv = positive_int("kv_heads", kv_heads)
    e = positive_int("bytes_per_element", bytes_per_element)
    ratio = positive_number("flops_per_s", flops_per_s) / positive_number(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s
    )
    # compute >= transfer when c >= (F / B) * kv * e / (2 * a); twice that if causal
    return ratio * kv * e / (2 * a) * (2 if causal else 1)
    # [end:min-block]


@dataclass(frozen=True)
class HybridBytes:
    """Bytes one rank sends per layer, forward, in Ulysses x ring context parallelism."""

    all_to_all: int  # Ulysses' four all-to-alls inside the group of *ulysses* ranks
    ring: int  # ring - 1 K/V blocks passed between the *ring* groups

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def hybrid_bytes(
    seq_len: int,
    *,
    ulysses: int,
    ring: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    micro_batch: int = 1,
    bytes_per_element: int = 2,
) -> HybridBytes:
    """Ulysses over *ulysses* ranks inside ring attention over *ring* groups (cp = u · r).

    The sequence is split over u · r ranks. An all-to-all inside each Ulysses group
    turns s/(u·r) tokens with every head into s/r tokens with heads/u heads
    (:func:`infralens.context_parallel.ulysses_bytes` on s/r tokens); ring attention
    then passes r − 1 K/V blocks of s/r tokens and kv_heads/u heads between groups.
    Megatron-Core's ``--cp-comm-type a2a+p2p`` with
    ``--hierarchical-context-parallel-sizes u r``.

    >>> hybrid_bytes(131072, ulysses=8, ring=2, heads=128, kv_heads=8, head_dim=128)
    HybridBytes(all_to_all=499122176, ring=33554432)
    >>> hybrid_bytes(131072, ulysses=1, ring=16, heads=128, kv_heads=8, head_dim=128)
    HybridBytes(all_to_all=0, ring=503316480)
    >>> hybrid_bytes(131072, ulysses=16, ring=1, heads=128, kv_heads=8, head_dim=128)
    Traceback (most recent call last):
    ...
    ValueError: kv_heads must be divisible by cp: 8 % 16 = 8

    Raises ``ValueError`` for a size below 1, a sequence that does not split over
    u · r ranks, or heads or K/V heads that do not split over *ulysses*.
    """
    u, r = positive_int("ulysses", ulysses), positive_int("ring", ring)
    group_tokens = _tokens(seq_len, r)  # s / r tokens per Ulysses group
    a2a = ulysses_bytes(
        group_tokens, u, heads, kv_heads, head_dim,
        micro_batch=micro_batch, bytes_per_element=bytes_per_element,
    ).total  # fmt: skip
    steps = (r - 1) * ring_kv_block_bytes(
        seq_len, r, kv_heads // u, head_dim,
        micro_batch=micro_batch, bytes_per_element=bytes_per_element,
    )  # fmt: skip
    return HybridBytes(all_to_all=a2a, ring=steps)
