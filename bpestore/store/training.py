"""Training versions: a new run, a run reusing an equal run's merges, an
extension of a parent, a resumed run; and the checkpoint writer.

The merges come from the pure trainer (``BpeTrainer``); every read and write
goes through the repository. Merges are written as they are made, so a run
stopped anywhere resumes from its last checkpoint and ends with exactly the
merges of an uninterrupted run (the checkpoints: ``checkpoints.CheckpointWriter``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from ..alphabet import (
    hf_order,
    initial_kinds,
    initial_vocab,
    initial_words,
    merge_filter,
)
from ..errors import BpestoreWarning, ConflictError, DamagedDataError, InvalidArgumentError
from ..limits import DEFAULT_CHECKPOINT_EVERY, DEFAULT_CHECKPOINT_SECONDS, MAX_INT
from ..queries import token_text
from ..records import Merge, Progress, VerifyResult, VersionInfo
from ..spec import TokenizerSpec, check_special_tokens, fingerprint, fingerprint_of_columns
from ..trainer import BpeTrainer
from . import count_tables, locks, snapshot, vocab_tables
from .checkpoints import CheckpointWriter
from .corpus_tables import CorpusReads, lock_corpus_row
from .drivers import Transaction, Transactions
from .mixtures import check_same_words, mixture_counts, mixture_digest
from .version_tables import (
    VersionReads,
    add_inputs,
    add_snapshot,
    new_version,
    record_checkpoint,
    try_lock_training,
    unlock_training,
)
from .vocabulary import Vocabulary

STEP_SECONDS = 0.2  # the merge loop comes back to Python at least this often (progress, Ctrl-C)
# The spec fields that say how words become initial symbols; an extension keeps its parent's.
SYMBOLIZATION = ("alphabet", "unk_token", "byte_fallback", "end_of_word", "start_of_word", "no_inner_space",
                 "layout", "fuse_unk", "end_of_word_suffix")


@dataclass(frozen=True)
class TrainOptions:
    """How to train a version: the options of ``Store.train`` (listed there) as
    one value, checked when made.

    >>> TrainOptions(vocab_size=1000, tie_break="hf").spec_changes()
    {'tie_break': 'hf'}
    """

    vocab_size: int | None = None
    merges: int | None = None
    min_frequency: int = 1
    tie_break: str | None = None
    special_tokens: Sequence[str] | None = None
    parent: str | None = None
    max_token_length: int | None = None
    alphabet: str | None = None
    unk_token: str | None = None
    byte_fallback: bool | None = None
    end_of_word: str | None = None
    start_of_word: str | None = None
    no_inner_space: bool | None = None
    segmentation: str | None = None
    layout: str | None = None
    fuse_unk: bool | None = None
    end_of_word_suffix: str | None = None
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY
    checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS
    weights: Sequence[int] | None = None  # of the corpora, one each: a mixture (``mixture_counts``)

    def __post_init__(self) -> None:
        if self.weights is not None:
            object.__setattr__(self, "weights", tuple(self.weights))
            bad = [w for w in self.weights if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= MAX_INT]
            if bad:
                raise InvalidArgumentError(f"a weight is a whole number from 1 to {MAX_INT:,}, not {bad[0]!r}",
                                           params=("weights",))
        if self.special_tokens is not None:
            object.__setattr__(self, "special_tokens", tuple(self.special_tokens))
            check_special_tokens(self.special_tokens)
        if (self.vocab_size is None) == (self.merges is None):
            raise InvalidArgumentError("give either vocab_size or merges", params=("vocab_size", "merges"))
        for param in ("vocab_size", "merges", "min_frequency", "max_token_length", "checkpoint_every"):
            value = getattr(self, param)
            if value is not None and not isinstance(value, int):
                raise InvalidArgumentError(f"{param} must be a whole number, not {value!r}", params=(param,))
            if (value or 0) < 0:
                raise InvalidArgumentError(f"{param} cannot be negative", params=(param,))
            if (value or 0) > MAX_INT:
                raise InvalidArgumentError(f"{param} must be at most {MAX_INT:,}, not {value:,}", params=(param,))
        if self.checkpoint_every < 1:
            raise InvalidArgumentError("checkpoint_every must be at least 1", params=("checkpoint_every",))

    @classmethod
    def given(cls, options: TrainOptions | None, settings: Mapping[str, Any]) -> TrainOptions:
        """``options`` (or the defaults) with ``settings``, options by name, on top."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(settings) - set(names))
        if unknown:
            raise InvalidArgumentError(f"unknown training option {', '.join(unknown)}; the options are "
                                       f"{', '.join(names)}", params=tuple(unknown))
        return cls(**settings) if options is None else dataclasses.replace(options, **settings)

    def spec_changes(self) -> dict[str, Any]:
        """The spec fields these options set; the others come from the corpus (or the parent)."""
        return {name: getattr(self, name) for name in ("special_tokens", "tie_break", "segmentation", *SYMBOLIZATION)
                if getattr(self, name) is not None}


