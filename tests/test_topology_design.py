"""infralens.topology and infralens.planner.design: tiers, collective times, the worksheet."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest

from infralens.hardware import SYSTEMS
from infralens.nccl import predict
from infralens.plan import ParallelPlan
from infralens.planner._step_terms import column_gemms
from infralens.planner.design import compare, fill_worksheet, render_markdown
from infralens.planner.job import Job
from infralens.planner.worksheet import STEP_TERMS
from infralens.planner.worksheet_tables import worksheet_tables
from infralens.sustained import FITTED
from infralens.topology import Cluster, parse_node_shape

GB = 10**9
H100 = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
PLAN = ParallelPlan(tp=8, pp=4, dp=2)
WORK = Job("llama2-70b", PLAN, H100, seq_len=4096, global_batch_size=512)


def test_tiers_carry_the_cited_per_direction_bandwidths() -> None:
    h100, a100 = H100, Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100")
    assert h100.intra.bandwidth_bytes_per_s * 2 == 900 * GB  # NVLink 4: 900 GB/s in total
    assert h100.inter.bandwidth_bytes_per_s * 8 == 8 * 400 * GB // 8  # 8 x 400 Gb/s per node
    assert a100.intra.bandwidth_bytes_per_s * 2 == 600 * GB
    assert a100.inter.bandwidth_bytes_per_s * 8 == 8 * 200 * GB // 8


def test_nvl72_keeps_72_gpus_in_one_nvlink_domain() -> None:
    rack = Cluster.from_node_shape("36_nodes_x_4_gpus", "gb200-nvl72")
    assert rack.domain_size == 72
    assert [rack.domain_of(r) for r in (0, 71, 72, 143)] == [0, 0, 1, 1]
    assert rack.tier_of(range(72)).name == "nvlink"
    half = Cluster(36, 2, SYSTEMS["gb200-nvl72"])  # two GPUs used per tray: 36 in a domain
    assert half.domain_size == 36


def test_worksheet_names_links_and_memory() -> None:
    sheet = fill_worksheet(WORK)
    assert {r.axis: r.placement for r in sheet.axes} == {
        "tp": "nvlink",
        "pp": "network",
        "dp": "network",
        "zero": "network",  # ZeRO-1 shards over the DP group, which crosses nodes
    }
    assert sheet.bottleneck == "compute"  # the step model, not the largest collective
    assert sheet.microbatches == 256
    assert sheet.bubble_fraction == Fraction(3, 256)
    assert [r.collective for r in sheet.comms if r.axis == "dp"] == ["reduce_scatter", "all_gather"]
    text = render_markdown(sheet)
    assert (
        "| TP | 8 | nvlink: ranks 0–7 |" in text
        and "bound by: " in text
        and "% of the step)" in text
    )


@pytest.mark.parametrize("change", [{}, {"recompute": "full"}, {"recipe": "megatron-core-fp8"},
                                    {"zero_stage": 3}, {"zero_stage": 0}])  # fmt: skip
def test_the_frequency_column_counts_the_calls_it_prices(change: dict[str, object]) -> None:
    """Each row's frequency opens with its calls per step, and those calls times the bytes
    one call sends are the row's bytes per step."""
    work = replace(WORK, **change)
    sheet = fill_worksheet(work)
    megatron = change.get("zero_stage") != 3  # torchtitan's DTensor TP waits for each
    fp8 = "fp8" in str(change.get("recipe"))
    for r in sheet.comms[1:]:
        count = int(r.frequency.split(" per step: ")[0].replace(",", ""))
        if r.axis == "tp":  # 2 calls per layer in each pass, 20 layers, 256 micro-batches
            per = int(r.frequency.split(" per step: ")[1].split(" ")[0])
            assert per % 2 == 0 and count == per * 20 * 256
            one = 4096 * 8192 * 2 // (2 if fp8 and r.collective == "all_gather" else 1)
            assert r.bytes_per_step == count * Fraction(7, 8) * one  # FP8 gathers: half
            assert megatron or "under each" not in r.frequency
        if r.axis == "pp":
            assert count == 2 * 256 and "per micro-batch × 256 micro-batches" in r.frequency
        if "amax" in r.frequency:  # delayed scaling: a chunk's forward and backward
            assert count == 2 * 256
        elif r.axis == "dp":  # FSDP2 under a pipeline gathers and reduces once a step
            assert count == (20 if change.get("zero_stage") == 3 else 1)
    tp = [r for r in sheet.comms if r.axis == "tp"]
    passes = 3 if change.get("recompute") == "full" else 2
    gathers = sum(int(r.frequency.split(" ")[0].replace(",", "")) for r in tp
                  if r.collective == "all_gather")  # fmt: skip
    scatters = sum(int(r.frequency.split(" ")[0].replace(",", "")) for r in tp
                   if r.collective == "reduce_scatter")  # fmt: skip
    # each pass's two gathers and two scatters, and Megatron-Core's two re-gathers
    assert gathers == (2 * passes + (2 if megatron else 0)) * 20 * 256
    assert scatters == 2 * passes * 20 * 256


