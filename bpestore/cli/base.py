"""What every command shares, and nothing heavy: the store is opened (and
SQLAlchemy imported) only when a command first asks for it."""

from __future__ import annotations

import os
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import BpestoreError, BpestoreWarning, NotFoundError

if TYPE_CHECKING:
    from ..store import Store


# Commands that write to the database (the others only read it: run on a SQLite file
# that does not exist, they say so instead of creating an empty one).
WRITING_COMMANDS = frozenset({"init", "ingest", "train", "import", "alias", "rm", "corpus"})


class Context:
    """What every command shares: the database option and the lazily opened store."""

    def __init__(self, db: str | None, debug: bool) -> None:
        self.db = db
        self.debug = debug
        self.command: str | None = None  # the command invoked (set by the root group)
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            from ..store import Store

            if self.command is not None and self.command not in WRITING_COMMANDS:
                _refuse_missing_file(self.db)
            self._store = Store(self.db)
        return self._store


def _refuse_missing_file(db: str | None) -> None:
    """NotFoundError where ``db`` names a SQLite file that does not exist."""
    path = db or "bpestore.db"
    if path == ":memory:" or "://" in path or Path(path).expanduser().exists():
        return
    raise NotFoundError(f"no database at {path}; bpestore init creates one (or give --db PATH, or set "
                        "BPESTORE_DB)", params=("db",))


def _warning_printer(group: click.Group, ctx: click.Context) -> Callable[..., None]:
    """``warnings.showwarning`` for a group's command: one ``Warning:`` line, in its terms."""
    def show(message: Warning | str, *args: Any, **kwargs: Any) -> None:
        text = str(message)
        if isinstance(message, BpestoreWarning):
            name = ctx.invoked_subcommand
            text = with_flags(text, message.params, group.get_command(ctx, name) if name else None, ctx.command)
        click.echo(f"Warning: {text}", err=True)
    return show


def move_db_option(args: list[str]) -> list[str]:
    """``--db X`` given after the command (``bpestore versions --db s.db``) moved before it,
    where the group reads it; words after ``--`` are left alone.

    >>> move_db_option(["versions", "--db", "s.db", "--json"])
    ['--db', 's.db', 'versions', '--json']
    >>> move_db_option(["--db", "a.db", "encode", "en", "--", "--db=x"])
    ['--db', 'a.db', 'encode', 'en', '--', '--db=x']
    """
    end = args.index("--") if "--" in args else len(args)
    command = 0  # where the command's name is: after the group's own options
    while command < end and args[command].startswith("-"):
        command += 2 if args[command] == "--db" else 1
    for at in range(command + 1, end):
        arg = args[at]
        if arg == "--db" and at + 1 < end:
            return [arg, args[at + 1], *args[:at], *args[at + 2:]]
        if arg.startswith("--db="):
            return [arg, *args[:at], *args[at + 1:]]
    return args


class OneLineUsageError(click.UsageError):
    """A usage mistake shown as one ``Error:`` line with where to look, not
    click's usage block (exit status 2, as click's)."""

    def show(self, file: Any = None) -> None:
        hint = f" (see {self.ctx.command_path} --help)" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", err=True, file=file)


def _one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return exc  # converted already, or a bare group: its help is the answer
    message = " ".join(exc.format_message().split())
    return OneLineUsageError(message, exc.ctx)


class BpestoreGroup(click.Group):
    """Turns a user mistake into one ``Error:`` line: exit status 1, or 2 for a
    usage mistake (an option's value, a missing argument)."""

    group_class = type  # subgroups (corpus, import) catch their commands' errors alike

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("always", BpestoreWarning)
                warnings.showwarning = _warning_printer(self, ctx)
                result = super().invoke(ctx)
                if ctx.parent is None:
                    sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
                return result
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except BrokenPipeError:
            # The reader went away (| head): end quietly, as a process killed by SIGPIPE would.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(141)
        except (BpestoreError, OSError, UnicodeError) as exc:
            if ctx.obj is not None and ctx.obj.debug:
                raise
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, BpestoreError):
                command = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
                message = with_flags(message, exc.params, command, ctx.command)
            raise click.ClickException(message) from None


def with_flags(message: str, params: Sequence[str], *commands: click.Command | None) -> str:
    """A message in Python-API terms, in the command's terms: each of ``params``
    that is an option of one of ``commands`` becomes its flag (``vocab_size`` ->
    ``--vocab-size``, ``errors='replace'`` -> ``--errors replace``,
    ``byte_fallback=True`` -> ``--byte-fallback``); other names stay.

    >>> @click.command()
    ... @click.option("--vocab-size", type=int)
    ... @click.option("--errors")
    ... def train(vocab_size, errors): ...
    >>> with_flags("vocab_size must be at least 257; or pass errors='replace'",
    ...            ("vocab_size", "errors", "merges"), train)
    '--vocab-size must be at least 257; or pass --errors replace'
    """
    options = {p.name: p for command in commands if command for p in command.params
               if isinstance(p, click.Option)}
    for name in params:
        option = options.get(name)
        if option is None:
            continue
        flag = next((o for o in option.opts if o.startswith("--")), option.opts[0])
        # The name as a word of its own (not part of a path, a flag or another
        # name), with the value it is given, if any.
        pattern = rf"(?<![\w./\\-]){re.escape(name)}(?:=('[^']*'|\"[^\"]*\"|[^\s,;:)]+))?(?![\w/\\-]|\.\w)"
        message = re.sub(pattern, _flag_with_value(flag, option.is_flag), message)
    return message


def _flag_with_value(flag: str, is_flag: bool) -> Callable[[re.Match[str]], str]:
    """``name`` -> ``flag``, ``name=True`` -> ``flag`` (a flag option), ``name='x'`` -> ``flag x``."""
    def replace(match: re.Match[str]) -> str:
        value = match.group(1)
        if value is None or (is_flag and value == "True"):
            return flag
        if value[:1] in "'\"" and value[-1:] == value[:1]:
            value = value[1:-1]
        return f"{flag} {shlex.quote(value)}"
    return replace
