"""infralens.topology and infralens.design: tiers, collective times, the worksheet."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from infralens.design import Workload, compare, fill_worksheet, render_markdown
from infralens.plan import ParallelPlan
from infralens.topology import (
    CLUSTER_PRESETS,
    Cluster,
    collective_seconds,
    hierarchical_all_reduce_seconds,
    parse_node_shape,
)

GB = 10**9
H100 = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
WORK = Workload(
    num_params=68_976_648_192, layers=80, hidden=8192, heads=64, seq_len=4096,
    micro_batch_size=1, global_batch_size=512,
)  # fmt: skip


def test_presets_carry_the_cited_per_direction_bandwidths() -> None:
    intra, inter = CLUSTER_PRESETS["dgx-h100"]
    assert intra.bandwidth_bytes_per_s * 2 == 900 * GB  # NVLink 4: 900 GB/s in total
    assert inter.bandwidth_bytes_per_s * 8 == 400 * GB  # 400 Gb/s ConnectX-7 per GPU
    intra, inter = CLUSTER_PRESETS["dgx-a100"]
    assert intra.bandwidth_bytes_per_s * 2 == 600 * GB
    assert inter.bandwidth_bytes_per_s * 8 == 200 * GB


def test_a_ring_is_bound_by_its_slowest_link() -> None:
    inside = collective_seconds("all_reduce", GB, range(8), H100)
    spanning = collective_seconds("all_reduce", GB, [0, 1, 2, 3, 4, 5, 6, 8], H100)
    assert spanning > 5 * inside  # one inter-node hop puts the whole ring on the network


def test_hierarchical_all_reduce_beats_a_flat_ring_across_nodes() -> None:
    flat = collective_seconds("all_reduce", GB, range(64), H100)
    assert hierarchical_all_reduce_seconds(GB, H100) < flat
    one_node = Cluster.from_node_shape("1_node_x_8_gpus")
    assert hierarchical_all_reduce_seconds(GB, one_node) > 0


def test_worksheet_names_links_and_memory() -> None:
    sheet = fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2), H100, WORK)
    assert {r.axis: r.placement for r in sheet.axes} == {
        "tp": "nvlink",
        "pp": "network",
        "dp": "network",
    }
    assert sheet.microbatches == 256
    assert sheet.bubble_fraction == Fraction(3, 256)
    assert [r.collective for r in sheet.comms if r.axis == "dp"] == ["reduce_scatter", "all_gather"]
    text = render_markdown(sheet)
    assert "| TP | 8 | nvlink |" in text and "expected bottleneck" in text


def test_moving_tp_across_nodes_makes_it_the_slow_link() -> None:
    good = fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2), H100, WORK)
    bad = fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2, order="dp-tp-cp-pp"), H100, WORK)
    tp_time = {s: next(r.seconds_per_step for r in s.comms if r.axis == "tp") for s in (good, bad)}
    assert tp_time[bad] > 5 * tp_time[good]


def test_zero3_gathers_per_wrapped_unit() -> None:
    w = Workload(**{**WORK.__dict__, "zero_stage": 3})
    sheet = fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2), H100, w)
    frequencies = [r.frequency for r in sheet.comms if r.axis == "dp"]
    assert sum("per wrapped unit" in f for f in frequencies) == 2
    assert len(compare([ParallelPlan(tp=8, pp=8), ParallelPlan(tp=8, pp=4, dp=2)], H100, WORK)) == 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_node_shape("8x8"), "node_shape must look like"),
        (lambda: Cluster.from_node_shape("1_node_x_8_gpus", "tpu"), "preset must be one of"),
        (lambda: H100.tier_of([]), "ranks must hold at least one rank"),
        (lambda: H100.node_of(64), "rank must be < world_size 64"),
        (lambda: collective_seconds("all_reduce", -1, [0, 1], H100), "nbytes must be >= 0"),
        (lambda: fill_worksheet(ParallelPlan(tp=8, pp=4), H100, WORK), "= 32 != 64"),
        (lambda: fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2, ep=2), H100, WORK), "ep must be 1"),
        (lambda: Workload(**{**WORK.__dict__, "zero_stage": 5}), "zero_stage must be one of"),
        (lambda: Workload(**{**WORK.__dict__, "recompute": "some"}), "recompute must be one of"),
        (lambda: Workload(**{**WORK.__dict__, "layers": 0}), "layers must be >= 1"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_topology_notes_table_matches_the_presets() -> None:
    notes = Path(__file__).resolve().parents[1] / "labs_src" / "starters" / "topology_notes.md"
    rows = [
        line.split("|")[1:-1] for line in notes.read_text().splitlines() if line.startswith("| dgx")
    ]
    assert {r[0].strip() for r in rows} == set(CLUSTER_PRESETS)
    for cells in rows:
        intra, inter = CLUSTER_PRESETS[cells[0].strip()]
        assert int(cells[2]) * GB == intra.bandwidth_bytes_per_s
        assert int(cells[4]) * GB == inter.bandwidth_bytes_per_s


def test_unknown_op_is_rejected_even_for_one_rank() -> None:
    with pytest.raises(ValueError, match="op must be one of"):
        collective_seconds("bogus", 10, [3], H100)


def test_llama3_figure_5_placement() -> None:
    # Llama 3 paper, Figure 5: TP 2, CP 2, PP 2, DP 2 on 16 GPUs in the order
    # [TP, CP, PP, DP]: GPU 0 shares TP with 1, CP with 2, PP with 4, DP with 8.
    plan = ParallelPlan(tp=2, cp=2, pp=2, dp=2, order="tp-cp-pp-dp")
    assert [plan.groups(axis)[0] for axis in ("tp", "cp", "pp", "dp")] == [
        [0, 1], [0, 2], [0, 4], [0, 8]
    ]  # fmt: skip
