"""The filled worksheet as MyST tables: axes, traffic, the step's terms and memory.

:func:`worksheet_tables` writes out a :class:`~infralens.planner.worksheet.Worksheet` that
:func:`infralens.planner.design.fill_worksheet` filled; it prices nothing, reading every
number from the sheet and its step estimate.

How each link reads in the tables:

>>> LINK_WORDS["nvlink"], LINK_WORDS["network"]
('NVLink, inside a node', 'network, between nodes')
"""

from __future__ import annotations

from infralens._typecheck import typed
from infralens.planner.step_result import Estimate
from infralens.planner.worksheet import STEP_TERMS, Worksheet, group_ranks

__all__ = ["worksheet_tables"]

LINK_WORDS = {
    "nvlink": "NVLink, inside a node",
    "network": "network, between nodes",
}
"""How a tier name reads in the worksheet's tables."""


def _risk(sheet: Worksheet, e: Estimate, axis: str) -> str:
    """The step's prediction for an axis: exposed seconds of its total, share of the step."""
    exposed = e.breakdown.pp_p2p if axis == "pp" else getattr(e.breakdown, axis)
    total = float(sum(r.seconds_per_step for r in sheet.comms if r.axis == axis))
    share = f"{exposed:.2f} s of its {total:.2f} s exposed, {exposed / e.seconds:.1%} of the step"
    if axis == "pp":
        return f"a bubble of {float(sheet.bubble_fraction):.1%} of ideal compute and {share}"
    return share


@typed
def worksheet_tables(sheet: Worksheet) -> str:
    """The filled worksheet as MyST: the axis table, the traffic table and the step's terms.

    Placement names the axis's slowest group (the one the step prices: DP's spans
    dp·cp ranks) and the link it crosses; the
    traffic table gives each collective's calls per step, its bytes sent per GPU
    per step and its seconds per step before overlap (the row's own price), and
    its risk: what a profiler trace would show and how to measure it, with, on
    each axis's first row, what the step estimate leaves exposed
    (share = term / step).
    The step table lists every nonzero term; the largest bounds the step.

    >>> from infralens.planner.design import fill_worksheet
    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> from infralens.planner.job import Job
    >>> two_nodes = Cluster.from_node_shape("2_nodes_x_8_gpus")
    >>> job = Job("llama3-8b", ParallelPlan(tp=8, dp=2), two_nodes, seq_len=2048,
    ...           global_batch_size=16)
    >>> text = worksheet_tables(fill_worksheet(job))
    >>> for row in text.splitlines():
    ...     if row.startswith(("| TP |", "| DP |")):
    ...         print(row.split(" | ")[:3])
    ['| TP', '8', 'NVLink, inside a node: ranks 0–7']
    ['| DP', '2', 'network, between nodes: ranks 0, 8']
    >>> for line in text.splitlines():
    ...     if line.startswith("```{table}"):
    ...         print(line.removeprefix("```{table} "))
    Axes: degree, placement (the slowest group's ranks) and reason
    Communication: bytes and seconds per GPU per step
    The step's terms: seconds on the critical path and share
    >>> risk = next(r for r in text.splitlines() if r.startswith("| TP all-gather"))
    >>> print(risk.split(" | ")[-1].split(" (")[-1])
    predicted: 0.19 s of its 0.25 s exposed, 42.4% of the step) |
    >>> print(text.splitlines()[-1].split(": ")[-1])
    fits, 66.7 GB spare; 8 micro-batches per replica, bubble 0.0%.
    >>> worksheet_tables(None)
    Traceback (most recent call last):
    ...
    TypeError: sheet must be a Worksheet, got NoneType
    """
    label = {"zero": "FSDP/ZeRO"}
    out = ["```{table} Axes: degree, placement (the slowest group's ranks) and reason",
           "| Axis | Degree | Placement | Reason |", "| --- | ---: | --- | --- |"]  # fmt: skip
    for a in sheet.axes:
        where = LINK_WORDS.get(a.placement, "no group: degree 1")
        if a.group:  # the group its collectives wait for, as the step prices it
            where += ": " + group_ranks(a.group)
        out.append(
            f"| {label.get(a.axis, a.axis.upper())} | {a.degree} | {where} | {a.reason} |"
        )
    out += ["```", "", "```{table} Communication: bytes and seconds per GPU per step",
            "| Communication | Frequency | Preferred link | GB sent | Seconds, before overlap "
            "| Risk |", "| --- | --- | --- | ---: | ---: | --- |"]  # fmt: skip
    seen: set[str] = set()
    for r in sheet.comms:
        if r.axis == "compute":
            continue
        # what the trace shows; the axis's first row adds what the step predicts
        risk = r.risk
        if sheet.step is not None and r.axis not in seen:
            risk += f" (predicted: {_risk(sheet, sheet.step, r.axis)})"
        seen.add(r.axis)
        op = f"{r.axis.upper()} {r.collective.replace('_', '/' if 'send' in r.collective else '-')}"
        link = LINK_WORDS.get(r.link, r.link)
        if r.axis in ("tp", "cp") and r.link != "nvlink":
            link += " (wants NVLink)"
        out.append(
            f"| {op} | {r.frequency} | {link} | "
            f"{float(r.bytes_per_step) / 1e9:,.2f} | {float(r.seconds_per_step):.3f} | {risk} |"
        )
    out += ["```"]
    if sheet.step is not None:
        e = sheet.step
        out += ["", "```{table} The step's terms: seconds on the critical path and share",
                "| Term | Seconds | Share of step |", "| --- | ---: | ---: |"]  # fmt: skip
        out += [
            f"| {STEP_TERMS[name]} | {sec:.2f} | {sec / e.seconds:.1%} |"
            for name, sec in e.breakdown.items()
            if sec > 0
        ]
        out += ["```", "", f"Predicted step {e.seconds:.2f} s, MFU {e.mfu:.1%}; the largest "
                f"term, which bounds the step: {STEP_TERMS[e.bottleneck]}."]  # fmt: skip
    over = sheet.shortfall_bytes / 1e9
    verdict = (
        f"does not fit by {over:.1f} GB"
        if over > 0
        else f"fits, {-over:.1f} GB spare"
    )
    out += ["", f"Memory per GPU: {sheet.model_state_bytes / 1e9:.1f} GB model states + "
            f"{sheet.activation_bytes / 1e9:.1f} GB activations = {sheet.memory_bytes / 1e9:.1f}"
            f" GB of {sheet.capacity_bytes / 1e9:.0f} GB: {verdict}; {sheet.microbatches} "
            f"micro-batches per replica, bubble {float(sheet.bubble_fraction):.1%}."]  # fmt: skip
    return "\n".join(out) + "\n"
