"""Invariants, error paths and the overlap condition of infralens.ring_attention."""

from __future__ import annotations

import re
from math import ceil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.collectives import ring_bytes_sent
from infralens.ring_attention import (
    min_block_tokens,
    ring_kv_block_bytes,
    ring_schedule,
    ring_step,
)


@given(st.integers(1, 12))
def test_ring_blocks_arrive_from_the_previous_rank(cp: int) -> None:
    schedule = ring_schedule(cp)
    for r in range(cp):
        assert sorted(schedule[r]) == list(range(cp))  # every K/V block seen once
        assert schedule[r][0] == r
        for t in range(cp - 1):
            assert schedule[r][t + 1] == schedule[(r - 1) % cp][t]


@given(st.integers(1, 8), st.integers(1, 64), st.integers(1, 8), st.integers(1, 4))
def test_a_ring_pass_sends_what_an_all_gather_of_kv_sends(
    cp: int, tokens: int, kv_heads: int, batch: int
) -> None:
    # Llama 3 all-gathers K and V instead of rotating them: same bytes per rank.
    step = ring_step(
        cp * tokens,
        cp,
        kv_heads,
        kv_heads,
        8,
        flops_per_s=1,
        bandwidth_bytes_per_s=1,
        micro_batch=batch,
    )
    full_kv = 2 * batch * cp * tokens * kv_heads * 8 * 2
    assert step.bytes_per_layer == ring_bytes_sent("all_gather", full_kv, cp)


@given(
    st.integers(1, 8),
    st.sampled_from([(1, 1), (8, 8), (32, 8), (128, 8)]),
    st.integers(1, 2000),
    st.integers(1, 2000),
    st.booleans(),
)
def test_min_block_tokens_is_where_ring_steps_start_to_hide(
    cp: int, heads_kv: tuple[int, int], flops: int, bandwidth: int, causal: bool
) -> None:
    heads, kv = heads_kv
    rates = {"flops_per_s": flops, "bandwidth_bytes_per_s": bandwidth}
    threshold = min_block_tokens(heads, kv, causal=causal, **rates)
    c = ceil(threshold)
    assert ring_step(c * cp, cp, heads, kv, 4, causal=causal, **rates).hidden
    if c > 1:
        assert not ring_step((c - 1) * cp, cp, heads, kv, 4, causal=causal, **rates).hidden


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ring_schedule(0), "cp must be >= 1, got 0"),
        (lambda: ring_kv_block_bytes(10, 4, 1, 1), "seq_len must be divisible by cp: 10 % 4 = 2"),
        (lambda: ring_kv_block_bytes(8, 4, 0, 1), "kv_heads must be >= 1, got 0"),
        (
            lambda: ring_step(8, 2, 6, 4, 1, flops_per_s=1, bandwidth_bytes_per_s=1),
            "heads must be divisible by kv_heads: 6 % 4 = 2",
        ),
        (
            lambda: ring_step(8, 2, 4, 4, 1, flops_per_s=0, bandwidth_bytes_per_s=1),
            "flops_per_s must be > 0, got 0",
        ),
        (
            lambda: min_block_tokens(4, 4, flops_per_s=1, bandwidth_bytes_per_s=-1),
            "bandwidth_bytes_per_s must be > 0, got -1",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()  # type: ignore[operator]


def test_hybrid_context_parallel_keeps_the_ring_block_and_cuts_its_steps() -> None:
    from infralens.context_parallel import ulysses_bytes
    from infralens.ring_attention import hybrid_bytes, ring_kv_block_bytes

    shape = {"heads": 64, "kv_heads": 8, "head_dim": 128}
    pure_ring = hybrid_bytes(65536, ulysses=1, ring=16, **shape)
    assert pure_ring.all_to_all == 0
    assert pure_ring.ring == 15 * ring_kv_block_bytes(65536, 16, 8, 128)
    pure_ulysses = hybrid_bytes(65536, ulysses=8, ring=1, **shape)
    assert pure_ulysses.ring == 0
    assert pure_ulysses.all_to_all == ulysses_bytes(65536, 8, 64, 8, 128).total
    mixed = hybrid_bytes(65536, ulysses=4, ring=4, **shape)
    assert mixed.ring == 3 * ring_kv_block_bytes(65536, 16, 8, 128)
