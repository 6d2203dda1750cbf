"""The critical batch size and batch-size ramps: steps against data, and what a ramp does to a plan.

Below the critical batch size B_crit, doubling the batch halves the steps to
a target loss at almost no extra data; above it, the steps barely fall and
the data doubles. McCandlish et al. (2018) found the trade-off

    (S / S_min - 1) * (E / E_min - 1) = 1,  B_crit = E_min / S_min,

and Kaplan et al. (2020, eq. 1.4) fitted B_crit(L) = B* / L**(1 / alpha_B)
(B* about 2e8 tokens, alpha_B about 0.21): the critical batch grows as the
loss falls, which is why runs ramp the batch up during training. With the
model-parallel layout fixed, the ramp changes the sequences each data-parallel
replica gets, hence the pipeline's micro-batches and its bubble.

>>> batch_tradeoff(batch=4, critical=4)          # at B_crit: 2x the steps, 2x the data
(Fraction(2, 1), Fraction(2, 1))
>>> s = ramp_stage(16 * 2**20, seq_len=8192, gpus=16384, tp=8, pp=16)
>>> s.dp, s.microbatches, s.tokens_per_gpu, s.bubble
(128, 16, Fraction(1024, 1), Fraction(15, 16))
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import divisible, positive_int, positive_number
from infralens.pipeline import bubble_fraction

__all__ = [
    "KAPLAN_ALPHA_B",
    "KAPLAN_B_STAR_TOKENS",
    "RampStage",
    "batch_tradeoff",
    "critical_batch_tokens",
    "ramp_stage",
]

KAPLAN_B_STAR_TOKENS = 2e8
"""B* in Kaplan et al.'s B_crit(L) = B* / L**(1/alpha_B), in tokens (eq. 1.4)."""

KAPLAN_ALPHA_B = 0.21
"""alpha_B in Kaplan et al.'s critical-batch fit (eq. 1.4)."""


@typed
def batch_tradeoff(
    *, batch: int | Fraction, critical: int | Fraction
) -> tuple[Fraction, Fraction]:
    """Steps and data at batch *batch*, relative to their minima: (S/S_min, E/E_min).

    S / S_min = 1 + B_crit / B and E / E_min = 1 + B / B_crit, the two
    branches of McCandlish et al.'s hyperbola (their product minus the sum
    plus one is 1 for every B).

    >>> batch_tradeoff(batch=1, critical=8)     # small batch: data-efficient, 9x steps
    (Fraction(9, 1), Fraction(9, 8))
    >>> batch_tradeoff(batch=64, critical=8)    # large batch: 8x the data
    (Fraction(9, 8), Fraction(9, 1))
    >>> batch_tradeoff(batch=0, critical=8)
    Traceback (most recent call last):
    ...
    ValueError: batch must be > 0, got 0

    Raises ``ValueError`` for a batch or critical batch not > 0.
    """
    b = positive_number("batch", batch)
    c = positive_number("critical", critical)
    return 1 + c / b, 1 + b / c


@typed
def critical_batch_tokens(loss: float) -> float:
    """Kaplan et al.'s critical batch in tokens at a loss of *loss* nats per token.

    B_crit(L) = B* / L ** (1 / alpha_B). The fit is for their WebText2 models
    and tokenizer; read it as a trend (the critical batch grows as the loss
    falls), not as a number for another corpus.

    >>> [round(critical_batch_tokens(loss) / 1e6, 2) for loss in (3.0, 2.0)]
    [1.07, 7.37]
    >>> critical_batch_tokens(0.0)
    Traceback (most recent call last):
    ...
    ValueError: loss must be between 0.001 and 1000 nats, got 0.0

    Raises ``ValueError`` for a loss outside [0.001, 1000] nats per token (far
    wider than any language model's; the power overflows a float beyond).
    """
    if not 1e-3 <= loss <= 1e3:
        raise ValueError(f"loss must be between 0.001 and 1000 nats, got {loss}")
    return KAPLAN_B_STAR_TOKENS / float(loss ** (1 / KAPLAN_ALPHA_B))


@dataclass(frozen=True)
class RampStage:
    """One stage of a batch ramp on a fixed model-parallel layout.

    ``sequences`` per optimizer step, ``dp`` replicas, ``per_replica``
    sequences each, ``microbatches`` (m) of ``micro_batch`` sequences per
    replica, ``tokens_per_gpu`` per step, and the pipeline ``bubble``
    (p - 1) / (v * m). ``fills_pipeline`` is m >= p: with fewer micro-batches
    than stages a 1F1B pipeline never reaches its steady state.
    """

    sequences: int
    dp: int
    per_replica: int
    microbatches: int
    tokens_per_gpu: Fraction
    bubble: Fraction
    fills_pipeline: bool

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def ramp_stage(
    batch_tokens: int,
    *,
    seq_len: int,
    gpus: int,
    tp: int,
    pp: int,
    cp: int = 1,
    micro_batch: int = 1,
    chunks: int = 1,
) -> RampStage:
    """What a global batch of *batch_tokens* means on *gpus* GPUs laid out tp x cp x pp x dp.

    dp = gpus / (tp * cp * pp); sequences = batch_tokens / seq_len;
    m = sequences / (dp * micro_batch); bubble = (pp - 1) / (chunks * m).

    Llama 3 405B's ramp (section 3.4.1: 4M tokens of 4,096-token sequences,
    then 8M of 8,192, then 16M) on 16,384 GPUs with TP 8 and PP 16 (Table 4):

    >>> for tokens, seq in ((4 * 2**20, 4096), (8 * 2**20, 8192), (16 * 2**20, 8192)):
    ...     s = ramp_stage(tokens, seq_len=seq, gpus=16384, tp=8, pp=16)
    ...     print(s.sequences, s.microbatches, s.tokens_per_gpu, s.bubble,
    ...           s.fills_pipeline)
    1024 8 256 15/8 False
    1024 8 512 15/8 False
    2048 16 1024 15/16 True
    >>> ramp_stage(4 * 2**20, seq_len=4096, gpus=8192, tp=8, pp=16).microbatches
    16
    >>> ramp_stage(2**19, seq_len=8192, gpus=16384, tp=8, pp=16)
    Traceback (most recent call last):
    ...
    ValueError: sequences must divide by dp * micro_batch: 64 % (128 * 1) = 64

    Raises ``ValueError`` if the GPUs do not divide into the layout, the
    batch into sequences, or the sequences into replicas and micro-batches.
    """
    tokens = positive_int("batch_tokens", batch_tokens)
    seq = positive_int("seq_len", seq_len)
    n = positive_int("gpus", gpus)
    model = positive_int("tp", tp) * positive_int("cp", cp) * positive_int("pp", pp)
    divisible("gpus", n, "tp * cp * pp", model)
    dp = n // model
    divisible("batch_tokens", tokens, "seq_len", seq)
    sequences = tokens // seq
    b = positive_int("micro_batch", micro_batch)
    if sequences % (dp * b):
        raise ValueError(
            f"sequences must divide by dp * micro_batch: "
            f"{sequences} % ({dp} * {b}) = {sequences % (dp * b)}"
        )
    m = sequences // (dp * b)
    return RampStage(
        sequences=sequences,
        dp=dp,
        per_replica=sequences // dp,
        microbatches=m,
        tokens_per_gpu=Fraction(tokens, n),
        bubble=bubble_fraction(stages=pp, microbatches=m, chunks=chunks),
        fills_pipeline=m >= pp,
    )
