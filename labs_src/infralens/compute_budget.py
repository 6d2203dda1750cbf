"""Compute budgets: C = 6ND, the compute-optimal size, GPU-hours and over-training.

A dense decoder spends about 6 FLOPs per parameter per training token (2 in
the forward pass, 4 in the backward), so a run of N parameters on D tokens
costs C = 6ND. Hoffmann et al. (2022, "Chinchilla") fitted how to split a
fixed C between N and D; their Approach 1 gives N_opt proportional to C^a
with a = 0.50 and D_opt to C^b with b = 0.50, about 20 tokens per parameter.
Production models train far past that point, because a smaller model costs
less at every token it later serves.

Chinchilla's own budget, and Table 3's 10B row:

>>> training_flops(70 * 10**9, 1.4e12)
5.88e+23
>>> flops, tokens = chinchilla_budget(10e9)
>>> f"{flops:.2e}", f"{tokens / 1e9:.1f}B"
('1.23e+22', '205.1B')

Llama 3 405B's budget (3.8e25 FLOPs) on H100s at 40 % MFU:

>>> round(gpu_hours(3.8e25, peak_flops=989e12, mfu=0.40) / 1e6, 1)
26.7
"""

from __future__ import annotations

from infralens._typecheck import typed

__all__ = [
    "APPROACH1_EXPONENT",
    "APPROACH1_TOKENS_PER_PARAM_AT_1B",
    "MAX_COUNT",
    "chinchilla_budget",
    "compute_optimal",
    "gpu_hours",
    "lifetime_flops",
    "overtraining_factor",
    "tokens_per_parameter",
    "training_flops",
]

APPROACH1_EXPONENT = 0.4981
"""a in N_opt = G * C**a for Hoffmann et al.'s Approach 1.

The paper prints a = 0.50 (interval 0.488 to 0.502) and no coefficient.
Table 3 pins both: a power law with C = 6ND matches the eight rows other
than the Gopher-budget row, in both columns, within their printed digits
only for a between 0.49809 and 0.49812 and 20.150 to 20.160 tokens per
parameter at one billion parameters."""

APPROACH1_TOKENS_PER_PARAM_AT_1B = 20.155
"""D_opt / N_opt at N = 1e9 under Approach 1 (see :data:`APPROACH1_EXPONENT`)."""

_C_AT_1B = 6 * 1e9 * APPROACH1_TOKENS_PER_PARAM_AT_1B * 1e9  # FLOPs at N = 1e9


MAX_COUNT = 1e30
"""Largest count (parameters, tokens, FLOPs, FLOP/s) the functions take: far past
any real budget (10**30 FLOPs is about 10**4 times Llama 3 405B's), and small
enough that no power or product here overflows a float."""


def _positive(name: str, value: float) -> float:
    """*value* as a float if it is a count in [1, MAX_COUNT]; else a ValueError."""
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    if not 1 <= value <= MAX_COUNT:
        raise ValueError(
            f"{name} must be between 1 and {MAX_COUNT:.0e}, got {value}"
        )
    return float(value)


@typed
def training_flops(params: float, tokens: float) -> float:
    """Training FLOPs of a dense model: C = 6 * N * D.

    2ND in the forward pass and 4ND in the backward; attention's score FLOPs
    and recomputation are left out, as in Kaplan et al. and Hoffmann et al.

    >>> training_flops(1e9, 20e9)
    1.2e+20
    >>> training_flops(405e9, 15.6e12)  # Llama 3 405B: "3.8e25"
    3.7908e+25
    >>> training_flops(0, 1e9)
    Traceback (most recent call last):
    ...
    ValueError: params must be > 0, got 0

    Raises ``ValueError`` for a count that is not in [1, MAX_COUNT].
    """
    return 6 * _positive("params", params) * _positive("tokens", tokens)


@typed
def tokens_per_parameter(params: float, tokens: float) -> float:
    """Training tokens per parameter, D / N (Chinchilla-optimal is about 20).

    >>> tokens_per_parameter(70e9, 1.4e12)
    20.0
    >>> round(tokens_per_parameter(8e9, 15e12))  # Llama 3 8B
    1875

    Raises ``ValueError`` for a count that is not in [1, MAX_COUNT].
    """
    return _positive("tokens", tokens) / _positive("params", params)


