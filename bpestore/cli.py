"""The ``bpestore`` command line: each command is a thin call into the Python API.

Options shared by several commands are bundles of click options (``text_options``,
``training_options``, ``symbol_options``, ``json_option``). A ``BpestoreError``
becomes one ``Error:`` line and exit status 1; the Python argument names its
message mentions (its ``params``) become the command's flags (``with_flags``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from . import __version__
from .encoder import Tokenizer
from .errors import BpestoreError
from .formats import EXPORT_FORMATS
from .ingest import ERROR_POLICIES
from .queries import token_text
from .records import CorpusInfo, Progress, Source, VersionInfo
from .spec import ALPHABETS, PRETOKENIZERS, TIE_BREAKS
from .store import Store

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    """What every command shares: the database option and the lazily opened store."""

    def __init__(self, db: str | None, debug: bool) -> None:
        self.db = db
        self.debug = debug
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(self.db)
        return self._store


class BpestoreGroup(click.Group):
    """Turns a user mistake into one ``Error:`` line and exit status 1."""

    group_class = type  # subgroups (corpus, import) catch their commands' errors alike

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (BpestoreError, OSError, UnicodeError) as exc:
            if ctx.obj is not None and ctx.obj.debug:
                raise
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if isinstance(exc, BpestoreError):
                command = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
                message = with_flags(message, exc.params, command)
            raise click.ClickException(message) from None


def with_flags(message: str, params: Sequence[str], command: click.Command | None) -> str:
    """A message in Python-API terms, in the command's terms: each of ``params``
    that is an option of ``command`` becomes its flag (``vocab_size`` ->
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
    options = {p.name: p for p in command.params if isinstance(p, click.Option)} if command else {}
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


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, listed in the order --help shows them."""
    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return apply


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def emit_listing(items: Sequence[Any], as_json: bool, empty: str, line: Callable[[Any], str]) -> None:
    """A listing command's output: JSON, or a line per item (a hint when there is none)."""
    if as_json:
        emit_json([item.to_dict() for item in items])
        return
    if not items:
        click.echo(empty)
    for item in items:
        click.echo(line(item))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output.")
# No --special-token given: None (a corpus or a parent keeps its own).
special_option = click.option("--special-token", "special_tokens", multiple=True, metavar="TOK",
                              callback=lambda ctx, param, value: value or None,
                              help="A special token (repeat for several).")
dtype_option = click.option("--dtype", type=click.Choice(["uint16", "uint32"]),
                            help="Id file element type [default: uint16 where every id fits, else uint32].")
# How text becomes words: fixed by a corpus' first ingest.
text_options = options(
    click.option("--pretokenizer", type=click.Choice(PRETOKENIZERS),
                 help="How text is split into words [default: gpt2; fixed by a corpus' first ingest]"),
    click.option("--pattern", metavar="REGEX", help="A custom pre-tokenizer regex (implies --pretokenizer regex)."),
    click.option("--normalizer", metavar="STEPS",
                 help="Comma-separated: nfc, nfkc, lowercase, alphanumeric, ... [default: none]"),
    special_option,
)
# What a training run aims at and which pairs it may merge.
training_options = options(
    click.option("--vocab-size", type=click.IntRange(min=1), help="Target tokens: 256 bytes + specials + merges."),
    click.option("--merges", type=click.IntRange(min=0), help="Target number of merges (instead of --vocab-size)."),
    click.option("--min-frequency", type=click.IntRange(min=1), default=1, show_default=True,
                 help="Stop when no pair occurs this often."),
    click.option("--tie-break", type=click.Choice(TIE_BREAKS),
                 help="Rule among equal counts [default: lexicographic]."),
    special_option,
    click.option("--from", "parent", metavar="NAME@N", help="Extend this version (its ids stay valid)."),
    click.option("--max-token-length", type=click.IntRange(min=2), help="Longest token, in bytes."),
)
# How a word becomes its first symbols (alphabet.py).
symbol_options = options(
    click.option("--alphabet", type=click.Choice(ALPHABETS),
                 help="Initial tokens: the 256 bytes, or the characters of the corpus [default: bytes]."),
    click.option("--unk-token", metavar="TOK", help="With --alphabet chars: the token for unseen characters."),
    click.option("--byte-fallback", is_flag=True, default=None,
                 help="With --alphabet chars: unseen characters become their UTF-8 bytes."),
    click.option("--end-of-word", metavar="MARK", help="A symbol after every word, e.g. '</w>'."),
    click.option("--start-of-word", metavar="MARK", help="A symbol before every word, e.g. '▁'."),
    click.option("--no-inner-space", is_flag=True, default=None,
                 help="A merged token may hold a space only at its ends."),
)


@click.group(cls=BpestoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="BPESTORE_DB", metavar="PATH_OR_URL",
              help="SQLite path or SQLAlchemy URL [env: BPESTORE_DB; default: ./bpestore.db]")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(__version__, prog_name="bpestore")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Byte-pair-encoding tokenizers whose state lives in a database."""
    ctx.obj = Context(db, debug)


@cli.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create the database, or upgrade its schema to this bpestore's."""
    from .store.db import display_url, schema_revision

    store = obj.store
    click.echo(f"{display_url(store.url)}: schema revision {schema_revision(store.engine)}")


# ---------------------------------------------------------------------------
# progress on a terminal
# ---------------------------------------------------------------------------
class ProgressLine:
    """One self-rewriting line on a terminal (stderr) for any job's ``Progress``;
    silent when disabled or not on a terminal. Use it as a context manager."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.started = time.monotonic()
        self.first_done: int | None = None
        self.last_draw = 0.0
        self.width = 0

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self.first_done is None:  # a resumed job starts past zero
            self.first_done = p.done if p.unit == "merges" else 0
        if not self.enabled or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        rate = (p.done - self.first_done) / max(now - self.started, 1e-9)
        parts = [_amount(p.done, p.total, p.unit), f"{_amount(rate, None, p.unit)}/s"]
        if p.total:
            parts.insert(0, f"{100 * min(p.done / p.total, 1):3.0f}%")
            if rate > 0:
                left = int(max(p.total - p.done, 0) / rate)
                parts.append(f"ETA {left // 60}:{left % 60:02d}")
        if p.sources_total > 1:
            parts.append(f"file {min(p.sources_done + 1, p.sources_total)}/{p.sources_total} {p.name}")
        else:
            parts.append(p.name)
        if p.merge is not None:
            parts.append(f"{token_text(p.token)!r} x{p.merge.count:,}")
        if p.tokens:
            parts.append(f"{p.tokens:,} tokens")
        self.draw("  ".join(parts))

    def draw(self, line: str) -> None:
        line = line[:max(20, shutil.get_terminal_size().columns - 1)]
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


def _amount(n: float, total: int | None, unit: str) -> str:
    """``n`` (of ``total``) in the unit's words: MB for bytes, a count for merges."""
    if unit == "bytes":
        return f"{n / 1e6:,.1f}" + (f"/{total / 1e6:,.1f} MB" if total else " MB")
    return f"{n:,.0f}" + (f"/{total:,}" if total else "") + f" {unit}"


# ---------------------------------------------------------------------------
# ingest and corpora
# ---------------------------------------------------------------------------
class SourceLines:
    """What `ingest` prints per source: the first SHOWN sources each on a line, then
    a note (a directory's thousands of files get only the summary)."""

    SHOWN = 10

    def __init__(self, corpus: str, progress: ProgressLine, enabled: bool) -> None:
        self.corpus, self.progress, self.enabled = corpus, progress, enabled
        self.seen = 0

    def __call__(self, result: Source) -> None:
        self.seen += 1
        if not self.enabled or self.seen > self.SHOWN + 1:
            return
        self.progress.clear()
        if self.seen == self.SHOWN + 1:
            click.echo("... (the summary below counts every source)")
        elif result.skipped:
            click.echo(f"skipped {result.source}: already in {self.corpus} (use --force to count it again)")
        else:
            click.echo(f"{result.source}: {result.size_bytes:,} bytes, {result.n_words:,} words, "
                       f"{result.n_distinct:,} distinct")


def ingest_summary(corpus: str, results: Sequence[Source], n_distinct: int, seconds: float) -> str:
    counted = [r for r in results if not r.skipped]
    skipped = len(results) - len(counted)
    return (f"{corpus}: {len(counted):,} source(s) counted, {skipped:,} skipped"
            f"{' (already in the corpus; --force counts them again)' if skipped else ''}, "
            f"{sum(r.size_bytes for r in counted):,} bytes, "
            f"{sum(r.n_words for r in counted):,} words in {seconds:.1f}s; "
            f"{n_distinct:,} distinct words in the corpus")


@cli.command()
@click.argument("corpus")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--glob", metavar="PATTERN", help="In directories, only files matching this (e.g. '*.txt').")
@click.option("--jsonl-field", metavar="FIELD", help="Read sources as JSON Lines; count this field of each record.")
@text_options
@click.option("--workers", type=click.IntRange(min=1), help="Counting processes [default: one per core].")
@click.option("--force", is_flag=True, help="Count a source again even if its content is in the corpus.")
@click.option("--errors", type=click.Choice(ERROR_POLICIES), default="strict",
              show_default=True, help="What to do with invalid UTF-8.")
@json_option
@quiet_option
@click.pass_obj
def ingest(obj: Context, corpus: str, paths: tuple[str, ...], as_json: bool, quiet: bool, **options: Any) -> None:
    """Count the words of PATH... (files, directories, - for stdin) into CORPUS."""
    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        results = obj.store.ingest(corpus, paths, on_source=SourceLines(corpus, progress, not (as_json or quiet)),
                                   progress=progress, **options)
    if as_json:
        emit_json([r.to_dict() for r in results])
    elif not quiet:
        n_distinct = obj.store.corpus(corpus).n_distinct if results else 0
        click.echo(ingest_summary(corpus, results, n_distinct, time.monotonic() - started))


@cli.command("corpora")
@json_option
@click.pass_obj
def corpora_command(obj: Context, as_json: bool) -> None:
    """List corpora with their sources and word totals."""
    emit_listing(obj.store.corpora(), as_json, "no corpora yet: bpestore ingest CORPUS PATH...",
                 lambda c: f"{c.name}\t{c.n_sources} sources\t{c.size_bytes:,} bytes\t"
                           f"{c.n_words:,} words\t{c.n_distinct:,} distinct\t{c.spec.pretokenizer}")


@cli.group("corpus")
def corpus_group() -> None:
    """Look into one corpus."""


def generation_line(c: CorpusInfo) -> str:
    pins = f"  pinned by {','.join(c.pinned_by)}" if c.pinned_by else ""
    when = f"{c.generated_at:%Y-%m-%d %H:%M}" if c.generated_at else "-"
    return (f"{c.ref}\t{when}\t+{c.sources_added} sources ({c.n_sources} in all)\t{c.size_bytes:,} bytes\t"
            f"{c.n_words:,} words\t{c.n_distinct:,} distinct\tdigest {c.digest[:12]}\t"
            f"{'kept' if c.kept else 'not kept'}{pins}")


@corpus_group.command("show")
@click.argument("name", metavar="C[@N]")
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many of the most frequent words to list.")
@json_option
@click.pass_obj
def corpus_show(obj: Context, name: str, top: int, as_json: bool) -> None:
    """A corpus (as of generation N; default: the newest): spec, sources, totals, most frequent words."""
    info = obj.store.corpus(name)
    sources = obj.store.corpus_sources(name)
    words = obj.store.top_words(name, top) if top and info.kept else []
    if as_json:
        emit_json({**info.to_dict(), "sources": [s.to_dict() for s in sources],
                   "top_words": [{"word": token_text(w), "count": n} for w, n in words]})
        return
    click.echo(f"{info.name}: {info.n_sources:,} sources, {info.size_bytes:,} bytes, "
               f"{info.n_words:,} words, {info.n_distinct:,} distinct")
    click.echo(f"generation: {generation_line(info)}")
    click.echo(f"spec: {info.spec.to_json()}")
    click.echo("sources:")
    for s in sources:
        click.echo(f"  {s.source}  {s.size_bytes:,} bytes  {s.n_words:,} words  {s.n_distinct:,} distinct  "
                   f"sha256 {s.sha256[:12]}  {s.created_at:%Y-%m-%d %H:%M}  @{s.generation}")
    if words:
        click.echo(f"top {len(words)} words:")
        for rank, (word, count) in enumerate(words, start=1):
            click.echo(f"  {rank:>4}  {count:>12,}  {token_text(word)!r}")
    elif top and not info.kept:
        click.echo("word counts: not kept (only the newest generation and those a version was trained on are)")


@corpus_group.command("log")
@click.argument("name", metavar="C")
@json_option
@click.pass_obj
def corpus_log(obj: Context, name: str, as_json: bool) -> None:
    """The generations of corpus C, oldest first: sources, totals, digest, what pins them."""
    emit_listing(obj.store.corpus_log(name), as_json, f"{name} has no generation yet: bpestore ingest {name} PATH...",
                 generation_line)


@corpus_group.command("diff")
@click.argument("ref_a", metavar="C@A")
@click.argument("ref_b", metavar="C@B")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="Words to list in each part.")
@json_option
@click.pass_obj
def corpus_diff(obj: Context, ref_a: str, ref_b: str, limit: int, as_json: bool) -> None:
    """What changed from generation A to B: new and vanished words, the largest count changes."""
    d = obj.store.corpus_diff(ref_a, ref_b, limit=limit)
    if as_json:
        emit_json(d)
        return
    a, b = d["from"], d["to"]
    click.echo(f"{a['ref']} -> {b['ref']}: words {a['n_words']:,} -> {b['n_words']:,}, distinct "
               f"{a['n_distinct']:,} -> {b['n_distinct']:,}, sources {a['n_sources']:,} -> {b['n_sources']:,}")
    for part, count in (("new", "new_words"), ("vanished", "vanished_words")):
        shown = ", ".join(f"{w['word']!r} x{w['count']:,}" for w in d[part])
        click.echo(f"{part} words ({d[count]:,}): {shown}")
    click.echo(f"largest changes ({d['changed_words']:,} words changed):")
    for w in d["changed"]:
        click.echo(f"  {w['delta']:>+12,}  {w['from']:>12,} -> {w['to']:<12,}  {w['word']!r}")