def train(db: Transactions, name: str, corpus: str | Sequence[str], options: TrainOptions,
          progress: Callable[[Progress], None] | None = None) -> int:
    """Train the next version of ``name`` on ``corpus`` (``C@N``: generation N,
    ``C``: the newest); returns its id, complete. The version pins the generation.
    Several corpora (with ``options.weights``, one each; default 1): a mixture, each
    generation's counts multiplied by its weight and added (``mixture_counts``).

    Creating the version (its row, initial tokens, and the merges it takes from
    a parent or an equal run) is one transaction; training on is checkpointed.
    """
    refs = [corpus] if isinstance(corpus, str) else list(corpus)
    weights = list(options.weights) if options.weights is not None else [1] * len(refs)
    if not refs or len(weights) != len(refs):
        raise InvalidArgumentError(f"give one weight per corpus, in order ({len(refs)} corpora, {len(weights)} given)",
                                   params=("weights",))
    with db.writing() as tx:
        corpora = CorpusReads(tx)
        parts, spec_of = [], {}
        for ref, weight in zip(refs, weights):
            corpus_name = ref.partition("@")[0]
            # Locked, so an ingest either sees this version's pin or makes the generation it pins.
            lock_corpus_row(tx, corpora.corpus_id(corpus_name))
            corpus_id, generation = corpora.readable_generation(ref)
            spec_of[ref] = corpora.spec(corpus_name)
            if not count_tables.has_words(tx, corpus_id, generation):
                raise ConflictError(f"corpus {ref!r} has no words yet; ingest text first")
            parts.append((corpus_id, generation, weight))
        corpus_spec = spec_of[refs[0]]
        assert corpus_spec is not None
        check_same_words(spec_of, refs[0])
        if len({(c, g) for c, g, _ in parts}) < len(parts):
            raise InvalidArgumentError("a corpus generation is named twice in the mixture; give it one weight",
                                       params=("corpus",))
        corpus_id, generation, _ = parts[0]
        mixed = parts if len(parts) > 1 or weights[0] != 1 else []
        settings: dict[str, Any] = dict(
            corpus_id=corpus_id, target_vocab_size=options.vocab_size, target_merges=options.merges,
            min_frequency=options.min_frequency, max_token_length=options.max_token_length,
            status="training", source="trained", corpus_generation=generation,
            corpus_digest=mixture_digest(corpora, mixed) if mixed else corpora.generation_digest(corpus_id, generation))
        if options.parent is None:
            version_id, initial = _new_root(tx, name, corpus_spec, options, settings, mixed)
            if mixed:
                add_inputs(tx, version_id, mixed)
            reused = _reuse_merges(tx, version_id, initial)
        else:
            version_id = _extend(tx, name, corpus_spec, options, settings)
            if mixed:
                add_inputs(tx, version_id, mixed)
            reused = False
        if VersionReads(tx).info(version_id).spec.tie_break == "first-seen":  # (refused: rolled back)
            if mixed:
                raise InvalidArgumentError("tie_break='first-seen' trains on one corpus generation, unweighted: "
                                           "the order words first occur in is not defined for a mixture",
                                           params=("tie_break", "weights"))
            _check_ordinals(corpora, corpus_id, generation)
    if progress is not None and options.parent is None:
        _report_taken(db, version_id, progress)
    if reused:
        return version_id
    run(db, version_id, options.checkpoint_every, options.checkpoint_seconds, progress)
    return version_id


