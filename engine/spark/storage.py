"""Where an operator's state files live, and how a version is published create-if-absent.

The durable layout (:mod:`weir.engine.spark.durable`) asks a :class:`CheckpointStorage` for a
handful of operations -- read a file, list a directory, create a file *unless it exists*,
delete, set a damaged file aside -- and every store answers them with its own atomic
primitive:

=================  ===============================  ==========================================
location           create-if-absent                 client
=================  ===============================  ==========================================
a path             temp file, fsync, ``link``       the OS (:class:`LocalStorage`, default)
``s3a://`` ...     ``PutObject`` with               boto3 (:class:`S3Storage`); one request
                   ``If-None-Match: *`` (and        per operation
                   ``CompleteMultipartUpload``
                   with it above 256 MiB)
``gs://``          upload with                      gcsfs, ``pipe_file(mode="create")``
                   ``ifGenerationMatch=0``          (:class:`FsspecStorage`)
``abfss://``       ``Put Blob`` with                adlfs, ``pipe_file(mode="create")``
                   ``If-None-Match: *``             (:class:`FsspecStorage`)
``hdfs://``        write a temp name, then          fsspec's WebHDFS
                   ``RENAME`` (never replaces)      (:class:`WebHdfsStorage`)
=================  ===============================  ==========================================

**A retry after a lost response.** A client that sent a conditional write and lost the answer
retries it (boto3 does, by itself); the retry finds the object there -- its own -- and is
refused with ``412 Precondition Failed``. So a refused create reads the object back: when it
holds exactly the bytes this call wrote, the call created it (every version file carries its
writer's host, pid and creation time, so two attempts never write the same bytes); otherwise
another attempt won. Either way the caller learns the truth, and history neither forks nor
loses a version.

Example (the local file system)::

    >>> import tempfile
    >>> from pathlib import Path
    >>> storage = open_storage(tempfile.mkdtemp())
    >>> path = Path(tempfile.mkdtemp()) / "00000000000000000007.changelog.zst"
    >>> storage.create(path, b"first"), storage.create(path, b"second"), storage.read(path)
    (True, False, b'first')
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.engine.spark.errors import (CheckpointLocationError, CheckpointStorageError,
                                      SparkError)
from weir.engine.spark.locations import (Location, ObjectPath, StorageKind, parse_location,
                                         storage_kind)

__all__ = ["CheckpointStorage", "LocalStorage", "S3Storage", "FsspecStorage", "WebHdfsStorage",
           "Entry",
           "StorageOptions", "open_storage", "publish_bytes", "fsync_dir"]

log = logging.getLogger("weir.spark.storage")

_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[^.]+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.tmp$")


@dataclass(frozen=True)
class Entry:
    """A file in a listing: its name in the directory, size and last change."""

    name: str
    size: int
    modified_ms: int


class CheckpointStorage(ABC):
    """The operations the state files need from the store a checkpoint lives in.

    Paths are :class:`~pathlib.Path` for :class:`LocalStorage` and
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
        created it (see the module docstring for a retried call), False when the file was
        there already (left as it was)."""

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


# -- the local file system -------------------------------------------------------------------

def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _host() -> str:
    return socket.gethostname().replace(".", "_") or "host"


def _temp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")


def publish_bytes(final: Path, data: bytes) -> bool:
    """Create ``final`` holding ``data`` unless it exists; True when this call created it.

    Temp file, fsync, ``link`` (fails when the name exists), fsync of the directory: readers
    never see a partial file and two writers can never both win."""
    tmp = _temp_name(final)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, final)
        won = True
    except FileExistsError:
        won = False
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise CheckpointLocationError(
                f"cannot publish {final}: the checkpoint location does not support hard links "
                f"({exc.strerror}). The Weir state provider publishes every version with "
                f"create-if-absent (link) on a file system; use a local disk, NFS or a cluster "
                f"file system that supports hard links, or an object store location (s3a://, "
                f"gs://, abfss://; docs/SPARK.md)") from exc
        raise
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    if won:
        fsync_dir(final.parent)
    return won


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalStorage(CheckpointStorage):
    """A local or mounted file system with POSIX hard links (the default)."""

    kind = StorageKind.LOCAL

    def read(self, path: Location) -> bytes:
        return Path(path).read_bytes()

    def exists(self, path: Location) -> bool:
        return Path(path).exists()

    def names(self, directory: Location) -> list[str]:
        try:
            return os.listdir(directory)
        except FileNotFoundError:
            return []

    def entries(self, directory: Location) -> list[Entry]:
        out = []
        try:
            scan = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        for entry in scan:
            try:
                if entry.is_file():
                    st = entry.stat()
                    out.append(Entry(entry.name, st.st_size, int(st.st_mtime * 1000)))
            except FileNotFoundError:
                continue
        return out

    def directories(self, directory: Location) -> list[str]:
        try:
            return [e.name for e in os.scandir(directory) if e.is_dir()]
        except FileNotFoundError:
            return []

    def create(self, path: Location, data: bytes) -> bool:
        return publish_bytes(Path(path), data)

    def delete(self, paths: Iterable[Location]) -> None:
        parents = set()
        for path in paths:
            Path(path).unlink(missing_ok=True)
            parents.add(Path(path).parent)
        for parent in parents:
            if parent.is_dir():
                fsync_dir(parent)

    def set_aside(self, path: Location, aside: Location) -> bool:
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return False
        fsync_dir(Path(path).parent)
        return True

    def clean_orphans(self, directory: Location, max_age_ms: int) -> list[Location]:
        """Temp files of publish attempts: those of a dead process on this host, and any
        older than ``max_age_ms``."""
        host = _host()
        now = time.time()
        removed: list[Location] = []
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return []
        for entry in entries:
            m = _TMP.match(entry.name)
            if m is None:
                continue
            dead = m.group("host") == host and not _alive(int(m.group("pid")))
            try:
                old = (now - entry.stat().st_mtime) * 1000 > max_age_ms
            except FileNotFoundError:
                continue
            if dead or old:
                try:
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
                except FileNotFoundError:
                    pass
        return removed

    def make_directory(self, directory: Location) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)


# -- options of the object stores -------------------------------------------------------------

def _conf(values: Mapping[str, Any], key: str) -> str | None:
    """``key`` as Spark passes Hadoop keys (``spark.hadoop.<key>``) or bare (data source
    options, a Hadoop configuration)."""
    for name in (f"spark.hadoop.{key}", key):
        value = values.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


_AZURE_KEY = re.compile(r"^(?:spark\.hadoop\.)?fs\.azure\.account\.key\.([^.]+)\.(?:dfs|blob)\.")


@dataclass(frozen=True)
class StorageOptions:
    """How to reach the object stores and HDFS, from the Hadoop keys a Spark team already sets
    for its checkpoints (``spark.hadoop.fs.s3a.*``, ``spark.hadoop.fs.azure.account.key.*``,
    ``spark.hadoop.fs.gs.project.id``, ``spark.hadoop.dfs.namenode.http-address``); unset
    keys fall back to each client's own defaults (environment, profiles, instance roles).
    Parsed once on the driver; travels to the executors with the operator (secrets stay out
    of ``repr``)."""

    s3_endpoint: str | None = None
    s3_region: str | None = None
    s3_path_style: bool | None = None
    s3_access_key: str | None = field(default=None, repr=False)
    s3_secret_key: str | None = field(default=None, repr=False)
    s3_session_token: str | None = field(default=None, repr=False)
    azure_account_keys: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    gcs_project: str | None = None
    hdfs_http_address: str | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "StorageOptions":
        """From a Spark conf or any mapping of keys to strings."""
        path_style = _conf(values, "fs.s3a.path.style.access")
        if path_style is not None and path_style.lower() not in ("true", "false"):
            from weir.stores.errors import ConfigError

            raise ConfigError(f"must be true or false, got {path_style!r}",
                              key="spark.hadoop.fs.s3a.path.style.access")
        azure = tuple(sorted((m.group(1), str(v)) for k, v in values.items()
                             if (m := _AZURE_KEY.match(k)) and v))
        return cls(s3_endpoint=_conf(values, "fs.s3a.endpoint"),
                   s3_region=_conf(values, "fs.s3a.endpoint.region"),
                   s3_path_style=None if path_style is None else path_style.lower() == "true",
                   s3_access_key=_conf(values, "fs.s3a.access.key"),
                   s3_secret_key=_conf(values, "fs.s3a.secret.key"),
                   s3_session_token=_conf(values, "fs.s3a.session.token"),
                   azure_account_keys=azure,
                   gcs_project=_conf(values, "fs.gs.project.id"),
                   hdfs_http_address=_conf(values, "dfs.namenode.http-address"))

    @property
    def s3_endpoint_url(self) -> str | None:
        """The S3A endpoint as a URL (S3A accepts a bare host; boto3 needs a scheme)."""
        if not self.s3_endpoint:
            return None
        return self.s3_endpoint if "://" in self.s3_endpoint else f"https://{self.s3_endpoint}"


# -- S3 ---------------------------------------------------------------------------------------

_CONFLICT_RETRIES = 5


class S3Storage(CheckpointStorage):
    """S3 and S3-compatible stores through boto3: one HTTP request per operation; publication
    is ``PutObject`` with ``If-None-Match: *`` (``CompleteMultipartUpload`` with it for files
    of ``multipart_threshold`` bytes or more), which S3 decides atomically."""

    kind = StorageKind.S3

    def __init__(self, options: StorageOptions | None = None, *,
                 multipart_threshold: int = 256 << 20, part_size: int = 64 << 20,
                 orphan_scan_interval_s: float = 600.0, client: Any = None):
        self.options = options or StorageOptions()
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.orphan_scan_interval_s = orphan_scan_interval_s
        self._client = client
        self._scanned: dict[str, float] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3Storage(endpoint={self.options.s3_endpoint_url or 'AWS'})"

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = _s3_client(self.options)
        return self._client

    def _fail(self, exc: Exception, path: Location, operation: str) -> CheckpointStorageError:
        return CheckpointStorageError(
            f"{_describe_error(exc)}. Check the credentials and endpoint Weir reads "
            f"(spark.hadoop.fs.s3a.endpoint, .access.key, .secret.key, or the AWS "
            f"environment) and that the bucket exists; the task can be retried",
            location=path, operation=operation)

    def read(self, path: Location) -> bytes:
        p = _object(path)
        try:
            return self.client.get_object(Bucket=p.bucket, Key=p.key)["Body"].read()
        except Exception as exc:  # noqa: BLE001 - classified below
            if _status(exc) == 404:
                raise FileNotFoundError(errno.ENOENT, "no such object", str(path)) from None
            raise self._fail(exc, path, "read") from exc

    def exists(self, path: Location) -> bool:
        p = _object(path)
        try:
            self.client.head_object(Bucket=p.bucket, Key=p.key)
            return True
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 404:
                return False
            raise self._fail(exc, path, "check") from exc

    def _list(self, directory: Location) -> tuple[list[dict], list[str]]:
        d = _object(directory)
        contents: list[dict] = []
        prefixes: list[str] = []
        kwargs = {"Bucket": d.bucket, "Prefix": d.prefix, "Delimiter": "/"}
        try:
            while True:
                page = self.client.list_objects_v2(**kwargs)
                contents.extend(page.get("Contents", ()))
                prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
                if not page.get("IsTruncated"):
                    break
                kwargs["ContinuationToken"] = page["NextContinuationToken"]
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, directory, "list") from exc
        return contents, prefixes

    def names(self, directory: Location) -> list[str]:
        start = len(_object(directory).prefix)
        return [c["Key"][start:] for c in self._list(directory)[0]]

    def entries(self, directory: Location) -> list[Entry]:
        start = len(_object(directory).prefix)
        return [Entry(c["Key"][start:], int(c["Size"]),
                      int(c["LastModified"].timestamp() * 1000))
                for c in self._list(directory)[0]]

    def directories(self, directory: Location) -> list[str]:
        start = len(_object(directory).prefix)
        return [p[start:].rstrip("/") for p in self._list(directory)[1]]

    def create(self, path: Location, data: bytes) -> bool:
        p = _object(path)
        for attempt in range(_CONFLICT_RETRIES):
            try:
                if len(data) >= self.multipart_threshold:
                    self._multipart(p, data)
                else:
                    self.client.put_object(Bucket=p.bucket, Key=p.key, Body=data,
                                           IfNoneMatch="*")
                return True
            except Exception as exc:  # noqa: BLE001
                status = _status(exc)
                if status == 412:
                    return self._mine(path, data)
                if status == 409 and attempt + 1 < _CONFLICT_RETRIES:
                    # ConditionalRequestConflict: another conditional write of the key is in
                    # flight; S3 asks to retry, and the retry learns who won.
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise self._fail(exc, path, "publish") from exc
        raise AssertionError("unreachable")

    def _mine(self, path: Location, data: bytes) -> bool:
        """After ``412``: True when the object holds exactly our bytes (our own write, whose
        answer was lost, found by the client's retry), False when another attempt won."""
        try:
            return self.read(path) == data
        except FileNotFoundError:
            raise CheckpointStorageError(
                "the store refused the create because the object exists, and then the object "
                "was gone: something deletes the checkpoint's files while a query runs",
                location=path, operation="publish") from None

    def _multipart(self, p: ObjectPath, data: bytes) -> None:
        client = self.client
        upload = client.create_multipart_upload(Bucket=p.bucket, Key=p.key)["UploadId"]
        done = False
        try:
            parts = []
            view = memoryview(data)
            for number, start in enumerate(range(0, len(data), self.part_size), 1):
                etag = client.upload_part(Bucket=p.bucket, Key=p.key, UploadId=upload,
                                          PartNumber=number,
                                          Body=bytes(view[start:start + self.part_size]))["ETag"]
                parts.append({"PartNumber": number, "ETag": etag})
            client.complete_multipart_upload(Bucket=p.bucket, Key=p.key, UploadId=upload,
                                             MultipartUpload={"Parts": parts}, IfNoneMatch="*")
            done = True
        finally:
            if not done:
                try:
                    client.abort_multipart_upload(Bucket=p.bucket, Key=p.key, UploadId=upload)
                except Exception:  # noqa: BLE001 - clean_orphans removes it later
                    log.warning("could not abort the multipart upload of %s", p)

    def delete(self, paths: Iterable[Location]) -> None:
        by_bucket: dict[str, list[str]] = {}
        for path in paths:
            p = _object(path)
            by_bucket.setdefault(p.bucket, []).append(p.key)
        for bucket, keys in by_bucket.items():
            for start in range(0, len(keys), 1000):
                chunk = keys[start:start + 1000]
                try:
                    answer = self.client.delete_objects(
                        Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk],
                                               "Quiet": True})
                except Exception as exc:  # noqa: BLE001
                    raise self._fail(exc, ObjectPath("s3", bucket, chunk[0]), "delete") from exc
                errors = [e for e in answer.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
                if errors:
                    first = errors[0]
                    raise CheckpointStorageError(
                        f"{len(errors)} object(s) not deleted, first: {first.get('Code')} "
                        f"{first.get('Message')}", location=ObjectPath("s3", bucket,
                                                                       first.get("Key", "")),
                        operation="delete")

    def set_aside(self, path: Location, aside: Location) -> bool:
        p, a = _object(path), _object(aside)
        try:
            self.client.copy_object(Bucket=a.bucket, Key=a.key,
                                    CopySource={"Bucket": p.bucket, "Key": p.key})
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 404:
                return False
            raise self._fail(exc, path, "set aside") from exc
        self.delete([path])
        return True

    def clean_orphans(self, directory: Location, max_age_ms: int) -> list[Location]:
        """Multipart uploads under ``directory`` started more than ``max_age_ms`` ago (an
        attempt killed while uploading a large snapshot): aborted, since S3 keeps -- and bills
        -- their parts until then. At most once per ``orphan_scan_interval_s`` per directory
        and process: one listing request, not one per batch."""
        d = _object(directory)
        now = time.monotonic()
        last = self._scanned.get(str(d))
        if last is not None and now - last < self.orphan_scan_interval_s:
            return []
        self._scanned[str(d)] = now
        removed: list[Location] = []
        kwargs: dict[str, Any] = {"Bucket": d.bucket, "Prefix": d.prefix}
        cutoff = time.time() - max_age_ms / 1000
        try:
            while True:
                page = self.client.list_multipart_uploads(**kwargs)
                for upload in page.get("Uploads", ()):
                    if upload["Initiated"].timestamp() <= cutoff:
                        self.client.abort_multipart_upload(Bucket=d.bucket, Key=upload["Key"],
                                                           UploadId=upload["UploadId"])
                        removed.append(ObjectPath(d.scheme, d.authority, upload["Key"]))
                if not page.get("IsTruncated"):
                    break
                kwargs["KeyMarker"] = page["NextKeyMarker"]
                kwargs["UploadIdMarker"] = page["NextUploadIdMarker"]
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc, directory, "clean orphans of") from exc
        return removed


