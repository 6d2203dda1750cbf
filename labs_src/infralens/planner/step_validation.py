"""Published training runs against :func:`infralens.planner.step.estimate`: every row and its error.

``tests/data/training_runs.csv`` holds published throughput of real training
runs, each with its source, hardware, model, plan, batch and what had to be
assumed where the source is silent. :func:`check_run` predicts the step and
compares it with the published figure as tokens per second per GPU, the one
quantity every source and the model share:

- ``tflops``: a FLOP rate per GPU, turned into tokens per second with the
  count its source used (the ``flop_convention`` column,
  :mod:`infralens.flop_conventions`); where the source does not say which
  count it used, every reading is kept;
- ``tokens_per_s``: tokens per second per GPU;
- ``step_s`` and ``step_ms``: the time of one training step.

A row the model cannot price (a GPU with no measured ceilings, a mechanism the
model lacks) says why in its ``unpriced`` column; :func:`load_runs` leaves it
out unless asked. The test suite and the "Validated against measurements"
page both call it.

>>> rows = load_runs("tests/data/training_runs.csv")
>>> c = check_run(next(r for r in rows if r.run_id == "llama3-405b-8k-8192"))
>>> c.row.published, c.predicted > 0, [name for name, _ in c.readings]
(430.0, True, ['full', 'causal'])
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import median

from infralens._files import read_csv_rows
from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, positive_number
from infralens.elementwise import ELEMENTWISE_KERNELS
from infralens.flop_conventions import CONVENTIONS, flops_per_token, readings
from infralens.hardware import SYSTEMS
from infralens.model import PRESETS, TransformerConfig
from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.precision import RECIPES
from infralens.sustained import Sustained
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
    "run_job",
    "unpriced_report",
]

METRICS = ("tflops", "tokens_per_s", "step_s", "step_ms")


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
    flop_convention: str = ""
    unpriced: str = ""
    tp_comm_overlap: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        positive_number(
            "published", self.published
        )  # a measurement of 0 or less is no measurement
        if (self.metric == "tflops") != bool(self.flop_convention):
            raise ValueError(
                f"{self.run_id}: flop_convention goes with, and only with, tflops"
            )

    @property
    def precision(self) -> str:
        """``"fp8"`` for a row priced with an FP8 recipe, else ``"bf16"``."""
        return RECIPES[self.recipe].precision if self.recipe else "bf16"

    @property
    def family(self) -> str:
        """The publisher: the run id up to its first hyphen (``vtrain``, ``torchtitan``, ...)."""
        return self.run_id.split("-", 1)[0]

    def config(self) -> TransformerConfig:
        """The model: a preset key, ``gpt:layers:hidden:heads`` for Megatron's GPT shapes
        (4h MLP, biases, learned positions, tied output, V = 51,200), or
        ``mcore:layers:hidden:heads:groups:vocab`` for Megatron-Core's GPT defaults
        (the same with grouped query attention and an untied output)."""
        kind, _, dims = self.model.partition(":")
        if kind not in ("gpt", "mcore"):
            return PRESETS[check_choice("model", self.model, tuple(PRESETS))]
        layers, hidden, heads, *rest = (int(x) for x in dims.split(":"))
        kv, vocab = rest if kind == "mcore" else (heads, 51200)
        return TransformerConfig(
            layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn_hidden=4 * hidden,
            vocab_size=vocab, seq_len=self.seq_len, tied_embeddings=kind == "gpt", bias=True,
            learned_positions=True,
        )  # fmt: skip


@dataclass(frozen=True)
class RunCheck:
    """A run, the predicted figure in the source's units, and the tokens/s error.

    ``error`` is predicted over published tokens per second per GPU, minus 1
    (positive: the model is optimistic), under the first reading of the
    source's FLOP count; ``readings`` holds the error under every reading;
    ``mfu`` the predicted MFU of the run's own plan (the package's count, 6N +
    6·L·h·s, over the dense peak of the recipe's precision).
    """

    row: TrainingRun
    predicted: float
    error: float
    seconds: float
    bottleneck: str
    readings: tuple[tuple[str, float], ...] = ()
    mfu: float = 0.0

    def __post_init__(self) -> None:
        check_fields(self, signed=("error",))

    @property
    def published_mfu(self) -> float:
        """The published run's MFU in the package's count: predicted MFU / (1 + error)."""
        return self.mfu / (1 + self.error)


@typed
def _bool(row: dict[str, str], key: str) -> bool:
    return check_choice(key, row[key], ("true", "false")) == "true"


def load_runs(path: str | Path, *, unpriced: bool = False) -> list[TrainingRun]:
    """Read the training-run CSV at *path*: the rows the model prices, or every row
    with *unpriced*.

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
                check_choice("flop_convention", r["flop_convention"], ("", *CONVENTIONS)),
                r["unpriced"], _bool(r, "tp_comm_overlap"),
            ))  # fmt: skip
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{where}: line {line}: {str(exc)[:200]}") from None
    return [r for r in rows if unpriced or not r.unpriced]


