"""Attention's cost: its FLOPs as the kernels count them, and their measured ceilings.

Attention is the one matmul of a transformer that a library kernel runs
whole: FlashAttention-2 and -3 and cuDNN's fused attention keep the s × s
scores on chip, so their time is their FLOPs over their measured throughput
(:data:`ATTENTION_CEILINGS`), well under the GEMM ceiling. 2021 Megatron-LM
materialized the scores instead, and that path is bound by HBM traffic, not
arithmetic (:data:`MATERIALIZED_SCORE_BYTES`).

>>> from infralens.model import PRESETS
>>> m = PRESETS["llama3-8b"]
>>> fwd, bwd = attention_flops_per_token(m, seq_len=8192)
>>> fwd == 2 * 32 * 4096 * 8192, bwd / fwd        # causal half; backward 2.5×
(True, 2.5)
"""

from __future__ import annotations

from infralens._validate import check_choice, nonnegative_number, positive_int
from infralens.hardware import CEILING_STAND_IN, GPUS, matmul_ceiling
from infralens.memory import RECOMPUTE, _model
from infralens.model import TransformerConfig

__all__ = [
    "ATTENTION_CEILINGS",
    "ATTENTION_KERNELS",
    "MATERIALIZED_SCORE_BYTES",
    "attention_flops_per_token",
    "attention_seconds",
]

TERA = 10**12

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
    "cudnn": {
        "h100-sxm5-80gb": (539 * TERA, 518 * TERA)
    },  # same figures, the cuDNN bars
}
"""Measured attention-kernel ceilings in FLOP/s by kernel and :data:`infralens.hardware.GPUS`
key. The H200 shares the H100's compute die and clocks and is priced with its figures, as
Bekman's table does for matmuls; the 500 W HBM2e H100 shares the die at lower clocks, so
the SXM figures bound it from above. The table holds no Blackwell figure, so no Blackwell
part can be priced."""

_SAME_DIE = {"h200-sxm-141gb": "h100-sxm5-80gb", **CEILING_STAND_IN}

MATERIALIZED_SCORE_BYTES = (13, 19)
"""HBM bytes per fp16 score element of materialized attention, (forward, backward).

Counted kernel by kernel from Megatron-LM's ``ParallelAttention.forward`` at commit
cdde433 (April 2021): forward, ``baddbmm`` writes the scores (2), the fused
scale-mask-softmax reads and writes them (4), attention dropout (p = 0.1 by
default) reads them and writes its output and a 1-byte mask (5), and the
``bmm`` with V reads the result (2); backward, the ``bmm`` writes the
probabilities' gradient and reads the saved probabilities (4), dropout's
backward reads the gradient and mask and writes (5), the softmax backward
reads the gradient and its saved output and writes (6), and the two matmuls
for dQ and dK read the scores' gradient (4). Full recomputation runs the
forward twice."""


def attention_flops_per_token(
    model: TransformerConfig,
    *,
    seq_len: int,
    recompute: str = "selective",
    kernel: str = "flash2",
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
    >>> attention_flops_per_token(m, seq_len=8192, kernel="flash4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: kernel must be one of 'flash2', 'flash3', 'cudnn', 'materialized'; got ...

    Raises ``ValueError`` for an unknown *kernel* or *recompute*, or *seq_len* below 1.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    mode = check_choice("recompute", recompute, RECOMPUTE)
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

    The ceilings are the kernel's measured throughput (:data:`ATTENTION_CEILINGS`).
    Materialized scores have no single kernel to measure: their two matmuls run
    at the matmul ceiling (:data:`infralens.hardware.MAMF_BF16`) but every
    score element crosses HBM several times (:data:`MATERIALIZED_SCORE_BYTES`),
    so they take the longer of the two::

        t = max(FLOPs / MAMF, L·a·s · bytes per score / HBM bandwidth)   per token

    *tokens* may be a share of a micro-batch (divided by tp and cp).

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> fa2 = attention_seconds(m, seq_len=8192, tokens=8192, gpu="h100-sxm5-80gb")
    >>> fa3 = attention_seconds(m, seq_len=8192, tokens=8192, gpu="h100-sxm5-80gb",
    ...                         kernel="flash3")
    >>> round(fa2 / fa3, 2)                  # FlashAttention-3 over -2 on an H100
    1.77
    >>> a100 = "a100-sxm4-80gb"
    >>> t = attention_seconds(m, seq_len=8192, tokens=1, gpu=a100, kernel="materialized")
    >>> fwd, bwd = attention_flops_per_token(m, seq_len=8192, kernel="materialized")
    >>> # HBM-bound: its FLOPs alone, at the matmul ceiling, would run faster
    >>> round(t / ((fwd + bwd) / matmul_ceiling(a100)), 2)
    2.77
    >>> attention_seconds(m, seq_len=8192, tokens=1, gpu="a100-sxm4-80gb", kernel="cudnn")
    Traceback (most recent call last):
    ...
    ValueError: kernel 'cudnn' has no published ceiling for gpu 'a100-sxm4-80gb'

    Raises ``ValueError`` for a kernel without a measurement on *gpu*, or bad sizes.
    """
    fwd, bwd = attention_flops_per_token(
        model, seq_len=seq_len, recompute=recompute, kernel=kernel
    )
    n = float(nonnegative_number("tokens", tokens))
    if kernel == "materialized":
        m = _model(model)
        ceiling = matmul_ceiling(gpu)
        f_bytes, b_bytes = MATERIALIZED_SCORE_BYTES
        per_score = f_bytes * (2 if recompute == "full" else 1) + b_bytes
        scores = n * m.layers * m.heads * seq_len  # score elements of these tokens
        hbm = scores * per_score / GPUS[gpu].hbm_bytes_per_s
        return max(n * (fwd + bwd) / ceiling, hbm)
    key = check_choice("gpu", gpu, tuple(GPUS))
    key = _SAME_DIE.get(key, key)
    table = ATTENTION_CEILINGS[kernel]
    if key not in table:
        raise ValueError(
            f"kernel {kernel!r} has no published ceiling for gpu {gpu!r}"
        )
    c_fwd, c_bwd = table[key]
    return n * (fwd / c_fwd + bwd / c_bwd)
