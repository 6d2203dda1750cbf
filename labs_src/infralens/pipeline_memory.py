"""Pipeline stages as memory sees them: the layers each stage holds and the micro-batches in flight.

Megatron-Core builds L/p layers per stage, or, with
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``,
the given counts on the first and last stages and the rest shared evenly
(:func:`stage_layers`), each stage's layers split into v model chunks. Its
schedule keeps a number of chunk micro-batches' activations alive on each rank
(:func:`in_flight`). :func:`infralens.fit.gpu_memory` multiplies the two.

>>> split = stage_layers(126, 16, first=7, last=7)    # Llama 3 405B on 16 stages
>>> split[0], split[1], split[-1], sum(split)
(7, 8, 7, 126)
>>> [in_flight(rank, 16) * n for rank, n in enumerate(split)][:3]   # layer activations, 1F1B
[112, 120, 112]
"""

from __future__ import annotations

from infralens._typecheck import typed
from infralens._validate import divisible, nonnegative_int, positive_int
from infralens.stage_balance import megatron_split

__all__ = ["in_flight", "stage_layers"]


# [start:stage-layers]
@typed
def stage_layers(
    layers: int, pp: int, *, chunks: int = 1, first: int | None = None, last: int | None = None
) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage, as Megatron-Core builds them.

    Even: L/p each, L divisible by p·v. With *first*/*last*
    (``--decoder-first-pipeline-num-layers``, ``--decoder-last-pipeline-num-layers``)
    those stages hold that many and the others share the rest evenly
    (:func:`infralens.stage_balance.megatron_split`); every stage's count must divide
    into *chunks* model chunks (Megatron-Core's ``get_num_layers_to_build``).

    >>> stage_layers(126, 16, first=7, last=7)[:3], stage_layers(80, 4, chunks=5)
    ((7, 8, 8), (20, 20, 20, 20))
    >>> stage_layers(126, 16)
    Traceback (most recent call last):
    ...
    ValueError: layers must be divisible by pp * chunks: 126 % 16 = 14

    Raises ``ValueError`` for sizes below 1 or a split Megatron-Core refuses.
    """
    n, p, v = positive_int("layers", layers), positive_int("pp", pp), positive_int("chunks", chunks)
    if first is None and last is None:
        divisible("layers", n, "pp * chunks", p * v)
        return (n // p,) * p
    split = megatron_split(n, stages=p, first=first, last=last)
    for i, count in enumerate(split):
        if count % v:
            raise ValueError(f"stage {i} holds {count} layers, not divisible by chunks = {v}")
    return split


# [end:stage-layers]


# [start:in-flight]
@typed
def in_flight(rank: int, pp: int, *, chunks: int = 1, microbatches: int | None = None) -> int:
    """Model-chunk micro-batches whose activations pipeline *rank* holds at its peak.

    Megatron-Core's ``get_pp_rank_microbatches`` (megatron/core/pipeline_parallel/
    schedules.py:955-978 at d98e8a6) runs w warm-up forwards, then one forward before
    each backward, so w + 1 are live, at most all m·v:

    - 1F1B: w = p − rank − 1, so p on the first stage (Narayanan et al. 2021);
    - interleaved (v chunks): w = 2·(p − rank − 1) + (v − 1)·p (a micro-batch group of p).

    >>> in_flight(0, 4), in_flight(3, 4), in_flight(0, 4, chunks=5), in_flight(0, 4, chunks=5,
    ...                                                                         microbatches=4)
    (4, 1, 23, 20)
    >>> in_flight(4, 4)
    Traceback (most recent call last):
    ...
    ValueError: rank must be < pp: 4 >= 4

    Raises ``ValueError`` for sizes below 1 or a rank outside the pipeline.
    """
    p, v = positive_int("pp", pp), positive_int("chunks", chunks)
    if nonnegative_int("rank", rank) >= p:
        raise ValueError(f"rank must be < pp: {rank} >= {p}")
    if p == 1:
        return 1
    warm = p - rank - 1 if v == 1 else 2 * (p - rank - 1) + (v - 1) * p
    live = warm + 1
    if microbatches is not None:
        live = min(live, positive_int("microbatches", microbatches) * v)
    return live


# [end:in-flight]
