"""The pages' Python, driven in headless Chromium with no network but the local server.

Clicks Run on an example of every lab page and of the validation page and compares
the output with the example's doctest; edits an example; answers exercises; fills
the "Plan a job" form and compares its table with `python -m infralens rank`.
The times from click to output are written to build/browser-runtime.json with the
bytes the runtime adds to the site (a report, not a timed test).
"""

from __future__ import annotations

import doctest
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("INFRALENS_SITE", ROOT / "build" / "html"))
LABS = sorted(p.relative_to(SITE).as_posix() for p in (SITE / "labs").glob("lab-*.html"))
REPORT = ROOT / "build" / "browser-runtime.json"
TIMES: dict[str, list[Any]] = {"first_output_s": [], "again_s": [], "planner_s": [],
                               "start_phases_ms": []}  # fmt: skip
BUSY = ("Starting Python in this page…", "Running…", "Checking…", "Ranking the plans")
# furo scrolls smoothly; a test scrolls at once, so the element is in view when clicked.
CENTER = "arguments[0].scrollIntoView({block: 'center', behavior: 'instant'});"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    static = SITE / "_static"
    added = sum(
        p.stat().st_size
        for folder in ("pyodide", "infralens-run", "notebooks")
        for p in (static / folder).rglob("*")
        if p.is_file()
    )
    added += (SITE / "plan-a-job.html").stat().st_size

    def spread(times: list[float]) -> dict[str, float] | None:
        return {"runs": len(times), "median": median(times), "max": max(times)} if times else None

    summary: dict[str, Any] = {
        "bytes_added": added,
        "first_output_s": spread(TIMES["first_output_s"]),
        "second_run_s": spread(TIMES["again_s"]),
        "planner_s": TIMES["planner_s"],
        # The worker's start, per page: loader imported, Pyodide up, files unpacked,
        # runner.py loaded, first answer (ms from the first call).
        "start_phases_ms": {
            phase: median(p[phase] for p in TIMES["start_phases_ms"])
            for phase in ("pyodide", "unpacked", "runner", "answered")
        }
        if TIMES["start_phases_ms"]
        else None,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _open(driver: Any, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def _blocks(driver: Any, shown: bool = True) -> list[WebElement]:
    """The page's >>> blocks; with *shown*, those not folded inside a closed answer."""
    found = driver.find_elements(By.CSS_SELECTOR, "article div.highlight-pycon")
    return [b for b in found if b.is_displayed()] if shown else found


def _finished(driver: Any, element: WebElement, timeout: float = 60) -> str:
    WebDriverWait(driver, timeout).until(
        lambda d: element.text and not element.text.startswith(BUSY)
    )
    return element.get_attribute("textContent") or ""


def _run(driver: Any, block: WebElement) -> tuple[str, float]:
    button = block.find_element(By.CSS_SELECTOR, "button.infralens-run")
    driver.execute_script(
        "arguments[0].scrollIntoView({block: 'center', behavior: 'instant'});", button
    )
    hit = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "const e = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);"
        "return e === arguments[0] ? '' : e.outerHTML.slice(0, 200);",
        button,
    )
    assert not hit, f"something covers the Run button: {hit}"
    button.send_keys(Keys.ENTER)  # the keyboard's way: focus, then Enter
    out = driver.execute_script("return arguments[0].nextElementSibling;", block)
    text = _finished(driver, out)
    return text, float(out.get_attribute("data-ms") or "nan") / 1000


def _checkable(text: str) -> bool:
    examples = doctest.DocTestParser().get_examples(text)
    return bool(examples) and all(not ex.exc_msg for ex in examples) and bool(examples[-1].want)


def _want(text: str) -> str:
    return "".join(ex.want for ex in doctest.DocTestParser().get_examples(text))


def _agrees(want: str, got: str, text: str) -> bool:
    flags = FLAGS
    if "+NUMBER" in text:
        flags |= doctest.NUMBER
    return doctest.OutputChecker().check_output(want, got, flags)


@pytest.mark.parametrize("page", [*LABS, "reference/validation.html"])
def test_run_an_example_and_get_its_doctest_output(driver: Any, base_url: str, page: str) -> None:
    _open(driver, base_url + page)
    assert all(
        b.find_elements(By.CSS_SELECTOR, "button.infralens-run")
        for b in _blocks(driver, shown=False)
    ), "every >>> block has a Run control"
    blocks = _blocks(driver)
    texts = [driver.execute_script("return arguments[0].querySelector('pre').innerText;", b)
             for b in blocks]  # fmt: skip
    if page == "reference/validation.html":  # the example that reads a shipped CSV
        index = next(i for i, t in enumerate(texts) if "tests/data/" in t and _checkable(t))
    else:
        index = next(i for i, t in enumerate(texts) if _checkable(t))
    got, seconds = _run(driver, blocks[index])
    TIMES["first_output_s"].append(seconds)
    phases = driver.execute_script("return window.infralensBoot || null;")
    if phases:
        TIMES["start_phases_ms"].append(phases)
    assert _agrees(_want(texts[index]), got, texts[index]), (page, texts[index], got)
    again, seconds = _run(driver, blocks[index])  # the runtime is up: a second click
    TIMES["again_s"].append(seconds)
    assert _agrees(_want(texts[index]), again, texts[index]), (page, texts[index], again)


def test_an_edited_example_prints_the_new_value(driver: Any, base_url: str) -> None:
    _open(driver, base_url + LABS[0])
    block = next(b for b in _blocks(driver) if "bus_bandwidth_factor" in b.text)
    _run(driver, block)
    pre = block.find_element(By.CSS_SELECTOR, "pre")
    assert pre.get_attribute("contenteditable") == "true"
    driver.execute_script(
        "const r = document.createRange(); r.selectNodeContents(arguments[0]);"
        "r.collapse(false); const s = getSelection(); s.removeAllRanges(); s.addRange(r);"
        "arguments[0].focus();",
        pre,
    )
    # Typed, with its line break, then Ctrl+Enter: the page reads the block's innerText.
    pre.send_keys(Keys.ENTER, ">>> 6 * 7", Keys.ENTER, ">>> print('edited')")
    pre.send_keys(Keys.CONTROL, Keys.ENTER)
    out = driver.execute_script("return arguments[0].nextElementSibling;", block)
    WebDriverWait(driver, 30).until(lambda d: "edited" in out.text)
    assert out.get_attribute("textContent").endswith("42\nedited\n")


@pytest.mark.parametrize(
    ("page", "answer", "right"),
    [(LABS[0], "3.33", True), (LABS[2], "12", False), (LABS[14], "ring", True)],
)
def test_an_exercise_is_checked_in_the_page(
    driver: Any, base_url: str, page: str, answer: str, right: bool
) -> None:
    _open(driver, base_url + page)
    form = driver.find_element(By.CSS_SELECTOR, "form.infralens-check")
    answer_box = driver.execute_script(
        "return arguments[0].closest('.infralens-check-box').nextElementSibling;", form
    )
    field = form.find_element(By.CSS_SELECTOR, "input, select")
    driver.execute_script(
        "arguments[0].scrollIntoView({block: 'center', behavior: 'instant'});", field
    )
    if field.tag_name == "select":
        field.send_keys(answer)
    else:
        field.send_keys(answer, Keys.ENTER)
    if field.tag_name == "select":
        form.find_element(By.CSS_SELECTOR, "button").click()
    verdict = driver.execute_script(
        "return arguments[0].parentElement.querySelector('.infralens-verdict');", form
    )
    text = _finished(driver, verdict)
    assert text.startswith("Right: " if right else "Not right ("), text
    assert len(text) > 30, "the verdict gives the reason"
    assert answer_box.tag_name == "details" and answer_box.get_attribute("open") is None


def _cli_rank(args: list[str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "infralens", "rank", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "labs_src")},
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


JOBS = [
    {"model": "llama3-8b", "cluster": "dgx-h100", "gpus": "16", "seq-len": "8192",
     "global-batch": "64", "recipe": "fsdp2", "tp-comm-overlap": "on"},
    {"model": "llama3-70b", "cluster": "dgx-h100", "gpus": "16384", "seq-len": "4096",
     "global-batch": "4096"},
    {"model": "llama3.1-405b", "cluster": "dgx-h100", "gpus": "16384", "seq-len": "8192",
     "global-batch": "2048"},
]  # fmt: skip
SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab_size", "gated_mlp")
# No preset has this shape: Llama-like, 40 layers of 5,120, a 65,536-token vocabulary.
SHAPE = {"layers": "40", "hidden": "5120", "heads": "40", "kv_heads": "8",
         "ffn_hidden": "13824", "vocab_size": "65536", "gated_mlp": "true"}  # fmt: skip
CUSTOM = {"model": "custom", "cluster": "dgx-h100", "gpus": "32", "seq-len": "4096",
          "global-batch": "256", **SHAPE}  # fmt: skip


def _model_arg(job: dict[str, str]) -> str:
    """``rank --model``'s value: the preset, or the shape spec the form builds."""
    if job["model"] != "custom":
        return job["model"]
    return ",".join(f"{k}={job[k]}" for k in SHAPE_KEYS)


def _fill(driver: Any, job: dict[str, str]) -> WebElement:
    form = driver.find_element(By.CSS_SELECTOR, "form.infralens-plan")
    names = ["model", "cluster", "gpus", "seq-len", "global-batch", "micro-batch", "recipe",
             "tp-comm-overlap"]  # fmt: skip
    if job["model"] == "custom":
        names += SHAPE_KEYS
    for name in names:
        value = job.get(name, {"micro-batch": "1"}.get(name, ""))
        driver.execute_script(
            "const f = arguments[0].elements.namedItem(arguments[1]);"
            "f.value = arguments[2]; f.dispatchEvent(new Event('change'));",
            form,
            name,
            value,
        )
    result = driver.find_element(By.CSS_SELECTOR, ".infralens-plan-result")
    driver.execute_script("arguments[0].textContent = '';", result)
    submit = form.find_element(By.CSS_SELECTOR, "button[type=submit]")
    driver.execute_script(CENTER, submit)
    submit.click()
    _finished(driver, result, timeout=120)
    return result


def _markdown_rows(text: str) -> list[list[str]]:
    rows = [line[1:-1].split("|") for line in text.splitlines() if line.startswith("|")]
    return [[c.strip() for c in row] for i, row in enumerate(rows) if i != 1]


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "infralens", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "labs_src")},
        check=True,
    )
    return done.stdout


