"""Checkpoint locations: a local path, or an object in a bucket named by a URI.

A location string is parsed once (:func:`parse_location`) into a :class:`pathlib.Path` (a local
or mounted file system: no scheme, or ``file://``) or an :class:`ObjectPath` (``s3a://``,
``s3://``, ``s3n://``, ``gs://``, ``abfss://``, ``abfs://``). Both answer ``/``, ``name``,
``parent`` and ``with_name`` the same way, so the layout code in
:mod:`weir.engine.spark.durable` builds its file names once for every store.

Example::

    >>> p = parse_location("s3a://lake/jobs/ckpt") / "weir" / "counts"
    >>> str(p), p.name, str(p.parent), p.key
    ('s3a://lake/jobs/ckpt/weir/counts', 'counts', 's3a://lake/jobs/ckpt/weir', 'jobs/ckpt/weir/counts')
    >>> parse_location("/tmp/ckpt")
    PosixPath('/tmp/ckpt')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["StorageKind", "ObjectPath", "Location", "parse_location", "storage_kind",
           "as_location"]


class StorageKind(Enum):
    """Where a checkpoint lives, by the scheme of its location."""

    LOCAL = "local"      # a path (local disk, NFS, a mounted cluster file system)
    S3 = "s3"            # s3a://, s3://, s3n://
    GCS = "gcs"          # gs://, gcs://
    ADLS = "adls"        # abfss://, abfs://
    HDFS = "hdfs"        # hdfs://, webhdfs:// (through WebHDFS; viewfs:// refused)


_SCHEMES = {"s3a": StorageKind.S3, "s3": StorageKind.S3, "s3n": StorageKind.S3,
            "gs": StorageKind.GCS, "gcs": StorageKind.GCS,
            "abfss": StorageKind.ADLS, "abfs": StorageKind.ADLS,
            "hdfs": StorageKind.HDFS, "viewfs": StorageKind.HDFS, "webhdfs": StorageKind.HDFS}


@dataclass(frozen=True)
class ObjectPath:
    """An object (or a prefix of objects) in a bucket: ``<scheme>://<authority>/<key>``.

    ``authority`` is the bucket (S3, GCS) or ``container@account.dfs.core.windows.net`` (ADLS);
    ``key`` has no leading or trailing ``/``.
    """

    scheme: str
    authority: str
    key: str = ""

    def __post_init__(self) -> None:
        if not self.authority:
            raise ValueError(f"{self.scheme}:// location without a bucket")
        object.__setattr__(self, "key", self.key.strip("/"))

    @property
    def kind(self) -> StorageKind:
        return _SCHEMES[self.scheme]

    @property
    def bucket(self) -> str:
        """The bucket (S3, GCS) or container (ADLS)."""
        return self.authority.split("@", 1)[0]

    @property
    def account(self) -> str | None:
        """The storage account of an ADLS location (None elsewhere)."""
        if "@" not in self.authority:
            return None
        return self.authority.split("@", 1)[1].split(".", 1)[0]

    def __truediv__(self, part: str | os.PathLike[str]) -> "ObjectPath":
        part = os.fspath(part).strip("/")
        return ObjectPath(self.scheme, self.authority, f"{self.key}/{part}" if self.key else part)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "ObjectPath":
        return ObjectPath(self.scheme, self.authority, self.key.rsplit("/", 1)[0]
                          if "/" in self.key else "")

    def with_name(self, name: str) -> "ObjectPath":
        return self.parent / name

    @property
    def prefix(self) -> str:
        """The key as a listing prefix (``key/``; empty at the bucket's root)."""
        return f"{self.key}/" if self.key else ""

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}/{self.key}"


Location = Path | ObjectPath
"""A file or directory of a checkpoint."""


def storage_kind(location: str | os.PathLike[str] | ObjectPath) -> StorageKind:
    if isinstance(location, ObjectPath):
        return location.kind
    if isinstance(location, os.PathLike):
        return StorageKind.LOCAL
    scheme = urlsplit(location).scheme.lower() if "://" in location else ""
    if not scheme or scheme == "file":
        return StorageKind.LOCAL
    kind = _SCHEMES.get(scheme)
    if kind is None:
        from weir.engine.spark.errors import CheckpointLocationError

        raise CheckpointLocationError(
            f"checkpoint location {location!r}: unknown scheme '{scheme}://'. Weir keeps state "
            f"on a local or mounted file system (a path), on S3 (s3a://, s3://), Google Cloud "
            f"Storage (gs://), Azure Data Lake Storage (abfss://) or HDFS (hdfs://); see "
            f"docs/SPARK.md")
    return kind


def parse_location(location: str | os.PathLike[str] | ObjectPath) -> Location:
    """A location string as a :class:`~pathlib.Path` or an :class:`ObjectPath`."""
    if isinstance(location, (ObjectPath, Path)):
        return location
    if isinstance(location, os.PathLike):
        return Path(location)
    kind = storage_kind(location)
    if kind is StorageKind.LOCAL:
        return Path(urlsplit(location).path if location.startswith("file://") else location)
    parts = urlsplit(location)
    return ObjectPath(parts.scheme.lower(), parts.netloc, parts.path)


def as_location(value: str | os.PathLike[str] | ObjectPath) -> Location:
    """For messages and error attributes: an ObjectPath stays one, anything else is a Path."""
    return value if isinstance(value, ObjectPath) else parse_location(value)