def _check_ordinals(corpora: CorpusReads, corpus_id: int, generation: int) -> None:
    """ConflictError, naming it, where a corpus generation keeps no ordinals (where in
    the text each word first occurs), which tie_break='first-seen' trains on."""
    if corpora.ordinal_end(corpus_id, generation) is None:
        ref = f"{corpora.row(corpus_id).name}@{generation}"
        raise ConflictError(f"corpus generation {ref} does not keep where in the text each word first occurs "
                            "(it, or a generation before it, was ingested before bpestore kept that), which "
                            "tie_break='first-seen' needs; ingest its sources again into a new corpus, then train "
                            "on that", params=("tie_break",))


def _report_taken(db: Transactions, version_id: int, progress: Callable[[Progress], None]) -> None:
    """The callback hears each merge a new version took from an equal run, in order,
    as the run making it would have told it."""
    with db.reading() as tx:
        reads = VersionReads(tx)
        v = reads.info(version_id)
        stored = reads.rows_vocabulary(version_id)
    total = _merges_total(v, sum(kind != "merge" for kind in stored.kinds.values()))
    for merge in stored.merges:
        progress(Progress("train", v.ref, merge.rank + 1, total, "merges", merge=merge,
                          token=stored.tokens[merge.token]))


def _merges_total(v: VersionInfo, n_initial: int) -> int | None:
    """The merges a version's run makes in all (a vocabulary target counts the alphabet and specials too)."""
    target = v.target_merges if v.target_merges is not None else v.target_vocab_size
    return None if target is None else target - (n_initial if v.target_merges is None else 0)


def _new_root(tx: Transaction, name: str, corpus_spec: TokenizerSpec, options: TrainOptions,
              settings: dict[str, Any], mixed: Sequence[tuple[int, int, int]]) -> tuple[int, Vocabulary]:
    """A version without parent (its spec: the corpus' with the options' changes),
    with its initial tokens; returns its id and those tokens."""
    spec = corpus_spec.replace(**options.spec_changes())
    words: Iterable[bytes] = (mixture_counts(tx, mixed) if mixed else (word for word, _ in count_tables.count_rows(
        tx, settings["corpus_id"], settings["corpus_generation"])))
    initial = initial_vocab(spec, None if spec.byte_level else words)
    if options.vocab_size is not None and options.vocab_size < len(initial):
        n = len(spec.special_tokens)
        raise InvalidArgumentError(f"vocab_size must be at least {len(initial)} (the initial alphabet "
                                   f"and {n} special token{'' if n == 1 else 's'})", params=("vocab_size",))
    unsplit = [t for t in spec.special_tokens if t not in corpus_spec.special_tokens]
    if unsplit:
        warnings.warn(BpestoreWarning(
            f"special token{'s' if len(unsplit) > 1 else ''} {', '.join(map(repr, unsplit))} "
            f"{'were' if len(unsplit) > 1 else 'was'} not given when the corpus was ingested: the corpus' words "
            f"were not cut at {'them' if len(unsplit) > 1 else 'it'} (where the text holds one, training saw it "
            "as ordinary text); to train on words cut there, ingest the text into a new corpus with "
            "--special-token"), stacklevel=2)
    version_id = new_version(tx, name, spec=spec, **settings)
    kinds = initial_kinds(spec, initial)
    vocab_tables.add_tokens(tx, version_id, range(len(initial)), initial, kinds)
    return version_id, Vocabulary.from_rows(zip(range(len(initial)), initial, kinds), [])


