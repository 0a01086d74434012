"""How close bpestore's training with SentencePiece's options comes to spm_train's BPE.

    python -m bench.spm_training CORPUS VOCAB_SIZE [spm_option=value ...]

Both train on the lines of CORPUS (bpestore: metaspace words, dummy prefix,
collapse-spaces, characters, layout sentencepiece, piece segmentation;
sentencepiece: --model_type=bpe, identity normalizer, character_coverage 1.0,
the same vocabulary size). Prints the merged pieces both hold (as a share of
SentencePiece's) and the lines each encodes into the same pieces.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile


def main(argv: list[str]) -> None:
    import sentencepiece as spm

    import bpestore

    corpus, vocab_size = argv[0], int(argv[1])
    extra = dict(arg.split("=", 1) for arg in argv[2:])
    lines = [line for line in open(corpus, encoding="utf-8").read().split("\n") if line.strip()]
    store = bpestore.open(os.path.join(tempfile.mkdtemp(), "b.db"))
    store.ingest("c", [corpus], pretokenizer="metaspace", space_marker="▁", dummy_prefix="always",
                 normalizer="collapse-spaces")
    store.train("b", corpus="c", vocab_size=vocab_size, alphabet="chars", unk_token="<unk>",
                layout="sentencepiece", segmentation="piece", special_tokens=["<s>", "</s>"])
    tok = store.tokenizer("b")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="bpe",
                                   vocab_size=len(tok.vocab), normalization_rule_name="identity",
                                   character_coverage=1.0, minloglevel=2, **extra)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    sp_pieces = {sp.id_to_piece(i) for i in range(sp.get_piece_size())
                 if len(sp.id_to_piece(i)) > 1 and not (sp.is_control(i) or sp.is_unknown(i) or sp.is_byte(i))}
    reserved = {*tok.special_tokens.values(), tok.token_id("<unk>")}
    ours = {data.decode() for i, data in tok.vocab.items() if i not in reserved and len(data.decode()) > 1}
    same = sum(1 for line in lines if [sp.id_to_piece(i) for i in sp.encode(line)] ==
               [tok.vocab[i].decode() for i in tok.encode_ordinary(line)])
    shared = len(sp_pieces & ours)
    print(f"{os.path.basename(corpus)}: merged pieces {len(sp_pieces)} (sentencepiece) {len(ours)} (bpestore), "
          f"shared {shared} ({100 * shared / len(sp_pieces):.1f}%); identical lines {same}/{len(lines)} "
          f"({100 * same / len(lines):.1f}%) {extra or ''}")


if __name__ == "__main__":
    main(sys.argv[1:])
