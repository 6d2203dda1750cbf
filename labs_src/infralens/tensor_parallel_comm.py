"""Tensor parallelism's communication: one layer's collectives, their bytes and their time.

Megatron-LM joins the column- and row-parallel pieces of each transformer
block (:mod:`infralens.tensor_parallel`) with one collective per block and
pass (Shoeybi et al. 2019, §3). With sequence parallelism (Korthikanti et
al. 2022, §4.2.2) each all-reduce becomes a reduce-scatter and an
all-gather, and the activations between blocks are split along the
sequence.

This module answers: which collectives one layer issues and how many bytes
each rank sends; and how long they take on NVLink or on the network next to
the layer's own arithmetic.

>>> plain = layer_collectives(sequence_parallel=False)
>>> [(c.op, c.operator, c.direction) for c in plain][:2]
[('all_reduce', 'g', 'forward'), ('all_reduce', 'g', 'forward')]
>>> tp, sp = (layer_bytes_sent(seq_len=2048, micro_batch_size=1, hidden=12288, tp=8,
...                            sequence_parallel=s) for s in (False, True))
>>> tp == sp, tp
(True, Fraction(352321536, 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import positive_int
from infralens.collectives import ring_bytes_sent
from infralens.nccl import predict
from infralens.topology import Cluster

__all__ = [
    "OPERATORS",
    "Collective",
    "LayerSeconds",
    "Operator",
    "layer_bytes_sent",
    "layer_collectives",
    "layer_seconds",
    "operators",
]


@dataclass(frozen=True)
class Operator:
    """One of the two operators at a tensor-parallel block's edges: what it does each pass."""

    name: str
    forward: str
    backward: str

    def __post_init__(self) -> None:
        check_fields(self)


# [start:operators]
# key: sequence_parallel; value: (f, g), each with its forward and backward action
OPERATORS: dict[bool, tuple[Operator, Operator]] = {
    False: (
        Operator("f", "identity", "all_reduce"),
        Operator("g", "all_reduce", "identity"),
    ),
    True: (
        Operator("f", "all_gather", "reduce_scatter"),
        Operator("g", "reduce_scatter", "all_gather"),
    ),
}
"""``(f, g)`` without and with sequence parallelism; f enters a block, g leaves
it."""
# [end:operators]


def operators(*, sequence_parallel: bool) -> tuple[Operator, Operator]:
    """Megatron's ``f`` (block entry) and ``g`` (block exit), named by what they do.

    Without sequence parallelism (Shoeybi et al., §3): ``f`` copies the
    replicated input forward and all-reduces its gradient backward; ``g``
    all-reduces the partial sums forward and passes the gradient through.
    With it (Korthikanti et al., §4.2.2, who call the pair g and ḡ): ``f``
    all-gathers the sequence shards forward and reduce-scatters backward;
    ``g`` reduce-scatters forward and all-gathers backward.

    >>> f, g = operators(sequence_parallel=False)
    >>> f
    Operator(name='f', forward='identity', backward='all_reduce')
    >>> operators(sequence_parallel=True)[1]
    Operator(name='g', forward='reduce_scatter', backward='all_gather')

    Raises ``TypeError`` if *sequence_parallel* is not a bool.
    """
    if not isinstance(sequence_parallel, bool):
        raise TypeError(
            f"sequence_parallel must be a bool, got {type(sequence_parallel).__name__}"
        )
    return OPERATORS[sequence_parallel]


@dataclass(frozen=True)
class Collective:
    """One collective of a layer: op, the operator issuing it, the block, and the pass."""

    op: str
    operator: str
    block: str
    direction: str

    def __post_init__(self) -> None:
        check_fields(self)


def layer_collectives(*, sequence_parallel: bool) -> tuple[Collective, ...]:
    """The collectives one transformer layer issues in forward, then backward.

    Each block (attention, then MLP) is ``f -> local work -> g``. Forward
    runs f then g per block; backward visits the blocks in reverse and runs
    g's backward before f's. Identities are not collectives and are left
    out, so plain TP gives 2 all-reduces forward and 2 backward; sequence
    parallelism gives one all-gather and one reduce-scatter per block and
    pass.

    >>> [c.op for c in layer_collectives(sequence_parallel=False)]
    ['all_reduce', 'all_reduce', 'all_reduce', 'all_reduce']
    >>> sp = layer_collectives(sequence_parallel=True)
    >>> [(c.block, c.operator, c.op) for c in sp][:2]
    [('attention', 'f', 'all_gather'), ('attention', 'g', 'reduce_scatter')]

    Raises ``TypeError`` if *sequence_parallel* is not a bool.
    """
    # [start:walk-one-layer]
    f, g = operators(sequence_parallel=sequence_parallel)
    out: list[Collective] = []
    for block in ("attention", "mlp"):
        out += [Collective(p.forward, p.name, block, "forward") for p in (f, g)]
    for block in ("mlp", "attention"):
        out += [Collective(p.backward, p.name, block, "backward") for p in (g, f)]
    return tuple(c for c in out if c.op != "identity")
    # [end:walk-one-layer]


