"""Citations a reader can tell apart: author-year labels, disambiguated.

The pages cite author-year (``{cite:t}`` prints "Jeaugey (2021)"). Many
entries share an author and a year (the PyTorch and NVIDIA documentation of
one release), so the printed year takes a letter, 2026a, 2026b, ..., in the
order the bibliography lists the entries, and the bibliography itself is
labelled with the same "Author, Year" text instead of numbers: a citation in
the text and its entry in the list read the same.

The ``.bib`` stays as written: the letters are added to the parsed entries at
build time (``builder-inited``), so a new entry gets its letter without any
edit. The list's style (``infralens``, plain's layout) keeps each title's
own capitalisation, prints a ``\\texttt{...}`` in a title as code, and prints
a link once: the URL is left out where it is the arXiv or DOI address the
entry already names, and on paper those identifiers print as text without a
footnote.

:func:`printed_labels` is what the build prints; ``tests/test_citations.py``
checks that no two entries print the same label.
"""

from __future__ import annotations

import re
import string
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

YEAR = re.compile(r"^(\d{4})[a-z]*$")
TEXTTT = re.compile(r"\\texttt\s*\{((?:[^{}]|\{[^{}]*\})*)\}")


def _plain_year(entry: Any) -> str:
    year = entry.fields.get("year", "n.d.")
    match = YEAR.match(year)
    return match[1] if match else year


def citation_author(entry: Any) -> str:
    """The author part of a citation as the author-year style prints it."""
    from sphinxcontrib.bibtex.style.referencing import PersonStyle

    person = PersonStyle()
    data = {"entry": entry, "style": SimpleNamespace(person=person)}
    template = person.author_or_editor_or_title(full=False)
    return str(template.format_data(data))


def _sort_key(entry: Any) -> tuple[str, str]:
    return (entry.fields.get("title", "").lower(), entry.key)


