"""`usage` and `compare`: what versions make of corpus generations, from their word counts."""

from __future__ import annotations

import click

from ..queries import token_text
from .base import Context
from .options import count_range, emit_json, json_option


@click.command()
@click.argument("ref")
@click.option("--corpus", metavar="C[@N]", help="The corpus generation (default: the one REF was trained on).")
@click.option("--rare", type=count_range(1), default=10, show_default=True,
              help="Tokens emitted fewer than this many times are rare.")
@click.option("--limit", type=count_range(0), default=20, show_default=True, help="Tokens shown of each list.")
@json_option
@click.pass_obj
def usage(obj: Context, ref: str, corpus: str | None, rare: int, limit: int, as_json: bool) -> None:
    """How REF uses its tokens on a corpus: never emitted, unreachable, rare, tokens by script."""
    u = obj.store.token_usage(ref, corpus, rare=rare)
    if as_json:
        emit_json(u.to_dict())
        return
    tok = obj.store.tokenizer(ref)
    click.echo(f"{u.ref} on {u.corpus}: {u.tokens:,} tokens, {len(u.counts):,} ordinary tokens in the vocabulary")
    for label, ids in (("never emitted", u.never), ("unreachable", u.unreachable),
                       (f"rare (< {u.rare_below:,})", u.rare)):
        shown = " ".join(repr(token_text(tok.decode_single_token_bytes(i))) for i in ids[:limit])
        click.echo(f"{label}: {len(ids):,}{': ' + shown if shown else ''}{' ...' if len(ids) > limit else ''}")
    click.echo(f"{'script':<12}{'vocabulary':>12}{'tokens':>16}")
    for name, row in u.scripts.items():
        click.echo(f"{name:<12}{row['vocab']:>12,}{row['tokens']:>16,}")


@click.command()
@click.argument("ref_a")
@click.argument("ref_b")
@click.option("--corpus", "corpora", multiple=True, required=True, metavar="C[@N]",
              help="A corpus generation to compare on (repeatable).")
@click.option("--limit", type=count_range(0), default=10, show_default=True,
              help="The tokens whose counts moved most, per corpus.")
@json_option
@click.pass_obj
def compare(obj: Context, ref_a: str, ref_b: str, corpora: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Compare REF_A and REF_B on corpora: bytes per token, the tokens whose counts moved most."""
    found = obj.store.compare(ref_a, ref_b, corpora, limit=limit)
    if as_json:
        emit_json(found)
        return
    for c in found:
        a, b = c["a"], c["b"]
        click.echo(f"{c['corpus']}: bytes per token {a['bytes_per_token']:.3f} ({a['ref']}) -> "
                   f"{b['bytes_per_token']:.3f} ({b['ref']}), {c['bytes_per_token_change']:+.3f}; "
                   f"tokens {a['tokens']:,} -> {b['tokens']:,}")
        for m in c["moved"]:
            click.echo(f"  {m['token']!r}\t{m['a']:,} -> {m['b']:,}\t{m['change']:+,}")
