"""Persistence: the database schema, its migrations, and the Store class."""

from .store import CorpusInfo, IngestResult, SourceInfo, Store, TrainProgress, VersionInfo

__all__ = ["CorpusInfo", "IngestResult", "SourceInfo", "Store", "TrainProgress", "VersionInfo"]