@typed
def chinchilla_budget(params: float) -> tuple[float, float]:
    """The compute and tokens that make *params* compute-optimal (Approach 1).

    C = C_1B * (N / 1e9) ** (1 / a) and D = C / (6N), the direction of
    Hoffmann et al.'s Table 3 (a model size in, FLOPs and tokens out).

    >>> flops, tokens = chinchilla_budget(1e12)
    >>> f"{flops:.2e}", f"{tokens / 1e12:.1f}T"
    ('1.27e+26', '21.2T')
    >>> flops, tokens = chinchilla_budget(400e6)
    >>> f"{flops:.2e}", f"{tokens / 1e9:.1f}B"
    ('1.92e+19', '8.0B')
    >>> chinchilla_budget(-1.0)
    Traceback (most recent call last):
    ...
    ValueError: params must be > 0, got -1.0

    Raises ``ValueError`` for *params* not in [1, MAX_COUNT].
    """
    n = _positive("params", params)
    flops = _C_AT_1B * (n / 1e9) ** (1 / APPROACH1_EXPONENT)
    return flops, flops / (6 * n)


@typed
def compute_optimal(flops: float) -> tuple[float, float]:
    """Approach 1's compute-optimal parameters and tokens for a budget of *flops*.

    N_opt = 1e9 * (C / C_1B) ** a and D_opt = C / (6 * N_opt).

    >>> n, d = compute_optimal(5.76e23)  # Gopher's budget
    >>> round(n / 1e9, 1), round(d / 1e12, 2), round(d / n, 1)
    (67.9, 1.41, 20.8)
    >>> compute_optimal(0.0)
    Traceback (most recent call last):
    ...
    ValueError: flops must be > 0, got 0.0

    Raises ``ValueError`` for *flops* not in [1, MAX_COUNT].
    """
    c = _positive("flops", flops)
    n = 1e9 * (c / _C_AT_1B) ** APPROACH1_EXPONENT
    return n, c / (6 * n)


@typed
def gpu_hours(flops: float, *, peak_flops: float, mfu: float) -> float:
    """GPU-hours to spend *flops* at a model FLOPs utilisation *mfu* of *peak_flops*.

    hours = C / (peak * MFU) / 3600, peak in FLOP/s per GPU (dense, not sparse).

    >>> round(gpu_hours(5.88e23, peak_flops=989e12, mfu=0.40))  # Chinchilla on H100
    412875
    >>> gpu_hours(1e20, peak_flops=989e12, mfu=1.5)
    Traceback (most recent call last):
    ...
    ValueError: mfu must be in [1e-06, 1], got 1.5

    Raises ``ValueError`` for *flops* or *peak_flops* outside [1, MAX_COUNT],
    or *mfu* outside [1e-6, 1].
    """
    if not 1e-6 <= mfu <= 1:
        raise ValueError(f"mfu must be in [1e-06, 1], got {mfu}")
    seconds = _positive("flops", flops) / (
        _positive("peak_flops", peak_flops) * mfu
    )
    return seconds / 3600


@typed
def overtraining_factor(params: float, tokens: float) -> float:
    """How many times the compute-optimal token count a model of *params* saw.

    factor = D / D_opt(N), with D_opt(N) from :func:`chinchilla_budget`.

    >>> round(overtraining_factor(8e9, 15e12))  # Llama 3 8B
    92
    >>> round(overtraining_factor(405e9, 15.6e12), 2)  # Llama 3 405B
    1.83

    Raises ``ValueError`` for a count that is not in [1, MAX_COUNT].
    """
    _, d_opt = chinchilla_budget(params)
    return _positive("tokens", tokens) / d_opt


@typed
def lifetime_flops(
    params: float, *, train_tokens: float, served_tokens: float
) -> float:
    """Training plus inference FLOPs: 6 * N * D_train + 2 * N * D_served.

    Serving costs about 2N FLOPs a token (the forward pass only), so once
    served tokens dwarf training tokens the smaller, longer-trained model wins.

    >>> big = lifetime_flops(70e9, train_tokens=1.4e12, served_tokens=1e14)
    >>> small = lifetime_flops(35e9, train_tokens=5.6e12, served_tokens=1e14)
    >>> f"{big:.2e}", f"{small:.2e}"
    ('1.46e+25', '8.18e+24')
    >>> lifetime_flops(1e9, train_tokens=1e9, served_tokens=-1.0)
    Traceback (most recent call last):
    ...
    ValueError: served_tokens must be between 0 and 1e+30, got -1.0

    Raises ``ValueError`` for *params* or *train_tokens* not in [1, MAX_COUNT], or
    *served_tokens* not in [0, MAX_COUNT].
    """
    if not 0 <= served_tokens <= MAX_COUNT:
        raise ValueError(
            f"served_tokens must be between 0 and {MAX_COUNT:.0e}, got {served_tokens}"
        )
    n = _positive("params", params)
    return 6 * n * _positive("train_tokens", train_tokens) + 2 * n * served_tokens
