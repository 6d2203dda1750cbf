"""Compute time of a training step: FLOPs, the matmul ceiling, MFU and HFU.

A training step's arithmetic is its matrix multiplications: the weight
GEMMs (2 FLOPs per parameter per token forward, twice that backward) and
the attention score and value products. This module counts them, divides
by what a GPU's tensor cores *actually* sustain on large BF16 matmuls, and
reports utilisation the way PaLM (Chowdhery et al. 2022, Appendix B)
defines it:

    MFU = model FLOPs per second / dense peak      (no recomputation counted)
    HFU = hardware FLOPs per second / dense peak   (recomputation counted)

Two measured ceilings price the arithmetic, one per kind of kernel:

- weight GEMMs run at the *maximum achievable matmul FLOPS* (MAMF) measured
  with ``mamf-finder.py`` by Bekman (stas00/ml-engineering, commit 744d01e1,
  compute/accelerator/README.md): BF16 271.2 TFLOP/s on an A100 SXM (86.9 %
  of 312), 794.5 on an H100 SXM (80.3 % of 989; "H200 is the same");
- attention runs at its kernel's published throughput
  (:data:`ATTENTION_CEILINGS`): FlashAttention-2 reaches 335 TFLOP/s forward
  on an H100, well under half the GEMM ceiling, FlashAttention-3 616.

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

from infralens._validate import check_choice, nonnegative_number, positive_int, positive_number
from infralens.hardware import GPUS
from infralens.model import TransformerConfig

__all__ = [
    "ATTENTION_CEILINGS",
    "ATTENTION_KERNELS",
    "MAMF_BF16",
    "RECOMPUTE_MODES",
    "STACKS",
    "achievable_fraction",
    "attention_flops_per_token",
    "attention_seconds",
    "gemm_flops_per_token",
    "hardware_flops_per_token",
    "mfu",
    "model_flops_per_token",
]

TERA = 10**12

MAMF_BF16: dict[str, int] = {
    # stas00/ml-engineering @ 744d01e1, compute/accelerator/README.md, "Maximum Achievable
    # Matmul FLOPS comparison table", BF16, mean of 100 iterations after 50 warm-up:
    "a100-sxm4-80gb": 271_200 * 10**9,  # NVIDIA A100 SXM 271.2 (torch 2.6.0+cu126)
    "h100-sxm5-80gb": 794_500 * 10**9,  # NVIDIA H100 SXM 794.5 (torch 2.7.0+cu126)
    "h200-sxm-141gb": 794_500 * 10**9,  # same table: "H200 is the same" as the H100 SXM
}
"""Measured BF16 matmul ceilings in FLOP/s, by :data:`infralens.hardware.GPUS` key."""

ATTENTION_KERNELS = ("flash2", "flash3", "cudnn", "materialized")
"""The attention kernel a framework runs: FlashAttention-2 (PyTorch SDPA's flash
backend), FlashAttention-3, cuDNN's fused attention (Transformer Engine's default on
Hopper) or materialized scores (QKᵀ, softmax and PV as separate kernels, 2021 Megatron)."""

ATTENTION_CEILINGS: dict[str, dict[str, tuple[int, int]]] = {
    # (forward, backward) FLOP/s at head dim 128, the best sequence length of each sweep,
    # FLOPs counted as the FlashAttention papers count them (see attention_flops_per_token).
    "flash2": {
        # Dao 2023, section 4: "up to 230 TFLOPs/s, 73% of the theoretical maximum" on an
        # A100 80GB SXM4, a forward-pass figure; the text prints none for the backward, so
        # the same value is used for it, which can only make the step faster.
        "a100-sxm4-80gb": (230 * TERA, 230 * TERA),
        # Shah et al. 2024 (FlashAttention-3), section 4.1 benchmark figures, H100 SXM5:
        # forward with the causal mask, and backward.
        "h100-sxm5-80gb": (335 * TERA, 322 * TERA),
    },
    "flash3": {"h100-sxm5-80gb": (616 * TERA, 561 * TERA)},  # same figures
    "cudnn": {"h100-sxm5-80gb": (539 * TERA, 518 * TERA)},  # same figures, the cuDNN bars
}
"""Measured attention-kernel ceilings in FLOP/s by kernel and :data:`infralens.hardware.GPUS`
key. The H200 shares the H100's compute die and clocks and is priced with its figures, as
Bekman's table does for matmuls; no kernel here has a published Blackwell figure."""

_SAME_DIE = {"h200-sxm-141gb": "h100-sxm5-80gb"}

STACKS = ("megatron", "pytorch")
"""Whose selective recomputation: Megatron-Core's (core attention only) or torchtitan's
op-level policy for PyTorch (every second ``mm`` of the block recomputed)."""

RECOMPUTE_MODES = ("none", "selective", "full")
"""Activation recomputation: none, selective (attention core only; FlashAttention
recomputes it in its backward anyway) or full (every layer's forward again)."""


def _model(model: object) -> TransformerConfig:
    if not isinstance(model, TransformerConfig):
        raise TypeError(f"model must be a TransformerConfig, got {type(model).__name__}")
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


