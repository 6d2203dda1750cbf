"""The 64-GPU design worksheet, filled by code: axes, links, memory and traffic per step.

Given a dense transformer workload, a cluster and a
:class:`~infralens.plan.ParallelPlan`,
:func:`fill_worksheet` answers what a design review asks: where each axis's
groups sit (inside a node or across nodes), which collectives each axis runs,
how often and over which link, how many bytes of model state and activations
one GPU holds, and which communication is likely to bound the step.

>>> from infralens.plan import ParallelPlan
>>> from infralens.topology import Cluster
>>> cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> work = Workload(num_params=68_976_648_192, layers=80, hidden=8192, heads=64, seq_len=4096,
...                 micro_batch_size=1, global_batch_size=512)
>>> sheet = fill_worksheet(ParallelPlan(tp=8, pp=4, dp=2), cluster, work)
>>> [(row.axis, row.placement) for row in sheet.axes]
[('tp', 'nvlink'), ('pp', 'network'), ('dp', 'network')]
>>> sheet.bottleneck
'tp all_reduce'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from infralens._validate import check_choice, positive_int
from infralens.batch import grad_accum_steps_for
from infralens.collectives import ring_bytes_sent
from infralens.fit import HBM_BYTES
from infralens.memory import RECOMPUTE, activation_bytes_per_layer, bytes_per_parameter
from infralens.nccl import predict
from infralens.plan import FREQUENCY, ParallelPlan
from infralens.sharding import padded_shard_size
from infralens.topology import Cluster
from infralens.zero import STAGES, model_state_bytes, step_collectives

__all__ = [
    "RECIPE_STAGE",
    "AxisRow",
    "CommRow",
    "Workload",
    "Worksheet",
    "compare",
    "fill_worksheet",
    "render_markdown",
]

RECIPE_STAGE = {
    "megatron-bf16": 0,
    "megatron-bf16-distopt": 1,
    "megatron-fp8-distopt": 1,
    "fsdp2": 3,
    "ddp": 0,
    "ddp-bucket-view": 0,
}
"""The ZeRO stage whose collectives each recipe runs; ``zero-paper`` takes any stage."""

REASONS = {
    "tp": "splits every layer's matrices; needs the fastest link",
    "cp": "splits the sequence of every layer; exchanges K/V per layer",
    "pp": "splits depth into stages; only neighbours talk",
    "dp": "replicas (sharded by ZeRO) over the rest; one sync per step",
}


@dataclass(frozen=True)
class Workload:
    """A dense transformer training job: model shape, batch and memory options."""

    num_params: int
    layers: int
    hidden: int
    heads: int
    seq_len: int
    micro_batch_size: int
    global_batch_size: int
    zero_stage: int = 1
    recompute: str = "selective"
    sequence_parallel: bool = True
    bytes_per_element: int = 2
    recipe: str = "zero-paper"
    gpu: str = "h100-sxm5-80gb"

    def __post_init__(self) -> None:
        for name in (
            "num_params",
            "layers",
            "hidden",
            "heads",
            "seq_len",
            "micro_batch_size",
            "global_batch_size",
            "bytes_per_element",
        ):
            positive_int(name, getattr(self, name))
        if self.zero_stage not in STAGES:
            raise ValueError(f"zero_stage must be one of 0, 1, 2, 3; got {self.zero_stage!r}")
        check_choice("recompute", self.recompute, RECOMPUTE)
        check_choice("gpu", self.gpu, tuple(HBM_BYTES))
        bytes_per_parameter(self.recipe)  # validates the name
        stage = RECIPE_STAGE.get(self.recipe)
        if stage is not None and stage != self.zero_stage:
            raise ValueError(
                f"recipe {self.recipe!r} shards like ZeRO stage {stage}; set zero_stage to {stage}"
            )


@dataclass(frozen=True)
class AxisRow:
    """One row of the axis table."""

    axis: str
    degree: int
    placement: str
    reason: str


@dataclass(frozen=True)
class CommRow:
    """One row of the communication table; bytes and seconds are per GPU per step."""

    axis: str
    collective: str
    frequency: str
    link: str
    bytes_per_step: Fraction
    seconds_per_step: Fraction
    risk: str


@dataclass(frozen=True)
class Worksheet:
    """The filled worksheet for one plan."""

    plan: ParallelPlan
    axes: tuple[AxisRow, ...]
    comms: tuple[CommRow, ...]
    model_state_bytes: int
    activation_bytes: int
    microbatches: int
    bubble_fraction: Fraction
    bottleneck: str
    recipe: str = "zero-paper"
    capacity_bytes: int = HBM_BYTES["h100-sxm5-80gb"]

    @property
    def memory_bytes(self) -> int:
        """Model states plus activations per GPU (no buffers or fragmentation)."""
        return self.model_state_bytes + self.activation_bytes

    @property
    def shortfall_bytes(self) -> int:
        """Bytes by which :attr:`memory_bytes` exceeds the GPU's HBM; negative when it fits."""
        return self.memory_bytes - self.capacity_bytes