@corpus_group.command("compact")
@click.argument("name", metavar="C")
@json_option
@click.pass_obj
def corpus_compact(obj: Context, name: str, as_json: bool) -> None:
    """Delete the word-count history of C that no version pins; says what it freed."""
    result = obj.store.compact(name)
    if as_json:
        emit_json(result)
        return
    kept = ", ".join(f"{name}@{g}" for g in result["kept"]) or "-"
    click.echo(f"{name}: freed {result['rows_freed']:,} history rows ({result['bytes_freed']:,} bytes); "
               f"counts kept for {kept}")


# ---------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------
def refuse_new_settings(ctx: click.Context, allowed: Sequence[str]) -> None:
    """A resumed run keeps the settings it began with: refuse any other option
    given on the command line."""
    given = [p.opts[0] for p in ctx.command.params
             if p.name is not None and p.name not in allowed
             and ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"--resume continues with the version's own settings; drop {', '.join(given)}")


@cli.command()
@click.argument("name", required=False)
@click.option("--corpus", metavar="C[@N]",
              help="The corpus whose word counts to train on (@N: its generation N; default: the newest).")
@training_options
@symbol_options
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Write merges to the database every K merges.")
@click.option("--resume", "resume_ref", metavar="NAME@N", help="Continue an unfinished version.")
@json_option
@quiet_option
@click.pass_context
def train(ctx: click.Context, name: str | None, corpus: str | None, checkpoint_every: int,
          resume_ref: str | None, as_json: bool, quiet: bool, **options: Any) -> None:
    """Train NAME@N from a corpus, or continue one with --resume NAME@N."""
    obj: Context = ctx.obj
    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        if resume_ref:
            refuse_new_settings(ctx, allowed=("resume_ref", "as_json", "quiet", "checkpoint_every"))
            info = obj.store.resume(resume_ref, checkpoint_every=checkpoint_every, progress=progress)
        elif name and corpus:
            info = obj.store.train(name, corpus=corpus, checkpoint_every=checkpoint_every, progress=progress,
                                   **options)
        else:
            raise click.UsageError("give NAME and --corpus (or --resume NAME@N)")
    if as_json:
        emit_json(info.to_dict())
    elif not quiet:
        click.echo(f"{info.ref}: {info.status}, {info.vocab_size:,} tokens, {info.n_merges:,} merges "
                   f"in {time.monotonic() - started:.1f}s")


