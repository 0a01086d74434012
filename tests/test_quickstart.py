"""The README's quick start: its bpestore steps, run as the README shows them, print
what the README shows (times aside). Needs nothing beside the repository: the corpus
is the sample text shipped in the package."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from bpestore.cli import cli

ROOT = Path(__file__).resolve().parents[1]
BIN = ".venv/bin/bpestore"


def quick_start() -> tuple[list[list[str]], list[str]]:
    """The bpestore command lines of the README's quick start (its console blocks that
    run bpestore, in order; the first sets up with pip), and the output they show."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start"):]
    section = section[:section.index("\n## ")]
    commands, shown = [], []
    for block in re.findall(r"```console\n(.*?)```", section, flags=re.S):
        steps = [shlex.split(step) for line in block.splitlines() if line.startswith("$ ")
                 for step in line[2:].split(" && ")]
        if not any(step[0] == BIN for step in steps):
            continue  # running the tests, linting
        assert all(step[0] in ("python3", ".venv/bin/pip", BIN) for step in steps), block
        commands += [step[1:] for step in steps if step[0] == BIN]
        shown += [line for line in block.splitlines() if not line.startswith("$ ")]
    assert commands[:3] == [["ingest", "books", "--sample"], ["train", "en", "--corpus", "books", "--vocab-size",
                                                                 "2000"], ["encode", "en", commands[2][2], "--tokens"]]
    return commands, shown


def timeless(lines: list[str]) -> list[str]:
    return [re.sub(r" in \d+\.\ds", " in 0.0s", line) for line in lines]


def test_readme_quick_start_prints_what_the_readme_shows(tmp_path, monkeypatch):
    commands, shown = quick_start()
    monkeypatch.chdir(ROOT)  # the README runs from the repository root, where ./bpestore.db goes
    runner = CliRunner(env={"BPESTORE_DB": str(tmp_path / "bpestore.db")})
    output = []
    for args in commands:
        result = runner.invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        output += result.stdout.splitlines()
    assert timeless(output) == timeless(shown)