def _slowest(plan: ParallelPlan, axis: str, cluster: Cluster) -> tuple[str, list[int]]:
    groups = plan.groups(axis)
    spans = [g for g in groups if cluster.tier_of(g) == cluster.inter]
    return (cluster.inter.name, spans[0]) if spans else (cluster.intra.name, groups[0])


def fill_worksheet(plan: ParallelPlan, cluster: Cluster, work: Workload) -> Worksheet:
    """Fill the axis table, communication table and memory for *plan* on *cluster*.

    Parameters are assumed evenly split over TP × PP ranks and cost the
    workload's recipe bytes per parameter (:data:`RECIPE_STAGE` ties a recipe
    to the ZeRO stage whose collectives it runs; ``zero-paper`` with
    ``zero_stage`` is the ZeRO paper's table); activations follow
    :func:`infralens.memory.activation_bytes_per_layer` for the layers of one
    stage, times the micro-batches 1F1B keeps in flight on the first stage,
    min(pp, m). The bubble is (pp − 1)/m (Narayanan et al., 2021).

    Raises ``ValueError`` if the plan does not fill the cluster, ``ep`` is
    not 1 (the worksheet models dense models), the sequence does not split
    over ``cp``, or the batch does not divide.
    """
    plan.check_world_size(cluster.world_size)
    if plan.ep != 1:
        raise ValueError(f"ep must be 1 for a dense workload, got {plan.ep}")
    if work.seq_len % plan.cp:
        raise ValueError(f"seq_len must be divisible by cp: {work.seq_len} % {plan.cp}")
    m = grad_accum_steps_for(
        global_batch_size=work.global_batch_size,
        micro_batch_size=work.micro_batch_size,
        dp_size=plan.dp,
    )
    b, s, h, e = work.micro_batch_size, work.seq_len // plan.cp, work.hidden, work.bytes_per_element
    stage_layers = padded_shard_size(work.layers, plan.pp)
    params = padded_shard_size(work.num_params, plan.tp * plan.pp)
    if work.recipe == "zero-paper":
        states = model_state_bytes(params, dp_size=plan.dp, stage=work.zero_stage)
    else:
        exact = bytes_per_parameter(work.recipe, dp_size=plan.dp) * params
        states = -(-exact.numerator // exact.denominator)
    per_layer = activation_bytes_per_layer(
        seq_len=s,
        micro_batch_size=b,
        hidden=h,
        heads=work.heads,
        tp=plan.tp,
        sequence_parallel=work.sequence_parallel,
        recompute=work.recompute,
    )
    activations = per_layer * stage_layers * min(plan.pp, m)
    bubble = Fraction(plan.pp - 1, m)

    axes, comms = [], []
    for axis in ("tp", "cp", "pp", "dp"):
        degree = getattr(plan, axis)
        if degree == 1:
            continue
        link, group = _slowest(plan, axis, cluster)
        axes.append(AxisRow(axis, degree, link, REASONS[axis]))
        calls: list[tuple[str, int, int]] = []  # (collective, bytes, calls per step)
        if axis == "tp":
            calls.append(("all_reduce", b * s * h * e, 4 * stage_layers * m))
        elif axis == "cp":
            calls.append(("all_gather", 2 * b * work.seq_len * h * e, 2 * stage_layers * m))
        elif axis == "pp":
            calls.append(("send_recv", b * s * h * e, 2 * m))
        else:
            for op, _ in step_collectives(work.zero_stage):
                calls.append((op, params * e, stage_layers if work.zero_stage == 3 else 1))
        for op, nbytes, count in calls:
            if op == "send_recv":
                sent = Fraction(nbytes * count)
                pair = [0, plan.rank(pp=1)]
                seconds = count * Fraction(predict("send_recv", nbytes, cluster, pair).seconds)
                link = cluster.tier_of(pair).name
            elif axis == "dp" and work.zero_stage == 3:
                sent = ring_bytes_sent(op, nbytes, degree)
                seconds = Fraction(predict(op, nbytes // count, cluster, group).seconds) * count
            else:
                sent = ring_bytes_sent(op, nbytes, degree) * count
                seconds = Fraction(predict(op, nbytes, cluster, group).seconds) * count
            risk = (
                f"bubble {float(bubble):.1%} of ideal compute"
                if axis == "pp"
                else "crosses nodes: shares the node's network adapters"
                if link == cluster.inter.name
                else "stays on the fast tier"
            )
            frequency = FREQUENCY[axis]
            if axis == "dp" and op == "all_gather":
                frequency = {
                    0: "per backward bucket (second half of the all-reduce)",
                    3: "per wrapped unit, forward and backward (FSDP/ZeRO-3 gather)",
                }.get(work.zero_stage, "per step, after the optimizer (updated parameters)")
            comms.append(CommRow(axis, op, frequency, link, sent, seconds, risk))
    worst = max(comms, key=lambda row: row.seconds_per_step, default=None)
    bottleneck = "compute" if worst is None else f"{worst.axis} {worst.collective}"
    return Worksheet(
        plan, tuple(axes), tuple(comms), states, activations, m, bubble, bottleneck,
        work.recipe, HBM_BYTES[work.gpu],
    )  # fmt: skip


def compare(plans: Sequence[ParallelPlan], cluster: Cluster, work: Workload) -> list[Worksheet]:
    """Fill one worksheet per plan, in the order given.

    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("8_nodes_x_8_gpus")
    >>> w = Workload(num_params=68_976_648_192, layers=80, hidden=8192, heads=64, seq_len=4096,
    ...              micro_batch_size=1, global_batch_size=512)
    >>> plans = [ParallelPlan(tp=8, pp=4, dp=2), ParallelPlan(tp=8, pp=8, dp=1),
    ...          ParallelPlan(tp=4, pp=4, dp=4)]
    >>> [round(s.memory_bytes / 10**9, 1) for s in compare(plans, c, w)]
    [33.0, 28.7, 53.0]
    """
    return [fill_worksheet(p, cluster, work) for p in plans]


def render_markdown(sheet: Worksheet) -> str:
    """The worksheet as two Markdown tables and a memory line.

    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("1_node_x_8_gpus")
    >>> w = Workload(num_params=10**9, layers=16, hidden=2048, heads=16, seq_len=2048,
    ...              micro_batch_size=1, global_batch_size=8)
    >>> print(render_markdown(fill_worksheet(ParallelPlan(dp=8), c, w)).splitlines()[2])
    | DP | 8 | nvlink | replicas (sharded by ZeRO) over the rest; one sync per step |
    """
    lines = ["| Axis | Degree | Placement | Reason |", "| --- | ---: | --- | --- |"]
    lines += [f"| {r.axis.upper()} | {r.degree} | {r.placement} | {r.reason} |" for r in sheet.axes]
    lines += [
        "",
        "| Communication | Frequency | Link | GB sent per GPU per step | ms per step | Risk |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    lines += [
        f"| {r.axis.upper()} {r.collective} | {r.frequency} | {r.link} | "
        f"{float(r.bytes_per_step) / 1e9:.2f} | {float(r.seconds_per_step) * 1e3:.1f} | {r.risk} |"
        for r in sheet.comms
    ]
    over = sheet.shortfall_bytes / 1e9
    verdict = f"does not fit by {over:.1f} GB" if over > 0 else f"fits, {-over:.1f} GB spare"
    lines += [
        "",
        f"Memory per GPU ({sheet.recipe} recipe): {sheet.model_state_bytes / 1e9:.1f} GB model "
        f"states + {sheet.activation_bytes / 1e9:.1f} GB activations = "
        f"{sheet.memory_bytes / 1e9:.1f} GB of {sheet.capacity_bytes / 1e9:.0f} GB HBM: {verdict} "
        "(before the CUDA context, NCCL buffers and fragmentation); "
        f"{sheet.microbatches} micro-batches, bubble {float(sheet.bubble_fraction):.1%}; "
        f"expected bottleneck: {sheet.bottleneck}.",
    ]
    return "\n".join(lines)
