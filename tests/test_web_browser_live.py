"""The registry page while versions train, in Chromium (as tests/test_web_browser.py, whose
fixtures these are: a store, server and browser of this module's own, since these tests
add versions): a training run seen live, a dead one stalled, a stopped server."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

from .test_web import cli_json, kill_a_trainer  # noqa: E402
from .test_web_browser import (  # noqa: E402
    By,
    browser,
    console_errors,
    db,
    js,
    open_page,
    screenshot,
    serve,
    server,
    wait,
)

__all__ = ["browser", "db", "server"]  # fixtures


def test_a_training_run_shows_progress_live_and_keeps_focus(server, browser, db):
    """A training run in another process (slowed by its progress callback): the registry,
    polling, shows its merge count growing and the time left, then the version complete;
    the rows that did not change are the same elements, and keyboard focus stays."""
    script = ("import sys, time, bpestore\n"
              "with bpestore.open(sys.argv[1]) as store:\n"
              "    store.train('live', corpus='books@1', merges=300, checkpoint_every=15,\n"
              "                progress=lambda p: time.sleep(0.05))\n")
    open_page(browser, f"{server}/?poll=250&idle=300")
    n = len(cli_json(db, "versions"))
    wait(browser, lambda: len(browser.find_elements(By.CSS_SELECTOR, "#versions li.version")) == n)
    js(browser, "document.querySelector(\"li.version[data-ref='en@1']\").marked = 1;"
                "document.querySelector(\"li.version[data-ref='en@1'] a.ref\").focus();")
    trainer = subprocess.Popen([sys.executable, "-c", script, db])
    seen: list[int] = []
    lefts: list[str] = []
    try:
        def watch() -> bool:
            found = js(browser, "const li = document.querySelector(\"li.version[data-ref='live@1']\");"
                                "if (!li) return null;"
                                "const m = li.querySelector('.merges'), l = li.querySelector('.left');"
                                "return [li.dataset.status, m ? Number(m.dataset.merges) : null,"
                                "        l ? l.textContent : null];")
            if found and found[1] is not None and (not seen or seen[-1] != found[1]):
                seen.append(found[1])
                lefts.append(found[2])
                if len(seen) == 2:
                    screenshot(browser, "registry-training", height=700)
                    js(browser, "document.querySelector(\"li.version[data-ref='en@1'] a.ref\").focus();")
            return bool(found) and found[0] == "complete"
        wait(browser, watch, timeout=90)
    finally:
        assert trainer.wait(90) == 0
    assert len(seen) >= 3, seen  # several checkpoints seen while it trained
    # Growing by whole checkpoints (en@1's 144 merges on the same counts are copied first).
    assert seen == sorted(seen) and all(0 < n < 300 for n in seen), seen
    assert all((b - a) % 15 == 0 for a, b in zip(seen, seen[1:])), seen
    assert any(left and left.startswith("about ") and left.endswith(" left") for left in lefts), lefts
    li = browser.find_element(By.CSS_SELECTOR, "li.version[data-ref='live@1']")
    assert f"{256 + 300:,} tokens" in li.text and not li.find_elements(By.CSS_SELECTOR, ".progress")
    assert js(browser, "return document.querySelector(\"li.version[data-ref='en@1']\").marked") == 1
    assert js(browser, "return document.activeElement.textContent") == "en@1"
    wait(browser, lambda: js(browser, "return document.body.dataset.polling") == "idle")
    assert console_errors(browser) == []


def test_a_dead_training_is_stalled_and_a_lost_server_is_a_banner(db, browser):
    """A trainer that dies after some checkpoints leaves a version "training": the registry
    calls it stalled at once (no process holds its training lock), without a rate or a
    live run's bar, everywhere. When the server stops, the last data stays, under a banner."""
    kill_a_trainer(db, "books@1", 200)
    process, base = serve(db)
    try:
        open_page(browser, f"{base}/?poll=300&idle=300")  # the default stall time (60 s) not waited for
        stalled = "li.version[data-ref='dead@1'][data-status=stalled]"
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, stalled))
        li = browser.find_element(By.CSS_SELECTOR, "li.version[data-ref='dead@1']")
        assert "stalled" in li.find_element(By.CSS_SELECTOR, ".badge").text
        assert "no trainer is running" in li.text and "merges/s" not in li.text and " left" not in li.text
        assert "1 stalled" in browser.find_element(By.ID, "summary").text
        # Named with the command that really resumes it (`train --resume`), everywhere.
        row = js(browser, "const li = document.querySelector(\"li.version[data-ref='dead@1']\");"
                          "return [li.querySelector('code.resume').textContent, li.textContent,"
                          "        li.querySelector('.bar > div').className];")
        assert row[0] == "bpestore train --resume dead@1" and "bpestore resume" not in row[1]
        assert row[2] == "stalled"  # not a live run's orange bar
        wait(browser, lambda: "dead@1 trained on books@1 · stalled" in browser.find_element(By.ID, "timeline").text)
        open_page(browser, f"{base}/version?ref=dead@1&poll=300")
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#progress[data-status=stalled] code.resume"))
        assert browser.find_element(By.CSS_SELECTOR, "#info .badge.status").text == "stalled"
        shown = js(browser, "return document.querySelector('#progress code.resume').textContent;")
        assert shown == "bpestore train --resume dead@1"
        open_page(browser, f"{base}/diff?a=en@1&b=dead@1")
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, "#b option"))
        labels = js(browser, "return [...document.querySelectorAll('#b option')].map((o) => o.textContent);")
        assert "dead@1 [stalled]" in labels and not any("training" in label for label in labels), labels
        for page, select in (("playground?ref=en@1", "#ref-a"), ("playground?ref=en@1", "#ref-b"),
                             ("token?ref=en@1&token=the", "#ref")):
            open_page(browser, f"{base}/{page}")
            wait(browser, lambda: js(browser, "return [...document.querySelectorAll(arguments[0] + ' option')]"
                                              ".some((o) => o.value === 'dead@1')", select))  # noqa: B023
            labels = js(browser, "return [...document.querySelectorAll(arguments[0] + ' option')]"
                                 ".map((o) => o.textContent);", select)
            assert "dead@1 [stalled]" in labels and not any("training" in x for x in labels), (page, labels)
        # A resumed run finishes it (the command the page gives works).
        from click.testing import CliRunner

        from bpestore.cli import cli
        resumed = CliRunner().invoke(cli, ["--db", db, *shown.split()[1:], "--quiet"], catch_exceptions=False)
        assert resumed.exit_code == 0, resumed.output
        open_page(browser, f"{base}/?poll=300&idle=300")
        done = "li.version[data-ref='dead@1'][data-status=complete]"
        wait(browser, lambda: browser.find_elements(By.CSS_SELECTOR, done))
        process.terminate()
        process.wait(10)
        wait(browser, lambda: "Disconnected" in browser.find_element(By.ID, "banner").text)
        assert browser.find_elements(By.CSS_SELECTOR, "li.version[data-ref='en@1']")  # the last data stays
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