def test_the_risk_column_says_what_a_trace_shows_and_how_to_measure_it() -> None:
    sheet = fill_worksheet(WORK)
    for r in sheet.comms:
        assert r.risk.startswith("in a trace: ") and "; measure " in r.risk
    tp, pp, dp = ([r.risk for r in sheet.comms if r.axis == a] for a in ("tp", "pp", "dp"))
    assert "all-gather kernels between every layer's GEMMs" in tp[0]
    assert "idle gaps on the first and last stages" in pp[0]
    assert "reduce-scatter" in dp[0] and "after the last backward" in dp[0]
    assert "between the optimizer and the next forward" in dp[1]
    text = render_markdown(sheet)
    assert text.count("| in a trace: ") == len(sheet.comms)


def test_moving_tp_across_nodes_prices_the_cross_node_group() -> None:
    no_sp = replace(WORK, sequence_parallel=False)
    good = fill_worksheet(no_sp)
    plan = ParallelPlan(tp=8, pp=4, dp=2, order="dp-tp-cp-pp")
    bad = fill_worksheet(replace(no_sp, plan=plan))
    group = plan.groups("tp")[0]
    assert group == [0, 2, 4, 6, 8, 10, 12, 14]  # four GPUs on each of two nodes
    rows = [r for r in bad.comms if r.axis == "tp"]
    calls = 4 * 20 * 256  # four all-reduces per layer, 20 layers per stage, 256 micro-batches
    nbytes = 1 * 4096 * 8192 * 2
    assert {r.link for r in rows} == {"network"}
    one_call = Fraction(predict("all_reduce", nbytes, H100, group).seconds)
    assert sum(r.seconds_per_step for r in rows) == calls * one_call
    tp_good = sum(r.seconds_per_step for r in good.comms if r.axis == "tp")
    assert sum(r.seconds_per_step for r in rows) > tp_good
    assert bad.step is not None and good.step is not None
    assert (
        bad.step.breakdown.tp > good.step.breakdown.tp
    )  # NVLS in one node beats four adapters per node


def test_zero3_gathers_per_wrapped_unit() -> None:
    w = replace(WORK, zero_stage=3)
    flat = fill_worksheet(replace(w, plan=ParallelPlan(tp=8, dp=8)))
    frequencies = [r.frequency for r in flat.comms if r.axis == "dp"]
    # FSDP2 gathers twice and reduce-scatters once per wrapped unit per micro-batch
    assert sum("per wrapped unit per micro-batch" in f for f in frequencies) == 3
    risks = [r.risk for r in flat.comms if r.axis == "dp"]
    assert ["before each wrapped unit" in r for r in risks] == [True, True, False]
    assert "after each layer's backward" in risks[2] and "; measure " in risks[2]
    # under a pipeline torchtitan keeps the gathered parameters: no backward gather
    piped = fill_worksheet(w)
    frequencies = [r.frequency for r in piped.comms if r.axis == "dp"]
    assert [f.split(": ")[1].split(" ×")[0] for f in frequencies] == [
        "1 per wrapped unit per step", "1 per wrapped unit per step"]  # fmt: skip
    assert len(compare([ParallelPlan(tp=8, pp=8), ParallelPlan(tp=8, pp=4, dp=2)], WORK)) == 2


