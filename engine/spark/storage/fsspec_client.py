"""Object stores through an fsspec file system as checkpoint stores: GCS (gcsfs) and ADLS
(adlfs), and any other whose ``pipe_file(mode="create")`` is an atomic conditional write
(s3fs). A version is published with that conditional write: ``ifGenerationMatch=0`` on GCS,
``If-None-Match: *`` on ADLS and S3."""

from __future__ import annotations

import errno
from collections.abc import Iterable
from typing import Any

from weir.engine.spark.errors import CheckpointLocationError
from weir.engine.spark.locations import Location, StorageKind
from weir.engine.spark.storage.base import (CheckpointStorage, Entry, import_client,
                                            object_path)
from weir.engine.spark.storage.options import StorageOptions

__all__ = ["FsspecStorage", "open_adls", "open_gcs"]


class FsspecStorage(CheckpointStorage):
    """An fsspec file system whose ``pipe_file(mode="create")`` is an atomic conditional write:
    gcsfs (``ifGenerationMatch=0``), adlfs (``If-None-Match: *``), s3fs (``If-None-Match: *``).
    Listings are never cached (another task's publication must show at once)."""

    def __init__(self, fs: Any, kind: StorageKind):
        self.fs = fs
        self.kind = kind

    def __repr__(self) -> str:
        return f"FsspecStorage({type(self.fs).__name__})"

    @staticmethod
    def _p(path: Location) -> str:
        p = object_path(path)
        return f"{p.bucket}/{p.key}" if p.key else p.bucket

    def _explain(self, exc: Exception) -> str:
        return (f"{type(exc).__name__}: {exc}; check the store's credentials and that the "
                f"bucket exists; the task can be retried")

    def read(self, path: Location) -> bytes:
        try:
            return self.fs.cat_file(self._p(path))
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", str(path)) from None
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "read") from exc

    def exists(self, path: Location) -> bool:
        try:
            return bool(self.fs.exists(self._p(path)))
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "check") from exc

    def _ls(self, directory: Location) -> list[dict]:
        try:
            return list(self.fs.ls(self._p(directory), detail=True))
        except FileNotFoundError:
            return []
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, directory, "list") from exc

    def names(self, directory: Location) -> list[str]:
        return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self._ls(directory)
                if e.get("type") == "file"]

    def entries(self, directory: Location) -> list[Entry]:
        out = []
        for e in self._ls(directory):
            if e.get("type") != "file":
                continue
            out.append(Entry(e["name"].rsplit("/", 1)[-1], int(e.get("size") or 0)))
        return out

    def directories(self, directory: Location) -> list[str]:
        return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self._ls(directory)
                if e.get("type") == "directory"]

    def create(self, path: Location, data: bytes) -> bool:
        try:
            self.fs.pipe_file(self._p(path), data, mode="create")
            return True
        except FileExistsError:
            pass
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "publish") from exc
        return self.created_after_refusal(path, data)

    def delete(self, paths: Iterable[Location]) -> None:
        names = [self._p(p) for p in paths]
        if not names:
            return
        try:
            self.fs.rm(names)
        except FileNotFoundError:
            for name in names:
                try:
                    self.fs.rm_file(name)
                except FileNotFoundError:
                    pass
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, next(iter(paths), ""), "delete") from exc

    def set_aside(self, path: Location, aside: Location) -> bool:
        try:
            self.fs.copy(self._p(path), self._p(aside))
        except FileNotFoundError:
            return False
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, path, "set aside") from exc
        self.delete([path])
        return True


def open_gcs(options: StorageOptions) -> FsspecStorage:
    """The storage of a ``gs://`` location (gcsfs)."""
    gcsfs, = import_client("a gs://", "gcsfs", "gcs", "gcsfs")
    return FsspecStorage(gcsfs.GCSFileSystem(project=options.gcs_project,
                                             use_listings_cache=False, skip_instance_cache=True),
                         StorageKind.GCS)


def open_adls(options: StorageOptions, account: str | None) -> FsspecStorage:
    """The storage of an ``abfss://`` location of ``account`` (adlfs)."""
    adlfs, = import_client("an abfss://", "adlfs", "adls", "adlfs")
    if account is None:
        raise CheckpointLocationError("an abfss:// location names its account: "
                                      "abfss://<container>@<account>.dfs.core.windows.net/<path>")
    key = dict(options.azure_account_keys).get(account)
    return FsspecStorage(adlfs.AzureBlobFileSystem(account_name=account, account_key=key,
                                                   use_listings_cache=False,
                                                   skip_instance_cache=True),
                         StorageKind.ADLS)
