"""Properties and error paths of infralens.sharding."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import sharding

numels = st.integers(min_value=0, max_value=10_000)
worlds = st.integers(min_value=1, max_value=256)


@given(numels, worlds)
def test_chunks_cover_numel_exactly_once(numel: int, world: int) -> None:
    sizes = sharding.chunk_sizes(numel, world)
    offsets = sharding.chunk_offsets(numel, world)
    assert len(sizes) == len(offsets) == world
    assert sum(sizes) == numel
    covered = [i for off, size in zip(offsets, sizes, strict=True) for i in range(off, off + size)]
    assert covered == list(range(numel))  # every index once, in rank order


@given(numels, worlds)
def test_chunk_sizes_never_increase_with_rank(numel: int, world: int) -> None:
    sizes = sharding.chunk_sizes(numel, world)
    assert all(a >= b for a, b in itertools.pairwise(sizes))
    assert max(sizes) == sharding.padded_shard_size(numel, world)


@given(numels, worlds)
def test_padding_makes_equal_shards(numel: int, world: int) -> None:
    pad = sharding.padding(numel, world)
    assert 0 <= pad < world or numel == 0
    assert (numel + pad) % world == 0
    assert (numel + pad) // world == sharding.padded_shard_size(numel, world)


@given(numels, worlds)
def test_even_partition_requires_divisibility_or_pad(numel: int, world: int) -> None:
    if numel % world == 0:
        assert sharding.even_partition_size(numel, world) * world == numel
    else:
        with pytest.raises(ValueError, match="numel must be divisible by world_size"):
            sharding.even_partition_size(numel, world)
    assert sharding.even_partition_size(numel, world, pad=True) == sharding.padded_shard_size(
        numel, world
    )


def test_torch_chunk_convention_not_balanced_split() -> None:
    assert sharding.chunk_sizes(6, 4) == [2, 2, 2, 0]
    assert sharding.chunk_sizes(5, 4) == [2, 2, 1, 0]


@given(st.lists(st.integers(0, 50), min_size=1, max_size=4), worlds)
def test_shard_shape_splits_dim0_only(shape: list[int], world: int) -> None:
    rows = [sharding.shard_shape(shape, world, r) for r in range(world)]
    assert sum(r[0] for r in rows) == shape[0]
    assert all(r[1:] == tuple(shape[1:]) for r in rows)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: sharding.chunk_sizes(-1, 4), ValueError, "numel must be >= 0, got -1"),
        (lambda: sharding.chunk_sizes(4, 0), ValueError, "world_size must be >= 1, got 0"),
        (lambda: sharding.chunk_sizes(4.0, 2), TypeError, "numel must be an int, got float"),
        (lambda: sharding.chunk_offsets(4, True), TypeError, "world_size must be an int, got bool"),
        (lambda: sharding.padding(3, -2), ValueError, "world_size must be >= 1"),
        (lambda: sharding.padded_shard_size("8", 2), TypeError, "numel must be an int"),
        (lambda: sharding.shard_shape((), 2, 0), ValueError, "shape must have at least one"),
        (lambda: sharding.shard_shape((4, -1), 2, 0), ValueError, r"shape\[1\] must be >= 0"),
        (lambda: sharding.shard_shape((4,), 2, 2), ValueError, r"rank must be in range\(0, 2\)"),
        (lambda: sharding.even_partition_size(10, 4), ValueError, "10 % 4 = 2"),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
