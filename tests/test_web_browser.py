"""The web view's pages in a real browser: Debian's Chromium, headless, driven by
Selenium through the system chromedriver (nothing downloads a browser). The server is
`bpestore serve` in a subprocess over a SQLite store; references come from the CLI.
Every page is read for console errors, and at 390 px for horizontal scrolling.

``BPESTORE_SCREENSHOT=1`` saves a screenshot of each page in docs/ (web-*.png).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("Chromium and chromedriver are absent (apt-get install -y chromium chromium-driver)",
                allow_module_level=True)
pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install -e '.[test]'")
os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never fetch a browser or driver

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

import bpestore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
from .test_web import HELD_OUT, XSS, build_store, cli_json  # noqa: E402  (the CLI in this process)

SCREENSHOTS = os.environ.get("BPESTORE_SCREENSHOT") == "1"
UNICODE = "naïve café ’quoted’\n\tindented  twice\n\nend"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """The API tests' store, and books grown to a second generation (books@1 stays:
    en@1 and en@2 were trained on it)."""
    tmp = tmp_path_factory.mktemp("browser")
    path = str(tmp / "web.db")
    build_store(path, tmp)
    more = tmp / "more.txt"
    more.write_text(f"{UNICODE}\n" * 30, encoding="utf-8")
    with bpestore.open(path) as store:
        store.ingest("books", [str(more)], workers=1)
        xss = store.tokenizer("xss@1")  # imp@1: xss@1's vocabulary imported (no pair counts)
        vocab = {i: xss.decode_single_token_bytes(i) for i in range(xss.n_vocab)}
        merges = store.merges("xss@1", start=0, limit=None)
        store.import_vocab("imp", vocab, [(vocab[m.left], vocab[m.right]) for m in merges])
        store.import_vocab("long", *long_tokens())
    return path


def long_tokens() -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """long@1: bytes, runs of 2 to 128 spaces (as cl100k's id 58040) and a 45-letter word."""
    vocab = {i: bytes([i]) for i in range(256)}
    merges, run = [], b" "
    for _ in range(7):
        merges.append((run, run))
        run += run
        vocab[len(vocab)] = run
    word = b"Pneumonoultramicroscopicsilicovolcanoconiosis"
    for end in range(2, len(word) + 1):
        merges.append((word[:end - 1], word[end - 1:end]))
        vocab[len(vocab)] = word[:end]
    merges += [(b"\xe2", b"\x80"), (b"\xe2\x80", b"\x8b")]  # a zero-width space, one token
    vocab[len(vocab)], vocab[len(vocab) + 1] = b"\xe2\x80", "\u200b".encode()
    return vocab, merges


def serve(db: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bpestore", "--db", db, "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}/api/versions", timeout=2) as response:
                assert response.status == 200
            return process, base
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"bpestore serve did not start: {process.stdout.read()}") from None
            time.sleep(0.2)


@pytest.fixture(scope="module")
def server(db):
    process, base = serve(db)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1440,900", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait(browser, condition, timeout: float = 20):
    """Until ``condition()`` is true; an element re-rendered while it was read is read again."""
    return WebDriverWait(browser, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition())


def js(browser, script: str, *args):
    return browser.execute_script(script, *args)


def open_page(browser, url: str) -> None:
    browser.get("about:blank")  # the page before stops polling (its server may be gone)...
    browser.get_log("browser")  # ...and what it logged is dropped
    browser.get(url)


def console_errors(browser) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def settled(browser) -> None:
    """No "Loading…" left, no console error."""
    wait(browser, lambda: "Loading…" not in browser.find_element(By.TAG_NAME, "main").text)
    assert console_errors(browser) == []


def screenshot(browser, name: str, width: int = 1440, height: int = 900) -> None:
    if not SCREENSHOTS:
        return
    (ROOT / "docs").mkdir(exist_ok=True)
    browser.set_window_size(width, height)
    js(browser, "window.scrollTo(0, 0); document.activeElement.blur();")
    time.sleep(0.3)
    browser.save_screenshot(str(ROOT / "docs" / f"web-{name}.png"))
    browser.set_window_size(1440, 900)


# -- colours: what a reader with a colour-vision deficiency sees (Machado et al. 2009) -----
CVD = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
    "none": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
}


