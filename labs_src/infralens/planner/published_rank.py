"""Where each published plan ranks among the plans ``rank`` proposes for its job.

For a priced run of ``tests/data/training_runs.csv``, :func:`published_rank` ranks
the run's job (:func:`~infralens.planner.step_validation.run_job`) with
:func:`~infralens.planner.ranking.rank_job`: its model, cluster, sequence, global
batch, micro-batch, recipe (its own, else the one its ZeRO stage stands for),
kernels, recomputation, sequence parallelism and overlap options, so every plan is
priced with the software the run had, and finds the published degrees (tp, cp, pp, dp)
among its rows: their position, the number of plans ranked, and how much slower
than the first row the model prices them. A published plan the ranker does not list
(over its memory count, outside its search, or a recipe's framework that cannot run
it) has no position, and the table says why the search came back empty where it
did. The ranker prices every row with the same model, so a published plan
ranked low says the model prefers another plan by more than it can tell apart, or
that the published team chose for a reason the model does not price.

>>> from infralens.planner.step_validation import load_runs
>>> row = next(r for r in load_runs("tests/data/training_runs.csv")
...            if r.run_id == "narayanan-18.4b")
>>> r = published_rank(row)  # 2021 Megatron on 256 A100s, ranked with its software
>>> r.plan, r.position, r.ranked, round(r.slower, 3)
('tp 8 cp 1 pp 1 dp 32', 2, 10, 0.037)
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens.hardware import SYSTEMS, preset_key
from infralens.planner.ranking import rank_job
from infralens.planner.step_validation import RunCheck, TrainingRun, run_job

__all__ = [
    "MfuCeiling",
    "PublishedRank",
    "ceiling_table",
    "mfu_ceiling",
    "published_rank",
    "rank_table",
]


@dataclass(frozen=True)
class PublishedRank:
    """Where one published plan ranks: *position* among *ranked* plans (None when the
    ranker does not list it), *slower* its predicted step over the first row's, less 1,
    *why* the reason when it has no position, and *first_mfu* the MFU of the ranker's
    first row."""

    run_id: str
    plan: str
    position: int | None
    ranked: int
    slower: float | None = None
    why: str = ""
    first_mfu: float | None = None

    def __post_init__(self) -> None:
        check_fields(self, signed=("slower",))


@typed
def published_rank(row: TrainingRun, *, top: int = 1000) -> PublishedRank:
    """Rank every feasible plan for *row*'s job and find the published degrees.

    slower = predicted step of the published plan / the first row's − 1

    Raises ``ValueError`` for a row marked unpriced, ``TypeError`` for anything but a
    :class:`~infralens.planner.step_validation.TrainingRun`.
    """
    job = run_job(row)  # raises for a row marked unpriced
    degrees = (row.tp, row.cp, row.pp, row.dp)
    name = "tp {} cp {} pp {} dp {}".format(*degrees)
    try:  # every plan priced as the run ran: its recipe, kernels and options
        rows = rank_job(job, top=top, max_cp=max(8, row.cp))
    except ValueError as err:  # nothing feasible, or a search too large
        return PublishedRank(row.run_id, name, None, 0, why=str(err).split(";")[0])
    top_mfu = rows[0].estimate.mfu
    for i, r in enumerate(rows, start=1):
        if (r.plan.tp, r.plan.cp, r.plan.pp, r.plan.dp) == degrees:
            best = rows[0].estimate.seconds
            return PublishedRank(row.run_id, name, i, len(rows),
                                 r.estimate.seconds / best - 1, first_mfu=top_mfu)  # fmt: skip
    why = "not among the plans the ranker lists"
    # the ranker keeps TP inside one NVLink domain
    if row.tp > job.cluster.domain_size:
        why = f"tp beyond one {job.cluster.domain_size}-GPU NVLink domain, outside the search"
    return PublishedRank(
        row.run_id, name, None, len(rows), why=why, first_mfu=top_mfu
    )


@typed
def rank_table(ranks: list[PublishedRank]) -> str:
    """The ranks as a MyST table: run, published plan, its position, how much slower.

    >>> print(rank_table([PublishedRank("a", "tp 8 cp 1 pp 1 dp 1", 2, 5, 0.031)]))
    ... # doctest: +NORMALIZE_WHITESPACE
    | Run | Published plan | Rank | Slower than the first row |
    | --- | --- | ---: | ---: |
    | a | tp 8 cp 1 pp 1 dp 1 | 2 of 5 | +3.1 % |
    """
    lines = ["| Run | Published plan | Rank | Slower than the first row |",
             "| --- | --- | ---: | ---: |"]  # fmt: skip
    for r in ranks:
        if r.position is None:
            where, slower = f"not ranked ({r.why})", "–"
        else:
            where = f"{r.position} of {r.ranked}"
            slower = f"{100 * (r.slower or 0.0):+.1f} %"
        lines.append(f"| {r.run_id} | {r.plan} | {where} | {slower} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class MfuCeiling:
    """One model class on one GPU in one precision: the best published MFU and the
    highest MFU the ranker's first row offers for any of its published jobs."""

    model: str
    gpu: str
    precision: str
    runs: int
    best_published: float
    best_run: str
    offered: float

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def ratio(self) -> float:
        """offered / best published: above 1.1, an offer ten per cent past any measured run."""
        return self.offered / self.best_published


@typed
def mfu_ceiling(
    checks: list[RunCheck], ranks: list[PublishedRank]
) -> list[MfuCeiling]:
    """For each (model, GPU, precision) in *checks*: best published MFU against the
    ranker's highest first-row MFU over the class's jobs (*ranks*, by run id)."""
    first = {r.run_id: r.first_mfu for r in ranks if r.first_mfu is not None}
    classes: dict[tuple[str, str, str], list[RunCheck]] = {}
    for c in checks:
        key = (c.row.model, preset_key(SYSTEMS[c.row.system].gpu), c.row.precision)
        classes.setdefault(key, []).append(c)
    out = []
    for (model, gpu, precision), mine in sorted(classes.items()):
        offers = [first[c.row.run_id] for c in mine if c.row.run_id in first]
        if not offers:
            continue
        best = max(mine, key=lambda c: c.published_mfu)
        out.append(MfuCeiling(model, gpu, precision, len(mine), best.published_mfu,
                              best.row.run_id, max(offers)))  # fmt: skip
    return out


@typed
def ceiling_table(rows: list[MfuCeiling]) -> str:
    """The :func:`mfu_ceiling` rows as a MyST table, the ratio before the best run's id;
    a model id may break after each colon (``<wbr/>``, which HTML and EPUB honour and
    LaTeX drops), so the table fits a page's width."""
    lines = ["| Model | GPU, precision | Runs | Best published MFU | Ranker's first row "
             "| Ratio | Best run |", "| --- | --- | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r.model.replace(':', ':<wbr/>')} | {r.gpu}, {r.precision.upper()} | "
            f"{r.runs} | "
            f"{100 * r.best_published:.1f} % | {100 * r.offered:.1f} % | "
            f"{r.ratio:.2f} | {r.best_run} |"
        )
    return "\n".join(lines)
