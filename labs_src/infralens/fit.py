"""Will it fit: the bytes one GPU holds for a dense model under a parallel plan and a recipe.

The busiest GPU is on the first or the last pipeline stage. Each holds its
share of parameters (``L/p`` layers, each split t ways, plus the embedding
on the first stage or the output layer on the last) times the recipe's
bytes per parameter; FSDP2 adds its gathered root and two gathered layers,
and the unsharded gradients and reduce-scatter inputs of backward
(:func:`infralens.fsdp_memory.gradient_buffer_peak`).
With 1F1B the first stage keeps p micro-batches of activations for its
``L/p`` layers (Narayanan et al. 2021), the last stage one, plus the fp32
logits.

>>> from infralens.plan import ParallelPlan
>>> job = dict(seq_len=8192, micro_batch_size=1, recompute="full", sequence_parallel=True)
>>> b = gpu_memory("llama3-70b", ParallelPlan(tp=8, pp=4, dp=2), "megatron-bf16", **job)
>>> round(b.total / 10**9, 1), fits(b, "h100-sxm5-80gb")
(42.2, True)

Fixed costs that no formula here counts (the CUDA context, NCCL's buffers,
the caching allocator's fragmentation) come on top; see the handbook's
memory section.
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, divisible
from infralens.fsdp import Unit
from infralens.fsdp_memory import gradient_buffer_peak
from infralens.hardware import GPUS
from infralens.memory import _model, activation_bytes, bytes_per_parameter, logits_bytes
from infralens.model import TransformerConfig
from infralens.plan import ParallelPlan

__all__ = ["HBM_BYTES", "Breakdown", "fits", "gpu_memory", "render", "shortfall"]

HBM_BYTES: dict[str, int] = {key: gpu.hbm_bytes for key, gpu in GPUS.items()}
"""HBM per GPU, by :data:`infralens.hardware.GPUS` key (datasheet GB, 10**9 bytes)."""


@dataclass(frozen=True)
class Breakdown:
    """Bytes on the busiest GPU, by what holds them."""

    stage: str
    model_states: int
    gathered: int
    activations: int
    logits: int
    grad_buffers: int = 0

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def total(self) -> int:
        """All five components, in bytes."""
        return (
            self.model_states + self.gathered + self.activations + self.logits + self.grad_buffers
        )


def _stage(
    m: TransformerConfig, plan: ParallelPlan, recipe: str, first: bool, act_layer: int, logits: int
) -> Breakdown:
    t, p = plan.tp, plan.pp
    layers = m.layers // p
    params = layers * m.layer_params() // t
    head = m.output_params() + m.norm_params()  # the output layer and the final norm
    edge = (m.embedding_params() if first or p == 1 else 0) + (head if not first or p == 1 else 0)
    params += edge // t
    # model states = bytes per parameter (d = dp) × parameters this GPU owns
    states = bytes_per_parameter(recipe, dp_size=plan.dp) * params
    gathered = 2 * (edge // t + 2 * m.layer_params() // t) if recipe == "fsdp2" else 0
    buffers = 0
    if recipe == "fsdp2":  # parameters as flat 1-D shapes: per-parameter padding left out
        ends = [
            (m.embedding_params() if first or p == 1 else 0) // t,
            (head if not first or p == 1 else 0) // t,
        ]
        root = Unit("root", tuple((n,) for n in ends))
        unit = Unit("layer", ((m.layer_params() // t,),))
        buffers = gradient_buffer_peak(root, [unit] * layers, plan.dp, head_params=1)
    in_flight = p if first else 1  # 1F1B: the first stage holds p micro-batches' activations
    return Breakdown(
        stage="first" if first else "last",
        model_states=-(-states.numerator // states.denominator),
        gathered=gathered,
        activations=layers * act_layer * in_flight,
        logits=logits if (not first or p == 1) else 0,
        grad_buffers=buffers,
    )


def gpu_memory(
    model: TransformerConfig | str,
    plan: ParallelPlan,
    recipe: str,
    *,
    seq_len: int,
    micro_batch_size: int,
    recompute: str = "none",
    sequence_parallel: bool = False,
    attention: str = "flash",
    stack: str = "megatron",
) -> Breakdown:
    """The :class:`Breakdown` of the busier of the first and last pipeline stages.

    model states = recipe bytes per parameter (d = ``plan.dp``) × parameters on the GPU
    activations  = ``activation_bytes`` × L/p layers × micro-batches in flight (p first, 1 last)
    logits       = ``logits_bytes`` on the last stage

    >>> from infralens.plan import ParallelPlan
    >>> b = gpu_memory("llama3-8b", ParallelPlan(dp=8), "fsdp2", seq_len=8192, micro_batch_size=1)
    >>> b.stage, round(b.model_states / 10**9, 2), round(b.gathered / 10**9, 2)
    ('first', 16.06, 2.97)
    >>> round(b.grad_buffers / 10**9, 2)      # the root's 2-byte gradients and 4-byte RS input
    6.3
    >>> gpu_memory("llama3-8b", ParallelPlan(pp=3), "ddp", seq_len=8, micro_batch_size=1)
    Traceback (most recent call last):
    ...
    ValueError: layers must be divisible by pp: 32 % 3 = 2

    *stack* chooses whose activation count applies (see
    :func:`infralens.memory.activation_bytes`).

    Raises ``ValueError`` for an unknown model, recipe, recompute,
    attention or stack, or degrees that do not divide the model (layers by pp; heads,
    kv_heads and ffn_hidden by tp).
    """
    m = _model(model)
    if not isinstance(plan, ParallelPlan):
        raise TypeError(f"plan must be a ParallelPlan, got {type(plan).__name__}")
    divisible("layers", m.layers, "pp", plan.pp)
    act = activation_bytes(
        m,
        seq_len=seq_len,
        micro_batch_size=micro_batch_size,
        tp=plan.tp,
        sequence_parallel=sequence_parallel,
        recompute=recompute,
        attention=attention,
        stack=stack,
    )
    logits = logits_bytes(m, seq_len=seq_len, micro_batch_size=micro_batch_size, tp=plan.tp)
    first = _stage(m, plan, recipe, True, act, logits)
    last = _stage(m, plan, recipe, False, act, logits)
    return first if first.total >= last.total else last


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
    >>> print(render(Breakdown("last", 70 * gb, 0, 6 * gb, 5 * gb), 80 * gb, "h100-sxm5-80gb"))
    busiest GPU: last pipeline stage
      model states           70.00 GB
      FSDP2 gathered units    0.00 GB
      activations             6.00 GB
      fp32 logits             5.00 GB
      FSDP2 grad buffers      0.00 GB
      total                  81.00 GB of 80.00 GB (h100-sxm5-80gb): does not fit by 1.00 GB
    not counted: CUDA context, NCCL buffers, allocator fragmentation
    """
    rows = [
        ("model states", breakdown.model_states),
        ("FSDP2 gathered units", breakdown.gathered),
        ("activations", breakdown.activations),
        ("fp32 logits", breakdown.logits),
        ("FSDP2 grad buffers", breakdown.grad_buffers),
    ]
    over = breakdown.total - capacity_bytes
    verdict = (
        f"does not fit by {over / 10**9:.2f} GB"
        if over > 0
        else (f"fits, {-over / 10**9:.2f} GB spare")
    )
    lines = [f"busiest GPU: {breakdown.stage} pipeline stage"]
    lines += [f"  {name:20} {value / 10**9:7.2f} GB" for name, value in rows]
    lines.append(
        f"  {'total':20} {breakdown.total / 10**9:7.2f} GB of {capacity_bytes / 10**9:.2f} GB"
        f" ({capacity_name}): {verdict}"
    )
    lines.append("not counted: CUDA context, NCCL buffers, allocator fragmentation")
    return "\n".join(lines)