def _reuse_merges(tx: Transaction, version_id: int, initial: Vocabulary) -> bool:
    """Start a new version from the merges of an equal run, if there is one.

    Training is deterministic and its stopping point does not change the
    merges before it, so a root version trained on the same counts (same
    corpus digest) with the same spec and limits holds a prefix of this
    version's merges, or all of them. Copies that prefix; returns True when
    it already reaches the target (the version is then complete, its snapshot made
    from ``initial`` and the merges copied).
    """
    reads = VersionReads(tx)
    found = reads.longest_equal_run(version_id)
    if found is None:
        return False
    donor_id, donor_merges = found
    new, donor = reads.info(version_id), reads.info(donor_id)
    # A prefix of a complete donor's merges that pass the check passes too.
    passing = reads.passing_merges(donor_id) if donor.status == "complete" else 0
    n_initial = new.vocab_size
    # The prefix this version's own run would make before reaching its target.
    taken, n_tokens = 0, n_initial
    for merge in donor_merges:
        if (new.target_vocab_size is not None and n_tokens >= new.target_vocab_size) or (
                new.target_merges is not None and taken >= new.target_merges):
            break
        taken += 1
        n_tokens = max(n_tokens, merge.token + 1)
    reached = (n_tokens >= new.target_vocab_size if new.target_vocab_size is not None
               else new.target_merges is not None and taken >= new.target_merges)
    # A complete donor that stopped short of its own target ran out of pairs:
    # this run would stop at the same place.
    exhausted = donor.status == "complete" and taken == len(donor_merges) and (
        (donor.target_vocab_size is not None and n_tokens < donor.target_vocab_size)
        or (donor.target_merges is not None and taken < donor.target_merges))
    vocab_tables.copy_merges(tx, donor.id, version_id, n_merges=taken, token_ids=(n_initial, n_tokens))
    if not (reached or exhausted):
        return False
    copied = donor_merges[:taken]
    done = fingerprint(new.spec, new.corpus_digest, copied)
    columns = [m.left for m in copied], [m.right for m in copied], [m.token for m in copied], [m.count for m in copied]
    made = snapshot.make(new.spec, _completed(initial, columns), done, checked=min(taken, passing))
    record_checkpoint(tx, version_id, done)
    add_snapshot(tx, version_id, made)
    return True


def _extend(tx: Transaction, name: str, corpus_spec: TokenizerSpec, options: TrainOptions,
            settings: dict[str, Any]) -> int:
    """A child of ``options.parent`` holding copies of its tokens and merges."""
    assert options.parent is not None
    reads = VersionReads(tx)
    parent_id = reads.resolve(options.parent)
    p = reads.info(parent_id)
    changes = options.spec_changes()
    kept = [k for k in SYMBOLIZATION if k in changes and getattr(p.spec, k) != changes[k]]
    if kept:
        raise InvalidArgumentError(f"an extension keeps the {', '.join(kept)} of {p.ref}; leave "
                                   f"{', '.join(kept)} out (or train a new tokenizer)", params=tuple(kept))
    if p.status != "complete":
        raise ConflictError(f"{p.ref} is still training; resume it first to finish it", params=("parent",))
    if p.source != "trained":
        raise InvalidArgumentError(f"{p.ref} was imported ({p.source}); only versions trained by bpestore "
                                   "can be extended so far (their ids 0-255 are the bytes)", params=("parent",))
    # The words the parent was trained on: its corpus' (special tokens given only at its
    # training did not cut them).
    parent_corpus = CorpusReads(tx).spec(p.corpus) if p.corpus else None
    have, want = (parent_corpus or p.spec).corpus_key(), corpus_spec.corpus_key()
    if have != want:
        differ = sorted(k for k in have.keys() | want.keys() if have.get(k) != want.get(k))
        raise InvalidArgumentError(
            f"this corpus was ingested with {', '.join(f'{k}={want.get(k)!r}' for k in differ)}, the words of "
            f"{p.ref} with {', '.join(f'{k}={have.get(k)!r}' for k in differ)}; an extension continues on words "
            f"made the same way: ingest the text into a corpus with {p.ref}'s "
            f"{', '.join(differ)} (or train a new tokenizer)", params=tuple(differ))
    if options.special_tokens is not None and options.special_tokens != p.spec.special_tokens:
        raise InvalidArgumentError(f"an extension keeps the special tokens of {p.ref} "
                                   f"({', '.join(p.spec.special_tokens) or 'none'})", params=("special_tokens",))
    if options.vocab_size is not None and options.vocab_size < p.vocab_size:
        raise InvalidArgumentError(f"{p.ref} already has {p.vocab_size} tokens; an extension's "
                                   "vocab_size must be at least that", params=("vocab_size",))
    if options.merges is not None and options.merges < p.n_merges:
        raise InvalidArgumentError(f"{p.ref} already has {p.n_merges} merges; an extension's "
                                   "merges must be at least that", params=("merges",))
    spec = p.spec.replace(tie_break=options.tie_break or p.spec.tie_break,
                          segmentation=options.segmentation or p.spec.segmentation)
    version_id = new_version(tx, name, spec=spec, parent_id=parent_id, **settings)
    vocab_tables.copy_merges(tx, parent_id, version_id)
    return version_id


