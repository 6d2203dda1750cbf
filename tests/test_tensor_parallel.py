"""Invariants, paper numbers and error paths of the infralens tensor-parallel modules."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens import collectives
from infralens.hardware import MAMF_BF16
from infralens.memory import activation_bytes_per_layer
from infralens.tensor_parallel import attention_shards, linear_shard, mlp_shards
from infralens.tensor_parallel_comm import (
    layer_bytes_sent,
    layer_collectives,
    layer_seconds,
    operators,
)
from infralens.topology import Cluster

sizes = st.integers(1, 64)
degrees = st.integers(1, 9)


@given(sizes, sizes, degrees, st.booleans())
def test_colwise_and_rowwise_shards_tile_the_weight_once(
    fan_in: int, fan_out: int, tp: int, bias: bool
) -> None:
    col = [linear_shard("colwise", fan_in, fan_out, tp, r, bias=bias) for r in range(tp)]
    row = [linear_shard("rowwise", fan_in, fan_out, tp, r, bias=bias) for r in range(tp)]
    # Column-parallel: rows of the (out, in) weight add up to out, bias likewise.
    assert sum(s.weight[0] for s in col) == fan_out
    assert all(s.weight[1] == fan_in for s in col)
    # Row-parallel: columns add up to in; every rank holds the whole bias.
    assert sum(s.weight[1] for s in row) == fan_in
    assert all(s.weight[0] == fan_out for s in row)
    if bias:
        assert sum(s.bias[0] for s in col if s.bias) == fan_out
        assert all(s.bias == (fan_out,) for s in row)
    else:
        assert all(s.bias is None for s in col + row)


@given(st.integers(1, 16), st.integers(1, 8), degrees)
def test_mlp_fc1_output_features_are_fc2_input_features_on_every_rank(
    hidden: int, mult: int, tp: int
) -> None:
    # GeLU is local only if rank r's fc1 columns are exactly fc2's rows of rank r.
    for r in range(tp):
        fc1, fc2 = mlp_shards(hidden=hidden, ffn_hidden=mult * hidden, tp=tp, rank=r)
        assert fc1.weight[0] == fc2.weight[1]
        assert fc1.weight[1] == fc2.weight[0] == hidden


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]), st.integers(1, 4))
def test_attention_shards_hold_whole_heads(tp: int, group: int, per_rank: int) -> None:
    kv = tp * per_rank
    heads = kv * group
    head_dim = 4
    q, k, v, o = attention_shards(
        hidden=heads * head_dim, heads=heads, kv_heads=kv, tp=tp, rank=tp - 1
    )
    assert q.weight[0] == heads // tp * head_dim == o.weight[1]
    assert k.weight == v.weight == (kv // tp * head_dim, heads * head_dim)


def test_megatron_counts_four_all_reduces_per_layer() -> None:
    # Shoeybi et al. (2019), Fig. 4: two all-reduces forward, two backward.
    ops = [(c.direction, c.op) for c in layer_collectives(sequence_parallel=False)]
    assert ops == [("forward", "all_reduce")] * 2 + [("backward", "all_reduce")] * 2


def test_sequence_parallel_swaps_each_all_reduce_for_a_pair() -> None:
    # Korthikanti et al. (2022), §4.2.2: four all-gathers and four reduce-scatters.
    ops = [c.op for c in layer_collectives(sequence_parallel=True)]
    assert ops.count("all_gather") == ops.count("reduce_scatter") == 4
    f, g = operators(sequence_parallel=True)
    f0, g0 = operators(sequence_parallel=False)
    # Each SP operator does, in the same pass, one half of the TP all-reduce.
    assert (f.backward, g.forward) == ("reduce_scatter", "reduce_scatter")
    assert (f0.backward, g0.forward) == ("all_reduce", "all_reduce")
    assert (f0.forward, g0.backward) == ("identity", "identity")


@given(st.integers(1, 64), st.integers(1, 4), st.integers(1, 256), st.integers(1, 16))
def test_tp_and_sp_send_the_same_bytes_narayanan_formula(s: int, b: int, h: int, t: int) -> None:
    # Narayanan et al. (2021), §3.2: 8·b·s·h·(t-1)/t elements per layer per device.
    kw = dict(seq_len=s, micro_batch_size=b, hidden=h, tp=t, bytes_per_element=1)
    expected = 8 * b * s * h * Fraction(t - 1, t)
    assert layer_bytes_sent(sequence_parallel=False, **kw) == expected
    assert layer_bytes_sent(sequence_parallel=True, **kw) == expected
    # and it is the ring bytes of one all-reduce of b·s·h, four times
    assert expected == 4 * collectives.ring_bytes_sent("all_reduce", b * s * h, t)


def test_sp_activation_saving_matches_korthikanti_gpt3_example() -> None:
    # GPT-3 175B (a=96, s=2048, h=12288): 5as/h = 80, so selective recomputation
    # keeps 34/(34+80) of the activations, "a 70% reduction" (Korthikanti §5);
    # with sequence parallelism the 10 replicated units are divided by t too.
    kw = dict(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96, tp=8)
    full = activation_bytes_per_layer(sequence_parallel=True, **kw)
    selective = activation_bytes_per_layer(sequence_parallel=True, recompute="selective", **kw)
    assert round(1 - selective / full, 2) == 0.70
    tp_only = activation_bytes_per_layer(sequence_parallel=False, recompute="selective", **kw)
    assert Fraction(tp_only, selective) == Fraction(10 + Fraction(24, 8), Fraction(34, 8))


def test_tp_across_nodes_costs_more_than_inside_one() -> None:
    h100 = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    kw = dict(
        params_per_layer=12 * 12288**2,
        seq_len=2048,
        micro_batch_size=1,
        hidden=12288,
        matmul_flops_per_s=MAMF_BF16["h100-sxm5-80gb"],
    )
    inside = layer_seconds(cluster=h100, tp_group=range(8), **kw)
    straddling = layer_seconds(cluster=h100, tp_group=[0, 1, 2, 3, 8, 9, 10, 11], **kw)
    assert inside.communication < straddling.communication
    assert straddling.compute == inside.compute  # same tp, same arithmetic per rank
    # NVLS reduces inside the switch, so on H100 the all-reduce beats its RS + AG split...
    sp = layer_seconds(cluster=h100, tp_group=range(8), sequence_parallel=True, **kw)
    assert sp.communication > 1.3 * inside.communication
    # ...while on A100 (rings only) RS + AG move the all-reduce's bytes at its bandwidth and
    # pay one more call's latency
    a100 = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-a100")
    ar = layer_seconds(cluster=a100, tp_group=range(8), **kw).communication
    rs_ag = layer_seconds(cluster=a100, tp_group=range(8), sequence_parallel=True, **kw)
    assert ar < rs_ag.communication < Fraction(105, 100) * ar


def _small_layer(**overrides: object) -> object:
    kw: dict[str, object] = dict(
        cluster=Cluster.from_node_shape("1_node_x_8_gpus"),
        tp_group=[0, 1],
        params_per_layer=1,
        seq_len=1,
        micro_batch_size=1,
        hidden=1,
        matmul_flops_per_s=1,
    )
    return layer_seconds(**(kw | overrides))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: linear_shard("diagonal", 4, 4, 2, 0),
            ValueError,
            "style must be one of 'colwise', 'rowwise'; got 'diagonal'",
        ),
        (lambda: linear_shard("colwise", 0, 4, 2, 0), ValueError, "in_features must be >= 1"),
        (lambda: linear_shard("rowwise", 4, 4, 2, 2), ValueError, r"rank must be in range\(0, 2\)"),
        (lambda: mlp_shards(hidden=4, ffn_hidden=8, tp=0, rank=0), ValueError, "tp must be >= 1"),
        (lambda: mlp_shards(hidden=-8, ffn_hidden=8, tp=2, rank=0), ValueError, "^hidden must be"),
        (
            lambda: mlp_shards(hidden=8, ffn_hidden=0, tp=2, rank=0),
            ValueError,
            "^ffn_hidden must be >= 1",
        ),
        (
            lambda: attention_shards(hidden=768, heads=12, tp=8, rank=0),
            ValueError,
            "heads must be divisible by tp: 12 % 8 = 4",
        ),
        (
            lambda: attention_shards(hidden=64, heads=8, kv_heads=2, tp=4, rank=0),
            ValueError,
            "kv_heads must be divisible by tp: 2 % 4 = 2",
        ),
        (
            lambda: attention_shards(hidden=64, heads=8, kv_heads=3, tp=1, rank=0),
            ValueError,
            "heads must be divisible by kv_heads: 8 % 3 = 2",
        ),
        (
            lambda: attention_shards(hidden=10, heads=4, tp=1, rank=0),
            ValueError,
            "hidden must be divisible by heads: 10 % 4 = 2",
        ),
        (lambda: operators(sequence_parallel=1), TypeError, "sequence_parallel must be a bool"),
        (
            lambda: layer_bytes_sent(
                seq_len=0, micro_batch_size=1, hidden=8, tp=2, sequence_parallel=False
            ),
            ValueError,
            "seq_len must be >= 1",
        ),
        (
            lambda: _small_layer(tp_group=[0, 0]),
            ValueError,
            r"tp_group must not repeat a rank, got \[0, 0\]",
        ),
        (lambda: _small_layer(tp_group=[]), ValueError, "ranks must hold at least one rank"),
        (lambda: _small_layer(matmul_flops_per_s=0), ValueError, "matmul_flops_per_s must be >= 1"),
        (lambda: _small_layer(tp_group=[7, 8]), ValueError, "rank must be < world_size 8, got 8"),
    ],
)
def test_bad_input_names_the_argument(call: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()  # type: ignore[operator]
