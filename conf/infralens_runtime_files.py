"""The in-page Python runtime's files: Pyodide from the npm registry, the package wheel,
the page files. Standard library only, so `noxfile.py` and the Sphinx extension
``infralens_runtime`` both use it.

Pyodide's core runtime comes from the npm registry's ``pyodide`` package at the
version pinned here, through ``npm pack``; its sha512 must equal the pinned
integrity before a byte of it is used. Nothing else is downloaded.

The wheel and ``page-files.zip`` are byte-reproducible archives.

A wheel is a zip with a ``.dist-info`` folder; the package is pure Python, so
this writes one with the standard library instead of a build backend, which
stamps the clock and orders entries by the file system. Every entry here has
one timestamp (``SOURCE_DATE_EPOCH``, or 1980-01-01 without it), fixed
permissions and sorted names, so two builds of one tree give the same bytes.

``python conf/infralens_runtime_files.py`` fetches Pyodide (once), compiles its standard
library to bytecode with Node (once, :func:`compile_stdlib`) and writes both archives into
``build/runtime``.
"""

from __future__ import annotations

import base64
import doctest
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "labs_src" / "infralens"
# What the pages read by path: the measurement CSVs and the starter files.
PAGE_FILES = (ROOT / "tests" / "data", ROOT / "labs_src" / "starters")
SKIP = {"__pycache__", ".mypy_cache", ".ruff_cache"}
RUNTIME = ROOT / "build" / "runtime"

PYODIDE_VERSION = "314.0.7"  # CPython 3.14.2 compiled to WebAssembly
# `npm view pyodide@314.0.7 dist.integrity`
PYODIDE_INTEGRITY = (
    "sha512-"
    "0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
)
# The core runtime: the loader, the interpreter, the standard library, the package index.
PYODIDE_FILES = (
    "README.md",
    "package.json",
    "pyodide-lock.json",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "pyodide.mjs",
    "python_stdlib.zip",
)


def pyodide_dir() -> Path:
    return RUNTIME / f"pyodide-{PYODIDE_VERSION}"


def have_pyodide() -> bool:
    folder = pyodide_dir()
    return all((folder / name).is_file() for name in PYODIDE_FILES)


def fetch_pyodide(npm: str = "npm") -> Path:
    """Unpack the pinned ``pyodide`` npm package's core files into :func:`pyodide_dir`.

    ``npm pack`` downloads the tarball from the registry; its sha512 is compared with
    :data:`PYODIDE_INTEGRITY` before it is opened. A second call finds the files and
    downloads nothing.
    """
    folder = pyodide_dir()
    if have_pyodide():
        return folder
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [npm, "pack", f"pyodide@{PYODIDE_VERSION}", "--json", "--pack-destination", tmp],
            check=True, stdout=subprocess.PIPE,
        )  # fmt: skip
        tarball = Path(tmp) / f"pyodide-{PYODIDE_VERSION}.tgz"
        digest = base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
        if f"sha512-{digest}" != PYODIDE_INTEGRITY:
            raise RuntimeError(f"{tarball.name}: sha512-{digest} is not the pinned integrity")
        staging = Path(tmp) / "files"
        staging.mkdir()
        with tarfile.open(tarball) as archive:
            for name in PYODIDE_FILES:
                member = archive.getmember(f"package/{name}")
                source = archive.extractfile(member)
                assert source is not None
                (staging / name).write_bytes(source.read())
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, folder)
    return folder


def compiled_stdlib() -> Path:
    """Pyodide's standard library with each module's bytecode beside its source."""
    return RUNTIME / f"python_stdlib-{PYODIDE_VERSION}-pyc.zip"


def compile_stdlib(node: str = "node") -> Path:
    """Write :func:`compiled_stdlib` with the pinned Pyodide itself, under Node.

    The npm package's ``python_stdlib.zip`` holds sources only, so the pages' interpreter
    compiles every module it imports when it starts (about 200, asyncio and inspect among
    them); with the bytecode beside them it reads them instead. The ``.pyc`` files are
    unchecked-hash ones (PEP 552), with no timestamp, so two runs write the same bytes.
    A second call finds the file and runs nothing.
    """
    out = compiled_stdlib()
    if out.is_file():
        return out
    tmp = out.with_suffix(".tmp")
    subprocess.run(
        [node, str(ROOT / "conf" / "infralens_pyc.mjs"), str(pyodide_dir()),
         str(pyodide_dir() / "python_stdlib.zip"), str(tmp)],
        check=True,
    )  # fmt: skip
    tmp.replace(out)
    return out


