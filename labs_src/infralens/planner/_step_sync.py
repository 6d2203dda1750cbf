"""What synchronising gradients and parameters over the dp·cp group costs a step.

Megatron-Core's DDP and distributed optimizer (:func:`data_parallel`) and FSDP2 as
torchtitan runs it (:func:`fsdp`) both reduce over the ranks the model state is
sharded over, dp·cp; the collectives are priced by :func:`infralens.nccl.predict`
through :func:`infralens.planner._step_terms.seconds`, and what hides them is
:mod:`infralens.planner._step_overlap`'s critical path. Every function returns seconds; the
caller passes validated groups and sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens.model import TransformerConfig
from infralens.plan import ParallelPlan
from infralens.planner._step_overlap import hidden
from infralens.planner._step_terms import BF16, seconds
from infralens.sharding import padded_shard_size
from infralens.topology import Cluster

DP_BUCKET_PARAMS = 40_000_000
"""Megatron-Core's default DDP bucket: max(40M, 1M·dp) parameters (``bucket_size``)."""


@dataclass(frozen=True)
class FSDPTraffic:
    """FSDP2's collectives of one layer, in seconds, and the exposed ones of a step.

    *first* and *later*: (forward, backward) traffic of the first and of every later
    micro-batch; *waits*: the gathers no compute hides, per step; *after*: each layer's
    reduce-scatter after the last backward, where nothing hides it.
    """

    first: tuple[float, float]
    later: tuple[float, float]
    waits: float
    after: float = 0.0


def unit_params(m: TransformerConfig, plan: ParallelPlan) -> int:
    """Parameters each FSDP2 unit of a stage gathers and reduce-scatters, per rank of
    its dp·cp group before sharding: the stage's share of the whole model over its
    layers, ``ceil(N / (t·p)) // ceil(L / p)``.

    torchtitan (b5bcd76) wraps the embedding and the output layer as units of their
    own; their bytes are spread over the layer units here, so a step moves every
    parameter, but where those two units sit in a pass is not modelled. The
    worksheet lists the same size per unit.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> unit_params(m, ParallelPlan(tp=1)) - m.layer_params()  # the two end units
    32833664
    """
    stage = padded_shard_size(m.num_params(), plan.tp * plan.pp)
    return stage // padded_shard_size(m.layers, plan.pp)


def fsdp(
    layer_params: int,
    cluster: Cluster,
    group: list[int],
    *,
    microbatches: int,
    pipelined: bool,
    grad_bytes: int,
    gather_bytes: int = BF16,
) -> FSDPTraffic:
    """FSDP2 as torchtitan runs it, over the dp·cp group (its ``dp_shard_cp`` mesh).

    Without a pipeline each micro-batch gathers every layer's *gather_bytes* parameters
    forward and again backward and reduce-scatters its gradients (*grad_bytes* each),
    behind the layer's compute; the first layer's gather waits. Under a pipeline
    torchtitan keeps the parameters unsharded after forward (``fsdp.py:124-132``,
    ``reshard_after_forward`` off with PP, at b5bcd76) and ``torch.distributed.pipelining``
    (PyTorch 2.13, ``stage.py:844-847, 1173-1177``) turns off gradient sync and resharding
    after backward for every micro-batch, then reduce-scatters the accumulated gradients
    once after the last backward: one gather per layer per step, in the first
    micro-batch's forward, and the stage's reduce-scatters after all the compute.
    """
    ag = seconds("all_gather", layer_params * gather_bytes, cluster, group)
    rs = seconds("reduce_scatter", layer_params * grad_bytes, cluster, group)
    if pipelined:
        return FSDPTraffic((ag, 0.0), (0.0, 0.0), ag, rs)
    return FSDPTraffic((ag, ag + rs), (ag, ag + rs), microbatches * ag)


def data_parallel(
    local_params: float,
    cluster: Cluster,
    group: list[int],
    *,
    zero_stage: int,
    free: tuple[float, float],
    overlap_grad_reduce: bool,
    grad_bytes: int,
    gather_bytes: int = BF16,
) -> tuple[float, float]:
    """(exposed, hidden) seconds of Megatron-Core DDP's gradient reduction and, with the
    distributed optimizer, its parameter gather, over the dp·cp group (``dp_cp_group``,
    ``distributed_data_parallel.py:148`` at d98e8a6).

    With *overlap_grad_reduce* the reduction runs in the stream time the last
    micro-batch's backward leaves *free* (``free[1]``), all but the last bucket; ZeRO
    stages 1-2 gather the parameters in the free time of the next forward (``free[0]``)
    the same way. Otherwise the whole reduction (and gather) waits for the last backward.
    """
    if len(group) < 2:
        return 0.0, 0.0
    op = "all_reduce" if zero_stage == 0 else "reduce_scatter"
    grads = seconds(op, int(local_params * grad_bytes), cluster, group)
    gather = seconds("all_gather", int(local_params * gather_bytes), cluster, group)
    gather = gather if zero_stage else 0.0
    if not overlap_grad_reduce:
        return grads + gather, 0.0
    last = min(1.0, max(DP_BUCKET_PARAMS, 10**6 * len(group)) / local_params)
    exposed = hidden(grads, free[1], last) + hidden(gather, free[0], last)
    return exposed, grads + gather - exposed
