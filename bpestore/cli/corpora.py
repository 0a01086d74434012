"""`ingest`, `corpora` and `corpus show|log|diff|compact`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .. import sample_path
from ..limits import MAX_WORKERS
from ..queries import shown_text, shown_token, token_text
from ..records import CorpusInfo, Source
from ..spec import ERROR_POLICIES
from .base import BpestoreGroup, Context
from .options import (
    ProgressLine,
    count_range,
    emit_json,
    emit_listing,
    json_option,
    options,
    quiet_option,
    text_options,
)

# How sources are read and counted: the same for ingest and count.
source_options = options(
    click.option("--glob", metavar="PATTERN", help="In directories, only files matching this (e.g. '*.txt')."),
    click.option("--jsonl-field", metavar="FIELD", help="Read sources as JSON Lines; count this field of each record."),
    text_options,
    click.option("--workers", type=count_range(1, MAX_WORKERS), help="Counting processes [default: one per core]."),
    click.option("--errors", type=click.Choice(ERROR_POLICIES), default="strict",
                 show_default=True, help="What to do with invalid UTF-8."),
)


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


@click.command()
@click.argument("corpus")
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option("--sample", is_flag=True,
              help="Count the sample text shipped with bpestore (Dracula, public domain) too.")
@source_options
@click.option("--force", is_flag=True, help="Count a source again even if its content is in the corpus.")
@click.option("--counts", is_flag=True,
              help="PATH... are counts files (bpestore count): add them as one generation.")
@json_option
@quiet_option
@click.pass_obj
def ingest(obj: Context, corpus: str, paths: tuple[str, ...], sample: bool, as_json: bool, quiet: bool,
           counts: bool, **options: Any) -> None:
    """Count the words of PATH... (files, directories, - for stdin) into CORPUS."""
    if counts:
        given = [f"--{k.replace('_', '-')}" for k, v in options.items()
                 if k not in ("force", "errors") and v is not None] + (["--sample"] if sample else [])
        if given or options["errors"] != "strict":
            raise click.UsageError(f"--counts takes the spec from the counts files: leave out "
                                   f"{', '.join(given) or '--errors'}")
    if sample:
        paths += (_shown_path(sample_path()),)
    if not paths:
        raise click.UsageError("give the PATH... to count, or --sample")
    started = time.monotonic()
    if counts:
        results = obj.store.ingest_counts(corpus, paths, force=options["force"],
                                          on_source=SourceLines(corpus, ProgressLine(False), not (as_json or quiet)))
    else:
        results = _ingest_paths(obj, corpus, paths, as_json, quiet, options)
    if as_json:
        emit_json([r.to_dict() for r in results])
    elif not quiet:
        n_distinct = obj.store.corpus(corpus).n_distinct if results else 0
        click.echo(ingest_summary(corpus, results, n_distinct, time.monotonic() - started))


def _ingest_paths(obj: Context, corpus: str, paths: tuple[str, ...], as_json: bool, quiet: bool,
                  options: dict[str, Any]) -> list[Source]:
    with ProgressLine(not quiet and not as_json) as progress:
        return obj.store.ingest(corpus, paths, on_source=SourceLines(corpus, progress, not (as_json or quiet)),
                                progress=progress, **options)


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--out", required=True, metavar="FILE", help="The counts file to write (Parquet).")
@source_options
@click.option("--force", is_flag=True, help="Replace FILE if it exists.")
@json_option
@quiet_option
def count(paths: tuple[str, ...], out: str, as_json: bool, quiet: bool, **options: Any) -> None:
    """Count the words of PATH... into a counts file, for bpestore ingest CORPUS --counts FILE."""
    from ..counts import count_files

    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        info = count_files(paths, out, progress=progress, **options)
    if as_json:
        emit_json(info.to_dict())
    elif not quiet:
        click.echo(f"{out}: {len(info.sources):,} source(s), {sum(s.size_bytes for s in info.sources):,} bytes, "
                   f"{info.n_words:,} words, {info.n_distinct:,} distinct in {time.monotonic() - started:.1f}s")


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (as a source is
    named and shown), else absolute."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@click.command("corpora")
@json_option
@click.pass_obj
def corpora_command(obj: Context, as_json: bool) -> None:
    """List corpora with their sources and word totals."""
    emit_listing(obj.store.corpora(), as_json, "no corpora yet: bpestore ingest CORPUS PATH...",
                 lambda c: f"{c.name}\t{c.n_sources} sources\t{c.size_bytes:,} bytes\t"
                           f"{c.n_words:,} words\t{c.n_distinct:,} distinct\t{c.spec.pretokenizer}")


@click.group("corpus", cls=BpestoreGroup)
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
@click.option("--top", type=count_range(0), default=20, show_default=True,
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
    click.echo(f"spec: {info.spec.display_json()}")
    click.echo("sources:")
    for s in sources:
        click.echo(f"  {s.source}  {s.size_bytes:,} bytes  {s.n_words:,} words  {s.n_distinct:,} distinct  "
                   f"sha256 {s.sha256[:12]}  {s.created_at:%Y-%m-%d %H:%M}  @{s.generation}")
    if words:
        click.echo(f"top {len(words)} words:")
        for rank, (word, count) in enumerate(words, start=1):
            click.echo(f"  {rank:>4}  {count:>12,}  {shown_token(word)}")
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
@click.option("--limit", type=count_range(0), default=20, show_default=True,
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
        shown = ", ".join(f"{shown_text(w['word'])} x{w['count']:,}" for w in d[part])
        click.echo(f"{part} words ({d[count]:,}): {shown}")
    click.echo(f"largest changes ({d['changed_words']:,} words changed):")
    for w in d["changed"]:
        click.echo(f"  {w['delta']:>+12,}  {w['from']:>12,} -> {w['to']:<12,}  {shown_text(w['word'])}")


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
