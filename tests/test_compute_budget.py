"""Compute budgets: C = 6ND, Chinchilla's Table 3 row by row, GPU-hours, over-training."""

from __future__ import annotations

from decimal import Decimal

import pytest

from infralens.compute_budget import (
    APPROACH1_EXPONENT,
    chinchilla_budget,
    compute_optimal,
    gpu_hours,
    lifetime_flops,
    overtraining_factor,
    tokens_per_parameter,
    training_flops,
)

# Hoffmann et al. 2022 (arXiv 2203.15556), Table 3 (Approach 1), as printed:
# parameters, FLOPs, tokens.
TABLE_3 = [
    (400e6, "1.92e19", "8.0e9"),
    (1e9, "1.21e20", "20.2e9"),
    (10e9, "1.23e22", "205.1e9"),
    (67e9, "5.76e23", "1.5e12"),
    (175e9, "3.85e24", "3.7e12"),
    (280e9, "9.90e24", "5.9e12"),
    (520e9, "3.43e25", "11.0e12"),
    (1e12, "1.27e26", "21.2e12"),
    (10e12, "1.30e28", "216.2e12"),
]
GOPHER_FLOPS = 5.76e23  # the 67B row is Gopher's budget ("1" in Gopher units)


def half_unit(printed: str) -> float:
    """Half a unit in the last printed digit: the rounding a printed value hides."""
    exponent = Decimal(printed).as_tuple().exponent
    assert isinstance(exponent, int)
    return float(Decimal(5).scaleb(exponent - 1))


def test_half_unit() -> None:
    assert half_unit("1.92e19") == pytest.approx(0.005e19)
    assert half_unit("205.1e9") == pytest.approx(0.05e9)


@pytest.mark.parametrize(("params", "flops", "tokens"), TABLE_3)
def test_table_3_row(params: float, flops: str, tokens: str) -> None:
    got_flops, got_tokens = chinchilla_budget(params)
    if float(flops) == GOPHER_FLOPS:
        # The Gopher row prints Gopher's own budget, not the fit's, and its
        # tokens are not C/(6N): 6 * 67e9 * 1.5e12 = 6.03e23, not 5.76e23.
        assert 6 * params * float(tokens) == pytest.approx(6.03e23)
        # From the budget side, the fit's model at Gopher's budget rounds to
        # 68B, and 1.41T tokens: the printed row is within 3 % of the fit.
        n, d = compute_optimal(GOPHER_FLOPS)
        assert abs(n - params) / params < 0.015 and abs(d - float(tokens)) / d < 0.07
        assert abs(got_flops - GOPHER_FLOPS) / GOPHER_FLOPS < 0.03
        return
    assert abs(got_flops - float(flops)) <= half_unit(flops), (params, got_flops)
    assert abs(got_tokens - float(tokens)) <= half_unit(tokens), (params, got_tokens)


def test_exponent_rounds_to_the_papers_and_lies_in_its_interval() -> None:
    assert round(APPROACH1_EXPONENT, 2) == 0.50
    assert 0.488 <= APPROACH1_EXPONENT <= 0.502


@pytest.mark.parametrize("params", [1e8, 4e8, 7e10, 1e13])
def test_budget_and_optimum_are_inverses(params: float) -> None:
    flops, tokens = chinchilla_budget(params)
    n, d = compute_optimal(flops)
    assert n == pytest.approx(params, rel=1e-9) and d == pytest.approx(tokens, rel=1e-9)
    assert training_flops(n, d) == pytest.approx(flops, rel=1e-9)


def test_tokens_per_parameter_grows_slowly_with_size() -> None:
    ratios = [chinchilla_budget(p)[1] / p for p in (4e8, 1e10, 1e12, 1e13)]
    assert ratios == sorted(ratios) and ratios[0] > 19.9 and ratios[-1] < 21.7


def test_gpu_hours_scale_inversely_with_mfu() -> None:
    a = gpu_hours(1e24, peak_flops=989e12, mfu=0.5)
    b = gpu_hours(1e24, peak_flops=989e12, mfu=0.25)
    assert b == pytest.approx(2 * a)
    assert a == pytest.approx(1e24 / (989e12 * 0.5) / 3600)


def test_overtraining_and_serving() -> None:
    assert overtraining_factor(10e9, chinchilla_budget(10e9)[1]) == pytest.approx(1.0)
    assert tokens_per_parameter(8e9, 15e12) == 1875
    # With no serving the compute-optimal model is the cheaper one to train for
    # its loss; with heavy serving the half-size model trained 4x longer wins.
    assert lifetime_flops(35e9, train_tokens=5.6e12, served_tokens=0) > lifetime_flops(
        70e9, train_tokens=1.4e12, served_tokens=0
    )
    assert lifetime_flops(35e9, train_tokens=5.6e12, served_tokens=1e14) < lifetime_flops(
        70e9, train_tokens=1.4e12, served_tokens=1e14
    )


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="params must be > 0"):
        training_flops(0, 1.0)
    with pytest.raises(ValueError, match="tokens must be > 0"):
        tokens_per_parameter(1.0, -1.0)
    with pytest.raises(ValueError, match="mfu must be in"):
        gpu_hours(1.0, peak_flops=1.0, mfu=0)
    with pytest.raises(ValueError, match="flops must be > 0"):
        compute_optimal(-5.0)
    with pytest.raises(TypeError):
        chinchilla_budget("1e9")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="served_tokens"):
        lifetime_flops(1.0, train_tokens=1.0, served_tokens=float("nan"))
