"""The seam every checkpoint store fills, and the create-if-absent contract they share.

:class:`CheckpointStorage` is the handful of operations the durable layout
(:mod:`weir.engine.spark.durable`) asks of the store a checkpoint lives in. Every store
publishes a version with its own atomic create-if-absent primitive (the table in
:mod:`weir.engine.spark.storage`); what they share lives here:

* **a refused create is read back** (:meth:`CheckpointStorage.created_after_refusal`): a client
  that lost the answer to its conditional write retries it and is refused by its own object,
  so the object is compared with the bytes this call wrote (every version file carries its
  writer's host, pid and creation time, so two attempts never write the same bytes);
* **publish temp files** of the stores that write a temp name first (the local file system,
  HDFS) are named ``.<name>.<host>.<pid>.<random>.tmp`` (:func:`publish_temp_name`), so that
  ``clean_orphans`` recognises those of a dead process on this host
  (:func:`is_publish_temp`, :func:`writer_gone`);
* **a client library that is not installed** is a
  :class:`~weir.engine.spark.errors.CheckpointLocationError` naming the extra to install
  (:func:`import_client`).

Example::

    >>> name = publish_temp_name("00000000000000000007.snapshot.zst")
    >>> is_publish_temp(name), writer_gone(name)
    (True, False)
"""

from __future__ import annotations

import importlib
import os
import re
import socket
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from weir.stores.filesafety import pid_alive

from weir.engine.spark.errors import (CheckpointLocationError, CheckpointStorageError,
                                      SparkError)
from weir.engine.spark.locations import Location, ObjectPath, StorageKind

__all__ = ["CheckpointStorage", "Entry", "import_client", "is_publish_temp", "object_path",
           "publish_temp_name", "writer_gone"]

_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.tmp$")

_VANISHED = ("the store refused the create because the object exists, and then the object "
             "was gone: something deletes the checkpoint's files while a query runs")


@dataclass(frozen=True)
class Entry:
    """A file in a listing: its name in the directory and its size."""

    name: str
    size: int


class CheckpointStorage(ABC):
    """The operations the state files need from the store a checkpoint lives in.

    Paths are :class:`~pathlib.Path` for the local file system and
    :class:`~weir.engine.spark.locations.ObjectPath` for the object stores. A missing file is
    ``FileNotFoundError`` (``read``) or an empty listing; any other failure of a request is
    :class:`~weir.engine.spark.errors.CheckpointStorageError` naming the location.
    """

    kind: StorageKind

    @abstractmethod
    def read(self, path: Location) -> bytes:
        """The whole file; FileNotFoundError when it is not there."""

    @abstractmethod
    def exists(self, path: Location) -> bool:
        ...

    @abstractmethod
    def names(self, directory: Location) -> list[str]:
        """Names of the files directly in ``directory`` (empty when there is none)."""

    @abstractmethod
    def entries(self, directory: Location) -> list[Entry]:
        """The files directly in ``directory`` with their sizes."""

    @abstractmethod
    def directories(self, directory: Location) -> list[str]:
        """Names of the directories (prefixes) directly in ``directory``."""

    @abstractmethod
    def create(self, path: Location, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless it exists, atomically; True when this call
        created it (see :meth:`created_after_refusal` for a retried call), False when the file
        was there already (left as it was)."""

    @abstractmethod
    def delete(self, paths: Iterable[Location]) -> None:
        """Delete files; missing ones are no error."""

    @abstractmethod
    def set_aside(self, path: Location, aside: Location) -> bool:
        """Move a (damaged) file to ``aside`` so its name can be published again; False when
        it was gone already."""

    def clean_orphans(self, directory: Location, max_age_ms: int) -> list[Location]:
        """Remove what failed publish attempts left in ``directory`` and can no longer finish;
        returns what was removed. Nothing by default: a store whose writes are single
        requests leaves nothing behind."""
        return []

    def make_directory(self, directory: Location) -> None:
        """Make ``directory`` exist where directories are real (object stores have none)."""

    def _fail(self, exc: Exception, path: Location, operation: str) -> CheckpointStorageError:
        """A failed request as the typed error naming the location and the operation, with
        what to check (:meth:`_explain`)."""
        return CheckpointStorageError(self._explain(exc), location=path, operation=operation)

    def _explain(self, exc: Exception) -> str:
        """What went wrong and what to check, for :meth:`_fail`; each store names its own
        settings."""
        return f"{type(exc).__name__}: {exc}; the task can be retried"

    def created_after_refusal(self, path: Location, data: bytes, *,
                              vanished: str = _VANISHED) -> bool:
        """After the store refused to create ``path`` because it exists: True when it holds
        exactly ``data`` (this call's own write, whose answer was lost, found by a retry),
        False when another attempt won. A file that is gone by now is a
        CheckpointStorageError saying ``vanished``."""
        try:
            return self.read(path) == data
        except FileNotFoundError:
            raise CheckpointStorageError(vanished, location=path,
                                         operation="publish") from None


def object_path(path: Location) -> ObjectPath:
    """``path`` as an object-store path; SparkError when it is a local one."""
    if not isinstance(path, ObjectPath):
        raise SparkError(f"{path} is not an object store location")
    return path


def import_client(location: str, needs: str, extra: str, *modules: str) -> list[ModuleType]:
    """Import the client library of a checkpoint store (``modules``), or raise
    CheckpointLocationError: ``<location> checkpoint location needs <needs>: pip install
    'weir[<extra>]'``."""
    try:
        return [importlib.import_module(name) for name in modules]
    except ImportError:
        raise CheckpointLocationError(f"{location} checkpoint location needs {needs}: pip "
                                      f"install 'weir[{extra}]'") from None


def _host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def publish_temp_name(name: str) -> str:
    """The temp name a publish attempt of this process writes ``name`` under first."""
    return f".{name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"


def is_publish_temp(name: str) -> bool:
    """Whether ``name`` is a :func:`publish_temp_name`."""
    return _TMP.match(name) is not None


def writer_gone(name: str) -> bool:
    """Whether the publish temp file ``name`` was written by a process of this host that is
    no longer running (so nobody will finish or remove it)."""
    m = _TMP.match(name)
    return m is not None and m.group("host") == _host() and not pid_alive(int(m.group("pid")))
