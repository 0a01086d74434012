"""`import gpt2|hf|tiktoken` and `export`."""

from __future__ import annotations

import click

from ..formats import EXPORT_FORMATS
from ..records import VersionInfo
from .base import BpestoreGroup, Context
from .options import emit_json, json_option


@click.group("import", cls=BpestoreGroup)
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
    _report(obj.store.import_gpt2(name, vocab=vocab, merges=merges), as_json)


def _report(info: VersionInfo, as_json: bool) -> None:
    if as_json:
        emit_json(info.to_dict())
    else:
        click.echo(f"{info.ref}: imported {info.vocab_size:,} tokens, {info.n_merges:,} merges")


@click.command()
@click.argument("ref")
@click.option("--format", "format", type=click.Choice(EXPORT_FORMATS), required=True)
@click.option("--out", required=True, type=click.Path(),
              help="A folder (gpt2), or a file (hf, tiktoken, sentencepiece). hf into a folder (one that exists, "
                   "or a path ending in /) writes the three files transformers' from_pretrained reads.")
@click.option("--force", is_flag=True, help="Replace files that exist.")
@click.pass_obj
def export(obj: Context, ref: str, format: str, out: str, force: bool) -> None:
    """Write version REF in another tokenizer's file format."""
    for path in obj.store.export(ref, format=format, out=out, force=force):
        click.echo(f"wrote {path}")


@import_group.command("hf")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@click.pass_obj
def import_hf(obj: Context, name: str, path: str, as_json: bool) -> None:
    """Import a Hugging Face tokenizer.json (a BPE model) as NAME@N."""
    _report(obj.store.import_hf(name, path), as_json)


@import_group.command("sentencepiece")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@click.pass_obj
def import_sentencepiece(obj: Context, name: str, path: str, as_json: bool) -> None:
    """Import a SentencePiece BPE model (.model) as NAME@N, with its ids."""
    _report(obj.store.import_sentencepiece(name, path), as_json)


@import_group.command("tiktoken")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--pattern", required=True, help="gpt2, cl100k, o200k or a regex: how text is pre-tokenized.")
@click.option("--special-token", "special_tokens", multiple=True, metavar="TOK=ID",
              help="A special token and its id (repeatable).")
@json_option
@click.pass_obj
def import_tiktoken(obj: Context, name: str, path: str, pattern: str, special_tokens: tuple[str, ...],
                    as_json: bool) -> None:
    """Import a tiktoken rank file as NAME@N (merges derived from the ranks)."""
    from ..formats.tiktoken_ranks import parse_special_tokens

    specials = parse_special_tokens(special_tokens)
    _report(obj.store.import_tiktoken(name, path, pattern=pattern, special_tokens=specials), as_json)
