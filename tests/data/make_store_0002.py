"""Builds tests/data/store_0002.db with bpestore as it was at schema revision 0002
(commit b2433bd, before corpus generations), and tests/data/store_0002.json with what
that code reported about it: the reference the 0003 migration test checks against.

Run from a checkout of that commit:  python make_store_0002.py OUT_DIR CORPORA_DIR
"""
import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import bpestore

out, corpora = Path(sys.argv[1]), Path(sys.argv[2])
db = out / "store_0002.db"
db.unlink(missing_ok=True)
src = out / "src"
src.mkdir(exist_ok=True)
text = (corpora / "tinyshakespeare.txt").read_text(encoding="utf-8")
(src / "a.txt").write_text(text[:30_000], encoding="utf-8")
(src / "b.txt").write_text(text[30_000:60_000], encoding="utf-8")
(src / "de.txt").write_text((corpora / "german_1M.txt").read_text(encoding="utf-8")[:20_000], encoding="utf-8")

store = bpestore.open(str(db))
store.ingest("plays", [src / "a.txt"], special_tokens=["<|endoftext|>"], workers=1)
old = store.train("en", corpus="plays", vocab_size=300)                     # en@1: on a.txt only
store.ingest("plays", [src / "b.txt"], workers=1)
cur = store.train("en", corpus="plays", vocab_size=330)                     # en@2: a + b
ext = store.train("en", corpus="plays", vocab_size=360, parent="en@2")      # en@3: extends en@2
store.set_alias("en@3", "prod")
stop = {"n": 0}


class Stop(Exception):
    pass


def halt(p):
    if p.done >= 60:
        raise Stop


try:
    store.train("half", corpus="plays", vocab_size=500, checkpoint_every=20, progress=halt)
except Stop:
    pass
store.ingest("de", [src / "de.txt"], pretokenizer="whitespace", workers=1)
store.train("de", corpus="de", merges=50, tie_break="hf")

def counts_sha256(counts):
    """sha256 over the sorted (word, count) pairs: equal iff the counts are."""
    h = hashlib.sha256()
    for word, n in sorted(counts.items()):
        h.update(word.hex().encode() + b"=" + str(n).encode() + b";")
    return h.hexdigest()


reference = {
    "corpora": {c.name: {**c.to_dict(), "counts_sha256": counts_sha256(store.word_counts(c.name)),
                         "top_words": [[w.hex(), n] for w, n in store.top_words(c.name, 5)]}
                for c in store.corpora()},
    "versions": [v.to_dict() for v in store.versions()],
    "encodings": {v.ref: store.tokenizer(v.ref).encode("To be, or not to be: that is the question. Über alles!")
                  for v in store.versions() if v.status == "complete"},
}
(out / "store_0002.json").write_text(json.dumps(reference, indent=1, default=str, ensure_ascii=False))
store.close()
with sqlite3.connect(db) as conn:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
for f in src.iterdir():
    f.unlink()
src.rmdir()
print(db, db.stat().st_size)
