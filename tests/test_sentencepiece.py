"""SentencePiece BPE models in and out, checked against the ``sentencepiece``
package itself: models trained by ``spm_train`` (its Python entry) imported and
encoding every line of the shared corpora to sentencepiece's ids; bpestore's
own training with the SentencePiece options exported to a ``.model`` that
sentencepiece loads and encodes with identically."""

from __future__ import annotations

import io
import json

import pytest

from tests.conftest import assert_error, read_corpus

spm = pytest.importorskip("sentencepiece")

# (corpus, vocabulary size, spm_train options): every option the import maps is
# met somewhere: byte fallback, remove_extra_whitespaces off, add_dummy_prefix off.
CASES = [
    ("tinyshakespeare.txt", 1000, {}),
    ("german_1M.txt", 2000, {"byte_fallback": True}),
    ("russian_1M.txt", 2000, {"byte_fallback": True, "remove_extra_whitespaces": False}),
    ("hindi_1M.txt", 2000, {"byte_fallback": True}),
    ("chinese_1M.txt", 5000, {"byte_fallback": True, "character_coverage": 0.995}),
    ("japanese_1M.txt", 5000, {"character_coverage": 0.995}),
    ("code_python_5M.txt.xz", 2000, {"byte_fallback": True, "remove_extra_whitespaces": False,
                                     "add_dummy_prefix": False}),
]
LINES = 20_000  # of each corpus (code has 130,000)


