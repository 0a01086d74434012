"""Drawing ``VersionChart`` data with matplotlib (the ``plot`` extra): three
panels side by side, one line per version in each: the compression curve
(bytes per token as the vocabulary grows along the merge ranks), the pair
count of each merge by rank (log scale) and the distribution of token lengths
in the vocabulary. No pyplot: a ``Figure`` of its own, so no global state and
no display is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidArgumentError, MissingExtraError, NotFoundError
from .files import atomic_path
from .records import VersionChart

FORMATS = ("png", "svg")
MAX_LINE_POINTS = 4_000  # points drawn of one merge-count line (a 200,000-merge version is thinned)


def picture_format(out: str | Path) -> str:
    """``png`` or ``svg``, from the name of the file to write; an error where
    the name says neither or its folder does not exist.

    >>> picture_format("chart.SVG")
    'svg'
    """
    path = Path(out)
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise InvalidArgumentError(f"out must name a .png or .svg file, not {str(out)!r}", params=("out",))
    if not path.parent.is_dir():
        raise NotFoundError(f"folder not found: {path.parent} (where out={str(out)!r} would go)", params=("out",))
    return suffix


def require_matplotlib() -> None:
    """MissingExtraError, saying how to install it, where matplotlib is absent."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise MissingExtraError("plot needs matplotlib, which is not installed: pip install 'bpestore[plot]'",
                                extra="plot") from None


def draw(charts: Sequence[VersionChart], out: str | Path, *, force: bool = True) -> Path:
    """Draw the charts of one or more versions into ``out`` (``.png`` or
    ``.svg``), written whole or not at all; returns its path. Each version's
    lines carry the SVG ids ``curve-N``, ``counts-N`` and ``lengths-N`` (N
    from 0, in the order given)."""
    fmt = picture_format(out)
    if not charts:
        raise InvalidArgumentError("charts must hold at least one version", params=("charts",))
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 5), layout="constrained")
    curve, counts, lengths = fig.subplots(1, 3)
    files = sorted({c.file for c in charts})
    fig.suptitle(f"{', '.join(c.ref for c in charts)} on {', '.join(Path(f).name for f in files)}")
    for n, chart in enumerate(charts):
        color = f"C{n % 10}"
        curve.plot([p.vocab_size for p in chart.curve], [p.bytes_per_token for p in chart.curve],
                   color=color, marker="." if len(chart.curve) <= 60 else None, label=chart.ref, gid=f"curve-{n}")
        ranks, values, what = _merge_line(chart)
        counts.plot(ranks, values, color=color, linewidth=0.8, label=f"{chart.ref}{what}", gid=f"counts-{n}")
        sizes = [size for size, _ in chart.vocab_lengths]
        lengths.plot(sizes, [count for _, count in chart.vocab_lengths], color=color, marker="o", markersize=3,
                     label=chart.ref, gid=f"lengths-{n}")
    curve.set(title="Compression", xlabel="vocabulary size (tokens, along the merge ranks)",
              ylabel="bytes per token")
    counts.set(title="Merges", xlabel="merge rank", ylabel="pair count when merged", yscale="log")
    lengths.set(title="Token lengths", xlabel="token length (bytes)", ylabel="tokens in the vocabulary",
                yscale="log")
    for ax in (curve, counts, lengths):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, Path(out), fmt, force)


def _merge_line(chart: VersionChart) -> tuple[list[int], list[int], str]:
    """The ranks and counts to draw for a version: the pair counts training
    stored, or for a version without them (imported) how often each merge is
    applied on the text; thinned to MAX_LINE_POINTS ranks; zeros left out
    (the scale is logarithmic)."""
    values, what = chart.merge_counts, ""
    if not any(values):
        values, what = chart.merge_uses, " (uses on the text)"
    step = max(1, -(-len(values) // MAX_LINE_POINTS))
    ranks = [r for r in range(0, len(values), step) if values[r] > 0]
    return ranks, [values[r] for r in ranks], what


def _save(fig: Any, out: Path, fmt: str, force: bool) -> Path:
    """Write the figure to a file beside ``out``, then move it in place (an
    existing ``out`` is replaced only with ``force``)."""
    import matplotlib

    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with atomic_path(out, force=force) as temp, matplotlib.rc_context({"svg.hashsalt": "bpestore"}):
        fig.savefig(temp, format=fmt, dpi=110, metadata=metadata)
    return out
