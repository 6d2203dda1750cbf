"""Rank every feasible plan for a model on a cluster by predicted step time.

:func:`rank_plans` walks :func:`infralens.plan.enumerate_plans` (TP inside a
node), keeps the plans whose degrees divide the model and the batch and
whose busiest GPU fits its HBM, prices each with
:func:`infralens.planner.step.estimate` under Megatron's distributed optimizer
(ZeRO-1) and under FSDP (ZeRO-3), with selective or full recomputation and,
where the layers allow, interleaving, and returns the fastest. :func:`rank_job`
searches the same plans for a :class:`~infralens.planner.job.Job` and prices each
with the job's own kernels, recomputation and options: the software it runs.

>>> from infralens.topology import Cluster
>>> c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> best = rank_plans("llama3-70b", c, seq_len=4096, global_batch_size=512, top=3)
>>> len(best), best[0].estimate.seconds <= best[-1].estimate.seconds
(3, True)
>>> rank_plans("llama3.1-405b", Cluster.from_node_shape("1_node_x_8_gpus"), seq_len=8192,
...            global_batch_size=8)
Traceback (most recent call last):
...
ValueError: no feasible plan: every plan failed a divisibility or memory check
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from infralens._typecheck import check_fields, typed
from infralens._validate import positive_int
from infralens.hardware import preset_key
from infralens.memory import RECOMPUTE, _model
from infralens.model import TransformerConfig
from infralens.plan import ParallelPlan, enumerate_plans
from infralens.planner._step_checks import rates_fit
from infralens.planner.job import Job
from infralens.planner.step import _estimate
from infralens.planner.step import _options as _job_options
from infralens.planner.step_result import Estimate
from infralens.precision import DEFAULT_RECIPE, RECIPES
from infralens.recipe import Recipe, cannot_run
from infralens.topology import Cluster

__all__ = [
    "BAND",
    "MAX_SEARCH",
    "TELLS_APART",
    "RankedPlan",
    "rank_job",
    "rank_plans",
    "render",
    "search_size",
]


@dataclass(frozen=True)
class RankedPlan:
    """A feasible :class:`~infralens.planner.job.Job` and its estimate; the job's plan and
    options read through (``row.plan``, ``row.recipe``, ...).

    :attr:`account_for_embedding_and_loss` marks a pipeline whose layers do not divide
    by pp: the embedding and the loss each take one layer's slot on the first and last
    stage."""

    job: Job
    estimate: Estimate

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def plan(self) -> ParallelPlan:
        """The job's parallel plan."""
        return self.job.plan

    @property
    def schedule(self) -> str:
        """The pipeline schedule, ``1f1b`` or ``interleaved``."""
        return self.job.schedule

    @property
    def chunks(self) -> int:
        """Model chunks per pipeline stage (v)."""
        return self.job.chunks

    @property
    def recompute(self) -> str:
        """The recomputation mode."""
        return self.job.recompute

    @property
    def recipe(self) -> str:
        """The recipe's name."""
        return self.job.resolved_recipe().name

    @property
    def zero_stage(self) -> int:
        """The recipe's ZeRO stage."""
        return self.job.resolved_recipe().zero_stage

    @property
    def account_for_embedding_and_loss(self) -> bool:
        """Whether the embedding and the loss each take a layer's slot."""
        return self.job.account_for_embedding and self.job.account_for_loss


def _slots(m: TransformerConfig, pp: int) -> int | None:
    """Layer slots split over *pp* stages: the layers or, where they do not divide, the
    layers and one slot each for the embedding and the loss; None if neither divides."""
    return next((n for n in (m.layers, m.layers + 2) if n % pp == 0), None)


def _schedules(m: TransformerConfig, pp: int) -> list[tuple[str, int]]:
    out = [("1f1b", 1)]
    slots = _slots(m, pp) or m.layers
    if pp > 1:
        out += [("interleaved", v) for v in (2, 4, 5, 8) if slots % (pp * v) == 0]
    return out


MAX_SEARCH = 1_500_000
"""Largest search :func:`rank_plans` runs, in :func:`search_size` units: about 1.5 s on
one core of the machine the package is tested on, which prices 0.7 to 1.3 million units a
second (an estimate costs about 500 units, each rank of a group it lists one more)."""


