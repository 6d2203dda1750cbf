"""Will it fit: the bytes one GPU holds for a dense model under a parallel plan and a recipe.

:func:`gpu_memory` is the planner's one memory count: :func:`infralens.planner.step.estimate`,
:func:`infralens.planner.ranking.rank_plans`, the design worksheet and the ``plan``,
``memory`` and ``rank`` commands all call it, with the same
:class:`~infralens.recipe.Recipe` (default
:data:`~infralens.precision.DEFAULT_RECIPE`), so they cannot disagree.
Every pipeline stage holds its share of parameters (its layers, each split t
ways, plus the embedding on the first stage or the output layer on the last)
times the recipe's bytes per parameter, the sharded buffers split over the
dp·cp ranks, plus the recipe's fixed bytes (DeepSpeed's gradient bucket and
ZeRO-3 gathered parameters); FSDP2 adds its gathered root and two gathered
layers, and the unsharded gradients and reduce-scatter inputs of backward
(:func:`infralens.fsdp_memory.gradient_buffer_peak`); under a pipeline, as torchtitan
and ``torch.distributed.pipelining`` run it, the stage's parameters stay gathered all
step and its gradients accumulate unsharded in the reduce dtype until the
reduce-scatters after the last backward. Activations are one
layer's at s/cp tokens times the layers of the chunks Megatron-Core's schedule
keeps in flight (:func:`infralens.pipeline_memory.layers_in_flight`), plus, with
recomputation, what the layer whose backward runs has rebuilt; the last stage adds
what the final norm and the output layer save and the loss's fp32 logit-sized
tensors at its peak (:mod:`infralens.head_memory`). The busiest stage is reported.

>>> from infralens.plan import ParallelPlan
>>> from infralens.planner.job import Job
>>> from infralens.topology import Cluster
>>> c = Cluster.from_node_shape("8_nodes_x_8_gpus")
>>> b = gpu_memory(Job("llama3-70b", ParallelPlan(tp=8, pp=4, dp=2), c, seq_len=8192,
...                    global_batch_size=512, recipe="megatron-bf16", recompute="full"))
>>> round(b.total / 10**9, 1), fits(b, "h100-sxm5-80gb")
(42.5, True)

Fixed costs that no formula here counts (the CUDA context, NCCL's buffers,
the caching allocator's fragmentation) come on top; see the handbook's
memory section.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, divisible, positive_int
from infralens.fp8 import saved_activation_change, state_bytes
from infralens.fsdp import Unit
from infralens.fsdp_memory import gradient_buffer_peak
from infralens.hardware import GPUS, System, preset_key
from infralens.head_memory import head_activation_bytes, loss_peak_bytes
from infralens.memory import _model, activation_bytes
from infralens.model import TransformerConfig
from infralens.pipeline_memory import chunk_layers, layers_in_flight
from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.precision import DEFAULT_RECIPE, RECIPES
from infralens.recipe import Recipe, recipe_bytes_of

# A ranking asks for the same stages' walks thousands of times; a repeat was checked
# the first time it was asked.
_in_flight = functools.lru_cache(maxsize=1 << 12)(layers_in_flight)

__all__ = [
    "HBM_BYTES",
    "MEMORY_TERMS",
    "Breakdown",
    "fits",
    "gpu_memory",
    "hbm_for",
    "render",
    "shortfall",
]


MEMORY_TERMS = {
    "model_states": "model states",
    "gathered": "FSDP2 gathered units",
    "activations": "activations",
    "logits": "fp32 logits",
    "grad_buffers": "FSDP2 grad buffers",
}
"""How each component of :class:`Breakdown` is named where memory is printed."""

HBM_BYTES: dict[str, int] = {key: gpu.hbm_bytes for key, gpu in GPUS.items()}
"""HBM per GPU, by :data:`infralens.hardware.GPUS` key (datasheet GB, 10**9 bytes)."""


@typed
def hbm_for(system: System, gpu: str = "") -> tuple[int, str]:
    """The HBM a plan on *system* is judged against, and the preset that holds it.

    The preset is *gpu* when one is named (a plan file's ``training.gpu``), else the
    system's own GPU, the one ``rank`` prices and checks the plan on.

    >>> from infralens.hardware import SYSTEMS
    >>> hbm_for(SYSTEMS["dgx-h200"])
    (141000000000, 'h200-sxm-141gb')
    >>> hbm_for(SYSTEMS["grand-teton-h100-hbm2e"])[0] // 10**9
    96
    >>> hbm_for(SYSTEMS["dgx-h200"], "h100-sxm5-80gb")[0] // 10**9
    80
    >>> hbm_for(SYSTEMS["dgx-h100"], "h300")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of 'a100-sxm4-80gb', 'h100-sxm5-80gb', ...; got 'h300'
    """
    key = (
        check_choice("gpu", gpu, tuple(HBM_BYTES))
        if gpu
        else preset_key(system.gpu)
    )
    return HBM_BYTES[key], key


@dataclass(frozen=True)
class Breakdown:
    """Bytes on the busiest GPU, by what holds them, and the recipe they were counted for."""

    stage: str
    model_states: int
    gathered: int
    activations: int
    logits: int
    grad_buffers: int = 0
    recipe: str = ""

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def total(self) -> int:
        """All five components, in bytes."""
        return (
            self.model_states
            + self.gathered
            + self.activations
            + self.logits
            + self.grad_buffers
        )


def _recipe(recipe: str | Recipe) -> Recipe:
    if isinstance(recipe, Recipe):
        return recipe
    if not isinstance(recipe, str):
        raise TypeError(
            f"recipe must be a str or Recipe, got {type(recipe).__name__}"
        )
    return RECIPES[check_choice("recipe", recipe, tuple(RECIPES))]


def _stage(
    m: TransformerConfig,
    plan: ParallelPlan,
    r: Recipe,
    rank: int,
    layers: int,
    layer_units: int,
    act_layer: int,
    logits: int,
) -> Breakdown:
    # [start:stage-model-states]
    t, p = plan.tp, plan.pp
    first, last = rank == 0, rank == p - 1
    params = layers * m.layer_params() // t
    head = m.output_params() + m.norm_params()  # the output layer and final norm
    edge = (m.embedding_params() if first else 0) + (head if last else 0)
    params += edge // t
    # model states = bytes per parameter (d = dp·cp) × parameters this GPU owns
    # + fixed bytes
    states = recipe_bytes_of(r, plan.dp * plan.cp) * params
    if r.precision == "fp8":  # amax history, MXFP8 scales of cached weight copies
        states += state_bytes(
            m, scaling=r.scaling, amax_history=r.amax_history, tp=t, layers=layers
        )
    # [end:stage-model-states]
    fsdp = r.zero_stage == 3 and r.stack == "pytorch"
    gathered = (
        r.gather_bytes * (edge // t + 2 * m.layer_params() // t) if fsdp else 0
    )
    buffers = 0
    if fsdp and p > 1:  # torchtitan under a pipeline: unsharded all step
        # parameters kept after forward; gradients accumulated unsharded in the reduce
        # dtype until the reduce-scatters after the last backward, one unit at a time
        grad = 4 if r.grad_reduce_in_fp32 else 2
        gathered = r.gather_bytes * params
        buffers = grad * (params + m.layer_params() // t)
    elif fsdp:  # parameters as flat 1-D shapes: per-parameter padding left out
        ends = [
            (m.embedding_params() if first else 0) // t,
            (head if last else 0) // t,
        ]
        root = Unit("root", tuple((n,) for n in ends))
        unit = Unit("layer", ((m.layer_params() // t,),))
        buffers = gradient_buffer_peak(
            root, [unit] * layers, plan.dp * plan.cp, head_params=1
        )
    # [start:stage-breakdown]
    name = "first" if first else "last" if last else f"stage {rank}"
    return Breakdown(
        stage=name,
        model_states=-(-states.numerator // states.denominator) + r.fixed_bytes,
        gathered=gathered,
        activations=layer_units * act_layer,
        logits=logits if last else 0,
        grad_buffers=buffers,
        recipe=r.name,
    )
    # [end:stage-breakdown]


def gpu_memory(job: Job, *, stack: str | None = None) -> Breakdown:
    """The :class:`Breakdown` of *job*'s busiest pipeline stage: the planner's one count.

    model states = recipe bytes per parameter (over dp·cp) × parameters on the GPU + fixed bytes
    activations  = ``activation_bytes`` at s/cp × layers in flight + one rebuilt layer
    head         = ``head_activation_bytes`` at s/cp on the last stage, in activations
    logits       = ``loss_peak_bytes`` at s/cp on the last stage (1, 3 or 4 fp32 copies)

    The rebuilt layer is the one whose backward runs: what it saves without
    recomputation less what the policy kept (0 without recomputation). The layers in
    flight follow Megatron-Core's schedule over each stage's chunks
    (:func:`infralens.pipeline_memory.layers_in_flight`, at most the job's
    micro-batches × chunks), the layers per chunk
    :func:`infralens.pipeline_memory.chunk_layers`: *first_stage_layers* /
    *last_stage_layers*, or *account_for_embedding* / *account_for_loss*
    (``--account-for-embedding-in-pipeline-split``, ``-loss-``: a layer fewer on the
    first / last stage, taken from its first / last chunk).

    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> node = Cluster.from_node_shape("1_node_x_8_gpus")
    >>> b = gpu_memory(Job("llama3-8b", ParallelPlan(dp=8), node, seq_len=8192,
    ...                    global_batch_size=8, recipe="fsdp2", recompute="none"))
    >>> b.stage, round(b.model_states / 10**9, 2), round(b.gathered / 10**9, 2)
    ('first', 16.06, 2.97)
    >>> round(b.grad_buffers / 10**9, 2)   # root: 2-byte gradients, 4-byte RS input
    6.3
    >>> gpu_memory(Job("llama3-8b", ParallelPlan(pp=3), Cluster.from_node_shape(
    ...     "1_node_x_3_gpus"), seq_len=8, global_batch_size=3, recipe="ddp"))
    Traceback (most recent call last):
    ...
    ValueError: layers must be divisible by pp * chunks: 32 % 3 = 2

    *stack* chooses whose activation count applies (see
    :func:`infralens.memory.activation_bytes`; default the recipe's; PyTorch's selective
    count exists for tp = 1 only, so with tp > 1 its selective count is PyTorch's
    ``none`` less what Megatron's selective recomputes: every *recompute* mode is
    counted on one stack, and full <= selective <= none).

    Raises ``ValueError`` for an unknown model, recipe, recompute, attention or stack,
    ``ep`` above 1, degrees that do not divide the model (layers by pp·chunks per stage;
    heads, kv_heads and ffn_hidden by tp; the sequence by cp, and by tp with sequence
    parallelism), or first/last stage layers Megatron-Core would refuse; ``TypeError``
    for a flag not a bool.
    """
    if not isinstance(job, Job):
        raise TypeError(f"job must be a Job, got {type(job).__name__}")
    kernel = "materialized" if job.attention == "materialized" else "flash"
    return _gpu_memory(
        job.model, job.plan, job.resolved_recipe(), seq_len=job.seq_len,
        micro_batch_size=job.micro_batch_size, recompute=job.recompute,
        sequence_parallel=job.sequence_parallel and job.plan.tp > 1, attention=kernel,
        stack=stack, microbatches=job.microbatches, chunks=job.chunks,
        first_stage_layers=job.first_stage_layers, last_stage_layers=job.last_stage_layers,
        account_for_embedding=job.account_for_embedding,
        account_for_loss=job.account_for_loss,
    )  # fmt: skip


def _gpu_memory(
    model: TransformerConfig | str,
    plan: ParallelPlan,
    recipe: str | Recipe = DEFAULT_RECIPE,
    *,
    seq_len: int,
    micro_batch_size: int,
    recompute: str = "none",
    sequence_parallel: bool = False,
    attention: str = "flash",
    stack: str | None = None,
    microbatches: int | None = None,
    chunks: int = 1,
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    account_for_embedding: bool = False,
    account_for_loss: bool = False,
) -> Breakdown:
    """:func:`gpu_memory`'s body, with the job as keywords (the step's memory check)."""
    m = _model(model)
    if not isinstance(plan, ParallelPlan):
        raise TypeError(f"plan must be a ParallelPlan, got {type(plan).__name__}")
    r = _recipe(recipe)
    if plan.ep != 1:
        raise ValueError(
            f"ep must be 1: the memory count is for dense models, got {plan.ep}"
        )
    s = positive_int("seq_len", seq_len)
    divisible("seq_len", s, "cp", plan.cp)
    v = positive_int("chunks", chunks)
    split = chunk_layers(m.layers, plan.pp, chunks=v, first=first_stage_layers,
                         last=last_stage_layers, embedding=account_for_embedding,
                         loss=account_for_loss)  # fmt: skip
    who = r.stack if stack is None else stack
    sl, b = s // plan.cp, micro_batch_size

    def saved(mode: str, on: str = who) -> int:
        """One layer's saved bytes under *mode* on stack *on*, FP8 inputs counted."""
        if on == "pytorch" and mode == "selective" and plan.tp > 1:
            # PyTorch's selective count exists for tp = 1 only: with tp > 1, what
            # PyTorch saves less what Megatron's selective recomputes (core
            # attention), so every mode is counted on one stack and
            # full <= selective <= none
            dropped = saved("none", "megatron") - saved("selective", "megatron")
            return saved("none") - dropped
        kept = activation_bytes(m, seq_len=sl, micro_batch_size=b, tp=plan.tp, stack=on,
                                sequence_parallel=sequence_parallel, recompute=mode,
                                attention=attention)  # fmt: skip
        if (
            r.precision == "fp8"
        ):  # Transformer Engine saves the linears' inputs in FP8
            kept += saved_activation_change(m, seq_len=sl, micro_batch_size=b, tp=plan.tp,
                                            scaling=r.scaling, stack=on, recompute=mode,
                                            sequence_parallel=sequence_parallel)  # fmt: skip
        return kept

    act = saved(recompute)
    # the layer whose backward runs also holds what recomputation rebuilt: what it saves
    # without recomputation, less what the policy kept
    working = saved("none") - act
    logits = loss_peak_bytes(
        m, seq_len=sl, micro_batch_size=b, tp=plan.tp, loss=r.loss
    )
    head = head_activation_bytes(m, seq_len=sl, micro_batch_size=b, tp=plan.tp, stack=who,
                                 sequence_parallel=sequence_parallel)  # fmt: skip
    # Stages with the same chunks and ends differ only in the layers they keep in
    # flight, so only the earliest with the most of them can be the busiest.
    most: dict[tuple[object, ...], tuple[int, int]] = {}
    for i, chunk in enumerate(split):  # activations: layers of the chunks in flight
        units = _in_flight(i, plan.pp, tuple(chunk), microbatches=microbatches)
        key = (tuple(chunk), i == 0, i == plan.pp - 1)
        if key not in most or units > most[key][1]:
            most[key] = (i, units)
    stages = []
    for i, units in sorted(most.values()):
        stage = _stage(m, plan, r, i, sum(split[i]), units, act, logits)
        held = working + (
            head if i == plan.pp - 1 else 0
        )  # the last stage keeps the head's
        stages.append(replace(stage, activations=stage.activations + held))
    return max(stages, key=lambda b: b.total)


