"""Invariants and error paths of infralens.fsdp and infralens.fsdp_memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import sharding
from infralens.fsdp import (
    Unit,
    peak_live_units,
    step_events,
    unit_padded_numel,
    unit_shard_numel,
)
from infralens.fsdp_memory import peak_unsharded_bytes

shapes = st.lists(st.integers(1, 9), min_size=1, max_size=3).map(tuple)
unit_lists = st.lists(
    st.lists(shapes, min_size=1, max_size=3).map(lambda s: Unit("u", tuple(s))),
    min_size=0,
    max_size=6,
)


@given(unit_lists, st.booleans(), st.booleans())
def test_every_unit_is_gathered_computed_and_reduced(
    units: list[Unit], reshard: bool, prefetch: bool
) -> None:
    events = step_events(units, reshard_after_forward=reshard, backward_prefetch=prefetch)
    for i in range(len(units)):
        ops = [e.op for e in events if e.unit == i]
        assert ops.count("forward") == ops.count("backward") == ops.count("reduce_scatter") == 1
        assert ops.index("all_gather") < ops.index("forward") < ops.index("backward")
        assert ops.index("backward") < ops.index("reduce_scatter")
        assert ops.count("all_gather") == (2 if reshard and i < len(units) else 1)
    # a unit computes only while its full parameters are live
    live: set[int] = set()
    for e in events:
        if e.op == "all_gather":
            live.add(e.unit)
        elif e.op == "free":
            live.discard(e.unit)
        elif e.op in ("forward", "backward"):
            assert e.unit in live


@given(unit_lists)
def test_resharding_never_raises_the_peak(units: list[Unit]) -> None:
    assert peak_live_units(units) <= peak_live_units(units, reshard_after_forward=False)
    assert peak_unsharded_bytes(units, 4) <= peak_unsharded_bytes(
        units, 4, reshard_after_forward=False
    )


@given(shapes, st.integers(1, 16))
def test_shards_follow_torch_chunk_padding(shape: tuple[int, ...], world: int) -> None:
    unit = Unit("u", (shape,))
    rest = unit.numel // shape[0]
    assert unit_shard_numel(unit, world) == sharding.padded_shard_size(shape[0], world) * rest
    assert unit_padded_numel(unit, world) >= unit.numel


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: Unit("u", ()), ValueError, "must hold at least one shape"),
        (lambda: Unit("u", ((),)), ValueError, "must not hold a 0-d shape"),
        (lambda: Unit("u", ((3, -1),)), ValueError, "param_shapes of unit 'u' must be >= 0"),
        (lambda: unit_shard_numel(Unit("u", ((2,),)), 0), ValueError, "world_size must be >= 1"),
        (
            lambda: peak_unsharded_bytes([Unit("u", ((2,),))], 2, bytes_per_param=0),
            ValueError,
            "bytes_per_param must be >= 1",
        ),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