def _candidates(
    m: TransformerConfig,
    cluster: Cluster,
    seq_len: int,
    batch: int,
    micro: int,
    max_cp: int,
) -> Iterator[ParallelPlan]:
    for plan in enumerate_plans(
        cluster.world_size, cluster.gpus_per_node, max_cp=max_cp
    ):
        if _slots(m, plan.pp) is None or seq_len % plan.cp:
            continue
        if m.heads % plan.tp or m.kv_heads % plan.tp:
            continue
        if batch % (micro * plan.dp) == 0:
            yield plan


def search_size(
    model: TransformerConfig | str,
    cluster: Cluster,
    *,
    seq_len: int,
    global_batch_size: int,
    micro_batch_size: int = 1,
    max_cp: int = 8,
) -> int:
    """The work :func:`rank_plans` would do, counted before doing it.

    size = sum over the plans it would price of (options x 4) x (500 + tp + cp + pp + dp):
    each estimate (two ZeRO stages, at most two recomputation modes per option) costs
    a fixed part and lists the groups it prices collectives on.

    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    >>> search_size("llama3-70b", c, seq_len=4096, global_batch_size=512) <= MAX_SEARCH
    True
    """
    m = _model(model)
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    for name, value in (
        ("seq_len", seq_len),
        ("global_batch_size", global_batch_size),
        ("micro_batch_size", micro_batch_size),
        ("max_cp", max_cp),
    ):
        positive_int(name, value)
    return sum(
        len(_schedules(m, p.pp)) * 4 * (500 + p.tp + p.cp + p.pp + p.dp)
        for p in _candidates(
            m, cluster, seq_len, global_batch_size, micro_batch_size, max_cp
        )
    )


def rank_plans(
    model: TransformerConfig | str,
    cluster: Cluster,
    *,
    seq_len: int,
    global_batch_size: int,
    micro_batch_size: int = 1,
    top: int = 10,
    max_cp: int = 8,
    recipe: str | None = None,
) -> list[RankedPlan]:
    """The *top* fastest feasible plans, fastest first.

    Feasible: degrees multiply to the cluster, layers divide by pp·v (where the
    layers alone do not divide by pp, the layers plus one slot each for the
    embedding and the loss, as Megatron-Core splits them with
    ``--account-for-embedding-in-pipeline-split`` and
    ``--account-for-loss-in-pipeline-split``), heads and kv_heads by tp, the
    sequence by cp, the batch into micro-batches per replica, and the busiest
    GPU fits its HBM.

    Each plan is priced under *recipe*, or, left out, under the default recipe
    (:data:`~infralens.precision.DEFAULT_RECIPE`, ZeRO-1) and FSDP2 (``fsdp2``, ZeRO-3);
    each row names the recipe it was priced with. The other options are a
    :class:`~infralens.planner.job.Job`'s defaults; :func:`rank_job` ranks with a
    job's own.

    Raises ``ValueError`` when no plan is feasible, a size is below 1, the recipe is
    unknown, or the search is larger than :data:`MAX_SEARCH` (see :func:`search_size`).
    """
    m = _model(model)
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a Cluster, got {type(cluster).__name__}")
    job = Job(m, ParallelPlan(dp=cluster.world_size), cluster, seq_len,
              global_batch_size, micro_batch_size, recipe=recipe)  # fmt: skip
    return rank_job(job, top=top, max_cp=max_cp)


_Found = tuple[float, Estimate, ParallelPlan, Recipe, str, str, int, bool]
"""A plan's best estimate: seconds, estimate, plan, recipe, recompute, schedule, chunks,
and whether the embedding and the loss take a layer's slot."""

_BOTH = (RECIPES[DEFAULT_RECIPE], RECIPES["fsdp2"])
"""The recipes a job that names none is ranked under: ZeRO-1 and FSDP2."""


