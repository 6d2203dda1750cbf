"""Invariants, error paths and paper formulas of infralens.context_parallel.

The ring's K/V exchange is tested in tests/test_ring_attention.py.
"""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.context_parallel import (
    LAYOUTS,
    activation_bytes_per_rank,
    causal_work,
    chunk_order,
    token_ranges,
    ulysses_bytes,
    ulysses_placement,
)
from infralens.memory import activation_bytes_per_layer

layouts = st.sampled_from(LAYOUTS)


@given(st.integers(1, 200), st.integers(1, 12), layouts)
def test_every_token_is_owned_by_exactly_one_rank(seq_len: int, cp: int, layout: str) -> None:
    owned = [
        t for ranges in token_ranges(seq_len, cp, layout) for a, b in ranges for t in range(a, b)
    ]
    assert sorted(owned) == list(range(seq_len))


@given(st.integers(1, 120), st.integers(1, 8), layouts)
def test_causal_work_counts_the_unmasked_pairs_of_the_mask(
    seq_len: int, cp: int, layout: str
) -> None:
    brute = tuple(
        sum(1 for a, b in ranges for q in range(a, b) for k in range(seq_len) if k <= q)
        for ranges in token_ranges(seq_len, cp, layout)
    )
    assert causal_work(seq_len, cp, layout) == brute
    assert sum(brute) == seq_len * (seq_len + 1) // 2


@given(st.integers(1, 16), st.integers(1, 30))
def test_load_balanced_layout_gives_every_rank_equal_causal_work(cp: int, chunk: int) -> None:
    work = causal_work(2 * cp * chunk, cp, "load_balanced")
    assert len(set(work)) == 1


@pytest.mark.parametrize("cp", [2, 4, 8, 16])
def test_contiguous_split_is_imbalanced_by_4cp_minus_1_over_3_in_blocks(cp: int) -> None:
    # With 2*cp blocks, rank i owns blocks 2i and 2i+1: (2i+1) + (2i+2) block pairs.
    work = causal_work(2 * cp, cp)
    assert work == tuple(4 * i + 3 for i in range(cp))
    assert Fraction(max(work), min(work)) == Fraction(4 * cp - 1, 3)
    assert causal_work(2 * cp, cp, "load_balanced") == (2 * cp + 1,) * cp


@given(st.integers(1, 16))
def test_chunk_order_pairs_head_and_tail(cp: int) -> None:
    order = chunk_order(cp)
    assert sorted(order) == list(range(2 * cp))
    assert all(order[2 * i] + order[2 * i + 1] == 2 * cp - 1 for i in range(cp))


@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 6), st.integers(1, 4))
def test_ulysses_placement_gives_each_rank_all_tokens_of_its_heads(
    cp: int, tokens: int, groups: int
) -> None:
    heads = cp * groups
    placed = ulysses_placement(cp * tokens, cp, heads)
    for j, row in enumerate(placed):
        assert row == [
            (t, h) for t in range(cp * tokens) for h in range(j * groups, (j + 1) * groups)
        ]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_ulysses_volume_is_the_papers_4nh_over_p_times_p_minus_1_over_p(cp: int) -> None:
    # Jacobs et al. (2023): 3Nh for the Q, K, V all-to-alls plus Nh for the output,
    # "4Nh/P per link"; a rank keeps 1/P of its own buffer, so it sends (P-1)/P of that.
    n, heads, head_dim, e = 8192, 32, 128, 2
    total = ulysses_bytes(n, cp, heads, heads, head_dim, bytes_per_element=e).total
    assert total == Fraction(cp - 1, cp) * 4 * n * heads * head_dim * e / cp


def test_ulysses_with_gqa_sends_smaller_k_and_v() -> None:
    b = ulysses_bytes(4096, 4, heads=32, kv_heads=8, head_dim=128)
    assert b.q == b.out == 4 * b.k == 4 * b.v


@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 4))
def test_activation_memory_orders_flash_table2_materialised(cp: int, scale: int) -> None:
    kw = {"seq_len": 1024 * scale, "micro_batch_size": 1, "hidden": 512, "heads": 8, "cp": cp}
    flash, table2, full = (
        activation_bytes_per_rank(**kw, scores=m)  # type: ignore[arg-type]
        for m in ("flash", "table2_at_s_over_cp", "materialised")
    )
    assert flash <= table2 <= full
    assert (table2 == full) == (cp == 1)


