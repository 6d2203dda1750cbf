"""The PDF as a book: tables that fit the page, sources printed once, cards numbered once.

LaTeX only (HTML and EPUB reflow, so their tables are left alone):

* Every table is a ``longtable``: it breaks across pages and repeats its header.
  Its column widths come from its content, as ``tabulary`` would choose them,
  but never narrower than a column's longest unbreakable word, and the type
  shrinks (``\\small``, ``\\footnotesize``) for wide tables, so no cell is cut
  at its column's edge. Long names in cells may break after ``/``, ``_`` and
  ``.``.
* A table's links become numbered notes under the table ("[1]"), one per
  distinct address, instead of a footnote per cell.
* A "Checked by" line never breaks a file name (at an underscore).
* A blank worksheet table (every cell empty but the first column's) gets
  rows tall enough to write in, and columns as wide as their headings need
  and the rest of the line shared out; a block marked
  ``infralens-screen-only`` (a starter file's source, which the page also
  prints as a worksheet) is left out.
* The interview cards' headings carry their own number ("1. ..."), so LaTeX
  does not number them again.
* The book has parts (handbook, labs, interview practice, reference), and the
  chapter numbers are the numbers the prose uses: section 01 is Chapter 1,
  Lab 01 is Chapter 1 of the labs, after the unnumbered setup chapter; the
  reference pages are appendices. The landing page's text is an unnumbered
  introduction, and the bibliography page's own chapter gives way to the one
  list LaTeX prints at the end.

For every builder, the concepts the handbook teaches get index entries that
point at the sections teaching them (:data:`INDEX`), next to the glossary's.
"""

from __future__ import annotations

import re
from typing import Any

# Characters per line of the text block (A4, 1 in margins, 451 pt) at each size,
# for an average character of 0.5 em; a column also loses 2 \tabcolsep (12 pt).
SIZES = ((r"\normalsize", 10.0), (r"\small", 9.0), (r"\footnotesize", 8.0))
TEXT_WIDTH_PT = 451.0
CHAR_EM = 0.5
PAD_PT = 12.0
BREAK_AFTER = re.compile(r"([/_.])(?=\w)")
ZWSP = "\u200b"


def _cell_texts(table: Any) -> list[list[str]]:
    from docutils import nodes

    def printed(entry: Any) -> str:  # raw HTML (a <wbr/>) prints nothing on paper
        copy = entry.deepcopy()
        for raw in list(copy.findall(nodes.raw)):
            if "latex" not in raw.get("format", "").split():
                raw.parent.remove(raw)
        return str(copy.astext())

    rows = []
    for row in table.findall(nodes.row):
        rows.append([printed(entry) for entry in row.children if isinstance(entry, nodes.entry)])
    return rows


def _longest_word(text: str) -> int:
    # Breaks the build allows: spaces, after a hyphen, at the zero-width spaces
    # _allow_breaks inserts (or would insert: after / _ . and between camel humps).
    breaks = r"\s+|(?<=-)|\u200b|(?<=[/_.])(?=\w)|(?<=[a-z])(?=[A-Z][a-z])"
    words = re.split(breaks, text)
    return max((len(w) for w in words), default=1)


def column_widths(rows: list[list[str]]) -> tuple[str, list[int]]:
    """The font size command and each column's share of the line (points, padding included).

    A column gets at least its longest unbreakable word, and the room left is
    shared out by how much longer each column's longest cell is than that.

    >>> column_widths([["a", "bb"], ["ccc", "d"]])
    ('\\\\normalsize', [31, 24])
    """
    count = max((len(r) for r in rows), default=0)
    natural = [1] * count
    least = [1] * count
    for row in rows:
        for i, text in enumerate(row):
            lines = text.splitlines() or [""]
            natural[i] = max(natural[i], max(len(line) for line in lines))
            least[i] = max(least[i], _longest_word(text))
    # Many columns or much text: a smaller size first (a table is read, not skimmed).
    crowded = count >= 6 or sum(natural) * CHAR_EM * 10 > 3 * TEXT_WIDTH_PT
    for size, points in SIZES[1:] if crowded else SIZES:
        char = points * CHAR_EM
        # An unbreakable word may be all capitals or code: wider than the average.
        floor = [m * char * 1.25 for m in least]
        avail = TEXT_WIDTH_PT - PAD_PT * count
        if sum(floor) <= avail or size == SIZES[-1][0]:
            break
    want = [max(n * char, f) for n, f in zip(natural, floor, strict=True)]
    if sum(want) <= avail:
        chosen = want
    else:
        spare = max(avail - sum(floor), 0)
        stretch = [w - f for w, f in zip(want, floor, strict=True)]
        total = sum(stretch) or 1
        chosen = [f + spare * s / total for f, s in zip(floor, stretch, strict=True)]
    return size, [round(c + PAD_PT) for c in chosen]