@typed
def fits(breakdown: Breakdown, gpu: str) -> bool:
    """Whether *breakdown* fits the HBM of preset *gpu* (before fixed overheads).

    >>> fits(Breakdown("first", 80 * 10**9, 0, 0, 0), "h100-sxm5-80gb")
    True
    >>> fits(Breakdown("first", 1, 0, 0, 0), "h200")
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of 'a100-sxm4-80gb', 'h100-sxm5-80gb', ...; got 'h200'
    """
    return shortfall(breakdown, gpu) <= 0


@typed
def shortfall(breakdown: Breakdown, gpu: str) -> int:
    """Bytes by which *breakdown* exceeds the HBM of *gpu*; negative when it fits.

    >>> shortfall(Breakdown("last", 81 * 10**9, 0, 0, 0), "h100-sxm5-80gb")
    1000000000
    """
    return breakdown.total - HBM_BYTES[check_choice("gpu", gpu, tuple(HBM_BYTES))]


@typed
def render(breakdown: Breakdown, capacity_bytes: int, capacity_name: str) -> str:
    """The breakdown as text, with the verdict against *capacity_bytes* (GB = 10**9 bytes).

    >>> gb = 10**9
    >>> print(render(Breakdown("last", 70 * gb, 0, 6 * gb, 5 * gb), 80 * gb, "H100"))
    busiest GPU: last pipeline stage
      model states           70.00 GB
      FSDP2 gathered units    0.00 GB
      activations             6.00 GB
      fp32 logits             5.00 GB
      FSDP2 grad buffers      0.00 GB
      total                  81.00 GB of 80.00 GB (H100): does not fit by 1.00 GB
    not counted: CUDA context, NCCL buffers, allocator fragmentation
    """
    rows = [(name, getattr(breakdown, key)) for key, name in MEMORY_TERMS.items()]
    over = breakdown.total - capacity_bytes
    verdict = (
        f"does not fit by {over / 10**9:.2f} GB"
        if over > 0
        else (f"fits, {-over / 10**9:.2f} GB spare")
    )
    lines = [f"busiest GPU: {breakdown.stage} pipeline stage"]
    if breakdown.recipe:
        lines[0] += f", recipe {breakdown.recipe}"
    lines += [f"  {name:20} {value / 10**9:7.2f} GB" for name, value in rows]
    lines.append(
        f"  {'total':20} {breakdown.total / 10**9:7.2f} GB of {capacity_bytes / 10**9:.2f} GB"
        f" ({capacity_name}): {verdict}"
    )
    lines.append("not counted: CUDA context, NCCL buffers, allocator fragmentation")
    return "\n".join(lines)
