"""How frameworks and papers count the FLOPs behind a published MFU or TFLOP/s.

A figure of "TFLOP/s per GPU" is a count of FLOPs per token times tokens per
second, and the count is a convention, not a measurement. They differ in the
attention term: per token and layer, the score and value products cost
4·h·s forward and 8·h·s backward over the whole s × s matrix (12·L·h·s for
the model), half of that under a causal mask (6·L·h·s), and Narayanan et
al.'s Eq. 3 adds a recomputed forward pass on top. The weight term is
6·N in every convention below, with N the parameters a token multiplies
(the layers and the output projection; the embedding lookup is no matmul).

- ``megatron-lm``: 6N + 6·L·h·s, the causal half (``num_floating_point_operations``
  in ``megatron/training/training.py``); the count the package's MFU uses.
- ``torchtitan``: 6N + 12·L·h·s (``get_num_flop_per_token``), the full matrix.
- ``palm``: 6N + 12·L·h·s (Chowdhery et al. 2022, Appendix B).
- ``nemo``: 6N + 12·L·h·s (``llama3`` in ``nemo/utils/flops_formulas.py``).
- ``narayanan-eq3``: Eq. 3 of Narayanan et al. (2021): four passes over the
  layers (recomputation counted), the full s² attention, the logits once.
- ``llama3-report``: the Llama 3 report prints TFLOP/s and MFU per GPU, citing
  PaLM, without saying whether the attention term is the full or the causal
  one; both readings are kept.

:func:`tokens_per_second` turns a published rate back into tokens per second
per GPU under its convention, the one quantity every source and the step
model share:

>>> from infralens.model import PRESETS
>>> m = PRESETS["llama3-8b"]
>>> titan = flops_per_token(m, seq_len=8192, convention="torchtitan")
>>> megatron = flops_per_token(m, seq_len=8192, convention="megatron-lm")
>>> round(titan / megatron, 3)          # the same step, logged by torchtitan
1.125
>>> readings(m, seq_len=8192, convention="llama3-report")
('full', 'causal')
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, positive_int, positive_number
from infralens.compute import model_flops_per_token
from infralens.megatron_formulas import megatron_flops_per_iteration
from infralens.model import TransformerConfig

__all__ = [
    "CONVENTIONS",
    "Convention",
    "flops_per_token",
    "markdown_table",
    "readings",
    "tokens_per_second",
]


@dataclass(frozen=True)
class Convention:
    """One way of counting model FLOPs: its attention term and where it is written."""

    attention: str  # "causal", "full", "eq3" or "unstated"
    counts: str
    where: str

    def __post_init__(self) -> None:
        check_fields(self)
        check_choice(
            "attention", self.attention, ("causal", "full", "eq3", "unstated")
        )


CONVENTIONS: dict[str, Convention] = {
    "megatron-lm": Convention(
        "causal", "6N + 6·L·h·s: weights and logits, the causal half of attention",
        "NVIDIA/Megatron-LM d98e8a6, megatron/training/training.py, "
        "num_floating_point_operations"),
    "torchtitan": Convention(
        "full", "6N + 12·L·h·s: N without the token embedding, attention in full",
        "pytorch/torchtitan 0011fb9, torchtitan/utils.py, get_num_flop_per_token"),
    "palm": Convention(
        "full", "6N + 12·L·H·Q·T: attention in full, no recomputation",
        "Chowdhery et al. 2022, Appendix B"),
    "nemo": Convention(
        "full", "12·s·L·h²·(1 + g/a + 1.5·f/h + s/h + V/(2·L·h)) per sequence: "
        "attention in full",
        "NVIDIA/NeMo 034b17b, nemo/utils/flops_formulas.py, llama3"),
    "narayanan-eq3": Convention(
        "eq3", "96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)): full recomputation counted, "
        "attention in full", "Narayanan et al. 2021, Eq. 3"),
    "llama3-report": Convention(
        "unstated", "TFLOP/s and BF16 MFU per GPU, PaLM cited, attention term not stated",
        "Dubey et al. 2024, Table 4"),
    "megatron-readme": Convention(
        "unstated", "per-GPU teraFLOP/s of Megatron-LM's count, the commit not named",
        "NVIDIA/Megatron-LM d98e8a6, README.md and images/model_table.png"),
}  # fmt: skip
"""Every convention a shipped figure uses, keyed by its source."""


@typed
def readings(
    model: TransformerConfig, *, seq_len: int, convention: str
) -> tuple[str, ...]:
    """The attention counts a *convention* may mean: one, or two where it is unstated.

    >>> from infralens.model import PRESETS
    >>> readings(PRESETS["llama3-8b"], seq_len=8192, convention="torchtitan")
    ('full',)
    >>> readings(PRESETS["llama3-8b"], seq_len=8192, convention="hpl")
    Traceback (most recent call last):
    ...
    ValueError: convention must be one of 'megatron-lm', 'torchtitan', ...; got 'hpl'

    Raises ``ValueError`` for an unknown *convention*.
    """
    positive_int("seq_len", seq_len)
    kind = CONVENTIONS[
        check_choice("convention", convention, tuple(CONVENTIONS))
    ].attention
    return ("full", "causal") if kind == "unstated" else (kind,)


@typed
def flops_per_token(
    model: TransformerConfig, *, seq_len: int, convention: str, reading: str = ""
) -> float:
    """Model FLOPs per trained token as *convention* counts them.

    *reading* picks ``"full"`` or ``"causal"`` for a convention that leaves it
    unstated (the first of :func:`readings` by default). Eq. 3 is the paper's
    closed form for Megatron's GPT shape, divided by the batch's tokens.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3.1-405b"]
    >>> full = flops_per_token(m, seq_len=131072, convention="llama3-report")
    >>> causal = flops_per_token(m, seq_len=131072, convention="llama3-report",
    ...                          reading="causal")
    >>> round(full / causal, 2)            # at 128K the two readings part by 40 %
    1.4
    >>> flops_per_token(m, seq_len=8192, convention="palm", reading="causal")
    Traceback (most recent call last):
    ...
    ValueError: reading must be one of 'full'; got 'causal'

    Raises ``ValueError`` for an unknown *convention* or a *reading* it does not allow.
    """
    options = readings(model, seq_len=seq_len, convention=convention)
    kind = check_choice("reading", reading, options) if reading else options[0]
    if kind == "eq3":
        flops = megatron_flops_per_iteration(
            batch_size=1, seq_len=seq_len, layers=model.layers, hidden=model.hidden,
            vocab_size=model.vocab_size,
        )  # fmt: skip
        return flops / seq_len
    return float(
        model_flops_per_token(model, seq_len=seq_len, causal=kind == "causal")
    )


@typed
def tokens_per_second(
    tflops: float,
    model: TransformerConfig,
    *,
    seq_len: int,
    convention: str,
    reading: str = "",
) -> float:
    """Tokens per second per GPU behind a published *tflops* per GPU counted by *convention*.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> round(tokens_per_second(400, m, seq_len=8192, convention="torchtitan"))
    6907
    >>> round(tokens_per_second(400, m, seq_len=8192, convention="megatron-lm"))
    7771
    >>> tokens_per_second(0, m, seq_len=8192, convention="palm")
    Traceback (most recent call last):
    ...
    ValueError: tflops must be > 0, got 0

    Raises ``ValueError`` for a rate of 0 or less and for what :func:`flops_per_token` refuses.
    """
    rate = positive_number("tflops", tflops) * 1e12
    return rate / flops_per_token(
        model, seq_len=seq_len, convention=convention, reading=reading
    )


@typed
def markdown_table(model: TransformerConfig, *, seq_len: int) -> str:
    """Markdown: each convention, what it counts, where, and its FLOPs per token of *model*
    at *seq_len* relative to the package's (Megatron-LM's) count."""
    ours = flops_per_token(model, seq_len=seq_len, convention="megatron-lm")
    lines = [
        "| convention | attention | counts | relative to Megatron-LM | written in |",
        "| --- | --- | --- | ---: | --- |",
    ]
    for name, c in CONVENTIONS.items():
        ratio = " or ".join(
            f"{flops_per_token(model, seq_len=seq_len, convention=name, reading=r) / ours:.3f}"
            for r in readings(model, seq_len=seq_len, convention=name)
        )
        lines.append(
            f"| `{name}` | {c.attention} | {c.counts} | {ratio} | {c.where} |"
        )
    return "\n".join(lines) + "\n"
