"""Pipeline stage balance: the embedding on the first stage, the output layer and loss on the last.

Equal layer counts do not make equal stages. The first stage also looks up
the token embedding and the last one runs the output projection to the
vocabulary and the loss, so with the same number of transformer layers the
last stage is the slowest, and in a pipeline the slowest stage sets the pace
of every other. This module prices each stage in *layer units* (one
transformer layer's training FLOPs = 1), finds the busiest stage, and times a
1F1B step whose stages differ, to show what the imbalance costs.

>>> from infralens.model import PRESETS
>>> from infralens.stage_balance import head_cost, megatron_split, stage_costs
>>> m = PRESETS["llama3.1-405b"]
>>> round(float(head_cost(m, seq_len=8192)), 3)      # the output layer: 0.61 of a layer
0.608
>>> megatron_split(126, stages=16, embedding=True, loss=True)[:3]
(7, 8, 8)
>>> max(stage_costs((8,) * 16, embedding=0, head=1))  # equal counts: the last is busiest
Fraction(9, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import divisible, nonnegative_number, positive_int
from infralens.compute import model_flops_per_token
from infralens.model import TransformerConfig
from infralens.pipeline import assign_layers
from infralens.pipeline_orders import schedule_order

MAX_ACTIONS = 10**5
"""Most stages x microbatches :func:`step_time` simulates (each is two timed actions)."""

__all__ = [
    "busiest_stage",
    "even_split",
    "head_cost",
    "imbalance_cost",
    "layer_flops_per_token",
    "megatron_split",
    "stage_costs",
    "step_time",
]


@typed
def layer_flops_per_token(model: TransformerConfig, *, seq_len: int) -> int:
    """Training FLOPs of one transformer layer per token (forward and backward): 6·P + 12·h·s.

    P is :meth:`~infralens.model.TransformerConfig.layer_params`; 12·h·s is PaLM's
    attention term per layer, as in :func:`infralens.compute.model_flops_per_token`.

    >>> from infralens.model import PRESETS
    >>> round(layer_flops_per_token(PRESETS["llama3.1-405b"], seq_len=8192) / 1e9, 1)
    20.7
    >>> layer_flops_per_token(PRESETS["llama3.1-405b"], seq_len=0)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be >= 1, got 0

    Raises ``ValueError`` if *seq_len* is below 1.
    """
    s = positive_int("seq_len", seq_len)
    return 6 * model.layer_params() + 12 * model.hidden * s


@typed
def head_cost(model: TransformerConfig, *, seq_len: int) -> Fraction:
    """The last stage's extra work (output projection and final norm) in layer units.

    head = (model FLOPs per token - L · layer FLOPs per token) / layer FLOPs per token
         = 6·(V·h + norm) / (6·P + 12·h·s)

    The embedding lookup is a gather, not a matmul: it has no FLOPs in this count,
    and its cost (a V x h gradient written in backward, the table's memory) is
    what a trace measures. The loss's softmax is memory-bound and not counted either.

    >>> from infralens.model import PRESETS
    >>> # a small model with a big vocabulary
    >>> round(float(head_cost(PRESETS["llama3-8b"], seq_len=8192)), 2)
    1.84
    >>> head_cost(PRESETS["llama3-8b"], seq_len=-1)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be >= 1, got -1

    Raises ``ValueError`` if *seq_len* is below 1.
    """
    layer = layer_flops_per_token(model, seq_len=seq_len)
    total = model_flops_per_token(model, seq_len=seq_len)
    return Fraction(total - model.layers * layer, layer)


@typed
def even_split(layers: int, *, stages: int) -> tuple[int, ...]:
    """Layers per stage as :func:`infralens.pipeline.assign_layers` deals them (extra first).

    >>> even_split(126, stages=16)
    (8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7, 7)

    Raises what ``assign_layers`` raises (fewer layers than stages, a size below 1).
    """
    return tuple(len(stage[0]) for stage in assign_layers(layers, stages=stages))


@typed
def megatron_split(
    layers: int,
    *,
    stages: int,
    embedding: bool = False,
    loss: bool = False,
    first: int | None = None,
    last: int | None = None,
) -> tuple[int, ...]:
    """Transformer layers per stage as Megatron-Core's pipeline-split arguments set them.

    - ``first``/``last`` (``--decoder-first-pipeline-num-layers`` and ``-last-``): those
      stages get that many layers and the others share the rest evenly.
    - ``embedding``/``loss`` (``--account-for-embedding-in-pipeline-split``, ``-loss-``):
      each counts as one layer, so (L + e + l) must divide by p; every stage gets
      (L + e + l) / p slots and the first (last) gives one slot to the embedding (loss).

    >>> megatron_split(126, stages=16, first=7, last=7) == megatron_split(
    ...     126, stages=16, embedding=True, loss=True)
    True
    >>> megatron_split(126, stages=16)
    Traceback (most recent call last):
    ...
    ValueError: layers + embedding + loss must be divisible by stages: 126 % 16 = 14

    Raises ``ValueError`` when the layers do not divide as Megatron-Core requires, or when
    ``first``/``last`` are combined with ``embedding``/``loss``.
    """
    n = positive_int("layers", layers)
    p = positive_int("stages", stages)
    if first is None and last is None:
        slots = n + bool(embedding) + bool(loss)
        divisible("layers + embedding + loss", slots, "stages", p)
        split = [slots // p] * p
        split[0] -= bool(embedding)
        split[-1] -= bool(loss)
        return tuple(split)
    if embedding or loss:
        raise ValueError(
            "first/last layer counts cannot be combined with embedding/loss"
        )
    ends = [
        positive_int("first", first) if first is not None else None,
        positive_int("last", last) if last is not None else None,
    ]
    set_ends = [e for e in ends if e is not None]
    middle, rest = p - len(set_ends), n - sum(set_ends)
    if middle < 1:
        raise ValueError(
            f"stages must be > {len(set_ends)} when first and last are set, got {p}"
        )
    if rest < middle:
        raise ValueError(f"first and last leave {rest} layers for {middle} stages")
    divisible("the remaining layers", rest, "the remaining stages", middle)
    split = [rest // middle] * p
    if ends[0] is not None:
        split[0] = ends[0]
    if ends[1] is not None:
        split[-1] = ends[1]
    return tuple(split)


@typed
def stage_costs(
    split: Sequence[int], *, embedding: Fraction, head: Fraction
) -> tuple[Fraction, ...]:
    """Each stage's work in layer units: its layers, plus *embedding* first and *head* last.

    cost[0] = n_0 + embedding,  cost[p-1] = n_{p-1} + head,  cost[s] = n_s otherwise

    >>> stage_costs((2, 2), embedding=0, head=Fraction(1, 2))
    (Fraction(2, 1), Fraction(5, 2))
    >>> stage_costs((3,), embedding=1, head=1)          # one stage holds both ends
    (Fraction(5, 1),)
    >>> stage_costs((2, -1), embedding=0, head=0)
    Traceback (most recent call last):
    ...
    ValueError: split[1] must be >= 0, got -1

    Raises ``ValueError`` for an empty *split*, a negative layer count or cost.
    """
    if not split:
        raise ValueError("split must list at least one stage")
    costs = []
    for i, n in enumerate(split):
        if n < 0:
            raise ValueError(f"split[{i}] must be >= 0, got {n}")
        costs.append(Fraction(n))
    costs[0] += Fraction(nonnegative_number("embedding", embedding))
    costs[-1] += Fraction(nonnegative_number("head", head))
    return tuple(costs)


@typed
def busiest_stage(costs: Sequence[Fraction]) -> tuple[int, Fraction]:
    """The slowest stage and its cost over the mean: (index, max / mean); 1 is balanced.

    >>> busiest_stage(stage_costs((8,) * 16, embedding=0, head=1))
    (15, Fraction(48, 43))
    >>> busiest_stage(())
    Traceback (most recent call last):
    ...
    ValueError: costs must list at least one stage

    Raises ``ValueError`` for no stages or a total cost of zero.
    """
    if not costs:
        raise ValueError("costs must list at least one stage")
    total = sum(costs, Fraction(0))
    if total <= 0:
        raise ValueError("costs must add up to more than zero")
    top = max(range(len(costs)), key=lambda s: (costs[s], s))
    return top, costs[top] * len(costs) / total


@typed
def step_time(costs: Sequence[Fraction], *, microbatches: int) -> Fraction:
    """Length of one 1F1B step when stage s takes cost[s] forward and 2·cost[s] backward.

    Every action starts when its stage is free and its input is ready (the clock of
    :func:`infralens.pipeline_schedules.simulate`, with per-stage times). With equal
    costs c it is (m + p - 1)·3c; an uneven split pays (m - 1) times its busiest stage.

    >>> step_time((Fraction(1),) * 4, microbatches=8)     # (8 + 3) * 3
    Fraction(33, 1)
    >>> step_time((Fraction(1), Fraction(1), Fraction(1), Fraction(2)), microbatches=8)
    Fraction(57, 1)
    >>> step_time((Fraction(0),), microbatches=8)
    Traceback (most recent call last):
    ...
    ValueError: costs must all be > 0, got 0 on stage 0

    Raises ``ValueError`` for a stage cost <= 0 or *microbatches* below 1.
    """
    p = positive_int("number of stages in costs", len(costs))
    m = positive_int("microbatches", microbatches)
    if p * m > MAX_ACTIONS:
        raise ValueError(
            f"stages * microbatches must be <= {MAX_ACTIONS}, got {p} * {m}"
        )
    for s, c in enumerate(costs):
        if not c > 0:
            raise ValueError(f"costs must all be > 0, got {c} on stage {s}")
    order = schedule_order("1f1b", stages=p, microbatches=m)
    clock = [Fraction(0)] * p
    done: dict[tuple[str, int, int], Fraction] = {}
    position = [0] * p
    while any(position[s] < len(order[s]) for s in range(p)):
        for s in range(p):
            while position[s] < len(order[s]):
                kind, mb, _ = order[s][position[s]]
                if kind == "F":
                    dep = ("F", mb, s - 1) if s > 0 else None
                else:
                    dep = ("B", mb, s + 1) if s < p - 1 else ("F", mb, s)
                if dep is not None and dep not in done:
                    break
                start = max(clock[s], done[dep]) if dep is not None else clock[s]
                clock[s] = start + Fraction(costs[s]) * (1 if kind == "F" else 2)
                done[(kind, mb, s)] = clock[s]
                position[s] += 1
    return max(clock)


@typed
def imbalance_cost(costs: Sequence[Fraction], *, microbatches: int) -> Fraction:
    """How much longer a 1F1B step is than with the same work spread evenly over the stages.

    cost = step_time(costs) / step_time(mean cost on every stage) - 1

    With few microbatches it can be negative: a light first or last stage shortens
    the fill and the drain more than the busiest stage lengthens the steady state.

    >>> imbalance_cost(stage_costs((8,) * 4, embedding=0, head=0), microbatches=8)
    Fraction(0, 1)
    >>> imbalance_cost((Fraction(1), Fraction(3)), microbatches=8)   # busiest 3 vs mean 2
    Fraction(7, 18)

    Raises what :func:`step_time` raises.
    """
    if not costs:
        raise ValueError("costs must list at least one stage")
    mean = sum(costs, Fraction(0)) / len(costs)
    balanced = step_time((mean,) * len(costs), microbatches=microbatches)
    return step_time(costs, microbatches=microbatches) / balanced - 1
