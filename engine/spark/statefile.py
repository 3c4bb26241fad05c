"""The files of a state version: one changelog per version, a snapshot every few versions.

Both kinds share one format, checksummed end to end::

    file    = magic | u32 header_len | u32 crc32c(header) | header | body | u32 crc32c(body) | "WEND"
    magic   = b"WSTV" | u16 format (1) | u8 kind (1 changelog, 2 snapshot) | u8 0
    header  = JSON: operator, partition, version, kind, body_len, sections, meta, created_ms, writer
    body    = one zstd frame holding the sections' record frames, in order
    section = frames of :mod:`weir.stores.framing` (the file changelog's batch frame):
              u32 payload_len | u32 crc32c | u32 count | msgpack [keys, values]

A *section* is one store of the partition (or, for jobs and the operator's recorded output,
``@output``); the header lists each section's name, frame count and record count. A changelog
section holds the version's changes (``None`` value = delete, one record per key: the last
write of the batch); a snapshot section holds every key of the store in key order, so restore
can bulk-load it. ``meta`` carries what the writer records with the version (the input offsets
of a job task, the event-time high-water mark of a transformWithState partition, ...).

Reading checks the magic, both CRCs, the body length, the end marker and every frame's CRC;
whatever fails raises :class:`~weir.engine.spark.errors.StateFileDamagedError` naming the file.

Example::

    >>> data = encode_version(VersionKind.CHANGELOG, "counts", 0, 7,
    ...                       [("counts", [b"a", b"b"], [b"1", None])], meta={"base": 6})
    >>> v = decode_version(data, path="7.changelog.zst")
    >>> v.version, v.meta, v.section("counts")
    (7, {'base': 6}, ([b'a', b'b'], [b'1', None]))
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from weir.stores import _crc as crc32c
import orjson
import zstandard

from weir.stores.framing import FrameError, decode_frame, encode_frame

from weir.engine.spark.errors import StateFileDamagedError

__all__ = ["VersionKind", "VersionFile", "SectionInfo", "encode_version", "decode_version",
           "FRAME_RECORDS", "OUTPUT_SECTION"]

_MAGIC = b"WSTV"
_FORMAT = 1
_PREFIX = struct.Struct(">4sHBB")
_U32 = struct.Struct(">I")
_END = b"WEND"
FRAME_RECORDS = 50_000
"""Records per frame: large enough that framing costs nothing, small enough that a snapshot
of millions of keys never builds one huge msgpack object."""
OUTPUT_SECTION = "@output"
"""The section holding what a version's task emitted (replayed attempts emit it again)."""


class VersionKind(Enum):
    CHANGELOG = "changelog"
    SNAPSHOT = "snapshot"

    @property
    def code(self) -> int:
        return 1 if self is VersionKind.CHANGELOG else 2

    @property
    def suffix(self) -> str:
        return f".{self.value}.zst"


_BY_CODE = {k.code: k for k in VersionKind}


@dataclass(frozen=True)
class SectionInfo:
    name: str
    records: int
    frames: int


@dataclass(frozen=True)
class VersionFile:
    """A decoded version file: header fields and the sections' records (lists of keys and
    values, ``None`` value = delete)."""

    kind: VersionKind
    operator: str
    partition: int
    version: int
    sections: tuple[SectionInfo, ...]
    meta: dict[str, Any]
    created_ms: int
    writer: dict[str, Any]
    size: int
    data: dict[str, tuple[list[bytes], list[bytes | None]]] = field(repr=False)

    def section(self, name: str) -> tuple[list[bytes], list[bytes | None]]:
        """``(keys, values)`` of section ``name`` (empty lists when the file has none)."""
        return self.data.get(name, ([], []))

    @property
    def records(self) -> int:
        return sum(s.records for s in self.sections)


def encode_version(kind: VersionKind, operator: str, partition: int, version: int,
                   sections: Iterable[tuple[str, Sequence[bytes], Sequence[bytes | None]]], *,
                   meta: dict[str, Any] | None = None, level: int = 3) -> bytes:
    """The bytes of one version file (see the module docstring)."""
    frames: list[bytes] = []
    infos = []
    for name, keys, values in sections:
        keys = list(keys)
        values = list(values)
        if len(keys) != len(values):
            raise ValueError(f"section {name!r}: {len(keys)} keys but {len(values)} values")
        count = 0
        for start in range(0, len(keys), FRAME_RECORDS):
            frames.append(encode_frame(keys[start:start + FRAME_RECORDS],
                                       values[start:start + FRAME_RECORDS]))
            count += 1
        infos.append({"name": name, "records": len(keys), "frames": count})
    raw = b"".join(frames)
    body = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(raw)
    header = orjson.dumps({
        "operator": operator, "partition": partition, "version": version, "kind": kind.value,
        "body_len": len(body), "raw_len": len(raw), "sections": infos, "meta": meta or {},
        "created_ms": time.time_ns() // 1_000_000,
        "writer": {"host": socket.gethostname(), "pid": os.getpid()},
    })
    return b"".join((_PREFIX.pack(_MAGIC, _FORMAT, kind.code, 0), _U32.pack(len(header)),
                     _U32.pack(crc32c.crc32c(header)), header, body,
                     _U32.pack(crc32c.crc32c(body)), _END))