@typed
def run_job(row: TrainingRun, sustained: Sustained | None = None) -> Job:
    """The :class:`~infralens.planner.job.Job` *row* ran: its model, plan on its
    cluster, batch, recipe and options, priced with the *sustained* rates (by default
    :data:`infralens.sustained.FITTED`). :func:`check_run` estimates it.

    >>> rows = load_runs("tests/data/training_runs.csv")
    >>> job = run_job(next(r for r in rows if r.run_id == "vtrain-3.6b-tp8-pp1-dp8"))
    >>> job.plan.tp, job.microbatches, job.recompute
    (8, 32, 'full')

    Raises ``ValueError`` for a row marked unpriced.
    """
    if row.unpriced:
        raise ValueError(f"{row.run_id} is not priced: {row.unpriced}")
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
    return Job(
        row.config(), plan, cluster, seq_len=row.seq_len,
        global_batch_size=row.global_batch,
        micro_batch_size=row.micro_batch, sequence_parallel=row.sequence_parallel,
        recompute=row.recompute, schedule=row.schedule, chunks=row.chunks,
        zero_stage=row.zero_stage, attention=row.attention,
        overlap_grad_reduce=row.overlap_grad_reduce, grad_reduce_in_fp32=row.grad_reduce_in_fp32,
        scatter_gather_p2p=row.scatter_gather_p2p, elementwise=row.elementwise,
        tp_comm_overlap=row.tp_comm_overlap, account_for_embedding=meta,
        account_for_loss=meta, recipe=row.recipe or None,
        sustained=sustained,
    )  # fmt: skip


@typed
def check_run(row: TrainingRun, sustained: Sustained | None = None) -> RunCheck:
    """Predict *row*'s step (:func:`run_job`) and express it in the metric its source
    printed, with the *sustained* rates (by default :data:`infralens.sustained.FITTED`).

    Raises ``ValueError`` for a row marked unpriced.
    """
    e = estimate(run_job(row, sustained), check_memory=False)
    model = row.config()
    tokens = e.tokens_per_second_per_gpu
    published = published_tokens_per_second(row)
    errors = tuple((name, tokens / value - 1) for name, value in published)
    if row.metric == "tflops":
        count = flops_per_token(
            model, seq_len=row.seq_len, convention=row.flop_convention
        )
        value = tokens * count / 1e12
    elif row.metric == "tokens_per_s":
        value = tokens
    else:
        value = e.seconds * (1e3 if row.metric == "step_ms" else 1)
    return RunCheck(
        row, value, errors[0][1], e.seconds, e.bottleneck, errors, e.mfu
    )


@typed
def published_tokens_per_second(row: TrainingRun) -> tuple[tuple[str, float], ...]:
    """The published figure as tokens per second per GPU, one value per reading of its count.

    >>> runs = {r.run_id: r for r in load_runs("tests/data/training_runs.csv")}
    >>> llama = published_tokens_per_second(runs["llama3-405b-128k-16384"])
    >>> [(k, round(v)) for k, v in llama]
    [('full', 67), ('causal', 94)]
    >>> vtrain = published_tokens_per_second(runs["vtrain-175b-tp8-pp8-dp8"])
    >>> [(k, round(v, 1)) for k, v in vtrain]
    [('', 111.5)]
    """
    tokens = row.global_batch * row.seq_len / row.gpus
    if row.metric == "tokens_per_s":
        return (("", row.published),)
    if row.metric in ("step_s", "step_ms"):
        seconds = row.published / (1e3 if row.metric == "step_ms" else 1)
        return (("", tokens / seconds),)
    model = row.config()
    return tuple(
        (name, row.published * 1e12 / flops_per_token(
            model, seq_len=row.seq_len, convention=row.flop_convention, reading=name))
        for name in readings(model, seq_len=row.seq_len, convention=row.flop_convention)
    )  # fmt: skip


@typed
def median_error(checks: list[RunCheck]) -> float:
    """The median of ``predicted / published - 1`` over *checks*: the model's typical miss.

    >>> rows = load_runs("tests/data/training_runs.csv")
    >>> round(abs(median_error([check_run(r) for r in rows])), 2)  # shares fitted here
    0.0
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
    """One table row per published run: the error first, then published, predicted,
    configuration and source, so the error shows where the table is wider than the page."""
    units = {"tflops": "TFLOP/s/GPU", "tokens_per_s": "tokens/s/GPU", "step_s": "s/step",
             "step_ms": "ms/step"}  # fmt: skip
    lines = [
        "| run | error | published | predicted | metric | tp·cp·pp·dp | batch × seq | GPUs "
        "| hardware | bound by | source |",
        "| --- | ---: | ---: | ---: | --- | --- | --- | ---: | --- | --- | --- |",
    ]
    for c in checks:
        r = c.row
        count = f" ({r.flop_convention})" if r.flop_convention else ""
        digits = 2 if r.metric == "step_s" else 0
        error = " or ".join(f"{100 * e:+.0f} % ({k})" if k else f"{100 * e:+.0f} %"
                            for k, e in c.readings)  # fmt: skip
        lines.append(
            f"| {r.run_id} | {error} | {r.published:,.{digits}f} | "
            f"{c.predicted:,.{digits}f} | {units[r.metric]}{count} | "
            f"{r.tp}·{r.cp}·{r.pp}·{r.dp} | {r.global_batch:,} × {r.seq_len:,} | "
            f"{r.gpus:,} | {r.hardware} | {c.bottleneck} | [{r.source}]({r.url}) |"
        )
    return "\n".join(lines) + "\n"


@typed
def unpriced_report(rows: list[TrainingRun]) -> str:
    """One table row per shipped run the model does not price, with the reason."""
    lines = ["| run | hardware | published | metric | why it is not priced | source |",
             "| --- | --- | ---: | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        if r.unpriced:
            lines.append(f"| {r.run_id} | {r.hardware} | {r.published:,} | {r.metric} | "
                         f"{r.unpriced} | [{r.source}]({r.url}) |")  # fmt: skip
    return "\n".join(lines) + "\n"
