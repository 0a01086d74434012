"""Reading and writing other tokenizers' files: GPT-2, Hugging Face, tiktoken."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError
from ..files import atomic_file, atomic_folder, check_target
from .gpt2 import reads_as_special, write_gpt2
from .hf import hf_tokenizer_json

if TYPE_CHECKING:
    from ..encoder import Tokenizer

EXPORT_FORMATS = ("gpt2", "hf", "tiktoken")


def export_tokenizer(tok: Tokenizer, format: str, out: Path, *, force: bool = False) -> list[Path]:  # noqa: A002
    """Write a Tokenizer in ``format`` (one of EXPORT_FORMATS); returns the files written.

    Each file is written whole or not at all (``atomic_file``); an existing
    one is replaced only with ``force``. ``out``'s folder must exist (for
    ``gpt2``, ``out`` is a folder; it is made if its parent exists, and its two
    files are replaced together: ``atomic_folder``).
    """
    if format not in EXPORT_FORMATS:
        raise InvalidArgumentError(f"unknown export format {format!r}; choose {', '.join(EXPORT_FORMATS)}",
                                   params=("format",))
    refuse_unexportable(tok)
    paths = [out / "vocab.json", out / "merges.txt"] if format == "gpt2" else [out]
    if format == "gpt2":
        merged = {a + b for a, b in tok.merges}
        for text in tok.special_tokens:
            if not reads_as_special(text, merged):
                raise InvalidArgumentError(f"special token {text!r} is spelled like an ordinary token in GPT-2's "
                                           "files, which cannot mark it special; export it as hf or tiktoken",
                                           params=("format",))
    if format == "gpt2" and out.exists() and not out.is_dir():
        raise InvalidArgumentError(f"{out} is a file; the gpt2 format is a folder of two files", params=("out",))
    for path in paths if out.exists() or format != "gpt2" else [out]:  # a missing folder: only its parent
        check_target(path, force=force)
    if format == "gpt2":
        with atomic_folder(out, [p.name for p in paths], force=force) as folder, \
                open(folder / paths[0].name, "w", encoding="utf-8") as vocab_file, \
                open(folder / paths[1].name, "w", encoding="utf-8") as merges_file:
            write_gpt2(tok.vocab, tok.merges, list(tok.special_tokens), vocab_file, merges_file)
    elif format == "tiktoken":
        specials = set(tok.special_tokens.values())
        with atomic_file(out, force=force) as f:
            for token_id, data in sorted(tok.vocab.items()):
                if token_id not in specials:
                    f.write(f"{base64.b64encode(data).decode()} {token_id}\n")
    else:
        with atomic_file(out, force=force) as f:
            json.dump(hf_tokenizer_json(tok), f, ensure_ascii=False, indent=1)
    return paths


def refuse_unexportable(tok: Tokenizer) -> None:
    """InvalidArgumentError where the formats cannot express how ``tok``
    tokenizes: a character alphabet, word markers, longest-match segmentation."""
    spec = tok.spec
    unsupported = [what for what, present in (
        ("alphabet='chars' (the formats hold byte-level vocabularies)", not spec.byte_level),
        ("segmentation='longest-match'", spec.segmentation != "merge"),
        ("an end-of-word marker", spec.end_of_word is not None),
        ("a start-of-word marker", spec.start_of_word is not None)) if present]
    if unsupported:
        raise InvalidArgumentError(f"{tok.name or 'this version'} uses {unsupported[0]}, which the export "
                                   "formats cannot express; it cannot be exported", params=("ref",))
