"""Compute time of a training step: FLOPs, the matmul ceiling, MFU and HFU.

A training step's arithmetic is its matrix multiplications: the weight
GEMMs (2 FLOPs per parameter per token forward, twice that backward) and
the attention score and value products. This module counts them, divides
by what a GPU's tensor cores *actually* sustain on large BF16 matmuls, and
reports utilisation as PaLM (Chowdhery et al. 2022, Appendix B) defines it,
with the FLOP count of :func:`model_flops_per_token` (the step model passes
``causal=True``, Megatron-LM's count; :mod:`infralens.flop_conventions` has
the others):

    MFU = model FLOPs per second / dense peak      (no recomputation counted)
    HFU = hardware FLOPs per second / dense peak   (recomputation counted)

Two measured ceilings price the arithmetic, one per kind of kernel:

- weight GEMMs run at the *maximum achievable matmul FLOPS* measured with
  ``mamf-finder.py`` by Bekman (:data:`infralens.hardware.MAMF_BF16`): BF16
  271.2 TFLOP/s on an A100 SXM (86.9 % of 312), 794.5 on an H100 SXM (80.3 %
  of 989; "H200 is the same");
- attention runs at its kernel's published throughput
  (:mod:`infralens.attention_kernels`): FlashAttention-2 reaches 335 TFLOP/s
  forward on an H100, well under half the GEMM ceiling, FlashAttention-3 616.

Both are the best a kernel was measured to do, so the compute term is a
lower bound on time; nothing is fitted to a training run.

>>> from infralens.model import PRESETS
>>> m = PRESETS["llama3-70b"]
>>> round(model_flops_per_token(m, seq_len=4096) / 1e9)      # 6N + 12·L·h·s
449
>>> round(float(achievable_fraction("h100-sxm5-80gb")), 3)
0.803

Dense, never sparse: dividing by the datasheet's "with sparsity" figure
halves every MFU, and dividing a *sparse* achieved rate by the dense peak
gives values above one (see :func:`mfu`).
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import (
    check_choice,
    flag,
    nonnegative_number,
    positive_int,
    positive_number,
)
from infralens.attention_kernels import attention_flops_per_token
from infralens.hardware import GPUS, MAMF_BF16
from infralens.memory import RECOMPUTE, STACKS
from infralens.model import TransformerConfig

__all__ = [
    "RECOMPUTE_MODES",
    "achievable_fraction",
    "gemm_flops_per_token",
    "hardware_flops_per_token",
    "mfu",
    "model_flops_per_token",
]

TERA = 10**12

RECOMPUTE_MODES = RECOMPUTE
"""Activation recomputation: none, selective (attention core only; FlashAttention
recomputes it in its backward anyway) or full (every layer's forward again); the
same modes :mod:`infralens.memory` counts saved bytes for."""


def _model(model: object) -> TransformerConfig:
    if not isinstance(model, TransformerConfig):
        raise TypeError(
            f"model must be a TransformerConfig, got {type(model).__name__}"
        )
    return model


def achievable_fraction(gpu: str) -> Fraction:
    """The measured matmul ceiling over the dense datasheet peak for preset *gpu*.

    fraction = MAMF_BF16[gpu] / GPUS[gpu].bf16_flops

    >>> round(float(achievable_fraction("a100-sxm4-80gb")), 3)
    0.869
    >>> achievable_fraction("b200-gb200")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of ...; got 'b200-gb200'

    Raises ``ValueError`` for a GPU without a published measurement.
    """
    key = check_choice("gpu", gpu, tuple(MAMF_BF16))
    return Fraction(MAMF_BF16[key], GPUS[key].bf16_flops)


def model_flops_per_token(
    model: TransformerConfig, *, seq_len: int, causal: bool = False
) -> int:
    """Model FLOPs per trained token, PaLM Appendix B: 6·N + 12·L·h·s.

    N counts every matrix the token multiplies (the layers and the output
    projection; the embedding lookup is not a matmul), L·h·s the attention
    scores and values, counted in full as PaLM does. With *causal* the
    attention term is the half a causal mask leaves, 6·N + 6·L·h·s: the
    FLOPs a causal model needs, and the count FlashAttention's papers use.
    PaLM's full count credits FLOPs a block-skipping kernel never runs, so
    at long context it can exceed what the GPUs execute (an MFU above 1);
    :func:`infralens.planner.step.estimate` uses the causal count.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> model_flops_per_token(m, seq_len=1) - 6 * (m.num_params() - m.embedding_params())
    1572864
    >>> full = model_flops_per_token(m, seq_len=131072)
    >>> round(model_flops_per_token(m, seq_len=131072, causal=True) / full, 2)  # at 128K
    0.59
    >>> model_flops_per_token(m, seq_len=0)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be >= 1, got 0

    Raises ``ValueError`` if *seq_len* is below 1, ``TypeError`` if *causal* is not a bool.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    n = m.num_params() - m.embedding_params()
    if m.tied_embeddings:
        n += m.vocab_size * m.hidden  # the tied table is still the output matmul
    return 6 * n + (6 if flag("causal", causal) else 12) * m.layers * m.hidden * s


def gemm_flops_per_token(
    model: TransformerConfig,
    *,
    recompute: str = "selective",
    stack: str = "megatron",
) -> int:
    """FLOPs of the weight matmuls per trained token, recomputation included::

        gemm = 6·N                              (forward 2·N, backward 4·N)
             + 2·L·P_layer                      if recompute == "full"
             + 2·L·(h·g·d + h² + h·f)           if recompute == "selective", stack "pytorch"

    Full recomputation repeats each layer's forward. torchtitan's op-level
    policy recomputes every second ``mm`` of the block (k, o and the MLP's
    second matmul, w3 or fc2); Megatron's selective recomputes no matmul.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> op = gemm_flops_per_token(m, stack="pytorch") - gemm_flops_per_token(m)
    >>> round(op / gemm_flops_per_token(m), 3)          # torchtitan's selective: +11 %
    0.113
    >>> gemm_flops_per_token(m, stack="jax")
    Traceback (most recent call last):
    ...
    ValueError: stack must be one of 'megatron', 'pytorch'; got 'jax'

    Raises ``ValueError`` for an unknown *recompute* or *stack*.
    """
    m = _model(model)
    mode = check_choice("recompute", recompute, RECOMPUTE_MODES)
    who = check_choice("stack", stack, STACKS)
    total = model_flops_per_token(m, seq_len=1) - 12 * m.layers * m.hidden
    if mode == "full":
        total += 2 * m.layers * m.layer_params()
    elif mode == "selective" and who == "pytorch":
        h = m.hidden
        total += (
            2 * m.layers * (h * m.kv_heads * m.head_dim + h * h + h * m.ffn_hidden)
        )
    return total


def hardware_flops_per_token(
    model: TransformerConfig,
    *,
    seq_len: int,
    recompute: str = "selective",
    causal: bool = True,
    stack: str = "megatron",
) -> int:
    """FLOPs the GPUs execute per token: the weight matmuls and attention, recomputation included.

    executed = gemm_flops_per_token + forward + backward of attention_flops_per_token

    with attention counted as FlashAttention runs it when *causal* (the mask
    skips half, the backward recomputes QKᵀ) and as materialized scores
    otherwise (PaLM's 12·L·h·s, plus the forward again under full recomputation).

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> full = hardware_flops_per_token(m, seq_len=8192, recompute="full")
    >>> round(full / model_flops_per_token(m, seq_len=8192), 3)
    1.185
    >>> hardware_flops_per_token(m, seq_len=8192, recompute="some")
    Traceback (most recent call last):
    ...
    ValueError: recompute must be one of 'none', 'selective', 'full'; got 'some'

    Raises ``ValueError`` for an unknown *recompute* or *stack*, or *seq_len* below 1.
    """
    kernel = "flash2" if causal else "materialized"
    fwd, bwd = attention_flops_per_token(
        model, seq_len=seq_len, recompute=recompute, kernel=kernel
    )
    return gemm_flops_per_token(model, recompute=recompute, stack=stack) + fwd + bwd


def mfu(
    achieved_flops_per_s: float | int | Fraction, peak_flops_per_s: float | int
) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the *dense* peak.

    Dividing by the dense peak is PaLM's definition. A rate computed
    against the sparse peak looks half as good; a sparse-kernel rate over
    the dense peak can exceed 1, which is impossible for dense training,
    so a result above 1 raises.

    >>> round(mfu(400e12, 989.5e12), 3)
    0.404
    >>> mfu(400e12, 1979e12) < 0.25     # the same run against the sparse peak
    True
    >>> mfu(1100e12, 989.5e12)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: MFU above 1 (1.112): achieved_flops_per_s exceeds peak_flops_per_s; ...

    Raises ``ValueError`` for a negative rate, a peak below or at 0, or a result above 1.
    """
    achieved = nonnegative_number("achieved_flops_per_s", achieved_flops_per_s)
    peak = positive_number("peak_flops_per_s", peak_flops_per_s)
    value = float(achieved) / float(peak)
    if value > 1:
        raise ValueError(
            f"MFU above 1 ({value:.3f}): achieved_flops_per_s exceeds peak_flops_per_s; "
            "the peak is not the dense peak of this GPU"
        )
    return value
