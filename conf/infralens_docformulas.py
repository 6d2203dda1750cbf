"""Aligned formula lines in docstrings print one per line.

The package's docstrings, shaped like CPython's ``statistics``, set a formula
of several aligned lines apart by indenting it under the paragraph that
introduces it::

    reports utilisation the way PaLM defines it:

        MFU = model FLOPs per second / dense peak      (no recomputation counted)
        HFU = hardware FLOPs per second / dense peak   (recomputation counted)

``help()`` shows that as written, but reStructuredText reads the indented
lines as a block quote, one paragraph, and runs them together ("... counted)
HFU = ..."). This turns such a block, two or more indented lines after a
paragraph and a blank line, into a literal block by ending the paragraph with
``::`` (which prints as ":" after a colon and as nothing after other text), so
HTML and PDF keep the lines and their alignment; under a list item the block
stays in the item. A block that already is literal (``::``), a directive's or
a field's body, or a doctest is left alone.
"""

from __future__ import annotations

import re
from typing import Any

# A line that opens something whose body is indented on purpose.
_OPENS_BODY = re.compile(r"^\s*(\.\. |:[^:]+:|>>> |\.\.\. )|::\s*$")
_DIRECTIVE = re.compile(r"^\s*(\.\. |:[^:]+:)")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def literal_formula_blocks(lines: list[str]) -> list[int]:
    """Mark indented multi-line blocks as literal, in place; returns the lines changed.

    >>> doc = ["Defined as:", "", "    a = b + c", "    d = e", "", "Then more."]
    >>> literal_formula_blocks(doc), doc[0]
    ([0], 'Defined as::')
    >>> doc = ["Text", "", "    one line only", ""]
    >>> literal_formula_blocks(doc), doc[0]
    ([], 'Text')
    """
    changed = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if (
            line.strip()
            and i >= 2
            and not lines[i - 1].strip()
            and lines[i - 2].strip()
            and _indent(line) >= _indent(lines[i - 2]) + 2
            and not _OPENS_BODY.search(lines[i - 2])
            and not line.lstrip().startswith(">>>")
        ):
            base = _indent(line)
            end = i
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) >= base):
                end += 1
            block = [x for x in lines[i:end] if x.strip()]
            # the paragraph (or list item) it follows: not a directive or a field
            start = i - 2
            while start > 0 and lines[start - 1].strip():
                start -= 1
            if len(block) >= 2 and not _DIRECTIVE.search(lines[start]):
                head = lines[i - 2].rstrip()
                lines[i - 2] = head + ":" if head.endswith(":") else head + " ::"
                changed.append(i - 2)
            i = end
            continue
        i += 1
    return changed


def _process(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    literal_formula_blocks(lines)


def setup(app: Any) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _process)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