def spm_train(lines: list[str], vocab_size: int, **options) -> bytes:
    """A model trained by sentencepiece's own BPE trainer (spm_train's Python entry)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter([line for line in lines if line.strip()]),
                                   model_writer=model, model_type="bpe", vocab_size=vocab_size,
                                   normalization_rule_name="identity", minloglevel=2, **options)
    return model.getvalue()


def corpus_lines(name: str) -> list[str]:
    return read_corpus(name).split("\n")[:LINES]


def assert_same_encoding(sp, tok, lines: list[str]) -> None:
    """Every line: sentencepiece's ids; and its decoded text where no unknown piece
    shows (sentencepiece writes one as ' ⁇ ', bpestore as the token's text)."""
    unk = sp.unk_id()
    for line in lines:
        ids = sp.encode(line)
        assert tok.encode_ordinary(line) == ids, line
        if unk not in ids:
            assert tok.decode(ids) == sp.decode(ids), line


@pytest.mark.parametrize(("name", "vocab_size", "options"), CASES, ids=[c[0].split("_")[0] for c in CASES])
def test_spm_trained_model_imported_encodes_as_sentencepiece(name, vocab_size, options, tmp_path):
    import bpestore

    lines = corpus_lines(name)
    (tmp_path / "m.model").write_bytes(spm_train(lines, vocab_size, **options))
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    store = bpestore.open(str(tmp_path / "s.db"))
    info = store.import_sentencepiece("sp", tmp_path / "m.model")
    assert info.vocab_size == sp.get_piece_size()
    tok = store.tokenizer("sp")
    # The ids are SentencePiece's: the unknown, control and byte pieces at its places.
    assert tok.token_id("<unk>") == sp.unk_id() == 0
    assert tok.special_tokens == {"<s>": sp.bos_id(), "</s>": sp.eos_id()}
    if options.get("byte_fallback"):
        assert tok.decode_single_token_bytes(sp.piece_to_id("<0x41>")) == b"A"
    assert tok.spec.byte_fallback == bool(options.get("byte_fallback"))
    assert tok.spec.dummy_prefix == ("always" if options.get("add_dummy_prefix", True) else "never")
    assert_same_encoding(sp, tok, lines)


def test_unseen_characters_become_unknown_or_bytes_as_in_sentencepiece(tmp_path):
    import bpestore

    lines = corpus_lines("tinyshakespeare.txt")
    texts = ["naïve café — 東京 🙂", "  leading and   inner  spaces  ", "", "   ", "▁marker ▁ inside", "x"]
    store = bpestore.open(str(tmp_path / "s.db"))
    for fallback in (False, True):
        model = tmp_path / f"m{fallback}.model"
        model.write_bytes(spm_train(lines, 600, byte_fallback=fallback))
        sp = spm.SentencePieceProcessor(model_file=str(model))
        tok = store.tokenizer(store.import_sentencepiece(f"sp{int(fallback)}", model).ref)
        for text in texts:
            assert tok.encode_ordinary(text) == sp.encode(text), text
        assert (sp.unk_id() in sp.encode("東京")) is not fallback


def test_bpestore_trained_model_exports_and_sentencepiece_encodes_identically(cli_run, tmp_path):
    spec_options = ["--alphabet", "chars", "--unk-token", "<unk>", "--byte-fallback", "--fuse-unk", "--layout",
                    "sentencepiece", "--segmentation", "piece", "--special-token", "<s>", "--special-token", "</s>"]
    for name in ("tinyshakespeare.txt", "russian_1M.txt"):
        corpus = tmp_path / name
        lines = corpus_lines(name)
        corpus.write_text("\n".join(lines), encoding="utf-8")
        stem = name.split(".")[0].split("_")[0]
        assert cli_run("ingest", stem, str(corpus), "--pretokenizer", "metaspace", "--space-marker", "▁",
                       "--dummy-prefix", "always", "--normalizer", "collapse-spaces").exit_code == 0
        result = cli_run("train", stem, "--corpus", stem, "--vocab-size", "1500", *spec_options)
        assert result.exit_code == 0, result.output
        model = tmp_path / f"{stem}.model"
        assert cli_run("export", stem, "--format", "sentencepiece", "--out", str(model)).exit_code == 0
        sp = spm.SentencePieceProcessor(model_file=str(model))
        import bpestore

        tok = bpestore.open(cli_run.db).tokenizer(stem)
        assert sp.get_piece_size() == len(tok.vocab)
        assert (sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, 2)
        assert_same_encoding(sp, tok, lines + ["unseen: 東京 🙂", "  two  spaces "])
        # The options are the version's spec, so its fingerprint's.
        spec = json.loads(cli_run("versions", stem, "--json").output)[0]["spec"]
        assert {k: spec[k] for k in ("space_marker", "dummy_prefix", "layout", "segmentation", "pretokenizer")} == \
            {"space_marker": "▁", "dummy_prefix": "always", "layout": "sentencepiece", "segmentation": "piece",
             "pretokenizer": "metaspace"}


def test_imported_model_exports_to_the_same_pieces(tmp_path):
    import bpestore

    model = tmp_path / "m.model"
    model.write_bytes(spm_train(corpus_lines("german_1M.txt"), 1500, byte_fallback=True))
    store = bpestore.open(str(tmp_path / "s.db"))
    store.import_sentencepiece("de", model)
    store.export("de", format="sentencepiece", out=tmp_path / "back.model")
    a, b = (spm.SentencePieceProcessor(model_file=str(p)) for p in (model, tmp_path / "back.model"))
    assert [a.id_to_piece(i) for i in range(a.get_piece_size())] == \
        [b.id_to_piece(i) for i in range(b.get_piece_size())]
    merged = [i for i in range(a.get_piece_size()) if a.get_score(i) < 0 and len(a.id_to_piece(i)) > 1]
    # Scores may differ (bpestore writes -rank), their order among merged pieces may not.
    assert sorted(merged, key=a.get_score) == sorted(merged, key=b.get_score)
    for line in corpus_lines("german_1M.txt")[:3000]:
        assert a.encode(line) == b.encode(line)


def test_protobuf_codec_reads_what_sentencepiece_writes(tmp_path):
    from bpestore.formats.sentencepiece import BYTE, CONTROL, NORMAL, UNKNOWN, parse_model, serialize_model

    data = spm_train(corpus_lines("tinyshakespeare.txt"), 500, byte_fallback=True)
    sp = spm.SentencePieceProcessor(model_proto=data)
    model = parse_model(data)
    assert [p.text for p in model.pieces] == [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    assert [p.score for p in model.pieces] == [sp.get_score(i) for i in range(sp.get_piece_size())]
    kinds = {i: BYTE if sp.is_byte(i) else CONTROL if sp.is_control(i) else UNKNOWN if sp.is_unknown(i) else NORMAL
             for i in range(sp.get_piece_size())}
    assert [p.type for p in model.pieces] == [kinds[i] for i in range(sp.get_piece_size())]
    assert model.trainer[3] == 2 and model.trainer[35] == 1  # model_type BPE, byte_fallback
    # What the codec writes, sentencepiece reads back the same.
    again = spm.SentencePieceProcessor(model_proto=serialize_model(model))
    assert [again.id_to_piece(i) for i in range(again.get_piece_size())] == \
        [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def test_what_bpestore_cannot_run_is_refused_by_name(cli_run, tmp_path):
    lines = corpus_lines("tinyshakespeare.txt")
    cases = {
        "unigram": ({"model_type": "unigram"}, "trainer_spec.model_type: UNIGRAM"),
        "unigram-nfkc": ({"model_type": "unigram", "normalization_rule_name": "nmt_nfkc"},
                         "trainer_spec.model_type: UNIGRAM (only BPE models are read)"),
    }
    for name, (options, part) in cases.items():
        model = io.BytesIO()
        settings = {"model_type": "bpe", "normalization_rule_name": "identity", **options}
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines[:3000]), model_writer=model, vocab_size=300,
                                       minloglevel=2, **settings)
        (tmp_path / f"{name}.model").write_bytes(model.getvalue())
        assert_error(cli_run("import", "sentencepiece", name, str(tmp_path / f"{name}.model")), part)
    (tmp_path / "junk.model").write_bytes(b"\xff\xff\xff")
    assert_error(cli_run("import", "sentencepiece", "junk", str(tmp_path / "junk.model")),
                 "is not a SentencePiece model")
    assert "junk" not in cli_run("versions").output and "unigram" not in cli_run("versions").output


def test_export_refuses_a_byte_level_version(cli_run, tmp_path):
    (tmp_path / "t.txt").write_text("the cat and the hat " * 50)
    cli_run("ingest", "c", str(tmp_path / "t.txt"))
    cli_run("train", "b", "--corpus", "c", "--merges", "5")
    assert_error(cli_run("export", "b", "--format", "sentencepiece", "--out", str(tmp_path / "b.model")),
                 "alphabet='bytes'")
    assert not (tmp_path / "b.model").exists()


def test_default_spec_json_and_fingerprints_do_not_change():
    from bpestore.spec import TokenizerSpec

    # The JSON a spec had before the SentencePiece options: the new fields at
    # their defaults are left out, so stored specs and fingerprints stay equal.
    before = ('{"alphabet":"bytes","byte_fallback":false,"end_of_word":null,"no_inner_space":false,'
              '"normalizer":"none","pattern":null,"pretokenizer":"gpt2","special_tokens":[],'
              '"start_of_word":null,"tie_break":"lexicographic","unk_token":null}')
    assert TokenizerSpec().to_json() == before
    assert TokenizerSpec.from_json(before) == TokenizerSpec()
    assert TokenizerSpec().corpus_key() == {"normalizer": "none", "pretokenizer": "gpt2", "pattern": None,
                                            "special_tokens": []}


# -- untrusted model files (issue 37) ------------------------------------------------------------
def small_model(**options) -> bytes:
    return spm_train(corpus_lines("tinyshakespeare.txt")[:3000], 400, **options)


def edited(data: bytes, edit) -> bytes:
    """The model with ``edit(model)`` applied to its parsed pieces, written again."""
    from bpestore.formats.sentencepiece import parse_model, serialize_model

    model = parse_model(data)
    edit(model)
    return serialize_model(model)


def sentencepiece_refuses(data: bytes) -> bool:
    try:
        spm.SentencePieceProcessor(model_proto=data)
    except (RuntimeError, OSError):
        return True
    return False


def test_pieces_sentencepiece_refuses_are_refused_in_one_line(cli_run, tmp_path):
    from bpestore.formats.sentencepiece import BYTE, NORMAL

    data = small_model(byte_fallback=True)
    pieces = spm.SentencePieceProcessor(model_proto=data)
    byte_a = pieces.piece_to_id("<0x41>")
    normal = next(i for i in range(pieces.get_piece_size()) if pieces.id_to_piece(i) == "▁the")
    assert not pieces.is_byte(normal) and pieces.is_control(1)

    def set_text(index, text):
        return lambda model: setattr(model.pieces[index], "text", text)

    bad = {f"byte{n}": set_text(byte_a, text) for n, text in enumerate(
        ["<0xZZ>", "<0x-1>", "<0x_1>", "<0x+F>", "<0x 1>", "<0x4a>", "<0x041>", "A"])}
    bad["nul"] = set_text(normal, "th\0e")
    bad["nulbyte"] = set_text(byte_a, "<0x\0A>")
    bad["control-as-normal"] = set_text(1, "▁the")
    bad["two-unknown"] = set_text(normal, "<unk>")
    for name, edit in bad.items():
        model = edited(data, edit)
        assert sentencepiece_refuses(model), name
        (tmp_path / f"{name}.model").write_bytes(model)
        result = cli_run("import", "sentencepiece", name, str(tmp_path / f"{name}.model"))
        assert_error(result, f"{name}.model")
    # Scores that order nothing: sentencepiece loads them, its ids then follow no order bpestore can keep.
    for name, score in (("nan", float("nan")), ("inf", float("inf")), ("minf", float("-inf"))):
        model = edited(data, lambda m, s=score: setattr(m.pieces[normal], "score", s))
        (tmp_path / f"{name}.model").write_bytes(model)
        assert_error(cli_run("import", "sentencepiece", name, str(tmp_path / f"{name}.model")), f"score {score}")
    assert BYTE != NORMAL and cli_run("versions").output.strip().count("\n") <= 1


def test_files_that_are_not_models_are_refused_before_reading(cli_run, tmp_path):
    import os

    from bpestore.formats.sentencepiece import MAX_MODEL_BYTES

    assert_error(cli_run("import", "sentencepiece", "z", "/dev/zero"), "not a regular file")
    os.mkfifo(tmp_path / "fifo")
    assert_error(cli_run("import", "sentencepiece", "f", str(tmp_path / "fifo")), "not a regular file")
    with open(tmp_path / "huge.model", "wb") as file:  # sparse: no disk used
        file.truncate(MAX_MODEL_BYTES + 1)
    assert_error(cli_run("import", "sentencepiece", "h", str(tmp_path / "huge.model")),
                 f"over {MAX_MODEL_BYTES >> 20} MiB")


def test_a_model_of_ten_million_pieces_is_refused_quickly(cli_run, tmp_path):
    import resource
    import time

    (tmp_path / "many.model").write_bytes(b"\n\x03\n\x01a" * 10_000_000)  # 50 MB of one-letter pieces
    before, started = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.process_time()
    assert_error(cli_run("import", "sentencepiece", "many", str(tmp_path / "many.model")), "1,000,000 pieces")
    assert time.process_time() - started < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 400_000  # KiB


def test_long_pieces_are_read_as_sentencepiece_reads_them(tmp_path):
    import time

    import bpestore
    from bpestore.formats.sentencepiece import MAX_PIECE_BYTES, NORMAL

    data = small_model()
    store = bpestore.open(str(tmp_path / "s.db"))

    def lengthen(model, text):
        last = max(i for i, p in enumerate(model.pieces) if p.type == NORMAL)
        model.pieces[last].text = text
    # The longest piece sentencepiece loads is read and encodes as there; longer ones are refused by both, quickly.
    for size, text in ((MAX_PIECE_BYTES, "ab" * (MAX_PIECE_BYTES // 2) + "c"), (2666, "€" * 2666),
                       (160_000, "ab" * 80_000), (320_000, "ab" * 160_000), (8001, "€" * 2667)):
        model = edited(data, lambda m, t=text: lengthen(m, t))
        (tmp_path / f"{size}.model").write_bytes(model)
        started = time.process_time()
        if sentencepiece_refuses(model):
            with pytest.raises(bpestore.DamagedDataError, match=f"over {MAX_PIECE_BYTES} bytes"):
                store.import_sentencepiece(f"long{size}", tmp_path / f"{size}.model")
            assert time.process_time() - started < 2, size  # was quadratic: 10 s and 34.5 s
            continue
        assert size <= MAX_PIECE_BYTES
        tok = store.tokenizer(store.import_sentencepiece(f"long{size}", tmp_path / f"{size}.model").ref)
        sp = spm.SentencePieceProcessor(model_proto=model)
        for line in ("Hello world, the king", "abab" * 10, text[:50], text):
            assert tok.encode_ordinary(line) == sp.encode(line)


def test_without_a_space_piece_unknown_runs_stay_whole(tmp_path):
    import bpestore
    from bpestore.formats.sentencepiece import NORMAL

    def keep_few(model):
        model.pieces[:] = [p for p in model.pieces if p.type != NORMAL or p.text in ("x", "y", "z", "xy")]
    (tmp_path / "m.model").write_bytes(edited(small_model(), keep_few))
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    assert sp.encode("Hello world") == [0]
    tok = bpestore.open(str(tmp_path / "s.db")).import_sentencepiece("m", tmp_path / "m.model")
    tok = bpestore.open(str(tmp_path / "s.db")).tokenizer("m")
    for text in ("Hello world", "Hello xy world", "xy  xyz q", " x ", "a b c"):
        assert tok.encode_ordinary(text) == sp.encode(text), text


# -- SentencePiece's normalizers (issue 34) ---------------------------------------------------------
ODD = ["\uff21\uff42\uff43", "\uff11\uff12\uff13", "\ufb01", "\ufb02", "\u00bd", "\u2460", "\u2122", "\u00c5",
       "\u212b", "\u1e9b\u0323", "\u00df", "\u0130", "\u03a3\u03c2", "\u3131", "\uac00", "\u1100\u1161", "\u00a8",
       "e\u0301", "\u00e9", "\u2581", "\u00a0", "\u3000", "\u2002", "\u200b", "\t", "\r", "\x7f", "\x01", "\u2028",
       "\ufe64", "\u33a1", "\u2163", "\uff76\uff9e", "\U0001d400"]


def odd_lines(n: int, seed: int) -> list[str]:
    """Lines of English words mixed with full-width, ligature and compatibility characters and odd spaces."""
    import random

    rng = random.Random(seed)
    words = " ".join(corpus_lines("tinyshakespeare.txt")[:4000]).split()
    lines = []
    for _ in range(n):
        parts = [rng.choice(words) if rng.random() < 0.7 else rng.choice(ODD) for _ in range(rng.randint(0, 12))]
        lines.append("".join(p + rng.choice([" ", " ", " ", "  ", "\u3000", "\u00a0", "", "\t"]) for p in parts))
    return lines


@pytest.mark.parametrize("options", [{}, {"normalization_rule_name": "nfkc_cf", "byte_fallback": True},
                                     {"normalization_rule_name": "nmt_nfkc_cf", "remove_extra_whitespaces": False},
                                     {"normalization_rule_name": "nfkc", "add_dummy_prefix": False}],
                         ids=["nmt_nfkc", "nfkc_cf", "nmt_nfkc_cf", "nfkc"])
def test_precompiled_normalizers_encode_as_sentencepiece(options, tmp_path):
    import bpestore
    from bpestore.formats.sentencepiece import parse_model

    model = io.BytesIO()  # sentencepiece's defaults: nmt_nfkc, add_dummy_prefix, remove_extra_whitespaces
    spm.SentencePieceTrainer.train(sentence_iterator=iter(odd_lines(3000, 1)), model_writer=model, model_type="bpe",
                                   vocab_size=800, minloglevel=2, **options)
    (tmp_path / "m.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    store = bpestore.open(str(tmp_path / "s.db"))
    tok = store.tokenizer(store.import_sentencepiece("n", tmp_path / "m.model").ref)
    lines = odd_lines(3000, 2) + ["", " ", "\u3000\u3000", " \ufb01 ", "\u200b", "\u200b x", "\u00a8", " \u00a8x"]
    assert any(sp.normalize(line) != line for line in lines)
    assert_same_encoding(sp, tok, lines)
    # Exported, the map is written back byte for byte and sentencepiece encodes the same.
    store.export("n", format="sentencepiece", out=tmp_path / "back.model")
    original, back = (parse_model(p.read_bytes()).normalizer for p in (tmp_path / "m.model", tmp_path / "back.model"))
    assert back[1] == original[1] and back[2] == original[2] and len(original[2]) > 100_000
    shown = tok.spec.display_json()  # what ``show`` prints: the map's name and size, not its bytes
    assert f'"charsmap":"{original[1].decode()} ({len(original[2]):,} bytes)"' in shown and len(shown) < 1000
    again = spm.SentencePieceProcessor(model_file=str(tmp_path / "back.model"))
    for line in lines:
        assert again.encode(line) == sp.encode(line), line


@pytest.mark.parametrize("options", [{"normalization_rule_name": "identity"}, {"byte_fallback": True},
                                     {"add_dummy_prefix": False, "normalization_rule_name": "identity"},
                                     {"remove_extra_whitespaces": False}],
                         ids=["identity", "nmt_nfkc", "no-dummy", "keep-spaces"])
def test_whitespace_as_suffix_encodes_as_sentencepiece(options, tmp_path):
    import bpestore

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(odd_lines(3000, 3)), model_writer=model, model_type="bpe",
                                   vocab_size=800, minloglevel=2, treat_whitespace_as_suffix=True, **options)
    (tmp_path / "m.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    assert any(len(piece) > 1 and piece.endswith("▁") for piece in sp.encode("the king", out_type=str))
    store = bpestore.open(str(tmp_path / "s.db"))
    tok = store.tokenizer(store.import_sentencepiece("s", tmp_path / "m.model").ref)
    assert tok.spec.space_suffix
    lines = odd_lines(2000, 4) + ["", " ", "x", " the  king ", "a▁b", "▁", "the▁ ", "\u3000the"]
    assert_same_encoding(sp, tok, lines)
    store.export("s", format="sentencepiece", out=tmp_path / "back.model")
    again = spm.SentencePieceProcessor(model_file=str(tmp_path / "back.model"))
    for line in lines:
        assert again.encode(line) == sp.encode(line), line
