"""Critical batch and batch ramps: the steps-data hyperbola, Kaplan's fit, a ramp on a plan."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.batch_ramp import batch_tradeoff, critical_batch_tokens, ramp_stage
from infralens.pipeline import bubble_fraction


@given(st.integers(1, 10**6), st.integers(1, 10**6))
def test_tradeoff_lies_on_mccandlish_hyperbola(batch: int, critical: int) -> None:
    steps, data = batch_tradeoff(batch=batch, critical=critical)
    assert (steps - 1) * (data - 1) == 1
    # E = B * S: data over steps is the batch over the critical batch's ratio
    assert data / steps == Fraction(batch, critical)


def test_critical_batch_grows_as_loss_falls() -> None:
    values = [critical_batch_tokens(x) for x in (4.0, 3.0, 2.5, 2.0)]
    assert values == sorted(values)
    # Kaplan eq. 1.4 at L = 1 is B* itself
    assert critical_batch_tokens(1.0) == pytest.approx(2e8)


@given(
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.integers(1, 64),
    st.integers(1, 32),
    st.sampled_from([1, 2]),
)
def test_ramp_stage_covers_the_batch(tp: int, pp: int, dp: int, m: int, b: int) -> None:
    seq = 4096
    gpus = tp * pp * dp
    tokens = dp * m * b * seq
    s = ramp_stage(tokens, seq_len=seq, gpus=gpus, tp=tp, pp=pp, micro_batch=b)
    assert s.dp == dp and s.microbatches == m and s.per_replica == m * b
    assert s.tokens_per_gpu * gpus == tokens
    assert s.bubble == bubble_fraction(stages=pp, microbatches=m)
    assert s.fills_pipeline == (m >= pp)


def test_doubling_the_batch_halves_the_bubble_at_fixed_dp() -> None:
    small = ramp_stage(8 * 2**20, seq_len=8192, gpus=16384, tp=8, pp=16)
    large = ramp_stage(16 * 2**20, seq_len=8192, gpus=16384, tp=8, pp=16)
    assert large.bubble * 2 == small.bubble and large.dp == small.dp


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="critical must be > 0"):
        batch_tradeoff(batch=1, critical=0)
    with pytest.raises(ValueError, match="gpus must be divisible by tp"):
        ramp_stage(2**20, seq_len=4096, gpus=100, tp=8, pp=16)
    with pytest.raises(ValueError, match="batch_tokens must be divisible by seq_len"):
        ramp_stage(1000, seq_len=4096, gpus=128, tp=8, pp=16)
    with pytest.raises(ValueError, match=r"loss must be between 0\.001 and 1000 nats"):
        critical_batch_tokens(-1.0)
    with pytest.raises(TypeError):
        ramp_stage(2.5, seq_len=4096, gpus=128, tp=8, pp=16)  # type: ignore[arg-type]
