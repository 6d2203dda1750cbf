"""infralens.offload: transfer counts follow the shard, and the break-even point is exact."""

from __future__ import annotations

from fractions import Fraction

import pytest

from infralens import offload


@pytest.mark.parametrize("dp", [1, 2, 3, 8, 7])
def test_copies_scale_with_the_busiest_shard(dp: int) -> None:
    params = 1_000_003  # prime: every dp but 1 leaves a remainder
    shard = -(-params // dp)
    assert offload.optimizer_offload(params, dp_size=dp) == offload.Transfers(2 * shard, 2 * shard)
    fsdp = offload.fsdp2_cpu_offload(params, dp_size=dp)
    assert fsdp == offload.Transfers(8 * shard, 4 * shard)


def test_break_even_is_the_first_token_count_that_hides_the_copies() -> None:
    t = offload.Transfers(3 * 10**9, 10**9)
    kw = dict(params=7 * 10**8, flops_per_s=5 * 10**14, bandwidth_bytes_per_s=6 * 10**10)
    n = offload.break_even_tokens(t, **kw)
    copy = t.seconds(kw["bandwidth_bytes_per_s"])
    compute = offload.compute_seconds(kw["params"], n, kw["flops_per_s"])
    assert compute >= copy
    assert offload.compute_seconds(kw["params"], n - 1, kw["flops_per_s"]) < copy


def test_duplex_link_overlaps_the_directions() -> None:
    assert offload.Transfers(4, 9).seconds(3) == Fraction(3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: offload.optimizer_offload(0), "params"),
        (lambda: offload.fsdp2_cpu_offload(10, dp_size=0), "dp_size"),
        (lambda: offload.fsdp2_cpu_offload(10, dp_size=2, all_gathers=0), "all_gathers"),
        (lambda: offload.Transfers(-1, 0), "host_to_device"),
        (lambda: offload.compute_seconds(1, 1, 0), "flops_per_s"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