def _stamp() -> tuple[int, int, int, int, int, int]:
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    stamp = time.gmtime(max(epoch, 315532800))  # zip dates start in 1980
    return stamp[:6]


def _files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and not SKIP & set(p.parts) and
        not p.name.endswith((".pyc", ".pyo"))
    )  # fmt: skip


def _write_zip(path: Path, entries: list[tuple[str, bytes]]) -> None:
    stamp = _stamp()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data, compresslevel=9)
    tmp.replace(path)


def version() -> str:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return str(meta["project"]["version"])


def wheel_name() -> str:
    return f"infralens-{version()}-py3-none-any.whl"


def write_wheel(outdir: Path) -> Path:
    """Write ``infralens-VERSION-py3-none-any.whl`` from the working tree into *outdir*."""
    dist = f"infralens-{version()}.dist-info"
    entries = [(p.relative_to(PACKAGE.parent).as_posix(), p.read_bytes()) for p in _files(PACKAGE)]
    entries.append((f"{dist}/METADATA", (
        f"Metadata-Version: 2.1\nName: infralens\nVersion: {version()}\n"
        "Summary: The InfraLens handbook's package, for the in-page runtime.\n"
        "Requires-Python: >=3.11\n"
    ).encode()))  # fmt: skip
    entries.append((f"{dist}/WHEEL", (
        b"Wheel-Version: 1.0\nGenerator: infralens_wheel\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )))  # fmt: skip
    record = []
    for name, data in sorted(entries):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    entries.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode()))
    out = outdir / wheel_name()
    _write_zip(out, entries)
    return out


def write_pyyaml(outdir: Path) -> Path | None:
    """Write ``pyyaml.zip``: PyYAML's pure-Python modules (its C extension left out), from
    the PyYAML the docs extra pins, for the plan files ``plan`` and ``memory`` read.

    Returns None when PyYAML is not installed.
    """
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("yaml")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations)))
    dist = importlib.metadata.distribution("pyyaml")
    entries = [(f"yaml/{p.name}", p.read_bytes()) for p in sorted(folder.glob("*.py"))]
    for file in dist.files or ():
        if file.name == "LICENSE":
            entries.append(("yaml/LICENSE", Path(str(dist.locate_file(file))).read_bytes()))
    out = outdir / "pyyaml.zip"
    _write_zip(out, entries)
    return out


def write_page_files(outdir: Path) -> Path:
    """Write ``page-files.zip``: the files the pages read, at their paths in the repository."""
    entries = [
        (p.relative_to(ROOT).as_posix(), p.read_bytes())
        for folder in PAGE_FILES
        for p in _files(folder)
    ]
    out = outdir / "page-files.zip"
    _write_zip(out, entries)
    return out


DOCTEST_FENCE = re.compile(r"^([ \t]*)```\{doctest\}[^\n]*\n(.*?)^\1```", re.M | re.S)


def _code_cell(sources: list[str]) -> dict[str, Any]:
    lines = "\n".join(sources).splitlines(keepends=True)
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": lines}  # fmt: skip


def notebook(page: Path) -> str:
    """The ``{doctest}`` blocks of a lab page as a Jupyter notebook (nbformat 4.4 JSON):
    its examples in page order, prompts removed, a cell ending at each example that
    prints; run from the repository root."""
    title = page.read_text(encoding="utf-8").split("\n# ", 1)[-1].splitlines()[0]
    cells: list[dict[str, Any]] = [
        {"cell_type": "markdown", "metadata": {}, "source": [
            f"# {title}\n", "\n",
            "The examples of this lab, in page order. Start Jupyter in the repository's\n",
            "root folder (the examples read `tests/data` and `labs_src/starters`).\n",
        ]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["import sys\n", "from fractions import Fraction\n", "\n",
                    "sys.path.insert(0, \"labs_src\")"]},
    ]  # fmt: skip
    parser = doctest.DocTestParser()
    for match in DOCTEST_FENCE.finditer(page.read_text(encoding="utf-8")):
        indent = len(match[1])
        body = "\n".join(line[indent:] for line in match[2].splitlines())
        pending: list[str] = []
        # A cell ends at each example that prints, so Jupyter shows every value.
        for ex in parser.get_examples(body):
            pending.append(ex.source.rstrip("\n"))
            if ex.want or ex.exc_msg:
                cells.append(_code_cell(pending))
                pending = []
        if pending:
            cells.append(_code_cell(pending))
    book = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 4,
    }
    return json.dumps(book, indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else RUNTIME
    print(fetch_pyodide(os.environ.get("NPM", "npm")))
    print(compile_stdlib(os.environ.get("NODE", "node")))
    for made in (write_wheel(target), write_page_files(target)):
        print(made)