def _bars(driver: Any, result: WebElement, kind: str) -> list[tuple[str, str, str]]:
    """A chart's bars: (label, number as printed, the label's link)."""
    return [tuple(row) for row in driver.execute_script(
        "return [...arguments[0].querySelectorAll('svg.infralens-chart-' + arguments[1] +"
        " ' g.infralens-bar')].map(g => [g.querySelector('text.label').textContent,"
        " g.querySelector('text.value').textContent, g.querySelector('a').getAttribute('href')]);",
        result, kind)]  # fmt: skip


def _check_charts(driver: Any, result: WebElement, args: list[str], tmp: Path) -> None:
    """Plan 1's charts give the numbers ``plan`` and ``memory`` print for row 1 as
    ``rank --write-plan 1`` writes it, and each label links to a section that exists."""
    path = tmp / "row.yaml"
    _cli("rank", *args, "--write-plan", "1", str(path))
    sheet = _cli("plan", str(path), "--format", "markdown")
    steps = sheet.split("| Step time | ms | share |\n| --- | ---: | ---: |\n")[1]
    want_step = [
        (cells[0], f"{cells[1]} ms")
        for line in steps.splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line[1:-1].split("|")])
    ]
    memory = _cli("memory", "--plan", str(path))
    want_memory = [
        (m[1].strip(), f"{m[2]} GB")
        for m in re.finditer(r"^  (\S.{19}) +([\d.]+) GB$", memory, re.M)
    ]
    assert len(want_step) >= 2 and len(want_memory) == 5, (sheet, memory)
    got_step, got_memory = _bars(driver, result, "step"), _bars(driver, result, "memory")
    assert [b[:2] for b in got_step] == want_step
    assert [b[:2] for b in got_memory] == want_memory
    total = re.search(r"\nStep ([\d.]+) s,", sheet)
    assert total is not None
    titles = [
        t.get_attribute("textContent")
        for t in result.find_elements(By.CSS_SELECTOR, "svg.infralens-chart title")
    ]
    assert titles[0].endswith(f": {total[1]} s"), titles
    # the table's columns link to sections too, as written in the page
    columns = [
        driver.execute_script("return arguments[0].getAttribute('href')", a)
        for a in result.find_elements(By.CSS_SELECTOR, "table.infralens-plan-table th a")
    ]
    assert len(columns) >= 10, columns
    for href in [*(h for _, _, h in got_step + got_memory), *columns]:
        page, _, anchor = href.partition("#")
        target = (SITE / "plan-a-job.html").parent / page
        assert target.is_file() and f'id="{anchor}"' in target.read_text(encoding="utf-8"), href


