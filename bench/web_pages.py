"""The web view's pages as a user meets them, on GPT-2 and cl100k (imported from the shared
files): in headless Chromium (Debian's, through Selenium; the suite is skipped without
them), each page's first render (navigation start to the page's data drawn, "Loading…"
gone) on a warm server and on the first visit after a server start, the diff of GPT-2
and cl100k complete (every section drawn), the playground's update for 10 kB of text
alone and compared with a second version (the page's own ``update()``, after its typing
debounce), the largest response and the number of API requests each page made.
Budgets: first render <= 0.5 s, the GPT-2/cl100k diff <= 1.0 s, a 10 kB update <= 0.2 s
(<= 0.3 s comparing two), no page over 10 requests, no response over 100 KB.
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
from bench.web import CORPORA, _free_port, _text

PAGES = [  # path, a CSS selector present once the page's data is drawn
    ("/", "#versions li.version"),
    ("/version?ref=gpt2@1", "#curve svg polyline"),
    ("/token?ref=gpt2@1&token=%20Dracula", ".merge-tree .tok"),
    ("/playground?ref=gpt2@1", "section.pane .tokens .tok"),
    ("/diff?a=gpt2@1&b=cl100k@1", "#diff[data-drawn]"),
    ("/corpora", "main p, main table"),
]
FIRST_VISIT = [  # path, what is drawn, whether every "Loading…" must be gone
    ("/version?ref=gpt2@1", ".merges-table tbody tr", False),  # its facts and lists, the curve still loading
    ("/version?ref=gpt2@1", "#curve svg polyline", True),
    ("/diff?a=gpt2@1&b=cl100k@1", "#diff[data-drawn]", True)]


def _store(path: Path) -> Path:
    """GPT-2 and cl100k, imported."""
    if path.exists():
        return path
    import bpestore

    partial = path.with_suffix(".part")
    partial.unlink(missing_ok=True)
    with bpestore.open(partial) as store:
        store.import_gpt2("gpt2", vocab=CORPORA / "gpt2_vocab.json", merges=CORPORA / "gpt2_merges.txt")
        store.import_tiktoken("cl100k", CORPORA / "cl100k_base.tiktoken", pattern="cl100k")
    partial.rename(path)
    return path


def _serve(db: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "--db", str(db), "serve", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    import urllib.request

    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/favicon.ico", timeout=2):
                return server, base
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError("bpestore serve did not start") from None
            time.sleep(0.05)


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(10)


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


def _first_render(driver, url: str, selector: str, settled: bool = True) -> tuple[float, int, int]:
    """Seconds from navigation start to the data drawn (and, ``settled``, no "Loading…" left),
    the largest response (bytes), the API requests."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 30
    while not driver.execute_script(
            "return !!document.querySelector(arguments[0]) && (!arguments[1] || !document.querySelector('main')"
            ".textContent.includes('Loading…'));", selector, settled):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not render {selector}")
        time.sleep(0.005)
    drawn = driver.execute_async_script("const done = arguments[arguments.length - 1];"
                                        "requestAnimationFrame(() => setTimeout(() => done(performance.now()), 0));")
    return drawn / 1000, _largest_answer(driver), _requests(driver)


def _requests(driver) -> int:
    return int(driver.execute_script("return performance.getEntriesByType('resource')"
                                     ".filter((r) => r.name.includes('/api/')).length;"))


def _largest_answer(driver) -> int:
    """The largest API answer the page fetched (bytes of its body)."""
    return int(driver.execute_script("return Math.max(0, ...performance.getEntriesByType('resource')"
                                     ".filter((r) => r.name.includes('/api/')).map((r) => r.decodedBodySize));"))


def _playground_update(driver, base: str, text: str, compare: str | None = None) -> tuple[float, int]:
    driver.get(f"{base}/playground?ref=gpt2@1" + (f"&compare={compare}" if compare else ""))
    panes = ("return new Set([...document.querySelectorAll('section.pane .tokens .tok')]"
             ".map((t) => t.closest('section'))).size;")
    while driver.execute_script(panes) < (2 if compare else 1):
        time.sleep(0.01)
    driver.execute_script("performance.clearResourceTimings();")
    took = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "document.getElementById('text').value = arguments[0];"
        "const t = performance.now();"  # the answer drawn: its layout and paint included
        "update().then(() => requestAnimationFrame(() => setTimeout(() => done(performance.now() - t), 0)));", text)
    return took / 1000, _largest_answer(driver)


def _row(what: str, first: tuple, measured: list[tuple], budget: float) -> list[str]:
    seconds = statistics.median(m[0] for m in measured)
    largest = max(m[1] for m in [first, *measured])
    requests = max((m[2] for m in [first, *measured] if len(m) > 2), default=None)
    ok = seconds <= budget and largest <= 100_000 and (requests is None or requests <= 10)
    return [what, f"{1000 * first[0]:.0f}", f"{1000 * seconds:.0f}", f"{1000 * budget:.0f}", f"{largest / 1000:.1f}",
            "-" if requests is None else str(requests), "ok" if ok else "OVER"]


def web_pages(corpus: Path, corpus_name: str, runs: int, vocab_size: int) -> str:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "## Web pages: skipped (no chromium/chromedriver: apt-get install -y chromium chromium-driver)\n"
    db = _store(DATA / "web-pages.db")
    text = _text(corpus)
    ten_kb = (text * (10_000 // len(text) + 1))[:10_000]
    driver = _browser()
    rows = []
    try:
        for path, selector, settled in FIRST_VISIT:  # each on a server just started
            visits = []
            for _ in range(runs):
                server, base = _serve(db)
                try:
                    visits.append(_first_render(driver, base + path, selector, settled))
                finally:
                    _stop(server)
            budget = 1.0 if path.startswith("/diff") else 0.5
            what = "complete" if settled else "first render (facts and lists)"
            rows.append(_row(f"{what}, first visit after a server start `{path}`", visits[0], visits, budget))
        server, base = _serve(db)
        try:
            for path, selector in PAGES:
                first = _first_render(driver, base + path, selector)  # the server's caches filled here
                measured = [_first_render(driver, base + path, selector) for _ in range(runs)]
                budget = 1.0 if path.startswith("/diff") else 0.5
                what = "complete" if path.startswith(("/diff", "/version")) else "first render"
                rows.append(_row(f"{what} `{path}`", first, measured, budget))
            for compare, budget in ((None, 0.2), ("cl100k@1", 0.3)):
                once = _playground_update(driver, base, ten_kb, compare)
                updates = [_playground_update(driver, base, ten_kb, compare) for _ in range(runs)]
                what = f"playground update, {len(ten_kb.encode()):,} bytes of `{corpus_name}`" + \
                    (f", compared with {compare}" if compare else "") + " (drawn)"
                rows.append(_row(what, once, updates, budget))
        finally:
            _stop(server)
    finally:
        driver.quit()
    return (f"## Web pages on GPT-2 and cl100k in headless Chromium (the first visit, then the median of {runs})\n\n"
            + markdown_table(["what", "first visit (ms)", "median (ms)", "budget (ms)", "largest API answer (KB)",
                              "API requests", "median within budget"], rows))


SUITES = {"web-pages": web_pages}
