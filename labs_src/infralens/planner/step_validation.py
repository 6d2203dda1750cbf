"""Published training runs against :func:`infralens.planner.step.estimate`: every row and its error.

``tests/data/training_runs.csv`` holds published throughput of real training
runs, each with its source, hardware, model, plan, batch and what had to be
assumed where the source is silent. :func:`check_run` predicts the step and
turns it into the figure the source printed, counted the source's way:

- ``tflops_megatron``: Narayanan et al. (2021) Eq. 3 FLOPs (recomputation
  included, full s² attention) per second per GPU;
- ``tflops_palm``: PaLM's model FLOPs, 6N + 12·L·h·s per token (Llama 3's
  Table 4 cites PaLM for its MFU);
- ``tokens_per_s``: tokens per second per GPU.

The test suite and the "Validated against measurements" page both call it.

>>> rows = load_runs("tests/data/training_runs.csv")
>>> c = check_run(next(r for r in rows if r.run_id == "llama3-405b-8k-8192"))
>>> c.row.published, c.predicted > 0
(430.0, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import median

from infralens._files import read_csv_rows
from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, positive_number
from infralens.compute import model_flops_per_token
from infralens.elementwise import ELEMENTWISE_KERNELS
from infralens.hardware import SYSTEMS
from infralens.megatron_formulas import megatron_flops_per_iteration
from infralens.model import PRESETS, TransformerConfig
from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.precision import RECIPES
from infralens.topology import Cluster

MAX_CSV_BYTES = 16 * 2**20
"""Largest CSV file the loader reads (16 MiB)."""

__all__ = [
    "METRICS",
    "RunCheck",
    "TrainingRun",
    "check_run",
    "load_runs",
    "markdown_report",
    "median_error",
]

METRICS = ("tflops_megatron", "tflops_palm", "tokens_per_s")


@dataclass(frozen=True)
class TrainingRun:
    """One published training throughput with its configuration and provenance."""

    run_id: str
    source: str
    url: str
    hardware: str
    system: str
    gpus: int
    model: str
    seq_len: int
    global_batch: int
    micro_batch: int
    tp: int
    pp: int
    cp: int
    dp: int
    schedule: str
    chunks: int
    recompute: str
    sequence_parallel: bool
    zero_stage: int
    attention: str
    overlap_grad_reduce: bool
    grad_reduce_in_fp32: bool
    scatter_gather_p2p: bool
    elementwise: str
    metric: str
    published: float
    assumptions: str
    recipe: str = ""

    def __post_init__(self) -> None:
        check_fields(self)
        positive_number(
            "published", self.published
        )  # a measurement of 0 or less is no measurement

    def config(self) -> TransformerConfig:
        """The model: a preset key, or ``gpt:layers:hidden:heads`` for Megatron's GPT shapes
        (4h MLP, biases, learned positions, tied output, V = 51,200)."""
        if not self.model.startswith("gpt:"):
            return PRESETS[check_choice("model", self.model, tuple(PRESETS))]
        layers, hidden, heads = (int(x) for x in self.model.split(":")[1:])
        return TransformerConfig(
            layers=layers, hidden=hidden, heads=heads, kv_heads=heads, ffn_hidden=4 * hidden,
            vocab_size=51200, seq_len=self.seq_len, tied_embeddings=True, bias=True,
            learned_positions=True,
        )  # fmt: skip


@dataclass(frozen=True)
class RunCheck:
    """A run, the predicted figure in the source's units, and ``predicted / published - 1``."""

    row: TrainingRun
    predicted: float
    error: float
    seconds: float
    bottleneck: str

    def __post_init__(self) -> None:
        check_fields(self, signed=("error",))


@typed
def _bool(row: dict[str, str], key: str) -> bool:
    return check_choice(key, row[key], ("true", "false")) == "true"


def load_runs(path: str | Path) -> list[TrainingRun]:
    """Read the training-run CSV at *path*.

    Raises ``ValueError`` naming the path and line for a malformed row.
    """
    rows = []
    where, table = read_csv_rows(path, "training-run file", MAX_CSV_BYTES)
    for line, r in enumerate(table, start=2):
        try:
            ints = {k: int(r[k]) for k in ("gpus", "seq_len", "global_batch", "micro_batch",
                    "tp", "pp", "cp", "dp", "chunks", "zero_stage")}  # fmt: skip
            rows.append(TrainingRun(
                r["run_id"], r["source"], r["url"], r["hardware"],
                check_choice("system", r["system"], tuple(SYSTEMS)), ints["gpus"], r["model"],
                ints["seq_len"], ints["global_batch"], ints["micro_batch"], ints["tp"],
                ints["pp"], ints["cp"], ints["dp"], r["schedule"], ints["chunks"],
                r["recompute"], _bool(r, "sequence_parallel"), ints["zero_stage"],
                r["attention"], _bool(r, "overlap_grad_reduce"), _bool(r, "grad_reduce_in_fp32"),
                _bool(r, "scatter_gather_p2p"),
                check_choice("elementwise", r["elementwise"], ELEMENTWISE_KERNELS),
                check_choice("metric", r["metric"], METRICS),
                float(r["published"]), r["assumptions"],
                check_choice("recipe", r["recipe"], ("", *RECIPES)),
            ))  # fmt: skip
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{where}: line {line}: {str(exc)[:200]}") from None
    return rows