def lab_seen(rgb: tuple[int, int, int], matrix) -> tuple[float, float, float]:
    def linear(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    lin = [linear(c) for c in rgb]
    r, g, b = (max(0.0, min(1.0, sum(row[k] * lin[k] for k in range(3)))) for row in matrix)
    x, y, z = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, \
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def rgb_of(css: str) -> tuple[int, int, int]:
    r, g, b = css[css.index("(") + 1:css.index(")")].split(",")[:3]
    return int(r), int(g), int(b)


# -- the pages ---------------------------------------------------------------------------
def test_registry_shows_the_lineage_tree_and_timeline(server, browser, db):
    open_page(browser, f"{server}/")
    n = len(cli_json(db, "versions"))
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#versions li.version")) == n)
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "ol.timeline li"))
    settled(browser)
    rows = {li.get_attribute("data-ref"): li for li in browser.find_elements(By.CSS_SELECTOR, "#versions li.version")}
    expected = {v["ref"]: v for v in cli_json(db, "versions")}
    assert set(rows) == set(expected) == {"en@1", "en@2", "xss@1", "imp@1", "long@1"}
    # en@2 extends en@1: it is drawn inside en@1's branch; grouped by name, the newest activity first.
    assert rows["en@1"].find_elements(By.CSS_SELECTOR, 'li.version[data-ref="en@2"]')
    groups = js(browser, "return [...document.querySelectorAll('#versions .group')].map((g) => [g.dataset.name, "
                         "g.querySelector('h3').textContent, "
                         "[...g.querySelectorAll('li.version')].map((li) => li.dataset.ref)]);")
    activity = {name: max(v["updated_at"] for v in expected.values() if v["name"] == name)
                for name in ("en", "xss", "imp", "long")}
    group_names = "return [...document.querySelectorAll('#versions .group')].map((g) => g.dataset.name);"
    assert [g[0] for g in groups] == sorted(activity, key=activity.__getitem__, reverse=True)
    assert all(g[0] == g[1] and all(r.startswith(g[0] + "@") for r in g[2]) for g in groups)
    for ref, li in rows.items():
        v = expected[ref]
        text = li.find_element(By.CSS_SELECTOR, ".row").text
        assert li.get_attribute("data-status") == v["status"] == "complete"
        assert f"{v['vocab_size']:,} tokens" in text and v["fingerprint"][:12] in text
        if v["corpus"] is not None:
            corpus = li.find_element(By.CSS_SELECTOR, ".row a[href^='/corpus']")
            assert corpus.text == f"{v['corpus']}@{v['corpus_generation']}"
    # The columns line up, extensions included: every row's status, size, corpus and date start
    # at the same x, each on the row's first line.
    for cell in (".badge", ".size", ".origin", ".date"):
        boxes = js(browser, "return [...document.querySelectorAll('#versions .row')].map((r) => [r.querySelector("
                            "arguments[0]).getBoundingClientRect(), r.querySelector('.ref').getBoundingClientRect()])"
                            ".map(([c, ref]) => [Math.round(c.left), Math.round(c.top - ref.top)]);", cell)
        assert len(boxes) == len(expected) and len({left for left, _ in boxes}) == 1, (cell, boxes)
        assert all(abs(dy) <= 4 for _, dy in boxes), (cell, boxes)
    # Sort by name or size, filter by any text of a row; both kept in the URL.
    Select(browser.find_element(By.ID, "sort")).select_by_value("name")
    wait(browser, lambda: js(browser, group_names) == sorted(activity))
    Select(browser.find_element(By.ID, "sort")).select_by_value("size")
    biggest = sorted(activity, key=lambda n: (-max(v["vocab_size"] for v in expected.values() if v["name"] == n), n))
    wait(browser, lambda: js(browser, group_names) == biggest)
    browser.find_element(By.ID, "filter").send_keys("books@1")
    visible = ("return [...document.querySelectorAll('#versions li.version')].filter((li) => li.offsetParent)"
               ".map((li) => li.dataset.ref);")
    on_books = sorted(r for r, v in expected.items() if v["corpus"] == "books")
    wait(browser, lambda: sorted(js(browser, visible)) == on_books)
    assert "q=books%401" in browser.current_url and "sort=size" in browser.current_url
    open_page(browser, browser.current_url)
    wait(browser, lambda: sorted(js(browser, visible)) == on_books)
    open_page(browser, f"{server}/")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "ol.timeline li"))
    alias = browser.find_element(By.CSS_SELECTOR, "li.version[data-ref='en@1'] > .row a.alias")
    assert alias.text == "en@prod" and alias.get_attribute("href").endswith("/version?ref=en%40prod")
    assert not browser.find_elements(By.CSS_SELECTOR, ".progress")  # nothing is training
    assert js(browser, "return document.body.dataset.polling") == "idle"
    # The timeline: every version and every corpus generation, newest first.
    generations = [g for c in cli_json(db, "corpora") for g in cli_json(db, "corpus", "log", c["name"])]
    items = browser.find_elements(By.CSS_SELECTOR, "ol.timeline li")
    assert len(items) == len(expected) + len(generations)
    times = [t.get_attribute("datetime") for t in browser.find_elements(By.CSS_SELECTOR, "ol.timeline li time")]
    assert times == sorted(times, reverse=True)
    assert len(browser.find_elements(By.CSS_SELECTOR, "ol.timeline li.generation")) == len(generations)
    screenshot(browser, "registry")


def spans_of(browser, ref: str) -> list[dict]:
    return js(browser, "return [...document.querySelectorAll(`section[data-ref='${arguments[0]}'] .tokens .tok`)]"
                       ".map((s) => ({id: Number(s.dataset.id), token: s.dataset.token, text: s.textContent, "
                       "split: s.classList.contains('split'), label: labelToken(s).getAttribute('aria-label'), "
                       "colour: getComputedStyle(s).backgroundColor, differs: s.classList.contains('differs')}));", ref)


def pane_shows(browser, ref: str, text: str) -> bool:
    found = browser.find_elements(By.CSS_SELECTOR, f"section[data-ref='{ref}']")
    return bool(found) and found[0].get_attribute("data-text") == text


