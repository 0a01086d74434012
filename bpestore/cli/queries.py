"""`vocab`, `merges`, `explain`, `stats`, `lineage` and `rm`: questions about stored
vocabularies, and removing versions and aliases."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import click

from ..queries import TOKEN_ORDERS, order_tokens, shown_text, shown_token
from ..records import CorpusStats, EncodingStats, Explanation, LineageNode, MergeInfo, TokenInfo, VersionInfo
from .base import Context
from .options import emit_json, emit_listing, json_option

GREP_SECONDS = 10.0  # the time a --grep may take over a whole vocabulary


def token_line(t: TokenInfo | CountedToken) -> str:
    if isinstance(t, CountedToken):
        return f"{token_line(t.token)}\tused {t.uses:,}"
    made = f"\trank {t.rank:,}, pair count {t.count:,}" if t.rank is not None else ""
    return f"{t.id}\t{shown_token(t.data)}\t{len(t.data)} bytes\t{t.kind}{made}"


@click.command()
@click.argument("ref")
@click.option("--grep", metavar="REGEX",
              help=r"Tokens whose text matches this Python regular expression (anywhere; a byte outside "
                   r"UTF-8 reads \xNN).")
@click.option("--prefix", metavar="TEXT", help="Tokens that start with TEXT.")
@click.option("--longest", type=click.IntRange(min=0), metavar="N",
              help="The N longest tokens (in bytes), longest first.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="At most N tokens.")
@click.option("--order", type=click.Choice([*TOKEN_ORDERS, "count"]),
              help="Sort: id, rank (of the merge that made each; base tokens last), newest (latest merge "
                   "first), longest, or count (on --corpus, most used first).")
@click.option("--start", type=click.IntRange(min=0), metavar="N",
              help="Skip the first N tokens (of this order: a page of --limit).")
@click.option("--corpus", metavar="C[@N]", help="Also each token's count on this corpus generation (from its "
                                                "word counts; ordinary tokens).")
@json_option
@click.pass_obj
def vocab(obj: Context, ref: str, grep: str | None, prefix: str | None, longest: int | None, limit: int | None,
          order: str | None, start: int | None, corpus: str | None, as_json: bool) -> None:
    """List the tokens of REF: id, text, length, kind, and the merge that made each."""
    if order == "count" and corpus is None:
        raise click.UsageError("--order count counts tokens on a corpus: give --corpus C")
    uses = None if corpus is None else dict(obj.store.token_usage(ref, corpus).counts)
    if order is None and start is None:
        tokens = obj.store.vocab(ref, grep=grep, prefix=prefix, longest=longest, limit=limit, timeout=GREP_SECONDS)
    elif longest is not None:
        raise click.UsageError("--longest is an order of its own: give --order longest instead")
    else:
        tokens = obj.store.vocab(ref, grep=grep, prefix=prefix, timeout=GREP_SECONDS)
        tokens = (sorted(tokens, key=lambda t: -(uses or {}).get(t.id, 0)) if order == "count"
                  else order_tokens(tokens, order or "id"))
        tokens = tokens[start or 0:None if limit is None else (start or 0) + limit]
    listed = tokens if uses is None else [CountedToken(t, uses.get(t.id, 0)) for t in tokens]
    emit_listing(listed, as_json, "no token matches", token_line)


class CountedToken(NamedTuple):
    """A token listed with its count on a corpus (``vocab --corpus``)."""

    token: TokenInfo
    uses: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.token.to_dict(), "uses": self.uses}


def merge_line(m: MergeInfo) -> str:
    left, right, made = (shown_token(b) for b in (m.left_bytes, m.right_bytes, m.left_bytes + m.right_bytes))
    return f"{m.rank}\t{left} + {right} -> {m.token} {made}\tpair count {m.count:,}"


@click.command()
@click.argument("ref")
@click.option("--start", type=click.IntRange(min=0), default=0, metavar="RANK", help="The first rank to list.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N", help="At most N merges.")
@json_option
@click.pass_obj
def merges(obj: Context, ref: str, start: int, limit: int | None, as_json: bool) -> None:
    """List the merges of REF in rank order: the pair, the token it made, the pair's count."""
    emit_listing(obj.store.merges(ref, start=start, limit=limit), as_json, "no merges there", merge_line)


def explanation_lines(e: Explanation) -> list[str]:
    def shown(ids: Sequence[int]) -> str:
        return " ".join(shown_token(e.tokens[i]) for i in ids)

    lines = []
    for w in e.words:
        if w.segmentation == "special":
            lines.append(f"{shown_text(w.text)}: special token {w.ids[0]}")
            continue
        lines.append(f"{shown_text(w.text)}: {shown(w.symbols)}")
        for u in w.unknown:
            lines.append(f"  unseen {shown_text(u.char)} -> {'the unknown token' if u.to == 'unk' else 'bytes'} "
                         f"{' '.join(map(str, u.ids))}")
        for s in w.steps:
            made = f"{shown([s.left])} + {shown([s.right])} -> {shown([s.token])} ({s.token})"
            lines.append(f"  rank {s.rank:,}: {made}: {shown(s.ids)}")
        if w.segmentation == "longest-match":
            lines.append(f"  longest match: {shown(w.ids)}")
        lines.append(f"  = {' '.join(map(str, w.ids))}")
    lines.append(f"ids: {' '.join(map(str, e.ids))}")
    return lines


