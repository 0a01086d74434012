"""`init`, `versions`, `show`, `alias`, `token` and `diff`."""

from __future__ import annotations

from typing import Any

import click

from ..queries import shown_text
from ..records import VersionInfo
from .base import Context
from .options import count_range, emit_json, emit_listing, json_option


@click.command()
@click.pass_obj
def init(obj: Context) -> None:
    """Create the database, or upgrade its schema to this bpestore's."""
    click.echo(f"{obj.store.location}: schema revision {obj.store.schema_revision()}")


def version_line(v: VersionInfo) -> str:
    if v.status == "complete":
        size = f"{v.vocab_size:,} tokens"
    elif v.target_vocab_size is not None:
        size = f"{v.vocab_size:,}/{v.target_vocab_size:,} tokens"
    else:
        size = f"{v.vocab_size:,} tokens, {v.n_merges:,}/{v.target_merges or 0:,} merges"
    parts = [v.ref, v.status, size, f"corpus={v.inputs}",
             f"parent={v.parent or '-'}", f"tie-break={v.spec.tie_break}",
             v.created_at.strftime("%Y-%m-%d %H:%M")]
    if v.fingerprint:
        parts.append(f"fingerprint={v.fingerprint[:12]}")
    if v.aliases:
        parts.append("aliases=" + ",".join(v.aliases))
    if v.source != "trained":
        parts.append(f"imported ({v.source})")
    return "  ".join(parts)


@click.command()
@click.argument("name", required=False)
@json_option
@click.pass_obj
def versions(obj: Context, name: str | None, as_json: bool) -> None:
    """List versions (of NAME) with status, size, corpus, parent and creation time."""
    emit_listing(obj.store.versions(name), as_json,
                 "no versions yet: bpestore train NAME --corpus C --vocab-size N", version_line)


@click.command()
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
    click.echo(f"spec: {v.spec.display_json()}")
    click.echo(f"corpus: {v.inputs}   corpus digest: {v.corpus_digest or '-'}")
    click.echo(f"fingerprint: {v.fingerprint or '- (not complete)'}")


@click.command()
@click.argument("ref")
@click.argument("alias")
@click.pass_obj
def alias(obj: Context, ref: str, alias: str) -> None:
    """Point NAME@ALIAS at version REF (e.g. bpestore alias en@3 prod)."""
    v = obj.store.set_alias(ref, alias)
    click.echo(f"{v.name}@{alias} -> {v.ref}")


# queries over stored vocabularies
def _print_tree(node: dict[str, Any], depth: int = 0) -> None:
    made = f"  rank {node['rank']:,}, pair count {node['count']:,}" if "rank" in node else ""
    click.echo(f"{'  ' * depth}{node['id']}\t{shown_text(node['token'])}{made}")
    for part in node.get("parts", ()):
        _print_tree(part, depth + 1)


@click.command()
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


@click.command()
@click.argument("ref_a")
@click.argument("ref_b")
@click.option("--limit", type=count_range(0), default=20, show_default=True,
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
        shown = ", ".join(shown_text(t) for t in d[side][:limit])
        more = f" (+{len(d[side]) - limit:,} more)" if len(d[side]) > limit else ""
        click.echo(f"only in {ref} ({len(d[side]):,}): {shown}{more}")