def test_the_worksheet_sends_what_the_step_prices() -> None:
    """Bytes per call and calls per step follow the step's conventions: TP twice per layer in
    each pass (three with full recomputation), DP in the recipe's gradient and gather dtypes,
    ZeRO-3 per layer every micro-batch."""
    plan = ParallelPlan(tp=8, pp=4, dp=2)
    params = -(-WORK.config.num_params() // 32)  # each GPU's shard of the model, padded
    half = Fraction(1, 2)  # a ring over 2 ranks sends (n - 1)/n of each call

    def sent(work: Job, axis: str) -> dict[str, Fraction]:
        sheet = fill_worksheet(replace(work, plan=plan))
        return {r.collective: r.bytes_per_step for r in sheet.comms
                if r.axis == axis}  # fmt: skip

    m = 512 // 2

    def tp_gathers(work: Job) -> Fraction:
        rows = fill_worksheet(replace(work, plan=plan)).comms
        total = sum(r.bytes_per_step for r in rows
                    if r.axis == "tp" and r.collective == "all_gather")  # fmt: skip
        return Fraction(total) / (Fraction(7, 8) * 4096 * 8192 * 2)

    # two gathers a pass and Megatron-Core's two re-gathers of the saved inputs
    tp, full = tp_gathers(WORK), tp_gathers(replace(WORK, recompute="full"))
    assert tp == 6 * 20 * m and full == 8 * 20 * m
    # PP: each TP rank sends its 1/8 of the sequence, forward and back, per chunk
    pp = sent(WORK, "pp")["send_recv"]
    assert pp == 2 * m * 4096 * 8192 * 2 // 8
    assert sent(replace(WORK, schedule="interleaved", chunks=5),
                "pp")["send_recv"] == 5 * pp  # fmt: skip
    # the default recipe reduces gradients in fp32 and gathers bf16 parameters
    dp = {"reduce_scatter": half * params * 4, "all_gather": half * params * 2}
    assert sent(WORK, "dp") == dp
    bf16 = sent(replace(WORK, recipe="megatron-core-bf16"), "dp")
    assert bf16["reduce_scatter"] == half * params * 2  # --grad-reduce-in-bf16
    fp8 = fill_worksheet(replace(replace(WORK, recipe="megatron-core-fp8"), plan=plan))
    tp8 = [r.bytes_per_step for r in fp8.comms if r.axis == "tp" and r.collective == "all_gather"]
    s7 = Fraction(7, 8) * 4096 * 8192 * 2
    assert tp8 == [s7 / 2 * 2 * 20 * m] * 3  # forward, gradients and re-gathers all in FP8
    z3 = replace(WORK, zero_stage=3)
    r = z3.resolved_recipe()
    rows = [
        x.bytes_per_step for x in fill_worksheet(replace(z3, plan=plan)).comms if x.axis == "dp"
    ]
    unit = params // 20  # a stage's share over its 20 layers' units, ends included
    gather = unit * r.gather_bytes
    grads = unit * (4 if r.grad_reduce_in_fp32 else 2)
    # under the pipeline: one gather per layer in the first forward, one reduce-scatter
    assert rows == [half * gather * 20, half * grads * 20]


TP_CHANGES = [
    {},
    {"recompute": "full"},
    {"recipe": "megatron-core-fp8"},
    {"sequence_parallel": False},
    {"zero_stage": 3},
]


@pytest.mark.parametrize("change", TP_CHANGES)
def test_the_worksheets_tp_seconds_are_the_steps(change: dict[str, object]) -> None:
    """The step's exposed TP time is the worksheet's rows that wait (forward, and backward's
    gradient gathers; every row under torchtitan's DTensor TP) when each GEMM is longer than
    the collective Megatron-Core launches under it, as on one NVLink node for Llama 2 70B."""
    work = replace(WORK, **change)
    sheet = fill_worksheet(work)
    rows = [r for r in sheet.comms if r.axis == "tp"]
    waits = sum(r.seconds_per_step for r in rows if "under each" not in r.frequency)
    under = [r for r in rows if "under each" in r.frequency]
    assert bool(under) == (change != {"zero_stage": 3})  # Megatron-Core hides some
    # what a GEMM does not cover of the collective launched under it waits too
    calls = 2 * 20 * 256  # two a layer (QKV's and the MLP's input), every micro-batch
    fp8 = change == {"recipe": "megatron-core-fp8"}
    gemms = column_gemms(work.config, "h100-sxm5-80gb", tokens=4096, tp=8, fp8=fp8,
                         sustained=FITTED)  # fmt: skip
    late = sum(max(0.0, float(r.seconds_per_step) / calls - g) for r in under for g in gemms)
    expected = float(waits) + calls / 2 * late
    assert sheet.step.breakdown.tp == pytest.approx(expected, rel=1e-9)
    if change == {"sequence_parallel": False}:
        # The worksheet counts a middle stage's two exchanges a micro-batch. Without
        # sequence parallelism each send is the whole activation, yet the last stage
        # paces: its output layer outlasts a middle stage's second send, and it waits
        # for one exchange a micro-batch.
        pp = sum(r.seconds_per_step for r in sheet.comms if r.axis == "pp")
        assert float(pp) / 2 == pytest.approx(sheet.step.breakdown.pp_p2p, rel=1e-12)


DP_CHANGES = [
    {},
    {"recipe": "megatron-core-bf16"},
    {"recipe": "megatron-fp8-distopt"},
    {"recipe": "megatron-fp8-distopt", "schedule": "interleaved", "chunks": 5},
    {"zero_stage": 0},
]


@pytest.mark.parametrize("change", DP_CHANGES)
def test_the_worksheets_dp_seconds_are_the_steps_without_overlap(change: dict[str, object]) -> None:
    """With nothing hidden behind the backward, the step's DP term is the worksheet's DP rows
    added up, FP8 delayed scaling's amax all-reduces included (the shard is padded in one and
    not the other, hence the tolerance)."""
    from infralens.planner.job import Job
    from infralens.planner.step import estimate

    plan = ParallelPlan(tp=8, pp=4, dp=2)
    work = replace(WORK, **change)
    sheet = fill_worksheet(replace(work, plan=plan))
    rows = sum(r.seconds_per_step for r in sheet.comms if r.axis == "dp")
    step = estimate(Job(work.config, plan, H100, seq_len=4096, global_batch_size=512,
                    micro_batch_size=1, recipe=work.resolved_recipe(), schedule=work.schedule,
                    chunks=work.chunks, overlap_grad_reduce=False), check_memory=False)  # fmt: skip
    assert float(rows) == pytest.approx(step.breakdown.dp, rel=1e-4)
    amax = [r for r in sheet.comms if "amax" in r.frequency]
    assert len(amax) == (work.resolved_recipe().scaling == "delayed")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_node_shape("8x8"), "node_shape must look like"),
        (lambda: Cluster.from_node_shape("1_node_x_8_gpus", "tpu"), "preset must be one of"),
        (lambda: H100.tier_of([]), "ranks must hold at least one rank"),
        (lambda: H100.node_of(64), "rank must be < world_size 64"),
        (lambda: predict("all_reduce", -1, H100, [0, 1]), "nbytes must be >= 0"),
        (lambda: fill_worksheet(replace(WORK, plan=ParallelPlan(tp=8, pp=4))), "= 32 != 64"),
        (
            lambda: fill_worksheet(replace(WORK, plan=ParallelPlan(tp=8, pp=4, dp=2, ep=2))),
            "ep must be 1",
        ),
        (lambda: replace(WORK, zero_stage=5), "zero_stage must be one of"),
        (lambda: replace(WORK, recompute="some"), "recompute must be one of"),
        (lambda: replace(WORK, seq_len=0), "seq_len must be >= 1"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]