@click.command()
@click.argument("ref")
@click.argument("text")
@json_option
@click.pass_obj
def explain(obj: Context, ref: str, text: str, as_json: bool) -> None:
    """Show how REF encodes TEXT: each pre-token's merges, step by step, down to the ids."""
    e = obj.store.explain(ref, text)
    if as_json:
        emit_json(e.to_dict())
    else:
        click.echo("\n".join(explanation_lines(e)))


STATS_ROWS: list[tuple[str, Callable[[Any], str]]] = [  # EncodingStats, CorpusStats
    ("tokens", lambda s: f"{s.tokens:,}"),
    ("bytes per token", lambda s: f"{s.bytes_per_token:.3f}"),
    ("tokens per word", lambda s: f"{s.tokens_per_word:.3f}"),
    ("unknown tokens", lambda s: "-" if s.unknown_share is None else f"{100 * s.unknown_share:.2f}%"),
    ("vocabulary used", lambda s: f"{100 * s.vocab_use:.1f}% of {s.vocab_size:,}"),
]


CORPUS_ROWS: list[tuple[str, Callable[[Any], str]]] = [
    ("words", lambda s: f"{s.words:,} ({s.distinct_words:,} distinct)"),
    *STATS_ROWS[:3],
    ("one-token words", lambda s: f"{100 * s.one_token_share:.1f}%"),
    *STATS_ROWS[3:],
]


@click.command()
@click.argument("refs", nargs=-1, required=True, metavar="REF...")
@click.option("--file", "path", type=click.Path(dir_okay=False),
              help="The text to encode (.gz/.xz/.bz2 read as text).")
@click.option("--corpus", "corpora", multiple=True, metavar="C[@N]",
              help="Instead of --file: a corpus generation, from its word counts (repeatable).")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True, help="Encoding processes.")
@json_option
@click.pass_obj
def stats(obj: Context, refs: tuple[str, ...], path: str | None, corpora: tuple[str, ...], workers: int,
          as_json: bool) -> None:
    """Compare versions on a file or on corpora: bytes per token, tokens per word, unknown tokens, vocabulary used."""
    if (path is None) == (not corpora):
        raise click.UsageError("give --file PATH or --corpus C (one of them)")
    results: Sequence[EncodingStats | CorpusStats]
    if path is None:
        results = obj.store.corpus_stats(refs, corpora)
    else:
        results = obj.store.stats(refs, path, workers=workers)
    if as_json:
        emit_json([s.to_dict() for s in results])
        return
    if path is not None:
        click.echo(f"{path}: {results[0].bytes:,} bytes, {results[0].words:,} words")
    heads = [f"{s.ref} on {s.corpus}" if isinstance(s, CorpusStats) else s.ref for s in results]
    table = [["", *heads]] + [[label, *map(cell, results)] for label, cell in (CORPUS_ROWS if corpora else STATS_ROWS)]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        click.echo("  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:]))]).rstrip())


def lineage_line(v: VersionInfo) -> str:
    parts = [v.ref, v.status, f"{v.vocab_size:,} tokens", f"corpus={v.inputs}"]
    if v.aliases:
        parts.append("aliases=" + ",".join(v.aliases))
    if v.source != "trained":
        parts.append(f"imported ({v.source})")
    return "  ".join(parts)


def tree_lines(node: LineageNode, lead: str = "", branch: str = "") -> list[str]:
    lines = [branch + lineage_line(node.version)]
    for i, child in enumerate(node.children):
        last = i == len(node.children) - 1
        lines += tree_lines(child, lead + ("    " if last else "│   "), lead + ("└── " if last else "├── "))
    return lines


@click.command()
@click.argument("name")
@json_option
@click.pass_obj
def lineage(obj: Context, name: str, as_json: bool) -> None:
    """Draw the versions of NAME as a tree: parents, extensions, aliases, corpus generations."""
    roots = obj.store.lineage(name)
    if as_json:
        emit_json([r.to_dict() for r in roots])
        return
    for root in roots:
        if root.version.parent:
            click.echo(f"(extends {root.version.parent})")
        click.echo("\n".join(tree_lines(root)))


@click.command()
@click.argument("ref")
@click.option("--force", is_flag=True, help="Also remove the versions extending it and the aliases pointing at it.")
@json_option
@click.pass_obj
def rm(obj: Context, ref: str, force: bool, as_json: bool) -> None:
    """Remove version NAME@N (refused while extended or aliased, unless --force), or alias NAME@ALIAS."""
    removed = obj.store.remove(ref, force=force)
    if as_json:
        emit_json(removed.to_dict())
        return
    if removed.versions:
        click.echo(f"removed {', '.join(removed.versions)}")
    if removed.aliases:
        click.echo(f"removed alias{'es' if len(removed.aliases) > 1 else ''} {', '.join(removed.aliases)}")
