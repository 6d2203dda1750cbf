"""Precision of a gradient reduction: why a bf16 sum loses more as the data-parallel degree grows.

A ring reduce-scatter adds the d ranks' contributions to a chunk one hop at a
time, and each hop stores the partial sum in the wire dtype. bf16 keeps 8
significant bits, so a partial sum is rounded to 1 part in 2⁸–2⁹; when every
rank's gradient has the same sign the partial sum grows d-fold, and once it is
256 times a contribution, adding that contribution rounds away entirely. The
modes this module compares:

- ``"bf16"``: bf16 on the wire, bf16 accumulation (a plain bf16 all-reduce);
- ``"fp32-accumulate"``: bf16 on the wire, fp32 accumulation where the chunk
  lands (Megatron-Core's ``--ddp-reduce-scatter-with-fp32-accumulation``, an
  all-to-all of bf16 values summed locally in fp32), rounded to bf16 once;
- ``"fp32"``: fp32 on the wire and in the sum (Megatron's bf16 default,
  ``accumulate_allreduce_grads_in_fp32``; FSDP2's ``reduce_dtype=torch.float32``).

Floats are rounded with ``struct`` (round to nearest even), so the numbers are
exactly what the hardware formats give.

>>> grads = [1 + (i % 7) / 64 for i in range(512)]    # 512 ranks, same sign
>>> round(relative_error(grads, "bf16"), 4)
-0.0447
>>> round(relative_error(grads, "fp32-accumulate"), 6)
8.7e-05
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

from infralens._typecheck import typed
from infralens._validate import check_choice

__all__ = ["MODES", "relative_error", "ring_sum", "round_bf16", "round_fp32"]

MODES = ("bf16", "fp32-accumulate", "fp32")

FP32_MAX = 3.4028234663852886e38
"""The largest finite fp32 value, (2 − 2⁻²³) · 2¹²⁷; bf16 shares its exponent range."""


@typed
def round_fp32(x: float) -> float:
    """*x* rounded to the nearest fp32 value.

    >>> round_fp32(0.1)
    0.10000000149011612
    >>> round_fp32(1e39)
    Traceback (most recent call last):
    ...
    ValueError: x must lie within fp32's range (|x| <= 3.4028234663852886e+38), got 1e+39

    Raises ``ValueError`` for a non-finite value or one beyond fp32's largest.
    """
    if not math.isfinite(x):
        raise ValueError(f"x must be finite, got {x}")
    if abs(x) > FP32_MAX:
        raise ValueError(
            f"x must lie within fp32's range (|x| <= {FP32_MAX}), got {x}"
        )
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


@typed
def round_bf16(x: float) -> float:
    """*x* rounded to the nearest bf16 value (ties to even), via its fp32 bits.

    bf16 keeps fp32's sign and 8 exponent bits and the top 7 of its 23 fraction bits.

    >>> round_bf16(1 + 2**-8), round_bf16(1 + 3 * 2**-8)   # ties go to the even neighbour
    (1.0, 1.015625)
    >>> round_bf16(256.0 + 1.0)                            # spacing 2 above 256
    256.0
    >>> round_bf16(float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: x must be finite, got nan

    Raises ``ValueError`` for a NaN or infinite value or one beyond fp32's range
    (a finite value that rounds past bf16's largest becomes ``inf``, as in IEEE).
    """
    (bits,) = struct.unpack(">I", struct.pack(">f", round_fp32(x)))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(struct.unpack(">f", struct.pack(">I", bits))[0])


@typed
def ring_sum(values: Sequence[float], mode: str = "bf16") -> float:
    """The sum a ring reduction leaves for one chunk, hop by hop, in *mode*.

    bf16: s ← bf16(s + bf16(v)) at every hop; fp32-accumulate: the bf16 values summed
    in fp32, rounded to bf16 once; fp32: s ← fp32(s + fp32(v)).

    >>> ring_sum([1.0] * 512)                       # stalls at 256: 256 + 1 rounds to 256
    256.0
    >>> ring_sum([1.0] * 512, "fp32-accumulate"), ring_sum([1.0] * 512, "fp32")
    (512.0, 512.0)
    >>> ring_sum([], "bf16")
    Traceback (most recent call last):
    ...
    ValueError: values must hold one gradient per rank, got none

    Raises ``ValueError`` for no values, a non-finite value or an unknown *mode*.
    """
    name = check_choice("mode", mode, MODES)
    if not values:
        raise ValueError("values must hold one gradient per rank, got none")
    # [start:ring-hops]
    if name == "fp32":
        total = round_fp32(values[0])
        for v in values[1:]:  # each hop adds one rank in fp32
            total = round_fp32(total + round_fp32(v))
        return total
    wire = [round_bf16(v) for v in values]  # what each rank sends
    total = wire[0]
    for v in wire[1:]:
        # bf16: the partial sum is stored in bf16 after every hop
        total = round_fp32(total + v) if name != "bf16" else round_bf16(total + v)
    return total if name == "bf16" else round_bf16(total)
    # [end:ring-hops]


@typed
def relative_error(values: Sequence[float], mode: str = "bf16") -> float:
    """(ring_sum − exact sum) / exact sum, the exact sum taken in Python's float64.

    >>> relative_error([1.0] * 512)
    -0.5
    >>> relative_error([1.0, -1.0])
    Traceback (most recent call last):
    ...
    ValueError: values must not sum to zero

    Raises what :func:`ring_sum` raises, and ``ValueError`` when the values sum to 0.
    """
    exact = math.fsum(values)
    if exact == 0:
        raise ValueError("values must not sum to zero")
    return (ring_sum(values, mode) - exact) / exact