def _s3_client(options: StorageOptions) -> Any:
    try:
        import boto3
        from botocore.config import Config as BotoConfig
    except ImportError:
        raise CheckpointLocationError(
            "an s3a:// checkpoint location needs boto3: pip install 'weir[s3]'") from None
    s3: dict[str, Any] = {}
    if options.s3_path_style is not None:
        s3["addressing_style"] = "path" if options.s3_path_style else "virtual"
    config = BotoConfig(s3=s3 or None, retries={"mode": "standard", "total_max_attempts": 5},
                        connect_timeout=10, read_timeout=60)
    global _BOTO_SESSION
    with _OPEN_LOCK:   # a boto3 session is not thread-safe; its clients are
        if _BOTO_SESSION is None:
            _BOTO_SESSION = boto3.session.Session()   # loads the service models once
        return _BOTO_SESSION.client(
            "s3", endpoint_url=options.s3_endpoint_url, region_name=options.s3_region,
            aws_access_key_id=options.s3_access_key, aws_secret_access_key=options.s3_secret_key,
            aws_session_token=options.s3_session_token, config=config)


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = response.get("Error", {}).get("Code")
        if code in ("NoSuchKey", "NotFound", "404"):
            return 404
        return status
    return None


def _describe_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code')}: {err.get('Message')}"
    return f"{type(exc).__name__}: {exc}"


