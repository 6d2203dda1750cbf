"""Mixed-precision recipes: which copies of each parameter a training stack keeps, and their dtypes.

The presets below are :class:`~infralens.recipe.Recipe` values, one per framework
as people run it, each citing the source lines it follows. A recipe is the set
of per-parameter buffers one framework allocates for Adam training, each with
its element size and whether the data-parallel ranks shard it;
:func:`recipe_bytes` sums them for one GPU:

    bytes = Σ replicated buffers + Σ sharded buffers / d

>>> from infralens.precision import RECIPES, recipe_bytes
>>> for name in ("zero-paper", "megatron-bf16", "ddp"):
...     print(name, recipe_bytes(name))
zero-paper 16
megatron-bf16 18
ddp 20
>>> recipe_bytes("megatron-bf16-distopt", dp_size=8)      # 6 + 12/8
Fraction(15, 2)

Beyond the bytes, a recipe says how its framework runs the step: the ZeRO stage
whose collectives it runs, its precision, its loss and element-wise kernels.
NVIDIA's Llama 3 recipe reduces gradients in bf16 (4 + 12/d bytes); its FP8
variant keeps the parameter in fp8 with Transformer Engine's fp8 transpose:

>>> names = ("megatron-core-bf16", "megatron-core-fp8", "torchtitan-float8-compile")
>>> for n in names:
...     print(n, recipe_bytes(n, dp_size=8), RECIPES[n].precision)
megatron-core-bf16 11/2 bf16
megatron-core-fp8 11/2 fp8
torchtitan-float8-compile 2 fp8
>>> DEFAULT_RECIPE, RECIPES[DEFAULT_RECIPE].zero_stage
('megatron-bf16-distopt', 1)

DeepSpeed's bf16 ZeRO-1, -2 and -3 keep 2 + 2 + 12/d, 2 + 14/d and 16/d bytes, and
fixed bytes besides: a gradient bucket, and under ZeRO-3 the gathered parameters:

>>> [(recipe_bytes(n, dp_size=8), RECIPES[n].fixed_bytes // 10**9)
...  for n in ("deepspeed-zero1-bf16", "deepspeed-zero2-bf16", "deepspeed-zero3-bf16")]
[(Fraction(11, 2), 1), (Fraction(15, 4), 1), (Fraction(2, 1), 3)]

Persistent state only: FSDP2's unsharded root, all-gathered units and
backward's gradient buffers, and activations, are counted elsewhere
(:mod:`infralens.fsdp_memory`, :mod:`infralens.memory`).
"""

from __future__ import annotations

from fractions import Fraction

from infralens import _deepspeed as deepspeed
from infralens._validate import check_choice, positive_int
from infralens.recipe import Buffer, Recipe, recipe_bytes_of

__all__ = [
    "DEFAULT_RECIPE",
    "RECIPES",
    "recipe_bytes",
]

MEGATRON = "NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553"
TORCH = "PyTorch 2.13.0"
NVIDIA_LLAMA = "examples/llama/train_llama3_8b_h100_fp8.sh"


def _adam(sharded: bool, master: bool = True) -> tuple[Buffer, ...]:
    """fp32 master weights (when the parameter itself is not fp32), Adam momentum
    and variance."""
    out = (Buffer("fp32 master weights", 4, sharded),) if master else ()
    moments = (
        Buffer("fp32 Adam momentum", 4, sharded),
        Buffer("fp32 Adam variance", 4, sharded),
    )
    return out + moments


def _zero_paper(stage: int) -> Recipe:
    """The ZeRO paper's 2Ψ + 2Ψ + 12Ψ, its stage sharding the optimizer, gradients, parameters."""
    name = "zero-paper" if stage == 0 else f"zero-paper-{stage}"
    what = "no sharding" if stage == 0 else f"ZeRO-{stage}"
    return Recipe(
        name,
        f"ZeRO paper (Rajbhandari et al. 2020), fp16 mixed-precision Adam, {what}",
        "arXiv 1910.02054, Section 3.1: 2Ψ + 2Ψ + KΨ with K = 12; Section 5 (stages)",
        (
            Buffer("fp16 parameters", 2, stage >= 3),
            Buffer("fp16 gradients", 2, stage >= 2),
            *_adam(stage >= 1),
        ),
        zero_stage=stage,
    )


def _torchtitan(float8: bool, compile_: bool) -> Recipe:
    """torchtitan's FSDP2 recipe: fp32 sharded state, bf16 compute, eager fp32 loss."""
    what = ("Float8 linears (torchao), " if float8 else "") + (
        "torch.compile per block" if compile_ else "no compile"
    )
    return Recipe(
        f"torchtitan-{'float8' if float8 else 'bf16'}{'-compile' if compile_ else ''}",
        f"torchtitan FSDP2, bf16 parameters / fp32 reduce, {what}, {TORCH}",
        "torchtitan train_configs (mixed_precision_param bfloat16, mixed_precision_reduce"
        " float32, loss cross_entropy on logits.float()); state as in fsdp2",
        (
            Buffer("fp32 sharded parameters", 4, True),
            Buffer("fp32 sharded gradients", 4, True),
            *_adam(True, master=False),
        ),
        precision="fp8" if float8 else "bf16",
        scaling="current" if float8 else "none",
        zero_stage=3,
        stack="pytorch",
        loss="eager",
        elementwise="fused" if compile_ else "eager",
    )


def _deepspeed(stage: int) -> Recipe:
    """DeepSpeed's bf16 ZeRO-*stage* with Adam; activations, loss and kernels are the model's."""
    return Recipe(
        f"deepspeed-zero{stage}-bf16",
        f"DeepSpeed ZeRO-{stage}, bf16 with grad_accum_dtype unset, Adam, {deepspeed.FRAMEWORK}",
        deepspeed.SOURCES[stage],
        (*(Buffer(*b) for b in deepspeed.BUFFERS[stage]), *_adam(True)),
        zero_stage=stage,
        grad_reduce_in_fp32=False,
        fixed_bytes=deepspeed.fixed_bytes(stage),
    )


