"""infralens.model and infralens.megatron_formulas against released checkpoints,
Megatron-LM's Table 1 and their own algebra."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.megatron_formulas import (
    megatron_flops_per_iteration,
    megatron_param_count,
    megatron_training_seconds,
)
from infralens.model import PRESETS, TransformerConfig, llama_ffn_hidden, training_flops

# Parameter counts of the released checkpoints: the `safetensors.total` that the
# Hugging Face model pages report for meta-llama's repositories. The converted
# Llama 2 checkpoints also store each layer's rotary inverse frequencies
# (head_dim / 2 = 64 values per layer), a buffer rather than a parameter.
RELEASED = {
    "llama2-7b": (6_738_417_664, 32 * 64),
    "llama2-13b": (13_015_866_880, 40 * 64),
    "llama2-70b": (68_976_653_312, 80 * 64),
    "llama3-8b": (8_030_261_248, 0),
    "llama3-70b": (70_553_706_496, 0),
    "llama3.1-405b": (405_853_388_800, 0),
}

# Narayanan et al. 2021, Table 1: (printed billions, heads, hidden, layers);
# every row uses V = 51,200 and s = 2,048.
MEGATRON_TABLE_1 = [
    ("1.7", 24, 2304, 24), ("3.6", 32, 3072, 30), ("7.5", 32, 4096, 36),
    ("18.4", 48, 6144, 40), ("39.1", 64, 8192, 48), ("76.1", 80, 10240, 60),
    ("145.6", 96, 12288, 80), ("310.1", 128, 16384, 96), ("529.6", 128, 20480, 105),
    ("1008.0", 160, 25600, 128),
]  # fmt: skip


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_llama_presets_count_exactly_the_released_parameters(name: str) -> None:
    total, rotary_buffers = RELEASED[name]
    assert PRESETS[name].num_params() == total - rotary_buffers


def test_presets_cover_the_released_models() -> None:
    assert set(PRESETS) == {"gpt3-175b", *RELEASED}


@pytest.mark.parametrize(("printed", "heads", "hidden", "layers"), MEGATRON_TABLE_1)
def test_megatron_closed_form_reproduces_table_1(
    printed: str, heads: int, hidden: int, layers: int
) -> None:
    p = megatron_param_count(layers=layers, hidden=hidden, vocab_size=51200, seq_len=2048)
    assert f"{p / 1e9:.1f}" == printed
    # The general counter, on the table's own shapes, is the closed form plus a final LayerNorm.
    gpt = TransformerConfig(
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        ffn_hidden=4 * hidden,
        vocab_size=51200,
        seq_len=2048,
        tied_embeddings=True,
        bias=True,
        learned_positions=True,
    )
    assert gpt.num_params() == p + 2 * hidden


@given(
    layers=st.integers(1, 8),
    heads=st.integers(1, 8),
    head_dim=st.integers(1, 16),
    vocab=st.integers(1, 1000),
    seq=st.integers(1, 512),
)
def test_closed_form_is_the_gpt_shape_minus_its_final_layernorm(
    layers: int, heads: int, head_dim: int, vocab: int, seq: int
) -> None:
    h = heads * head_dim
    gpt = TransformerConfig(
        layers=layers,
        hidden=h,
        heads=heads,
        kv_heads=heads,
        ffn_hidden=4 * h,
        vocab_size=vocab,
        seq_len=seq,
        tied_embeddings=True,
        bias=True,
        learned_positions=True,
    )
    closed = megatron_param_count(layers=layers, hidden=h, vocab_size=vocab, seq_len=seq)
    assert gpt.num_params() == closed + 2 * h


def test_gpt3_counts_174_6_billion_which_the_paper_rounds_to_175() -> None:
    n = PRESETS["gpt3-175b"].num_params()
    assert round(n / 1e9, 1) == 174.6
    assert round(n / 1e9) == 175


@pytest.mark.parametrize(
    ("name", "multiple_of", "multiplier"),
    [
        ("llama2-7b", 256, None),
        ("llama2-13b", 256, None),
        ("llama2-70b", 4096, "1.3"),
        ("llama3-8b", 1024, "1.3"),
        ("llama3.1-405b", 4096, "1.2"),
    ],
)
def test_ffn_widths_follow_metas_rule(name: str, multiple_of: int, multiplier: str | None) -> None:
    cfg = PRESETS[name]
    m = Fraction(multiplier) if multiplier else None
    assert cfg.ffn_hidden == llama_ffn_hidden(cfg.hidden, multiple_of, m)
    assert cfg.ffn_hidden % multiple_of == 0


def test_parts_add_up_and_gqa_shrinks_only_k_and_v() -> None:
    cfg = PRESETS["llama2-70b"]
    assert cfg.num_params() == (
        cfg.layers * cfg.layer_params()
        + cfg.norm_params()
        + cfg.embedding_params()
        + cfg.output_params()
    )
    mha = TransformerConfig(**{**cfg.__dict__, "kv_heads": cfg.heads})
    saved = mha.attention_params() - cfg.attention_params()
    assert saved == 2 * cfg.hidden * (cfg.heads - cfg.kv_heads) * cfg.head_dim


def test_llama3_405b_pretraining_compute_is_3_8e25_flops() -> None:
    # Dubey et al. 2024: 405B parameters on 15.6T tokens, 3.8 x 10^25 FLOPs.
    flops = training_flops(PRESETS["llama3.1-405b"], 15_600_000_000_000)
    assert f"{flops:.1e}" == "3.8e+25"
    big = PRESETS["llama3.1-405b"]
    # Kaplan et al.'s attention term, 2 * n_layer * n_ctx * d_attn forward, times 3 for training.
    extra = training_flops(big, 15, attention=True) - training_flops(big, 15)
    assert extra == 3 * 2 * 126 * 131072 * 16384 * 15


def test_non_embedding_parameters_leave_out_embedding_and_output() -> None:
    gpt3 = PRESETS["gpt3-175b"]  # tied output: only the token and position tables go
    assert gpt3.num_params() - gpt3.non_embedding_params() == (50257 + 2048) * 12288
    llama = PRESETS["llama2-7b"]  # untied: embedding and output projection both go
    assert llama.num_params() - llama.non_embedding_params() == 2 * 32000 * 4096


@given(
    b=st.integers(1, 64),
    s=st.integers(1, 8192),
    layers=st.integers(1, 128),
    h=st.integers(1, 4096),
    v=st.integers(1, 200_000),
)
def test_flops_match_the_papers_factored_form(b: int, s: int, layers: int, h: int, v: int) -> None:
    paper = 96 * b * s * layers * h * h * (1 + Fraction(s, 6 * h) + Fraction(v, 16 * layers * h))
    kwargs = {"batch_size": b, "seq_len": s, "layers": layers, "hidden": h, "vocab_size": v}
    assert megatron_flops_per_iteration(**kwargs) == paper
    without = megatron_flops_per_iteration(**kwargs, recompute=False)
    assert paper - without == layers * (24 * b * s * h * h + 4 * b * s * s * h)


def test_training_time_scales_inversely_with_gpus() -> None:
    one = megatron_training_seconds(tokens=10, num_params=10, gpus=1, flops_per_gpu=10)
    assert one == 8 * 10 * 10 / 10
    assert megatron_training_seconds(tokens=10, num_params=10, gpus=4, flops_per_gpu=10) == one / 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"hidden": 10, "heads": 4, "kv_heads": 4},
            "hidden must be divisible by heads: 10 % 4 = 2",
        ),
        ({"heads": 4, "kv_heads": 3}, "heads must be divisible by kv_heads: 4 % 3 = 1"),
        ({"layers": -1}, "layers must be >= 1, got -1"),
        ({"norm": "batchnorm"}, "norm must be one of 'layernorm', 'rmsnorm'; got 'batchnorm'"),
    ],
)
def test_bad_configs_name_the_argument(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {
        "layers": 2,
        "hidden": 8,
        "heads": 4,
        "kv_heads": 2,
        "ffn_hidden": 16,
        "vocab_size": 10,
        "seq_len": 4,
    }
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**base, **kwargs})  # type: ignore[arg-type]


def test_bad_numbers_name_the_argument() -> None:
    with pytest.raises(ValueError, match="tokens must be >= 0, got -1"):
        training_flops(PRESETS["llama3-8b"], -1)
    with pytest.raises(TypeError, match="tokens must be an int, got float"):
        training_flops(PRESETS["llama3-8b"], 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiple_of must be >= 1"):
        llama_ffn_hidden(4096, -256)
    with pytest.raises(TypeError, match="flops_per_gpu must be a number, got str"):
        megatron_training_seconds(tokens=1, num_params=1, gpus=1, flops_per_gpu="1e12")  # type: ignore[arg-type]
    # A float rate is taken exactly: 140e12 is an integer-valued float.
    assert megatron_training_seconds(
        tokens=1, num_params=1, gpus=1, flops_per_gpu=140e12
    ) == Fraction(8, 140 * 10**12)