def _object(path: Location) -> ObjectPath:
    if not isinstance(path, ObjectPath):
        raise SparkError(f"{path} is not an object store location")
    return path


# -- GCS, ADLS (fsspec) -----------------------------------------------------------------------

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
        p = _object(path)
        return f"{p.bucket}/{p.key}" if p.key else p.bucket

    def _fail(self, exc: Exception, path: Location, operation: str) -> CheckpointStorageError:
        return CheckpointStorageError(f"{type(exc).__name__}: {exc}; check the store's "
                                      f"credentials and that the bucket exists; the task can be "
                                      f"retried", location=path, operation=operation)

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
            modified = e.get("LastModified") or e.get("updated") or e.get("last_modified") \
                or e.get("modificationTime")
            if isinstance(modified, int):
                ms = modified                                  # WebHDFS: epoch ms
            else:
                ms = int(modified.timestamp() * 1000) if hasattr(modified, "timestamp") else 0
            out.append(Entry(e["name"].rsplit("/", 1)[-1], int(e.get("size") or 0), ms))
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
        try:
            return self.read(path) == data
        except FileNotFoundError:
            raise CheckpointStorageError(
                "the store refused the create because the object exists, and then the object "
                "was gone: something deletes the checkpoint's files while a query runs",
                location=path, operation="publish") from None

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


