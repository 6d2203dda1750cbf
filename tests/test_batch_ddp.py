"""Properties and error paths of infralens.batch and infralens.ddp."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import batch, ddp

pos = st.integers(1, 512)


@given(pos, pos, pos)
def test_accumulation_steps_invert_global_batch(b: int, k: int, d: int) -> None:
    g = batch.global_batch_size(micro_batch_size=b, grad_accum_steps=k, dp_size=d)
    assert g == b * k * d
    assert batch.grad_accum_steps_for(global_batch_size=g, micro_batch_size=b, dp_size=d) == k


@given(pos, pos, pos, pos)
def test_tokens_per_step_is_batch_times_sequence(b: int, k: int, d: int, s: int) -> None:
    tokens = batch.tokens_per_step(micro_batch_size=b, grad_accum_steps=k, dp_size=d, seq_len=s)
    assert tokens == batch.global_batch_size(micro_batch_size=b, grad_accum_steps=k, dp_size=d) * s


samples = st.tuples(st.integers(-20, 20), st.integers(-20, 20))


@given(st.integers(1, 6), st.integers(1, 4), st.data(), st.integers(-5, 5))
def test_ddp_average_equals_single_device_gradient_for_equal_slices(
    world: int, per_rank: int, data: st.DataObject, weight: int
) -> None:
    batch_ = data.draw(st.lists(samples, min_size=world * per_rank, max_size=world * per_rank))
    synced = ddp.ddp_gradients(weight, ddp.split_batch(batch_, world))
    assert synced == [ddp.mean_squared_error_grad(weight, batch_)] * world


def test_uneven_slices_differ_from_single_device() -> None:
    uneven = [[(1, 1)], [(3, 1), (3, 1), (3, 1)]]
    flat = [s for rank in uneven for s in rank]
    assert ddp.ddp_gradients(0, uneven)[0] != ddp.mean_squared_error_grad(0, flat)


def test_step_bytes_follow_the_ring_factor() -> None:
    step = ddp.DataParallelStep(
        dp_size=4, micro_batch_size=1, grad_accum_steps=3, num_params=100, bytes_per_grad=2
    )
    assert step.allreduce_bytes_per_rank() == Fraction(2 * 3, 4) * 200
    assert step.allreduce_bytes_per_rank(no_sync=False) == 3 * step.allreduce_bytes_per_rank()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: batch.global_batch_size(micro_batch_size=0, grad_accum_steps=1, dp_size=1),
            ValueError,
            "micro_batch_size must be >= 1, got 0",
        ),
        (
            lambda: batch.tokens_per_step(
                micro_batch_size=1, grad_accum_steps=1, dp_size=1, seq_len=0
            ),
            ValueError,
            "seq_len must be >= 1",
        ),
        (
            lambda: batch.grad_accum_steps_for(global_batch_size=10, micro_batch_size=4, dp_size=1),
            ValueError,
            r"10 % \(4 \* 1\) = 2",
        ),
        (
            lambda: batch.grad_accum_steps_for(global_batch_size=8, micro_batch_size=2, dp_size=-1),
            ValueError,
            "dp_size must be >= 1",
        ),
        (lambda: ddp.mean_squared_error_grad(1, []), ValueError, "samples must hold at least one"),
        (lambda: ddp.split_batch([1, 2, 3], 0), ValueError, "dp_size must be >= 1"),
        (lambda: ddp.split_batch([1, 2, 3], 2), ValueError, "3 % 2 = 1"),
        (lambda: ddp.ddp_gradients(1, []), ValueError, "per_rank_samples must hold at least one"),
        (lambda: ddp.ddp_gradients(1, [[(1, 1)], []]), ValueError, "samples must hold at least"),
        (
            lambda: ddp.DataParallelStep(
                dp_size=2, micro_batch_size=1, grad_accum_steps=1, num_params=0
            ),
            ValueError,
            "num_params must be >= 1",
        ),
        (
            lambda: ddp.DataParallelStep(
                dp_size=2, micro_batch_size=1, grad_accum_steps=1, num_params=1, bytes_per_grad=0
            ),
            ValueError,
            "bytes_per_grad must be >= 1",
        ),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
