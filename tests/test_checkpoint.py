"""Invariants and error paths of infralens.checkpoint."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.checkpoint import Chunk, RolloutCursor, check_complete, reshard_reads, save_layout


@given(st.integers(0, 200), st.integers(1, 16), st.integers(1, 16))
def test_every_row_is_read_exactly_once_after_resharding(rows: int, n: int, m: int) -> None:
    reads = reshard_reads(save_layout({"t": (rows, 2)}, n), m)
    covered = sorted(
        r.saved_offset + r.row_in_chunk + i
        for per_rank in reads
        for r in per_rank
        for i in range(r.rows)
    )
    assert covered == list(range(rows))
    for per_rank in reads:  # each loading rank fills its shard contiguously from row 0
        assert [r.row_in_dest for r in per_rank] == [
            sum(x.rows for x in per_rank[:k]) for k in range(len(per_rank))
        ]


def test_same_world_size_reads_each_chunk_whole() -> None:
    layout = save_layout({"t": (8,)}, 4)
    assert [[(r.saved_offset, r.rows) for r in rs] for rs in reshard_reads(layout, 4)] == [
        [(0, 2)], [(2, 2)], [(4, 2)], [(6, 2)]
    ]  # fmt: skip


def test_rollout_cursor_advances_one_by_one() -> None:
    cursor = RolloutCursor(policy_version=3, next_rollout=0)
    for i in range(3):
        cursor = cursor.accept(rollout=i, policy_version=3)
    assert cursor.next_rollout == 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: save_layout({"t": ()}, 2), "must have at least one dimension"),
        (lambda: save_layout({"t": (-1,)}, 2), "shape of 't' must be >= 0"),
        (lambda: save_layout({"t": (4,)}, 0), "world_size must be >= 1"),
        (
            lambda: reshard_reads({"t": [Chunk(0, 0, 2), Chunk(1, 3, 2)]}, 2),
            "starts at 3, expected 2",
        ),
        (
            lambda: reshard_reads({"t": [Chunk(0, 0, 2), Chunk(1, 1, 2)]}, 2),
            "without gaps or overlaps",
        ),
        (lambda: check_complete(["model"]), "checkpoint lacks optimizer"),
        (lambda: RolloutCursor(1, 5).accept(rollout=4, policy_version=1), "already consumed"),
        (lambda: RolloutCursor(1, 5).accept(rollout=6, policy_version=1), "skips ahead"),
        (lambda: RolloutCursor(3, 5).accept(rollout=5, policy_version=1), "is stale"),
    ],
)
def test_bad_input(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