@typed
def check_run(row: TrainingRun) -> RunCheck:
    """Predict *row*'s step and express it in the metric its source printed."""
    system = SYSTEMS[row.system]
    cluster = Cluster(
        row.gpus // system.gpus_per_node, system.gpus_per_node, system
    )
    # Llama 3 405B: its own rank order, and 126 layers on 16 stages with the embedding and
    # the loss each in a layer's place, so the first and last stage are one layer short
    # (Llama 3 report, section 3.3.2; Megatron-Core's account-for-* split).
    meta = row.run_id.startswith("llama3-405b")
    order = "tp-cp-pp-dp" if meta else "tp-cp-dp-pp"
    plan = ParallelPlan(tp=row.tp, pp=row.pp, cp=row.cp, dp=row.dp, order=order)
    model = row.config()
    job = Job(
        model, plan, cluster, seq_len=row.seq_len, global_batch_size=row.global_batch,
        micro_batch_size=row.micro_batch, sequence_parallel=row.sequence_parallel,
        recompute=row.recompute, schedule=row.schedule, chunks=row.chunks,
        zero_stage=row.zero_stage, attention=row.attention,
        overlap_grad_reduce=row.overlap_grad_reduce, grad_reduce_in_fp32=row.grad_reduce_in_fp32,
        scatter_gather_p2p=row.scatter_gather_p2p, elementwise=row.elementwise,
        account_for_embedding=meta, account_for_loss=meta, recipe=row.recipe or None,
    )  # fmt: skip
    e = estimate(job, check_memory=False)
    if row.metric == "tflops_megatron":
        flops = megatron_flops_per_iteration(
            batch_size=row.global_batch, seq_len=row.seq_len, layers=model.layers,
            hidden=model.hidden, vocab_size=model.vocab_size,
        )  # fmt: skip
        value = flops / e.seconds / row.gpus / 1e12
    elif (
        row.metric == "tflops_palm"
    ):  # PaLM's count: full 12·L·h·s attention, as published
        value = model_flops_per_token(model, seq_len=row.seq_len) * row.global_batch
        value = value * row.seq_len / e.seconds / row.gpus / 1e12
    else:
        value = e.tokens_per_second_per_gpu
    return RunCheck(row, value, value / row.published - 1, e.seconds, e.bottleneck)


@typed
def median_error(checks: list[RunCheck]) -> float:
    """The median of ``predicted / published - 1`` over *checks*: the model's typical miss.

    >>> rows = load_runs("tests/data/training_runs.csv")
    >>> round(median_error([check_run(r) for r in rows]), 2)
    0.33
    >>> median_error([])
    Traceback (most recent call last):
    ...
    ValueError: checks must hold at least one run

    Raises ``ValueError`` for no checks.
    """
    if not checks:
        raise ValueError("checks must hold at least one run")
    return median(c.error for c in checks)


@typed
def markdown_report(checks: list[RunCheck]) -> str:
    """One table row per published run: configuration, published, predicted, error, source."""
    units = {"tflops_megatron": "TFLOP/s/GPU (Eq. 3)", "tflops_palm": "TFLOP/s/GPU (PaLM)",
             "tokens_per_s": "tokens/s/GPU"}  # fmt: skip
    lines = [
        "| run | hardware | GPUs | tp·cp·pp·dp | batch × seq | metric | published | predicted "
        "| error | bound by | source |",
        "| --- | --- | ---: | --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for c in checks:
        r = c.row
        lines.append(
            f"| {r.run_id} | {r.hardware} | {r.gpus:,} | {r.tp}·{r.cp}·{r.pp}·{r.dp} | "
            f"{r.global_batch:,} × {r.seq_len:,} | {units[r.metric]} | {r.published:,.0f} | "
            f"{c.predicted:,.0f} | {100 * c.error:+.0f} % | {c.bottleneck} | "
            f"[{r.source}]({r.url}) |"
        )
    return "\n".join(lines) + "\n"