@pytest.mark.parametrize("job", [*JOBS, CUSTOM], ids=lambda j: f"{j['model']}-{j['gpus']}")
def test_the_planner_prints_the_commands_plans(
    driver: Any, base_url: str, job: dict[str, str], tmp_path: Path
) -> None:
    _open(driver, base_url + "plan-a-job.html")
    result = _fill(driver, job)
    cold = int(result.get_attribute("data-ms")) / 1000  # includes starting the runtime
    WebDriverWait(driver, 120).until(
        lambda d: result.find_elements(By.CSS_SELECTOR, "pre.infralens-plan-worksheet")
    )
    warm = []
    for _ in range(3 if job["gpus"] == "16384" else 1):  # again, on the running runtime
        result = _fill(driver, job)
        warm.append(int(result.get_attribute("data-ms")) / 1000)
        WebDriverWait(driver, 120).until(
            lambda d, r=result: r.find_elements(By.CSS_SELECTOR, "pre.infralens-plan-worksheet")
        )
    TIMES["planner_s"].append({"model": job["model"], "gpus": int(job["gpus"]),
                               "first_s": cold, "again_s": warm})  # fmt: skip
    args = ["--model", _model_arg(job)]
    args += [x for name in ("cluster", "gpus", "seq-len", "global-batch")
             for x in (f"--{name}", job[name])]  # fmt: skip
    if job.get("recipe"):
        args += ["--recipe", job["recipe"]]
    if job.get("tp-comm-overlap") == "on":  # the form's select becomes the flag
        args += ["--tp-comm-overlap"]
    status, printed, _ = _cli_rank(args)
    assert status == 0
    cells = driver.execute_script(
        "return [...arguments[0].querySelectorAll('table tr')]"
        ".map(r => [...r.children].map(c => c.textContent.trim()));",
        result,
    )
    assert cells == _markdown_rows(printed)
    assert printed.splitlines()[0] in result.text
    links = result.find_elements(By.CSS_SELECTOR, "table a[href]")
    assert len(links) == sum(len(r) for r in cells), "each number links to its section"
    WebDriverWait(driver, 120).until(
        lambda d: result.find_elements(By.CSS_SELECTOR, "pre.infralens-plan-worksheet")
    )
    assert "fits" in result.find_element(By.CSS_SELECTOR, "pre.infralens-plan-memory").text
    assert "Worksheet" in result.find_element(By.CSS_SELECTOR, "pre.infralens-plan-worksheet").text
    download = result.find_element(By.CSS_SELECTOR, "a.infralens-plan-download")
    assert download.get_attribute("download") == "parallelism_plan.yaml"
    _check_charts(driver, result, args, tmp_path)
    # The address carries the inputs: opening it again ranks the same job.
    assert f"gpus={job['gpus']}" in driver.current_url
    if job["model"] == "custom":
        assert all(f"{k}={v}" in driver.current_url for k, v in SHAPE.items())
        _open(driver, driver.current_url)
        shape = driver.find_element(By.CSS_SELECTOR, "fieldset.infralens-plan-shape")
        assert shape.is_displayed()
        again = driver.find_element(By.CSS_SELECTOR, ".infralens-plan-result")
        WebDriverWait(driver, 120).until(lambda d: again.find_elements(By.CSS_SELECTOR, "table"))
        assert (
            driver.execute_script(
                "return [...arguments[0].querySelectorAll('table tr')]"
                ".map(r => [...r.children].map(c => c.textContent.trim()));",
                again,
            )
            == cells
        )


