"""The ``bpestore`` command line: each command is a thin call into the Python API.

One module per family of commands (``corpora``, ``training``, ``encoding``,
``versions``, ``queries``, ``charts``, ``exchange``, ``transfer``, ``web``); ``options`` holds
the option bundles they share and ``base`` the error handling. Commands are imported only when invoked, so
``bpestore --help`` and a query load neither the trainer nor the encoder.

To add a command: write it as a ``click.command`` (or ``click.group(cls=BpestoreGroup)``)
in one of those modules (or a new one), then list it in ``COMMANDS`` with the first
line of its docstring (``tests/test_cli.py`` checks the two agree).

A ``BpestoreError`` becomes one ``Error:`` line and exit status 1; the Python
argument names its message mentions (its ``params``) become the command's flags.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from .. import __version__
from .base import BpestoreGroup, Context, move_db_option, with_flags

# name: (module of this package, attribute, the first line of its help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("versions", "init", "Create the database, or upgrade its schema to this bpestore's."),
    "ingest": ("corpora", "ingest", "Count the words of PATH... (files, directories, - for stdin) into CORPUS."),
    "count": ("corpora", "count",
              "Count the words of PATH... into a counts file, for bpestore ingest CORPUS --counts FILE."),
    "corpora": ("corpora", "corpora_command", "List corpora with their sources and word totals."),
    "corpus": ("corpora", "corpus_group", "Look into one corpus."),
    "train": ("training", "train", "Train NAME@N from a corpus, or continue one with --resume NAME@N."),
    "verify": ("training", "verify",
               "Retrain REF from its corpus generation and settings and compare; exit 1 if the merges differ."),
    "encode": ("encoding", "encode",
               "Encode TEXT (or --file) with version REF; prints the ids, or writes them to --out."),
    "decode": ("encoding", "decode", "Decode token IDS (or --file) with version REF."),
    "versions": ("versions", "versions",
               "List versions (of NAME) with status, size, corpus, parent and creation time."),
    "show": ("versions", "show", "Everything about one version: spec, targets, digests, fingerprint."),
    "alias": ("versions", "alias", "Point NAME@ALIAS at version REF (e.g. bpestore alias en@3 prod)."),
    "token": ("versions", "token",
               'Look up TOKEN (its text, e.g. " the", or with --id an id) in REF: the merges that made it.'),
    "diff": ("versions", "diff", "What changed from REF_A to REF_B: shared merges, changed ids, tokens on each side."),
    "vocab": ("queries", "vocab", "List the tokens of REF: id, text, length, kind, and the merge that made each."),
    "merges": ("queries", "merges",
               "List the merges of REF in rank order: the pair, the token it made, the pair's count."),
    "explain": ("queries", "explain",
                "Show how REF encodes TEXT: each pre-token's merges, step by step, down to the ids."),
    "stats": ("queries", "stats",
              "Compare versions on a file or on corpora: bytes per token, tokens per word, unknown tokens, "
              "vocabulary used."),
    "usage": ("usage", "usage",
              "How REF uses its tokens on a corpus: never emitted, unreachable, rare, tokens by script."),
    "compare": ("usage", "compare",
                "Compare REF_A and REF_B on corpora: bytes per token, the tokens whose counts moved most."),
    "plot": ("charts", "plot",
             "Draw versions on a file: compression curve, merge counts by rank, token lengths."),
    "lineage": ("queries", "lineage",
                "Draw the versions of NAME as a tree: parents, extensions, aliases, corpus generations."),
    "rm": ("queries", "rm",
           "Remove version NAME@N (refused while extended or aliased, unless --force), or alias NAME@ALIAS."),
    "import": ("exchange", "import_group", "Import a tokenizer made elsewhere as a new version."),
    "export": ("exchange", "export", "Write version REF in another tokenizer's file format."),
    "copy": ("transfer", "copy",
             "Copy version REF (or the version a pack FILE holds) and its parents into another store."),
    "pack": ("transfer", "pack", "Write version REF and its parents as one file that copy, --db and open take."),
    "serve": ("web", "serve",
              "Serve a read-only web view of the store: versions, training progress, a token playground."),
}


class LazyGroup(BpestoreGroup):
    """A group whose commands are imported when invoked; ``--help`` lists them
    from ``COMMANDS`` without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, move_db_option(args))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        # Cut by length only (click's own cut stops at the first '.', which "e.g." holds).
        rows = [(name, line if len(line) <= limit else line[:limit - 3].rstrip() + "...")
                for name, (_, _, line) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--version: the version, and which cores training and ingestion use (compiled, or pure-Python and why)."""
    if not value or ctx.resilient_parsing:
        return
    from ..encoder.core_backend import encode_core
    from ..text import counting_core
    from ..trainer import merge_core

    click.echo(f"bpestore, version {__version__}\nmerge core: {merge_core()}\ncounting core: {counting_core()}\n"
               f"encode core: {encode_core()}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="BPESTORE_DB", metavar="PATH_OR_URL",
              help="SQLite path or SQLAlchemy URL [env: BPESTORE_DB; default: ./bpestore.db]")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version (and the merge core) and exit.")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Byte-pair-encoding tokenizers whose state lives in a database."""
    ctx.obj = Context(db, debug)
    ctx.obj.command = ctx.invoked_subcommand


def main() -> None:
    cli(prog_name="bpestore")


def __getattr__(name: str) -> Any:
    """``from bpestore.cli import train`` (a command, or ``ProgressLine``) keeps working."""
    for module in ("options", *sorted({m for m, _, _ in COMMANDS.values()})):
        namespace = importlib.import_module(f"{__name__}.{module}")
        if hasattr(namespace, name):
            return getattr(namespace, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "BpestoreGroup", "Context", "LazyGroup", "cli", "main", "with_flags"]
