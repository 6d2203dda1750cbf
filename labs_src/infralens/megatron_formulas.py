"""Megatron-LM's closed forms for GPT models: parameters, FLOPs and training time.

Narayanan et al. (2021) size and time their GPT models with three formulas:
the parameter count (Eq. 2), the FLOPs of one training iteration with full
activation recomputation (Eq. 3), and the end-to-end training time at a
sustained per-GPU rate (Eq. 4). Each is written here as the paper prints it,
so Table 1's model sizes and the paper's two training-time examples can be
checked, and the step model's A100 validation (:mod:`infralens.planner.step_validation`)
can count achieved FLOP/s the way the paper did.

The GPT shape they assume: a 4h MLP with biases, two LayerNorms per layer,
learned positions, and an output layer tied to the token embedding
(vocabulary 51,200 and sequence 2,048 in Table 1):

>>> n = megatron_param_count(layers=80, hidden=12288, vocab_size=51200, seq_len=2048)
>>> round(n / 1e9, 1)
145.6

For arbitrary shapes, GQA and gated MLPs use :class:`infralens.model.TransformerConfig`.
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import positive_int, positive_number

__all__ = [
    "megatron_flops_per_iteration",
    "megatron_param_count",
    "megatron_training_seconds",
]


def megatron_param_count(
    *, layers: int, hidden: int, vocab_size: int, seq_len: int
) -> int:
    """GPT parameter count in the closed form of Narayanan et al. (2021), Eq. 2.

    P = 12·l·h²·(1 + 13/(12·h) + (V + s)/(12·l·h)) = 12·l·h² + 13·l·h + (V + s)·h

    It counts a 4h MLP, biases, two LayerNorms per layer, the token and
    position embeddings, and an output layer tied to the embedding; it leaves
    out the final LayerNorm. Two rows of the paper's Table 1 (V = 51,200,
    s = 2,048):

    >>> table1 = {"vocab_size": 51200, "seq_len": 2048}
    >>> [round(megatron_param_count(layers=l, hidden=h, **table1) / 1e9, 1)
    ...  for l, h in ((24, 2304), (128, 25600))]
    [1.7, 1008.0]
    >>> megatron_param_count(layers=0, hidden=1, vocab_size=1, seq_len=1)
    Traceback (most recent call last):
    ...
    ValueError: layers must be >= 1, got 0
    """
    l_ = positive_int("layers", layers)
    h = positive_int("hidden", hidden)
    v = positive_int("vocab_size", vocab_size)
    s = positive_int("seq_len", seq_len)
    return 12 * l_ * h * h + 13 * l_ * h + (v + s) * h


def megatron_flops_per_iteration(
    *,
    batch_size: int,
    seq_len: int,
    layers: int,
    hidden: int,
    vocab_size: int,
    recompute: bool = True,
) -> int:
    """FLOPs of one training iteration of a GPT model (Narayanan et al. 2021, Eq. 3).

    Per layer a forward pass costs 24·B·s·h² + 4·B·s²·h; backward costs twice
    that, and full activation recomputation one more forward. The output layer
    adds 2·B·s·h·V forward, never recomputed:

    F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))   with recomputation (the paper's form)
    F = 72·B·s·l·h²·(1 + s/(6h)) + 6·B·s·h·V     without

    >>> tiny = {"batch_size": 1, "layers": 1, "hidden": 1}
    >>> megatron_flops_per_iteration(seq_len=1, vocab_size=16, **tiny)
    208
    >>> megatron_flops_per_iteration(seq_len=0, vocab_size=1, **tiny)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be >= 1, got 0
    """
    b = positive_int("batch_size", batch_size)
    s = positive_int("seq_len", seq_len)
    l_ = positive_int("layers", layers)
    h = positive_int("hidden", hidden)
    v = positive_int("vocab_size", vocab_size)
    passes = 4 if recompute else 3  # forward, backward (2x), recomputed forward
    per_layer_forward = 24 * b * s * h * h + 4 * b * s * s * h
    return passes * l_ * per_layer_forward + 6 * b * s * h * v


def megatron_training_seconds(
    *,
    tokens: int,
    num_params: int,
    gpus: int,
    flops_per_gpu: int | float | Fraction,
) -> Fraction:
    """End-to-end training time estimate of Narayanan et al. (2021), Eq. 4.

    time ≈ 8·T·P / (n·X): T tokens, P parameters, n GPUs each sustaining X
    FLOP/s, with activation recomputation (hence 8 rather than 6). The
    paper's two examples, GPT-3 on 1,024 A100s at 140 teraFLOP/s and the 1T
    model on 3,072 at 163:

    >>> day = 86400
    >>> round(megatron_training_seconds(tokens=300 * 10**9, num_params=175 * 10**9,
    ...                                 gpus=1024, flops_per_gpu=140 * 10**12) / day)
    34
    >>> one_t = megatron_param_count(layers=128, hidden=25600, vocab_size=51200,
    ...                              seq_len=2048)
    >>> round(megatron_training_seconds(tokens=450 * 10**9, num_params=one_t,
    ...                                 gpus=3072, flops_per_gpu=163 * 10**12) / day)
    84
    >>> megatron_training_seconds(tokens=1, num_params=1, gpus=1, flops_per_gpu=0)
    Traceback (most recent call last):
    ...
    ValueError: flops_per_gpu must be > 0, got 0
    """
    t = positive_int("tokens", tokens)
    p = positive_int("num_params", num_params)
    n = positive_int("gpus", gpus)
    x = positive_number("flops_per_gpu", flops_per_gpu)
    return Fraction(8 * t * p) / (n * x)
