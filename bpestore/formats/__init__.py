"""Reading and writing other tokenizers' files: GPT-2, Hugging Face, tiktoken."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, NotFoundError
from ..text import PATTERNS
from .gpt2 import token_to_str, write_gpt2

if TYPE_CHECKING:
    from ..encoder import Tokenizer

EXPORT_FORMATS = ("gpt2", "hf", "tiktoken")


def export_tokenizer(tok: Tokenizer, format: str, out: Path) -> list[Path]:  # noqa: A002
    """Write a Tokenizer in ``format`` (one of EXPORT_FORMATS); returns the files written."""
    if not tok.spec.byte_level:
        raise InvalidArgumentError("only byte-level versions can be exported")
    if format == "gpt2":
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "vocab.json", out / "merges.txt"]
        write_gpt2(tok.vocab, tok.merges, list(tok.special_tokens), *paths)
        return paths
    if format == "tiktoken":
        _parent_exists(out)
        specials = set(tok.special_tokens.values())
        with open(out, "w", encoding="ascii") as f:
            for token_id, data in sorted(tok.vocab.items()):
                if token_id not in specials:
                    f.write(f"{base64.b64encode(data).decode()} {token_id}\n")
        return [out]
    if format == "hf":
        _parent_exists(out)
        with open(out, "w", encoding="utf-8") as f:
            json.dump(hf_tokenizer_json(tok), f, ensure_ascii=False, indent=1)
        return [out]
    raise InvalidArgumentError(f"unknown export format {format!r}; choose {', '.join(EXPORT_FORMATS)}",
                               params=("format",))


def _parent_exists(out: Path) -> None:
    if not out.parent.exists():
        raise NotFoundError(f"folder {out.parent} does not exist", params=("out",))


_HF_NORMALIZERS = {"nfc": "NFC", "nfd": "NFD", "nfkc": "NFKC", "nfkd": "NFKD", "lowercase": "Lowercase"}


def hf_tokenizer_json(tok: Tokenizer) -> dict[str, Any]:
    """A Hugging Face ``tokenizer.json`` that encodes like ``tok``."""
    spec = tok.spec
    steps = []
    for step in spec.normalizer_steps:
        if step not in _HF_NORMALIZERS:
            raise InvalidArgumentError(f"normalizer {step!r} has no Hugging Face equivalent",
                                       params=("format",))
        steps.append({"type": _HF_NORMALIZERS[step]})
    normalizer = None if not steps else steps[0] if len(steps) == 1 else {"type": "Sequence", "normalizers": steps}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if spec.pretokenizer == "gpt2":
        pre_tokenizer = byte_level
    elif spec.pretokenizer == "none":
        pre_tokenizer = dict(byte_level, use_regex=False)
    else:
        pattern = spec.pattern if spec.pretokenizer == "regex" else PATTERNS[spec.pretokenizer]
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]}
    specials = set(tok.special_tokens.values())
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for text, i in sorted(tok.special_tokens.items(), key=lambda kv: kv[1])],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {token_to_str(data): i for i, data in sorted(tok.vocab.items()) if i not in specials},
            "merges": [f"{token_to_str(a)} {token_to_str(b)}" for a, b in tok.merges],
        },
    }