def test_a_training_versions_own_page_shows_its_progress_live(server, browser, db):
    """The version page of a version in training polls its progress (past the 400 merges the
    runs before trained on the same counts, which it copies): the merge count grows,
    with a rate and the time left; once complete the page shows it complete."""
    script = ("import sys, time, bpestore\n"
              "with bpestore.open(sys.argv[1]) as store:\n"
              "    store.train('page', corpus='books@1', merges=700, checkpoint_every=15,\n"
              "                progress=lambda p: time.sleep(0.05))\n")
    trainer = subprocess.Popen([sys.executable, "-c", script, db])
    seen: list[int] = []
    lefts: list[str] = []
    facts: list[str] = []  # the merges fact beside the progress
    try:
        wait(browser, lambda: any(v["ref"] == "page@1" for v in cli_json(db, "versions")), timeout=60)
        open_page(browser, f"{server}/version?ref=page@1&poll=250")

        def watch() -> bool:
            found = js(browser, "const m = document.querySelector('#progress .merges');"
                                "const l = document.querySelector('#progress .left');"
                                "return [m ? Number(m.dataset.merges) : null, l ? l.textContent : null,"
                                "        document.querySelector('#info .badge.status')?.textContent,"
                                "        [...document.querySelectorAll('#info table.info th')]"
                                "          .find((h) => h.textContent === 'merges')?.nextElementSibling.textContent];")
            if found[0] is not None and (not seen or seen[-1] != found[0]):
                seen.append(found[0])
                lefts.append(found[1])
                facts.append(found[3])
            return found[2] == "complete"
        wait(browser, watch, timeout=90)
    finally:
        assert trainer.wait(90) == 0
    assert len(seen) >= 2 and seen == sorted(seen), seen
    assert any(left and left.startswith("about ") and left.endswith(" left") for left in lefts), lefts
    assert len(set(facts)) >= 2 and all(f == f"{n:,}" for f, n in zip(facts, seen)), (facts, seen)
    assert not browser.find_elements(By.ID, "progress")
    assert console_errors(browser) == []
