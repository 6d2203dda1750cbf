"""One GEMM against the roofline: arithmetic intensity, the ridge point, tiles and waves.

A GEMM C = A·B with A of m × k and B of k × n does 2·m·n·k FLOPs and, at
best, reads A and B and writes C once. Its arithmetic intensity, FLOPs per
byte of memory traffic, against the GPU's *ridge point* (peak FLOP/s over HBM
bytes/s) says whether the math or the memory bounds it. Then two
quantisation effects (NVIDIA's Matrix Multiplication Background guide): the
kernel covers C with tiles, so a dimension that is not a multiple of the tile
wastes part of the last tile (*tile quantisation*), and the tiles run in waves
of one per SM, so a tile count just past a multiple of the SM count runs an
almost empty last wave (*wave quantisation*).

>>> round(ridge_point(989_500 * 10**9, 3_350 * 10**9))   # H100 SXM, dense BF16
295
>>> round(arithmetic_intensity(8192, 8192, 8192))        # a large square GEMM
2731
>>> round(float(arithmetic_intensity(16, 8192, 8192)), 1)  # thin: memory-bound
15.9
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import positive_int

__all__ = [
    "H100_SMS",
    "Quantisation",
    "arithmetic_intensity",
    "quantisation",
    "ridge_point",
]

H100_SMS = 132
"""Streaming multiprocessors on an H100 SXM5 (NVIDIA H100 Tensor Core GPU
Architecture whitepaper: 132 SMs on the SXM5 board, 114 on PCIe)."""


@typed
def arithmetic_intensity(
    m: int, n: int, k: int, *, bytes_per_element: int = 2
) -> Fraction:
    """FLOPs per byte of an (m × k) · (k × n) GEMM that touches each operand once.

    intensity = 2·m·n·k / (bytes · (m·k + k·n + m·n))

    >>> arithmetic_intensity(4096, 4096, 4096)        # BF16: n/3 for a square GEMM
    Fraction(4096, 3)
    >>> arithmetic_intensity(1, 4096, 4096)           # a matrix-vector product
    Fraction(2048, 2049)
    >>> arithmetic_intensity(0, 4096, 4096)
    Traceback (most recent call last):
    ...
    ValueError: m must be >= 1, got 0

    Raises ``ValueError`` for a size below 1.
    """
    m, n, k = (positive_int(name, v) for name, v in (("m", m), ("n", n), ("k", k)))
    b = positive_int("bytes_per_element", bytes_per_element)
    return Fraction(2 * m * n * k, b * (m * k + k * n + m * n))


@typed
def ridge_point(flops_per_s: int, bytes_per_s: int) -> Fraction:
    """FLOPs per byte at which a kernel stops being memory-bound: peak / bandwidth.

    >>> ridge_point(989_500 * 10**9, 3_350 * 10**9)   # H100 SXM: 989.5 TFLOP/s, 3.35 TB/s
    Fraction(19790, 67)
    >>> ridge_point(312 * 10**12, 2_039 * 10**9) > 150  # A100 SXM 80GB
    True
    >>> ridge_point(1, 0)
    Traceback (most recent call last):
    ...
    ValueError: bytes_per_s must be >= 1, got 0

    The result is in FLOP/byte (the first example is 295.4). Raises ``ValueError``
    for a rate below 1.
    """
    return Fraction(
        positive_int("flops_per_s", flops_per_s),
        positive_int("bytes_per_s", bytes_per_s),
    )


@dataclass(frozen=True)
class Quantisation:
    """How a GEMM's output tiles fill the GPU: tiles, waves, and the useful share of each."""

    tiles: int
    waves: int
    tile_efficiency: Fraction  # useful output elements / elements the tiles cover
    wave_efficiency: Fraction  # tiles / (waves · SMs)

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def efficiency(self) -> Fraction:
        """The share of the SMs' tile-slots that compute useful output."""
        return self.tile_efficiency * self.wave_efficiency


@typed
def quantisation(
    m: int, n: int, *, tile_m: int = 128, tile_n: int = 256, sms: int = H100_SMS
) -> Quantisation:
    """Tile and wave quantisation of an m × n output on *sms* SMs, one tile per SM a wave.

    tiles = ceil(m / tile_m) · ceil(n / tile_n); waves = ceil(tiles / sms)

    >>> q = quantisation(8192, 8192)                   # 64 · 32 = 2048 tiles
    >>> q.tiles, q.waves, q.wave_efficiency
    (2048, 16, Fraction(32, 33))
    >>> quantisation(8192, 8193).tile_efficiency       # one column too many
    Fraction(2731, 2816)
    >>> quantisation(128, 256 * 133).waves             # 133 tiles: a second wave for one
    2
    >>> quantisation(128, 256, tile_m=0)
    Traceback (most recent call last):
    ...
    ValueError: tile_m must be >= 1, got 0

    The tile shape is the kernel's choice (cuBLAS picks among several); 128 × 256 is
    one of Hopper's common BF16 shapes. Raises ``ValueError`` for a size below 1.
    """
    m, n = positive_int("m", m), positive_int("n", n)
    tm, tn = positive_int("tile_m", tile_m), positive_int("tile_n", tile_n)
    s = positive_int("sms", sms)
    rows, cols = -(-m // tm), -(-n // tn)
    tiles = rows * cols
    waves = -(-tiles // s)
    return Quantisation(
        tiles=tiles,
        waves=waves,
        tile_efficiency=Fraction(m * n, tiles * tm * tn),
        wave_efficiency=Fraction(tiles, waves * s),
    )
