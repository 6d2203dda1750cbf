"""infralens.planner.published_rank: where each published plan sits in `rank`'s list."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infralens.planner.published_rank import PublishedRank, published_rank, rank_table
from infralens.planner.ranking import rank_job, rank_plans
from infralens.planner.step_validation import load_runs, run_job
from infralens.topology import Cluster

RUNS = {r.run_id: r for r in load_runs(Path("tests/data/training_runs.csv"), unpriced=True)}


def test_the_position_is_the_published_degrees_row_in_the_runs_own_ranking() -> None:
    row = RUNS["narayanan-18.4b"]
    got = published_rank(row)
    # no recipe in the row: ZeRO stage 0, Megatron without the distributed optimizer
    assert (row.recipe, row.zero_stage) == ("", 0)
    rows = rank_job(run_job(row), top=1000)
    assert {r.recipe for r in rows} == {"megatron-bf16"}
    # every plan priced with the 2021 software: scores in HBM, full recomputation, no SP
    assert {(r.job.attention, r.recompute, r.job.sequence_parallel) for r in rows} == {
        ("materialized", "full", False)
    }
    at = [i for i, r in enumerate(rows, 1) if (r.plan.tp, r.plan.pp, r.plan.dp) == (8, 1, 32)]
    assert got.plan == "tp 8 cp 1 pp 1 dp 32" and [got.position] == at == [2]
    assert got.ranked == len(rows)
    slower = rows[at[0] - 1].estimate.seconds / rows[0].estimate.seconds - 1
    assert got.slower == pytest.approx(slower) and got.slower > 0


def test_a_torchtitan_run_is_ranked_among_the_fsdp2_plans_it_ran() -> None:
    row = RUNS["torchtitan-a100-llama3-8b"]
    assert (row.recipe, row.zero_stage) == ("", 3)
    got = published_rank(row)
    cluster = Cluster.from_node_shape(f"{row.gpus // 8}_nodes_x_8_gpus", row.system)
    rows = rank_job(run_job(row), top=1000)
    assert {r.recipe for r in rows} == {"fsdp2"}
    at = [i for i, r in enumerate(rows, 1) if (r.plan.tp, r.plan.cp, r.plan.dp) == (1, 1, 64)]
    assert [got.position] == at and got.ranked == len(rows)
    assert got.first_mfu == rows[0].estimate.mfu
    # both recipes: a Megatron-Core plan with context parallelism would come first
    both = rank_plans(row.config(), cluster, seq_len=row.seq_len,
                      global_batch_size=row.global_batch, micro_batch_size=row.micro_batch,
                      top=1)  # fmt: skip
    assert both[0].recipe != "fsdp2" and both[0].estimate.mfu > rows[0].estimate.mfu


def test_a_plan_outside_the_search_says_why() -> None:
    got = published_rank(RUNS["vtrain-3.6b-tp16-pp1-dp4"])
    assert got.position is None and got.ranked > 0
    assert "NVLink domain" in got.why
    assert "not ranked (tp beyond" in rank_table([got])


def test_an_unpriced_run_is_refused() -> None:
    row = next(r for r in RUNS.values() if r.unpriced)
    with pytest.raises(ValueError, match="is not priced"):
        published_rank(row)


def test_the_table_prints_each_rank() -> None:
    text = rank_table([PublishedRank("a", "tp 1 cp 1 pp 1 dp 8", 1, 20, 0.0),
                       PublishedRank("b", "tp 16 cp 1 pp 1 dp 4", None, 60, why="x")])  # fmt: skip
    assert "| a | tp 1 cp 1 pp 1 dp 8 | 1 of 20 | +0.0 % |" in text
    assert "| b | tp 16 cp 1 pp 1 dp 4 | not ranked (x) | – |" in text


def test_the_ceiling_table_gives_the_ratio_before_the_run() -> None:
    from infralens.planner.published_rank import MfuCeiling, ceiling_table

    row = MfuCeiling("gpt:24:2304:24", "a100-sxm4-80gb", "bf16", 1, 0.49, "tt-8b", 0.515)
    text = ceiling_table([row]).splitlines()
    assert text[0].split("|")[6].strip() == "Ratio"
    # a model id may break after each colon in HTML; the PDF prints it whole
    assert text[2] == (
        "| gpt:<wbr/>24:<wbr/>2304:<wbr/>24 | a100-sxm4-80gb, BF16 | 1 | 49.0 % | 51.5 % "
        "| 1.05 | tt-8b |"
    )


def test_a_run_that_overlapped_its_tp_collectives_is_ranked_with_the_overlap() -> None:
    from dataclasses import replace

    from infralens.planner.step import estimate

    row = RUNS["mcore-h100-70b-tp8-pp2-dp48"]
    assert row.tp_comm_overlap
    job = run_job(row)
    on = rank_job(job, top=1000)
    off = {(r.plan, r.recipe): r for r in rank_job(replace(job, tp_comm_overlap=False),
                                                   top=1000)}  # fmt: skip
    assert any(r.plan.tp == 1 for r in on) and any(r.plan.tp > 1 for r in on)
    for r in on:
        assert r.job.tp_comm_overlap == (r.plan.tp > 1)
        assert r.estimate == estimate(r.job)  # the row's job prices to the row
        same = off[(r.plan, r.recipe)]
        if r.plan.tp == 1:  # nothing to overlap: the same best options and step
            assert r.estimate.seconds == same.estimate.seconds
        else:
            assert r.estimate.breakdown.tp < same.estimate.breakdown.tp
            assert not same.job.tp_comm_overlap
    # the published plan moves up its list once it is priced as it ran
    slower = published_rank(row).slower
    assert slower is not None
    plain = published_rank(replace(row, tp_comm_overlap=False)).slower
    assert plain is not None and slower < plain


def test_megatron_core_first_rows_the_page_gives() -> None:
    # Megatron-LM's README runs, each ranked with the software it ran: the validation
    # page's range; the one past 1.1 is a run whose own plan heads its list, so the
    # excess is the model's error on that run, not a plan the ranker prefers.
    from infralens.planner.published_rank import mfu_ceiling
    from infralens.planner.step_validation import check_run

    mine = [r for r in RUNS.values() if r.family == "mcore"]
    assert len(mine) == 9
    ceilings = mfu_ceiling([check_run(r) for r in mine], [published_rank(r) for r in mine])
    ratios = [c.ratio for c in ceilings]
    page = " ".join(Path("handbook/reference/validation.md").read_text().split())
    span = f"between {min(ratios):.2f} and {max(ratios):.2f} times the published MFU"
    assert len(ratios) == 9 and span in page, span
    top = max(ceilings, key=lambda c: c.ratio)
    assert top.best_run == "mcore-h100-1.7b-tp1-pp1-dp48"
    assert published_rank(RUNS[top.best_run]).position == 1
    assert top.ratio == pytest.approx(1 + check_run(RUNS[top.best_run]).error)
    assert f"the {top.ratio:.2f} is the model's error on that run" in page
    assert sorted(ratios)[-2] <= 1.10


def test_the_ranks_the_validation_page_describes() -> None:
    # The ceiling section's prose about single runs, each figure from the ranker.
    from infralens.planner.step_validation import check_run

    page = " ".join(Path("handbook/reference/validation.md").read_text().split())

    def first(row_id: str) -> tuple[PublishedRank, Any]:
        row = RUNS[row_id]
        top = rank_job(run_job(row), top=1)
        got = published_rank(row)
        assert top[0].estimate.mfu == got.first_mfu  # the list published_rank ranks
        return got, top[0]

    # the 177B model: its first row halves TP and splits each sequence over 2 CP ranks
    got, top = first("mcore-h100-177b-tp8-pp6-dp48")
    assert (top.plan.tp, top.plan.cp) == (RUNS["mcore-h100-177b-tp8-pp6-dp48"].tp // 2, 2)
    assert got.slower is not None
    assert f"priced {round(100 * got.slower)} % faster than the published plan" in page
    # Korthikanti's 22B: TP 8 priced within 1 %, behind TP 4 over two interleaved stages
    got, top = first("korthikanti-22b")
    assert abs(check_run(RUNS["korthikanti-22b"]).error) < 0.01
    assert "prices to within 1 % of its time" in page
    assert (top.plan.tp, top.plan.pp, top.schedule) == (4, 2, "interleaved")
    assert got.slower is not None
    assert f"{round(100 * got.slower)} % behind a first row of TP 4 over two" in page
    # Llama 3 405B at 8K: lower half, behind first rows of half the TP and some CP
    got, top = first("llama3-405b-8k-8192")
    assert got.position is not None and got.position > got.ranked / 2
    assert top.plan.tp == 4 and top.plan.cp > 1
    assert "sits in the lower half of its list" in page
    # Narayanan et al.'s plans, ranked with their own 2021 software
    ranks = [published_rank(r) for r in RUNS.values() if r.family == "narayanan"]
    close = [r for r in ranks if r.slower is not None and r.slower < 0.01]
    assert len(ranks) == 10 and "six of Narayanan et al.'s ten plans" in page
    assert len(close) == 6
    got, top = first("narayanan-18.4b")
    error = check_run(RUNS["narayanan-18.4b"]).error
    assert got.slower is not None and (top.plan.tp, top.plan.pp) == (4, 2)
    assert (
        f"prices Narayanan et al.'s run of it {round(100 * error)} % fast, and a TP 4 "
        f"plan over two interleaved stages {round(100 * got.slower)} % faster"
    ) in page
    # torchtitan's A100 runs: FSDP alone, each its list's first row
    for run in ("torchtitan-a100-llama3-8b", "torchtitan-a100-llama3-70b"):
        assert published_rank(RUNS[run]).position == 1, run
    assert "both plans are their lists' first rows" in " ".join(page.split())
    # Korthikanti's larger plans head their lists
    for run in ("korthikanti-175b", "korthikanti-530b", "korthikanti-1t"):
        assert published_rank(RUNS[run]).position == 1, run
    assert "175B, 530B and 1T plans are the first rows of their lists" in page
