"""Versions: training, resuming, verifying, importing, aliases, the versions' tree, removal."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, InvalidArgumentError
from ..records import Progress, VerifyResult, VersionInfo
from ..spec import TokenizerSpec
from . import imports, locks, training, version_tables, vocab_tables
from .drivers import Transaction, Transactions
from .loading import TokenizerCache
from .version_tables import NUMBER, VersionReads, delete_alias, set_alias, try_lock_training

if TYPE_CHECKING:  # answers' records (made when first asked for: training needs none)
    from ..answers import LineageNode, Removed, VersionProgress


class Versions:
    """The versions of a store (``db``: its transactions); a change drops ``cache``."""

    def __init__(self, db: Transactions, cache: TokenizerCache) -> None:
        self.db = db
        self.cache = cache

    def info(self, version_id: int) -> VersionInfo:
        with self.db.reading() as tx:
            return VersionReads(tx).info(version_id)

    def set_alias(self, ref: str, alias: str) -> VersionInfo:
        with self.db.writing() as tx:
            reads = VersionReads(tx)
            version_id = reads.resolve(ref)
            set_alias(tx, version_id, alias)
            return reads.info(version_id)

    def train(self, name: str, corpus: str | Sequence[str], options: training.TrainOptions | None,
              progress: Callable[[Progress], None] | None, settings: Mapping[str, Any]) -> VersionInfo:
        version_id = training.train(self.db, name, corpus, training.TrainOptions.given(options, settings), progress)
        self.cache.clear()  # a version changed: drop what it may have held
        return self.info(version_id)

    def resume(self, ref: str, checkpoint_every: int, checkpoint_seconds: float,
               progress: Callable[[Progress], None] | None) -> VersionInfo:
        version_id = training.resume(self.db, ref, checkpoint_every=checkpoint_every,
                                     checkpoint_seconds=checkpoint_seconds, progress=progress)
        self.cache.clear()
        return self.info(version_id)

    def verify(self, ref: str) -> VerifyResult:
        return training.verify(self.db, ref)

    def progress(self, ref: str, last: int) -> VersionProgress:
        from ..answers import VersionProgress

        if last < 0:
            raise InvalidArgumentError(f"last cannot be negative, not {last}", params=("last",))
        with self.db.reading() as tx:
            reads = VersionReads(tx)
            v = reads.info(reads.resolve(ref))
            recent = vocab_tables.merge_infos(tx, v.id, max(0, v.n_merges - last)) if last else []
            running = None if v.status == "complete" else version_tables.training_held(tx, v.id)
        if running is None and v.status != "complete":
            running = locks.held(self.db.url, v.id)
        base = v.vocab_size - v.n_merges  # the tokens no merge made (bytes, specials, ...)
        target = v.target_merges if v.target_merges is not None else (
            None if v.target_vocab_size is None else max(0, v.target_vocab_size - base))
        if v.status == "complete":
            target = v.n_merges
        seconds = (v.updated_at - v.created_at).total_seconds()
        rate = v.n_merges / seconds if seconds > 0 and v.n_merges else None
        since = (datetime.now(timezone.utc) - v.updated_at).total_seconds()
        return VersionProgress(v, v.n_merges, target, rate, max(0.0, since), tuple(recent), running)

    def lineage(self, name: str) -> list[LineageNode]:
        from ..answers import LineageNode

        with self.db.reading() as tx:
            reads = VersionReads(tx)
            reads.newest(name)  # an unknown name raises, naming those there are
            every = reads.infos()
        children: dict[str | None, list[VersionInfo]] = {}
        for v in every:
            children.setdefault(v.parent, []).append(v)

        def node(v: VersionInfo) -> LineageNode:
            return LineageNode(v, tuple(node(c) for c in children.get(v.ref, ())))
        return [node(v) for v in every
                if v.name == name and (v.parent is None or v.parent.partition("@")[0] != name)]

    def remove(self, ref: str, force: bool) -> Removed:
        from ..answers import Removed

        name, at, tag = ref.partition("@")
        if not at or not tag:
            raise InvalidArgumentError(f"name the version to remove as {name}@N, or an alias as {name}@ALIAS "
                                       f"(not {ref!r})", params=("ref",))
        if NUMBER.fullmatch(tag):
            # Asked first outside a write transaction, so a run busy writing a checkpoint
            # is reported at once instead of after the lock wait.
            with ExitStack() as probe, self.db.reading() as tx:
                self._claim_training(tx, probe, VersionReads(tx).resolve(ref))
        with ExitStack() as training_locks, self.db.writing() as tx:
            reads = VersionReads(tx)
            version_id = reads.resolve(ref)
            if not NUMBER.fullmatch(tag):
                delete_alias(tx, ref)
                return Removed(aliases=(ref,))
            # Held until the removal commits: no training starts meanwhile.
            doomed = self._claim_training(tx, training_locks, version_id)
            infos = {v.id: v for v in reads.infos(ids=doomed)}
            alias_refs = reads.alias_refs(doomed)
            extensions = [infos[i].ref for i in doomed[1:]]
            if (extensions or alias_refs) and not force:
                # Each alias with the version it names (it may point at an extension, not at ``ref``).
                pointing = [f"{alias} points at {infos[reads.resolve(alias)].ref}" for alias in alias_refs]
                held = "; ".join(part for part in (
                    f"extended by {', '.join(extensions)}" if extensions else "", "; ".join(pointing)) if part)
                raise ConflictError(f"{ref} is in use ({held}); remove those first, or pass force=True to "
                                    "remove them with it", params=("force",))
            version_tables.delete_versions(tx, doomed)
        self.cache.clear()
        return Removed(versions=tuple(infos[i].ref for i in doomed), aliases=tuple(alias_refs))

    def _claim_training(self, tx: Transaction, stack: ExitStack, version_id: int) -> list[int]:
        """Take the training locks of a version and its extensions for as long as ``stack``
        and the transaction last; ConflictError if a run holds one. Returns their ids."""
        doomed = [version_id, *VersionReads(tx).descendants(version_id)]
        for doomed_id in doomed:
            if not (stack.enter_context(locks.version_lock(self.db.url, doomed_id))
                    and try_lock_training(tx, doomed_id, session=False)):
                raise ConflictError(f"{VersionReads(tx).info(doomed_id).ref} is being trained by "
                                    "another process right now; stop it (or wait for it to finish) first")
        return doomed

    def import_vocab(self, name: str, vocab: dict[int, bytes], merge_list: Sequence[tuple[bytes, bytes]],
                     special_tokens: Sequence[str], spec: TokenizerSpec | None, source: str) -> VersionInfo:
        spec = (spec or TokenizerSpec()).replace(special_tokens=tuple(special_tokens))
        return self.info(imports.import_version(self.db, name, vocab, merge_list, spec, source=source))

    # Each format's reader is imported by its own import: training and removal need none.
    def import_gpt2(self, name: str, vocab: str | Path, merges: str | Path) -> VersionInfo:
        from ..formats.gpt2 import read_gpt2

        vocab_map, merge_list, specials = read_gpt2(vocab, merges)
        return self.import_vocab(name, vocab_map, merge_list, specials, None, "gpt2")

    def import_hf(self, name: str, path: str | Path) -> VersionInfo:
        from ..formats.hf import read_hf

        model = read_hf(path)
        return self.import_vocab(name, model.vocab, model.merges, model.spec.special_tokens, model.spec, "hf")

    def import_sentencepiece(self, name: str, path: str | Path) -> VersionInfo:
        from ..formats.sentencepiece import read_sentencepiece

        model = read_sentencepiece(path)
        return self.import_vocab(name, model.vocab, model.merges, model.spec.special_tokens, model.spec,
                                 "sentencepiece")

    def import_tiktoken(self, name: str, path: str | Path, pattern: str,
                        special_tokens: Mapping[str, int] | None) -> VersionInfo:
        from ..formats.tiktoken_ranks import read_ranks, tiktoken_version

        vocab, merge_list, spec = tiktoken_version(read_ranks(path), pattern, special_tokens or {})
        return self.import_vocab(name, vocab, merge_list, spec.special_tokens, spec, "tiktoken")
