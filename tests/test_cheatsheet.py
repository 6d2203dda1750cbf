"""The cheat sheet's numbers are the package's: each line is checked against the call behind it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "conf"))

from infralens_cheatsheet import cheatsheet_markdown  # noqa: E402

from infralens.collectives import bus_bandwidth_factor  # noqa: E402
from infralens.pipeline import bubble_fraction  # noqa: E402
from infralens.tensor_parallel_comm import layer_bytes_sent  # noqa: E402
from infralens.zero import model_state_bytes  # noqa: E402


def test_the_sheet_quotes_the_package() -> None:
    sheet = cheatsheet_markdown()
    for stage in range(4):
        gb = model_state_bytes(7_500_000_000, dp_size=64, stage=stage) / 1e9
        assert f"| Model states, ZeRO-{stage} |" in sheet and f"{gb:.2f} GB" in sheet
    assert f"| $2(n-1)/n$ | {bus_bandwidth_factor('all_reduce', 8)} ($n = 8$) |" in sheet
    assert str(bubble_fraction(stages=8, microbatches=32, chunks=2)) in sheet
    sent = layer_bytes_sent(
        seq_len=4096, micro_batch_size=1, hidden=8192, tp=8, sequence_parallel=True
    )
    assert f"{sent / 1e6:.1f} MB" in sheet
    assert "205.1B tokens for 10B parameters" in sheet  # Hoffmann et al., Table 3
    assert "| 3/2 and 3 at $B = 2B_{crit}$ |" in sheet
    from infralens.vocab_parallel import padded_vocab
    from infralens.zero import accumulation_bytes_per_rank

    assert f"| {padded_vocab(128256, tp=8)} (128,256" in sheet
    ratio = accumulation_bytes_per_rank(
        10**9, dp_size=8, stage=2, microbatches=16
    ) / accumulation_bytes_per_rank(10**9, dp_size=8, stage=1, microbatches=16)
    assert f"{ratio.numerator}/{ratio.denominator} and 24 at $m = 16$" in sheet
    from infralens.hardware import MAMF_BF16
    from infralens.model import PRESETS
    from infralens.offload import cpu_adam_break_even_tokens

    one_host = cpu_adam_break_even_tokens(
        PRESETS["llama3-8b"].num_params(),
        dp_size=8,
        ranks_per_host=8,
        flops_per_s=MAMF_BF16["h100-sxm5-80gb"],
    )
    assert f"covered from {one_host:,} tokens per GPU on 1 host" in sheet


def test_the_sheet_covers_every_formula_the_labs_teach() -> None:
    sheet = cheatsheet_markdown()
    for quantity in (
        "Model states",
        "busbw / algbw",
        "Bubble",
        "TP bytes sent per layer",
        "Activations per layer",
        "MFU",
        "Global batch",
        "Training compute",
        "Compute-optimal tokens",
        "GPU-hours",
        "Critical batch",
        "Checkpoint write time",
        "GEMM arithmetic intensity",
        "Tile and wave quantisation",
        "Tokens per GPU for DP to hide",
        "Vocabulary padding",
        "Vocabulary-parallel loss",
        "bf16 ring reduction error",
        "ZeRO traffic with $m$ micro-batches",
        "Hybrid CP",
        "MoE auxiliary-loss gradient",
        "Host Adam under optimizer offload",
        "Block-scale overhead",
    ):
        assert f"| {quantity}" in sheet, quantity
    assert "**Rules of thumb.**" in sheet
    assert "dense" in sheet  # MFU is against the dense peak


def test_the_page_includes_the_generated_sheet() -> None:
    page = (ROOT / "handbook" / "reference" / "cheatsheet.md").read_text(encoding="utf-8")
    assert "_generated/cheatsheet.md" in page
