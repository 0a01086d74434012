"""Reading and writing other tokenizers' files: GPT-2, Hugging Face, tiktoken, SentencePiece."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidArgumentError
from ..files import atomic_file, atomic_folder, atomic_path, check_target
from .gpt2 import reads_as_special, write_gpt2
from .hf_export import HF_FOLDER, hf_tokenizer_json, transformers_config

if TYPE_CHECKING:
    from ..encoder import Tokenizer

EXPORT_FORMATS = ("gpt2", "hf", "tiktoken", "sentencepiece")


def export_tokenizer(tok: Tokenizer, format: str, out: str | Path, *,  # noqa: A002
                     force: bool = False) -> list[Path]:
    """Write a Tokenizer in ``format`` (one of EXPORT_FORMATS); returns the files written.

    Each file is written whole or not at all (``atomic_file``); an existing
    one is replaced only with ``force``. ``out``'s folder must exist (for
    ``gpt2``, ``out`` is a folder; it is made if its parent exists, and its two
    files are replaced together: ``atomic_folder``). ``hf`` into a folder (one
    that exists, or a path ending in ``/``, made) writes what ``transformers``'
    ``AutoTokenizer.from_pretrained`` reads there, its three files replaced
    together: tokenizer.json, tokenizer_config.json, special_tokens_map.json.
    """
    folder_named = str(out).endswith(("/", os.sep))
    out = Path(out)
    if format not in EXPORT_FORMATS:
        raise InvalidArgumentError(f"unknown export format {format!r}; choose {', '.join(EXPORT_FORMATS)}",
                                   params=("format",))
    if format != "sentencepiece":
        refuse_unexportable(tok, format)
    hf_folder = format == "hf" and (out.is_dir() or folder_named)
    paths = [out / "vocab.json", out / "merges.txt"] if format == "gpt2" else \
        [out / name for name in HF_FOLDER] if hf_folder else [out]
    if format == "gpt2":
        merged = {a + b for a, b in tok.merges}
        for text in tok.special_tokens:
            if not reads_as_special(text, merged):
                raise InvalidArgumentError(f"special token {text!r} is spelled like an ordinary token in GPT-2's "
                                           "files, which cannot mark it special; export it as hf or tiktoken",
                                           params=("format",))
    if (format == "gpt2" or hf_folder) and out.exists() and not out.is_dir():
        raise InvalidArgumentError(f"{out} is a file; the {format} format here is a folder of files",
                                   params=("out",))
    in_folder = format == "gpt2" or hf_folder
    for path in paths if out.exists() or not in_folder else [out]:  # a missing folder: only its parent
        check_target(path, force=force)
    if format == "gpt2":
        with atomic_folder(out, [p.name for p in paths], force=force) as folder, \
                open(folder / paths[0].name, "w", encoding="utf-8") as vocab_file, \
                open(folder / paths[1].name, "w", encoding="utf-8") as merges_file:
            write_gpt2(tok.vocab, tok.merges, list(tok.special_tokens), vocab_file, merges_file)
    elif format == "sentencepiece":
        from .sentencepiece import sentencepiece_model

        data = sentencepiece_model(tok)
        with atomic_path(out, force=force) as temp:
            temp.write_bytes(data)
    elif format == "tiktoken":
        specials = set(tok.special_tokens.values())
        with atomic_file(out, force=force) as f:
            for token_id, data in sorted(tok.vocab.items()):
                if token_id not in specials:
                    f.write(f"{base64.b64encode(data).decode()} {token_id}\n")
    elif hf_folder:
        with atomic_folder(out, [p.name for p in paths], force=force) as temp:
            for path, content in zip(paths, [hf_tokenizer_json(tok), *transformers_config(tok)]):
                with open(temp / path.name, "w", encoding="utf-8") as f:
                    json.dump(content, f, ensure_ascii=False, indent=1)
    else:
        with atomic_file(out, force=force) as f:
            json.dump(hf_tokenizer_json(tok), f, ensure_ascii=False, indent=1)
    return paths


def refuse_unexportable(tok: Tokenizer, format: str = "gpt2") -> None:  # noqa: A002
    """InvalidArgumentError where ``format`` cannot express how ``tok``
    tokenizes: a character alphabet or a space marker (but in ``hf``), word
    markers, longest-match segmentation (piece segmentation: ``hf`` writes it as pairs)."""
    spec = tok.spec
    hf = format == "hf"
    unsupported = [what for what, present in (
        ("alphabet='chars' (gpt2 and tiktoken files hold byte-level vocabularies)", not spec.byte_level and not hf),
        ("a space marker or a dummy prefix", (spec.space_marker is not None or spec.dummy_prefix != "never")
         and not hf),
        (f"segmentation={spec.segmentation!r}", spec.segmentation not in (("merge", "piece") if hf else ("merge",))),
        ("an end-of-word marker", spec.end_of_word is not None),
        ("a start-of-word marker", spec.start_of_word is not None)) if present]
    if unsupported:
        raise InvalidArgumentError(f"{tok.name or 'this version'} uses {unsupported[0]}, which the export "
                                   "formats cannot express; it cannot be exported", params=("ref",))
