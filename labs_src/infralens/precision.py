"""Mixed-precision recipes: which copies of each parameter a training stack keeps, and their dtypes.

A recipe is the set of per-parameter buffers one framework allocates for
Adam training, each with its element size and whether the data-parallel
ranks shard it. ``bytes_per_parameter`` sums them for one GPU:

    bytes = Σ replicated buffers + Σ sharded buffers / d

>>> from infralens.precision import RECIPES, recipe_bytes
>>> [(name, recipe_bytes(name)) for name in ("zero-paper", "megatron-bf16", "ddp")]
[('zero-paper', Fraction(16, 1)), ('megatron-bf16', Fraction(18, 1)), ('ddp', Fraction(20, 1))]
>>> recipe_bytes("megatron-bf16-distopt", dp_size=8)      # 6 + 12/8
Fraction(15, 2)

Persistent state only: FSDP2's unsharded root, all-gathered units and
backward's gradient buffers, and activations, are counted elsewhere
(:mod:`infralens.fsdp_memory`, :mod:`infralens.memory`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields
from infralens._validate import check_choice, positive_int

__all__ = ["RECIPES", "Buffer", "Recipe", "recipe_bytes"]

MEGATRON = "NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553"
TORCH = "PyTorch 2.13.0"


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
    """A named precision recipe: the framework and version it follows, its source, its buffers."""

    name: str
    framework: str
    source: str
    buffers: tuple[Buffer, ...]

    def __post_init__(self) -> None:
        check_fields(self)


def _adam(sharded: bool, master: bool = True) -> tuple[Buffer, ...]:
    """fp32 master weights (when the parameter itself is not fp32), Adam momentum and variance."""
    out = (Buffer("fp32 master weights", 4, sharded),) if master else ()
    moments = (Buffer("fp32 Adam momentum", 4, sharded), Buffer("fp32 Adam variance", 4, sharded))
    return out + moments


_RECIPE_LIST = (
    Recipe(
        "zero-paper",
        "ZeRO paper (Rajbhandari et al. 2020), fp16 mixed-precision Adam, no sharding",
        "arXiv 1910.02054, Section 3.1: 2Ψ + 2Ψ + KΨ with K = 12",
        (Buffer("fp16 parameters", 2, False), Buffer("fp16 gradients", 2, False), *_adam(False)),
    ),
    # [start:megatron-recipes]
    Recipe(
        "megatron-bf16",
        f"Megatron-Core bf16, {MEGATRON}",
        "megatron/training/arguments.py:1204-1216 (bf16 sets accumulate_allreduce_grads_in_fp32);"
        " docs/user-guide/features/dist_optimizer.md:14-20 (18 bytes)",
        (Buffer("bf16 parameters", 2, False), Buffer("fp32 main_grad", 4, False), *_adam(False)),
    ),
    Recipe(
        "megatron-bf16-distopt",
        f"Megatron-Core bf16 with --use-distributed-optimizer, {MEGATRON}",
        "docs/user-guide/features/dist_optimizer.md:14-20 (6 + 12/d)",
        (Buffer("bf16 parameters", 2, False), Buffer("fp32 main_grad", 4, False), *_adam(True)),
    ),
    Recipe(
        "megatron-fp8-distopt",
        f"Megatron-Core FP8 with --fp8-param-gather and the distributed optimizer, {MEGATRON}",
        "megatron/training/arguments.py:2016-2018 (compute parameter kept in fp8);"
        " the fp32 main_grad and sharded fp32 master/Adam state as in megatron-bf16-distopt",
        (Buffer("fp8 parameters", 1, False), Buffer("fp32 main_grad", 4, False), *_adam(True)),
    ),
    # [end:megatron-recipes]
    Recipe(
        "fsdp2",
        "FSDP2 fully_shard, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), " + TORCH,
        "torch/distributed/fsdp/_fully_shard/_fsdp_api.py:14-54 (optimizer steps the sharded"
        " parameter in its original dtype, fp32); sharded fp32 gradients and Adam state",
        (
            Buffer("fp32 sharded parameters", 4, True),
            Buffer("fp32 sharded gradients", 4, True),
            *_adam(True, master=False),
        ),
    ),
    Recipe(
        "ddp",
        f"DistributedDataParallel, fp32 parameters (autocast for bf16 compute), {TORCH}",
        "torch/nn/parallel/distributed.py:731-741 (gradient_as_bucket_view=False keeps a"
        " bucket copy of every gradient)",
        (
            Buffer("fp32 parameters", 4, False),
            Buffer("fp32 gradients", 4, False),
            Buffer("fp32 all-reduce buckets", 4, False),
            *_adam(False, master=False),
        ),
    ),
    Recipe(
        "ddp-bucket-view",
        f"DistributedDataParallel(gradient_as_bucket_view=True), fp32 parameters, {TORCH}",
        "torch/nn/parallel/distributed.py:731-741 (gradients are views into the buckets)",
        (
            Buffer("fp32 parameters", 4, False),
            Buffer("fp32 gradients in the buckets", 4, False),
            *_adam(False, master=False),
        ),
    ),
)

RECIPES: dict[str, Recipe] = {r.name: r for r in _RECIPE_LIST}
"""Recipes by name; each names the framework, version and source lines it follows."""


def recipe_bytes(recipe: str, *, dp_size: int = 1) -> Fraction:
    """Persistent model-state bytes per parameter on one GPU under *recipe*.

    Replicated buffers count in full, sharded ones divided by *dp_size*
    (``d``); padding to equal shards is ignored (see
    :func:`infralens.fsdp.unit_shard_numel` for the exact count).

    >>> recipe_bytes("fsdp2", dp_size=8)           # 16 bytes, all sharded
    Fraction(2, 1)
    >>> recipe_bytes("megatron-fp8-distopt", dp_size=1)
    Fraction(17, 1)
    >>> recipe_bytes("ddp-bucket-view")
    Fraction(16, 1)
    >>> recipe_bytes("apex-o2")
    Traceback (most recent call last):
    ...
    ValueError: recipe must be one of 'zero-paper', 'megatron-bf16', 'megatron-bf16-distopt', \
'megatron-fp8-distopt', 'fsdp2', 'ddp', 'ddp-bucket-view'; got 'apex-o2'

    Raises ``ValueError`` for an unknown *recipe* or *dp_size* below 1.
    """
    name = check_choice("recipe", recipe, tuple(RECIPES))
    d = positive_int("dp_size", dp_size)
    # [start:recipe-sum]
    # bytes per parameter = Σ replicated nbytes + Σ sharded nbytes / d
    return sum(
        (Fraction(b.nbytes, d if b.sharded else 1) for b in RECIPES[name].buffers),
        start=Fraction(0),
    )
    # [end:recipe-sum]
