"""State files on an object store: a real S3-compatible HTTP server (moto in server mode) on
loopback, reached through the two clients Weir can use for it -- boto3 (``S3Storage``, what
``s3a://`` locations get) and s3fs (``FsspecStorage``, the code path of ``gs://`` and
``abfss://`` through gcsfs and adlfs); and ``hdfs://`` through WebHDFS against a loopback
WebHDFS endpoint (``_webhdfs.py``)."""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import socket
import threading
import uuid

import pytest

from weir.engine.spark.durable import OperatorCheckpoint, list_operators
from weir.engine.spark.errors import (CheckpointLocationError, CheckpointStorageError,
                                      StateFileDamagedError)
from weir.engine.spark.locations import ObjectPath, StorageKind, parse_location
from weir.engine.spark.partition import load_version
from weir.engine.spark.replica import release_replicas
from weir.engine.spark.settings import ProviderSettings
from weir.engine.spark.statefile import VersionKind
from weir.engine.spark.storage import (FsspecStorage, S3Storage, StorageOptions, WebHdfsStorage,
                                       open_storage)

from tests.engine.spark._state import Operator
from tests.engine.spark._webhdfs import start_webhdfs

BATCHES = [["a", "b", "a"], ["b", "c"], ["a"], ["c", "c", "d"], ["e"], ["a", "e"], ["f"]]
_names = itertools.count()


def expected(upto: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for words in BATCHES[:upto]:
        for w in words:
            out[w] = out.get(w, 0) + 1
    return out


@pytest.fixture(scope="module")
def bucket(s3_server):
    return s3_server.bucket(f"weir-{uuid.uuid4().hex[:10]}")


@pytest.fixture
def location(bucket):
    """A fresh checkpoint location in the bucket, s3a:// as a Spark job names it."""
    return f"s3a://{bucket}/ckpt-{next(_names)}"


def _s3fs_storage(server) -> FsspecStorage:
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(key=server.key, secret=server.secret, use_listings_cache=False,
                           skip_instance_cache=True,
                           client_kwargs={"endpoint_url": server.endpoint,
                                          "region_name": server.region})
    return FsspecStorage(fs, StorageKind.S3)


@pytest.fixture(params=["boto3", "s3fs"])
def storage_factory(request, s3_server):
    """Makes a new client each call (racing attempts are separate processes in real life)."""
    if request.param == "boto3":
        return lambda: S3Storage(s3_server.options())
    return lambda: _s3fs_storage(s3_server)


@pytest.fixture
def op_factory(tmp_path, location, s3_server):
    def make(**kw):
        return Operator(location, tmp_path / "local", storage=s3_server.options(), **kw)

    yield make
    release_replicas()


# -- create-if-absent ------------------------------------------------------------------------

def test_create_publishes_once_and_leaves_the_first_object(storage_factory, location):
    storage = storage_factory()
    path = parse_location(location) / "00000000000000000003.changelog.zst"
    assert storage.create(path, b"first") is True
    assert storage.create(path, b"second") is False
    assert storage.read(path) == b"first"
    assert storage.exists(path)
    assert not storage.exists(path.with_name("00000000000000000004.changelog.zst"))
    with pytest.raises(FileNotFoundError):
        storage.read(path.with_name("00000000000000000004.changelog.zst"))


def test_two_attempts_racing_to_publish_the_same_version_exactly_one_wins(storage_factory,
                                                                         location):
    path = parse_location(location) / "00000000000000000001.changelog.zst"
    winner = _race(path, storage_factory)
    assert storage_factory().read(path) == f"attempt {winner}".encode()


def _race(path, new_storage, attempts: int = 4) -> int:
    """``attempts`` threads, each with its own client, create ``path`` at once (after a
    barrier); asserts that exactly one won and returns its number."""
    start = threading.Barrier(attempts)
    results: dict[int, bool] = {}

    def attempt(i: int) -> None:
        storage = new_storage()                           # its own client and connections
        data = f"attempt {i}".encode()
        start.wait()
        results[i] = storage.create(path, data)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(attempts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, won in results.items() if won]
    assert len(results) == attempts and len(winners) == 1
    return winners[0]


def test_a_retry_after_a_lost_response_sees_its_own_object_and_counts_as_created(
        storage_factory, location, bucket, s3_server):
    path = parse_location(location) / "00000000000000000002.changelog.zst"
    storage = storage_factory()
    s3_server.lose_response(bucket, path.key)            # stored, then the answer is lost
    s3_server.reset()
    assert storage.create(path, b"mine") is True          # the client's retry got 412: ours
    assert s3_server.requests()["PUT"] == 2
    assert storage.read(path) == b"mine"
    assert storage_factory().create(path, b"someone else") is False


def test_a_lost_response_without_client_retries_fails_typed_and_the_next_attempt_adopts(
        op_factory, bucket, s3_server):
    op = op_factory()
    op.run(0, 0, BATCHES[0])
    fragile = S3Storage(op.settings.storage, client=_client_without_retries(s3_server))
    op.checkpoint = OperatorCheckpoint(op.checkpoint.checkpoint, "counts",  # this attempt's
                                       storage=fragile)                     # client gives up
    s3_server.lose_response(bucket, op.checkpoint.partition(0).path(1, VersionKind.CHANGELOG).key)
    with pytest.raises(CheckpointStorageError, match="publish"):
        op.run(0, 1, BATCHES[1])
    release_replicas()                                    # the task failed; Spark retries it
    retry = op_factory()
    outcome, emitted = retry.run(0, 1, BATCHES[1])
    assert outcome == "replayed"                          # the lost write was published whole
    assert emitted == {"b": 2, "c": 1}
    retry.run(0, 2, BATCHES[2])
    assert retry.replica_counts(0) == expected(3)


def _client_without_retries(server):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=server.endpoint, region_name=server.region,
                        aws_access_key_id=server.key, aws_secret_access_key=server.secret,
                        config=Config(retries={"mode": "standard", "total_max_attempts": 1}))


