"""Pipeline stages as memory sees them: the layers each stage holds and the micro-batches in flight.

Megatron-Core builds L/p layers per stage, or, with
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``,
the given counts on the first and last stages and the rest shared evenly, or, with
``--account-for-embedding-in-pipeline-split`` / ``-loss-``, a layer fewer on the
first and last stages (:func:`stage_layers`), each stage's layers split into v
model chunks (:func:`chunk_layers`). Its schedule keeps a number of chunk
micro-batches' activations alive on each rank (:func:`in_flight`);
:func:`layers_in_flight` counts the layers they hold, the number
:func:`infralens.planner.fit.gpu_memory` multiplies by one layer's activations.

>>> split = stage_layers(126, 16, first=7, last=7)    # Llama 3 405B on 16 stages
>>> split[0], split[1], split[-1], sum(split)
(7, 8, 7, 126)
>>> # layers' activations held by the first three stages under 1F1B
>>> [in_flight(rank, 16) * n for rank, n in enumerate(split)][:3]
[112, 120, 112]
"""

from __future__ import annotations

from collections.abc import Sequence

from infralens._typecheck import typed
from infralens._validate import divisible, flag, nonnegative_int, positive_int
from infralens.pipeline_orders import warmup_forwards
from infralens.stage_balance import megatron_split

__all__ = ["chunk_layers", "in_flight", "layers_in_flight", "stage_layers"]