def test_playground_tokens_are_readable(server, browser, db):
    open_page(browser, f"{server}/playground?ref=en@1")
    area = browser.find_element(By.ID, "text")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens .tok"))
    area.clear()
    area.send_keys(f'I am Dracula; {XSS} <img src=x onerror="window.pwned=1">')  # typed (a tab would leave the box)
    typed = f'I am Dracula; {XSS} <img src=x onerror="window.pwned=1"> {UNICODE} 東京'
    js(browser, "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", area, typed)
    wait(browser, lambda: pane_shows(browser, "en@1", typed))
    expected = cli_json(db, "encode", "en@1", typed, "--tokens")
    got = spans_of(browser, "en@1")
    assert [(s["id"], s["token"]) for s in got] == [(t["id"], t["token"]) for t in expected]
    # Characters as characters; a token holding part of a character is marked, with its bytes.
    for span, token in zip(got, expected):
        raw = token["token"].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1") \
            if "\\x" in token["token"] else token["token"].encode()
        assert span["split"] == ("\\x" in token["token"])
        if span["split"]:
            assert f"bytes {raw.hex(' ')}" in span["label"] and "part of a character" in span["label"]
        else:
            assert span["text"] == token["token"]  # the real characters, whitespace included
        assert span["label"].startswith(f"id {span['id']}: ")
    assert any(s["split"] for s in got) and "ï" not in "".join(s["text"] for s in got if s["split"])
    # A run of split tokens names the character it spells: bytes of "ï" then of "’".
    runs, run = [], b""
    for span, token in zip(got, expected):
        if span["split"]:
            run += token["token"].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
            try:
                runs.append((span["label"], run.decode()))
                run = b""
            except UnicodeDecodeError:
                pass
    assert {chars for _, chars in runs} >= {"ï", "’"}
    assert all(label.endswith(f"with its neighbours, ‘{chars}’") for label, chars in runs)
    # Neighbouring tokens never share a colour, and the colours stay apart for colour-blind readers.
    colours = [rgb_of(s["colour"]) for s in got]
    assert all(a != b for a, b in zip(colours, colours[1:]))
    for name, matrix in CVD.items():
        for a, b in {tuple(sorted(p)) for p in zip(colours, colours[1:])}:
            distance = sum((x - y) ** 2 for x, y in zip(lab_seen(a, matrix), lab_seen(b, matrix))) ** 0.5
            assert distance > 10, (name, a, b, distance)
    # Whitespace is marked (switchable), and copying gives the real text.
    marks = js(browser, "return [...document.querySelectorAll(\"section[data-ref='en@1'] .tok .ws\")].map((w) => "
                        "[w.textContent, getComputedStyle(w, w.classList.contains('nl') ? '::before' : '::after')"
                        ".content, getComputedStyle(w).backgroundImage]);")
    assert {("\t", '"→"'), ("\n", '"↵"')} <= {tuple(m[:2]) for m in marks}
    spaces = [m for m in marks if m[0] and not m[0].strip(" ")]
    assert spaces and all(m[2].startswith('url("data:image/svg+xml') for m in spaces)  # a dot a space
    browser.find_element(By.ID, "toggle-marks").click()
    assert js(browser, "return [...document.querySelectorAll(\"section[data-ref='en@1'] .tok .ws\")].map((w) => "
                       "[getComputedStyle(w, w.classList.contains('nl') ? '::before' : '::after').content,"
                       " getComputedStyle(w).backgroundImage]).every(([c, b]) => c === 'none' && b === 'none');")
    browser.find_element(By.ID, "toggle-marks").click()
    # The markup in the text stayed text: no element was made from it, nothing ran.
    assert js(browser, "return document.querySelectorAll('main img, main script').length") == 0
    assert js(browser, "return window.pwned === undefined")
    stats = browser.find_element(By.CSS_SELECTOR, "section[data-ref='en@1'] .stats").text
    n_bytes = len(typed.encode())
    assert f"{len(expected)} tokens" in stats and f"{n_bytes / len(expected):.2f} bytes/token" in stats
    # Ids by keyboard: one tab stop, arrows move, the focused token's id is announced; or all shown.
    row = browser.find_element(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens")
    row.click()
    first = browser.find_element(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens .tok")
    first.send_keys(Keys.ARROW_RIGHT)
    focused = js(browser, "return [document.activeElement.dataset.id, "
                          "document.querySelector(\"section[data-ref='en@1'] .tokinfo\").textContent,"
                          "document.activeElement.getAttribute('aria-label')];")
    assert focused[0] == str(expected[1]["id"]) and focused[1].startswith(f"id {expected[1]['id']} · ")
    assert focused[2].startswith(f"id {expected[1]['id']}: ")  # named for a screen reader as it gets focus
    assert js(browser, "return [...document.querySelectorAll(\"section[data-ref='en@1'] .tokens .tok\")]"
                       ".filter((s) => s.tabIndex === 0).length") == 1
    browser.find_element(By.ID, "toggle-ids").click()
    assert js(browser, "return getComputedStyle(document.querySelector(\"section[data-ref='en@1'] .tok\"), '::after')"
                       ".content") == f'"{expected[0]["id"]}"'
    browser.find_element(By.ID, "toggle-ids").click()
    settled(browser)


def test_running_text_is_drawn_by_lines(server, browser, db):
    """A long text's tokens are grouped by line (each group ends after a token ending in a
    newline), groups off screen left unpainted; the arrow keys cross from one line to the next."""
    text = "".join(f"line {i} of the castle, with the count\n" for i in range(300))
    open_page(browser, f"{server}/playground?ref=en@1&text=" + urllib.parse.quote(text))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens .tok"))
    settled(browser)
    lines = js(browser, "return [...document.querySelectorAll(\"section[data-ref='en@1'] .tokens > .line\")]"
                        ".map((l) => [[...l.children].map((t) => t.dataset.token),"
                        " getComputedStyle(l).contentVisibility]);")
    tokens = [t for line, _ in lines for t in line]
    assert "".join(tokens) == text and len(lines) == 300
    assert all(line[-1].endswith("\n") and not any(t.endswith("\n") for t in line[:-1]) for line, _ in lines)
    assert {visibility for _, visibility in lines} == {"auto"}
    last_of_first = browser.find_elements(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens > .line")[0] \
        .find_elements(By.CSS_SELECTOR, ".tok")[-1]
    js(browser, "arguments[0].focus(); arguments[0].dispatchEvent(new KeyboardEvent('keydown', "
                "{key: 'ArrowRight', bubbles: true}));", last_of_first)
    assert js(browser, "return document.activeElement.parentNode === "
                       "document.querySelectorAll(\"section[data-ref='en@1'] .tokens > .line\")[1] && "
                       "!document.activeElement.previousElementSibling;")
    js(browser, "document.activeElement.dispatchEvent(new KeyboardEvent('keydown', {key: 'End', bubbles: true}));")
    assert js(browser, "return document.activeElement.dataset.token") == tokens[-1]


def test_playground_compares_several_versions_of_any_names(server, browser, db):
    """Three versions side by side (two names): each pane the CLI's tokens, each further
    version's count against the first, all kept in the URL; one more added, one removed."""
    text = "I am Dracula; I could see there were men which came from the house. The naïve Count."
    refs = ["en@2", "en@1", "imp@1"]
    open_page(browser, f"{server}/playground?ref=en@2&compare=en@1&compare=imp@1&text={urllib.request.quote(text)}")
    wait(browser, lambda: all(pane_shows(browser, ref, text) for ref in refs))
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#comparison .delta")) == 2)
    tokens = {ref: cli_json(db, "encode", ref, text, "--tokens") for ref in refs}
    for ref in refs:
        assert [(s["id"], s["token"]) for s in spans_of(browser, ref)] == [(t["id"], t["token"]) for t in tokens[ref]]
    deltas = [d.get_attribute("data-delta") for d in browser.find_elements(By.CSS_SELECTOR, "#comparison .delta")]
    assert deltas == [str(len(tokens[ref]) - len(tokens["en@2"])) for ref in refs[1:]]
    assert js(browser, "return new URLSearchParams(location.search).getAll('compare');") == refs[1:]
    browser.find_element(By.ID, "add-ref").click()
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "section.pane")) == 4)
    added = js(browser, "return document.querySelectorAll('section.pane')[3].dataset.ref;")
    assert added not in refs and cli_json(db, "show", added)["status"] == "complete"
    wait(browser, lambda: pane_shows(browser, added, text))
    browser.find_element(By.CSS_SELECTOR, "#more-refs .more-ref:first-child .remove").click()  # imp@1's
    wait(browser, lambda: [s.get_attribute("data-ref") for s in browser.find_elements(By.CSS_SELECTOR, "section.pane")]
         == ["en@2", "en@1", added])
    assert js(browser, "return new URLSearchParams(location.search).getAll('compare');") == ["en@1", added]
    settled(browser)


def test_a_token_in_running_text_is_not_broken_across_lines(server, browser, db):
    """At 390 px, every token that fits on a line is drawn in one piece (" with" is not
    "·" then "with" on the next line); a run of 128 spaces wraps inside its own box."""
    browser.set_window_size(390, 844)
    try:
        text = "the castle with the count, with Harker and with </w> marks " * 12
        open_page(browser, f"{server}/playground?ref=en@1&text=" + urllib.parse.quote(text))
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens .tok"))
        settled(browser)
        pieces = js(browser, "return [...document.querySelectorAll(\"section[data-ref='en@1'] .tokens .tok\")]"
                             ".map((t) => [t.dataset.token, t.getClientRects().length]);")
        assert len(pieces) > 50 and [p for p in pieces if p[1] != 1] == []
        open_page(browser, f"{server}/playground?ref=long@1&text=" + "%20" * 300)
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='long@1'] .tokens .tok"))
        width = js(browser, "return [document.documentElement.scrollWidth, window.innerWidth];")
        assert width[0] <= width[1], width
    finally:
        browser.set_window_size(1440, 900)


