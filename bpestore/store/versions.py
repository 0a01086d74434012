"""Versions: training, resuming, verifying, importing, aliases, the versions' tree, removal."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from ..errors import ConflictError, InvalidArgumentError
from ..records import LineageNode, Progress, Removed, VerifyResult, VersionInfo, VersionProgress
from ..spec import TokenizerSpec
from . import imports, locks, repository, training
from .reader import NUMBER, TokenizerCache, VersionReads
from .repository import Transactions


class Versions:
    """The versions of a store (``db``: its transactions); a change drops ``cache``."""

    def __init__(self, db: Transactions, cache: TokenizerCache) -> None:
        self.db = db
        self.cache = cache

    def info(self, version_id: int) -> VersionInfo:
        with self.db.reading() as conn:
            return VersionReads.over(conn).info(version_id)

    def set_alias(self, ref: str, alias: str) -> VersionInfo:
        with self.db.writing() as conn:
            reads = VersionReads.over(conn)
            version_id = reads.resolve(ref)
            repository.set_alias(conn, version_id, alias)
            return reads.info(version_id)

    def train(self, name: str, corpus: str, options: training.TrainOptions | None,
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
        if last < 0:
            raise InvalidArgumentError(f"last cannot be negative, not {last}", params=("last",))
        with self.db.reading() as conn:
            reads = VersionReads.over(conn)
            v = reads.info(reads.resolve(ref))
            recent = repository.merge_infos(conn, v.id, max(0, v.n_merges - last)) if last else []
        base = v.vocab_size - v.n_merges  # the tokens no merge made (bytes, specials, ...)
        target = v.target_merges if v.target_merges is not None else (
            None if v.target_vocab_size is None else max(0, v.target_vocab_size - base))
        if v.status == "complete":
            target = v.n_merges
        seconds = (v.updated_at - v.created_at).total_seconds()
        rate = v.n_merges / seconds if seconds > 0 and v.n_merges else None
        since = (datetime.now(timezone.utc) - v.updated_at).total_seconds()
        return VersionProgress(v, v.n_merges, target, rate, max(0.0, since), tuple(recent))

    def lineage(self, name: str) -> list[LineageNode]:
        with self.db.reading() as conn:
            repository.newest_version(conn, name)  # an unknown name raises, naming those there are
            every = VersionReads.over(conn).infos()
        children: dict[str | None, list[VersionInfo]] = {}
        for v in every:
            children.setdefault(v.parent, []).append(v)

        def node(v: VersionInfo) -> LineageNode:
            return LineageNode(v, tuple(node(c) for c in children.get(v.ref, ())))
        return [node(v) for v in every
                if v.name == name and (v.parent is None or v.parent.partition("@")[0] != name)]

    def remove(self, ref: str, force: bool) -> Removed:
        name, at, tag = ref.partition("@")
        if not at or not tag:
            raise InvalidArgumentError(f"name the version to remove as {name}@N, or an alias as {name}@ALIAS "
                                       f"(not {ref!r})", params=("ref",))
        if NUMBER.fullmatch(tag):
            # Asked first outside a write transaction, so a run busy writing a checkpoint
            # is reported at once instead of after the lock wait.
            with ExitStack() as probe, self.db.reading() as conn:
                self._claim_training(conn, probe, VersionReads.over(conn).resolve(ref))
        with ExitStack() as training_locks, self.db.writing() as conn:
            reads = VersionReads.over(conn)
            version_id = reads.resolve(ref)
            if not NUMBER.fullmatch(tag):
                repository.delete_alias(conn, ref)
                return Removed(aliases=(ref,))
            # Held until the removal commits: no training starts meanwhile.
            doomed = self._claim_training(conn, training_locks, version_id)
            infos = {v.id: v for v in reads.infos(ids=doomed)}
            alias_refs = repository.alias_refs(conn, doomed)
            extensions = [infos[i].ref for i in doomed[1:]]
            if (extensions or alias_refs) and not force:
                held = "; ".join(part for part in (
                    f"extended by {', '.join(extensions)}" if extensions else "",
                    f"aliases {', '.join(alias_refs)} point at it" if alias_refs else "") if part)
                raise ConflictError(f"{ref} is in use ({held}); remove those first, or pass force=True to "
                                    "remove them with it", params=("force",))
            repository.delete_versions(conn, doomed)
        self.cache.clear()
        return Removed(versions=tuple(infos[i].ref for i in doomed), aliases=tuple(alias_refs))

    def _claim_training(self, conn: Connection, stack: ExitStack, version_id: int) -> list[int]:
        """Take the training locks of a version and its extensions for as long as ``stack``
        and the transaction last; ConflictError if a run holds one. Returns their ids."""
        doomed = [version_id, *repository.descendants(conn, version_id)]
        for doomed_id in doomed:
            if not (stack.enter_context(locks.version_lock(self.db.url, doomed_id))
                    and repository.try_lock_training_xact(conn, doomed_id)):
                raise ConflictError(f"{VersionReads.over(conn).info(doomed_id).ref} is being trained by "
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

    def import_tiktoken(self, name: str, path: str | Path, pattern: str,
                        special_tokens: Mapping[str, int] | None) -> VersionInfo:
        from ..formats.tiktoken_ranks import read_ranks, tiktoken_version

        vocab, merge_list, spec = tiktoken_version(read_ranks(path), pattern, special_tokens or {})
        return self.import_vocab(name, vocab, merge_list, spec.special_tokens, spec, "tiktoken")
