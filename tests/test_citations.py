"""Citations a reader can tell apart.

The text cites author-year and the bibliography is labelled the same way, so
two entries that print the same label ("NVIDIA, 2026") would send a reader to
either. The build adds a letter to the year where an author and a year recur
(``conf/infralens_cite.py``); these tests format the real ``.bib`` as the
build does and check what it prints: every label distinct, no raw LaTeX, no
URL printed twice, titles in their own capitalisation.
"""

from __future__ import annotations

import copy
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "handbook" / "reference" / "references.bib"

pybtex_database = pytest.importorskip("pybtex.database")
pytest.importorskip("sphinxcontrib.bibtex")
sys.path.insert(0, str(ROOT / "conf"))
import infralens_cite  # noqa: E402


@pytest.fixture(scope="module")
def entries() -> dict:
    return dict(pybtex_database.parse_file(str(BIB)).entries)


@pytest.fixture(scope="module")
def formatted(entries: dict) -> dict[str, str]:
    """Key to the plain text of the entry as the bibliography prints it."""
    import pybtex.plugin

    infralens_cite.register()
    data = copy.deepcopy(entries)
    infralens_cite.disambiguate(data)
    style = pybtex.plugin.find_plugin("pybtex.style.formatting", "infralens")()
    backend = pybtex.plugin.find_plugin("pybtex.backends", "text")()
    out = {}
    for entry in style.format_entries(data.values()):
        out[entry.key] = f"[{entry.label}] " + entry.text.render(backend)
    return out


def test_no_two_entries_print_the_same_label(entries: dict) -> None:
    labels = infralens_cite.printed_labels(entries)
    repeated = {label: n for label, n in Counter(labels.values()).items() if n > 1}
    assert not repeated, f"labels printed by more than one entry: {repeated}"


def test_the_list_prints_the_label_the_text_cites(formatted: dict[str, str], entries: dict) -> None:
    labels = infralens_cite.printed_labels(entries)
    for key, text in formatted.items():
        assert text.startswith(f"[{labels[key]}] "), text
    shown = Counter(text.split("]")[0] for text in formatted.values())
    assert max(shown.values()) == 1


def test_shared_author_years_get_letters_in_title_order(entries: dict) -> None:
    labels = infralens_cite.printed_labels(entries)
    pytorch = sorted(
        (entries[k].fields["title"].lower(), v)
        for k, v in labels.items()
        if v.startswith("PyTorch Contributors, 2026")
    )
    assert len(pytorch) > 2
    assert [v[-1] for _, v in pytorch][:3] == ["a", "b", "c"]


def test_a_group_of_one_keeps_its_bare_year(entries: dict) -> None:
    labels = infralens_cite.printed_labels(entries)
    assert labels["rajbhandari2020zero"] == "Rajbhandari et al., 2020"


def test_suffixes_continue_past_z() -> None:
    assert infralens_cite.suffix(25) == "z"
    assert infralens_cite.suffix(26) == "aa"
    with pytest.raises(ValueError, match="number"):
        infralens_cite.suffix(-1)


def test_no_raw_markup(formatted: dict[str, str]) -> None:
    raw = {k: t for k, t in formatted.items() if re.search(r"\\[a-zA-Z]+|[{}]", t)}
    assert not raw, raw


def test_each_url_prints_once(formatted: dict[str, str]) -> None:
    for key, text in formatted.items():
        urls = re.findall(r"https?://\S+", text)
        ids = re.findall(r"(?:arXiv|doi):(\S+?)\.?(?:\s|$)", text)
        for ident in ids:
            assert not any(u.rstrip(".").endswith(ident) for u in urls), (key, text)
        assert len(urls) == len(set(urls)), (key, text)


def test_titles_keep_their_capitalisation(formatted: dict[str, str]) -> None:
    assert "DistributedDataParallel" in formatted["pytorch_ddp"]
    assert "ZeRO" in formatted["rajbhandari2020zero"]
    assert "NVFP4BlockScaling (E2M1 values, E4M3 scale" in formatted["te_recipes_28"]