def test_an_invisible_character_is_a_visible_token(server, browser, db):
    open_page(browser, f"{server}/playground?ref=long@1&text=a%E2%80%8Bb")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='long@1'] .tokens .tok"))
    settled(browser)
    expected = cli_json(db, "encode", "long@1", "a\u200bb", "--tokens")
    assert [t["token"] for t in expected] == ["a", "\u200b", "b"]
    zwsp = js(browser, "const t = [...document.querySelectorAll(\"section[data-ref='long@1'] .tokens .tok\")][1];"
                       "const c = t.querySelector('.ctl');"
                       "return [t.dataset.token, c && getComputedStyle(c, '::before').content,"
                       "        t.getBoundingClientRect().width];")
    assert zwsp[0] == "\u200b" and zwsp[1] == '"ZWSP"' and zwsp[2] > 10, zwsp


def test_playground_compares_two_versions(server, browser, db):
    text = "I am Dracula; I could see there were men which came from the house when she said so. The naïve Count."
    open_page(browser, f"{server}/playground?ref=en@2&compare=en@1&text={urllib.request.quote(text)}")
    wait(browser, lambda: pane_shows(browser, "en@2", text) and pane_shows(browser, "en@1", text))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#comparison .delta"))
    a, b = (cli_json(db, "encode", ref, text, "--tokens") for ref in ("en@2", "en@1"))
    delta = browser.find_element(By.CSS_SELECTOR, "#comparison .delta").get_attribute("data-delta")
    assert delta == str(len(b) - len(a))
    assert f"{len(b)} against {len(a)}" in browser.find_element(By.ID, "comparison").text

    def ends(tokens) -> list[tuple[int, int]]:
        places, at = [], 0
        for t in tokens:
            n = len(t["token"].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
                    if "\\x" in t["token"] else t["token"].encode())
            places.append((at, at + n))
            at += n
        return places

    differs = [place not in set(ends(b)) for place in ends(a)]  # no token of en@1 covers the same bytes
    assert [s["differs"] for s in spans_of(browser, "en@2")] == differs and any(differs)
    # The ids to copy, and the URL that gives this view again.
    ids = browser.find_element(By.CSS_SELECTOR, "section[data-ref='en@2'] details textarea").get_attribute("value")
    assert json.loads(ids) == [t["id"] for t in a]
    query = js(browser, "return Object.fromEntries(new URLSearchParams(location.search));")
    assert query == {"ref": "en@2", "compare": "en@1", "text": text}
    screenshot(browser, "playground", height=660)
    # The second pane follows the select; the markup of xss@1's tokens stays text.
    Select(browser.find_element(By.ID, "ref-b")).select_by_value("xss@1")
    wait(browser, lambda: pane_shows(browser, "xss@1", text))
    assert [(s["id"], s["token"]) for s in spans_of(browser, "xss@1")] == \
        [(t["id"], t["token"]) for t in cli_json(db, "encode", "xss@1", text, "--tokens")]
    settled(browser)
    # With nothing in the URL: the version aliased prod.
    open_page(browser, f"{server}/playground")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section.pane .tokens .tok"))
    assert browser.find_element(By.CSS_SELECTOR, "section.pane").get_attribute("data-ref") == \
        cli_json(db, "show", "en@prod")["ref"]
    settled(browser)


def table_rows(browser, selector: str) -> list[list[str]]:
    return js(browser, "return [...document.querySelectorAll(arguments[0] + ' tbody tr')].map((r) => "
                       "[...r.children].map((c) => { const t = c.querySelector('.tok');"
                       " return t ? t.dataset.token : c.textContent; }));", selector)


def test_version_page_lists_sorts_and_pages_tokens(server, browser, db, tmp_path):
    open_page(browser, f"{server}/version?ref=en@2")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".tokens-table tbody tr"))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#curve svg polyline"))
    settled(browser)
    screenshot(browser, "version", height=1400)
    show = cli_json(db, "show", "en@2")
    info = dict(js(browser, "return [...document.querySelectorAll('table.info tr')]"
                            ".map((r) => [r.cells[0].textContent, r.cells[1].textContent]);"))
    for key, value in show["spec"].items():  # every field of the spec
        shown = info[key.replace("_", " ")]
        assert shown == ("-" if value in (None, [], {}) else " ".join(value) if isinstance(value, list)
                         else str(value).lower() if isinstance(value, bool) else str(value)), key
    assert info["fingerprint"] == show["fingerprint"] and info["parent"] == "en@1"
    vocab = cli_json(db, "vocab", "en@2")
    by_rank = sorted((t for t in vocab if t["rank"] is not None), key=lambda t: (t["rank"], t["id"])) + \
        [t for t in vocab if t["rank"] is None]
    assert [r[0] for r in table_rows(browser, ".tokens-table")] == [str(t["id"]) for t in by_rank[:100]]
    browser.find_element(By.CSS_SELECTOR, "#tokens-section .pager .next").click()
    second = [str(t["id"]) for t in by_rank[100:200]]
    wait(browser, lambda: [r[0] for r in table_rows(browser, ".tokens-table")] == second)
    Select(browser.find_element(By.ID, "order")).select_by_value("longest")
    longest = sorted(vocab, key=lambda t: (-t["bytes"], t["id"]))[:100]
    wait(browser, lambda: [r[1] for r in table_rows(browser, ".tokens-table")] == [t["token"] for t in longest])
    Select(browser.find_element(By.ID, "search-kind")).select_by_value("prefix")
    browser.find_element(By.ID, "grep").send_keys(" th")
    prefixed = sorted(cli_json(db, "vocab", "en@2", "--prefix", " th"), key=lambda t: (-t["bytes"], t["id"]))
    wait(browser, lambda: [r[1] for r in table_rows(browser, ".tokens-table")] == [t["token"] for t in prefixed])
    Select(browser.find_element(By.ID, "search-kind")).select_by_value("grep")
    grep = browser.find_element(By.ID, "grep")
    grep.clear()
    grep.send_keys("ula$")
    found = sorted(cli_json(db, "vocab", "en@2", "--grep", "ula$"), key=lambda t: (-t["bytes"], t["id"]))
    wait(browser, lambda: [r[1] for r in table_rows(browser, ".tokens-table")] == [t["token"] for t in found])
    # Merges, paged with the CLI's ranks and pair counts.
    merges = cli_json(db, "merges", "en@2")
    wait(browser, lambda: len(table_rows(browser, ".merges-table")) == 100)
    rows = table_rows(browser, ".merges-table")
    assert [(r[0], r[4]) for r in rows] == [(f"{m['rank']:,}", f"{m['count']:,}") for m in merges[:100]]
    browser.find_element(By.CSS_SELECTOR, "#merges-section .pager .next").click()
    later = [f"{m['rank']:,}" for m in merges[100:]]
    wait(browser, lambda: [r[0] for r in table_rows(browser, ".merges-table")] == later)
    # The curve: the points the CLI's plot gives, with a text alternative; and on the reader's text.
    points = browser.find_element(By.CSS_SELECTOR, "#curve svg polyline").get_attribute("points").split()
    plot = cli_json(db, "plot", "en@2", "--file", str(HELD_OUT), "--points", "60")[0]
    assert len(points) == len(plot["curve"])
    label = browser.find_element(By.CSS_SELECTOR, "#curve svg").get_attribute("aria-label")
    assert f"to {plot['curve'][-1]['bytes_per_token']:.3f}" in label
    assert len(browser.find_elements(By.CSS_SELECTOR, "#curve figure tbody tr")) == len(plot["curve"])
    # The score card is filled on first load, on the held-out text (in no packaged sample).
    held_out = cli_json(db, "stats", "en@1", "en@2", "--file", str(HELD_OUT))
    assert [(r[0], r[1]) for r in table_rows(browser, ".score-card")] == \
        [(s["ref"], f"{s['tokens']:,}") for s in held_out]
    assert "Hard Times" in browser.find_element(By.ID, "score").text
    sample = "The Count smiled. Welcome to my house! " * 20
    browser.find_element(By.ID, "curve-text").send_keys(sample)
    browser.find_element(By.CSS_SELECTOR, "#curve-form label input[value='en@1']").click()  # overlay en@1
    browser.find_element(By.CSS_SELECTOR, "#curve-form button[type=submit]").click()
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#curve svg polyline")) == 2)
    assert "your text" in browser.find_element(By.ID, "curve").text
    # The legend is beside the chart, not drawn over its curves.
    assert [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#curve ul.legend li")] == ["en@2", "en@1"]
    assert not browser.find_elements(By.CSS_SELECTOR, "#curve svg line.line")
    # The score card: every complete version of the name on that text, as `stats` gives it.
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, ".score-card tbody tr")) == 2)
    (tmp_path / "eval.txt").write_text(sample, encoding="utf-8")
    stats = cli_json(db, "stats", "en@1", "en@2", "--file", str(tmp_path / "eval.txt"))
    assert [(r[0], r[1], r[3]) for r in table_rows(browser, ".score-card")] == \
        [(s["ref"], f"{s['tokens']:,}", f"{s['bytes_per_token']:.3f}") for s in stats]
    one, two = stats[0]["tokens"], stats[1]["tokens"]  # en@1 against this page's en@2
    assert table_rows(browser, ".score-card")[0][2] == f"{one - two:+,} ({(one / two - 1) * 100:.1f} %)"
    settled(browser)