@typed
def rank_job(job: Job, *, top: int = 10, max_cp: int = 8) -> list[RankedPlan]:
    """The *top* fastest feasible plans for *job*'s model, cluster and batch, each
    priced with *job*'s options, fastest first.

    The search chooses what :func:`rank_plans` chooses: the degrees (laid out in the
    job's rank order), the schedule and its chunks, the stage split and, for a job
    that names no recipe or ZeRO stage, the recipe (the default one or FSDP2). The
    job's own plan and stage layout are not kept. The rest is the job's: its
    attention and element-wise kernels, sequence parallelism, gradient-reduction and
    stage-to-stage options, its rates (*sustained*) and its recomputation, which is
    the least a plan gets (a plan that does not fit with it tries the heavier modes
    in turn: none, selective, full). With *tp_comm_overlap* every plan of tp > 1 runs
    its TP collectives under its GEMMs (Transformer Engine's userbuffers; PyTorch's
    asynchronous TP under FSDP): a recipe that refuses the overlap drops the plan, and
    a tp 1 plan, with nothing to overlap, is priced as without it. ``rank
    --tp-comm-overlap`` and :func:`~infralens.planner.published_rank.published_rank`
    (each run's own job) rank through it.

    A 2021 Megatron job, attention scores in HBM and full recomputation, ranks its
    plans with both; the defaults (fused attention, selective recomputation) make the
    same model's first row 1.66 times its MFU, and no plan splits its sequences
    (context parallelism needs a fused attention kernel):

    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-a100")
    >>> old = Job("llama2-13b", ParallelPlan(dp=16), c, seq_len=4096,
    ...           global_batch_size=64, attention="materialized", recompute="full",
    ...           sequence_parallel=False)
    >>> rows = rank_job(old, top=100)
    >>> {(r.job.attention, r.recompute, r.plan.cp) for r in rows}
    {('materialized', 'full', 1)}
    >>> new = rank_plans("llama2-13b", c, seq_len=4096, global_batch_size=64, top=1)
    >>> round(new[0].estimate.mfu / rows[0].estimate.mfu, 2)
    1.66
    >>> rank_job("llama2-13b")
    Traceback (most recent call last):
    ...
    TypeError: job must be a Job, got str

    Raises what :func:`rank_plans` raises, and ``TypeError`` for a *job* that is not
    a :class:`~infralens.planner.job.Job`.
    """
    m, cluster = job.config, job.cluster
    n = positive_int("top", top)
    if job.sustained is not None:  # else every plan would fail alike, unexplained
        rates_fit(job.sustained.gpu, preset_key(cluster.system.gpu))
    # search_size checks every size before it counts anything
    size = search_size(m, cluster, seq_len=job.seq_len,
                       global_batch_size=job.global_batch_size,
                       micro_batch_size=job.micro_batch_size, max_cp=max_cp)  # fmt: skip
    if size > MAX_SEARCH:
        raise ValueError(
            f"the search over plans for {cluster.world_size} GPUs is too large to finish in "
            f"time ({size} > {MAX_SEARCH} units); rank fewer GPUs or lower max_cp (--max-cp)"
        )
    # the job's keywords; the loops set the ones the search chooses
    options = _job_options(job)
    options.update(
        uneven_stages=False, first_stage_layers=None, last_stage_layers=None
    )
    named = job.recipe is not None or job.zero_stage is not None
    recipes = (job.resolved_recipe(),) if named else _BOTH
    modes = RECOMPUTE[RECOMPUTE.index(job.recompute) :]
    # The light path: the options of each plan's best estimate, a Job only for the top rows
    found: list[_Found] = []
    for plan in _candidates(m, cluster, job.seq_len, job.global_batch_size,
                            job.micro_batch_size, max_cp):  # fmt: skip
        if plan.order != job.plan.order:
            plan = replace(plan, order=job.plan.order)
        best: _Found | None = None
        # the embedding and the loss take a layer's slot
        split = m.layers % plan.pp != 0
        options.update(account_for_embedding=split, account_for_loss=split,
                       tp_comm_overlap=job.tp_comm_overlap and plan.tp > 1)  # fmt: skip
        for schedule, chunks in _schedules(m, plan.pp):
            options.update(schedule=schedule, chunks=chunks)
            for recipe in recipes:
                if cannot_run(recipe, pp=plan.pp, cp=plan.cp, schedule=schedule):
                    continue  # a plan the recipe's framework cannot run
                if not named:
                    options.update(recipe=recipe, zero_stage=None)
                for recompute in modes:
                    options["recompute"] = recompute
                    try:
                        e = _estimate(m, plan, cluster, **options)
                    except ValueError:
                        continue
                    if best is None or e.seconds < best[0]:
                        best = (e.seconds, e, plan, recipe, recompute, schedule, chunks,
                                split)  # fmt: skip
                    break  # a heavier recomputation is only worth trying when this fails
        if best is not None:
            found.append(best)
    if not found:
        raise ValueError(
            "no feasible plan: every plan failed a divisibility or memory check"
        )
    found.sort(key=lambda r: r[0])
    return [
        RankedPlan(replace(job, plan=plan, recompute=mode, schedule=sched, chunks=v,
                           account_for_embedding=split, account_for_loss=split,
                           tp_comm_overlap=job.tp_comm_overlap and plan.tp > 1,
                           uneven_stages=False, first_stage_layers=None,
                           last_stage_layers=None,
                           recipe=job.recipe if named else recipe.name), e)
        for _, e, plan, recipe, mode, sched, v, split in found[:n]
    ]  # fmt: skip