def test_activation_memory_with_cp_1_is_table_2() -> None:
    kw = {"seq_len": 2048, "micro_batch_size": 1, "hidden": 12288, "heads": 96}
    for scores in ("materialised", "table2_at_s_over_cp"):
        assert activation_bytes_per_rank(**kw, cp=1, scores=scores) == activation_bytes_per_layer(
            **kw
        )


def test_score_term_falls_by_cp_not_cp_squared_when_materialised() -> None:
    kw = {"seq_len": 8192, "micro_batch_size": 1, "hidden": 4096, "heads": 32}

    def scores(cp: int, mode: str) -> int:
        return activation_bytes_per_rank(**kw, cp=cp, scores=mode) - activation_bytes_per_rank(
            **kw, cp=cp, scores="flash"
        )

    assert scores(1, "materialised") == 4 * scores(4, "materialised")
    assert scores(1, "materialised") == 16 * scores(4, "table2_at_s_over_cp")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: token_ranges(8, 2, "striped"),
            "layout must be one of 'contiguous', 'load_balanced'; got 'striped'",
        ),
        (lambda: token_ranges(0, 2), "seq_len must be >= 1, got 0"),
        (lambda: causal_work(8, 0), "cp must be >= 1, got 0"),
        (
            lambda: ulysses_bytes(128, 16, heads=128, kv_heads=8, head_dim=128),
            "kv_heads must be divisible by cp: 8 % 16 = 8",
        ),
        (
            lambda: ulysses_bytes(64, 8, heads=12, kv_heads=4, head_dim=64),
            "heads must be divisible by cp: 12 % 8 = 4",
        ),
        (lambda: ulysses_placement(6, 4, 4), "seq_len must be divisible by cp: 6 % 4 = 2"),
        (lambda: ulysses_placement(8, 4, 6), "heads must be divisible by cp: 6 % 4 = 2"),
        (
            lambda: activation_bytes_per_rank(
                seq_len=8, micro_batch_size=1, hidden=8, heads=2, cp=2, scores="none"
            ),
            "scores must be one of 'materialised', 'flash', 'table2_at_s_over_cp'; got 'none'",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()  # type: ignore[operator]


def test_the_worksheet_and_the_step_price_the_same_kv_ring() -> None:
    """Llama 3 70B with tp 4 and cp 4 on 8-GPU nodes: the CP group 0, 4, 8, 12 leaves its node
    between 4 and 8, so the ring runs at the network's pace in both the step and the plan's
    worksheet, which send this rank's K and V (2 of 8 KV heads) cp - 1 times in 3 passes."""
    pytest.importorskip("yaml")
    from infralens.nccl import predict
    from infralens.planner._step_groups import ring_hop
    from infralens.planner.design import fill_worksheet
    from infralens.planner.job import Job
    from infralens.planner.plan_file import parse_plan
    from infralens.planner.step import estimate
    from infralens.sustained import IDEAL

    plan, cluster, work = parse_plan({
        "world_size": 64, "node_shape": "8_nodes_x_8_gpus",
        "parallelism": {"tp_size": 4, "cp_size": 4, "pp_size": 4},
        "training": {"model": "llama3-70b", "seq_len": 8192, "global_batch_size": 32},
    })  # fmt: skip
    assert work is not None
    assert ring_hop(cluster, plan.groups("cp")[0]) == [4, 8]
    kv = 2 * (8192 // 4) * 8 * 128 * 2 // 4
    calls = 3 * (4 - 1) * (80 // 4) * 32
    (row,) = [r for r in fill_worksheet(work).comms if r.axis == "cp"]
    assert (row.collective, row.link, row.bytes_per_step) == ("send_recv", "network", kv * calls)
    hop = Fraction(predict("send_recv", kv, cluster, [4, 8]).seconds)
    assert row.seconds_per_step == calls * hop
    assert hop > Fraction(predict("send_recv", kv, cluster, [0, 4]).seconds)  # NVLink is faster
    # Kernels at their isolated rates: attention short enough that the network hop shows.
    step = estimate(Job("llama3-70b", plan, cluster, seq_len=8192, global_batch_size=32,
                        micro_batch_size=1, sustained=IDEAL), check_memory=False)  # fmt: skip
    assert 0 < step.breakdown.cp <= float(row.seconds_per_step)  # not all hidden: a network hop
    # At the sustained rates attention runs longer and hides more of the same ring.
    slower = estimate(Job("llama3-70b", plan, cluster, seq_len=8192, global_batch_size=32,
                          micro_batch_size=1), check_memory=False)  # fmt: skip
    assert slower.breakdown.cp <= step.breakdown.cp