def test_topology_notes_table_matches_the_presets() -> None:
    notes = Path(__file__).resolve().parents[1] / "labs_src" / "starters" / "topology_notes.md"
    rows = [
        line.split("|")[1:-1]
        for line in notes.read_text().splitlines()
        if line.startswith("| ") and not line.startswith(("| preset", "| ---"))
    ]
    assert {r[0].strip() for r in rows} == set(SYSTEMS)
    for cells in rows:
        s = SYSTEMS[cells[0].strip()]
        assert int(cells[2]) == s.nvlink_domain
        assert int(cells[3]) * GB == s.gpu.nvlink_bytes_per_s
        assert cells[4].strip() == f"{s.nics_per_node} x {s.nic_bits_per_s // GB} Gb/s"


def test_llama3_figure_5_placement() -> None:
    # Llama 3 paper, Figure 5: TP 2, CP 2, PP 2, DP 2 on 16 GPUs in the order
    # [TP, CP, PP, DP]: GPU 0 shares TP with 1, CP with 2, PP with 4, DP with 8.
    plan = ParallelPlan(tp=2, cp=2, pp=2, dp=2, order="tp-cp-pp-dp")
    assert [plan.groups(axis)[0] for axis in ("tp", "cp", "pp", "dp")] == [
        [0, 1], [0, 2], [0, 4], [0, 8]
    ]  # fmt: skip


