"""Drive the built HTML handbook in headless Chromium, served from 127.0.0.1.

Run by `nox -s browser` (which builds the site first); `nox -s tests` leaves
this folder out. Uses Debian's chromium and chromedriver; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlparse

import pytest

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install .[browser]")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("INFRALENS_SITE", ROOT / "build" / "html"))
PAGES = sorted(
    p.relative_to(SITE).as_posix()
    for p in SITE.rglob("*.html")
    if not p.relative_to(SITE).as_posix().startswith(("_", "."))
)


def visit(driver: webdriver.Chrome, url: str) -> tuple[list[dict[str, object]], list[str]]:
    """Load *url*; return its SEVERE console entries and every requested URL."""
    driver.get_log("browser")
    driver.get_log("performance")
    driver.get(url)
    WebDriverWait(driver, 15).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    requested, failed = [], []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requested.append(message["params"]["request"]["url"])
        elif message["method"] == "Network.loadingFailed":
            failed.append(message["params"].get("errorText", "?"))
        elif message["method"] == "Network.responseReceived":
            status = message["params"]["response"]["status"]
            if status >= 400:
                failed.append(f"{status} {message['params']['response']['url']}")
    if failed:
        severe.append({"level": "SEVERE", "message": f"failed requests: {failed}"})
    return severe, requested


def test_the_site_has_pages() -> None:
    assert "index.html" in PAGES and "search.html" in PAGES
    assert any(p.startswith("labs/") for p in PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_page_loads_cleanly_and_only_from_loopback(
    driver: webdriver.Chrome, base_url: str, page: str
) -> None:
    severe, requested = visit(driver, base_url + page)
    assert not severe, severe
    foreign = [
        u
        for u in requested
        if urlparse(u).scheme in ("http", "https", "ws", "wss")
        and urlparse(u).hostname != "127.0.0.1"
    ]
    assert not foreign, foreign
    broken = driver.execute_script(
        "return Array.from(document.images)"
        ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
    )
    assert not broken, broken


# Visible text outside code that would mean a formula was left as TeX source.
RAW_TEX = ("$", "\\frac", "\\times", "\\sqrt", "\\mathit", "\\Psi", "\\(", "\\[")


def test_pages_with_math_exist() -> None:
    with_math = [p for p in PAGES if 'class="math' in (SITE / p).read_text(encoding="utf-8")]
    assert "handbook/06-pipeline-parallel.html" in with_math, with_math


@pytest.mark.parametrize(
    "page", [p for p in PAGES if 'class="math' in (SITE / p).read_text(encoding="utf-8")]
)
def test_math_is_typeset(driver: webdriver.Chrome, base_url: str, page: str) -> None:
    severe, _ = visit(driver, base_url + page)
    assert not severe, severe
    sources = len(driver.find_elements(By.CSS_SELECTOR, ".math"))
    assert sources > 0
    # MathJax replaces each formula's TeX with an <mjx-container>.
    WebDriverWait(driver, 20).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "mjx-container")) >= sources
    )
    text = driver.execute_script(
        "const main = document.querySelector('article') || document.body;"
        "const copy = main.cloneNode(true);"
        "copy.querySelectorAll('pre, code, mjx-container, mjx-assistive-mml, script')"
        ".forEach(n => n.remove());"
        "return copy.textContent;"
    )
    left = [t for t in RAW_TEX if t in text]
    assert not left, f"raw TeX visible on {page}: {left}"


def test_dropdown_answers_are_hidden_until_clicked(driver: webdriver.Chrome, base_url: str) -> None:
    visit(driver, base_url + "handbook/01-data-parallel.html")
    dropdowns = driver.find_elements(By.CSS_SELECTOR, "details.sd-dropdown")
    assert len(dropdowns) >= 2
    for details in dropdowns:
        body = details.find_element(By.CSS_SELECTOR, ".sd-summary-content")
        assert not body.is_displayed()
        summary = details.find_element(By.CSS_SELECTOR, "summary")
        # A DOM click on the summary, as a user's click delivers it; furo's
        # floating "back to top" button can sit over the element at some scroll positions.
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", summary)
        driver.execute_script("arguments[0].click();", summary)
        WebDriverWait(driver, 5).until(lambda d, b=body: b.is_displayed())
        assert body.text.strip(), "an opened dropdown shows its answer"


def test_search_finds_reduce_scatter(driver: webdriver.Chrome, base_url: str) -> None:
    severe, _ = visit(driver, base_url + "search.html?q=reduce-scatter")
    assert not severe, severe
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "ul.search li"))
    hits = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "ul.search li")]
    assert any("reduce" in h.lower() for h in hits), hits


LAB_PAGES = [p for p in PAGES if p.startswith("labs/lab-")]


@pytest.mark.parametrize("width", [1400, 800])
def test_lab_code_fits_its_column_and_links_its_source(
    driver: webdriver.Chrome, base_url: str, width: int
) -> None:
    # Every package piece a lab shows is captioned with its file, the caption opens
    # the module's source page, and no line scrolls sideways at either width.
    driver.set_window_size(width, 1000)
    try:
        assert len(LAB_PAGES) == 18
        for page in LAB_PAGES:
            visit(driver, base_url + page)
            blocks = driver.execute_script(
                """
                return [...document.querySelectorAll('article div.literal-block-wrapper')]
                  .map(w => {
                    const link = w.querySelector('.code-block-caption a.reference');
                    const pre = w.querySelector('pre');
                    return {caption: w.querySelector('.code-block-caption').innerText,
                            href: link ? link.getAttribute('href') : '',
                            over: pre.scrollWidth - pre.clientWidth};
                  });
                """
            )
            package = [b for b in blocks if b["caption"].startswith("infralens/")]
            assert package, f"{page}: no captioned package code"
            for block in package:
                module = block["caption"].strip().removesuffix(".py")
                if not (SITE / "_modules" / f"{module}.html").is_file():
                    # viewcode writes no page for a module autodoc documents nothing of
                    # (data only, or private); the caption then names the file alone.
                    assert not block["href"], (page, block)
                    continue
                assert "_modules/infralens/" in block["href"], (page, block)
                target = (SITE / page).parent / block["href"].split("#")[0]
                assert target.resolve().is_file(), (page, block)
                assert block["over"] <= 0, f"{page} at {width} px: {block}"
    finally:
        driver.set_window_size(1280, 1024)