def test_token_page_shows_the_merge_tree_and_explains(server, browser, db):
    open_page(browser, f"{server}/token?ref=en@1&token=%20the&text=Dracula%27s%20castle")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".merge-tree li"))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".explained .tok"))
    settled(browser)
    token = cli_json(db, "token", "en@1", " the")

    def tree(node) -> list:
        return [node["id"], [tree(p) for p in node.get("parts", [])]]

    shown = js(browser, "const walk = (li) => [Number(li.querySelector('.tok').dataset.id), "
                        "[...(li.querySelector(':scope > ul')?.children || [])].map(walk)];"
                        "return walk(document.querySelector('.merge-tree > li'));")
    assert shown == tree(token)
    explained = cli_json(db, "explain", "en@1", "Dracula's castle")
    chips = js(browser, "return [...document.querySelectorAll('.explained .tok')].map((s) => Number(s.dataset.id));")
    assert chips == explained["ids"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "details.word")) == len(explained["words"])
    screenshot(browser, "token")
    # By id: a token whose text is digits is still looked up as text unless "id" is chosen.
    by_id = cli_json(db, "token", "en@1", "--id", str(token["id"]))
    open_page(browser, f"{server}/token?ref=en@1&id={token['id']}")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".merge-tree li"))
    assert js(browser, "return document.querySelector('table.info .tok').dataset.token;") == by_id["token"] == " the"
    assert Select(browser.find_element(By.ID, "by")).first_selected_option.get_attribute("value") == "id"
    settled(browser)
    # The looked-up text as a token shows it: its leading space marked. A missing token
    # explains nothing it was not asked to, but how the version cuts the text looked up.
    open_page(browser, f"{server}/token?ref=en@1&token=%20the")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#token-shown .tok .ws.sp"))
    assert js(browser, "return document.querySelector('#token-shown .tok').dataset.token;") == " the"
    open_page(browser, f"{server}/token?ref=en@1&token=zzzzqq")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "[role=alert].error"))
    assert "Dracula" not in browser.find_element(By.TAG_NAME, "main").text
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".explained .tok"))
    chips = js(browser, "return [...document.querySelectorAll('.explained .tok')].map((s) => Number(s.dataset.id));")
    assert chips == cli_json(db, "explain", "en@1", "zzzzqq")["ids"]
    # An imported version's token has no pair count (the store's 0 is none).
    made = cli_json(db, "merges", "imp@1")[-1]
    assert cli_json(db, "token", "imp@1", "--id", str(made["token"]))["count"] == 0
    open_page(browser, f"{server}/token?ref=imp@1&id={made['token']}")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, ".merge-tree li")) > 1)
    assert "pair count" not in browser.find_element(By.TAG_NAME, "main").text


def ranked_texts(db: str, ref: str) -> dict[str, tuple[bool, int, int]]:
    """Each token's text of a version and its place in merge order (the rank of the merge
    that first made it; base tokens after, by id), from the CLI's vocab and merges."""
    first: dict[int, int] = {}
    for m in cli_json(db, "merges", ref):
        first.setdefault(m["token"], m["rank"])
    places: dict[str, tuple[bool, int, int]] = {}
    for t in cli_json(db, "vocab", ref):
        rank = first.get(t["id"])
        places.setdefault(t["token"], (rank is None, rank or 0, t["id"]))
    return places


def only_in(db: str, ref: str, other: str) -> list[str]:
    """The tokens of ``ref`` that ``other`` lacks, in merge order."""
    mine, theirs = ranked_texts(db, ref), ranked_texts(db, other)
    return sorted((t for t in mine if t not in theirs), key=mine.__getitem__)


def api_requests(browser) -> list[str]:
    return js(browser, "return performance.getEntriesByType('resource').map((r) => r.name)"
                       ".filter((n) => n.includes('/api/'));")