def model_flops_per_token(model: TransformerConfig, *, seq_len: int) -> int:
    """Model FLOPs per trained token, PaLM Appendix B: 6·N + 12·L·h·s.

    N counts every matrix the token multiplies (the layers and the output
    projection; the embedding lookup is not a matmul), L·h·s the attention
    scores and values, counted in full as PaLM does even though a causal
    mask lets FlashAttention skip about half (see
    :func:`hardware_flops_per_token`).

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> model_flops_per_token(m, seq_len=1) - 6 * (m.num_params() - m.embedding_params())
    1572864
    >>> model_flops_per_token(m, seq_len=0)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be >= 1, got 0

    Raises ``ValueError`` if *seq_len* is below 1.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    n = m.num_params() - m.embedding_params()
    if m.tied_embeddings:
        n += m.vocab_size * m.hidden  # the tied table is still the output matmul
    return 6 * n + 12 * m.layers * m.hidden * s


def gemm_flops_per_token(
    model: TransformerConfig, *, recompute: str = "selective", stack: str = "megatron"
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
        total += 2 * m.layers * (h * m.kv_heads * m.head_dim + h * h + h * m.ffn_hidden)
    return total


def attention_flops_per_token(
    model: TransformerConfig, *, seq_len: int, recompute: str = "selective", kernel: str = "flash2"
) -> tuple[int, int]:
    """(forward, backward) FLOPs of attention's two matmuls per token, as the kernel runs them::

        flash          forward 2·L·h·s (4·s·h per token, halved by the causal mask)
                       backward 2.5 × forward (five matmuls: QKᵀ is recomputed)
        materialized   forward 4·L·h·s (the mask is applied after a full QKᵀ)
                       backward 2 × forward (the scores are saved)

    Full recomputation runs the forward once more.

    This is the FlashAttention papers' count (Dao 2023, section 4.1), so the
    time at their measured throughput is FLOPs / :data:`ATTENTION_CEILINGS`.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> fwd, bwd = attention_flops_per_token(m, seq_len=8192)
    >>> fwd == 2 * 32 * 4096 * 8192, bwd / fwd
    (True, 2.5)
    >>> attention_flops_per_token(m, seq_len=8192, kernel="flash4")
    Traceback (most recent call last):
    ...
    ValueError: kernel must be one of 'flash2', 'flash3', 'cudnn', 'materialized'; got 'flash4'

    Raises ``ValueError`` for an unknown *kernel* or *recompute*, or *seq_len* below 1.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    mode = check_choice("recompute", recompute, RECOMPUTE_MODES)
    k = check_choice("kernel", kernel, ATTENTION_KERNELS)
    fwd = (4 if k == "materialized" else 2) * m.layers * m.hidden * s
    bwd = 2 * fwd if k == "materialized" else fwd * 5 // 2
    return (2 * fwd if mode == "full" else fwd), bwd


def attention_seconds(
    model: TransformerConfig,
    *,
    seq_len: int,
    tokens: float,
    gpu: str,
    recompute: str = "selective",
    kernel: str = "flash2",
) -> float:
    """Seconds the attention matmuls of *tokens* tokens take on preset *gpu*.

    t = forward / ceiling_fwd + backward / ceiling_bwd        (per token, × tokens)

    The ceilings are the kernel's measured throughput (:data:`ATTENTION_CEILINGS`);
    materialized scores run as cuBLAS GEMMs at :data:`MAMF_BF16` (their softmax
    and masking are memory traffic, priced elsewhere). *tokens* may be a share
    of a micro-batch (divided by tp and cp).

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> fa2 = attention_seconds(m, seq_len=8192, tokens=8192, gpu="h100-sxm5-80gb")
    >>> fa3 = attention_seconds(m, seq_len=8192, tokens=8192, gpu="h100-sxm5-80gb",
    ...                         kernel="flash3")
    >>> round(fa2 / fa3, 2)                           # FlashAttention-3 over -2 on an H100
    1.77
    >>> attention_seconds(m, seq_len=8192, tokens=1, gpu="a100-sxm4-80gb", kernel="cudnn")
    Traceback (most recent call last):
    ...
    ValueError: kernel 'cudnn' has no published ceiling for gpu 'a100-sxm4-80gb'

    Raises ``ValueError`` for a kernel without a measurement on *gpu*, or bad sizes.
    """
    fwd, bwd = attention_flops_per_token(model, seq_len=seq_len, recompute=recompute, kernel=kernel)
    n = nonnegative_number("tokens", tokens)
    key = check_choice("gpu", gpu, tuple(GPUS))
    key = _SAME_DIE.get(key, key)
    if kernel == "materialized":
        ceiling = MAMF_BF16[check_choice("gpu", gpu, tuple(MAMF_BF16))]
        return float(n) * (fwd + bwd) / ceiling
    table = ATTENTION_CEILINGS[kernel]
    if key not in table:
        raise ValueError(f"kernel {kernel!r} has no published ceiling for gpu {gpu!r}")
    c_fwd, c_bwd = table[key]
    return float(n) * (fwd / c_fwd + bwd / c_bwd)


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
    fwd, bwd = attention_flops_per_token(model, seq_len=seq_len, recompute=recompute, kernel=kernel)
    return gemm_flops_per_token(model, recompute=recompute, stack=stack) + fwd + bwd


def mfu(achieved_flops_per_s: float | int | Fraction, peak_flops_per_s: float | int) -> float:
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
    ValueError: MFU above 1 (1.112): achieved_flops_per_s exceeds peak_flops_per_s; the peak ...

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
