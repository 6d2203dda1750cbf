"""The lab list: each lab's number, topic, starter modules, pages and axis.

One table the landing page, its map figure and the per-page provenance lines
are generated from, and a test checks against the files: every lab page and
handbook section named here exists, and every module imports.

An *axis* is the parallelism dimension or topic group a lab belongs to: the
six parallelism axes of :data:`AXES`, then the cluster topics (how axes are
placed on GPUs and links, and what fits), the operations topics (saving,
diagnosing and keeping a job running) and interview practice.

>>> lab(4).topic
'FSDP life cycle'
>>> lab(4).modules
('infralens.fsdp', 'infralens.fsdp_memory')
>>> [item.number for item in labs_on_axis("PP")]
[6]
>>> len(LABS), len(SECTIONS)
(18, 19)
>>> READING_PATHS["size and place a real job"][:3]
('handbook/00-model-arithmetic', 'handbook/17-memory', 'labs/lab-17-memory')
>>> READING_PATHS["size and place a real job"][3:6]
('handbook/03-zero', 'handbook/04-fsdp', 'handbook/05-tensor-parallel')
>>> READING_PATHS["size and place a real job"][6:8]
('handbook/06-pipeline-parallel', 'handbook/10-context-parallel')
>>> len(READING_PATHS["interview in a week"])
12
>>> lab(19)
Traceback (most recent call last):
...
ValueError: number must be one of the lab numbers 1-18, got 19
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields
from infralens._validate import check_choice, positive_int

__all__ = [
    "AXES",
    "LABS",
    "MODEL_ARITHMETIC_MODULES",
    "READING_PATHS",
    "SECTIONS",
    "TERM_HOMES",
    "Lab",
    "lab",
    "labs_on_axis",
]

AXES: tuple[str, ...] = (
    "DP",
    "ZeRO/FSDP",
    "TP/SP",
    "PP",
    "CP",
    "EP",
    "Cluster",
    "Operations",
    "Interview",
)
"""The landing map's columns: six parallelism axes, then the topic groups."""


@dataclass(frozen=True)
class Lab:
    """One lab: its number, a short topic, its axis, its modules and its two pages.

    ``modules`` are the dotted names the lab reads, its starter module first;
    ``page`` and ``section_page`` are Sphinx document names (paths under
    ``handbook/`` without ``.md``), ``section`` the label of the handbook
    section the lab belongs to.
    """

    number: int
    topic: str
    axis: str
    modules: tuple[str, ...]
    page: str
    section: str
    section_page: str

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def label(self) -> str:
        """The lab page's reference label, e.g. ``lab-04``."""
        return f"lab-{self.number:02d}"


def _lab(
    number: int,
    topic: str,
    axis: str,
    modules: tuple[str, ...],
    slug: str,
    label: str = "",
) -> Lab:
    return Lab(
        number=number,
        topic=topic,
        axis=axis,
        modules=tuple(f"infralens.{m}" for m in modules),
        page=f"labs/lab-{number:02d}-{slug}",
        section=f"section-{label or slug}",
        section_page=f"handbook/{number:02d}-{slug}",
    )


LABS: tuple[Lab, ...] = (
    _lab(1, "Data-parallel gradients", "DP", ("ddp",), "data-parallel"),
    _lab(
        2, "Gradient buckets and overlap", "DP", ("buckets",), "gradient-bucketing"
    ),
    _lab(3, "ZeRO stages", "ZeRO/FSDP", ("zero",), "zero"),
    _lab(4, "FSDP life cycle", "ZeRO/FSDP", ("fsdp", "fsdp_memory"), "fsdp"),
    _lab(
        5,
        "Tensor and sequence parallel",
        "TP/SP",
        ("tensor_parallel", "tensor_parallel_comm"),
        "tensor-parallel",
    ),
    _lab(
        6,
        "Pipeline schedules",
        "PP",
        ("pipeline", "pipeline_orders", "pipeline_schedules"),
        "pipeline-parallel",
    ),
    _lab(7, "3D parallel plan", "Cluster", ("plan",), "3d-parallelism"),
    _lab(8, "Topology", "Cluster", ("topology", "hardware"), "topology"),
    _lab(
        9, "Interview scenarios", "Interview", ("interview",), "interview-scenarios"
    ),
    _lab(
        10,
        "Context parallel",
        "CP",
        ("context_parallel", "ring_attention"),
        "context-parallel",
    ),
    _lab(
        11,
        "Expert parallel",
        "EP",
        ("experts", "expert_dispatch"),
        "expert-parallel",
    ),
    _lab(
        12,
        "64-GPU design worksheet",
        "Cluster",
        ("planner.design",),
        "cluster-design",
    ),
    _lab(13, "Sharded checkpoints", "Operations", ("checkpoint",), "checkpoints"),
    _lab(
        14,
        "Diagnosis",
        "Operations",
        ("diagnosis", "failure_checklist", "spike_localiser"),
        "diagnosis",
    ),
    _lab(15, "Inside NCCL", "Cluster", ("nccl",), "nccl"),
    _lab(
        16,
        "Step time and MFU",
        "Cluster",
        ("planner.step", "compute"),
        "step-time",
        "step",
    ),
    _lab(
        17,
        "Memory and precision",
        "Cluster",
        ("planner.fit", "memory", "precision"),
        "memory",
    ),
    _lab(
        18,
        "Operations and goodput",
        "Operations",
        ("operations", "goodput"),
        "operations",
    ),
)
"""Every lab, in number order."""