def resume(db: Transactions, ref: str, *, checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY,
           checkpoint_seconds: float = DEFAULT_CHECKPOINT_SECONDS,
           progress: Callable[[Progress], None] | None = None) -> int:
    """Continue a version that stopped before its target (``ref`` alone: its newest)."""
    with db.reading() as tx:
        reads = VersionReads(tx)
        version_id = reads.resolve(ref) if "@" in ref else reads.newest(ref)
        v = reads.info(version_id)
        if v.status == "complete":
            raise ConflictError(f"{v.ref} is complete; nothing to resume")
    run(db, version_id, checkpoint_every, checkpoint_seconds, progress)
    return version_id


def pinned_counts(tx: Transaction, v: VersionInfo) -> tuple[dict[bytes, int], str]:
    """The word counts a version trains on (its pinned generation's) and their digest.

    A version from before generations pins none: it trains on the newest counts
    if they are still the ones it began on.
    """
    corpus_id, generation, digest = _pinned_generation(tx, v)
    if v.mixture:
        parts = VersionReads(tx).mixture(v.id)
        return mixture_counts(tx, parts), mixture_digest(CorpusReads(tx), parts)
    return count_tables.counts(tx, corpus_id, generation, first_seen=v.spec.tie_break == "first-seen"), digest


def pinned_rows(tx: Transaction, v: VersionInfo) -> Iterable[tuple[bytes, int]]:
    """``pinned_counts`` as (word, count) rows streamed from the database, for
    the trainer to take one at a time (consume it inside the transaction)."""
    corpus_id, generation, _ = _pinned_generation(tx, v)
    if v.mixture:
        return iter(mixture_counts(tx, VersionReads(tx).mixture(v.id)).items())
    return count_tables.count_rows(tx, corpus_id, generation, first_seen=v.spec.tie_break == "first-seen")


def _pinned_generation(tx: Transaction, v: VersionInfo) -> tuple[int, int | None, str]:
    """The corpus id, generation (None: the newest) and digest of the counts ``v`` trains on."""
    if v.without_counts:
        raise ConflictError(f"{v.ref} was copied here without the word counts of {v.corpus_ref}, which it was "
                            "trained on (they stayed in the store it came from); verify or resume it there, "
                            "or copy it here again with its counts (bpestore copy --with-counts)")
    if v.corpus is None:
        raise InvalidArgumentError(f"{v.ref} was imported ({v.source}); it has no corpus to train on")
    corpora = CorpusReads(tx)
    corpus_id = corpora.corpus_id(v.corpus)
    if v.corpus_generation is None:
        newest_digest = corpora.generation_digest(corpus_id, None)
        if newest_digest != v.corpus_digest:
            raise ConflictError(
                f"{v.ref} was trained before corpus generations existed and {v.corpus!r} has grown since: "
                f"its counts are not kept. Extend it instead: train {v.name} with parent={v.ref!r} "
                f"(bpestore train {v.name} --from {v.ref} --corpus {v.corpus} ...)", params=("parent",))
        return corpus_id, None, newest_digest
    if v.spec.tie_break == "first-seen":  # its words in the order they first occurred
        _check_ordinals(corpora, corpus_id, v.corpus_generation)
    # Pinned, so kept: one statement reads it whatever is ingested meanwhile.
    return corpus_id, v.corpus_generation, corpora.generation_digest(corpus_id, v.corpus_generation)


def _trainer(v: VersionInfo, counts: Mapping[bytes, int] | Iterable[tuple[bytes, int]],
             stored: Vocabulary, initial: list[bytes], replayed: Vocabulary | None) -> BpeTrainer:
    """A trainer for version ``v`` on ``counts`` (a mapping, or (word, count) rows
    taken one at a time), from the ``initial`` tokens, with ``replayed`` merges
    (stored ones) made again; checks they give the same tokens."""
    spec = v.spec
    trainer = BpeTrainer(
        initial_words(spec, counts, initial),
        initial,
        tie_break=spec.tie_break,
        hf_order=hf_order(spec, initial) if spec.tie_break == "hf" else None,
        min_frequency=v.min_frequency,
        max_token_length=v.max_token_length,
        allow_merge=merge_filter(spec),
        special_ids=[token_id for token_id, kind in stored.kinds.items() if kind == "special"],
    )
    lefts, rights, made, counts_made = replayed.columns if replayed is not None else ([], [], [], [])
    trainer.replay(list(zip(lefts, rights)), counts_made)
    if list(trainer.merge_columns()[2]) != list(made) or not stored.tokens.keys() >= set(made):
        raise DamagedDataError(f"{v.ref}'s stored merges do not replay to their stored tokens; "
                               "the version is damaged")
    return trainer


