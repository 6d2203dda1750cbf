"""Compute time of a training step: FLOPs, the matmul ceiling, MFU and HFU.

A training step's arithmetic is its matrix multiplications: the weight
GEMMs (2 FLOPs per parameter per token forward, twice that backward) and
the attention score and value products. This module counts them, divides
by what a GPU's tensor cores *actually* sustain on large BF16 matmuls, and
reports utilisation the way PaLM (Chowdhery et al. 2022, Appendix B)
defines it:

    MFU = model FLOPs per second / dense peak      (no recomputation counted)
    HFU = hardware FLOPs per second / dense peak   (recomputation counted)

The ceiling is the *maximum achievable matmul FLOPS* (MAMF) measured with
``mamf-finder.py`` by Bekman (stas00/ml-engineering, commit 744d01e1,
compute/accelerator/README.md): BF16 271.2 TFLOP/s on an A100 SXM (86.9 %
of 312), 794.5 on an H100 SXM (80.3 % of 989; "H200 is the same"). No
kernel sustains more than that, so it is the physical constant of the
compute term; nothing is fitted to a training run.

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
    "MAMF_BF16",
    "RECOMPUTE_MODES",
    "achievable_fraction",
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


def hardware_flops_per_token(
    model: TransformerConfig, *, seq_len: int, recompute: str = "selective", causal: bool = True
) -> int:
    """FLOPs the GPUs execute per token: what :func:`model_flops_per_token` counts, adjusted.

    attention = 12·L·h·s, halved when *causal* (FlashAttention skips masked blocks)
    executed  = 6·N + attention + (2·N + attention/3) if recompute == "full"
    executed  = 6·N + attention + attention/3       if recompute == "selective"

    Full recomputation repeats each layer's forward (2·N per token, the
    output layer excepted); selective recomputes only the attention core,
    as FlashAttention's backward does anyway.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> full = hardware_flops_per_token(m, seq_len=8192, recompute="full")
    >>> round(full / model_flops_per_token(m, seq_len=8192), 3)
    1.167
    >>> hardware_flops_per_token(m, seq_len=8192, recompute="some")
    Traceback (most recent call last):
    ...
    ValueError: recompute must be one of 'none', 'selective', 'full'; got 'some'

    Raises ``ValueError`` for an unknown *recompute* or *seq_len* below 1.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    mode = check_choice("recompute", recompute, RECOMPUTE_MODES)
    dense = model_flops_per_token(m, seq_len=s) - 12 * m.layers * m.hidden * s
    attention = 12 * m.layers * m.hidden * s // (2 if causal else 1)
    total = dense + attention
    if mode in ("selective", "full"):
        total += attention // 3
    if mode == "full":
        total += 2 * m.layers * m.layer_params()
    return total


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
