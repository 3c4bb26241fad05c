"""The state snapshot file of ``weir state export`` / ``import`` (``*.weirsnap``).

A zstd stream of msgpack items: a header (``kind``, ``format``, the job's name and id, when it
was made, every task's encoded checkpoint), then per store a meta map (``store``, ``task``,
``records``, ``from``: ``changelog`` or ``local``) followed by its ``[key, value]`` pairs in
chunks of :data:`CHUNK`, and an end map with the record count and a CRC32C over every key and
value. Written to a temporary file, fsynced and renamed into place; read and checked whole
before any of it is used.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from weir.stores import _crc as crc32c
import msgpack
import zstandard

from weir.stores.filesafety import atomic_file
from weir.recovery.errors import RecoveryError

__all__ = ["SNAPSHOT_FORMAT", "SNAPSHOT_KIND", "CHUNK", "write_snapshot", "load_snapshot"]

SNAPSHOT_FORMAT = 1
SNAPSHOT_KIND = "weir-state-snapshot"
CHUNK = 10_000
"""Pairs per msgpack item (and per batch when an import writes them)."""


def write_snapshot(out: Path, header: dict[str, Any],
                   stores: Iterable[tuple[dict[str, Any], list[tuple[bytes, bytes]]]]) -> None:
    """Write ``header`` and each ``(meta, sorted pairs)`` of ``stores`` to ``out``, atomically
    (``header`` gets ``kind`` and ``format`` first)."""
    crc = 0
    records = 0
    with atomic_file(out) as raw:
        writer = zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
        packer = msgpack.Packer(use_bin_type=True)
        writer.write(packer.pack({"kind": SNAPSHOT_KIND, "format": SNAPSHOT_FORMAT, **header}))
        for meta, pairs in stores:
            writer.write(packer.pack(meta))
            for i in range(0, len(pairs), CHUNK):
                chunk = pairs[i:i + CHUNK]
                for key, value in chunk:
                    crc = crc32c.crc32c(value, crc32c.crc32c(key, crc))
                writer.write(packer.pack([list(p) for p in chunk]))
            records += len(pairs)
        writer.write(packer.pack({"end": True, "records": records, "crc32c": crc}))
        writer.close()


def _read_items(path: Path) -> Iterator[Any]:
    with open(path, "rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw)
        unpacker = msgpack.Unpacker(reader, raw=False, strict_map_key=False,
                                    max_buffer_size=1 << 30)
        try:
            yield from unpacker
        except (msgpack.UnpackException, ValueError, zstandard.ZstdError) as exc:
            raise RecoveryError(f"snapshot {path} is damaged ({exc}); nothing was imported. "
                                f"Export it again") from None


def load_snapshot(path: Path) -> tuple[dict[str, Any], list[tuple[dict, list]]]:
    """The whole snapshot, checked (kind, format, record count, checksum) before any use:
    ``(header, [(store meta, [(key, value), ...]), ...])``."""
    items = iter(_read_items(path))
    header = next(items, None)
    if not isinstance(header, dict) or header.get("kind") != SNAPSHOT_KIND:
        raise RecoveryError(f"{path} is not a weir state snapshot; nothing was imported")
    if header.get("format") != SNAPSHOT_FORMAT:
        raise RecoveryError(f"snapshot {path} has format {header.get('format')}, this weir "
                            f"reads format {SNAPSHOT_FORMAT}; use the weir that wrote it")
    stores: list[tuple[dict, list]] = []
    crc = 0
    records = 0
    end = None
    for item in items:
        if isinstance(item, dict) and item.get("end"):
            end = item
            break
        if isinstance(item, dict):
            stores.append((item, []))
            continue
        for key, value in item:
            crc = crc32c.crc32c(value, crc32c.crc32c(key, crc))
            stores[-1][1].append((key, value))
            records += 1
    if end is None or end.get("records") != records or end.get("crc32c") != crc:
        raise RecoveryError(f"snapshot {path} is incomplete or damaged (its checksum or record "
                            f"count does not match); nothing was imported. Export it again")
    for meta, pairs in stores:
        if meta.get("records") != len(pairs):
            raise RecoveryError(f"snapshot {path}: store '{meta.get('store')}' of task "
                                f"'{meta.get('task')}' is incomplete; nothing was imported")
    return header, stores
