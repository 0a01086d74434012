"""`copy` and `pack`: versions that travel between stores."""

from __future__ import annotations

from pathlib import Path

import click

from ..records import Copied
from .base import Context
from .options import emit_json, json_option

_SQLITE_HEADER = b"SQLite format 3\x00"


def _is_store_file(ref: str) -> bool:
    """REF names a SQLite file (a pack) rather than a version."""
    path = Path(ref)
    try:
        with path.open("rb") as f:
            return f.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False


@click.command()
@click.argument("ref")
@click.option("--to", "to", required=True, metavar="PATH_OR_URL", help="The store to copy into (created if new).")
@click.option("--with-counts", is_flag=True,
              help="Copy the corpus generations the versions pin too, so verify and resume work there.")
@click.option("--as", "as_name", metavar="NAME", help="Copy under this tokenizer name.")
@click.option("--aliases", is_flag=True, help="Copy the versions' aliases too.")
@json_option
@click.pass_obj
def copy(obj: Context, ref: str, to: str, with_counts: bool, as_name: str | None, aliases: bool,
         as_json: bool) -> None:
    """Copy version REF (or the version a pack FILE holds) and its parents into another store."""
    if _is_store_file(ref):
        from ..store import Store

        with Store(ref) as source:
            result = source.copy(None, to, with_counts=with_counts, as_name=as_name, aliases=aliases)
    else:
        result = obj.store.copy(ref, to, with_counts=with_counts, as_name=as_name, aliases=aliases)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(_summary(result))


def _summary(r: Copied) -> str:
    if r.unchanged:
        return f"{r.ref} is already in {r.target} (same fingerprint): nothing copied"
    lines = [f"copied {', '.join(r.copied) or 'nothing new'} to {r.target}"
             + (f" ({', '.join(r.present)} already there)" if r.present else "")]
    if r.corpora:
        lines.append(f"with the counts of {', '.join(r.corpora)}")
    if r.aliases:
        lines.append(f"aliases: {', '.join(r.aliases)}")
    if r.without_counts:
        lines.append(f"without counts: {', '.join(r.without_counts)} (verify and resume need them: "
                     "copy with --with-counts)")
    return "\n".join(lines)


@click.command()
@click.argument("ref")
@click.option("--out", required=True, type=click.Path(dir_okay=False), metavar="FILE.bpestore",
              help="The file to write (a small SQLite store).")
@click.option("--with-counts", is_flag=True, help="Pack the corpus generations the versions pin too.")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@click.pass_obj
def pack(obj: Context, ref: str, out: str, with_counts: bool, force: bool) -> None:
    """Write version REF and its parents as one file that copy, --db and open take."""
    path = obj.store.pack(ref, out, with_counts=with_counts, force=force)
    click.echo(f"wrote {path} ({path.stat().st_size:,} bytes)")
