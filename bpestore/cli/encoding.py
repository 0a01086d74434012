"""`encode` and `decode`."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from ..limits import MAX_WORKERS
from ..queries import shown_token, token_text
from ..spec import ERROR_POLICIES
from .base import Context
from .options import ProgressLine, count_range, dtype_option, emit_json, json_option, quiet_option

if TYPE_CHECKING:
    from ..encoder import Tokenizer

@contextmanager
def text_of(path: str, errors: str) -> Iterator[Iterable[str]]:
    """The decoded text of a file (``-``: stdin; .gz/.xz/.bz2 decompressed), in chunks."""
    from ..sources import TextReader, open_source

    stream = open_source(path)
    try:
        yield TextReader(stream, path, errors=errors)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def encode_to_file(tok: Tokenizer, path: str, out: str, workers: int, as_json: bool, quiet: bool,
                   force: bool, **options: Any) -> None:
    """`encode --file PATH --out OUT`: write the ids, then a summary."""
    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        result = tok.encode_file(path, out, workers=workers, progress=progress, force=force, **options)
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
            click.echo(f"{i}\t{shown_token(tok.decode_single_token_bytes(i))}")


@click.command()
@click.argument("ref")
@click.argument("text", required=False)
@click.option("--file", "path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Encode this file (- for stdin; .gz/.xz/.bz2 read as text) instead of TEXT.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Write the ids of --file as a flat little-endian binary file (numpy.memmap-able).")
@dtype_option
@click.option("--workers", type=count_range(1, MAX_WORKERS), default=1, show_default=True,
              help="Encode --file in this many threads (the compiled core) or processes (the Python encoder).")
@click.option("--errors", type=click.Choice(ERROR_POLICIES), default="strict",
              show_default=True, help="What to do with invalid UTF-8 in --file.")
@click.option("--tokens", "show_tokens", is_flag=True, help="Show each token beside its id.")
@click.option("--no-special", is_flag=True, help="Encode special tokens as ordinary text.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@json_option
@quiet_option
@click.pass_obj
def encode(obj: Context, ref: str, text: str | None, path: str | None, out: str | None,
           dtype: Literal["uint16", "uint32"] | None, workers: int, errors: str, show_tokens: bool,
           no_special: bool, force: bool, as_json: bool, quiet: bool) -> None:
    """Encode TEXT (or --file) with version REF; prints the ids, or writes them to --out."""
    if (text is None) == (path is None):
        raise click.UsageError("give TEXT or --file PATH (not both)")
    if out is not None and path is None:
        raise click.UsageError("--out writes the ids of --file PATH; give --file")
    if out is not None:
        from ..files import check_target

        check_target(Path(out), force=force)  # before any work (the file is written whole at the end)
    tok = obj.store.tokenizer(ref)
    specials: dict[str, Any] = ({"allowed_special": set(), "disallowed_special": ()} if no_special
                                else {"allowed_special": "all"})
    if text is not None:
        ids = tok.encode(text, **specials)
    else:
        assert path is not None  # TEXT or --file, as checked above
        if out is not None:
            encode_to_file(tok, path, out, workers, as_json, quiet, force, dtype=dtype, errors=errors, **specials)
            return
        with text_of(path, errors) as chunks:
            ids = list(tok.encode_iterable(chunks, workers=workers, **specials))
    emit_ids(tok, ids, show_tokens, as_json)


@click.command()
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