SECTIONS: tuple[str, ...] = (
    "handbook/00-model-arithmetic",
    *(item.section_page for item in LABS),
)
"""Every handbook section's document name, in reading order (Section 00 has no lab)."""


MODEL_ARITHMETIC_MODULES: tuple[str, ...] = (
    "infralens.model",
    "infralens.megatron_formulas",
    "infralens.memory",
)
"""The modules Section 00 (model arithmetic, no lab of its own) computes with."""


def _pair(*numbers: int) -> tuple[str, ...]:
    """Each lab's section, then the lab itself."""
    return tuple(
        page for n in numbers for page in (lab(n).section_page, lab(n).page)
    )


TERM_HOMES: dict[str, str] = {
    "ZeRO": "handbook/03-zero",
    "FSDP": "handbook/04-fsdp",
    "TP": "handbook/05-tensor-parallel",
    "SP": "handbook/05-tensor-parallel",
    "MAMF": "handbook/16-step-time",
    "selective recomputation": "handbook/00-model-arithmetic",
    "PP": "handbook/06-pipeline-parallel",
    "1F1B": "handbook/06-pipeline-parallel",
    "bubble": "handbook/06-pipeline-parallel",
    "virtual stage": "handbook/06-pipeline-parallel",
    "NVLink domain": "handbook/08-topology",
    "CP": "handbook/10-context-parallel",
    "ring attention": "handbook/10-context-parallel",
    "Ulysses": "handbook/10-context-parallel",
    "EP": "handbook/11-expert-parallel",
    "MoE": "handbook/11-expert-parallel",
    "capacity factor": "handbook/11-expert-parallel",
    "straggler": "handbook/14-diagnosis",
    "algbw": "handbook/15-nccl",
    "busbw": "handbook/15-nccl",
    "NVLS": "handbook/15-nccl",
    "MFU": "handbook/16-step-time",
    "HFU": "handbook/16-step-time",
    "bound by": "handbook/16-step-time",
    "master weights": "handbook/17-memory",
    "loss scaling": "handbook/17-memory",
    "precision recipe": "handbook/17-memory",
    "flight recorder": "handbook/18-operations",
    "Xid": "handbook/18-operations",
    "MTBF": "handbook/18-operations",
    "goodput": "handbook/18-operations",
}
"""Glossary terms that need their own page, and the section that explains each.

A page that uses one of these before its home page in a reading path, or on
any page but its home, links it to the glossary at its first use
(``tests/test_reading_paths.py`` checks both).
"""

READING_PATHS: dict[str, tuple[str, ...]] = {}
"""Three reading orders through the handbook, as document names (filled below)."""


def lab(number: int) -> Lab:
    """The lab numbered *number*.

    >>> lab(1).page
    'labs/lab-01-data-parallel'
    >>> lab(18).section
    'section-operations'
    >>> lab(True)
    Traceback (most recent call last):
    ...
    TypeError: number must be an int, got bool

    Raises ``ValueError`` for a number no lab has.
    """
    positive_int("number", number)
    for item in LABS:
        if item.number == number:
            return item
    raise ValueError(
        f"number must be one of the lab numbers 1-{len(LABS)}, got {number}"
    )


def labs_on_axis(axis: str) -> tuple[Lab, ...]:
    """The labs whose axis is *axis*, in number order.

    >>> [item.number for item in labs_on_axis("Operations")]
    [13, 14, 18]
    >>> labs_on_axis("DP")[0].topic
    'Data-parallel gradients'
    >>> labs_on_axis("SP")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: axis must be one of 'DP', 'ZeRO/FSDP', 'TP/SP', ..., 'Interview'; got 'SP'

    Raises ``ValueError`` for an axis not in :data:`AXES`.
    """
    check_choice("axis", axis, AXES)
    return tuple(item for item in LABS if item.axis == axis)


READING_PATHS.update(
    {
        # Everything, in number order: Section 00, then each section and its lab.
        "learn it all": (SECTIONS[0], *_pair(*(item.number for item in LABS))),
        # About three hours: the data-parallel family, each model-parallel
        # axis, how a plan is placed and priced, what fits, then answering
        # aloud. Sections only; the cards link the labs and the other axes.
        "interview in a week": (
            *(lab(n).section_page for n in (1, 3, 4, 5, 6, 7, 8, 17, 16, 9)),
            lab(9).page,
            "interview/practice",
        ),
        # Size a job (memory, then every axis `rank` chooses between: ZeRO
        # and FSDP sharding, tensor, pipeline and context parallelism, and an
        # MoE's expert layout), place it on the machine, price its traffic and
        # its step, then keep it running.
        "size and place a real job": (
            SECTIONS[0],
            *_pair(17),
            *(lab(n).section_page for n in (3, 4, 5, 6, 10, 11)),
            *_pair(7, 8, 15, 16, 12, 13, 18),
        ),
    }
)