def test_diff_reads_like_a_review(server, browser, db):
    open_page(browser, f"{server}/diff?b=en@2")  # b alone: against its parent
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".new-merges tbody tr"))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".only-b .tok"))
    settled(browser)
    assert Select(browser.find_element(By.ID, "a")).first_selected_option.get_attribute("value") == "en@1"
    d = cli_json(db, "diff", "en@1", "en@2")
    assert browser.find_element(By.CSS_SELECTOR, "strong.shared").text == f"{d['shared_merges']:,}"
    text = browser.find_element(By.TAG_NAME, "main").text
    assert "null" not in text and "Same spec" in text and d["spec_changes"] == {}
    new = cli_json(db, "merges", "en@2", "--start", str(d["shared_merges"]))
    rows = table_rows(browser, ".new-merges")
    assert [(r[0], r[2], r[4]) for r in rows] == [(f"{m['rank']:,}", m["text"], f"{m['count']:,}") for m in new]
    only_b = js(browser, "return [...document.querySelectorAll('.only-b .tok')].map((s) => s.dataset.token);")
    assert only_b == only_in(db, "en@2", "en@1") and sorted(only_b) == sorted(d["only_b"])  # in merge order
    assert not browser.find_elements(By.CSS_SELECTOR, ".only-a .tok")
    # The score card of both, filled on first load on the held-out text; then on the reader's text.
    held_out = cli_json(db, "stats", "en@1", "en@2", "--file", str(HELD_OUT))
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#eval .score-card tbody tr")) == 2)
    assert [(r[0], r[1]) for r in table_rows(browser, "#eval .score-card")] == \
        [(s["ref"], f"{s['tokens']:,}") for s in held_out]
    sample = "I could see there were men which came from the house when she said so.\n" * 5
    js(browser, "document.getElementById('eval-text').value = arguments[0];", sample)
    browser.find_element(By.CSS_SELECTOR, "#eval-form button[type=submit]").click()
    counts = [len(cli_json(db, "encode", ref, sample, "--tokens")) for ref in ("en@1", "en@2")]
    wait(browser, lambda: [(r[0], r[1]) for r in table_rows(browser, "#eval .score-card")] ==
         [("en@1", f"{counts[0]:,}"), ("en@2", f"{counts[1]:,}")])
    rows = table_rows(browser, "#eval .score-card")
    assert rows[1][2] == f"{counts[1] - counts[0]:+,} ({(counts[1] / counts[0] - 1) * 100:.1f} %)"
    screenshot(browser, "diff")


def test_a_diff_of_unrelated_versions_is_one_request_with_every_section(server, browser, db):
    """en@1 (trained) against imp@1 (imported, unrelated): a loading state while it comes;
    then one diff_view request has drawn every section: merges only in each (as byte
    pairs, the CLI's merges compared), pair counts for the trained side only, each
    changed id with both sides' tokens, spec changes as values."""
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 400,
                                                                 "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        open_page(browser, f"{server}/diff?a=en@1&b=imp@1")
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#diff[aria-busy=true] [role=status]"))
        assert "Loading" in browser.find_element(By.ID, "diff").text
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                                     "downloadThroughput": -1, "uploadThroughput": -1})
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".changed-ids tbody tr"), timeout=30)
    settled(browser)
    requests = api_requests(browser)
    assert len(requests) <= 10 and sum("/api/diff_view" in r for r in requests) == 1, requests
    assert not any("/api/token" in r or "/api/merges" in r for r in requests), requests
    # Not one after another: the diff is asked beside the version list, the score card beside the diff.
    times = js(browser, "return Object.fromEntries(performance.getEntriesByType('resource')"
                        ".filter((r) => r.name.includes('/api/')).map((r) => [new URL(r.name).pathname, "
                        "[r.startTime, r.responseEnd]]));")
    assert times["/api/diff_view"][0] < times["/api/versions"][1], times
    assert times["/api/stats"][0] < times["/api/diff_view"][1], times
    merges = {ref: cli_json(db, "merges", ref) for ref in ("en@1", "imp@1")}
    pairs = {ref: {tuple(m["pair"]) for m in ms} for ref, ms in merges.items()}
    only_imp = [m for m in merges["imp@1"] if tuple(m["pair"]) not in pairs["en@1"]]
    only_en = [m for m in merges["en@1"] if tuple(m["pair"]) not in pairs["imp@1"]]
    assert only_imp and only_en
    heads = js(browser, "return ['.new-merges', '.removed-merges'].map((s) => "
                        "[...document.querySelectorAll(s + ' thead th')].map((h) => h.textContent));")
    rows = [table_rows(browser, ".new-merges"), table_rows(browser, ".removed-merges")]  # only in imp@1, only in en@1
    assert heads[0] == ["rank", "pair", "token", "id"]  # imported: no pair counts to show
    assert [(r[0], r[2]) for r in rows[0]] == [(f"{m['rank']:,}", m["text"]) for m in only_imp[:100]]
    assert heads[1][-1] == "pair count"
    assert [(r[0], r[2], r[4]) for r in rows[1]] == \
        [(f"{m['rank']:,}", m["text"], f"{m['count']:,}") for m in only_en[:100]]
    assert "pair count 0" not in browser.find_element(By.TAG_NAME, "main").text
    by_id = {ref: {t["id"]: t["token"] for t in cli_json(db, "vocab", ref)} for ref in ("en@1", "imp@1")}
    changed = sorted(i for i in by_id["en@1"].keys() & by_id["imp@1"].keys() if by_id["en@1"][i] != by_id["imp@1"][i])
    cells = js(browser, "return [...document.querySelectorAll('.changed-ids tbody tr')].map((r) => [r.dataset.id, "
                        "...[...r.querySelectorAll('.tok')].map((s) => s.dataset.token)]);")
    assert cells == [[str(i), by_id["en@1"][i], by_id["imp@1"][i]] for i in changed[:100]]
    assert browser.find_element(By.CSS_SELECTOR, "strong.changed").text == f"{len(changed):,}"
    d = cli_json(db, "diff", "en@1", "imp@1")
    changes = table_rows(browser, ".spec-changes")
    assert [r[0] for r in changes] == [k.replace("_", " ") for k in d["spec_changes"]]
    assert not any(c.startswith("[") or c.startswith("{") for r in changes for c in r[1:])  # no raw JSON
    assert "null" not in browser.find_element(By.TAG_NAME, "main").text