def layer_bytes_sent(
    *,
    seq_len: int,
    micro_batch_size: int,
    hidden: int,
    tp: int,
    sequence_parallel: bool,
    bytes_per_element: int = 2,
) -> Fraction:
    """Bytes each rank sends for one layer's forward and backward, ring algorithms.

    Every collective moves a ``b·s·h`` activation (the full buffer; with
    sequence parallelism each rank's piece is ``b·s·h / tp``). The sum of
    ``ring_bytes_sent(op, b·s·h·bytes, tp)`` over :func:`layer_collectives`
    is ``8·b·s·h·(tp-1)/tp`` elements either way, the per-layer figure of
    Narayanan et al. (2021), §3.2: a ring all-reduce is one reduce-scatter
    pass plus one all-gather pass.

    >>> sent = layer_bytes_sent(seq_len=2048, micro_batch_size=1, hidden=12288, tp=8,
    ...                         sequence_parallel=False, bytes_per_element=1)
    >>> sent == 8 * 2048 * 12288 * 7 / 8
    True
    >>> layer_bytes_sent(seq_len=4, micro_batch_size=1, hidden=8, tp=1,
    ...                  sequence_parallel=True)
    Fraction(0, 1)

    Raises ``ValueError`` for a size below 1 and ``TypeError`` if
    *sequence_parallel* is not a bool.
    """
    # [start:layer-bytes]
    nbytes = _activation_bytes(
        seq_len, micro_batch_size, hidden, bytes_per_element
    )  # b·s·h·bytes
    t = positive_int("tp", tp)
    collectives = layer_collectives(sequence_parallel=sequence_parallel)
    # Σ ring_bytes_sent = 4 all-reduces · 2(t-1)/t · b·s·h
    # (or 8 halves, (t-1)/t each: the same sum)
    return sum(
        (ring_bytes_sent(c.op, nbytes, t) for c in collectives), start=Fraction(0)
    )
    # [end:layer-bytes]


def _activation_bytes(
    seq_len: int, micro_batch_size: int, hidden: int, nbytes: int
) -> int:
    return (
        positive_int("seq_len", seq_len)
        * positive_int("micro_batch_size", micro_batch_size)
        * positive_int("hidden", hidden)
        * positive_int("bytes_per_element", nbytes)
    )


@dataclass(frozen=True)
class LayerSeconds:
    """One layer's forward and backward on one rank: arithmetic and TP communication."""

    compute: Fraction
    communication: Fraction

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def layer_seconds(
    *,
    cluster: Cluster,
    tp_group: Sequence[int],
    params_per_layer: int,
    seq_len: int,
    micro_batch_size: int,
    hidden: int,
    matmul_flops_per_s: int,
    sequence_parallel: bool = False,
    bytes_per_element: int = 2,
) -> LayerSeconds:
    """Time of one layer's GEMMs at a given matmul rate, and of its TP collectives on *cluster*.

    ``compute = 3 · 2·params_per_layer·b·s / (tp · matmul_flops_per_s)``:
    2 FLOPs per parameter per token forward, twice that backward, split over
    ``tp = len(tp_group)`` ranks (attention scores are left out), at the rate
    the caller says the GEMMs sustain: the measured ceiling
    :data:`infralens.hardware.MAMF_BF16`, as :func:`infralens.planner.step.estimate`
    prices them, or the dense datasheet peak for a bound that no kernel reaches.
    ``communication`` sums :func:`infralens.nccl.predict` over every
    collective of :func:`layer_collectives` on *tp_group*: NCCL's algorithm
    for that size and group (NVLS inside an H100 node, a ring or tree once
    the group leaves its NVLink domain). Nothing is overlapped.

    >>> from infralens.hardware import MAMF_BF16
    >>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    >>> kw = dict(params_per_layer=12 * 12288**2, seq_len=2048, micro_batch_size=1,
    ...           hidden=12288, matmul_flops_per_s=MAMF_BF16["h100-sxm5-80gb"])
    >>> ms = lambda t: round(float(t) * 1000, 2)
    >>> inside = layer_seconds(cluster=c, tp_group=range(8), **kw)
    >>> across = layer_seconds(cluster=c, tp_group=range(16), **kw)
    >>> ms(inside.compute), ms(inside.communication)
    (3.5, 0.93)
    >>> ms(across.compute), ms(across.communication)
    (1.75, 1.27)
    >>> layer_seconds(cluster=c, tp_group=[0], **kw).communication   # tp = 1
    Fraction(0, 1)

    Raises ``ValueError`` for a size or *matmul_flops_per_s* below 1, or an
    empty group, a repeated rank or a rank outside *cluster*.
    """
    ranks = list(tp_group)
    if len(set(ranks)) != len(ranks):
        raise ValueError(f"tp_group must not repeat a rank, got {ranks}")
    cluster.tier_of(ranks)  # rejects an empty group (t = 0 below) and unknown ranks
    # [start:layer-flops]
    t = len(ranks)
    nbytes = _activation_bytes(seq_len, micro_batch_size, hidden, bytes_per_element)
    flops = (
        6
        * positive_int("params_per_layer", params_per_layer)
        * seq_len
        * micro_batch_size
    )
    compute = Fraction(
        flops, t * positive_int("matmul_flops_per_s", matmul_flops_per_s)
    )
    # [end:layer-flops]
    # [start:layer-comm]
    comm = sum(
        (
            Fraction(predict(c.op, nbytes, cluster, ranks).seconds)
            for c in layer_collectives(sequence_parallel=sequence_parallel)
        ),
        start=Fraction(0),
    )
    # [end:layer-comm]
    return LayerSeconds(compute, comm)
