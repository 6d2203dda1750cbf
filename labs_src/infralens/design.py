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
>>> [(row.axis, row.degree, row.placement) for row in sheet.axes]
[('tp', 8, 'nvlink'), ('pp', 4, 'network'), ('dp', 2, 'network'), ('zero', 2, 'network')]
>>> sheet.bottleneck, round(sheet.step.seconds, 1), round(sheet.step.mfu, 2)
('compute', 28.4, 0.52)

Communication and the bubble are priced by :func:`infralens.step.estimate`
(collectives through :func:`infralens.nccl.predict`); the worksheet prices
nothing itself. The table shows each collective's full time, the step
table what is left exposed after overlap.
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
from infralens.model import PRESETS, TransformerConfig
from infralens.nccl import predict
from infralens.plan import FREQUENCY, ParallelPlan
from infralens.sharding import padded_shard_size
from infralens.step import Estimate, estimate
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
    "zero": "shards optimizer state (ZeRO-1/2) or everything (ZeRO-3/FSDP) over the DP group",
}

STEP_TERMS = {
    "compute": "compute (GEMMs and attention)",
    "tp": "exposed TP communication",
    "cp": "exposed CP communication",
    "ep": "exposed EP communication",
    "pp_bubble": "pipeline bubble",
    "pp_p2p": "pipeline send/recv",
    "dp": "exposed DP/FSDP communication",
    "optimizer": "optimizer step",
}
"""How each term of :class:`infralens.step.Breakdown` is named on the worksheet."""


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
    model: str = ""
    schedule: str = "1f1b"
    chunks: int = 1
    token_budget: int = 2 * 10**12

    def config(self) -> TransformerConfig:
        """The model the step is priced for: the ``model`` field's preset, else the preset whose
        size and shape match, else a GPT-shaped stand-in (4h MLP, kv heads = heads) whose
        vocabulary makes up the parameter count."""
        if self.model:
            return PRESETS[check_choice("model", self.model, tuple(PRESETS))]
        for preset in PRESETS.values():
            shape = (preset.num_params(), preset.layers, preset.hidden, preset.heads)
            if shape == (self.num_params, self.layers, self.hidden, self.heads):
                return preset
        h = self.hidden
        body = self.layers * (12 * h * h + 4 * h) + h
        vocab = max(1, (self.num_params - body) // (2 * h))
        return TransformerConfig(layers=self.layers, hidden=h, heads=self.heads,
                                 kv_heads=self.heads, ffn_hidden=4 * h, vocab_size=vocab,
                                 seq_len=self.seq_len, norm="rmsnorm")  # fmt: skip

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
            "chunks",
            "token_budget",
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
    step: Estimate | None = None
    token_budget: int = 2 * 10**12

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

    step = estimate(
        work.config(), plan, cluster, seq_len=work.seq_len,
        global_batch_size=work.global_batch_size, micro_batch_size=work.micro_batch_size,
        sequence_parallel=work.sequence_parallel, recompute=work.recompute,
        schedule=work.schedule, chunks=work.chunks, zero_stage=work.zero_stage,
        check_memory=False,
    )  # fmt: skip
    axes = []
    for axis in ("tp", "cp", "pp", "dp"):
        if axis == "cp" and plan.cp == 1:
            continue
        link = _slowest(plan, axis, cluster)[0] if getattr(plan, axis) > 1 else "none"
        axes.append(AxisRow(axis, getattr(plan, axis), link, REASONS[axis]))
    sharded = plan.dp if work.zero_stage else 1
    axes.append(AxisRow("zero", sharded, axes[-1].placement if sharded > 1 else "none",
                        f"ZeRO-{work.zero_stage}: " + REASONS["zero"]))  # fmt: skip
    compute = Fraction(step.breakdown.compute)
    comms = [CommRow("compute", "GEMMs and attention", "every micro-batch", "GPU", Fraction(0),
                     compute, "the largest term when the plan is sound")]  # fmt: skip
    for axis in ("tp", "cp", "pp", "dp"):
        degree = getattr(plan, axis)
        if degree == 1:
            continue
        link, group = _slowest(plan, axis, cluster)
        calls: list[tuple[str, int, int]] = []  # (collective, bytes, calls per step)
        if axis == "tp" and work.sequence_parallel:  # as infralens.step prices it
            calls.append(("all_gather", b * s * h * e, 4 * stage_layers * m))
            calls.append(("reduce_scatter", b * s * h * e, 4 * stage_layers * m))
        elif axis == "tp":
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
    bottleneck = step.bottleneck
    return Worksheet(
        plan, tuple(axes), tuple(comms), states, activations, m, bubble, bottleneck,
        work.recipe, HBM_BYTES[work.gpu], step, work.token_budget,
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
    >>> print(render_markdown(fill_worksheet(ParallelPlan(dp=8), c, w)).splitlines()[4])
    | DP | 8 | nvlink | replicas (sharded by ZeRO) over the rest; one sync per step |
    """
    lines = ["| Axis | Degree | Placement | Reason |", "| --- | ---: | --- | --- |"]
    label = {"zero": "FSDP/ZeRO"}
    lines += [
        f"| {label.get(r.axis, r.axis.upper())} | {r.degree} | {r.placement} | {r.reason} |"
        for r in sheet.axes
    ]
    lines += [
        "",
        "| Communication | Frequency | Link | GB sent per GPU per step "
        "| ms per step, before overlap | Risk |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    lines += [
        f"| {r.axis.upper() if r.axis != 'compute' else 'Compute:'} {r.collective} | "
        f"{r.frequency} | {r.link} | "
        f"{f'{float(r.bytes_per_step) / 1e9:.2f}' if r.axis != 'compute' else '–'} | "
        f"{float(r.seconds_per_step) * 1e3:.1f} | {r.risk} |"
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
        f"expected bottleneck: {STEP_TERMS.get(sheet.bottleneck, sheet.bottleneck)}.",
    ]
    if sheet.step is not None:
        e = sheet.step
        lines += ["", "| Step time | ms | share |", "| --- | ---: | ---: |"]
        lines += [
            f"| {STEP_TERMS[name]} | {sec * 1e3:,.0f} | {sec / e.seconds:.1%} |"
            for name, sec in e.breakdown.items()
            if sec > 0
        ]
        lines += [
            "",
            f"Step {e.seconds:.2f} s, {e.tokens_per_second_per_gpu:,.0f} tokens/s per GPU, "
            f"MFU {e.mfu:.1%} (dense peak); {sheet.token_budget / 1e12:g}T tokens take "
            f"{e.days(sheet.token_budget):.0f} days on {e.gpus} GPUs.",
        ]
    return "\n".join(lines)
