"""Answers that outlive the server: what a complete version gives on the held-out text
(its score-card row, its compression curve) never changes (its fingerprint says which
version it is), so it is kept in a file and the first visit of a version page after a
server start reads it instead of loading the tokenizer. The store itself is never
written; the files live in ``$BPESTORE_WEB_CACHE`` (``off``: none), else
``$XDG_CACHE_HOME/bpestore/web``, else ``~/.cache/bpestore/web``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .. import __version__


def folder() -> Path | None:
    """Where kept answers go; None when they are not kept."""
    given = os.environ.get("BPESTORE_WEB_CACHE")
    if given is not None:
        return None if given in ("", "off") else Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bpestore" / "web"


def _path(key: tuple[Any, ...], salt: bytes) -> Path | None:
    where = folder()
    if where is None:
        return None
    digest = hashlib.sha256(json.dumps([__version__, *key], default=str).encode() + salt).hexdigest()
    return where / f"{digest[:40]}.json"


def load(key: tuple[Any, ...], salt: bytes) -> Any:
    """The answer kept under ``key`` (and ``salt``: what else it depends on), or None."""
    path = _path(key, salt)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def save(key: tuple[Any, ...], salt: bytes, value: Any) -> None:
    """Keeps ``value`` (JSON) under ``key``; a folder that cannot be written keeps nothing."""
    path = _path(key, salt)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=path.parent, suffix=".part")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, ensure_ascii=False)
        os.replace(partial, path)
    except OSError:
        Path(partial).unlink(missing_ok=True)