# [start:stage-layers]
@typed
def chunk_layers(
    layers: int,
    pp: int,
    *,
    chunks: int = 1,
    first: int | None = None,
    last: int | None = None,
    embedding: bool = False,
    loss: bool = False,
) -> tuple[tuple[int, ...], ...]:
    """Transformer layers in each model chunk of each pipeline stage, as Megatron-Core builds them.

    Megatron-Core's ``get_num_layers_to_build`` (megatron/core/transformer/
    transformer_block.py:76-205 at d98e8a6) gives each of a stage's v chunks n/v of its
    n layers (:func:`infralens.stage_balance.megatron_split`). With *embedding* and
    *loss* (``--account-for-embedding-in-pipeline-split``, ``-loss-``) every chunk has
    (L + e + l)/(p·v) slots; the first chunk of the first stage gives one to the embedding
    and the last chunk of the last stage one to the loss (lines 186-203), so a chunk may
    hold none. Its validation (transformer_config.py:2369-2415) asks only that p divide
    L + e + l and v the slots per stage.

    >>> chunk_layers(126, 16, chunks=8, embedding=True, loss=True)[0]   # Llama 3 405B
    (0, 1, 1, 1, 1, 1, 1, 1)
    >>> chunk_layers(3, 1, embedding=True, loss=True)         # one stage holds both
    ((3,),)
    >>> chunk_layers(126, 16, chunks=3, embedding=True, loss=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: layers per stage (with embedding and loss) must be divisible by ...

    Raises ``ValueError`` for sizes below 1, *first*/*last* with *embedding*/*loss*, or
    counts that do not divide as Megatron-Core requires; ``TypeError`` for a flag not a bool.
    """
    n, p, v = (
        positive_int("layers", layers),
        positive_int("pp", pp),
        positive_int("chunks", chunks),
    )
    e, lo = flag("embedding", embedding), flag("loss", loss)
    if first is None and last is None:
        if not (e or lo):
            divisible("layers", n, "pp * chunks", p * v)
            return ((n // (p * v),) * v,) * p
        megatron_split(
            n, stages=p, embedding=e, loss=lo
        )  # its checks: p divides L + e + l
        slots = (n + e + lo) // p
        divisible("layers per stage (with embedding and loss)", slots, "chunks", v)
        stages = [[slots // v] * v for _ in range(p)]
        stages[0][0] -= e
        stages[-1][-1] -= lo
        return tuple(tuple(c) for c in stages)
    split = megatron_split(
        n, stages=p, first=first, last=last, embedding=e, loss=lo
    )
    for i, count in enumerate(split):
        if count % v:
            raise ValueError(
                f"stage {i} holds {count} layers, not divisible by chunks = {v}"
            )
    return tuple((count // v,) * v for count in split)


@typed
def stage_layers(
    layers: int,
    pp: int,
    *,
    chunks: int = 1,
    first: int | None = None,
    last: int | None = None,
    embedding: bool = False,
    loss: bool = False,
) -> tuple[int, ...]:
    """Transformer layers on each pipeline stage, as Megatron-Core builds them.

    Even: L/p each, L divisible by p·v. With *first*/*last*
    (``--decoder-first-pipeline-num-layers``, ``--decoder-last-pipeline-num-layers``)
    those stages hold that many and the others share the rest evenly; with
    *embedding*/*loss* each counts as a layer and the first (last) stage holds one
    layer fewer (:func:`infralens.stage_balance.megatron_split`). Every stage's layers
    split into *chunks* model chunks (:func:`chunk_layers`).

    >>> stage_layers(126, 16, first=7, last=7)[:3], stage_layers(80, 4, chunks=5)
    ((7, 8, 8), (20, 20, 20, 20))
    >>> stage_layers(126, 16, chunks=8, embedding=True, loss=True)[-2:]
    (8, 7)
    >>> stage_layers(126, 16)
    Traceback (most recent call last):
    ...
    ValueError: layers must be divisible by pp * chunks: 126 % 16 = 14

    Raises what :func:`chunk_layers` raises.
    """
    split = chunk_layers(layers, pp, chunks=chunks, first=first, last=last, embedding=embedding,
                         loss=loss)  # fmt: skip
    return tuple(sum(stage) for stage in split)


# [end:stage-layers]


# [start:in-flight]
@typed
def in_flight(
    rank: int, pp: int, *, chunks: int = 1, microbatches: int | None = None
) -> int:
    """Model-chunk micro-batches whose activations pipeline *rank* holds at its peak.

    Megatron-Core's ``get_pp_rank_microbatches`` (megatron/core/pipeline_parallel/
    schedules.py:955-978 at d98e8a6) runs w warm-up forwards, then one forward before
    each backward, so w + 1 are live, at most all m·v (w is
    :func:`infralens.pipeline_orders.warmup_forwards`, the rule the simulator's orders
    follow too):

    - 1F1B: w = p − rank − 1, so p on the first stage (Narayanan et al. 2021);
    - interleaved (v chunks): w = 2·(p − rank − 1) + (v − 1)·p (a micro-batch group of p).

    >>> in_flight(0, 4), in_flight(3, 4)
    (4, 1)
    >>> in_flight(0, 4, chunks=5), in_flight(0, 4, chunks=5, microbatches=4)
    (23, 20)
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
    live = warmup_forwards(rank, p, chunks=None if v == 1 else v) + 1
    if microbatches is not None:
        live = min(live, positive_int("microbatches", microbatches) * v)
    return live


# [end:in-flight]


# [start:layers-in-flight]
@typed
def layers_in_flight(
    rank: int,
    pp: int,
    chunk_layers: Sequence[int],
    *,
    microbatches: int | None = None,
) -> int:
    """Transformer layers whose activations pipeline *rank* holds at its peak.

    Walks Megatron-Core's order (schedules.py at d98e8a6): w warm-up forwards
    (:func:`in_flight` − 1), then one forward before each backward (lines 1731-1750).
    Forward k runs chunk (k // p) mod v, backward k chunk v − 1 − (k // p) mod v, in
    micro-batch groups of p (``get_schedule_table``, ``get_model_chunk_id``, lines 989-1016
    and 1244-1249; the group is p by default, model_parallel_config.py:568). A forward adds
    its chunk's layers, a backward frees them; the peak of the sum is returned. With equal
    chunks it is :func:`in_flight` × layers per chunk. The live count repeats every p·v
    steps after the warm-up, so at most w + 2·p·v steps are walked.

    >>> layers_in_flight(0, 4, (5, 5)), in_flight(0, 4, chunks=2) * 5
    (55, 55)
    >>> layers_in_flight(0, 16, (0,) + (1,) * 7, microbatches=128)   # a chunk holds none
    112
    >>> layers_in_flight(0, 4, (5, 5), microbatches=6)
    Traceback (most recent call last):
    ...
    ValueError: microbatches must be divisible by pp with chunks > 1: 6 % 4 = 2

    Raises ``ValueError`` for no chunks, a negative layer count, a rank outside the
    pipeline, or, with several chunks, micro-batches that are not whole groups of pp
    (Megatron-Core refuses them at its default group size N = pp, lines 1160-1180; a
    larger N is not modelled here).
    """
    v = positive_int("number of chunks in chunk_layers", len(chunk_layers))
    counts = [
        nonnegative_int(f"chunk_layers[{i}]", n) for i, n in enumerate(chunk_layers)
    ]
    p = positive_int("pp", pp)
    warm = in_flight(rank, p, chunks=v) - 1
    if p == 1:
        return max(counts)
    period = p * v
    enough = p * -(
        -(warm + 1 + period) // period
    )  # micro-batches that cover w + p·v steps
    if microbatches is None:
        m = enough
    else:
        m = positive_int("microbatches", microbatches)
        if v > 1 and m % p:
            raise ValueError(
                f"microbatches must be divisible by pp with chunks > 1: {m} % {p} = {m % p}"
            )
        m = min(m, enough)
    if len(set(counts)) == 1:  # equal chunks: the closed form, no walk
        return min(warm + 1, m * v) * counts[0]
    total = m * v
    warm = min(warm, total)
    live = peak = 0
    for k in range(
        total
    ):  # forward k, and from the warm-up's end backward k - w after it
        live += counts[(k // p) % v]
        peak = max(peak, live)
        if k >= warm:
            live -= counts[v - 1 - ((k - warm) // p) % v]
    return peak


# [end:layers-in-flight]
