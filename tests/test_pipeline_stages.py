"""Stages that differ: Megatron-Core's embedding and loss split, in memory and step time.

Megatron-Core's ``--account-for-embedding-in-pipeline-split`` and ``-loss-`` count the
embedding and the loss as one layer each; with interleaving every chunk has
(L + e + l)/(p·v) slots, so Llama 3 405B's first chunk on the first stage holds only the
embedding, the layout of the Llama 3 report (section 3.3.2). Memory must count the layers
of the chunks in flight, and the step must follow the stage that does the most work,
the output layer included.
"""

from __future__ import annotations

import pytest

from infralens.memory import activation_bytes
from infralens.model import PRESETS, TransformerConfig
from infralens.pipeline_memory import chunk_layers, in_flight, layers_in_flight, stage_layers
from infralens.plan import ParallelPlan
from infralens.planner import _step_terms
from infralens.planner._step_overlap import OVERLAP_SLOWDOWN
from infralens.planner.fit import _gpu_memory
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.stage_balance import megatron_split
from infralens.sustained import FITTED
from infralens.topology import Cluster

GB = 10**9


def _replay(rank: int, pp: int, counts: tuple[int, ...], microbatches: int) -> int:
    """Live layers at the peak, replaying every action of Megatron-Core's interleaved order
    from its description: groups of pp micro-batches, each chunk in turn over the group,
    backwards in the reverse chunk order, w warm-up forwards then one forward per backward."""
    v = len(counts)
    order = [c for _ in range(0, microbatches, pp) for c in range(v) for _ in range(pp)]
    warm = min(in_flight(rank, pp, chunks=v) - 1, len(order))
    actions = [("F", c) for c in order[:warm]]
    for k in range(len(order) - warm):
        actions += [("F", order[warm + k]), ("B", v - 1 - order[k])]
    live = peak = 0
    for kind, chunk in actions:
        live += counts[chunk] if kind == "F" else -counts[chunk]
        peak = max(peak, live)
    return peak


@pytest.mark.parametrize("pp", [2, 3, 4, 8])
@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_equal_chunks_hold_in_flight_times_layers_per_chunk(pp: int, chunks: int) -> None:
    for per_chunk in (1, 4):
        for microbatches in (pp, 2 * pp, 4 * pp, 7 * pp, None):
            for rank in range(pp):
                got = layers_in_flight(rank, pp, (per_chunk,) * chunks, microbatches=microbatches)
                live = in_flight(rank, pp, chunks=chunks, microbatches=microbatches)
                assert got == live * per_chunk, (rank, pp, chunks, microbatches)


@pytest.mark.parametrize("pp", [2, 4, 5])
@pytest.mark.parametrize("counts", [(0, 1, 1, 1), (3, 0, 2), (1, 1, 1, 0), (2, 5)])
def test_unequal_chunks_match_a_replay_of_every_action(pp: int, counts: tuple[int, ...]) -> None:
    # The walk stops after a period once the warm-up is over; the replay never does.
    for microbatches in (pp, 3 * pp, 12 * pp, 40 * pp):
        for rank in range(pp):
            got = layers_in_flight(rank, pp, counts, microbatches=microbatches)
            assert got == _replay(rank, pp, counts, microbatches), (rank, microbatches)