def test_a_losing_task_adopts_the_winners_version_on_the_object_store(op_factory):
    op = op_factory()
    op.run(0, 0, BATCHES[0])
    loser = op.state(0, 1)
    loser.open()
    loser.store("counts").put("zzz", 99)
    assert op.run(0, 1, BATCHES[1])[0] == "published"     # another attempt wins
    assert loser.commit(outputs=[(b"zzz", b"99")]) == "adopted"
    assert dict(zip(*loser.outputs())) == {b"b": b"2", b"c": b"1"}
    loser.close()
    assert op.replica_counts(0) == expected(2)


def test_a_large_version_goes_up_in_parts_and_is_still_create_if_absent(location, s3_server):
    storage = S3Storage(s3_server.options(), multipart_threshold=5 << 20, part_size=5 << 20)
    path = parse_location(location) / "00000000000000000009.snapshot.zst"
    data = bytes(range(256)) * (11 << 12)                 # 11 MiB: three parts
    s3_server.reset()
    assert storage.create(path, data) is True
    assert s3_server.requests()["PUT"] == 3               # parts (the complete is a POST)
    assert storage.create(path, b"another attempt's snapshot" * (1 << 18)) is False
    assert storage.read(path) == data
    client = s3_server.client()
    assert client.list_multipart_uploads(Bucket=path.bucket,
                                          Prefix=path.parent.prefix).get("Uploads", []) == []


# -- the layout on an object store ------------------------------------------------------------

def test_running_count_on_an_object_store_equals_a_direct_count(op_factory):
    op = op_factory()
    for batch, words in enumerate(BATCHES):
        assert op.run(0, batch, words)[0] == "published"
    state = load_version(op.checkpoint, 0, len(BATCHES) - 1, ["counts"])["counts"]
    assert {k.decode(): int.from_bytes(v, "big") - (1 << 63) for k, v in state.items()} == \
        expected(len(BATCHES))
    assert op.checkpoint.partitions() == [0]
    assert list_operators(op.checkpoint.checkpoint, op.settings.storage) == ["counts"]


