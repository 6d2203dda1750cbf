"""Activation memory of one transformer layer, after Korthikanti et al. (2022), Table 2.

For sequence length s, micro-batch b, hidden size h, a attention heads and
tensor-parallel degree t, with 16-bit activations, one layer stores:

- no recomputation, TP only:        s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes
- no recomputation, TP + sequence parallel: s·b·h·(34/t + 5·a·s/(h·t))
- selective recomputation (attention scores recomputed): s·b·h·(10 + 24/t), or s·b·h·34/t with SP
- full recomputation (only the layer input kept): 2·s·b·h

With t = 1 the first two rows are the paper's s·b·h·(34 + 5·a·s/h).

The paper's worked configurations (Section 5): for GPT-3 (a = 96, s = 2048,
h = 12288) 5·a·s/h = 80, and selective recomputation saves 70% of the
activation memory; for MT-NLG (a = 128, h = 20480) the saving is 65%:

>>> def saving(**model):
...     full = activation_bytes_per_layer(**model)
...     return round(1 - activation_bytes_per_layer(**model, recompute="selective") / full, 2)
>>> saving(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96)
0.7
>>> saving(seq_len=2048, micro_batch_size=1, hidden=20480, heads=128)
0.65

The paper's "GB" is GiB (2**30 bytes). Its Appendix B prices s·b·h·p 2-byte
elements for the 530B model (p = 35 pipeline stages), p tensors the size of
the one layer input that full recomputation keeps, at "2.73 GB":

>>> kept = activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=20480,
...                                   heads=128, recompute="full")
>>> round(35 * kept / 2**30, 2), round(35 * kept / 10**9, 2)
(2.73, 2.94)

>>> activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96)
2868903936
>>> activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96,
...                            tp=8, sequence_parallel=True, recompute="selective")
106954752
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import check_choice, divisible, positive_int

__all__ = ["RECOMPUTE", "activation_bytes_per_layer"]

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation strategies of Korthikanti et al. (2022)."""


def activation_bytes_per_layer(
    *,
    seq_len: int,
    micro_batch_size: int,
    hidden: int,
    heads: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> int:
    """Bytes of activations one transformer layer keeps for backward, per GPU.

    The formulas are those of the module docstring (the paper's Table 2),
    rounded up to whole bytes.

    >>> activation_bytes_per_layer(seq_len=4, micro_batch_size=1, hidden=8, heads=2,
    ...                            recompute="full")
    64
    >>> activation_bytes_per_layer(seq_len=4, micro_batch_size=1, hidden=8, heads=3, tp=2)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 3 % 2 = 1

    Raises ``ValueError`` for a size below 1, heads not divisible by *tp*, or
    an unknown *recompute*.
    """
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    h = positive_int("hidden", hidden)
    a = positive_int("heads", heads)
    t = positive_int("tp", tp)
    mode = check_choice("recompute", recompute, RECOMPUTE)
    divisible("heads", a, "tp", t)
    sbh = s * b * h
    if mode == "full":
        total = Fraction(2 * sbh)
    elif sequence_parallel:
        total = sbh * Fraction(34, t)
        if mode == "none":
            total += sbh * Fraction(5 * a * s, h * t)
    else:
        total = sbh * (10 + Fraction(24, t))
        if mode == "none":
            total += sbh * Fraction(5 * a * s, h * t)
    return -(-total.numerator // total.denominator)
