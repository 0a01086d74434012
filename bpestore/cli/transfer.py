"""`copy` and `pack`: versions that travel between stores."""

from __future__ import annotations

import click

from ..records import Copied
from .base import Context
from .options import emit_json, json_option


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
    from ..store import Store
    from ..store.packs import is_sqlite_file

    if is_sqlite_file(ref):  # a pack: somebody else's file, checked and only read
        with Store(ref, pack=True) as source:
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
