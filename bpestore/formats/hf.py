"""Hugging Face ``tokenizer.json``: reading BPE models as ``tokenizers`` writes
them (writing one: ``hf_export``).

What is read maps onto a ``TokenizerSpec``; any part of the file bpestore has
no equivalent for is refused by name (``DamagedDataError`` for a file that is
not a tokenizer.json, ``InvalidArgumentError`` for one bpestore cannot run).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..charsmap import Charsmap, encode_charsmap
from ..errors import DamagedDataError, InvalidArgumentError
from ..files import read_bounded
from ..records import ForeignModel
from ..spec import TokenizerSpec
from ..text import PATTERNS
from .gpt2 import str_to_token, token_to_str, unicode_to_bytes
from .hf_export import COLLAPSE_RUNS, HF_NORMALIZERS, collapse_ends

if TYPE_CHECKING:
    pass

_FROM_HF_NORMALIZERS = {v: k for k, v in HF_NORMALIZERS.items()}
# Hugging Face's Whitespace pre-tokenizer: runs of word characters, runs of other non-space.
HF_WHITESPACE = r"\w+|[^\w\s]+"
# The largest tokenizer.json read (real ones: under 40 MB).
MAX_FILE_BYTES = 64 << 20
# The patterns of the built-in pre-tokenizers that cut every character into some word.
_COVERING = ("gpt2", "cl100k", "o200k")


def read_hf(path: str | Path) -> ForeignModel:
    """Read a Hugging Face ``tokenizer.json`` holding a BPE model (a regular file
    of at most MAX_FILE_BYTES)."""
    try:
        data = json.loads(read_bounded(path, MAX_FILE_BYTES, "tokenizer.json").decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DamagedDataError(f"{path} is not a JSON file: {exc}", params=("path",)) from None
    except RecursionError:
        raise DamagedDataError(f"{path} is nested too deeply to be a tokenizer.json", params=("path",)) from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise DamagedDataError(f"{path} is not a Hugging Face tokenizer.json (no 'model' object)", params=("path",))
    return _Reader(str(path), data).read()


class _Reader:
    def __init__(self, path: str, data: dict[str, Any]) -> None:
        self.path = path
        self.data = data
        self.byte_level_prefix = False  # ByteLevel's add_prefix_space (pre_tokenizer)
        self.charsmap: str | None = None  # a Precompiled normalizer's map, as the spec's charsmap
        self.squeeze_to = " "  # what a Replace of runs of spaces writes
        self.collapse_marker: str | None = None  # what collapse-spaces strips at the end besides spaces (normalizer)

    def refuse(self, part: str, why: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{self.path}: {part}: {why}; bpestore has no equivalent", params=("path",))

    def damaged(self, part: str, why: str) -> DamagedDataError:
        return DamagedDataError(f"{self.path}: {part}: {why}", params=("path",))

    def flag(self, node: dict[str, Any], key: str, part: str, default: bool = False) -> bool:
        """A boolean field (absent or null: ``default``); tokenizers refuses a file with anything else there."""
        value = node.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.damaged(f"{part}.{key}", f"{value!r} is not a boolean (true or false)")
        return value

    def read(self) -> ForeignModel:
        model = self.data["model"]
        self.refuse_unsupported()
        fields = self.text_fields()
        byte_level = fields.pop("byte_level")
        self.decoder(self.data.get("decoder"), byte_level)
        fallback, suffix = self.model_options(byte_level)
        fuse_unk = self.flag(model, "fuse_unk", "model")
        unk = model.get("unk_token")
        if unk is not None and (not isinstance(unk, str) or not unk):
            raise self.damaged("model.unk_token", f"{unk!r} is not a token")
        if byte_level and unk is not None:
            unk = None  # a byte-level model never meets an unknown character
        vocab_in = model.get("vocab")
        if not isinstance(vocab_in, dict):
            raise self.damaged("model.vocab", "must map token strings to ids")
        table = unicode_to_bytes()

        def token_bytes(text: str, where: str) -> bytes:
            if not byte_level:
                byte = _byte_token(text) if fallback else None
                return text.encode("utf-8") if byte is None else bytes([byte])
            if text and all(c in table for c in text):
                return str_to_token(text)
            raise self.damaged(where, f"{text!r} is not written in the ByteLevel alphabet")

        vocab: dict[int, bytes] = {}
        kinds: dict[int, str] = {}
        n_bytes = 0
        # A special token is in model.vocab too (as HF writes it), spelled as itself; byte
        # fallback tokens listed there (as Llama's files list them) stay byte tokens.
        added: list[Any] = self.data.get("added_tokens") or []
        special_ids = {e["content"]: e["id"] for e in (added if isinstance(added, list) else [])
                       if isinstance(e, dict) and e.get("special") is True and isinstance(e.get("content"), str)
                       and not (fallback and _byte_token(e["content"]) is not None)}
        for text, token_id in vocab_in.items():
            if type(token_id) is not int or token_id < 0:
                raise self.damaged("model.vocab", f"the id of {text!r} is {token_id!r}, not a whole number")
            if token_id in vocab:
                raise self.damaged("model.vocab", f"id {token_id} is given twice")
            if fallback and _byte_token(text) is not None:
                n_bytes += 1
            if unk is not None and text == unk:
                vocab[token_id], kinds[token_id] = text.encode("utf-8"), "unk"
                continue
            if special_ids.get(text) == token_id:
                vocab[token_id] = text.encode("utf-8")
                continue
            vocab[token_id] = token_bytes(text, "model.vocab")
        specials = self.added_tokens(vocab, kinds, unk, byte_level, fallback)
        fields["template"] = self.template(specials, vocab)
        if unk is not None and unk not in vocab_in:
            raise self.damaged("model.unk_token", f"{unk!r} is not in model.vocab")
        if fallback:
            self.check_byte_tokens(vocab_in, n_bytes)
        merges = self.merges(model.get("merges"), token_bytes)
        present = set(vocab.values())
        for rank, (left, right) in enumerate(merges):
            for token in (left, right, left + right):
                if token not in present:
                    raise self.damaged(f"model.merges[{rank}]", f"{_show(token, byte_level)!r} is not "
                                       "in model.vocab")
        try:
            spec = TokenizerSpec(alphabet="bytes" if byte_level else "chars", unk_token=unk,
                                 special_tokens=tuple(specials), byte_fallback=fallback,
                                 # (with byte fallback no character is unknown: nothing to fuse)
                                 fuse_unk=fuse_unk and unk is not None and not fallback, end_of_word_suffix=suffix,
                                 drop_unseen=not byte_level and not fallback and unk is None,
                                 layout="sentencepiece" if fallback and unk is not None else "bpestore", **fields)
        except InvalidArgumentError as exc:
            raise self.refuse("pre_tokenizer", str(exc)) from None
        return ForeignModel(vocab, merges, spec)

    def check_byte_tokens(self, vocab_in: dict[str, int], n_bytes: int) -> None:
        """All 256 byte tokens, each below the character token of its byte, if any (bpestore
        takes a byte's lowest id as its byte token)."""
        if n_bytes != 256:
            raise self.refuse("model.byte_fallback", f"{n_bytes} of the 256 <0xNN> tokens in model.vocab")
        for text, token_id in vocab_in.items():
            byte = bytes([ord(text)]) if len(text) == 1 and ord(text) < 128 else None
            if byte is not None and vocab_in[f"<0x{byte[0]:02X}>"] > token_id:
                raise self.refuse("model.vocab", f"byte token <0x{byte[0]:02X}> comes after the character "
                                  f"{text!r} (id {token_id}); bpestore needs it first")

    def refuse_unsupported(self) -> None:
        """Refuse a model other than BPE and the parts of the file that add or change ids."""
        data, model = self.data, self.data["model"]
        kind = model.get("type", "BPE" if "merges" in model else None)
        if kind != "BPE":
            raise self.refuse("model.type", f"{kind!r} is not BPE")
        for key, ok in (("dropout", (None, 0, 0.0)), ("continuing_subword_prefix", (None, ""))):
            if model.get(key) not in ok or isinstance(model.get(key), bool):
                raise self.refuse(f"model.{key}", f"{model.get(key)!r}")
        if self.flag(model, "ignore_merges", "model"):
            raise self.refuse("model.ignore_merges", "true")
        for key in ("truncation", "padding"):
            if data.get(key) is not None:
                raise self.refuse(key, "set (bpestore encodes whole texts)")
        kinds = [_type(step) for step in self.post_steps()]
        if any(kind not in ("ByteLevel", "TemplateProcessing") for kind in kinds) or \
                kinds.count("TemplateProcessing") > 1:
            raise self.refuse("post_processor", f"{kinds!r} (only ByteLevel and one TemplateProcessing)")
        for step in self.post_steps():
            for key in ("add_prefix_space", "trim_offsets", "use_regex"):
                self.flag(step if _type(step) == "ByteLevel" else {}, key, "post_processor")

    def post_steps(self) -> list[Any]:
        post = self.data.get("post_processor")
        if post is None:
            return []
        steps = post.get("processors") if _type(post) == "Sequence" else [post]
        if not isinstance(steps, list):
            raise self.damaged("post_processor", "a Sequence without a list of processors")
        return steps

    def template(self, specials: list[str], vocab: dict[int, bytes]) -> tuple[str, ...]:
        """TemplateProcessing as the spec's ``template`` (single, pair) in tokenizers' notation;
        each token it adds must be one special token, at its id."""
        found = [step for step in self.post_steps() if _type(step) == "TemplateProcessing"]
        if not found:
            return ()
        node, id_of = found[0], {data: i for i, data in vocab.items()}
        tokens, templates = node.get("special_tokens") or {}, []
        if not isinstance(tokens, dict):
            raise self.damaged("post_processor.special_tokens", "must map names to tokens")
        for name, entry in tokens.items():
            if entry != {"id": name, "ids": [id_of.get(name.encode("utf-8"))], "tokens": [name]} \
                    or name not in specials or any(c.isspace() for c in name):
                raise self.refuse(f"post_processor.special_tokens[{name!r}]",
                                  "not one special token at its id (a name without spaces)")
        for key in ("single", "pair"):
            if not isinstance(node.get(key), list) or not node[key]:
                raise self.damaged(f"post_processor.{key}", "missing (a template is a list of pieces)")
            parts = []
            for piece in node[key]:
                kind, body = next(iter(piece.items())) if isinstance(piece, dict) and len(piece) == 1 else ("", {})
                if not isinstance(body, dict) or type(body.get("type_id")) is not int:
                    raise self.damaged(f"post_processor.{key}", f"{piece!r} is not a piece of a template")
                if kind == "Sequence" and body.get("id") in ("A", "B"):
                    parts.append(f"${body['id']}:{body['type_id']}")
                elif kind == "SpecialToken" and body.get("id") in tokens:
                    parts.append(f"{body['id']}:{body['type_id']}")
                else:
                    raise self.damaged(f"post_processor.{key}", f"{piece!r} is not $A, $B or a listed token")
            templates.append(" ".join(parts))
        return tuple(templates)

    def model_options(self, byte_level: bool) -> tuple[bool, str | None]:
        """(byte_fallback, end_of_word_suffix) of the model, where bpestore can run them."""
        model = self.data["model"]
        fallback = self.flag(model, "byte_fallback", "model")
        if fallback and byte_level:
            raise self.refuse("model.byte_fallback", "with a ByteLevel pre-tokenizer")
        suffix = model.get("end_of_word_suffix") or None
        if suffix is not None and (byte_level or fallback or not isinstance(suffix, str)):
            raise self.refuse("model.end_of_word_suffix", f"{suffix!r} with a ByteLevel pre-tokenizer or "
                              "byte fallback")
        return fallback, suffix

    def added_tokens(self, vocab: dict[int, bytes], kinds: dict[int, str], unk: str | None,
                     byte_level: bool, fallback: bool) -> list[str]:
        """The special tokens of ``added_tokens``, put in ``vocab`` (and ``kinds``); byte
        fallback tokens listed there are checked to be the byte tokens of model.vocab."""
        specials: list[str] = []
        added = self.data.get("added_tokens") or []
        if not isinstance(added, list):
            raise self.damaged("added_tokens", "must be a list")
        by_id = {i: t for i, t in vocab.items()}
        for entry in added:
            if not isinstance(entry, dict) or not isinstance(entry.get("content"), str) \
                    or type(entry.get("id")) is not int or entry["id"] < 0 or not entry["content"]:
                raise self.damaged("added_tokens", f"{entry!r} is not a token with an id")
            content, token_id = entry["content"], entry["id"]
            for flag in ("single_word", "lstrip", "rstrip", "normalized"):
                self.flag(entry, flag, "added_tokens")
            byte = _byte_token(content) if fallback else None
            if byte is not None:
                if by_id.get(token_id) != bytes([byte]):
                    raise self.damaged("added_tokens", f"the byte token {content!r} has id {token_id}, "
                                       "not its id in model.vocab")
                continue
            if not self.flag(entry, "special", "added_tokens"):
                raise self.refuse("added_tokens", f"{content!r} is not special (added words)")
            for flag in ("single_word", "lstrip", "rstrip"):
                if entry.get(flag):
                    raise self.refuse("added_tokens", f"{content!r} has {flag}")
            if content == unk:
                if kinds.get(token_id) != "unk":
                    raise self.damaged("added_tokens", f"the unknown token {unk!r} has id {token_id}, "
                                       "not its id in model.vocab")
                continue
            known = by_id.get(token_id)
            if known is not None and known != content.encode("utf-8") and \
                    not (byte_level and token_to_str(known) == content):
                raise self.damaged("added_tokens", f"id {token_id} is {content!r} here and "
                                   f"{known!r} in model.vocab")
            if content in specials:
                raise self.damaged("added_tokens", f"{content!r} is given twice")
            specials.append(content)
            vocab[token_id] = content.encode("utf-8")
            kinds[token_id] = "special"
        return specials

    def merges(self, merges_in: Any, token_bytes: Any) -> list[tuple[bytes, bytes]]:
        if not isinstance(merges_in, list):
            raise self.damaged("model.merges", "must be a list")
        merges = []
        for rank, entry in enumerate(merges_in):
            if isinstance(entry, str):
                parts = entry.split(" ")
            elif isinstance(entry, list) and all(isinstance(p, str) for p in entry):
                parts = entry
            else:
                parts = []
            if len(parts) != 2 or not all(parts):
                raise self.damaged(f"model.merges[{rank}]", f"{entry!r} is not a pair of tokens")
            merges.append((token_bytes(parts[0], f"model.merges[{rank}]"),
                           token_bytes(parts[1], f"model.merges[{rank}]")))
        return merges

    def text_fields(self) -> dict[str, Any]:
        """The spec's fields for normalizer and pre-tokenizer (and byte_level)."""
        normalizer, prepend, marker = self.normalizer(self.data.get("normalizer"))
        byte_level, pretokenizer, pattern, meta = self.pre_tokenizer(self.data.get("pre_tokenizer"))
        dummy = "always" if prepend is not None else "never"
        if meta is not None:
            meta_marker, scheme = meta
            if marker not in (None, meta_marker) or (prepend is not None and scheme != "never"):
                raise self.refuse("pre_tokenizer", "Metaspace after a normalizer that replaces or prepends")
            marker = meta_marker
            dummy = dummy if scheme == "never" else "first" if scheme == "first" else "unless-space"
        elif byte_level and pretokenizer == "gpt2" and self.byte_level_prefix:
            dummy = "unless-space"
        if marker is not None:
            if prepend not in (None, marker, " "):
                raise self.refuse("normalizer", f"Prepend {prepend!r} with another space marker {marker!r}")
            if meta is None and pretokenizer != "none":
                raise self.refuse("normalizer", "Replace of spaces before a pre-tokenizer other than Metaspace")
        elif prepend not in (None, " "):
            raise self.refuse("normalizer", f"Prepend {prepend!r} (only a space, or with a space marker)")
        if self.squeeze_to not in (" ", marker) or (self.squeeze_to != " " and meta is None):
            raise self.refuse("normalizer", f"Replace of runs of spaces by {self.squeeze_to!r} without a Metaspace "
                              "of that replacement")
        if "collapse-spaces" in normalizer.split(",") and self.collapse_marker != marker:
            raise self.refuse("normalizer", f"Replace of spaces at the ends that strips {self.collapse_marker!r} "
                              f"at the end, where the space marker is {marker!r}")
        return {"normalizer": normalizer, "pretokenizer": pretokenizer, "pattern": pattern, "space_marker": marker,
                "dummy_prefix": dummy, "byte_level": byte_level, "charsmap": self.charsmap}

    def precompiled(self, step: dict[str, Any]) -> str:
        """A Precompiled normalizer's map, checked, as a spec's ``charsmap``."""
        try:
            blob = base64.b64decode(step.get("precompiled_charsmap") or "", validate=True)
            Charsmap(blob)
        except (ValueError, TypeError, DamagedDataError) as exc:
            raise self.damaged("normalizer", f"Precompiled: its precompiled_charsmap is not a map: {exc}") from None
        return encode_charsmap("precompiled", blob)

    def normalizer(self, node: Any) -> tuple[str, str | None, str | None]:
        """(steps, what Prepend adds, the space marker a Replace of ' ' writes)."""
        if node is None:
            return "none", None, None
        steps = node.get("normalizers") if _type(node) == "Sequence" else [node]
        if not isinstance(steps, list):
            raise self.damaged("normalizer", "a Sequence without a list of normalizers")
        names: list[str] = []
        prepend = marker = None
        for at, step in enumerate(steps):
            kind = _type(step)
            if kind == "Prepend" and isinstance(step.get("prepend"), str) and prepend is None and marker is None:
                prepend = step["prepend"]
            elif kind == "Replace" and step.get("pattern") == {"String": " "} and isinstance(step.get("content"), str) \
                    and len(step["content"]) == 1 and marker is None and at == len(steps) - 1:
                marker = step["content"]
            elif _collapse(steps[at:at + 2]) is not None and prepend is None and "collapse-spaces" not in names:
                names.append("collapse-spaces")
                self.collapse_marker = _collapse(steps[at:at + 2]) or None
            elif at > 0 and _collapse(steps[at - 1:at + 1]) is not None and names[-1:] == ["collapse-spaces"]:
                continue
            elif step == {"type": "Strip", "strip_left": False, "strip_right": True} and prepend is None:
                names.append("strip-right")
            elif kind == "Replace" and step.get("pattern") == {"Regex": " {2,}"} and prepend is None \
                    and marker is None and isinstance(step.get("content"), str) and len(step["content"]) == 1:
                names.append("squeeze-spaces")  # (to the space marker: the same ids after Metaspace, checked below)
                self.squeeze_to = step["content"]
            elif kind == "Precompiled" and prepend is None and marker is None and self.charsmap is None:
                self.charsmap = self.precompiled(step)
                names.append("precompiled")
            elif kind in _FROM_HF_NORMALIZERS and prepend is None and marker is None:
                names.append(_FROM_HF_NORMALIZERS[kind])
            else:
                raise self.refuse("normalizer", f"{kind!r}" + (" here" if kind in ("Prepend", "Replace") else ""))
        return ",".join(names) or "none", prepend, marker

    def pre_tokenizer(self, node: Any) -> tuple[bool, str, str | None, tuple[str, str] | None]:
        """(byte_level, pretokenizer, pattern, Metaspace's (replacement, prepend scheme) or None)."""
        if node is None:
            return False, "none", None, None
        steps = node.get("pretokenizers") if _type(node) == "Sequence" else [node]
        if not isinstance(steps, list) or not steps:
            raise self.damaged("pre_tokenizer", "a Sequence without a list of pre-tokenizers")
        byte_level = False
        splits: list[str] = []
        for at, step in enumerate(steps):
            kind = _type(step)
            if kind == "Metaspace":
                if len(steps) > 1:
                    raise self.refuse("pre_tokenizer", "Metaspace beside another pre-tokenizer")
                split = self.flag(step, "split", "pre_tokenizer", default=True)
                return False, "metaspace" if split else "none", None, self.metaspace(step)
            if kind == "ByteLevel":
                prefix = self.flag(step, "add_prefix_space", "pre_tokenizer")
                use_regex = self.flag(step, "use_regex", "pre_tokenizer", default=True)
                self.flag(step, "trim_offsets", "pre_tokenizer")
                if at != len(steps) - 1:
                    raise self.refuse("pre_tokenizer", "ByteLevel before another pre-tokenizer")
                if prefix and (len(steps) > 1 or not use_regex):
                    raise self.refuse("pre_tokenizer", "ByteLevel with add_prefix_space=true after a Split")
                self.byte_level_prefix = prefix
                byte_level = True
                if use_regex:
                    splits.append(PATTERNS["gpt2"])
            elif kind == "Split":
                splits.append(self.split(step))
            elif kind == "WhitespaceSplit":
                splits.append(PATTERNS["whitespace"])
            elif kind == "Whitespace":
                splits.append(HF_WHITESPACE)
            else:
                raise self.refuse("pre_tokenizer", f"{kind!r}")
        if len(splits) > 1:
            raise self.refuse("pre_tokenizer", "two splitting steps in a row")
        if not splits:
            return byte_level, "none", None, None
        for name in ("gpt2", "cl100k", "o200k", "whitespace", "punctuation"):
            if PATTERNS[name] == splits[0]:
                return byte_level, name, None, None
        return byte_level, "regex", splits[0], None

    def split(self, step: dict[str, Any]) -> str:
        """A Split step as a regex whose matches are its pieces (``findall``'s words)."""
        pattern = step.get("pattern")
        regex = pattern.get("Regex") if isinstance(pattern, dict) else None
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str) and pattern["String"]:
            regex = re.escape(pattern["String"])
        behavior, invert = step.get("behavior"), self.flag(step, "invert", "pre_tokenizer")
        if not isinstance(regex, str) or (behavior, invert) not in (("Isolated", False), ("Removed", True)):
            raise self.refuse("pre_tokenizer", "Split other than a regex kept as isolated pieces")
        if behavior == "Removed" or regex in (PATTERNS[name] for name in _COVERING):
            return regex
        # Isolated: the text between two matches is a piece too.
        return rf"(?:{regex})|(?:(?!(?:{regex}))[\s\S])+"

    def metaspace(self, step: dict[str, Any]) -> tuple[str, str]:
        replacement = step.get("replacement", "\u2581")
        if not isinstance(replacement, str) or len(replacement) != 1:
            raise self.refuse("pre_tokenizer", f"Metaspace replacement {replacement!r} (one character)")
        scheme = step.get("prepend_scheme")
        if scheme is None:  # files before prepend_scheme
            scheme = "always" if self.flag(step, "add_prefix_space", "pre_tokenizer", default=True) else "never"
        if scheme not in ("always", "first", "never"):
            raise self.refuse("pre_tokenizer", f"Metaspace prepend_scheme {scheme!r}")
        return replacement, scheme

    def decoder(self, node: Any, byte_level: bool) -> None:
        """Refuse a decoder bpestore's decode does not match (the spec decides decoding)."""
        if node is None:
            return
        steps = node.get("decoders") if _type(node) == "Sequence" else [node]
        allowed = ("ByteLevel",) if byte_level else ("Metaspace", "ByteFallback", "Fuse", "Strip", "Replace",
                                                     "BPEDecoder")
        for step in steps if isinstance(steps, list) else [{}]:
            if _type(step) not in allowed:
                raise self.refuse("decoder", f"{_type(step)!r}" + ("" if byte_level else " with a character model"))
            for key in ("add_prefix_space", "trim_offsets", "use_regex", "split"):
                self.flag(step, key, "decoder")  # (a dict: _type said so)


