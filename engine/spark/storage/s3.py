"""S3 and S3-compatible stores as checkpoint stores, through boto3: one HTTP request per
operation; a version is published with ``PutObject`` and ``If-None-Match: *``
(``CompleteMultipartUpload`` with it above the multipart threshold), which S3 decides
atomically."""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from weir.engine.spark.errors import CheckpointStorageError
from weir.engine.spark.locations import Location, ObjectPath, StorageKind
from weir.engine.spark.storage.base import CheckpointStorage, Entry, import_client, object_path
from weir.engine.spark.storage.options import StorageOptions

__all__ = ["S3Storage", "forget_session"]

log = logging.getLogger("weir.spark.storage")

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

    def _explain(self, exc: Exception) -> str:
        return (f"{_describe_error(exc)}. Check the credentials and endpoint Weir reads "
                f"(spark.hadoop.fs.s3a.endpoint, .access.key, .secret.key, or the AWS "
                f"environment) and that the bucket exists; the task can be retried")

    def read(self, path: Location) -> bytes:
        p = object_path(path)
        try:
            return self.client.get_object(Bucket=p.bucket, Key=p.key)["Body"].read()
        except Exception as exc:  # noqa: BLE001 - classified below
            if _status(exc) == 404:
                raise FileNotFoundError(errno.ENOENT, "no such object", str(path)) from None
            raise self._fail(exc, path, "read") from exc

    def exists(self, path: Location) -> bool:
        p = object_path(path)
        try:
            self.client.head_object(Bucket=p.bucket, Key=p.key)
            return True
        except Exception as exc:  # noqa: BLE001
            if _status(exc) == 404:
                return False
            raise self._fail(exc, path, "check") from exc

    def _list(self, directory: Location) -> tuple[list[dict], list[str]]:
        d = object_path(directory)
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
        start = len(object_path(directory).prefix)
        return [c["Key"][start:] for c in self._list(directory)[0]]

    def entries(self, directory: Location) -> list[Entry]:
        start = len(object_path(directory).prefix)
        return [Entry(c["Key"][start:], int(c["Size"])) for c in self._list(directory)[0]]

    def directories(self, directory: Location) -> list[str]:
        start = len(object_path(directory).prefix)
        return [p[start:].rstrip("/") for p in self._list(directory)[1]]

    def create(self, path: Location, data: bytes) -> bool:
        p = object_path(path)
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
                    return self.created_after_refusal(path, data)
                if status == 409 and attempt + 1 < _CONFLICT_RETRIES:
                    # ConditionalRequestConflict: another conditional write of the key is in
                    # flight; S3 asks to retry, and the retry learns who won.
                    time.sleep(0.05 * (attempt + 1))
                    continue
                raise self._fail(exc, path, "publish") from exc
        raise AssertionError("unreachable")

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
            p = object_path(path)
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
        p, a = object_path(path), object_path(aside)
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
        d = object_path(directory)
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


_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


def forget_session() -> None:
    """Drop this process's boto3 session (after a fork, or in tests)."""
    global _SESSION, _SESSION_LOCK
    _SESSION = None
    _SESSION_LOCK = threading.Lock()


def _s3_client(options: StorageOptions) -> Any:
    boto3, botocore_config = import_client("an s3a://", "boto3", "s3", "boto3", "botocore.config")
    s3: dict[str, Any] = {}
    if options.s3_path_style is not None:
        s3["addressing_style"] = "path" if options.s3_path_style else "virtual"
    config = botocore_config.Config(s3=s3 or None,
                                    retries={"mode": "standard", "total_max_attempts": 5},
                                    connect_timeout=10, read_timeout=60)
    global _SESSION
    with _SESSION_LOCK:   # a boto3 session is not thread-safe; its clients are
        if _SESSION is None:
            _SESSION = boto3.session.Session()   # loads the service models once
        return _SESSION.client(
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