_RECIPE_LIST = (
    _zero_paper(0),
    Recipe(
        "megatron-bf16",
        f"Megatron-Core bf16, {MEGATRON}",
        "megatron/training/arguments.py:1204-1216 (bf16 sets accumulate_allreduce_grads_in_fp32);"
        " docs/user-guide/features/dist_optimizer.md:14-20 (18 bytes)",
        (
            Buffer("bf16 parameters", 2, False),
            Buffer("fp32 main_grad", 4, False),
            *_adam(False),
        ),
    ),
    # [start:megatron-distopt]
    Recipe(
        "megatron-bf16-distopt",
        f"Megatron-Core bf16 with --use-distributed-optimizer, {MEGATRON}",
        "docs/user-guide/features/dist_optimizer.md:14-20 (6 + 12/d)",
        (
            Buffer("bf16 parameters", 2, False),
            Buffer("fp32 main_grad", 4, False),
            *_adam(True),
        ),
        zero_stage=1,
    ),
    # [end:megatron-distopt]
    Recipe(
        "megatron-fp8-distopt",
        "Megatron-Core FP8 with --fp8-param-gather and the distributed optimizer, "
        f"{MEGATRON}",
        "megatron/training/arguments.py:2016-2018 (compute parameter kept in fp8);"
        " the fp32 main_grad and sharded fp32 master/Adam state as in"
        " megatron-bf16-distopt",
        (
            Buffer("fp8 parameters", 1, False),
            Buffer("fp32 main_grad", 4, False),
            *_adam(True),
        ),
        precision="fp8",
        zero_stage=1,
        gather_bytes=1,
        scaling="delayed",
        amax_history=1,
    ),
    Recipe(
        "megatron-core-bf16",
        f"Megatron-Core bf16 as NVIDIA's Llama 3 recipe sets it, {MEGATRON}",
        f"{NVIDIA_LLAMA}:95-97 (--bf16 --grad-reduce-in-bf16 --cross-entropy-loss-fusion),"
        " 126-128 (--use-distributed-optimizer, overlapped grad reduce and param gather)",
        (
            Buffer("bf16 parameters", 2, False),
            Buffer("bf16 main_grad", 2, False),
            *_adam(True),
        ),
        zero_stage=1,
        grad_reduce_in_fp32=False,
    ),
    Recipe(
        "megatron-core-fp8",
        f"Megatron-Core FP8 (hybrid, delayed scaling) as NVIDIA's Llama 3 recipe sets it,"
        f" {MEGATRON}",
        f"{NVIDIA_LLAMA}:95-97, 108-111 (--fp8-format hybrid, --fp8-amax-history-len 1024,"
        " --fp8-param-gather: the parameter kept in fp8, with Transformer Engine's fp8"
        " transpose for the backward GEMMs), 126-128",
        (
            Buffer("fp8 parameters", 1, False),
            Buffer("fp8 parameter transposes", 1, False),
            Buffer("bf16 main_grad", 2, False),
            *_adam(True),
        ),
        precision="fp8",
        zero_stage=1,
        grad_reduce_in_fp32=False,
        gather_bytes=1,
        scaling="delayed",
        amax_history=1024,
    ),
    Recipe(
        "megatron-core-mxfp8",
        f"Megatron-Core MXFP8 (Blackwell), Llama 3 recipe otherwise, {MEGATRON}",
        "megatron/core/transformer/transformer_config.py:594-599 (--fp8-recipe mxfp8);"
        " Transformer Engine linear.py:1887-1899 at d0067d0 (is_first_microbatch caches the"
        " quantised weight, row- and column-wise, for the step's micro-batches)",
        (
            Buffer("bf16 parameters", 2, False),
            Buffer("cached MXFP8 weights and transposes", 2, False),
            Buffer("bf16 main_grad", 2, False),
            *_adam(True),
        ),
        precision="fp8",
        zero_stage=1,
        grad_reduce_in_fp32=False,
        scaling="mxfp8",
    ),
    Recipe(
        "fsdp2",
        "FSDP2 fully_shard, MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), "
        + TORCH,
        "torch/distributed/fsdp/_fully_shard/_fsdp_api.py:14-54 (optimizer steps the sharded"
        " parameter in its original dtype, fp32); sharded fp32 gradients and Adam state",
        (
            Buffer("fp32 sharded parameters", 4, True),
            Buffer("fp32 sharded gradients", 4, True),
            *_adam(True, master=False),
        ),
        zero_stage=3,
        stack="pytorch",
        loss="eager",
    ),
    _torchtitan(False, False),
    _torchtitan(False, True),
    _torchtitan(True, False),
    _torchtitan(True, True),
    _zero_paper(1),
    _zero_paper(2),
    _zero_paper(3),
    *(_deepspeed(stage) for stage in (1, 2, 3)),
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

DEFAULT_RECIPE = "megatron-bf16-distopt"
"""The recipe every planner function and command assumes unless told otherwise: Megatron-Core
with its distributed optimizer (ZeRO-1) and its default fp32 gradient reduction."""


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
    >>> recipe_bytes("apex-o2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: recipe must be one of 'zero-paper', 'megatron-bf16', ... got 'apex-o2'

    Raises ``ValueError`` for an unknown *recipe* or *dp_size* below 1.
    """
    name = check_choice("recipe", recipe, tuple(RECIPES))
    return recipe_bytes_of(RECIPES[name], positive_int("dp_size", dp_size))
