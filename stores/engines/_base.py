"""The contract every bytes engine (and every bytes layer) fulfils.

Engines speak ``bytes`` only. Keys sort bytewise (unsigned lexicographic) in every engine,
identically. ``range(lo, hi)`` is ``[lo, hi)``; ``lo >= hi`` yields nothing. ``None`` for a
bound means unbounded. Iterators are context managers; iterating or reading a closed iterator
raises :class:`~weir.stores.errors.StoreClosedError`, closing twice is harmless. Any operation on a
closed engine raises :class:`~weir.stores.errors.StoreClosedError`.

``write_batch(items)`` applies ``(key, value)`` pairs in order, atomically where the engine
can, and ``value is None`` means delete: this is how layers above flush dirty entries.

Engines derive from :class:`BytesEngineBase`, which declares their optional capabilities
(key size limits, column and sorted bulk writes, commit marker, size) with defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from weir.stores.api import FlushScope
from weir.stores.errors import NullKeyOrValueError

__all__ = ["BytesIterator", "BytesSnapshot", "BytesEngine", "prefix_upper_bound", "is_empty_range",
           "BytesEngineBase", "null_argument"]


@runtime_checkable
class BytesIterator(Protocol):
    """An iterator of ``(key, value)`` byte pairs that must be closed; ``closed`` says
    whether it was (by itself or with its store or snapshot)."""

    @property
    def closed(self) -> bool: ...
    def __iter__(self) -> Iterator[tuple[bytes, bytes]]: ...
    def __next__(self) -> tuple[bytes, bytes]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "BytesIterator": ...
    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class BytesSnapshot(Protocol):
    """A stable view of ``[lo, hi)`` taken at one moment; later writes are not visible."""

    @property
    def closed(self) -> bool: ...
    def iterator(self) -> BytesIterator: ...
    def close(self) -> None: ...
    def __enter__(self) -> "BytesSnapshot": ...
    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class BytesEngine(Protocol):
    """A key-value engine over bytes (RocksDB, LMDB, memory) or a bytes layer over one."""

    name: str

    def get(self, key: bytes) -> bytes | None: ...
    def get_all(self, keys: Sequence[bytes]) -> dict[bytes, bytes]: ...
    def put(self, key: bytes, value: bytes) -> None: ...
    def put_all(self, items: Iterable[tuple[bytes, bytes]]) -> None: ...
    def delete(self, key: bytes) -> None: ...
    def delete_all(self, keys: Iterable[bytes]) -> None: ...
    def write_batch(self, items: Iterable[tuple[bytes, bytes | None]]) -> None: ...
    def range(self, lo: bytes | None, hi: bytes | None) -> BytesIterator: ...
    def prefix(self, prefix: bytes) -> BytesIterator: ...
    def all(self) -> BytesIterator: ...
    def snapshot(self, lo: bytes | None, hi: bytes | None) -> BytesSnapshot: ...
    def flush(self, scope: FlushScope = FlushScope.ENGINE) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    # Optional capabilities, with the defaults of BytesEngineBase:
    @property
    def key_size_limits(self) -> tuple[int, int] | None: ...
    def write_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                      deletes: bool = True) -> None: ...
    def load_sorted(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                    deletes: bool = True) -> int | None: ...
    def ingest_sorted(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> int: ...
    def commit_marker(self) -> str | None: ...
    def approximate_size(self) -> int | None: ...


def prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with ``prefix``; None if unbounded.

    >>> prefix_upper_bound(b"ab")
    b'ac'
    >>> prefix_upper_bound(b"a\\xff") 
    b'b'
    >>> prefix_upper_bound(b"\\xff\\xff") is None
    True
    """
    p = bytearray(prefix)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)


def is_empty_range(lo: bytes | None, hi: bytes | None) -> bool:
    """True when ``[lo, hi)`` can hold no key (``hi`` is ``b""``, or ``lo >= hi``); engines
    answer such ranges without asking the library (RocksDB must never see ``lo >= hi``).

    >>> is_empty_range(b"b", b"a"), is_empty_range(None, b""), is_empty_range(b"a", None)
    (True, True, False)
    """
    return hi is not None and (not hi or (lo is not None and lo >= hi))