def test_megatron_refuses_what_chunk_layers_refuses() -> None:
    # transformer_config.py: p must divide L + e + l, and v the slots per stage.
    with pytest.raises(ValueError, match="divisible by stages"):
        chunk_layers(125, 16, chunks=8, embedding=True, loss=True)
    with pytest.raises(ValueError, match="divisible by chunks"):
        chunk_layers(126, 16, chunks=3, embedding=True, loss=True)
    with pytest.raises(ValueError, match="cannot be combined"):
        chunk_layers(126, 16, first=7, embedding=True)
    with pytest.raises(TypeError, match="embedding must be a bool"):
        chunk_layers(126, 16, embedding="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="microbatches must be divisible by pp"):
        layers_in_flight(0, 4, (1, 1), microbatches=6)


LLAMA3_405B = {
    "seq_len": 8192,
    "global_batch_size": 2048,
    "micro_batch_size": 1,
    "recompute": "full",
    "schedule": "interleaved",
    "chunks": 8,
    "account_for_embedding": True,
    "account_for_loss": True,
}


def _llama3_405b() -> tuple[Cluster, ParallelPlan]:
    cluster = Cluster.from_node_shape("2048_nodes_x_8_gpus", "dgx-h100")
    return cluster, ParallelPlan(tp=8, pp=16, dp=128, order="tp-cp-pp-dp")


def test_llama3_405b_embedding_and_loss_split_is_priced() -> None:
    cluster, plan = _llama3_405b()
    chunks = chunk_layers(126, 16, chunks=8, embedding=True, loss=True)
    # One slot per chunk: the first chunk holds only the embedding, the last only the loss.
    assert chunks[0] == (0,) + (1,) * 7 and chunks[-1] == (1,) * 7 + (0,)
    assert all(c == (1,) * 8 for c in chunks[1:-1])
    split = stage_layers(126, 16, chunks=8, embedding=True, loss=True)
    assert split == (7,) + (8,) * 14 + (7,) == megatron_split(126, stages=16, first=7, last=7)

    e = estimate(Job("llama3.1-405b", plan, cluster, **LLAMA3_405B))  # type: ignore[arg-type]
    assert e.microbatches == 16 and e.memory_bytes < 80 * GB
    job = {k: v for k, v in LLAMA3_405B.items() if k not in ("global_batch_size", "schedule")}
    mem = _gpu_memory("llama3.1-405b", plan, seq_len=8192, micro_batch_size=1, recompute="full",
                     sequence_parallel=True, microbatches=16, chunks=8,
                     account_for_embedding=True, account_for_loss=True)  # fmt: skip
    assert job and mem.total == e.memory_bytes
    # 16 micro-batches per replica: every forward is warm-up (stage 1 would warm up
    # 2·(16 − 2) + 7·16 = 140 of its 128), so a full middle stage holds 16 · 8 layers and
    # the first and last 16 · 7, their empty chunks holding none.
    layer = dict(seq_len=8192, micro_batch_size=1, tp=8, sequence_parallel=True, stack="megatron")
    act = activation_bytes(PRESETS["llama3.1-405b"], recompute="full", **layer)  # type: ignore[arg-type]
    # ... and the layer in backward holds all it rebuilt (its whole count less its input)
    whole = activation_bytes(PRESETS["llama3.1-405b"], recompute="none", **layer)  # type: ignore[arg-type]
    assert mem.stage == "stage 1" and mem.activations == 128 * act + whole - act
    assert layers_in_flight(0, 16, chunks[0], microbatches=16) == 16 * 7
    assert layers_in_flight(15, 16, chunks[-1], microbatches=16) == 16 * 7
    # With more micro-batches the steady state caps them: stage 1 holds its 141 live chunk
    # micro-batches; stage 0's 143 include 31 of its empty first chunk.
    assert layers_in_flight(1, 16, chunks[1], microbatches=64) == 141
    assert layers_in_flight(0, 16, chunks[0], microbatches=64) == 143 - 31


def test_llama3_405b_pace_is_a_full_middle_stage() -> None:
    # The last stage's 7 layers and output layer (0.6 of a layer) do less than 8 layers:
    # the pace is a middle stage's, as with 7-layer first and last stages. Megatron-Core
    # refuses those with 8 chunks (7 % 8), so they are compared under 1F1B, where the two
    # arguments give the same stages. The schedule changes compute only through the
    # interleaved sends hidden beside it, which slow it by OVERLAP_SLOWDOWN at most.
    cluster, plan = _llama3_405b()
    flags = estimate(Job("llama3.1-405b", plan, cluster, **LLAMA3_405B))  # type: ignore[arg-type]
    job = {k: v for k, v in LLAMA3_405B.items() if k not in ("schedule", "chunks")}
    one_f = estimate(Job("llama3.1-405b", plan, cluster, **job))  # type: ignore[arg-type]
    job = {k: v for k, v in job.items() if not k.startswith("account")}
    ends = estimate(Job("llama3.1-405b", plan, cluster, first_stage_layers=7, last_stage_layers=7,
                    **job))  # type: ignore[arg-type]  # fmt: skip
    assert one_f.breakdown == ends.breakdown and one_f.memory_bytes == ends.memory_bytes
    # 1F1B waits for a middle stage's 2 sends per micro-batch; interleaved sends 2·v
    hidden_at_most = LLAMA3_405B["chunks"] * ends.breakdown.pp_p2p  # type: ignore[operator]
    slowed = flags.breakdown.compute - ends.breakdown.compute
    assert 0 < slowed <= OVERLAP_SLOWDOWN * hidden_at_most, (slowed, hidden_at_most)
    assert flags.breakdown.tp == ends.breakdown.tp
    # The interleaved bubble is 1/v of 1F1B's over the same work.
    assert flags.breakdown.pp_bubble == pytest.approx(ends.breakdown.pp_bubble / 8)


def _small() -> TransformerConfig:
    # A big vocabulary makes the output layer worth more than a layer.
    return TransformerConfig(layers=32, hidden=2048, heads=16, kv_heads=8, ffn_hidden=5632,
                             vocab_size=128256, seq_len=4096)  # fmt: skip


def test_the_last_stage_pays_for_the_output_layer() -> None:
    cluster = Cluster.from_node_shape("4_nodes_x_8_gpus", "dgx-h100")
    plan = ParallelPlan(tp=2, pp=4, dp=4)
    job = {"seq_len": 4096, "global_batch_size": 64, "micro_batch_size": 1}

    def step(**split: int | bool) -> float:
        return estimate(Job(_small(), plan, cluster, **job, **split)).seconds  # type: ignore[arg-type]

    # The same layers, 9 first and 7 last or 7 first and 9 last: only the head moves.
    assert step(first_stage_layers=7, last_stage_layers=9) > step(
        first_stage_layers=9, last_stage_layers=7
    )
    # With the head worth more than a layer, a last stage one layer short (the loss flag)
    # paces the step faster than equal stages, whose last stage carries 8 layers and the head.
    m31 = TransformerConfig(layers=31, hidden=2048, heads=16, kv_heads=8, ffn_hidden=5632,
                            vocab_size=128256, seq_len=4096)  # fmt: skip
    short = estimate(Job(m31, plan, cluster, account_for_loss=True, **job))  # type: ignore[arg-type]
    even = estimate(Job(_small(), plan, cluster, **job))  # type: ignore[arg-type]
    assert short.breakdown.compute < even.breakdown.compute


def test_one_stage_is_priced_as_one_micro_batch_of_the_whole_model() -> None:
    m = PRESETS["llama3-8b"]
    price = {"tokens": 8192, "seq_len": 8192, "tp": 1, "cp": 1, "sequence_parallel": False,
             "recompute": "selective", "stack": "megatron", "kernel": "flash2",
             "elementwise": "fused", "sustained": FITTED}  # fmt: skip
    whole = _step_terms.microbatch_compute(m, "h100-sxm5-80gb", pp=1, **price)  # type: ignore[arg-type]
    stages, _ = _step_terms.stage_compute(m, (32,), "h100-sxm5-80gb", **price)
    assert stages == (whole[0],)
    # Affine in the layers: four stages of 8 add up to the whole model, head once.
    four, _ = _step_terms.stage_compute(m, (8, 8, 8, 8), "h100-sxm5-80gb", **price)
    assert sum(four) == pytest.approx(whole[0], rel=1e-9)
    assert four[-1] > four[0] == four[1] == four[2]


def test_the_plan_file_takes_the_embedding_and_loss_flags(tmp_path: pytest.TempPathFactory) -> None:
    pytest.importorskip("yaml")
    from infralens.planner.design import fill_worksheet
    from infralens.planner.plan_file import load_plan_file

    text = (
        "node_shape: 3_nodes_x_8_gpus\nworld_size: 24\n"
        "parallelism: {tp_size: 8, pp_size: 3, dp_size: 1}\n"
        "training:\n  model: llama3-8b\n  global_batch_size: 6\n  recompute: full\n"
    )
    counted = {}
    # 33 slots on three stages: the embedding takes one of the first stage's 11.
    for key in ("account_for_embedding: true", "first_stage_layers: 10"):
        path = tmp_path / f"{key.split(':')[0]}.yaml"  # type: ignore[operator]
        path.write_text(text + f"  {key}\n", encoding="utf-8")
        work = load_plan_file(path)[2]
        assert work is not None and work.account_for_embedding == key.endswith("true")
        counted[key] = fill_worksheet(work).memory_bytes
    mem = _gpu_memory("llama3-8b", ParallelPlan(tp=8, pp=3), seq_len=8192, micro_batch_size=1,
                     recompute="full", sequence_parallel=True, microbatches=6,
                     account_for_embedding=True)  # fmt: skip
    assert counted["account_for_embedding: true"] == mem.total == counted["first_stage_layers: 10"]
    bad = tmp_path / "bad.yaml"  # type: ignore[operator]
    bad.write_text(text + "  account_for_loss: 'yes'\n", encoding="utf-8")
    with pytest.raises(TypeError, match="account_for_loss must be a bool"):
        load_plan_file(bad)