def run(db: Transactions, version_id: int, checkpoint_every: int, checkpoint_seconds: float,
        progress: Callable[[Progress], None] | None) -> None:
    """Replay the version's stored merges, then merge on to its target, writing checkpoints.

    One run per version at a time: a second one raises ConflictError at once
    and writes nothing (a PostgreSQL advisory lock; on SQLite ``locks.version_lock``).
    """
    with locks.version_lock(db.url, version_id) as held, db.session() as session:
        if not held or not try_lock_training(session, version_id):
            raise ConflictError(f"{_ref(db, version_id)} is being trained by another process right now; "
                                "wait for it to finish (or resume it once that process stopped)")
        try:
            _run(db, version_id, checkpoint_every, checkpoint_seconds, progress)
        finally:
            unlock_training(session, version_id)


def _collector_paused() -> AbstractContextManager[None]:
    """The trainer's millions of word lists and heap entries hold no cycles; Python's
    cycle collector walking them while they grow cost a fifth of a training's time."""
    from ..processes import gc_paused

    return gc_paused()


def _ref(db: Transactions, version_id: int) -> str:
    with db.reading() as tx:
        return VersionReads(tx).info(version_id).ref


def _run(db: Transactions, version_id: int, checkpoint_every: int, checkpoint_seconds: float,
         progress: Callable[[Progress], None] | None) -> None:
    with _collector_paused():
        with db.reading() as tx:
            reads = VersionReads(tx)
            v = reads.info(version_id)
            stored = reads.rows_vocabulary(version_id)
            # An extension's first merges are its parent's: those that passed the check need none again.
            checked = 0 if v.parent is None else reads.passing_merges(reads.resolve(v.parent))
            initial = [data for token_id, data in stored.tokens.items() if stored.kinds[token_id] != "merge"]
            # The words go from the cursor into the trainer one by one: never all
            # of them as rows, or as a dict, beside the trainer's own lists.
            # The counts this Store just ingested, where they are the version's: not read back.
            fresh = db.fresh_counts.take(v)
            trainer = _trainer(v, pinned_rows(tx, v) if fresh is None else fresh, stored, initial, stored)
            del fresh
            trainer.prepare()  # the words are taken while the cursor is open
        spec = v.spec
        writer = CheckpointWriter(db, version_id, trainer.merge_columns, trainer.token_bytes, len(stored.tokens),
                                  trainer.n_merges, every=checkpoint_every, seconds=checkpoint_seconds,
                                  threaded=not _in_memory(db.url))
        total = _merges_total(v, len(initial))  # progress counts merges
        try:
            while True:
                n, seconds = writer.room()
                made = trainer.step(n, vocab_size=v.target_vocab_size, max_merges=v.target_merges,
                                    seconds=min(seconds, STEP_SECONDS))
                if not made:
                    break
                if progress is None:
                    writer.add(made)
                    continue
                for merge in trainer.merges[-made:]:  # each kept once heard (a callback may stop the run)
                    writer.add(1)
                    progress(Progress("train", v.ref, merge.rank + 1, total, "merges",
                                      merge=merge, token=trainer.token_bytes[merge.token]))
            writer.last()
            trainer.close()  # (its words and pairs are not needed for the snapshot)
            # Made while the writer thread writes the last batches.
            columns = trainer.merge_columns()
            done = fingerprint_of_columns(spec, v.corpus_digest, *columns[:3])
            snap = snapshot.make(spec, _completed(stored, columns, trainer.token_bytes), done, checked=checked)
            writer.wait()
        except BaseException as exc:
            # Keep what was merged: the rows are valid checkpoints to resume from.
            try:
                writer.keep()
            except Exception as save_error:
                if hasattr(exc, "add_note"):  # Python 3.11+
                    exc.add_note(f"(the last {writer.pending} merges were not saved either: {save_error})")
            raise
        writer.save(done, snap)