# ---------------------------------------------------------------------------
# encode / decode
# ---------------------------------------------------------------------------
@contextmanager
def text_of(path: str, errors: str) -> Iterator[Iterable[str]]:
    """The decoded text of a file (``-``: stdin; .gz/.xz/.bz2 decompressed), in chunks."""
    from .ingest import TextReader, open_source

    stream = open_source(path)
    try:
        yield TextReader(stream, path, errors=errors)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def encode_to_file(tok: Tokenizer, path: str, out: str, workers: int, as_json: bool, quiet: bool,
                   **options: Any) -> None:
    """`encode --file PATH --out OUT`: write the ids, then a summary."""
    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        result = tok.encode_file(path, out, workers=workers, progress=progress, **options)
    seconds = time.monotonic() - started
    if as_json:
        emit_json({"out": result.path, "tokens": result.tokens, "bytes": result.bytes,
                   "bytes_per_token": round(result.bytes_per_token, 4), "dtype": result.dtype,
                   "seconds": round(seconds, 3), "workers": workers, "backend": tok.backend})
    elif not quiet:
        click.echo(f"{result.path}: {result.tokens:,} tokens ({result.dtype}) from {result.bytes:,} "
                   f"bytes, {result.bytes_per_token:.2f} bytes/token, in {seconds:.1f}s "
                   f"({result.bytes / max(seconds, 1e-9) / 1e6:.1f} MB/s, {tok.backend})")


