"""HDFS as a checkpoint store, through its REST API, WebHDFS (fsspec's client): a version is
written under a temp name, then renamed to its final name; HDFS's rename never replaces a
file, so it is create-if-absent."""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Iterable
from typing import Any

from weir.engine.spark.errors import CheckpointLocationError, CheckpointStorageError
from weir.engine.spark.locations import Location, ObjectPath, StorageKind
from weir.engine.spark.storage.base import (import_client, is_publish_temp, object_path,
                                            publish_temp_name, writer_gone)
from weir.engine.spark.storage.fsspec_client import FsspecStorage
from weir.engine.spark.storage.options import StorageOptions

__all__ = ["WebHdfsStorage", "open_webhdfs"]

log = logging.getLogger("weir.spark.storage")

_WEBHDFS_PORT = 9870   # dfs.namenode.http-address's default port (Hadoop 3)


class WebHdfsStorage(FsspecStorage):
    """HDFS through its REST API, WebHDFS (fsspec's ``WebHDFileSystem``): publication writes
    the file under a temp name, then renames it (``RENAME``) to its final name. HDFS's rename never
    replaces an existing file (the NameNode answers ``{"boolean": false}``, deciding under its
    namespace lock), so it is create-if-absent, and a reader never sees a partial file. fsspec's
    own ``mv`` ignores that answer, so the rename is sent here and its answer read."""

    def __init__(self, fs: Any, *, orphan_scan_interval_s: float = 600.0):
        super().__init__(fs, StorageKind.HDFS)
        self.orphan_scan_interval_s = orphan_scan_interval_s
        self._scanned: dict[str, float] = {}

    @staticmethod
    def _p(path: Location) -> str:
        return "/" + object_path(path).key

    def __repr__(self) -> str:
        return f"WebHdfsStorage({self.fs.url})"

    def _explain(self, exc: Exception) -> str:
        return (f"{type(exc).__name__}: {exc}; check that the NameNode's WebHDFS answers at "
                f"{self.fs.url} (spark.hadoop.dfs.namenode.http-address) and that the HDFS user "
                f"(HADOOP_USER_NAME) may write there; the task can be retried")

    def create(self, path: Location, data: bytes) -> bool:
        final = object_path(path)
        tmp = final.with_name(publish_temp_name(final.name))
        try:
            # The two-step CREATE of WebHDFS (NameNode, then the DataNode it redirects to) of
            # the temp name, which no other attempt uses: overwrite=false makes a clash an error.
            answer = self.fs._call("CREATE", "put", self._p(tmp), redirect=False,
                                   overwrite="false")
            written = self.fs.session.put(self.fs._apply_proxy(answer.headers["Location"]),
                                          data=data,
                                          headers={"content-type": "application/octet-stream"})
            written.raise_for_status()
        except Exception as exc:  # noqa: BLE001
            self._drop(tmp)
            raise self._fail(exc, path, "publish") from exc
        try:
            renamed = self.fs._call("RENAME", "put", self._p(tmp),
                                    destination=self._p(final)).json()["boolean"]
        except Exception as exc:  # noqa: BLE001 - the answer may be lost after the rename
            if self._holds(path, data):
                return True                      # the rename happened: the file is ours
            self._drop(tmp)
            raise self._fail(exc, path, "publish") from exc
        if renamed:
            return True
        self._drop(tmp)
        return self.created_after_refusal(
            path, data, vanished="HDFS refused to rename the written file to this name, and "
                                 "there is no file by this name: its directory is missing or "
                                 "not writable")

    def _holds(self, path: Location, data: bytes) -> bool:
        try:
            return self.read(path) == data
        except (FileNotFoundError, CheckpointStorageError):
            return False

    def _drop(self, tmp: ObjectPath) -> None:
        try:
            self.fs._call("DELETE", "delete", self._p(tmp), recursive="false")
        except Exception:  # noqa: BLE001 - clean_orphans removes it later
            log.warning("could not delete the temp file %s", tmp)

    def set_aside(self, path: Location, aside: Location) -> bool:
        try:
            return bool(self.fs._call("RENAME", "put", self._p(path),
                                      destination=self._p(aside)).json()["boolean"])
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "set aside") from exc

    def read(self, path: Location) -> bytes:
        """One ``OPEN`` (redirected to a DataNode), not fsspec's status + ranged reads."""
        try:
            return self.fs._call("OPEN", path=self._p(path)).content
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "read") from exc

    # make_directory: nothing; HDFS's create makes the missing parent directories, and a
    # version's temp file is renamed within its own directory.

    def delete(self, paths: Iterable[Location]) -> None:
        for path in paths:
            try:
                self.fs._call("DELETE", "delete", self._p(path), recursive="false")
            except FileNotFoundError:
                pass
            except Exception as exc:  # noqa: BLE001
                raise self._fail(exc, path, "delete") from exc

    def clean_orphans(self, directory: Location, max_age_ms: int) -> list[Location]:
        """Temp files of publish attempts: those of a dead process on this host, and any
        older than ``max_age_ms`` (as on a local file system). At most once per
        ``orphan_scan_interval_s`` per directory and process: a listing is a NameNode call."""
        d = object_path(directory)
        last = self._scanned.get(str(d))
        if last is not None and time.monotonic() - last < self.orphan_scan_interval_s:
            return []
        self._scanned[str(d)] = time.monotonic()
        now_ms = time.time() * 1000
        stale = []
        for entry in self._ls(directory):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if not is_publish_temp(name) or entry.get("type") != "file":
                continue
            if writer_gone(name) or now_ms - int(entry.get("modificationTime") or 0) > max_age_ms:
                stale.append(d / name)
        self.delete(stale)
        return stale


def open_webhdfs(options: StorageOptions, location: ObjectPath) -> WebHdfsStorage:
    """The storage of an ``hdfs://`` or ``webhdfs://`` location: the NameNode's WebHDFS
    address from the location (``webhdfs://``) or ``spark.hadoop.dfs.namenode.http-address``
    (default: the NameNode's host, port 9870)."""
    # requests: fsspec's WebHDFS client runs on it
    _, webhdfs = import_client("an hdfs://", "fsspec and requests", "hdfs", "requests",
                               "fsspec.implementations.webhdfs")
    if location.scheme == "webhdfs":      # Hadoop's webhdfs://<namenode>:<http port>/path
        address = location.authority
    else:                                 # hdfs://<namenode>:<rpc port>/path
        address = options.hdfs_http_address or \
            f"{location.authority.rsplit(':', 1)[0]}:{_WEBHDFS_PORT}"
    https = address.startswith("https://")
    address = address.split("://", 1)[-1]
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise CheckpointLocationError(
            f"checkpoint location {location}: the NameNode's WebHDFS address {address!r} is not "
            f"host:port; set spark.hadoop.dfs.namenode.http-address")
    user = os.environ.get("HADOOP_USER_NAME") or None
    return WebHdfsStorage(webhdfs.WebHDFS(host, port=int(port), user=user, use_https=https,
                                          skip_instance_cache=True, use_listings_cache=False))
