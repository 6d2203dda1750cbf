"""A framework recipe as data: the per-parameter buffers it keeps and how it runs a step.

A :class:`Recipe` is a tuple of :class:`Buffer` values, each a copy of every
parameter (or its gradient, or optimizer state) with an element size and a flag
saying whether the data-parallel ranks shard it, plus the settings that change how
the step runs (ZeRO stage, precision, loss, element-wise kernels, FP8 scaling).
:func:`recipe_bytes_of` turns one into bytes per parameter:

    bytes = Σ replicated buffers + Σ sharded buffers / d

>>> r = Recipe("toy", "a framework", "its source", (Buffer("bf16 parameters", 2, False),
...            Buffer("fp32 Adam state", 12, True)))
>>> recipe_bytes_of(r, 4)
Fraction(5, 1)

The presets people run, each citing its source, are
:data:`infralens.precision.RECIPES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields
from infralens._validate import check_choice, nonnegative_int, positive_int

__all__ = ["PRECISIONS", "SCALINGS", "Buffer", "Recipe", "recipe_bytes_of"]

SCALINGS = ("delayed", "current", "mxfp8")
"""Transformer Engine's FP8 recipes an FP8 recipe names: ``DelayedScaling`` (scale from an
amax history), ``Float8CurrentScaling`` (torchao's dynamic tensor-wise scaling is the same)
and ``MXFP8BlockScaling`` (one E8M0 scale per 32 elements, Blackwell)."""

PRECISIONS = ("bf16", "fp8")
"""The GEMM precisions a recipe runs: BF16, or FP8 GEMMs with BF16 attention and element-wise."""


@dataclass(frozen=True)
class Buffer:
    """One per-parameter buffer: what it holds, bytes per element, and whether DP ranks shard it."""

    holds: str
    nbytes: int
    sharded: bool

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Recipe:
    """A named framework recipe: what it keeps per parameter and how it runs a step.

    ``buffers`` are the persistent per-parameter copies; a sharded one is divided over
    the data-parallel ranks times the context-parallel ones (Megatron-Core builds the
    distributed optimizer on its ``dp_cp`` group, torchtitan shards over ``dp_shard_cp``).
    ``zero_stage`` is the ZeRO stage whose collectives it runs, ``stack`` whose
    activation count applies (:data:`infralens.memory.STACKS`), ``gather_bytes`` the
    element size of FSDP's gathered parameters, ``loss`` ``"fused"`` (the fp32
    probabilities kept, gradients written in place) or ``"eager"`` (PyTorch's
    ``cross_entropy`` on fp32 logits: two more fp32 logit-sized tensors in its backward),
    ``elementwise`` the element-wise kernels (:data:`infralens.elementwise.ELEMENTWISE_KERNELS`),
    ``grad_reduce_in_fp32`` the gradient-reduction dtype and ``fixed_bytes`` what the
    framework holds whatever the model's size (DeepSpeed's gradient bucket and ZeRO-3's
    gathered parameters), which :func:`infralens.planner.fit.gpu_memory` adds to the model states.
    An FP8 recipe names its ``scaling`` (:data:`SCALINGS`) and, for delayed scaling, the
    ``amax_history`` length.
    """

    name: str
    framework: str
    source: str
    buffers: tuple[Buffer, ...]
    precision: str = "bf16"
    zero_stage: int = 0
    stack: str = "megatron"
    gather_bytes: int = 2
    loss: str = "fused"
    elementwise: str = "fused"
    grad_reduce_in_fp32: bool = True
    scaling: str = "none"
    amax_history: int = 0
    fixed_bytes: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        check_choice("precision", self.precision, PRECISIONS)
        fp8 = self.precision == "fp8"
        check_choice("scaling", self.scaling, SCALINGS if fp8 else ("none",))
        if self.amax_history < 0 or (
            self.amax_history and self.scaling != "delayed"
        ):
            raise ValueError(f"amax_history must be >= 0, and 0 unless scaling is 'delayed'; "
                             f"got {self.amax_history}")  # fmt: skip
        check_choice("stack", self.stack, ("megatron", "pytorch"))
        check_choice("loss", self.loss, ("fused", "eager"))
        check_choice("elementwise", self.elementwise, ("fused", "eager"))
        if self.zero_stage not in (0, 1, 2, 3):
            raise ValueError(
                f"zero_stage must be one of 0, 1, 2, 3; got {self.zero_stage}"
            )
        positive_int("gather_bytes", self.gather_bytes)
        nonnegative_int("fixed_bytes", self.fixed_bytes)


def recipe_bytes_of(recipe: Recipe, shards: int) -> Fraction:
    """Persistent bytes per parameter of *recipe* when its sharded buffers split *shards* ways.

    >>> nvidia = Recipe("nvidia", "Megatron-Core bf16", "its Llama 3 recipe", (
    ...     Buffer("bf16 parameters", 2, False), Buffer("bf16 main_grad", 2, False),
    ...     Buffer("fp32 master weights and Adam moments", 12, True)))
    >>> recipe_bytes_of(nvidia, 8)      # 2 + 2 + 12/8
    Fraction(11, 2)
    >>> recipe_bytes_of(nvidia, 0)
    Traceback (most recent call last):
    ...
    ValueError: shards must be >= 1, got 0

    Raises ``TypeError`` if *recipe* is not a :class:`Recipe`, ``ValueError`` for
    *shards* below 1.
    """
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    d = positive_int("shards", shards)
    # [start:recipe-sum]
    # bytes per parameter = Σ replicated nbytes + Σ sharded nbytes / d
    return sum(
        (Fraction(b.nbytes, d if b.sharded else 1) for b in recipe.buffers),
        start=Fraction(0),
    )
    # [end:recipe-sum]


def cannot_run(recipe: Recipe, *, pp: int, cp: int, schedule: str) -> str | None:
    """Why *recipe*'s framework cannot run a plan with *pp* stages, *cp* context ranks
    and pipeline *schedule*, or None when it can.

    DeepSpeed (and the ZeRO paper, whose implementation it is) runs a pipeline only in
    its ``PipelineEngine``, which asserts ZeRO stage < 2 (``runtime/pipe/engine.py``
    at :data:`infralens._deepspeed.COMMIT`, DeepSpeed 0.19.6) and has one schedule,
    1F1B (``TrainSchedule``); its
    sequence parallelism is DeepSpeed-Ulysses's all-to-all, not the ring attention a
    ``cp`` degree prices. Megatron-Core and torchtitan run every plan here.

    >>> from infralens.precision import RECIPES
    >>> cannot_run(RECIPES["deepspeed-zero3-bf16"], pp=4, cp=1, schedule="1f1b")
    'DeepSpeed runs a pipeline only with ZeRO stage 0 or 1'
    >>> cannot_run(RECIPES["deepspeed-zero1-bf16"], pp=1, cp=1, schedule="1f1b") is None
    True

    Raises ``TypeError`` if *recipe* is not a :class:`Recipe`, ``ValueError`` if *pp* or
    *cp* is below 1.
    """
    if not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a Recipe, got {type(recipe).__name__}")
    positive_int("pp", pp)
    positive_int("cp", cp)
    if not recipe.framework.startswith(("DeepSpeed", "ZeRO paper")):
        return None
    if pp > 1 and recipe.zero_stage >= 2:
        return "DeepSpeed runs a pipeline only with ZeRO stage 0 or 1"
    if pp > 1 and schedule != "1f1b":
        return "DeepSpeed's pipeline runs one schedule, 1F1B"
    if cp > 1:
        return (
            "DeepSpeed has no ring context parallelism (its Ulysses is all-to-all)"
        )
    return None