def is_blank_worksheet(rows: list[list[str]]) -> bool:
    """A table to fill in by hand: body rows whose cells past the first are empty.

    >>> is_blank_worksheet([["Axis", "Degree"], ["TP", ""], ["PP", ""]])
    True
    >>> is_blank_worksheet([["Axis", "Degree"], ["TP", "8"]])
    False
    """
    body = rows[1:]
    return bool(body) and all(not any(c.strip() for c in row[1:]) for row in body)


def worksheet_widths(rows: list[list[str]]) -> tuple[str, list[int]]:
    """Widths for a worksheet: the labels' and headings' width, the rest shared equally.

    >>> worksheet_widths([["Axis", "Degree", "Reason"], ["TP", "", ""]])
    ('\\\\normalsize', [37, 207, 207])
    """
    char = SIZES[0][1] * CHAR_EM
    # the labels do not break: room for their widest letters
    first = max(len(row[0]) for row in rows) * char * 1.25 + PAD_PT
    heads = [len(h) * char + PAD_PT for h in rows[0][1:]]
    spare = max(TEXT_WIDTH_PT - first - sum(heads), 0)
    share = spare / max(len(heads), 1)
    return SIZES[0][0], [round(first)] + [round(h + share) for h in heads]


def _allow_breaks(table: Any) -> None:
    """Break opportunities in long names: after / _ . (and - and between camel humps in code)."""
    from docutils import nodes

    verbatim = (nodes.FixedTextElement, nodes.raw, nodes.math)
    for text in list(table.findall(nodes.Text)):
        if any(isinstance(a, verbatim) for a in _ancestors(text)):
            continue
        broken = BREAK_AFTER.sub(r"\1" + ZWSP, str(text))
        if isinstance(text.parent, nodes.literal):
            broken = re.sub(r"(?<=[\w)])-(?=\w)", "-" + ZWSP, broken)
            broken = re.sub(r"(?<=[a-z])(?=[A-Z][a-z])", ZWSP, broken)
        if broken != str(text):
            text.parent.replace(text, nodes.Text(broken))


def _notes_for_links(table: Any) -> Any:
    """Number the table's external links; return the paragraph that lists them (or None)."""
    from docutils import nodes

    urls: dict[str, int] = {}
    for ref in list(table.findall(nodes.reference)):
        uri = ref.get("refuri", "")
        if not uri.startswith(("http://", "https://")):
            continue
        number = urls.setdefault(uri, len(urls) + 1)
        marked = nodes.inline()
        marked += ref.children
        marked += nodes.Text(f" [{number}]")
        ref.replace_self(marked)
    if not urls:
        return None
    notes = nodes.paragraph(classes=["infralens-table-sources"])
    for uri, number in urls.items():
        if number > 1:
            notes += nodes.Text("; ")
        notes += nodes.Text(f"[{number}] ")
        notes += nodes.reference(uri, uri, refuri=uri)
    return notes