def emit_ids(tok: Tokenizer, ids: list[int], show_tokens: bool, as_json: bool) -> None:
    if not show_tokens:
        click.echo(json.dumps(ids) if as_json else " ".join(map(str, ids)))
    elif as_json:
        emit_json([{"id": i, "token": token_text(tok.decode_single_token_bytes(i))} for i in ids])
    else:
        for i in ids:
            click.echo(f"{i}\t{token_text(tok.decode_single_token_bytes(i))!r}")


@cli.command()
@click.argument("ref")
@click.argument("text", required=False)
@click.option("--file", "path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Encode this file (- for stdin; .gz/.xz/.bz2 read as text) instead of TEXT.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write the ids of --file as a flat little-endian binary file (numpy.memmap-able).")
@dtype_option
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Encode --file in this many threads (tiktoken path) or processes.")
@click.option("--errors", type=click.Choice(ERROR_POLICIES), default="strict",
              show_default=True, help="What to do with invalid UTF-8 in --file.")
@click.option("--tokens", "show_tokens", is_flag=True, help="Show each token beside its id.")
@click.option("--no-special", is_flag=True, help="Encode special tokens as ordinary text.")
@json_option
@quiet_option
@click.pass_obj
def encode(obj: Context, ref: str, text: str | None, path: str | None, out: str | None,
           dtype: Literal["uint16", "uint32"] | None, workers: int, errors: str, show_tokens: bool,
           no_special: bool, as_json: bool, quiet: bool) -> None:
    """Encode TEXT (or --file) with version REF; prints the ids, or writes them to --out."""
    if (text is None) == (path is None):
        raise click.UsageError("give TEXT or --file PATH (not both)")
    if out is not None and path is None:
        raise click.UsageError("--out writes the ids of --file PATH; give --file")
    tok = obj.store.tokenizer(ref)
    specials: dict[str, Any] = ({"allowed_special": set(), "disallowed_special": ()} if no_special
                                else {"allowed_special": "all"})
    if text is not None:
        ids = tok.encode(text, **specials)
    else:
        assert path is not None  # TEXT or --file, as checked above
        if out is not None:
            encode_to_file(tok, path, out, workers, as_json, quiet, dtype=dtype, errors=errors, **specials)
            return
        with text_of(path, errors) as chunks:
            ids = list(tok.encode_iterable(chunks, workers=workers, **specials))
    emit_ids(tok, ids, show_tokens, as_json)