BAND: dict[str, tuple[float, float]] = {
    "bf16": (-0.041, 0.074),
    "fp8": (-0.090, 0.027),
}
"""The step model's out-of-sample error quartiles (e25, e75), by the recipe's precision.

Over the published runs the model is checked against (``tests/data/training_runs.csv``,
the validation page), each source's runs predicted with the sustained shares fitted on
the other sources (:func:`infralens.planner.calibration.refit`) miss by e =
predicted / published − 1; half of them fall between these quartiles
(``statistics.quantiles``, n = 4). A row predicting t tokens/s per GPU is so, at even
odds, measured between t / (1 + e75) and t / (1 + e25). ``tests/test_step.py``
recomputes both from the data."""

TELLS_APART = round((1 + BAND["bf16"][1]) / (1 + BAND["bf16"][0]) - 1, 2)
"""Step times closer than this fraction are not told apart: the width of the BF16
band, (1 + e75) / (1 + e25) − 1, so a prediction this much faster can be the same
speed measured."""


def _band(row: RankedPlan) -> tuple[float, float]:
    precision = RECIPES[row.recipe].precision if row.recipe in RECIPES else "bf16"
    return BAND.get(precision, BAND["bf16"])


@typed
def render(ranked: list[RankedPlan]) -> str:
    """The ranking as a Markdown table, each row naming its recipe; a schedule is shown only
    where there is a pipeline. Each row gives the tokens/s per GPU it likely measures
    (:data:`BAND`) and how much slower than row 1 it is predicted, marked ≈ where that is
    within row 1's band width, closer than the model tells apart."""
    lines = [
        "| # | tp | cp | pp | dp | schedule | recipe | ZeRO | recompute | step (s) "
        "| tokens/s/GPU (likely measured) | vs #1 | MFU | GB/GPU | bound by |",
        "| ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | --- | ---: | ---: | ---: "
        "| ---: | ---: | --- |",
    ]
    first = ranked[0] if ranked else None
    for i, r in enumerate(ranked, start=1):
        e, p = r.estimate, r.plan
        sched = r.schedule if r.chunks == 1 else f"{r.schedule} v={r.chunks}"
        sched = sched if p.pp > 1 else "–"
        pp = f"{p.pp}†" if r.account_for_embedding_and_loss else str(p.pp)
        low, high = _band(r)
        t = e.tokens_per_second_per_gpu
        versus = "–"
        if first is not None and i > 1:
            slower = e.seconds / first.estimate.seconds - 1
            lo1, hi1 = _band(first)
            near = e.seconds <= first.estimate.seconds * (1 + hi1) / (1 + lo1)
            versus = f"+{slower:.0%}" + (" ≈" if near else "")
        lines.append(
            f"| {i} | {p.tp} | {p.cp} | {pp} | {p.dp} | {sched} | {r.recipe or '–'} | "
            f"{r.zero_stage} | {r.recompute} | {e.seconds:.2f} | "
            f"{t:,.0f} ({t / (1 + high):,.0f}–{t / (1 + low):,.0f}) | {versus} | "
            f"{e.mfu:.1%} | {e.memory_bytes / 1e9:.1f} | {e.bottleneck} |"
        )
    if any(r.account_for_embedding_and_loss for r in ranked):
        lines.append(
            "\n† The layers do not divide by pp: the embedding and the loss each take a layer's "
            "slot on the first and the last stage (Megatron-Core's --account-for-embedding-in-"
            "pipeline-split and --account-for-loss-in-pipeline-split; torchtitan's "
            "pipeline_parallel_first/last_stage_less_layers, 1 by default at b5bcd76)."
        )
    lines.append(
        "\nLikely measured: the middle half of the step model's out-of-sample misses on "
        "published runs. ≈: closer to row 1 than the model can tell apart; measure before "
        "choosing among those rows."
    )
    return "\n".join(lines)