def test_tokens_only_in_one_are_ordered_searched_and_paged_in_the_url(server, browser, db):
    open_page(browser, f"{server}/diff?a=en@1&b=imp@1")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".only-a .tok"))
    settled(browser)
    expected = only_in(db, "en@1", "imp@1")
    assert len(expected) > 100
    shown = "return [...document.querySelectorAll('.only-a .tok')].map((s) => s.dataset.token);"
    assert js(browser, shown) == expected[:100]  # by rank: the first merges first
    pager = browser.find_element(By.CSS_SELECTOR, ".pager[aria-label='Tokens only in en@1']")
    assert f"of {len(expected):,}" in pager.text
    number = pager.find_element(By.CSS_SELECTOR, "input.page-number")
    number.clear()
    number.send_keys("2", Keys.ENTER)
    wait(browser, lambda: js(browser, shown) == expected[100:200])
    assert "at_only_a=100" in browser.current_url
    Select(browser.find_element(By.ID, "only-order")).select_by_value("bytes")
    d = cli_json(db, "diff", "en@1", "imp@1")
    d["only_a"] = sorted(d["only_a"])  # the CLI lists them in merge order
    wait(browser, lambda: js(browser, shown) == d["only_a"][:100])  # by bytes
    browser.find_element(By.ID, "only-q").send_keys("th")
    matching = [t for t in d["only_a"] if "th" in t.casefold()]
    wait(browser, lambda: js(browser, shown) == matching[:100])
    assert f"({len(matching):,} matching)" in browser.find_element(By.TAG_NAME, "main").text
    url = browser.current_url
    assert "order=bytes" in url and "q=th" in url
    open_page(browser, url)  # the URL brings back the same list
    wait(browser, lambda: js(browser, shown) == matching[:100])
    assert browser.find_element(By.ID, "only-q").get_attribute("value") == "th"
    settled(browser)


def test_an_imported_version_shows_no_training_facts(server, browser, db):
    open_page(browser, f"{server}/version?ref=imp@1")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".merges-table tbody tr"))
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".tokens-table tbody tr"))
    settled(browser)
    keys = js(browser, "return [...document.querySelectorAll('table.info tr')].map((r) => r.cells[0].textContent);")
    assert "source" in keys and not {"min frequency", "tie break", "target", "corpus digest"} & set(keys), keys
    for table_ in (".merges-table", ".tokens-table"):
        heads = js(browser, f"return [...document.querySelectorAll('{table_} thead th')].map((h) => h.textContent);")
        assert "pair count" not in heads, (table_, heads)
    # A trained one keeps them.
    open_page(browser, f"{server}/version?ref=en@1")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".merges-table tbody tr"))
    keys = js(browser, "return [...document.querySelectorAll('table.info tr')].map((r) => r.cells[0].textContent);")
    assert {"min frequency", "tie break", "target"} <= set(keys)
    # Merges page by number too, with the total.
    pager = browser.find_element(By.CSS_SELECTOR, "#merges-section .pager")
    n = cli_json(db, "show", "en@1")["n_merges"]
    assert f"of {n:,}" in pager.text


def test_corpus_pages(server, browser, db):
    open_page(browser, f"{server}/corpora")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "table.corpora tbody tr"))
    settled(browser)
    corpora = cli_json(db, "corpora")
    assert js(browser, "return [...document.querySelectorAll('table.corpora tbody tr')].map((r) => r.dataset.name);") \
        == [c["name"] for c in corpora]
    screenshot(browser, "corpora", height=500)
    open_page(browser, f"{server}/corpus?name=books")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "table.generations tbody tr"))
    settled(browser)
    log = cli_json(db, "corpus", "log", "books")
    rows = js(browser, "return [...document.querySelectorAll('table.generations tbody tr')].map((r) => "
                       "[r.dataset.generation, [...r.cells[8].querySelectorAll('a')].map((a) => a.textContent)]);")
    assert rows == [[str(g["generation"]), g["pinned_by"]] for g in reversed(log)]
    assert rows[-1][1] == ["en@1", "en@2"]  # books@1 is what they were trained on
    top = cli_json(db, "corpus", "show", "books", "--top", "30")["top_words"]
    assert js(browser, "return [...document.querySelectorAll('.top-words .tok')].map((s) => s.dataset.token);") \
        == [w["word"] for w in top]
    sources = cli_json(db, "corpus", "show", "books")["sources"]
    assert [r[5] for r in table_rows(browser, "table.sources")] == [s["sha256"][:12] for s in sources]
    browser.find_element(By.CSS_SELECTOR, ".controls button[type=submit]").click()
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".corpus-diff .diff-summary"))
    d = cli_json(db, "corpus", "diff", "books@1", "books@2")
    summary = browser.find_element(By.CSS_SELECTOR, ".corpus-diff .diff-summary").text
    assert summary.startswith(f"{d['new_words']:,} new words")
    new = js(browser, "return [...document.querySelectorAll('.corpus-diff table')[0].querySelectorAll('.tok')]"
                      ".map((s) => s.dataset.token);")
    assert new == [w["word"] for w in d["new"]]
    settled(browser)
    screenshot(browser, "corpus")


def test_edges_not_found_errors_favicon(server, browser):
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{server}/no/such/page", timeout=5)
    assert missing.value.code == 404 and missing.value.headers["content-type"].startswith("text/html")
    with urllib.request.urlopen(f"{server}/favicon.ico", timeout=5) as icon:
        assert icon.headers["content-type"] == "image/svg+xml" and b"<svg" in icon.read()
    open_page(browser, f"{server}/no/such/page")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "nav a"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Not found"
    assert "/no/such/page" in browser.find_element(By.ID, "path").text
    assert [e for e in console_errors(browser) if "404" not in e] == []  # the page's own status only
    for url, message in [("/version?ref=en@9", "en has no version 9"), ("/version", "Give a version"),
                         ("/corpus?name=nope", "nope"), ("/token?ref=en@1&token=zzzzqq", "is not a token"),
                         ("/diff?a=en@1&b=en@9", "en has no version 9")]:
        open_page(browser, server + url)
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "[role=alert].error"))
        assert message in browser.find_element(By.CSS_SELECTOR, "[role=alert].error").text, url
        assert "Loading…" not in browser.find_element(By.TAG_NAME, "main").text, url
        errors = console_errors(browser)
        assert all("the server responded with a status of 404" in e for e in errors), (url, errors)


def overlapping(browser) -> list[str]:
    """The tokens that paint past their table cell, and the table cells that overlap their row's others."""
    return js(browser, """
        const out = [];
        for (const tok of document.querySelectorAll('td .tok')) {
          const cell = tok.closest('td').getBoundingClientRect(), box = tok.getBoundingClientRect();
          if (!cell.width || !tok.offsetParent) continue;  // not drawn (a closed details)
          if (box.right > cell.right + 1 || box.left < cell.left - 1) out.push('token ' + tok.dataset.token);
        }
        for (const row of document.querySelectorAll('tr')) {
          const cells = [...row.cells].map((c) => c.getBoundingClientRect());
          for (let i = 1; i < cells.length; i++) {  // (a phone's stacked row wraps: a cell below is no overlap)
            const a = cells[i - 1], b = cells[i];
            if (b.left < a.right - 1 && a.left < b.right - 1 && b.top < a.bottom - 1 && a.top < b.bottom - 1) {
              out.push('cells of ' + row.textContent.slice(0, 20));
            }
          }
        }
        return out;""")


