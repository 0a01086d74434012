"""The exceptions bpestore raises, by what a caller does about them.

Every one is a ``BpestoreError``; catch a subclass to handle one kind:

* ``NotFoundError``: a named thing (corpus, version, alias, token, file) is not there;
* ``InvalidArgumentError``: an argument or spec is not acceptable (also a ``ValueError``);
* ``ConflictError``: the store's state refuses the call now (a database from a newer
  bpestore, a corpus that changed, a concurrent writer, a version still training);
  ``ReadOnlyError``, one of them: a write to a store opened read-only;
* ``DamagedDataError``: stored data or an input file is not what it claims to be;
* ``SourceError``: a source cannot be read or decoded; says which and where;
* ``DatabaseError``: the database itself failed (unreachable, locked, disk full);
* ``MissingExtraError``: an optional feature whose extra (``bpestore[parquet]``) is not installed.

Messages speak in the Python API's terms (``vocab_size``, ``errors='replace'``);
``params`` names the arguments a message is about, so the CLI can say
``--vocab-size`` and ``--errors replace`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence


class BpestoreError(Exception):
    """A user mistake or a refused operation; the message says how to fix it.

    The CLI prints it as one ``Error: ...`` line and exits non-zero.
    """

    def __init__(self, message: str, *, params: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.params = tuple(params)

    def __reduce__(self):  # crosses process boundaries with its fields
        return (_rebuild, (type(self), str(self), dict(self.__dict__)))


class NotFoundError(BpestoreError, LookupError):
    """A corpus, version, alias, token or file that does not exist."""


class InvalidArgumentError(BpestoreError, ValueError):
    """An argument or spec that cannot be used as given."""


class MissingExtraError(BpestoreError, ImportError):
    """An optional feature whose extra is not installed: ``extra`` names it
    (``pip install 'bpestore[EXTRA]'``)."""

    def __init__(self, message: str, *, extra: str, params: Sequence[str] = ()) -> None:
        super().__init__(message, params=params)
        self.extra = extra


class ConflictError(BpestoreError):
    """The store's current state refuses the operation (try again, or do something else)."""


class ReadOnlyError(ConflictError):
    """A write asked of a store opened read-only (``Store(db, read_only=True)``)."""


class DamagedDataError(BpestoreError):
    """Stored data or an input file that is inconsistent or corrupt."""


class DatabaseError(BpestoreError):
    """The database failed underneath an operation (nothing half-written stays)."""


class SourceError(BpestoreError):
    """A source that cannot be read or decoded: ``source`` names it, ``offset`` is the
    byte where the problem is (None when it is not about one place)."""

    def __init__(self, message: str, *, source: str, offset: int | None = None,
                 params: Sequence[str] = ()) -> None:
        super().__init__(message, params=params)
        self.source = source
        self.offset = offset


def _rebuild(cls: type[BpestoreError], message: str, fields: dict) -> BpestoreError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(fields)
    return error


class BpestoreWarning(UserWarning):
    """Something the user likely did not mean, that still worked (the CLI prints it as a
    ``Warning:`` line on stderr, ``params`` named by their flags, as errors' are)."""

    def __init__(self, message: str, *, params: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.params = tuple(params)