def null_argument(store: str, op: str, what: str = "key") -> NullKeyOrValueError:
    """The error every engine raises for a ``None`` key (``what="key"``) or a ``None`` where a
    list of keys or pairs belongs (``what="list"``), whatever the engine's library would say.

    >>> str(null_argument("counts", "get"))
    "store 'counts': get: None is not a valid key"
    """
    if what == "list":
        return NullKeyOrValueError(f"{op}: got None instead of an iterable of keys or pairs",
                                   store=store)
    return NullKeyOrValueError(f"{op}: None is not a valid {what}", store=store)


class BytesEngineBase:
    """The base every bytes engine derives from: ``prefix`` and ``all`` written once in terms
    of its ``range``, and the engine's optional capabilities with their defaults (slot-free, so
    engines with ``__slots__`` keep theirs). Layers and restore call a capability; they never
    probe for it:

    ========================  ======================================================================
    ``key_size_limits``       ``(min, max)`` key length the engine holds; default None (any key)
    ``write_columns(k, v)``   a batch as two parallel lists; default ``write_batch(zip(k, v))``
    ``load_sorted(k, v)``     bulk-load a sorted run (restore); default ``write_columns``
    ``ingest_sorted(pairs)``  bulk-load sorted pairs (snapshots); default ``write_columns``
    ``commit_marker()``       changes with every commit (recorded in ``OFFSET`` files); default
                              None (the engine has none: the files are trusted by the OFFSET file)
    ``approximate_size()``    bytes on disk; default None (not known)
    ========================  ======================================================================

    >>> from weir.stores.engines.memory import MemoryEngine
    >>> engine = MemoryEngine("s")
    >>> engine.load_sorted([b"a", b"b"], [b"1", None])
    2
    >>> engine.get(b"a"), engine.get(b"b")
    (b'1', None)
    >>> engine.key_size_limits, engine.commit_marker(), engine.approximate_size()
    (None, None, None)
    """

    __slots__ = ()

    def prefix(self, prefix: bytes) -> BytesIterator:
        if prefix is None:
            raise null_argument(self.name, "prefix", "prefix")  # type: ignore[attr-defined]
        return self.range(prefix, prefix_upper_bound(prefix))  # type: ignore[attr-defined]

    def all(self) -> BytesIterator:
        return self.range(None, None)  # type: ignore[attr-defined]

    @property
    def key_size_limits(self) -> tuple[int, int] | None:
        """``(min, max)`` key length the engine can hold; None: any key (the default)."""
        return None

    def write_columns(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                      deletes: bool = True) -> None:
        """Write ``keys[i] -> values[i]`` (None: delete) as one batch; ``deletes=False``
        promises no None. Default: ``write_batch`` of the zipped lists."""
        self.write_batch(zip(keys, values))  # type: ignore[attr-defined]

    def load_sorted(self, keys: Sequence[bytes], values: Sequence[bytes | None], *,
                    deletes: bool = True) -> int | None:
        """Bulk-load strictly ascending ``keys`` and their values (None deletes), as restore
        replays a sorted run. Default: one :meth:`write_columns` batch."""
        self.write_columns(keys, values, deletes=deletes)
        return len(keys)

    def ingest_sorted(self, pairs: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Bulk-load strictly ascending ``(key, value)`` pairs (None deletes); returns how many.
        Default: one :meth:`write_columns` batch."""
        keys: list[bytes] = []
        values: list[bytes | None] = []
        for key, value in pairs:
            keys.append(key)
            values.append(value)
        self.write_columns(keys, values, deletes=True)
        return len(keys)

    def commit_marker(self) -> str | None:
        """A short string that changes with every commit of the engine's files (recovery
        records it in the ``OFFSET`` file and reuses the files only while it is unchanged).
        Default: None (the engine has no such marker)."""
        return None

    def approximate_size(self) -> int | None:
        """Approximate bytes the engine's files take. Default: None (not known)."""
        return None
