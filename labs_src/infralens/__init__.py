"""InfraLens: executable arithmetic for distributed training.

Each module answers one question a lab asks (shard sizes, what a collective
leaves on each rank, batch arithmetic, ...) with pure functions over the
standard library, so every number in the handbook can be recomputed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("infralens-handbook")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0+unknown"

__all__ = ["__version__"]
