"""`train` (new, extended or resumed versions) and `verify`."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from .base import Context

if TYPE_CHECKING:
    from ..records import VersionInfo
from .options import (
    ProgressLine,
    count_range,
    emit_json,
    json_option,
    quiet_option,
    symbol_options,
    training_options,
)


def refuse_new_settings(ctx: click.Context, allowed: Sequence[str]) -> None:
    """A resumed run keeps the settings it began with: refuse any other option
    given on the command line."""
    given = [p.opts[0] for p in ctx.command.params
             if p.name is not None and p.name not in allowed
             and ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"--resume continues with the version's own settings; drop {', '.join(given)}")


@click.command()
@click.argument("name", required=False)
@click.option("--corpus", multiple=True, metavar="C[@N]",
              help="The corpus whose word counts to train on (@N: its generation N; default: the newest); "
                   "repeated: a mixture of corpora (see --weight).")
@click.option("--weight", "weights", multiple=True, type=count_range(1), metavar="W",
              help="With several --corpus, one each, in order: each corpus' counts times W (default 1 each).")
@training_options
@symbol_options
@click.option("--checkpoint-every", type=count_range(1), default=1000, show_default=True,
              help="Write merges to the database every K merges.")
@click.option("--resume", "resume_ref", metavar="NAME@N", help="Continue an unfinished version.")
@json_option
@quiet_option
@click.pass_context
def train(ctx: click.Context, name: str | None, corpus: tuple[str, ...], weights: tuple[int, ...],
          checkpoint_every: int, resume_ref: str | None, as_json: bool, quiet: bool, **options: Any) -> None:
    """Train NAME@N from a corpus, or continue one with --resume NAME@N."""
    obj: Context = ctx.obj
    started = time.monotonic()
    with ProgressLine(not quiet and not as_json) as progress:
        if resume_ref:
            refuse_new_settings(ctx, allowed=("resume_ref", "as_json", "quiet", "checkpoint_every"))
            info = obj.store.resume(resume_ref, checkpoint_every=checkpoint_every, progress=progress)
        elif name and corpus:
            info = obj.store.train(name, corpus=corpus[0] if len(corpus) == 1 else corpus, progress=progress,
                                   weights=weights or None, checkpoint_every=checkpoint_every, **options)
        else:
            raise click.UsageError("give NAME and --corpus (or --resume NAME@N)")
    if as_json:
        emit_json(info.to_dict())
    elif not quiet:
        click.echo(f"{info.ref}: {info.status}, {info.vocab_size:,} tokens, {info.n_merges:,} merges "
                   f"in {time.monotonic() - started:.1f}s")
        for note in training_notes(obj, info):
            click.echo(note)


def training_notes(obj: Context, info: VersionInfo) -> list[str]:
    """Why a complete version stopped short of its target; which versions it equals."""
    notes = []
    target, made, unit = ((info.target_vocab_size, info.vocab_size, "tokens") if info.target_vocab_size is not None
                          else (info.target_merges, info.n_merges, "merges"))
    if info.status == "complete" and target is not None and made < target:
        at_least = f" at least {info.min_frequency:,} times" if info.min_frequency > 1 else ""
        longest = (f" without making a token over {info.max_token_length} bytes" if info.max_token_length
                   else "")
        notes.append(f"target of {target:,} {unit} not reached: no pair of adjacent tokens occurs{at_least} in "
                     f"the corpus' words any more{longest} (the corpus is too small for this target)")
    if info.fingerprint is not None:
        same = [v.ref for v in obj.store.versions() if v.fingerprint == info.fingerprint and v.id != info.id]
        if same:
            notes.append(f"equal to {', '.join(same)} (the same spec, corpus and merges: the same fingerprint)"
                         + ("; an identical run makes a new version from the earlier one's merges, without "
                            "training again" if info.parent is None else ""))
    return notes


@click.command()
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
