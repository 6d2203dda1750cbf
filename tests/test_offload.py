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
        (lambda: offload.cpu_adam_seconds(10, ranks_per_host=0), "ranks_per_host"),
        (lambda: offload.cpu_adam_seconds(10, params_per_s=Fraction(0)), "params_per_s"),
        (lambda: offload.cpu_adam_break_even_tokens(10, flops_per_s=0), "flops_per_s"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(("dp", "per_host"), [(1, 1), (8, 8), (64, 8), (7, 3)])
def test_cpu_adam_break_even_is_the_first_token_count_that_covers_the_host_step(
    dp: int, per_host: int
) -> None:
    params, flops = 1_000_003, 3 * 10**13
    host = offload.cpu_adam_seconds(params, dp_size=dp, ranks_per_host=per_host)
    # the host updates per_host shards of the busiest size at the measured rate
    assert host == per_host * -(-params // dp) / offload.CPU_ADAM_PARAMS_PER_S
    n = offload.cpu_adam_break_even_tokens(
        params, dp_size=dp, ranks_per_host=per_host, flops_per_s=flops
    )
    assert offload.compute_seconds(params, n, flops) >= host
    assert offload.compute_seconds(params, n - 1, flops) < host


def test_the_cpu_adam_rate_is_the_measurement() -> None:
    # DeepSpeed's CPU-Adam: 11.6B parameters in 8.2 s
    assert offload.cpu_adam_seconds(11_600_000_000) == Fraction(82, 10)
