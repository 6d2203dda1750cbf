"""Batch arithmetic: micro-batch x accumulation steps x data-parallel degree.

One optimizer step consumes ``micro_batch_size`` samples per forward on each
data-parallel rank, ``grad_accum_steps`` times, on ``dp_size`` ranks.

>>> global_batch_size(micro_batch_size=4, grad_accum_steps=8, dp_size=32)
1024
>>> tokens_per_step(micro_batch_size=4, grad_accum_steps=8, dp_size=32, seq_len=4096)
4194304
>>> grad_accum_steps_for(global_batch_size=1024, micro_batch_size=4, dp_size=32)
8

Tensor- and pipeline-parallel ranks do not multiply the batch: they share
one replica, so only the data-parallel degree counts here.
"""

from __future__ import annotations

from infralens._validate import positive_int

__all__ = ["global_batch_size", "grad_accum_steps_for", "tokens_per_step"]


def global_batch_size(
    *, micro_batch_size: int, grad_accum_steps: int, dp_size: int
) -> int:
    """Samples per optimizer step: ``micro_batch_size * grad_accum_steps * dp_size``.

    >>> global_batch_size(micro_batch_size=2, grad_accum_steps=1, dp_size=8)
    16
    >>> global_batch_size(micro_batch_size=1, grad_accum_steps=1, dp_size=1)
    1
    >>> global_batch_size(micro_batch_size=2, grad_accum_steps=0, dp_size=8)
    Traceback (most recent call last):
    ...
    ValueError: grad_accum_steps must be >= 1, got 0

    Raises ``ValueError`` (or ``TypeError`` for non-ints) if any argument is
    not a positive int.
    """
    return (
        positive_int("micro_batch_size", micro_batch_size)
        * positive_int("grad_accum_steps", grad_accum_steps)
        * positive_int("dp_size", dp_size)
    )


def tokens_per_step(
    *, micro_batch_size: int, grad_accum_steps: int, dp_size: int, seq_len: int
) -> int:
    """Tokens per optimizer step: ``global_batch_size * seq_len``.

    >>> tokens_per_step(micro_batch_size=1, grad_accum_steps=16, dp_size=64, seq_len=2048)
    2097152
    >>> tokens_per_step(micro_batch_size=1, grad_accum_steps=1, dp_size=1, seq_len=1)
    1

    Raises ``ValueError`` if any argument is not a positive int.
    """
    samples = global_batch_size(
        micro_batch_size=micro_batch_size,
        grad_accum_steps=grad_accum_steps,
        dp_size=dp_size,
    )
    return samples * positive_int("seq_len", seq_len)


def grad_accum_steps_for(
    *, global_batch_size: int, micro_batch_size: int, dp_size: int
) -> int:
    """Accumulation steps that reach *global_batch_size*: ``B / (b * d)``.

    >>> grad_accum_steps_for(global_batch_size=512, micro_batch_size=2, dp_size=16)
    16
    >>> grad_accum_steps_for(global_batch_size=8, micro_batch_size=1, dp_size=8)
    1
    >>> grad_accum_steps_for(global_batch_size=1000, micro_batch_size=4,
    ...                      dp_size=64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: global_batch_size must divide by micro_batch_size * dp_size: ... = 232

    Raises ``ValueError`` if an argument is not a positive int or the global
    batch is not a whole multiple of ``micro_batch_size * dp_size``.
    """
    total = positive_int("global_batch_size", global_batch_size)
    per_pass = positive_int("micro_batch_size", micro_batch_size) * positive_int(
        "dp_size", dp_size
    )
    if total % per_pass:
        raise ValueError(
            "global_batch_size must divide by micro_batch_size * dp_size: "
            f"{total} % ({micro_batch_size} * {dp_size}) = {total % per_pass}"
        )
    return total // per_pass
