"""Bounded reads of input files: every failure is one ``ValueError`` naming the file.

A loader (a plan file, a trace, a measurement CSV) reads through
:func:`read_text`, so a missing file, a directory, a file too large or bytes
that are not UTF-8 all end as the same kind of error the argument checks raise.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import stat

from infralens._validate import describe

__all__ = ["read_csv_rows", "read_text"]


def read_text(path: object, what: str, max_bytes: int) -> str:
    """Read the UTF-8 file *path* (at most *max_bytes*); every failure is a ``ValueError``
    naming *what* and the path, never an ``OSError`` or a ``UnicodeDecodeError``.

    Only a regular file is read: a FIFO, a socket or a device is refused before any
    read, so none can block.

    >>> read_text("no/such.csv", "measurement file", 2**20)
    Traceback (most recent call last):
    ...
    ValueError: cannot read measurement file 'no/such.csv': No such file or directory
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    shown = describe(os.fspath(path), 80)
    if not os.fspath(path):
        raise ValueError(f"path of the {what} must not be empty")
    try:
        # Non-blocking, so a FIFO or a device cannot hang the open; only a regular file is read.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if not stat.S_ISREG(mode):
                raise OSError(errno.EINVAL, "not a regular file")
            raw = f.read(max_bytes + 1)
    except (OSError, ValueError) as err:  # ValueError: an embedded NUL byte
        reason = getattr(err, "strerror", None) or "not a usable file name"
        raise ValueError(f"cannot read {what} {shown}: {reason}") from None
    if len(raw) > max_bytes:
        raise ValueError(f"{what} {shown} is larger than {max_bytes} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{what} {shown} is not UTF-8 (byte {err.start})"
        ) from None


def read_csv_rows(
    path: object, what: str, max_bytes: int
) -> tuple[str, list[dict[str, str]]]:
    """Read the CSV file *path* with :func:`read_text`; return its shown name and its rows.

    >>> read_csv_rows("no/such.csv", "measurement file", 2**20)
    Traceback (most recent call last):
    ...
    ValueError: cannot read measurement file 'no/such.csv': No such file or directory
    """
    text = read_text(path, what, max_bytes)
    where = describe(os.fspath(path), 80)  # type: ignore[call-overload]
    try:
        return where, list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise ValueError(f"{where}: not a CSV file: {exc}") from None
