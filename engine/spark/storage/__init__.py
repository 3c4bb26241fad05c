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

One module per client: the seam and the create-if-absent contract they share (``base.py``:
:class:`CheckpointStorage`, the read-back of a refused create, the typed error of a failed
request, publish temp names, a missing client library), the options (``options.py``), the local file system (``local.py``), S3
(``s3.py``), gcsfs/adlfs (``fsspec_client.py``), WebHDFS (``webhdfs.py``), and the choice of
one for a location with its per-process cache (``opening.py``).

Example (the local file system)::

    >>> import tempfile
    >>> from pathlib import Path
    >>> storage = open_storage(tempfile.mkdtemp())
    >>> path = Path(tempfile.mkdtemp()) / "00000000000000000007.changelog.zst"
    >>> storage.create(path, b"first"), storage.create(path, b"second"), storage.read(path)
    (True, False, b'first')
"""

from __future__ import annotations

from weir.stores._lazy import lazy_exports

from weir.engine.spark.storage.base import CheckpointStorage, Entry
from weir.engine.spark.storage.local import LocalStorage, publish_bytes
from weir.engine.spark.storage.opening import open_storage
from weir.engine.spark.storage.options import StorageOptions

# the object-store clients load on first use: a Python worker whose checkpoint is local never
# imports them (start-up of the first batch, docs/SPARK.md "Performance")
_LAZY = {"S3Storage": "weir.engine.spark.storage.s3",
         "FsspecStorage": "weir.engine.spark.storage.fsspec_client",
         "WebHdfsStorage": "weir.engine.spark.storage.webhdfs"}

__all__ = ["CheckpointStorage", "LocalStorage", "S3Storage", "FsspecStorage", "WebHdfsStorage",
           "Entry", "StorageOptions", "open_storage", "publish_bytes"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
