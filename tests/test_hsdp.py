"""infralens.hsdp: HSDP trades model state per GPU for bytes that cross nodes."""

from __future__ import annotations

import pytest

from infralens.fsdp import Unit
from infralens.hsdp import sharding_step
from infralens.topology import Cluster


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sharding_step(Cluster(1, 4), [], shard=2), "units"),
        (lambda: sharding_step(Cluster(1, 4), [Unit("u", ((4,),))], shard=3), "divisible"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_hsdp_trades_state_for_cross_node_bytes() -> None:
    cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    units = [Unit(f"l{i}", ((4096 * 4096 * 12,),)) for i in range(8)]
    steps = {s: sharding_step(cluster, units, shard=s) for s in (8, 16, 32, 64)}
    # state per GPU falls as the shard group grows ...
    states = [steps[s].state_bytes for s in (8, 16, 32, 64)]
    assert states == sorted(states, reverse=True)
    assert states[0] == 8 * states[-1]
    # ... and only a shard group that stays in the node keeps its gathers on NVLink
    links = {s: {c.link for c in steps[s].collectives if c.dim == "shard"} for s in steps}
    assert links[8] == {"nvlink"} and links[16] == {"network"}
    assert not [c for c in steps[64].collectives if c.dim == "replicate"]
