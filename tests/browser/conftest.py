"""Fixtures of the browser tests: the built site served on 127.0.0.1, headless Chromium.

Chromium resolves no host but 127.0.0.1 (``--host-resolver-rules``), so a page that
tried to reach another host would fail here: the network is off for the pages.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("INFRALENS_SITE", ROOT / "build" / "html"))
CHROMIUM = os.environ.get("INFRALENS_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("INFRALENS_CHROMEDRIVER", "/usr/bin/chromedriver")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}; run `nox -s browser`, which builds it first")
    handler = functools.partial(QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="session")
def driver() -> Iterator[Any]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="pip install .[browser]")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1280,1024",
        # No host but the local server resolves: the network is off for the pages.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit driver path: Selenium Manager is never asked to download one.
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(30)
    yield browser
    browser.quit()
