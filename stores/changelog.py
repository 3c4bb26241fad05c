"""Protocols through which stores write their changes and recovery reads them back.

A logged store appends every change to a :class:`ChangelogSink`; ``value is None`` is a
tombstone (delete). ``flush()`` makes every appended change durable in the changelog before it
returns: the commit path flushes stores (and so their sinks) before writing a checkpoint.

Recovery reads a changelog through a :class:`ChangelogSource`. Offsets are non-negative
integers (record numbers); ``newest_offset()`` returns :data:`NO_OFFSET` for an empty log.

The streams layer (``engine``) adapts any system's producer and consumer to these protocols;
:class:`weir.testing.FileChangelog` is a small file-backed pair for tests and tools.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

__all__ = ["ChangelogSink", "ChangelogSource", "ChangelogRecord", "NO_OFFSET"]

NO_OFFSET: int = -1
"""The newest offset of an empty changelog (no record yet)."""

ChangelogRecord = tuple[int, bytes, "bytes | None"]
"""``(offset, key, value)``; ``value`` None is a tombstone."""


@runtime_checkable
class ChangelogSink(Protocol):
    def append(self, key: bytes, value: bytes | None) -> None: ...
    def flush(self) -> None: ...


@runtime_checkable
class ChangelogSource(Protocol):
    def oldest_offset(self) -> int: ...
    def newest_offset(self) -> int: ...
    def read(self, start: int, end: int) -> Iterator[ChangelogRecord]:
        """Records with ``start <= offset <= end`` in offset order."""
        ...