def _table(text: str, header: str) -> list[list[str]]:
    """The body rows of the pipe table whose header row starts with *header*, as cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_lab12_worksheet_page_holds_both_tables_with_the_packages_numbers() -> None:
    from infralens.planner.plan_file import load_plan_file, worksheet_page

    starter = (
        Path(__file__).resolve().parents[1] / "labs_src" / "starters" / "parallelism_plan.yaml"
    )
    text = worksheet_page(starter)  # what the handbook's build writes to _generated/
    plan, _cluster, work = load_plan_file(starter)
    assert work is not None
    sheet = fill_worksheet(work)
    assert sheet.step is not None

    axes = _table(text, "Axis")
    assert [row[0] for row in axes] == [
        {"zero": "FSDP/ZeRO"}.get(r.axis, r.axis.upper()) for r in sheet.axes
    ]
    for row, axis in zip(axes, sheet.axes, strict=True):
        assert int(row[1]) == axis.degree
        group = plan.groups("dp" if axis.axis == "zero" else axis.axis)[0]
        assert row[2].startswith({"nvlink": "NVLink", "network": "network"}[axis.placement])
        assert str(group[-1]) in row[2] and axis.reason == row[3]

    comms = _table(text, "Communication")
    priced = [r for r in sheet.comms if r.axis != "compute"]
    assert len(comms) == len(priced) >= 5  # TP gather + scatter, PP send/recv, DP scatter + gather
    for row, r in zip(comms, priced, strict=True):
        assert row[0].startswith(r.axis.upper())
        assert float(row[3].replace(",", "")) == pytest.approx(
            float(r.bytes_per_step) / GB, abs=0.005
        )
        assert float(row[4]) == pytest.approx(float(r.seconds_per_step), abs=0.0005)
        assert row[1].startswith(r.frequency.split(":")[0]) and " per step" in row[1]
        assert row[5].startswith("in a trace: ") and "; measure " in row[5]
        first = r.axis not in [x.axis for x in priced[: priced.index(r)]]
        assert ("(predicted: " in row[5]) == first  # the step's share, once per axis

    terms = dict((row[0], row[1:]) for row in _table(text, "Term"))
    step = sheet.step
    for name, seconds in step.breakdown.items():
        if seconds > 0:
            shown, share = terms[STEP_TERMS[name]]
            assert float(shown) == pytest.approx(seconds, abs=0.005)
            assert float(share.rstrip("%")) == pytest.approx(100 * seconds / step.seconds, abs=0.05)
    largest = max(step.breakdown.items(), key=lambda kv: kv[1])[0]
    assert f"which bounds the step: {STEP_TERMS[largest]}" in text
    assert f"{sheet.memory_bytes / GB:.1f} GB of 80 GB" in text


def test_a_pipeline_that_leaves_its_node_is_priced_on_its_network_hop() -> None:
    """TP 2 and PP 8 on two 8-GPU nodes: stages 0-3 share node 0 and 4-7 node 1, so one
    boundary, ranks 6 to 8, crosses the network, and the stages beside it wait on it."""
    from infralens.planner._step_groups import ring_hop

    cluster = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    plan = ParallelPlan(tp=2, pp=8)
    assert ring_hop(cluster, plan.groups("pp")[0]) == [6, 8]
    work = Job(
        "llama2-7b", plan, cluster, seq_len=4096, global_batch_size=16, sequence_parallel=False
    )
    sheet = fill_worksheet(work)
    (row,) = [r for r in sheet.comms if r.axis == "pp"]
    hop = Fraction(predict("send_recv", 4096 * 4096 * 2, cluster, [6, 8]).seconds)
    assert row.link == "network" and row.seconds_per_step == 2 * 16 * hop
    sends = sheet.step.breakdown.pp_p2p / float(hop)  # the pacing stage's, at the network's price
    assert min(abs(sends - 16), abs(sends - 32)) < 1e-9  # one or two exchanges a micro-batch


def test_the_blank_worksheet_states_the_plan_files_workload_and_its_memory_formula() -> None:
    """The starter names the job it is for, so its memory step can be filled by hand, and
    its formula lands within 2 % of the package's count for the starter plan."""
    from infralens.planner.plan_file import load_plan_file

    starters = Path(__file__).resolve().parents[1] / "labs_src" / "starters"
    text = (starters / "topology_design_worksheet.md").read_text(encoding="utf-8")
    plan, _cluster, work = load_plan_file(starters / "parallelism_plan.yaml")
    assert work is not None
    for value in (work.config.num_params(), work.seq_len, work.global_batch_size):
        assert f"{value:,}" in text or f"= {value} " in text, value
    assert f"L = {work.config.layers} layers" in text and f"h = {work.config.hidden}" in text
    recipe = work.resolved_recipe()
    assert f"Recipe: `{recipe.name}`" in text
    assert "model states = P / (tp * pp) * (2 + 4 + 12 / dp) bytes" in text
    assert [b.nbytes for b in recipe.buffers] == [2, 4, 4, 4, 4]  # the formula's bytes
    sheet = fill_worksheet(work)
    states = work.config.num_params() / (plan.tp * plan.pp) * (2 + 4 + 12 / plan.dp)
    activations = (
        34
        * work.seq_len
        * work.micro_batch_size
        * work.config.hidden
        * work.config.layers
        / plan.tp
    )
    assert states == pytest.approx(sheet.model_state_bytes, rel=0.02)
    assert activations == pytest.approx(sheet.activation_bytes, rel=0.03)


