"""The web view's pages as a user meets them, on GPT-2 (50,257 tokens, imported from the
shared files, as bench/web.py): in headless Chromium (Debian's, through Selenium; the
suite is skipped without them), each page's first render (navigation start to the page's
data drawn, "Loading…" gone), the playground's update for 10 kB of text (the page's own
``update()``, after its typing debounce), and the largest response each page fetched
(Resource Timing's decoded body size). Budgets: first render <= 0.5 s, a 10 kB update
<= 0.2 s, no response over 100 KB unless the user asks for a whole list.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import DATA, REPO, markdown_table
from bench.web import _free_port, _store, _text

PAGES = [  # path, a CSS selector present once the page's data is drawn
    ("/", "#versions li.version"),
    ("/version?ref=gpt2@1", "#curve svg polyline"),
    ("/token?ref=gpt2@1&token=%20Dracula", ".explained .tok"),
    ("/playground?ref=gpt2@1", "section.pane .tokens .tok"),
    ("/diff?a=gpt2@1&b=gpt2@1", ".only-b"),
    ("/corpora", "main p, main table"),
]


def _browser():
    os.environ.setdefault("SE_OFFLINE", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1440,900"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)


def _first_render(driver, url: str, selector: str) -> tuple[float, int]:
    """Seconds from navigation start to the data drawn, and the largest response (bytes)."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 30
    while not driver.execute_script(
            "return !!document.querySelector(arguments[0]) && !document.querySelector('main')"
            ".textContent.includes('Loading…');", selector):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not render {selector}")
        time.sleep(0.005)
    drawn = driver.execute_async_script("const done = arguments[arguments.length - 1];"
                                        "requestAnimationFrame(() => setTimeout(() => done(performance.now()), 0));")
    return drawn / 1000, _largest_answer(driver)


def _largest_answer(driver) -> int:
    """The largest API answer the page fetched (bytes of its body)."""
    return int(driver.execute_script("return Math.max(0, ...performance.getEntriesByType('resource')"
                                     ".filter((r) => r.name.includes('/api/')).map((r) => r.decodedBodySize));"))


def _playground_update(driver, base: str, text: str) -> tuple[float, int]:
    driver.get(f"{base}/playground?ref=gpt2@1")
    while not driver.execute_script("return document.querySelector('section.pane .tokens .tok') !== null;"):
        time.sleep(0.01)
    driver.execute_script("performance.clearResourceTimings();")
    took = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.getElementById('text').value = arguments[0];"
        "const t = performance.now();"  # the answer drawn: its layout and paint included
        "update().then(() => requestAnimationFrame(() => setTimeout(() => done(performance.now() - t), 0)));", text)
    return took / 1000, _largest_answer(driver)


def web_pages(corpus: Path, corpus_name: str, runs: int, vocab_size: int) -> str:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "## Web pages: skipped (no chromium/chromedriver: apt-get install -y chromium chromium-driver)\n"
    db = _store(DATA / "web.db")
    text = _text(corpus)
    ten_kb = (text * (10_000 // len(text) + 1))[:10_000]
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "--db", str(db), "serve", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    driver = _browser()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                driver.get(f"{base}/api/versions")
                if "gpt2" in driver.page_source:
                    break
            except Exception:  # noqa: BLE001 - not listening yet
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("bpestore serve did not start")
            time.sleep(0.1)
        rows = []
        for path, selector in PAGES:
            first = _first_render(driver, base + path, selector)  # the server's caches filled here
            measured = [_first_render(driver, base + path, selector) for _ in range(runs)]
            seconds = statistics.median(m[0] for m in measured)
            largest = max(m[1] for m in [first, *measured])
            rows.append([f"first render `{path}`", f"{1000 * first[0]:.0f}", f"{1000 * seconds:.0f}", "500",
                         f"{largest / 1000:.1f}", "ok" if seconds <= 0.5 and largest <= 100_000 else "OVER"])
        first = _playground_update(driver, base, ten_kb)
        measured = [_playground_update(driver, base, ten_kb) for _ in range(runs)]
        seconds = statistics.median(m[0] for m in measured)
        largest = max(m[1] for m in [first, *measured])
        rows.append([f"playground update, {len(ten_kb.encode()):,} bytes of `{corpus_name}` (drawn)",
                     f"{1000 * first[0]:.0f}", f"{1000 * seconds:.0f}", "200", f"{largest / 1000:.1f}",
                     "ok" if seconds <= 0.2 and largest <= 100_000 else "OVER"])
    finally:
        driver.quit()
        server.terminate()
        server.wait(10)
    return (f"## Web pages on GPT-2 in headless Chromium (the first visit after the server started, "
            f"then the median of {runs})\n\n"
            + markdown_table(["what", "first visit (ms)", "median (ms)", "budget (ms)", "largest API answer (KB)",
                              "median within budget"], rows))


SUITES = {"web-pages": web_pages}
