"""GEMM roofline arithmetic: intensity, ridge point, tile and wave quantisation."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.gemm import arithmetic_intensity, quantisation, ridge_point
from infralens.roofline import dp_tokens_per_gpu

dims = st.integers(1, 20_000)


@given(dims, dims, dims)
def test_intensity_is_below_the_smallest_dimension_over_bytes(m: int, n: int, k: int) -> None:
    # 2mnk / (2(mk + kn + mn)) < min(m, n, k): no GEMM beats its thinnest side
    assert arithmetic_intensity(m, n, k) < min(m, n, k)


@given(dims, dims, st.integers(1, 300))
def test_tiles_cover_the_output_and_waves_cover_the_tiles(m: int, n: int, sms: int) -> None:
    q = quantisation(m, n, sms=sms)
    assert q.tiles * 128 * 256 >= m * n
    assert (q.waves - 1) * sms < q.tiles <= q.waves * sms
    assert 0 < q.efficiency <= 1


def test_the_h100_ridge_point_and_a_full_wave() -> None:
    assert round(ridge_point(989_500 * 10**9, 3_350 * 10**9)) == 295
    assert quantisation(128 * 132, 256).wave_efficiency == 1
    assert quantisation(128 * 133, 256).wave_efficiency == Fraction(133, 264)


def test_model_parallelism_divides_the_dp_threshold_and_moe_multiplies_it() -> None:
    base = dp_tokens_per_gpu(1000.0)
    assert dp_tokens_per_gpu(1000.0, model_parallel=8) == pytest.approx(base / 8)
    assert dp_tokens_per_gpu(1000.0, total_to_active=4) == pytest.approx(base * 4)
    with pytest.raises(ValueError, match="total_to_active must be >= 1"):
        dp_tokens_per_gpu(1000.0, total_to_active=0.5)
    with pytest.raises(ValueError, match="machine_flops_per_byte must be > 0"):
        dp_tokens_per_gpu(0.0)
