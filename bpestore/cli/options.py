"""Option bundles shared by several commands, JSON and listing output, and the
progress line every long job draws on a terminal."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from ..limits import MAX_INT
from ..queries import shown_token
from ..records import Progress
from ..spec import ALPHABETS, DUMMY_PREFIXES, LAYOUTS, PRETOKENIZERS, SEGMENTATIONS, TIE_BREAKS

F = TypeVar("F", bound=Callable[..., Any])


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, listed in the order --help shows them."""
    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command
    return apply


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def emit_listing(items: Sequence[Any], as_json: bool, empty: str, line: Callable[[Any], str]) -> None:
    """A listing command's output: JSON, or a line per item (a hint when there is none)."""
    if as_json:
        emit_json([item.to_dict() for item in items])
        return
    click.echo("\n".join(map(line, items)) if items else empty)  # one write: listings can be 200,000 lines


def count_range(min: int, max: int = MAX_INT) -> click.IntRange:  # noqa: A002
    """An integer option's type: ``min`` to ``max``, so an absurd value is one ``Error:`` line."""
    return click.IntRange(min=min, max=max)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
quiet_option = click.option("--quiet", "-q", is_flag=True, help="No progress output.")
# No --special-token given: None (a corpus or a parent keeps its own).
special_option = click.option("--special-token", "special_tokens", multiple=True, metavar="TOK",
                              callback=lambda ctx, param, value: value or None,
                              help="A special token (repeat for several).")
dtype_option = click.option("--dtype", type=click.Choice(["uint16", "uint32"]),
                            help="Id file element type [default: uint16 where every id fits, else uint32].")
# How text becomes words: fixed by a corpus' first ingest.
text_options = options(
    click.option("--pretokenizer", type=click.Choice(PRETOKENIZERS),
                 help="How text is split into words [default: gpt2; fixed by a corpus' first ingest]"),
    click.option("--pattern", metavar="REGEX", help="A custom pre-tokenizer regex (implies --pretokenizer regex)."),
    click.option("--normalizer", metavar="STEPS",
                 help="Comma-separated: nfc, nfkc, lowercase, alphanumeric, collapse-spaces, ... [default: none]"),
    click.option("--space-marker", metavar="CHAR",
                 help="Spaces become CHAR in the text, e.g. '▁' (SentencePiece); each line is a text."),
    click.option("--dummy-prefix", type=click.Choice(DUMMY_PREFIXES),
                 help="A space before each text: always (SentencePiece), unless-space (HF Metaspace), first "
                      "(unless-space where the text starts, not after a special token) "
                      "[default: never]."),
    special_option,
)
# What a training run aims at and which pairs it may merge.
training_options = options(
    click.option("--vocab-size", type=count_range(1), help="Target tokens: 256 bytes + specials + merges."),
    click.option("--merges", type=count_range(0), help="Target number of merges (instead of --vocab-size)."),
    click.option("--min-frequency", type=count_range(1), default=1, show_default=True,
                 help="Stop when no pair occurs this often."),
    click.option("--tie-break", type=click.Choice(TIE_BREAKS),
                 help="Rule among equal counts [default: lexicographic]."),
    special_option,
    click.option("--from", "parent", metavar="NAME@N", help="Extend this version (its ids stay valid)."),
    click.option("--max-token-length", type=count_range(2), help="Longest token, in bytes."),
    click.option("--segmentation", type=click.Choice(SEGMENTATIONS),
                 help="How encoding cuts a word: BPE merges by rank, greedy longest match, or by piece "
                      "(SentencePiece) [default: merge]."),
)
# How a word becomes its first symbols (alphabet.py).
symbol_options = options(
    click.option("--alphabet", type=click.Choice(ALPHABETS),
                 help="Initial tokens: the 256 bytes, or the characters of the corpus [default: bytes]."),
    click.option("--unk-token", metavar="TOK", help="With --alphabet chars: the token for unseen characters."),
    click.option("--byte-fallback", is_flag=True, default=None,
                 help="With --alphabet chars: unseen characters become their UTF-8 bytes."),
    click.option("--end-of-word", metavar="MARK", help="A symbol after every word, e.g. '</w>'."),
    click.option("--end-of-word-suffix", metavar="MARK",
                 help="Glued to the last character of every word, e.g. '</w>' (HF's end_of_word_suffix)."),
    click.option("--start-of-word", metavar="MARK", help="A symbol before every word, e.g. '▁'."),
    click.option("--no-inner-space", is_flag=True, default=None,
                 help="A merged token may hold a space only at its ends."),
    click.option("--fuse-unk", is_flag=True, default=None,
                 help="With --unk-token: a run of unseen characters is one unknown token."),
    click.option("--layout", type=click.Choice(LAYOUTS),
                 help="Where the first ids go: sentencepiece puts the unknown token at 0, then the special "
                      "tokens, then byte fallback tokens apart from characters [default: bpestore]."),
)


class ProgressLine:
    """One self-rewriting line on a terminal (stderr) for any job's ``Progress``;
    silent when disabled or not on a terminal. Use it as a context manager."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.started = time.monotonic()
        self.first_done: int | None = None
        self.last_draw = 0.0
        self.width = 0

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if self.first_done is None:  # a resumed job starts past zero
            self.first_done = p.done if p.unit == "merges" else 0
        if not self.enabled or now - self.last_draw < 0.1:
            return
        self.last_draw = now
        rate = (p.done - self.first_done) / max(now - self.started, 1e-9)
        parts = [_amount(p.done, p.total, p.unit), f"{_amount(rate, None, p.unit)}/s"]
        if p.total:
            parts.insert(0, f"{100 * min(p.done / p.total, 1):3.0f}%")
            if rate > 0:
                left = int(max(p.total - p.done, 0) / rate)
                parts.append(f"ETA {left // 60}:{left % 60:02d}")
        if p.sources_total > 1:
            parts.append(f"file {min(p.sources_done + 1, p.sources_total)}/{p.sources_total} {p.name}")
        else:
            parts.append(p.name)
        if p.merge is not None:
            parts.append(f"{shown_token(p.token)} x{p.merge.count:,}")
        if p.tokens:
            parts.append(f"{p.tokens:,} tokens")
        self.draw("  ".join(parts))

    def draw(self, line: str) -> None:
        line = line[:max(20, shutil.get_terminal_size().columns - 1)]
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = len(line)

    def clear(self) -> None:
        if self.enabled and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


def _amount(n: float, total: int | None, unit: str) -> str:
    """``n`` (of ``total``) in the unit's words: MB for bytes, a count for merges."""
    if unit == "bytes":
        return f"{n / 1e6:,.1f}" + (f"/{total / 1e6:,.1f} MB" if total else " MB")
    return f"{n:,.0f}" + (f"/{total:,}" if total else "") + f" {unit}"