def _fit_tables(app: Any, doctree: Any, docname: str) -> None:
    from docutils import nodes
    from sphinx import addnodes

    if app.builder.format != "latex":
        return
    for table in list(doctree.findall(nodes.table)):
        if table.parent is None or any(isinstance(a, nodes.table) for a in _ancestors(table)):
            continue
        _allow_breaks(table)
        cells = _cell_texts(table)
        if is_blank_worksheet(cells):
            size, widths = worksheet_widths(cells)
            for row in list(table.findall(nodes.row))[1:]:
                first = row.children[0]
                # a strut: room to write in every row
                first += nodes.raw("", r"\rule[-3ex]{0pt}{7ex}", format="latex")
        else:
            size, widths = column_widths(cells)
        table["classes"] = [*table.get("classes", []), "longtable"]
        spec = "".join(
            rf">{{\raggedright\arraybackslash}}\X{{{w}}}{{{sum(widths)}}}" for w in widths
        )
        parent = table.parent
        index = parent.index(table)
        notes = _notes_for_links(table)
        after = [nodes.raw("", r"\endgroup", format="latex")]
        if notes is not None:
            after.insert(0, notes)
        for node in reversed(after):
            parent.insert(index + 1, node)
        parent.insert(index, addnodes.tabular_col_spec(spec=spec))
        # Cells set ragged right (Sphinx wraps each in a varwidth box, which
        # would justify a narrow column's lines).
        ragged = (
            r"\let\ilAtStartPar\sphinxAtStartPar"
            r"\def\sphinxAtStartPar{\raggedright\ilAtStartPar}"
        )
        parent.insert(index, nodes.raw("", r"\begingroup" + size + ragged, format="latex"))


def _ancestors(node: Any) -> Any:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _cards_numbered_once(app: Any, doctree: Any, docname: str) -> None:
    """Headings that start with their own number ("1. DDP ...") get no LaTeX number.

    The depth changes around the run of such sections, at the start and end of
    their parent, so that nothing comes between a section and its label.
    """
    from docutils import nodes

    if app.builder.format != "latex":
        return
    parents = []
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        numbered = title is not None and re.match(r"^\d+\. ", title.astext())
        if numbered and section.parent not in parents:
            parents.append(section.parent)
    for parent in parents:
        depth = 1 if isinstance(parent, nodes.section) else 0
        start = 1 if depth and isinstance(parent[0], nodes.title) else 0
        parent.insert(start, _raw(r"\setcounter{secnumdepth}{1}"))
        parent.append(_raw(r"\setcounter{secnumdepth}{2}"))


# First page of each part, the part's title and the number its first chapter gets
# (the chapter counter is set one below it; None: appendices, A, B, ...).
PARTS = {
    "handbook/00-model-arithmetic": ("Handbook", 0),
    "setup": ("Labs", 1),
    "interview/practice": ("Interview practice", 1),
    "reference/cheatsheet": ("Reference", None),
}
BIBLIOGRAPHY_PAGE = "reference/bibliography"
# Pages that open a part as an unnumbered chapter (no "Chapter 0" before Lab 01).
UNNUMBERED = ("setup",)

# Concepts and the sections that teach them (the glossary entries point to the
# glossary; these point to the teaching).
INDEX = {
    "handbook/00-model-arithmetic": ["FLOPs per token", "activation memory"],
    "handbook/01-data-parallel": ["data parallel", "all-reduce"],
    "handbook/02-gradient-bucketing": ["gradient bucketing", "overlap"],
    "handbook/03-zero": ["ZeRO", "optimizer state sharding"],
    "handbook/04-fsdp": ["FSDP", "reduce-scatter"],
    "handbook/05-tensor-parallel": ["tensor parallel", "sequence parallel"],
    "handbook/06-pipeline-parallel": ["pipeline parallel", "bubble"],
    "handbook/07-3d-parallelism": ["3D parallelism", "rank placement"],
    "handbook/08-topology": ["topology", "NVLink", "InfiniBand"],
    "handbook/10-context-parallel": ["context parallel", "ring attention"],
    "handbook/11-expert-parallel": ["expert parallel", "all-to-all"],
    "handbook/12-cluster-design": ["cluster design"],
    "handbook/13-checkpoints": ["checkpoint", "resharding"],
    "handbook/14-diagnosis": ["diagnosis", "straggler"],
    "handbook/15-nccl": ["NCCL", "bus bandwidth"],
    "handbook/16-step-time": ["MFU", "step time"],
    "handbook/17-memory": ["mixed precision", "FP8", "activation checkpointing"],
    "handbook/18-operations": ["goodput", "hang", "MTBF"],
}


def _raw(text: str) -> Any:
    from docutils import nodes

    return nodes.raw("", text, format="latex")