def decode_version(data: bytes, *, path: str | os.PathLike[str],
                   expect: tuple[VersionKind, str, int, int] | None = None,
                   sections: Iterable[str] | None = None) -> VersionFile:
    """Check and decode a version file's bytes. ``expect`` = ``(kind, operator, partition,
    version)`` the file must hold (a file copied under another name is damage too);
    ``sections`` limits decoding to those sections (the header is always checked)."""
    view = memoryview(data)
    kind_hint = expect[0].value if expect else "version file"

    def damaged(reason: str) -> StateFileDamagedError:
        op, part, ver = (expect[1], expect[2], expect[3]) if expect else ("?", -1, -1)
        return StateFileDamagedError(reason, path=path, operator=op, partition=part,
                                     version=ver, kind=kind_hint)

    fixed = _PREFIX.size + 2 * _U32.size
    if len(data) < fixed + _U32.size + len(_END):
        raise damaged(f"{len(data)} bytes is shorter than any version file (cut short)")
    magic, fmt, code, _ = _PREFIX.unpack_from(view, 0)
    if magic != _MAGIC:
        raise damaged(f"bad magic {bytes(magic)!r} (not a Weir state version file)")
    if fmt != _FORMAT:
        raise damaged(f"format {fmt}, this Weir reads format {_FORMAT}"
                      + (" (written by a newer Weir?)" if fmt > _FORMAT else ""))
    kind = _BY_CODE.get(code)
    if kind is None:
        raise damaged(f"unknown kind code {code}")
    (hlen,) = _U32.unpack_from(view, _PREFIX.size)
    (hcrc,) = _U32.unpack_from(view, _PREFIX.size + 4)
    hstart = fixed
    hend = hstart + hlen
    if hend > len(data):
        raise damaged(f"header length {hlen} runs past the end of the file (cut short)")
    header_bytes = view[hstart:hend]
    if crc32c.crc32c(header_bytes) != hcrc:
        raise damaged("the header fails its CRC-32C check")
    try:
        header = orjson.loads(header_bytes)
    except orjson.JSONDecodeError as exc:
        raise damaged(f"the header is not JSON: {exc}") from exc
    body_len = header.get("body_len", -1)
    bend = hend + body_len
    if body_len < 0 or bend + _U32.size + len(_END) != len(data):
        raise damaged(f"the file is {len(data)} bytes but its header says {body_len} body bytes "
                      f"(cut short or extended)")
    if bytes(view[bend + _U32.size:]) != _END:
        raise damaged("the end marker is missing")
    (bcrc,) = _U32.unpack_from(view, bend)
    body = view[hend:bend]
    if crc32c.crc32c(body) != bcrc:
        raise damaged("the body fails its CRC-32C check")
    if expect is not None:
        ekind, eop, epart, ever = expect
        got = (kind, header.get("operator"), header.get("partition"), header.get("version"))
        if got != (ekind, eop, epart, ever):
            raise damaged(f"it holds {got[0].value} {got[1]!r} partition {got[2]} version "
                          f"{got[3]} (copied or renamed from elsewhere?)")
    infos = tuple(SectionInfo(s["name"], s["records"], s["frames"]) for s in header["sections"])
    wanted = None if sections is None else set(sections)
    decoded: dict[str, tuple[list[bytes], list[bytes | None]]] = {}
    if any(wanted is None or s.name in wanted for s in infos) and body_len:
        try:
            raw = zstandard.ZstdDecompressor().decompress(bytes(body))
        except zstandard.ZstdError as exc:
            raise damaged(f"the body does not decompress: {exc}") from exc
        pos = 0
        for info in infos:
            keys: list[bytes] = []
            values: list[bytes | None] = []
            for _ in range(info.frames):
                try:
                    k, v, pos_next = decode_frame(raw, pos)
                except FrameError as exc:
                    raise damaged(f"section {info.name!r}: {exc}") from exc
                if wanted is None or info.name in wanted:
                    keys.extend(k)
                    values.extend(v)
                pos = pos_next
            if len(keys) != info.records and (wanted is None or info.name in wanted):
                raise damaged(f"section {info.name!r} holds {len(keys)} records, its header "
                              f"says {info.records}")
            if wanted is None or info.name in wanted:
                decoded[info.name] = (keys, values)
        if pos != len(raw):
            raise damaged(f"{len(raw) - pos} bytes after the last frame")
    return VersionFile(kind, header["operator"], header["partition"], header["version"], infos,
                       header.get("meta") or {}, header.get("created_ms", 0),
                       header.get("writer") or {}, len(data), decoded)