@cli.command()
@click.argument("ref")
@click.argument("ids", nargs=-1, type=int)
@click.option("--file", "path", type=click.Path(dir_okay=False),
              help="Decode a flat binary id file (as written by encode --out) instead of IDS.")
@dtype_option
@click.option("--errors", type=click.Choice(["replace", "strict"]), default="replace", show_default=True,
              help="Invalid UTF-8: U+FFFD, or an error.")
@json_option
@click.pass_obj
def decode(obj: Context, ref: str, ids: tuple[int, ...], path: str | None,
           dtype: Literal["uint16", "uint32"] | None, errors: str, as_json: bool) -> None:
    """Decode token IDS (or --file) with version REF."""
    if bool(ids) == (path is not None):
        raise click.UsageError("give IDS or --file PATH (not both)")
    tok = obj.store.tokenizer(ref)
    if path is None:
        text = tok.decode(ids, errors=errors)
        if as_json:
            emit_json({"text": text, "ids": list(ids)})
        else:
            click.echo(text)
        return
    pieces = tok.decode_file(path, dtype=dtype, errors=errors)
    if as_json:
        emit_json({"text": "".join(pieces)})
        return
    try:
        for piece in pieces:
            click.echo(piece, nl=False)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


# ---------------------------------------------------------------------------
# versions
# ---------------------------------------------------------------------------
def version_line(v: VersionInfo) -> str:
    target = v.target_vocab_size if v.target_vocab_size is not None else f"{v.target_merges} merges"
    parts = [v.ref, v.status, f"{v.vocab_size:,}/{target} tokens" if v.status != "complete"
             else f"{v.vocab_size:,} tokens", f"corpus={v.corpus_ref or '-'}",
             f"parent={v.parent or '-'}", f"tie-break={v.spec.tie_break}",
             v.created_at.strftime("%Y-%m-%d %H:%M")]
    if v.fingerprint:
        parts.append(f"fingerprint={v.fingerprint[:12]}")
    if v.aliases:
        parts.append("aliases=" + ",".join(v.aliases))
    if v.source != "trained":
        parts.append(f"imported ({v.source})")
    return "  ".join(parts)