def test_ddp_lists_the_one_all_reduce_its_step_prices() -> None:
    """DDP runs each bucket as one NCCL all-reduce: the worksheet lists that call, at
    its price, not the two ring passes written out (which NCCL prices higher)."""
    job = replace(WORK, recipe="ddp", plan=ParallelPlan(tp=8, dp=8))
    rows = [r for r in fill_worksheet(job).comms if r.axis == "dp"]
    assert [r.collective for r in rows] == ["all_reduce"]
    grads = job.config.num_params() // 8 * 4  # fp32 gradients of one TP shard
    group = list(range(0, 64, 8))
    assert float(rows[0].seconds_per_step) == pytest.approx(
        predict("all_reduce", grads, H100, group).seconds, rel=1e-6
    )


def test_context_parallel_ranks_join_the_sync_in_the_worksheet() -> None:
    """With dp = 1 and cp = 8 the state is sharded and synchronised over the 8 CP ranks:
    the worksheet lists that sync and shards ZeRO 8 ways, as the step and memory do."""
    job = replace(WORK, plan=ParallelPlan(tp=8, cp=8), seq_len=32768, global_batch_size=8)
    sheet = fill_worksheet(job)
    assert {r.collective for r in sheet.comms if r.axis == "dp"} == {
        "reduce_scatter", "all_gather"}  # fmt: skip
    zero = next(a for a in sheet.axes if a.axis == "zero")
    assert zero.degree == 8 and len(zero.group) == 8


def test_the_axis_table_names_the_group_the_step_waits_for() -> None:
    """On 48 GPUs with cp 6, rank 0's DP·CP group stays in one node while others cross
    nodes: the table prints the slowest group, the one the step prices."""
    cluster = Cluster.from_node_shape("6_nodes_x_8_gpus", "dgx-h100")
    plan = ParallelPlan(tp=1, cp=6, pp=4, dp=2)
    job = Job("llama3-70b", plan, cluster, seq_len=12288, global_batch_size=48)
    sheet = fill_worksheet(job)
    dp = next(a for a in sheet.axes if a.axis == "dp")
    first = plan.groups("dp")[0]
    assert cluster.tier_of(first).name == "nvlink"  # rank 0's DP group: one node
    assert dp.placement == "network" and cluster.tier_of(list(dp.group)).name == "network"
    text = worksheet_tables(sheet)
    row = next(line for line in text.splitlines() if line.startswith("| DP |"))
    assert dp.group == tuple(range(12)) and "ranks 0–11" in row, row  # nodes 0 and 1
    assert "(the slowest group's ranks)" in text
