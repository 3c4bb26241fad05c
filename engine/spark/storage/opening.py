"""Which storage a checkpoint location lives in: :func:`open_storage`, one client per store,
options and process (clients and their connection pools are reused across the tasks of a
Python worker, and dropped in a forked child)."""

from __future__ import annotations

import os
import sys
import threading

from weir.engine.spark.errors import CheckpointLocationError
from weir.engine.spark.locations import (Location, ObjectPath, StorageKind, parse_location,
                                         storage_kind)
from weir.engine.spark.storage.base import CheckpointStorage
from weir.engine.spark.storage.local import LocalStorage
from weir.engine.spark.storage.options import StorageOptions

__all__ = ["open_storage"]

_LOCAL = LocalStorage()
_OPEN: dict[tuple, CheckpointStorage] = {}
_OPEN_LOCK = threading.RLock()


def open_storage(location: str | os.PathLike[str] | Location,
                 options: StorageOptions | None = None) -> CheckpointStorage:
    """The storage of a checkpoint location (one per store, options and process: clients and
    their connection pools are reused across tasks of a Python worker)."""
    kind = storage_kind(location)
    if kind is StorageKind.LOCAL:
        return _LOCAL
    path = parse_location(location)
    if kind is StorageKind.HDFS and isinstance(path, ObjectPath) and path.scheme == "viewfs":
        raise CheckpointLocationError(
            f"checkpoint location {location}: viewfs:// is resolved by Hadoop's mount table, "
            f"which Weir does not read; name the HDFS namespace the path is mounted from "
            f"(hdfs://<namenode>/<path>); docs/SPARK.md")
    options = options or StorageOptions()
    account = path.account if isinstance(path, ObjectPath) else None
    authority = path.authority if kind is StorageKind.HDFS else None
    key = (kind, options, account, authority)
    storage = _OPEN.get(key)
    if storage is None:
        with _OPEN_LOCK:
            storage = _OPEN.get(key)
            if storage is None:
                # each client's module loads with its first location (local-only workers
                # never import them)
                if kind is StorageKind.S3:
                    from weir.engine.spark.storage.s3 import S3Storage

                    storage = S3Storage(options)
                elif kind is StorageKind.GCS:
                    from weir.engine.spark.storage.fsspec_client import open_gcs

                    storage = open_gcs(options)
                elif kind is StorageKind.HDFS:
                    from weir.engine.spark.storage.webhdfs import open_webhdfs

                    storage = open_webhdfs(options, path)
                else:
                    from weir.engine.spark.storage.fsspec_client import open_adls

                    storage = open_adls(options, account)
                _OPEN[key] = storage
    return storage


def _forget_storages() -> None:
    """Drop this process's clients (after a fork, or in tests)."""
    global _OPEN_LOCK
    _OPEN.clear()
    s3 = sys.modules.get("weir.engine.spark.storage.s3")
    if s3 is not None:   # never imported: no session to drop
        s3.forget_session()
    _OPEN_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_forget_storages)   # clients hold sockets and threads