def test_retention_on_an_object_store_keeps_what_loadable_versions_need(op_factory, s3_server):
    op = op_factory(interval=2, retain=3)
    for batch in range(12):
        op.run(0, batch, [f"k{batch % 4}"])
    files = op.checkpoint.partition(0)
    listing = files.listing()
    assert listing.snapshots == (7, 9, 11)
    assert listing.changelogs == (8, 9, 10, 11)
    keys = {o["Key"].rsplit("/", 1)[-1] for o in s3_server.client().list_objects_v2(
        Bucket=files.directory.bucket, Prefix=files.directory.prefix)["Contents"]}
    assert keys == {f"{v:020d}.changelog.zst" for v in range(8, 12)} | \
        {f"{v:020d}.snapshot.zst" for v in (7, 9, 11)}
    release_replicas()
    assert op.run(0, 12, ["k0"])[1] == {"k0": 4}          # restored from snapshot 11


def test_a_damaged_snapshot_on_the_object_store_is_set_aside_and_rebuilt(op_factory, s3_server,
                                                                        tmp_path):
    op = op_factory(interval=3)
    for batch in range(7):
        op.run(0, batch, BATCHES[batch])
    files = op.checkpoint.partition(0)
    path = files.path(5, VersionKind.SNAPSHOT)
    client = s3_server.client()
    data = bytearray(client.get_object(Bucket=path.bucket, Key=path.key)["Body"].read())
    data[len(data) // 2] ^= 0xFF
    client.put_object(Bucket=path.bucket, Key=path.key, Body=bytes(data))
    release_replicas()
    shutil.rmtree(tmp_path / "local")                     # a new executor: restore from files
    state = op.state(0, 7)
    state.open()
    state.close()
    assert state.metrics.snapshots_rewritten == [5]
    names = files.storage.names(files.directory)
    assert any(n.startswith(f"{5:020d}.snapshot.zst.damaged-") for n in names)
    assert files.read(5, VersionKind.SNAPSHOT).version == 5


def test_a_flipped_byte_in_a_changelog_read_back_from_the_object_store_names_the_object(
        op_factory, s3_server, tmp_path):
    op = op_factory(interval=100)
    for batch in range(4):
        op.run(0, batch, BATCHES[batch])
    path = op.checkpoint.partition(0).path(2, VersionKind.CHANGELOG)
    client = s3_server.client()
    data = bytearray(client.get_object(Bucket=path.bucket, Key=path.key)["Body"].read())
    data[-10] ^= 0x01
    client.put_object(Bucket=path.bucket, Key=path.key, Body=bytes(data))
    release_replicas()
    shutil.rmtree(tmp_path / "local")                     # a new executor: restore from files
    with pytest.raises(StateFileDamagedError) as info:
        op.run(0, 4, BATCHES[4])
    assert info.value.path == path                        # the object, not a local path
    assert f"s3a://{path.bucket}/{path.key}" in str(info.value)
    assert info.value.version == 2 and info.value.partition == 0
    assert client.get_object(Bucket=path.bucket, Key=path.key)["Body"].read() == bytes(data)


def test_unfinished_uploads_of_dead_attempts_are_aborted_once_old(location, s3_server):
    """A task killed while uploading a large snapshot in parts leaves an unfinished multipart
    upload: invisible in listings, billed by S3 until aborted. (moto reports every upload as
    started in 2010, so that an upload younger than the age stays is not checked here.)"""
    storage = S3Storage(s3_server.options(), orphan_scan_interval_s=0)
    directory = parse_location(location) / "weir" / "counts" / "0"
    client = s3_server.client()
    dead = client.create_multipart_upload(Bucket=directory.bucket,
                                          Key=(directory / "00000000000000000010.snapshot.zst").key)
    client.upload_part(Bucket=directory.bucket, Key=(directory / "00000000000000000010."
                                                     "snapshot.zst").key,
                       UploadId=dead["UploadId"], PartNumber=1, Body=b"x" * 1024)
    removed = storage.clean_orphans(directory, max_age_ms=0)
    assert [str(p) for p in removed] == [str(directory / "00000000000000000010.snapshot.zst")]
    assert client.list_multipart_uploads(Bucket=directory.bucket,
                                         Prefix=directory.prefix).get("Uploads", []) == []


def test_orphan_scans_run_once_per_interval_not_once_per_batch(location, s3_server):
    storage = S3Storage(s3_server.options())
    directory = parse_location(location) / "weir" / "counts" / "1"
    s3_server.reset()
    for _ in range(5):
        storage.clean_orphans(directory, max_age_ms=0)
    assert s3_server.requests().get("LIST", 0) == 1


def test_batch_clocks_publish_once_on_the_object_store(location, s3_server):
    cp = OperatorCheckpoint(location, "tws", s3_server.options())
    first = cp.publish_batch_clock(4, {"batch": 4, "processing_ms": 1000})
    again = OperatorCheckpoint(location, "tws", s3_server.options()).publish_batch_clock(
        4, {"batch": 4, "processing_ms": 2000})
    assert first == again and again["processing_ms"] == 1000
    for b in range(5, 8):
        cp.publish_batch_clock(b, {"batch": b})
    cp.retain_batch_clocks(6)
    assert cp.read_batch_clock(4) is None and cp.read_batch_clock(6) is not None


# -- refusals and settings --------------------------------------------------------------------

def test_a_missing_bucket_is_a_typed_error_naming_the_location(s3_server):
    storage = S3Storage(s3_server.options())
    path = ObjectPath("s3a", "no-such-bucket-here", "ckpt/weir/counts/_meta.json")
    with pytest.raises(CheckpointStorageError, match="no-such-bucket-here.*NoSuchBucket"):
        storage.create(path, b"{}")


def test_viewfs_locations_are_refused_with_the_reason():
    with pytest.raises(CheckpointLocationError, match="mount table"):
        open_storage("viewfs://cluster/ckpt")


def test_an_unknown_scheme_is_refused():
    with pytest.raises(CheckpointLocationError, match="unknown scheme 'ftp://'"):
        open_storage("ftp://host/ckpt")


def test_storage_options_come_from_the_hadoop_keys_and_keep_secrets_out_of_repr():
    settings = ProviderSettings.from_mapping({
        "spark.hadoop.fs.s3a.endpoint": "minio.internal:9000",
        "spark.hadoop.fs.s3a.access.key": "AKIA-ID", "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.azure.account.key.lake.dfs.core.windows.net": "azkey"})
    opts = settings.storage
    assert opts.s3_endpoint_url == "https://minio.internal:9000"
    assert opts.s3_access_key == "AKIA-ID" and opts.s3_path_style is True
    assert dict(opts.azure_account_keys) == {"lake": "azkey"}
    assert "s3cr3t" not in repr(settings) and "azkey" not in repr(settings)
    assert StorageOptions.from_mapping({"fs.s3a.endpoint": "http://h:1"}).s3_endpoint_url == \
        "http://h:1"                                        # data source options, bare keys


def test_a_local_path_keeps_the_link_based_storage(tmp_path):
    assert open_storage(str(tmp_path)).kind is StorageKind.LOCAL
    assert open_storage(f"file://{tmp_path}").kind is StorageKind.LOCAL
    assert OperatorCheckpoint(tmp_path, "counts").root == tmp_path / "weir" / "counts"


def test_a_local_publish_of_a_taken_name_leaves_the_first_file_and_no_temp_file(tmp_path):
    storage = open_storage(str(tmp_path))
    path = tmp_path / "00000000000000000001.changelog.zst"
    assert storage.create(path, b"first") is True
    assert storage.create(path, b"second") is False
    assert storage.read(path) == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_local_orphan_cleanup_removes_a_dead_writers_temp_and_keeps_a_live_ones(tmp_path):
    host = socket.gethostname().replace(".", "_") or "host"
    dead = tmp_path / f".00000000000000000002.snapshot.zst.{host}.999999.0123456789ab.tmp"
    live = tmp_path / f".00000000000000000002.snapshot.zst.{host}.{os.getpid()}.0123456789ab.tmp"
    other = tmp_path / "00000000000000000001.changelog.zst"
    for path in (dead, live, other):
        path.write_bytes(b"x")
    storage = open_storage(str(tmp_path))
    assert storage.clean_orphans(tmp_path, max_age_ms=3_600_000) == [dead]
    assert storage.clean_orphans(tmp_path, max_age_ms=-1) == [live]   # older than the limit
    assert [p.name for p in tmp_path.iterdir()] == [other.name]


def test_a_file_system_without_hard_links_is_a_location_error_naming_the_fix(tmp_path,
                                                                           monkeypatch):
    def no_links(src, dst):          # what NFS without link support or some FUSE mounts answer
        raise OSError(errno.EPERM, "Operation not permitted", str(src), None, str(dst))

    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(CheckpointLocationError, match="does not support hard links"):
        open_storage(str(tmp_path)).create(tmp_path / "00000000000000000001.changelog.zst",
                                           b"v")
    assert list(tmp_path.iterdir()) == []                 # the temp file is gone too


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES], ids=["read-only", "no-access"])
def test_a_local_location_that_cannot_be_written_is_a_location_error_naming_it_and_the_fix(
        tmp_path, monkeypatch, code):
    # A read-only mount (or one the executors' user may not write) cannot be made here
    # portably: root writes through permissions, and mounting needs privileges.
    real_open = os.open

    def refused_open(path, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    def refused_mkdir(path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(os, "open", refused_open)
    storage = open_storage(str(tmp_path))
    version = tmp_path / "00000000000000000001.changelog.zst"
    with pytest.raises(CheckpointLocationError, match="not writable") as err:
        storage.create(version, b"v")
    assert str(version) in str(err.value) and "write access" in str(err.value)
    monkeypatch.setattr(os, "mkdir", refused_mkdir)
    with pytest.raises(CheckpointLocationError, match="not writable") as err:
        storage.make_directory(tmp_path / "weir" / "counts")
    assert str(tmp_path / "weir" / "counts") in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_local_temp_write_is_not_mistaken_for_missing_hard_links(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_storage(str(tmp_path)).create(tmp_path / "gone" / "00000000000000000001.changelog"
                                           ".zst", b"v")


# -- HDFS through WebHDFS ----------------------------------------------------------------------
# HDFS cannot run here; tests/engine/spark/_webhdfs.py serves WebHDFS over a directory with
# HDFS's create and rename semantics (see its docstring).

@pytest.fixture(scope="module")
def webhdfs(tmp_path_factory):
    server = start_webhdfs(tmp_path_factory.mktemp("hdfs"))
    yield server
    server.stop()


@pytest.fixture
def hdfs_location():
    return f"hdfs://namenode.example:8020/user/spark/ckpt-{next(_names)}"


def _hdfs(server) -> WebHdfsStorage:
    storage = open_storage("hdfs://namenode.example:8020/",
                           StorageOptions.from_mapping(server.conf()))
    assert isinstance(storage, WebHdfsStorage)
    return storage


def test_hdfs_create_publishes_once_by_rename_and_leaves_no_temp_files(webhdfs, hdfs_location):
    storage = _hdfs(webhdfs)
    directory = parse_location(hdfs_location)
    storage.make_directory(directory)
    path = directory / "00000000000000000003.changelog.zst"
    assert storage.create(path, b"first") is True
    assert storage.create(path, b"second") is False
    assert storage.read(path) == b"first"
    assert storage.names(directory) == [path.name]            # the loser's temp file is gone
    assert [e.size for e in storage.entries(directory)] == [5]


def test_hdfs_two_attempts_racing_to_publish_the_same_version_exactly_one_wins(webhdfs,
                                                                              hdfs_location):
    directory = parse_location(hdfs_location)
    _hdfs(webhdfs).make_directory(directory)
    path = directory / "00000000000000000001.changelog.zst"
    from fsspec.implementations.webhdfs import WebHDFS

    winner = _race(path, lambda: WebHdfsStorage(WebHDFS("127.0.0.1", port=webhdfs.port,
                                                        skip_instance_cache=True)))
    assert _hdfs(webhdfs).read(path) == f"attempt {winner}".encode()
    assert _hdfs(webhdfs).names(directory) == [path.name]


def test_hdfs_a_rename_whose_answer_is_lost_is_recognised_as_this_attempts_own(webhdfs,
                                                                              hdfs_location):
    storage = _hdfs(webhdfs)
    directory = parse_location(hdfs_location)
    storage.make_directory(directory)
    path = directory / "00000000000000000002.changelog.zst"
    webhdfs.lose_rename_response()
    assert storage.create(path, b"mine") is True              # renamed, answer lost: ours
    assert storage.read(path) == b"mine"
    assert storage.create(path, b"someone else") is False


def test_running_count_on_hdfs_keeps_retention_and_restores_after_replicas_are_lost(
        webhdfs, hdfs_location, tmp_path):
    op = Operator(hdfs_location, tmp_path / "local", interval=2, retain=3,
                  storage=StorageOptions.from_mapping(webhdfs.conf()))
    try:
        for batch, words in enumerate(BATCHES):
            assert op.run(0, batch, words)[0] == "published"
        listing = op.checkpoint.partition(0).listing()
        assert listing.latest == len(BATCHES) - 1
        assert listing.snapshots == (1, 3, 5)                    # retention ran at 5
        assert listing.changelogs == (2, 3, 4, 5, 6)
        files = sorted(p.name for p in (webhdfs.root / op.checkpoint.partition(0).directory.key)
                       .iterdir())
        assert files == sorted([f"{v:020d}.changelog.zst" for v in range(2, 7)] +
                               [f"{v:020d}.snapshot.zst" for v in (1, 3, 5)])
        release_replicas()
        shutil.rmtree(tmp_path / "local")                        # a new executor
        outcome, emitted = op.run(0, len(BATCHES), ["a"])
        assert outcome == "published" and emitted == {"a": expected(len(BATCHES))["a"] + 1}
        assert list_operators(op.checkpoint.checkpoint, op.settings.storage) == ["counts"]
    finally:
        release_replicas()


def test_a_flipped_byte_in_a_changelog_on_hdfs_names_the_file(webhdfs, hdfs_location, tmp_path):
    op = Operator(hdfs_location, tmp_path / "local", interval=100,
                  storage=StorageOptions.from_mapping(webhdfs.conf()))
    try:
        for batch in range(4):
            op.run(0, batch, BATCHES[batch])
        path = op.checkpoint.partition(0).path(2, VersionKind.CHANGELOG)
        local = webhdfs.root / path.key
        data = bytearray(local.read_bytes())
        data[-10] ^= 0x01
        local.write_bytes(bytes(data))
        release_replicas()
        shutil.rmtree(tmp_path / "local")
        with pytest.raises(StateFileDamagedError) as info:
            op.run(0, 4, BATCHES[4])
        assert info.value.path == path and str(path) in str(info.value)
    finally:
        release_replicas()


def test_hdfs_temp_files_of_dead_attempts_are_removed_once_per_interval(webhdfs, hdfs_location):
    storage = WebHdfsStorage(_hdfs(webhdfs).fs, orphan_scan_interval_s=3600)
    directory = parse_location(hdfs_location)
    storage.create(directory / "00000000000000000001.changelog.zst", b"published")
    folder = webhdfs.root / directory.key
    dead = folder / ".00000000000000000002.changelog.zst.otherhost.4242.0123456789ab.tmp"
    dead.write_bytes(b"half a version")                   # a killed attempt's temp file
    assert storage.clean_orphans(directory, max_age_ms=0) == [directory / dead.name]
    assert sorted(p.name for p in folder.iterdir()) == ["00000000000000000001.changelog.zst"]
    dead.write_bytes(b"another")
    webhdfs.requests.clear()
    assert storage.clean_orphans(directory, max_age_ms=0) == []   # not again this interval
    assert webhdfs.requests == {}


@pytest.mark.parametrize("location", ["s3a://lake/ckpt", "hdfs://namenode:8020/ckpt"])
def test_repartition_refuses_a_location_off_the_file_system_and_says_how(location):
    from weir.engine.spark.repartition import repartition

    with pytest.raises(CheckpointLocationError, match="Copy <checkpoint>/weir/counts to a local"):
        repartition(location, "counts", 4)