def _collapse(steps: list[Any]) -> str | None:
    """Whether these are the two Replace steps collapse-spaces is written as: None
    if not, else the space marker their first step strips at the end ('' for none)."""
    if len(steps) != 2 or steps[1] != COLLAPSE_RUNS or _type(steps[0]) != "Replace" or steps[0].get("content") != "":
        return None
    pattern = steps[0].get("pattern")
    ends = pattern.get("Regex") if isinstance(pattern, dict) else None
    if ends == collapse_ends(None)["pattern"]["Regex"]:
        return ""
    marker = ends[7] if isinstance(ends, str) and len(ends) == 12 else ""
    return marker if marker and ends == collapse_ends(marker)["pattern"]["Regex"] else None


def _byte_token(text: str) -> int | None:
    """The byte of a byte fallback token, spelled as tokenizers looks it up (``<0x0A>``), or None."""
    digits = text[3:5]
    if len(text) == 6 and text.startswith("<0x") and text.endswith(">") and all(c in "0123456789ABCDEF"
                                                                                 for c in digits):
        return int(digits, 16)
    return None


def _type(node: Any) -> str | None:
    return node.get("type") if isinstance(node, dict) else None


def _show(token: bytes, byte_level: bool) -> str:
    return token_to_str(token) if byte_level else token.decode("utf-8", "replace")