@cli.command()
@click.argument("name", required=False)
@json_option
@click.pass_obj
def versions(obj: Context, name: str | None, as_json: bool) -> None:
    """List versions (of NAME) with status, size, corpus, parent and creation time."""
    emit_listing(obj.store.versions(name), as_json,
                 "no versions yet: bpestore train NAME --corpus C --vocab-size N", version_line)


@cli.command()
@click.argument("ref")
@json_option
@click.pass_obj
def show(obj: Context, ref: str, as_json: bool) -> None:
    """Everything about one version: spec, targets, digests, fingerprint."""
    v = obj.store.version(ref)
    if as_json:
        emit_json(v.to_dict())
        return
    click.echo(version_line(v))
    click.echo(f"merges: {v.n_merges:,}   min frequency: {v.min_frequency}   "
               f"max token length: {v.max_token_length or '-'}")
    click.echo(f"spec: {v.spec.to_json()}")
    click.echo(f"corpus: {v.corpus_ref or '-'}   corpus digest: {v.corpus_digest or '-'}")
    click.echo(f"fingerprint: {v.fingerprint or '- (not complete)'}")


@cli.command()
@click.argument("ref")
@json_option
@click.pass_obj
def verify(obj: Context, ref: str, as_json: bool) -> None:
    """Retrain REF from its corpus generation and settings and compare; exit 1 if the merges differ."""
    result = obj.store.verify(ref)
    if as_json:
        emit_json(result.to_dict())
    elif result.ok:
        click.echo(f"{result.ref}: ok, retraining gives the same merges (fingerprint {result.retrained[:12]})")
    else:
        d = result.first_difference or {}
        click.echo(f"{result.ref}: DIFFERENT at merge {d.get('rank')}: stored {d.get('stored')}, "
                   f"retrained {d.get('retrained')} (fingerprint {(result.fingerprint or '-')[:12]}, "
                   f"retrained {result.retrained[:12]})")
    if not result.ok:
        sys.exit(1)


