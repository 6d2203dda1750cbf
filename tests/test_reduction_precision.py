"""Rounding of a ring reduction: bf16 hops against fp32 accumulation."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.reduction_precision import relative_error, ring_sum, round_bf16


@given(st.floats(-1e30, 1e30, allow_nan=False))
def test_bf16_rounding_keeps_the_top_sixteen_bits_and_is_nearest(x: float) -> None:
    r = round_bf16(x)
    (bits,) = struct.unpack(">I", struct.pack(">f", r))
    assert bits & 0xFFFF == 0
    assert round_bf16(r) == r
    assert abs(r - x) <= abs(x) * 2**-8 + 1e-38


def test_fp32_accumulation_beats_bf16_hops_at_every_degree() -> None:
    for n in (16, 256, 2048):
        grads = [1 + (i % 5) / 32 for i in range(n)]
        assert abs(relative_error(grads, "fp32-accumulate")) <= abs(relative_error(grads, "bf16"))
        assert abs(relative_error(grads, "fp32-accumulate")) <= 2**-8


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        ring_sum([1.0], "fp16")
    with pytest.raises(ValueError, match="x must be finite"):
        round_bf16(float("nan"))
    with pytest.raises(TypeError, match="x must"):
        round_bf16(float("inf"))
    with pytest.raises(ValueError, match="x must lie within fp32's range"):
        round_bf16(1e39)
