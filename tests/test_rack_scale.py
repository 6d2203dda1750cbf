"""Rack-scale NVLink (GB200 NVL72) against DGX H100 nodes: the claims of Section 08."""

from __future__ import annotations

import math

import pytest

from infralens.collectives import ring_bytes_sent
from infralens.hardware import SYSTEMS
from infralens.nccl import predict
from infralens.tensor_parallel_comm import layer_seconds
from infralens.topology import Cluster

RACK = Cluster.from_node_shape("18_nodes_x_4_gpus", "gb200-nvl72")
RACKS = Cluster.from_node_shape("36_nodes_x_4_gpus", "gb200-nvl72")
DGX = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")


def test_the_rack_datasheet_figures_reach_the_tiers() -> None:
    # GB200 NVL72: 1.8 TB/s of NVLink 5 per GPU in total, 900 GB/s each way.
    assert RACK.intra.bandwidth_bytes_per_s * 2 == 1800 * 10**9
    # one 400 Gb/s adapter per GPU: the DGX H100's per-GPU share of its adapters
    assert RACK.inter == DGX.inter


@pytest.mark.parametrize("op", ["all_to_all", "all_reduce"])
def test_a_64_way_group_stays_on_nvlink_only_in_the_rack(op: str) -> None:
    group = range(64)
    assert RACK.tier_of(group).name == "nvlink"
    assert DGX.tier_of(group).name == "network"
    rack, dgx = (predict(op, 2**28, x, ranks=group) for x in (RACK, DGX))
    assert rack.seconds < dgx.seconds
    # the rack's NVLink is twice an H100's per GPU; the DGX group's network share is
    # far below NVLink, so the all-to-all (no reduction inside a node) gains the most
    if op == "all_to_all":
        assert dgx.seconds / rack.seconds > 2 * RACK.intra.bandwidth_bytes_per_s / (
            DGX.intra.bandwidth_bytes_per_s
        )


def test_tp_communication_per_layer_does_not_shrink_with_tp_on_nvlink() -> None:
    kw = dict(params_per_layer=12 * 8192**2, seq_len=8192, micro_batch_size=1, hidden=8192,
              matmul_flops_per_s=RACK.system.gpu.bf16_flops, sequence_parallel=True)  # fmt: skip
    by_t = {t: layer_seconds(cluster=RACK, tp_group=range(t), **kw) for t in (4, 8, 16, 32, 64)}
    for small, big in ((4, 8), (8, 16), (16, 32), (32, 64)):
        assert by_t[big].compute * 2 == by_t[small].compute
        # bytes per rank grow as (t-1)/t; the time does not halve with them
        assert by_t[big].communication > by_t[small].communication / 2
        assert ring_bytes_sent("all_gather", 1, big) > ring_bytes_sent("all_gather", 1, small)


@pytest.mark.parametrize("t", [2, 3, 4, 6, 8, 9, 12, 16, 18, 24, 32, 36, 64, 72])
def test_a_degree_that_divides_72_never_straddles_two_racks(t: int) -> None:
    starts = range(0, RACKS.world_size - t + 1, t)
    straddling = [g for g in starts if RACKS.tier_of(range(g, g + t)).name == "network"]
    assert (not straddling) == (72 % t == 0)
    # the groups that straddle are those whose span contains a multiple of 72
    assert straddling == [g for g in starts if g // 72 != (g + t - 1) // 72]


def test_between_racks_an_all_reduce_costs_what_it_costs_between_dgx_nodes() -> None:
    for nbytes in (2**20, 10**9):
        rack = predict("all_reduce", nbytes, RACKS, ranks=[0, 72])
        dgx = predict("all_reduce", nbytes, DGX, ranks=[0, 8])
        assert math.isclose(rack.seconds, dgx.seconds)
    assert SYSTEMS["gb200-nvl72"].nvlink_domain % SYSTEMS["gb200-nvl72"].gpus_per_node == 0
