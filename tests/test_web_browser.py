"""The web view's pages in a real browser: Debian's Chromium, headless, driven by
Selenium through the system chromedriver (nothing downloads a browser). The server is
`bpestore serve` in a subprocess over a SQLite store; references come from the CLI.

``BPESTORE_SCREENSHOT=1`` makes the playground test save docs/playground.png.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
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
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

import bpestore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
from .test_web import XSS, build_store  # noqa: E402


def bpestore_cli(db: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpestore", "--db", db, *args], capture_output=True, text=True,
                          check=check, timeout=120)


def cli_json(db: str, *args: str):
    return json.loads(bpestore_cli(db, *args, "--json").stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("browser")
    path = str(tmp / "web.db")
    build_store(path, tmp)
    return path


@pytest.fixture(scope="module")
def server(db):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bpestore", "--db", db, "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/versions", timeout=2) as response:
                    assert response.status == 200
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"bpestore serve did not start: {process.stdout.read()}") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait(browser, condition, timeout: float = 20):
    """Until ``condition()`` is true; an element re-rendered while it was read is read again."""
    return WebDriverWait(browser, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition())


def test_versions_page_shows_the_lineage_tree(server, browser, db):
    browser.get(f"{server}/")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "li.version")) == 3)
    rows = {li.get_attribute("data-ref"): li for li in browser.find_elements(By.CSS_SELECTOR, "li.version")}
    assert set(rows) == {"en@1", "en@2", "xss@1"}
    # en@2 extends en@1: it is drawn inside en@1's branch.
    assert rows["en@1"].find_elements(By.CSS_SELECTOR, 'li.version[data-ref="en@2"]')
    expected = {v["ref"]: v for v in cli_json(db, "versions")}
    for ref, li in rows.items():
        v = expected[ref]
        text = li.find_element(By.CSS_SELECTOR, ".row").text
        assert li.get_attribute("data-status") == v["status"] == "complete"
        assert f"{v['vocab_size']:,} tokens" in text and v["fingerprint"][:12] in text
        assert f"{v['corpus']}@{v['corpus_generation']}" in text
    assert "en@prod" in rows["en@1"].find_element(By.CSS_SELECTOR, ".row").text
    assert not browser.find_elements(By.CSS_SELECTOR, ".progress")  # nothing is training


def spans_of(browser, ref: str) -> list[tuple[int, str, str]]:
    return browser.execute_script(
        "return [...document.querySelectorAll(`section[data-ref='${arguments[0]}'] .tokens span`)]"
        ".map((s) => [Number(s.dataset.id), s.textContent, s.title]);", ref)


def test_playground_spans_are_the_encode_tokens(server, browser, db):
    browser.get(f"{server}/playground?ref=en@1")
    area = browser.find_element(By.ID, "text")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "section[data-ref='en@1'] .tokens span"))
    area.clear()
    typed = f'I am Dracula; {XSS} <img src=x onerror="window.pwned=1"> héllo "quoted" 東京'
    area.send_keys(typed)
    section = "section[data-ref='en@1']"
    wait(browser, lambda: browser.find_element(By.CSS_SELECTOR, section).get_attribute("data-text") == typed)
    expected = cli_json(db, "encode", "en@1", typed, "--tokens")
    got = spans_of(browser, "en@1")
    assert [(i, t) for i, t, _ in got] == [(t["id"], t["token"]) for t in expected]
    assert all(title == f"id {i}" for i, _, title in got)
    # The markup in the text stayed text: no element was made from it, nothing ran.
    assert browser.execute_script("return document.querySelectorAll('main img, main script').length") == 0
    assert browser.execute_script("return window.pwned === undefined")
    stats = browser.find_element(By.CSS_SELECTOR, f"{section} .stats").text
    n_bytes = len(typed.encode())
    assert f"{len(expected)} tokens" in stats and f"{n_bytes / len(expected):.2f} bytes/token" in stats

    # It follows typing, and compares two versions side by side.
    area.send_keys(" and more")
    wait(browser, lambda: browser.find_element(By.CSS_SELECTOR, section).get_attribute("data-text")
         == typed + " and more")
    browser.find_element(By.ID, "compare").click()
    Select(browser.find_element(By.ID, "ref-b")).select_by_value("xss@1")
    wait(browser, lambda: (browser.find_elements(By.CSS_SELECTOR, "section[data-ref='xss@1']") and
                           browser.find_element(By.CSS_SELECTOR, "section[data-ref='xss@1']")
                           .get_attribute("data-text") == typed + " and more"))
    other = cli_json(db, "encode", "xss@1", typed + " and more", "--tokens")
    assert [(i, t) for i, t, _ in spans_of(browser, "xss@1")] == [(t["id"], t["token"]) for t in other]
    assert any("<script>" in t for _, t, _ in spans_of(browser, "xss@1"))
    if os.environ.get("BPESTORE_SCREENSHOT") == "1":
        area.clear()
        area.send_keys("I am Dracula; and I bid you welcome, Mr. Harker, to my house. <script>\"x\"</script>")
        wait(browser, lambda: browser.find_element(By.CSS_SELECTOR, "section[data-ref='xss@1']")
             .get_attribute("data-text") == area.get_attribute("value"))
        (ROOT / "docs").mkdir(exist_ok=True)
        browser.set_window_size(1100, 620)
        browser.save_screenshot(str(ROOT / "docs" / "playground.png"))
        browser.set_window_size(1280, 900)


def test_version_page_searches_tokens_and_draws_the_curve(server, browser, db):
    browser.get(f"{server}/version?ref=xss@1")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, ".tokens-table tr[data-id]"))
    cells = browser.execute_script("return [...document.querySelectorAll('.tokens-table td.text span')]"
                                   ".map((s) => s.textContent);")
    assert cells == [t["token"] for t in cli_json(db, "vocab", "xss@1")][:len(cells)]
    grep = browser.find_element(By.ID, "grep")
    grep.send_keys("script")
    expected = [str(t["id"]) for t in cli_json(db, "vocab", "xss@1", "--grep", "script")]
    wait(browser, lambda: browser.execute_script(
        "return [...document.querySelectorAll('.tokens-table tr[data-id]')].map((r) => r.dataset.id);") == expected)
    assert any("<script>" in t for t in browser.execute_script(
        "return [...document.querySelectorAll('.tokens-table td.text span')].map((s) => s.textContent);"))
    assert browser.execute_script("return document.querySelectorAll('main script').length") == 0
    merges = cli_json(db, "merges", "xss@1")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#merges tr")) == len(merges) + 1)
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#curve svg polyline"))
    points = browser.find_element(By.CSS_SELECTOR, "#curve svg polyline").get_attribute("points").split()
    assert len(points) == len(cli_json(db, "plot", "xss@1", "--file", str(bpestore.sample_path()),
                                       "--points", "60")[0]["curve"])


def test_diff_page(server, browser, db):
    browser.get(f"{server}/diff?a=en@1&b=en@2")
    wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "strong.shared"))
    d = cli_json(db, "diff", "en@1", "en@2")
    assert browser.find_element(By.CSS_SELECTOR, "strong.shared").text == f"{d['shared_merges']:,}"
    only_b = browser.execute_script("return [...document.querySelectorAll('.only-b .tok')].map((s) => s.textContent);")
    assert sorted(only_b) == sorted(d["only_b"]) and not browser.find_elements(By.CSS_SELECTOR, ".only-a .tok")


def test_a_training_run_shows_progress_live(server, browser, db):
    """A training run in another process (slowed by its progress callback): the versions
    page, polling, shows its merge count growing, then the version complete."""
    script = ("import sys, time, bpestore\n"
              "with bpestore.open(sys.argv[1]) as store:\n"
              "    store.train('live', corpus='books', merges=300, checkpoint_every=15,\n"
              "                progress=lambda p: time.sleep(0.05))\n")
    browser.get(f"{server}/?poll=250")
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "li.version")) == 3)
    trainer = subprocess.Popen([sys.executable, "-c", script, db])
    seen: list[int] = []
    try:
        def watch() -> bool:
            found = browser.execute_script(
                "const li = document.querySelector(\"li.version[data-ref='live@1']\");"
                "if (!li) return null;"
                "const m = li.querySelector('.merges');"
                "return [li.dataset.status, m ? Number(m.dataset.merges) : null];")
            if found and found[1] is not None and (not seen or seen[-1] != found[1]):
                seen.append(found[1])
            return bool(found) and found[0] == "complete"
        wait(browser, watch, timeout=90)
    finally:
        assert trainer.wait(90) == 0
    assert len(seen) >= 3, seen  # several checkpoints seen while it trained
    # Growing by whole checkpoints (en@1's 144 merges on the same counts are copied first).
    assert seen == sorted(seen) and all(0 < n < 300 for n in seen), seen
    assert all((b - a) % 15 == 0 for a, b in zip(seen, seen[1:])), seen
    li = browser.find_element(By.CSS_SELECTOR, "li.version[data-ref='live@1']")
    assert f"{256 + 300:,} tokens" in li.text and not li.find_elements(By.CSS_SELECTOR, ".progress")