def _in_memory(url: str) -> bool:
    """An in-memory SQLite database: its one connection is not for a second thread."""
    if not url.startswith("sqlite"):
        return False
    if url.startswith("sqlite:///") and "?" not in url:  # a file as db.resolve_url names it
        return url in ("sqlite:///", "sqlite:///:memory:")
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and (
        not parsed.database or ":memory:" in parsed.database or "mode=memory" in url)


def _completed(start: Vocabulary, columns: Sequence[Sequence[int]],
               token_bytes: Sequence[bytes] | None = None) -> Vocabulary:
    """The vocabulary of a version that completes with these merges (all of them, as
    columns: left ids, right ids, token ids, counts): ``start``'s tokens (its initial
    ones, and those its stored merges made), and those the merges make, in id order
    (``token_bytes``: the trainer's tokens by id, which hold them made already)."""
    lefts, rights, made, counts = columns
    if token_bytes is not None:  # (start's first, then the new ones in order; start's bytes stay)
        tokens = {**start.tokens, **dict(zip(made, map(token_bytes.__getitem__, made))), **start.tokens}
    else:
        tokens = dict(start.tokens)
        for token, left, right in zip(made, lefts, rights):
            if token not in tokens:  # (a merge's new token comes after every token before it)
                tokens[token] = tokens[left] + tokens[right]
    kinds = {**dict.fromkeys(tokens, "merge"), **start.kinds}
    return Vocabulary(tokens, kinds, lefts, rights, made, counts)


def verify(db: Transactions, ref: str) -> VerifyResult:
    """Retrain a complete version from its pinned generation and settings (an
    extension: from its parent's merges) and compare the merges."""
    with db.reading() as tx:
        reads = VersionReads(tx)
        v = reads.info(reads.resolve(ref))
        if v.status != "complete":
            raise ConflictError(f"{v.ref} is still training; resume it first, then verify it")
        counts, digest = pinned_counts(tx, v)
        stored = reads.rows_vocabulary(v.id)
        parent = None
        if v.parent is not None:
            parent = reads.rows_vocabulary(reads.resolve(v.parent))
    n_initial = len([k for k in stored.kinds.values() if k != "merge"])
    if parent is None:
        initial = initial_vocab(v.spec, None if v.spec.byte_level else counts)
    else:
        initial = [data for token_id, data in parent.tokens.items() if parent.kinds[token_id] != "merge"]
    if len(initial) != n_initial or any(stored.tokens.get(i) != data for i, data in enumerate(initial)):
        raise DamagedDataError(f"{v.ref}'s initial tokens are not those its spec and corpus give; "
                               "the version is damaged")
    with _collector_paused():
        trainer = _trainer(v, counts, stored, initial, parent)
        del counts
        while trainer.step(MAX_INT, vocab_size=v.target_vocab_size, max_merges=v.target_merges):
            pass
    ids = trainer.merge_columns()[:3]
    retrained = fingerprint_of_columns(v.spec, digest, *ids)
    # The stored merges, and the fingerprint recorded when they were made, must both agree.
    same = list(map(list, stored.columns[:3])) == list(map(list, ids))
    difference = None
    if not same:
        difference = _first_difference(stored.merges, stored.tokens, trainer.merges, trainer.token_bytes)
    return VerifyResult(v.ref, same and retrained == v.fingerprint, v.fingerprint, retrained, difference)


def _first_difference(stored: Sequence[Merge], stored_tokens: Mapping[int, bytes], retrained: Sequence[Merge],
                      retrained_tokens: Sequence[bytes]) -> dict[str, Any]:
    """The first rank where two merge lists differ, each side's pair as text."""
    rank = next((i for i, (a, b) in enumerate(zip(stored, retrained))
                 if (a.left, a.right, a.token) != (b.left, b.right, b.token)), min(len(stored), len(retrained)))

    def pair(merges: Sequence[Merge], tokens: Any) -> list[str] | None:
        if rank >= len(merges):
            return None
        return [token_text(tokens[merges[rank].left]), token_text(tokens[merges[rank].right])]

    return {"rank": rank, "stored": pair(stored, stored_tokens), "retrained": pair(retrained, retrained_tokens)}
