"""Docstring formulas of several aligned lines print one line each.

``conf/infralens_docformulas.py`` turns an indented block of two or more lines
under a paragraph into a literal block when autodoc reads a docstring. Here
every docstring of the package goes through it and then through docutils: no
block quote may hold a paragraph of several source lines, which is what runs
aligned formula lines together on the page.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "conf"))
from infralens_docformulas import literal_formula_blocks  # noqa: E402

PACKAGE = ROOT / "labs_src" / "infralens"


def docstrings() -> list[tuple[str, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef):
                doc = ast.get_docstring(node)
                if doc:
                    name = getattr(node, "name", "<module>")
                    found.append((f"{path.relative_to(PACKAGE)}:{name}", doc))
    return found


def joined_block_quotes(text: str) -> list[str]:
    """Paragraphs inside block quotes that span several source lines."""
    docutils_core = pytest.importorskip("docutils.core")
    from docutils import nodes

    settings = {"report_level": 5, "halt_level": 5, "warning_stream": False}
    tree = docutils_core.publish_doctree(text, settings_overrides=settings)
    return [
        p.astext()
        for quote in tree.findall(nodes.block_quote)
        for p in quote.findall(nodes.paragraph)
        if p.rawsource.count("\n") >= 1
    ]


def test_a_formula_block_becomes_literal() -> None:
    lines = ["Defined as:", "", "    a = b + c", "    d = e", "", "Then more."]
    assert literal_formula_blocks(lines) == [0]
    assert lines[0] == "Defined as::"
    lines = ["Defined by", "", "    a = b + c", "    d = e"]
    literal_formula_blocks(lines)
    assert lines[0] == "Defined by ::"


@pytest.mark.parametrize(
    "lines",
    [
        ["Text", "", "    one line only", ""],
        [".. note::", "", "    first", "    second"],
        ["Already literal::", "", "    a = b", "    c = d"],
        [":param x: a field", "", "    its body", "    goes on"],
        ["Example:", "", "    >>> f(1)", "    2"],
    ],
)
def test_other_indented_blocks_stay(lines: list[str]) -> None:
    before = list(lines)
    assert literal_formula_blocks(lines) == []
    assert lines == before


def test_the_package_has_formula_blocks() -> None:
    # The raw docstrings do run lines together: the check below can fail.
    raw = [name for name, doc in docstrings() if joined_block_quotes(doc)]
    assert "compute.py:<module>" in raw


@pytest.mark.parametrize("name,doc", docstrings(), ids=[n for n, _ in docstrings()])
def test_no_formula_lines_run_together(name: str, doc: str) -> None:
    lines = doc.splitlines()
    literal_formula_blocks(lines)
    assert joined_block_quotes("\n".join(lines)) == []
