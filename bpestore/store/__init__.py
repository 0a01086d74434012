"""Persistence: the database schema, its migrations, and the Store class."""

from .store import Store

__all__ = ["Store"]
