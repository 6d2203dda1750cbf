"""The built PDF holds every table row and no box runs past the margin.

These tests read what ``nox -s pdf`` leaves in ``build/latex``: the PDF's
text (``pdftotext``) and LaTeX's log. They skip when no PDF has been built,
unless ``INFRALENS_REQUIRE_PDF`` is set (the ``pdf`` session sets it).

* Every row of every pipe table in the handbook's sources (pages and the
  generated tables) is found in the PDF's text by its first and last cells:
  a table taller than a page, or a row printed past the footer, loses rows
  that pdftotext never sees.
* No overfull box in the log is wider than ``OVERFULL_PT``: a word wider
  than its table column overflows into the next one and LaTeX says so here.
* No LaTeX command prints literally (a ``\\texttt`` from the bibliography).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LATEX = Path(os.environ.get("INFRALENS_LATEX_DIR", ROOT / "build" / "latex"))
PDF = LATEX / "infralens.pdf"
LOG = LATEX / "infralens.log"
# Widest overflow allowed, in points: a few points of a word into the margin
# is invisible; a clipped table cell is tens of points.
OVERFULL_PT = 5.0

if not PDF.exists() or shutil.which("pdftotext") is None:
    if os.environ.get("INFRALENS_REQUIRE_PDF"):
        pytest.fail(f"{PDF} not built or pdftotext missing", pytrace=False)
    pytest.skip("no PDF built (nox -s pdf builds it)", allow_module_level=True)


def squash(text: str) -> str:
    """Letters and digits only, lower case: what survives hyphenation and line breaks."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


@cache
def pdf_text() -> str:
    # -raw: the order LaTeX wrote the text, so a table cell's lines stay together.
    command = ["pdftotext", "-raw", str(PDF), "-"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    # A cross-reference on paper adds "(page 42)" (latex_show_pagerefs).
    return squash(re.sub(r" ?\(page \d+\)", "", out.stdout))


def plain(cell: str) -> str:
    """A Markdown cell as it prints: roles, links and emphasis reduced to their text."""
    cell = re.sub(r"\{cite:[a-z]+\}`[^`]*`", "", cell)  # prints its label
    cell = re.sub(r"\{[a-z:]+\}`([^`<]*?)\s*<[^`]*>`", r"\1", cell)  # {ref}`text <target>`
    cell = re.sub(r"\{(?:ref|doc|numref)\}`[^`]*`", "", cell)  # prints the target's title
    cell = re.sub(r"(?:\{[a-z:]+\})?`~[\w.]*?\.(\w+)`", r"\1", cell)  # {py:func}`~a.b.c` prints c
    cell = re.sub(r"\{[a-z:]+\}`([^`]*)`", r"\1", cell)  # {term}`x`
    cell = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)  # [text](url)
    cell = re.sub(r"<[a-z]+ ?/?>", "", cell)  # inline HTML (a <wbr/>) prints nothing
    cell = cell.replace("`", "").replace("**", "").replace("\\|", "|")
    return cell.strip()


def table_rows() -> list[tuple[str, int, list[str]]]:
    """(file, line, cells) of each body row of each pipe table the book prints."""
    sources = sorted((ROOT / "handbook").rglob("*.md"))
    rows = []
    for path in sources:
        if "_build" in path.parts:
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if not re.match(r"^\s*\|.*\|\s*$", line) or number == 0:
                continue
            before = lines[number - 1].strip()
            if re.match(r"^\|[\s:|-]+\|$", line.strip()):
                continue
            # A body row follows the separator row or another body row.
            if not before.startswith("|"):
                continue
            cells = [plain(c) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            rows.append((str(path.relative_to(ROOT)), number + 1, cells))
    return rows


def key(cell: str) -> str:
    """A cell as the PDF's text must contain it ('' for a cell that cannot be matched)."""
    return "" if "$" in cell else squash(cell)


def test_every_table_row_is_in_the_pdf() -> None:
    """Each row's first and last cells, as often as the tables hold them."""
    rows = table_rows()
    assert len(rows) > 100  # the handbook's tables are found at all
    wanted: Counter[str] = Counter()
    where: dict[str, str] = {}
    for path, line, cells in rows:
        for cell in {cells[0], cells[-1]}:
            if len(k := key(cell)) >= 2:
                wanted[k] += 1
                where.setdefault(k, f"{path}:{line}: {cell[:50]!r}")
    text = pdf_text()
    missing = [
        f"{where[k]} ({text.count(k)} of {n} in the PDF)"
        for k, n in wanted.items()
        if text.count(k) < n
    ]
    assert not missing, "table rows not in the PDF text:\n" + "\n".join(missing)


def overfull_boxes() -> list[tuple[float, str]]:
    text = LOG.read_text(encoding="latin-1")
    return [
        (float(m[1]), m[0])
        for m in re.finditer(r"Overfull \\hbox \(([\d.]+)pt too wide\)[^\n]*", text)
    ]


def test_no_box_runs_past_its_column() -> None:
    wide = [line for points, line in overfull_boxes() if points > OVERFULL_PT]
    assert not wide, "\n".join(wide)


def test_no_latex_command_prints_literally() -> None:
    out = subprocess.run(["pdftotext", str(PDF), "-"], capture_output=True, text=True, check=True)
    raw = re.findall(r"\\(?:texttt|emph|textbf|textit|url|href)\b.{0,40}", out.stdout)
    assert not raw, raw