@cli.command()
@click.argument("ref")
@click.argument("alias")
@click.pass_obj
def alias(obj: Context, ref: str, alias: str) -> None:
    """Point NAME@ALIAS at version REF (e.g. bpestore alias en@3 prod)."""
    v = obj.store.set_alias(ref, alias)
    click.echo(f"{v.name}@{alias} -> {v.ref}")


# ---------------------------------------------------------------------------
# import / export
# ---------------------------------------------------------------------------
@cli.group("import")
def import_group() -> None:
    """Import a tokenizer made elsewhere as a new version."""


@import_group.command("gpt2")
@click.argument("name")
@click.option("--vocab", required=True, type=click.Path(dir_okay=False), help="vocab.json")
@click.option("--merges", required=True, type=click.Path(dir_okay=False), help="merges.txt")
@json_option
@click.pass_obj
def import_gpt2(obj: Context, name: str, vocab: str, merges: str, as_json: bool) -> None:
    """Import GPT-2 style vocab.json + merges.txt as NAME@N."""
    info = obj.store.import_gpt2(name, vocab=vocab, merges=merges)
    if as_json:
        emit_json(info.to_dict())
    else:
        click.echo(f"{info.ref}: imported {info.vocab_size:,} tokens, {info.n_merges:,} merges")


@cli.command()
@click.argument("ref")
@click.option("--format", "format", type=click.Choice(EXPORT_FORMATS), required=True)
@click.option("--out", required=True, type=click.Path(), help="A folder (gpt2) or a file (hf, tiktoken).")
@click.pass_obj
def export(obj: Context, ref: str, format: str, out: str) -> None:
    """Write version REF in another tokenizer's file format."""
    for path in obj.store.export(ref, format=format, out=Path(out)):
        click.echo(f"wrote {path}")


# ---------------------------------------------------------------------------
# queries over stored vocabularies
# ---------------------------------------------------------------------------
def _print_tree(node: dict[str, Any], depth: int = 0) -> None:
    made = f"  rank {node['rank']:,}, pair count {node['count']:,}" if "rank" in node else ""
    click.echo(f"{'  ' * depth}{node['id']}\t{node['token']!r}{made}")
    for part in node.get("parts", ()):
        _print_tree(part, depth + 1)


@cli.command()
@click.argument("ref")
@click.argument("token")
@click.option("--id", "by_id", is_flag=True, help="TOKEN is an id, not text.")
@json_option
@click.pass_obj
def token(obj: Context, ref: str, token: str, by_id: bool, as_json: bool) -> None:
    """Look up TOKEN (its text, e.g. " the", or with --id an id) in REF: the merges that made it."""
    if by_id and not (token.isascii() and token.isdigit()):
        raise click.UsageError(f"--id takes a number, not {token!r}")
    info = obj.store.token(ref, int(token) if by_id else token)
    if as_json:
        emit_json(info)
    else:
        _print_tree(info)


@cli.command()
@click.argument("ref_a")
@click.argument("ref_b")
@click.option("--limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="Tokens to list on each side.")
@json_option
@click.pass_obj
def diff(obj: Context, ref_a: str, ref_b: str, limit: int, as_json: bool) -> None:
    """What changed from REF_A to REF_B: shared merges, changed ids, tokens on each side."""
    d = obj.store.diff(ref_a, ref_b)
    if as_json:
        emit_json(d)
        return
    click.echo(f"tokens: {d['vocab_size'][0]:,} -> {d['vocab_size'][1]:,}   merges: {d['merges'][0]:,} -> "
               f"{d['merges'][1]:,}   shared merge prefix: {d['shared_merges']:,}")
    click.echo(f"ids with other bytes: {len(d['changed_ids']):,}")
    for field_name, (old, new) in d["spec_changes"].items():
        click.echo(f"spec {field_name}: {old!r} -> {new!r}")
    for side, ref in (("only_a", ref_a), ("only_b", ref_b)):
        shown = ", ".join(repr(t) for t in d[side][:limit])
        more = f" (+{len(d[side]) - limit:,} more)" if len(d[side]) > limit else ""
        click.echo(f"only in {ref} ({len(d[side]):,}): {shown}{more}")


def main() -> None:
    cli(prog_name="bpestore")
