"""Checkpoint writes: every distinct shard written once, balanced over its holders, timed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.checkpoint_writes import (
    Shard,
    balanced_writers,
    layout_shards,
    main_replica_writers,
    write_seconds,
)


@given(st.integers(1, 4), st.sampled_from([1, 2, 4, 8]), st.integers(1, 4), st.integers(1, 8))
def test_each_shard_is_written_once_and_balancing_never_hurts(
    layers: int, tp: int, pp: int, dp: int
) -> None:
    shards = layout_shards(
        layers_per_stage=layers, layer_bytes=tp * 1000, norm_bytes=16, tp=tp, pp=pp, dp=dp
    )
    world = tp * pp * dp
    # every rank holds something and no shard is held twice by one rank
    held = {r for s in shards for r in s.ranks}
    assert held == set(range(world))
    assert all(len(set(s.ranks)) == len(s.ranks) for s in shards)
    naive = main_replica_writers(shards, world_size=world)
    fair = balanced_writers(shards, world_size=world)
    total = sum(s.nbytes for s in shards)
    assert sum(naive) == sum(fair) == total
    assert max(fair) <= max(naive)
    if dp > 1:
        # without balancing only data-parallel rank 0 writes: dp - 1 of every dp ranks idle
        assert naive.count(0) == world - world // dp


def test_balanced_writers_matches_the_greedy_rule_by_hand() -> None:
    # sizes 5, 3, 3 on ranks {0, 1}: 5 -> rank 0, 3 -> rank 1, 3 ('c') -> rank 1
    shards = [Shard("a", 5, (0, 1)), Shard("b", 3, (0, 1)), Shard("c", 3, (0, 1))]
    assert balanced_writers(shards, world_size=2) == (5, 6)
    # a shard held by one rank is placed first, whatever its size
    shards = [Shard("big", 10, (0, 1)), Shard("only0", 1, (0,))]
    assert balanced_writers(shards, world_size=2) == (1, 10)


def test_write_time_is_the_slower_limit() -> None:
    per_rank = [2 * 10**9] * 8 + [0] * 8  # one busy node, one idle
    # node limit: 16 GB at 25 GB/s = 0.64 s; storage: 16 GB at 100 GB/s = 0.16 s
    assert write_seconds(
        per_rank, gpus_per_node=8, node_gb_per_s=25, storage_gb_per_s=100
    ) == pytest.approx(0.64)
    balanced = [10**9] * 16
    assert write_seconds(
        balanced, gpus_per_node=8, node_gb_per_s=25, storage_gb_per_s=100
    ) == pytest.approx(0.32)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="ranks must name at least one"):
        Shard("w", 1, ())
    with pytest.raises(ValueError, match="per_rank_bytes must be >= 0"):
        write_seconds([-1, 0], gpus_per_node=2, node_gb_per_s=1, storage_gb_per_s=1)
    with pytest.raises(ValueError, match="storage_gb_per_s must be > 0"):
        write_seconds([1, 0], gpus_per_node=2, node_gb_per_s=1, storage_gb_per_s=0)
    with pytest.raises(ValueError, match="tp must be >= 1"):
        layout_shards(layers_per_stage=1, layer_bytes=4, norm_bytes=1, tp=0, pp=1, dp=1)