def suffix(number: int) -> str:
    """The letter(s) for the entry at *number* (from 0) in its group: a ... z, aa, ab ...

    >>> [suffix(n) for n in (0, 1, 25, 26, 27)]
    ['a', 'b', 'z', 'aa', 'ab']
    """
    letters = string.ascii_lowercase
    if number < 0:
        raise ValueError(f"number must be >= 0, got {number}")
    return letters[number] if number < 26 else suffix(number // 26 - 1) + letters[number % 26]


def disambiguated_years(entries: dict[str, Any]) -> dict[str, str]:
    """Key to printed year: entries with the same printed author and year get a, b, c ...

    The letters follow the titles' order, as the bibliography sorts entries
    of one author and year.
    """
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for entry in entries.values():
        groups[(citation_author(entry), _plain_year(entry))].append(entry)
    years: dict[str, str] = {}
    for (_, year), members in groups.items():
        if len(members) == 1:
            years[members[0].key] = year
            continue
        for number, entry in enumerate(sorted(members, key=_sort_key)):
            years[entry.key] = year + suffix(number)
    return years


def disambiguate(entries: dict[str, Any]) -> None:
    """Write each entry's printed year (a suffix letter where needed) into the entry."""
    for key, year in disambiguated_years(entries).items():
        if "year" in entries[key].fields:
            entries[key].fields["year"] = year


def printed_labels(entries: dict[str, Any]) -> dict[str, str]:
    """Key to the label that the text and the bibliography print ("Jeaugey, 2021")."""
    years = disambiguated_years(entries)
    return {key: f"{citation_author(e)}, {years[key]}" for key, e in entries.items()}


# -- pybtex styles ----------------------------------------------------------------


def _styles() -> tuple[type, type]:
    from pybtex.richtext import Tag, Text
    from pybtex.style.formatting.plain import Style as Plain
    from pybtex.style.labels import BaseLabelStyle
    from pybtex.style.template import field, href, optional, sentence, words

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries: Any) -> Any:
            for entry in sorted_entries:
                year = entry.fields.get("year", "n.d.")
                yield f"{citation_author(entry)}, {year}"

    def _title(text: str) -> Any:
        """A title's rich text: ``\\texttt{x}`` pieces as code, the rest as LaTeX."""
        parts: list[Any] = []
        last = 0

        def latex(piece: str) -> Any:
            # from_latex drops a piece's outer spaces; the words around code need them.
            lead = " " if piece[:1].isspace() else ""
            trail = " " if piece[-1:].isspace() and piece.strip() else ""
            return Text(lead, Text.from_latex(piece.strip()), trail)

        for match in TEXTTT.finditer(text):
            if match.start() > last:
                parts.append(latex(text[last : match.start()]))
            parts.append(Tag("tt", Text.from_latex(match[1])))
            last = match.end()
        if last < len(text):
            parts.append(latex(text[last:]))
        return Text(*parts)

    class InfraLensStyle(Plain):  # type: ignore[misc,valid-type]
        default_label_style = "infralens-author-year"

        def format_title(self, e: Any, which_field: str, as_sentence: bool = True) -> Any:
            raw = e.fields.get(which_field, "")
            formatted = Text(_title(raw)) if raw else field(which_field)
            return sentence[formatted] if as_sentence else formatted

        def format_btitle(self, e: Any, which_field: str, as_sentence: bool = True) -> Any:
            raw = e.fields.get(which_field, "")
            formatted = Tag("em", _title(raw)) if raw else field(which_field)
            return sentence[formatted] if as_sentence else formatted

        def format_web_refs(self, e: Any) -> Any:
            ids = set()
            if "eprint" in e.fields:
                ids.add(f"https://arxiv.org/abs/{e.fields['eprint']}")
            if "doi" in e.fields:
                ids.add(f"https://doi.org/{e.fields['doi']}")
            url = e.fields.get("url", "")
            show_url = bool(url) and url.rstrip("/") not in {i.rstrip("/") for i in ids}
            raw_url = field("url", raw=True)
            return sentence[
                optional[words["URL:", href(raw_url)[raw_url]]] if show_url else "",
                optional[self.format_eprint(e)],
                optional[self.format_doi(e)],
            ]

    return InfraLensStyle, AuthorYearLabels


def register() -> None:
    import pybtex.plugin

    style, labels = _styles()
    # force: a rebuild in the same process registers the same names again.
    pybtex.plugin.register_plugin("pybtex.style.formatting", "infralens", style, force=True)
    pybtex.plugin.register_plugin(
        "pybtex.style.labels", "infralens-author-year", labels, force=True
    )


# -- Sphinx ----------------------------------------------------------------------


def _disambiguate_bibdata(app: Any) -> None:
    domain = app.env.get_domain("cite")
    disambiguate(domain.bibdata.data.entries)


def _unlink_identifiers(app: Any, doctree: Any, docname: str) -> None:
    """On paper, an entry's "arXiv:..." and "doi:..." print as text, with no URL footnote."""
    from docutils import nodes

    if app.builder.format != "latex":
        return
    for citation in doctree.findall(nodes.citation):
        for ref in list(citation.findall(nodes.reference)):
            text = ref.astext()
            if text.startswith(("arXiv:", "doi:")) and ref.get("refuri"):
                ref.replace_self(nodes.Text(text))


def _unlink_transform() -> Any:
    from sphinx.transforms.post_transforms import SphinxPostTransform

    class UnlinkIdentifiers(SphinxPostTransform):
        # Before LaTeX turns links into footnotes (ShowUrlsTransform, 400).
        default_priority = 390
        builders = ("latex",)

        def run(self, **kwargs: Any) -> None:
            _unlink_identifiers(self.app, self.document, "")

    return UnlinkIdentifiers


def setup(app: Any) -> dict[str, Any]:
    register()
    app.add_post_transform(_unlink_transform())
    # After sphinxcontrib-bibtex has parsed the .bib (its own builder-inited).
    app.connect("builder-inited", _disambiguate_bibdata, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