def _gcs(options: StorageOptions) -> FsspecStorage:
    try:
        import gcsfs
    except ImportError:
        raise CheckpointLocationError(
            "a gs:// checkpoint location needs gcsfs: pip install 'weir[gcs]'") from None
    return FsspecStorage(gcsfs.GCSFileSystem(project=options.gcs_project,
                                             use_listings_cache=False, skip_instance_cache=True),
                         StorageKind.GCS)


def _adls(options: StorageOptions, account: str | None) -> FsspecStorage:
    try:
        import adlfs
    except ImportError:
        raise CheckpointLocationError(
            "an abfss:// checkpoint location needs adlfs: pip install 'weir[adls]'") from None
    if account is None:
        raise CheckpointLocationError("an abfss:// location names its account: "
                                      "abfss://<container>@<account>.dfs.core.windows.net/<path>")
    key = dict(options.azure_account_keys).get(account)
    return FsspecStorage(adlfs.AzureBlobFileSystem(account_name=account, account_key=key,
                                                   use_listings_cache=False,
                                                   skip_instance_cache=True),
                         StorageKind.ADLS)


# -- HDFS (WebHDFS) ---------------------------------------------------------------------------

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
        return "/" + _object(path).key

    def __repr__(self) -> str:
        return f"WebHdfsStorage({self.fs.url})"

    def _fail(self, exc: Exception, path: Location, operation: str) -> CheckpointStorageError:
        return CheckpointStorageError(
            f"{type(exc).__name__}: {exc}; check that the NameNode's WebHDFS answers at "
            f"{self.fs.url} (spark.hadoop.dfs.namenode.http-address) and that the HDFS user "
            f"(HADOOP_USER_NAME) may write there; the task can be retried",
            location=path, operation=operation)

    def create(self, path: Location, data: bytes) -> bool:
        final = _object(path)
        tmp = final.with_name(f".{final.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp")
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
        try:
            return self.read(path) == data
        except FileNotFoundError:
            raise CheckpointStorageError(
                "HDFS refused to rename the written file to this name, and there is no file "
                "by this name: its directory is missing or not writable",
                location=path, operation="publish") from None

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
        d = _object(directory)
        last = self._scanned.get(str(d))
        if last is not None and time.monotonic() - last < self.orphan_scan_interval_s:
            return []
        self._scanned[str(d)] = time.monotonic()
        host, now_ms = _host(), time.time() * 1000
        stale = []
        for entry in self._ls(directory):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            m = _TMP.match(name)
            if m is None or entry.get("type") != "file":
                continue
            dead = m.group("host") == host and not _alive(int(m.group("pid")))
            if dead or now_ms - int(entry.get("modificationTime") or 0) > max_age_ms:
                stale.append(d / name)
        self.delete(stale)
        return stale


