"""`plot`: pictures of versions on a text (matplotlib, the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path

import click

from .base import Context
from .options import emit_json, json_option


@click.command()
@click.argument("refs", nargs=-1, required=True, metavar="REF...")
@click.option("--file", "path", required=True, type=click.Path(dir_okay=False),
              help="The text to measure (.gz/.xz/.bz2 read as text).")
@click.option("--out", metavar="chart.png|chart.svg", help="The picture to write (PNG or SVG, by its name).")
@click.option("--points", type=click.IntRange(2, 100_000), default=50, show_default=True,
              help="Points of each compression curve, evenly spaced along the merge ranks.")
@click.option("--force", is_flag=True, help="Replace --out if it exists.")
@json_option
@click.pass_obj
def plot(obj: Context, refs: tuple[str, ...], path: str, out: str | None, points: int, force: bool,
         as_json: bool) -> None:
    """Draw versions on a file: compression curve, merge counts by rank, token lengths."""
    if out is None and not as_json:
        raise click.UsageError("give --out chart.png (or .svg), or --json for the numbers")
    if out is not None:
        from ..files import check_target
        from ..plot import picture_format, require_matplotlib

        picture_format(out)  # checked, like matplotlib's presence, before any work
        check_target(Path(out), force=force)
        require_matplotlib()
    charts = obj.store.charts(refs, path, points=points)
    if out is not None:
        from ..plot import draw

        draw(charts, out, force=force)
        if not as_json:
            click.echo(f"{out}: {', '.join(c.ref for c in charts)} on {path} "
                       f"({', '.join(f'{c.bytes_per_token:.3f}' for c in charts)} bytes per token)")
    if as_json:
        emit_json([c.to_dict() for c in charts])
