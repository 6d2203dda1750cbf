"""Every character the PDF prints is one pdflatex can set.

The book is built with pdflatex (utf8 input, T1 and TS1 fonts). A character
outside those encodings stops the build ("Unicode character γ (U+03B3) not set
up for use with LaTeX") unless the preamble in conf/conf.py declares it. This
finds such a character in a page or a docstring before a PDF build does.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What utf8 inputenc sets with T1/TS1 fonts, of the characters the book uses.
ENCODED = set(
    "\u00a0\u00a7\u00b0\u00b1\u00b2\u00b3\u00b5\u00b7\u00b9\u00d7\u00f7"
    "\u2013\u2014\u2018\u2019\u201c\u201d\u2020\u2022\u2026\u2032"
)


def declared() -> set[str]:
    """The characters conf/conf.py's LaTeX preamble declares."""
    text = (ROOT / "conf" / "conf.py").read_text(encoding="utf-8")
    codes = re.findall(r"DeclareUnicodeCharacter\{([0-9A-Fa-f]{4,5})\}", text)
    return {chr(int(c, 16)) for c in codes}


def printable(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return ord(ch) < 128 or ch in ENCODED or (name.startswith("LATIN") and ch.isalpha())


def sources() -> list[Path]:
    pages = [p for p in (ROOT / "handbook").rglob("*.md") if "_generated" not in p.parts]
    return pages + sorted((ROOT / "labs_src" / "infralens").rglob("*.py"))


def test_every_character_is_encoded_or_declared() -> None:
    ok = declared()
    missing: dict[str, str] = {}
    for path in sources():
        for ch in set(path.read_text(encoding="utf-8")):
            if not printable(ch) and ch not in ok:
                missing.setdefault(f"U+{ord(ch):04X} {unicodedata.name(ch, '?')}", path.name)
    assert not missing, missing


def test_the_check_sees_an_undeclared_character() -> None:
    assert not printable("γ") and "γ" in declared()
    assert not printable("\u2603")  # a snowman: neither encoded nor declared
    assert "\u2603" not in declared()