def _webhdfs(options: StorageOptions, location: ObjectPath) -> WebHdfsStorage:
    try:
        import requests  # noqa: F401 - fsspec's WebHDFS client runs on it
        from fsspec.implementations.webhdfs import WebHDFS
    except ImportError:
        raise CheckpointLocationError(
            "an hdfs:// checkpoint location needs fsspec and requests: pip install "
            "'weir[hdfs]'") from None

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
    return WebHdfsStorage(WebHDFS(host, port=int(port), user=user, use_https=https,
                                  skip_instance_cache=True, use_listings_cache=False))


# -- choosing one -----------------------------------------------------------------------------

_LOCAL = LocalStorage()
_OPEN: dict[tuple, CheckpointStorage] = {}
_OPEN_LOCK = threading.RLock()
_BOTO_SESSION: Any = None


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
                if kind is StorageKind.S3:
                    storage = S3Storage(options)
                elif kind is StorageKind.GCS:
                    storage = _gcs(options)
                elif kind is StorageKind.HDFS:
                    storage = _webhdfs(options, path)
                else:
                    storage = _adls(options, account)
                _OPEN[key] = storage
    return storage


def _forget_storages() -> None:
    """Drop this process's clients (after a fork, or in tests)."""
    global _BOTO_SESSION, _OPEN_LOCK
    _OPEN.clear()
    _BOTO_SESSION = None
    _OPEN_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_forget_storages)   # clients hold sockets and threads
