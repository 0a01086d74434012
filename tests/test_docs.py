"""The manual's pages (docs/*.md) run as tests, each in a temporary folder of its own.

What a page may hold, and how it runs:

- A ```console block is a shell session. Each line starting with `$ ` is a command (a line
  ending in `\\` goes on on the next); the lines after it, up to the next `$ `, are what it
  prints, compared with doctest's rules and ELLIPSIS (`...` stands for any text), with
  times (`in 0.3s`), dates (`2026-11-23 08:37`) and the temporary folder (shown as
  `/home/me`) aside. A command under which nothing is shown is not checked for output.
  A command must exit 0 unless what it shows holds an `Error:` line.
  A line of plain words (`bpestore ...`, `.venv/bin/bpestore ...`, `export NAME=VALUE`,
  `NAME=VALUE bpestore ...`) runs in this process through click's test runner; a line with
  shell syntax (`$`, `|`, `>`, `;`, `&&`, backquotes) or another program runs in bash, with
  this virtual environment's `bin` first on PATH.
- A ```python block runs with `exec`, or as a doctest where it holds `>>>` lines. The
  Python blocks of one page share their globals.
- `<!-- doc-test: skip REASON -->` on the line before a block: the block does not run, and
  the test of that block is reported skipped with REASON.
- Every page starts in an empty folder holding the quick start's store: `bpestore.db`
  (which `$BPESTORE_DB` names) with the corpus `books` (the packaged sample) and `en@1`
  (2,000 tokens), as the README's quick start leaves it.
- Blocks in other languages (```text, ```toml, ``` alone) are not run.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bpestore.cli import cli

ROOT = Path(__file__).resolve().parents[1]
# benchmarks-history.md is a record of past measurements, its commands run at old commits.
PAGES = sorted(page for page in (ROOT / "docs").glob("*.md") if page.name != "benchmarks-history.md")
SKIP = re.compile(r"<!-- doc-test: skip (.+?) -->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")
SHELL_SYNTAX = re.compile(r"[|&;<>`$]")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    skip: str | None


def blocks(page: Path) -> list[Block]:
    found, lines, index = [], page.read_text(encoding="utf-8").splitlines(), 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        skip = SKIP.match(lines[index - 1]) if index else None
        found.append(Block(page, index + 1, opening.group(1), "\n".join(lines[index + 1:end]) + "\n",
                           skip.group(1) if skip else None))
        index = end + 1
    return found


def runnable(block: Block) -> bool:
    return block.language in ("console", "python")


def steps(session: str) -> list[tuple[str, list[str]]]:
    """A console block's commands, each with the lines shown under it."""
    result: list[tuple[str, list[str]]] = []
    pending = ""
    for line in session.splitlines():
        if pending:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            result[-1][1].append(line)
            continue
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        result.append((pending.replace("\n", " "), []))
        pending = ""
    return result


def unquoted(command: str) -> str:
    return re.sub(r"'[^']*'", "''", command)


class Page:
    """One page's folder, environment and Python globals, as its blocks run in order."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.env = {"BPESTORE_DB": str(folder / "bpestore.db"), "COLUMNS": "200"}
        self.globals: dict[str, object] = {"__name__": "__docs__"}

    def normalize(self, text: str) -> str:
        text = text.replace(str(self.folder), "/home/me").replace(str(ROOT) + "/", "")
        text = re.sub(r" in \d+(\.\d+)?s\b", " in 0.0s", text)
        return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?", "2026-11-23 08:37", text)

    def run(self, command: str) -> tuple[int, str]:
        words = shlex.split(command, comments=True)
        if words and words[0] == "export" and not SHELL_SYNTAX.search(unquoted(command)):
            for assignment in words[1:]:
                name, value = assignment.split("=", 1)
                self.env[name] = value
            return 0, ""
        env = dict(self.env)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        if (words and words[0] in ("bpestore", ".venv/bin/bpestore")
                and not SHELL_SYNTAX.search(unquoted(command))):
            result = CliRunner(env=env).invoke(cli, words[1:], prog_name="bpestore")
            return result.exit_code, result.output
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        done = subprocess.run(["bash", "-c", command], cwd=self.folder, env={**os.environ, **self.env, "PATH": path},
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout + done.stderr

    def console(self, block: Block) -> None:
        for command, shown in steps(block.text):
            status, output = self.run(command)
            where = f"{block.page.name}:{block.line}: $ {command}"
            errors = any(line.startswith("Error:") for line in shown)
            assert status == 0 or errors, f"{where}\nexit {status}\n{output}"
            if shown:
                want, got = self.normalize("\n".join(shown) + "\n"), self.normalize(output)
                assert doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS), \
                    f"{where}\n--- shown ---\n{want}--- printed ---\n{got}"

    def python(self, block: Block) -> None:
        name = f"{block.page.name}:{block.line}"
        if ">>>" not in block.text:
            exec(compile(block.text, name, "exec"), self.globals)
            return
        test = doctest.DocTestParser().get_doctest(block.text, self.globals, name, str(block.page), block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        report: list[str] = []
        runner.run(test, out=report.append, clear_globs=False)
        self.globals.update(test.globs)  # a DocTest runs in a copy of the globals it is given
        assert runner.failures == 0, "".join(report)


@pytest.fixture(scope="module")
def quick_start_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("quick-start")
    runner = CliRunner(env={"BPESTORE_DB": str(folder / "bpestore.db")})
    quick_start = (["ingest", "books", "--sample", "--quiet"],
                   ["train", "en", "--corpus", "books", "--vocab-size", "2000"])
    for args in quick_start:
        result = runner.invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
    return folder


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_page_runs_as_shown(page, quick_start_store, tmp_path, monkeypatch):
    for store_file in quick_start_store.iterdir():
        shutil.copy(store_file, tmp_path / store_file.name)
    monkeypatch.chdir(tmp_path)
    state = Page(tmp_path)
    for name, value in state.env.items():
        monkeypatch.setenv(name, value)
    for block in blocks(page):
        if runnable(block) and not block.skip:
            getattr(state, block.language)(block)


SKIPPED = [block for page in PAGES for block in blocks(page) if runnable(block) and block.skip]


@pytest.mark.parametrize("block", SKIPPED, ids=lambda block: f"{block.page.name}:{block.line}")
def test_block_not_run(block):
    pytest.skip(f"{block.page.name}:{block.line}: {block.skip}")


def test_every_page_runs_something():
    """A page that shows commands or Python runs at least one of its blocks."""
    for page in PAGES:
        shown = [block for block in blocks(page) if runnable(block)]
        assert not shown or any(not block.skip for block in shown), page.name


def commands(group: click.Group, prefix: str = "bpestore") -> list[tuple[str, click.Command]]:
    context = click.Context(group)
    found = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix} {name}")
        else:
            found.append((f"{prefix} {name}", command))
    return found


def test_every_command_and_option_is_in_the_tables():
    """The README's command table names every command; docs/cli.md's names every option."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| `bpestore")]
    assert len(commands(cli)) >= 30  # the walk reaches the lazily loaded commands
    for name, command in commands(cli):
        assert f"| `{name}" in readme, name
        options = [option for param in command.params if isinstance(param, click.Option) for option in param.opts
                   if option.startswith("--") and option not in ("--json", "--quiet", "--help")]
        described = [row for row in rows if name in row]
        assert described, name
        for option in options:
            assert any(option in row for row in described), f"{name} {option}"
