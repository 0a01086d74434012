"""How records become JSON: fields as plain values, bytes as readable text (records.py and
answers.py share these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def plain_value(value: Any) -> Any:
    """A field as JSON takes it: tuples as lists, times in ISO form, records and specs as dicts."""
    if isinstance(value, tuple):
        return [plain_value(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value.to_dict() if hasattr(value, "to_dict") else value


def fields_of(record: Any, *, skip: str = "") -> dict[str, Any]:
    """A record's fields but ``skip``, in order, each ``plain_value``."""
    return {k: plain_value(v) for k, v in record.__dict__.items() if k != skip}


class PlainRecord:
    """A record whose JSON form is its fields, each ``plain_value``."""

    def to_dict(self) -> dict[str, Any]:
        return fields_of(self)


def readable_text(data: bytes) -> str:
    """Bytes as readable text (``queries.token_text``): valid UTF-8 as is, other bytes as \\xNN."""
    return data.decode("utf-8", "backslashreplace")