PAGES = ["/", "/corpora", "/corpus?name=books", "/corpus?name=books&a=1&b=2", "/version?ref=en@1&order=longest",
         "/playground?ref=en@1&compare=xss@1", "/version?ref=en@1",
         "/token?ref=en@1&token=%20the", "/diff?a=en@1&b=en@2", "/diff?a=en@1&b=long@1&order=longest",
         "/version?ref=long@1&order=longest", "/playground?ref=long@1&text=" + "%20" * 300,
         # runs of whitespace tokens (one space, one tab each) wrap too
         "/playground?ref=en@1&compare=long@1&text=a" + "%20" * 60 + "b",
         "/playground?ref=en@1&text=a" + "%09" * 40 + "b"]


def test_a_longest_match_version_asks_no_curve(browser, tmp_path):
    """A version that segments by longest match (SentencePiece-style) has no curve along
    merge ranks: its page says why in a muted note and makes no request that fails."""
    from bpestore import TokenizerSpec

    path = str(tmp_path / "lm.db")
    vocab, merges = long_tokens()
    with bpestore.open(path) as store:
        store.import_vocab("lm", vocab, merges, spec=TokenizerSpec(segmentation="longest-match"))
    process, base = serve(path)
    try:
        open_page(browser, f"{base}/version?ref=lm@1")
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#curve .note"))
        settled(browser)  # no console error: no request answered 400
        note = browser.find_element(By.CSS_SELECTOR, "#curve .note")
        assert "longest" in note.text and "muted" in note.get_attribute("class")
        assert not [r for r in api_requests(browser) if "/api/curve" in r]
    finally:
        process.terminate()
        process.wait(10)


def test_every_page_fits_a_phone_and_labels_its_controls(server, browser):
    browser.set_window_size(390, 844)
    try:
        for path in PAGES:
            open_page(browser, server + path)
            wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "nav"))
            settled(browser)
            time.sleep(0.2)
            width = js(browser, "return [document.documentElement.scrollWidth, window.innerWidth];")
            assert width[0] <= width[1], (path, width)
            unlabelled = js(browser, "return [...document.querySelectorAll('input, select, textarea')]"
                                     ".filter((c) => !c.labels.length && !c.getAttribute('aria-label'))"
                                     ".map((c) => c.outerHTML);")
            assert unlabelled == [], path
            assert js(browser, "return document.querySelectorAll('th:not([scope])').length") == 0, path
            assert overlapping(browser) == [], path
            # nor does a table scroll sideways in its own box (a wide one stacks its cells)
            wide = js(browser, "return [...document.querySelectorAll('.scroll')].filter((s) => s.offsetParent && "
                               "!s.closest('.chart, details') && "
                               "s.scrollWidth > s.clientWidth + 1).map((s) => s.querySelector('table').className);")
            assert wide == [], (path, wide)
            sizes = js(browser, "return [...document.querySelectorAll('svg.curve text')]"
                                ".map((t) => t.getBoundingClientRect().height);")
            assert all(h >= 10 for h in sizes), (path, sizes)  # chart labels stay readable
            if path.startswith("/playground"):
                screenshot(browser, "playground-390", width=390, height=844)
    finally:
        browser.set_window_size(1440, 900)


SHARED = ROOT.parent / "shared" / "corpora"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("BPESTORE_SCALE") != "full" or not (SHARED / "cl100k_base.tiktoken").exists(),
                    reason="BPESTORE_SCALE=full and the shared GPT-2 and cl100k files (a minute of importing)")
def test_gpt2_against_cl100k_in_one_request_on_a_phone(browser, tmp_path):
    """The diff of two real unrelated vocabularies (GPT-2 and cl100k, imported from their
    published files): every section from one request, the changed ids' bytes as the files
    give them, the totals of the files' own sets; at 390 px no sideways scroll and no cell
    painted over; the second visit complete within 1.0 s."""
    import base64

    path = str(tmp_path / "big.db")
    with bpestore.open(path) as store:
        store.import_gpt2("gpt2", vocab=SHARED / "gpt2_vocab.json", merges=SHARED / "gpt2_merges.txt")
        store.import_tiktoken("cl100k", SHARED / "cl100k_base.tiktoken", pattern="cl100k")
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    byte_of = {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(shifted)}
    gpt2 = {i: bytes(byte_of[c] for c in t) for t, i in json.loads((SHARED / "gpt2_vocab.json").read_text()).items()
            if t != "<|endoftext|>"}
    gpt2[50256] = b"<|endoftext|>"
    cl100k = {int(r): base64.b64decode(t) for t, r in
              (line.split() for line in (SHARED / "cl100k_base.tiktoken").read_text().splitlines() if line)}
    changed = sorted(i for i in gpt2.keys() & cl100k.keys() if gpt2[i] != cl100k[i])
    process, base = serve(path)
    browser.set_window_size(390, 844)
    try:
        open_page(browser, f"{base}/diff?a=gpt2@1&b=cl100k@1")
        wait(browser, lambda: js(browser, "return performance.getEntriesByName('bpestore:drawn').length"), timeout=60)
        took = js(browser, "return performance.getEntriesByName('bpestore:drawn')[0].startTime") / 1000
        print(f"GPT-2 vs cl100k complete in {took:.2f} s (first visit after the server started)")
        requests = api_requests(browser)
        assert len(requests) <= 10 and sum("/api/diff_view" in r for r in requests) == 1, requests
        heading = browser.find_element(By.CSS_SELECTOR, "strong.changed").text
        assert heading == f"{len(changed):,}"
        cells = js(browser, "return [...document.querySelectorAll('.changed-ids tbody tr')].map((r) => [r.dataset.id, "
                            "...[...r.querySelectorAll('.tok')].map((s) => s.dataset.token)]);")
        text = lambda b: b.decode("utf-8", "backslashreplace")  # noqa: E731 - token_text's rule
        assert cells == [[str(i), text(gpt2[i]), text(cl100k[i])] for i in changed[:100]]
        only_b = set(cl100k.values()) - set(gpt2.values())
        assert f"Tokens only in cl100k@1 ({len(only_b):,})" in browser.find_element(By.TAG_NAME, "main").text
        settled(browser)
        width = js(browser, "return [document.documentElement.scrollWidth, window.innerWidth];")
        assert width[0] <= width[1], width
        assert overlapping(browser) == []
        open_page(browser, f"{base}/diff?a=gpt2@1&b=cl100k@1")  # the server's answer kept now
        wait(browser, lambda: js(browser, "return performance.getEntriesByName('bpestore:drawn').length"))
        assert js(browser, "return performance.getEntriesByName('bpestore:drawn')[0].startTime") <= 1000
    finally:
        browser.set_window_size(1440, 900)
        process.terminate()
        process.wait(10)