def test_a_bad_input_shows_the_commands_one_line_error(driver: Any, base_url: str) -> None:
    _open(driver, base_url + "plan-a-job.html")
    bad = {**JOBS[0], "model": "llama3-70b", "gpus": "60"}
    result = _fill(driver, bad)
    status, _, err = _cli_rank(
        ["--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "60",
         "--seq-len", "8192", "--global-batch", "64", "--recipe", "fsdp2"]
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1
    assert result.text.strip() == err.strip()


def test_a_bad_shape_shows_the_commands_one_line_error(driver: Any, base_url: str) -> None:
    _open(driver, base_url + "plan-a-job.html")
    bad = {**CUSTOM, "heads": "48"}  # 5,120 channels do not split into 48 heads
    result = _fill(driver, bad)
    status, _, err = _cli_rank(
        ["--model", _model_arg(bad), "--cluster", "dgx-h100", "--gpus", "32",
         "--seq-len", "4096", "--global-batch", "256"]
    )  # fmt: skip
    assert status == 2 and err.count("\n") == 1, err
    assert "hidden must be divisible by heads" in err
    assert result.text.strip() == err.strip()
    assert not result.find_elements(By.CSS_SELECTOR, "table, svg")


def test_a_file_page_says_how_to_serve_the_folder(driver: Any) -> None:
    _open(driver, (SITE / LABS[0]).as_uri())
    block = _blocks(driver)[0]
    button = block.find_element(By.CSS_SELECTOR, "button.infralens-run")
    driver.execute_script(CENTER, button)
    button.send_keys(Keys.ENTER)
    out = driver.execute_script("return arguments[0].nextElementSibling;", block)
    WebDriverWait(driver, 10).until(lambda d: out.text)
    assert re.fullmatch(r"[^\n]*python3 -m http\.server -d build/html[^\n]*", out.text)


def test_run_controls_do_not_move_the_page(driver: Any, base_url: str) -> None:
    # The buttons are placed over the code box; the page's layout is the same with them.
    _open(driver, base_url + LABS[0])
    time.sleep(0.2)
    height = driver.execute_script("return document.documentElement.scrollHeight;")
    driver.execute_script(
        "document.querySelectorAll('button.infralens-run').forEach(b => b.remove());"
    )
    assert driver.execute_script("return document.documentElement.scrollHeight;") == height


def test_a_labs_shown_code_runs_with_its_example_inputs(driver: Any, base_url: str) -> None:
    _open(driver, base_url + LABS[0])
    wrapper = driver.find_element(By.CSS_SELECTOR, "article div.literal-block-wrapper")
    button = wrapper.find_element(By.CSS_SELECTOR, "button.infralens-run")
    driver.execute_script(CENTER, button)
    button.send_keys(Keys.ENTER)
    WebDriverWait(driver, 120).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "div.infralens-examples + pre.infralens-output")
    )
    block = driver.find_element(By.CSS_SELECTOR, "div.infralens-examples")
    out = driver.execute_script("return arguments[0].nextElementSibling;", block)
    got = _finished(driver, out)
    text = driver.execute_script("return arguments[0].querySelector('pre').innerText;", block)
    assert ">>>" in text and _agrees(_want(text), got, text), (text, got)