def _book_structure(document: Any) -> None:
    from docutils import nodes
    from sphinx import addnodes

    files = {f["docname"]: f for f in document.findall(addnodes.start_of_file)}
    for docname, (title, first) in PARTS.items():
        page = files.get(docname)
        if page is None:
            continue
        counter = r"\appendix" if first is None else rf"\setcounter{{chapter}}{{{first - 1}}}"
        page.parent.insert(page.parent.index(page), _raw(rf"\part{{{title}}}" + "\n" + counter))
    for docname in UNNUMBERED:
        page = files.get(docname)
        if page is not None:
            # No number for the chapter or its sections, in the text, the contents
            # or the running head; the chapter counter does not move.
            page.insert(0, _raw(r"\setcounter{secnumdepth}{-1}"))
            page.append(_raw(r"\setcounter{secnumdepth}{2}"))
    bibliography = files.get(BIBLIOGRAPHY_PAGE)
    if bibliography is not None:
        # Keep the entries (LaTeX gathers them into its one list at the end); drop
        # the page's own chapter around them.
        citations = list(bibliography.findall(nodes.citation))
        for section in [c for c in bibliography.children if isinstance(c, nodes.section)]:
            bibliography.remove(section)
        for citation in citations:
            if citation.parent is not None:
                citation.parent.remove(citation)
            bibliography += citation
        # Links to the page go to the list, which LaTeX prints at the end.
        label = rf"\label{{\detokenize{{{BIBLIOGRAPHY_PAGE}::doc}}}}"
        bibliography.insert(
            0,
            _raw(
                r"\renewenvironment{sphinxthebibliography}[1]{\cleardoublepage\phantomsection"
                + label
                + r"\begin{thebibliography}{#1}}{\end{thebibliography}}"
            ),
        )
    top = next(iter(document.findall(nodes.section)), None)
    if top is not None and isinstance(top[0], nodes.title):
        top.insert(
            1,
            _raw(
                r"\chapter*{Introduction}\addcontentsline{toc}{chapter}{Introduction}"
                r"\markboth{Introduction}{Introduction}"
            ),
        )


def _index_concepts(app: Any, doctree: Any) -> None:
    from docutils import nodes
    from sphinx import addnodes

    docname = app.env.docname
    terms = INDEX.get(docname)
    section = next(iter(doctree.findall(nodes.section)), None)
    if not terms or section is None:
        return
    # The entries point at the chapter's own section, not at an empty target: the
    # HTML search shows a hit's text from its anchor, and an empty one shows nothing.
    ident = section["ids"][0]
    entries = [("single", term, ident, "main", None) for term in terms]
    index = addnodes.index(entries=entries, inline=False)
    position = 1 if isinstance(section[0], nodes.title) else 0
    section.insert(position, index)


def _whole_file_names(document: Any) -> None:
    """A "Checked by" line keeps each file name on one line and sets ragged right."""
    from docutils import nodes

    for para in list(document.findall(nodes.paragraph)):
        if "infralens-provenance" not in para.get("classes", []):
            continue
        for literal in list(para.findall(nodes.literal)):
            parent = literal.parent
            parent.insert(parent.index(literal), _raw(r"\mbox{"))
            parent.insert(parent.index(literal) + 1, _raw("}"))
        parent = para.parent
        parent.insert(parent.index(para), _raw(r"\begingroup\raggedright"))
        parent.insert(parent.index(para) + 1, _raw(r"\par\endgroup"))


def _transform() -> Any:
    from sphinx.transforms.post_transforms import SphinxPostTransform

    class BookLayout(SphinxPostTransform):
        """Tables and card headings as a book prints them."""

        # Before LaTeX turns links into footnotes (ShowUrlsTransform, 400).
        default_priority = 390
        builders = ("latex",)

        def run(self, **kwargs: Any) -> None:
            from docutils import nodes

            for node in list(self.document.findall(nodes.Element)):
                if "infralens-screen-only" in node.get("classes", []) and node.parent:
                    node.parent.remove(node)
            _book_structure(self.document)
            _fit_tables(self.app, self.document, "")
            _cards_numbered_once(self.app, self.document, "")
            _whole_file_names(self.document)

    return BookLayout


def setup(app: Any) -> dict[str, Any]:
    app.add_post_transform(_transform())
    app.connect("doctree-read", _index_concepts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
