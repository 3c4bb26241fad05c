"""Reading a store's files offline (``weir.stores.offline``): nothing is created or changed
beside them, files of another engine are refused, and the commit marker is the engine's."""

from __future__ import annotations

from pathlib import Path

import pytest

from weir.stores.builder import open_engine
from weir.stores.config import Config
from weir.stores.errors import StoreError
from weir.stores.offline import StoreFilesMismatchError, engine_of_files, open_read_only
from weir.stores.engines.registry import store_engine
from weir.stores.spec import StoreSpec


def spec(engine: str) -> StoreSpec:
    return StoreSpec.from_config(Config({"stores.s.factory": engine, "stores.s.key.serde": "bytes",
                                         "stores.s.msg.serde": "bytes"}), "s")


def written(directory: Path, engine: str) -> str:
    store = open_engine(spec(engine), directory, logged=True)
    store.put_all([(b"a1", b"1"), (b"a2", b"2"), (b"b1", b"3")])
    store.flush()
    marker = store.commit_marker()
    store.close()
    return marker


def files(directory: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_reading_changes_nothing_and_gives_the_engines_entries_and_marker(tmp_path, engine):
    directory = tmp_path / "s"
    marker = written(directory, engine)
    before = files(directory)
    assert engine_of_files(directory) is store_engine(engine)
    with open_read_only(spec(engine), directory) as read:
        with read.all() as items:
            assert list(items) == [(b"a1", b"1"), (b"a2", b"2"), (b"b1", b"3")]
        with read.prefix(b"a") as items:
            assert [k for k, _ in items] == [b"a1", b"a2"]
        with read.prefix(b"c") as items:
            assert list(items) == []
        assert read.commit_marker() == marker
    assert files(directory) == before


@pytest.mark.parametrize("engine, other", [("rocksdb", "lmdb"), ("lmdb", "rocksdb")])
def test_files_of_another_engine_are_refused_naming_both(tmp_path, engine, other):
    directory = tmp_path / "s"
    written(directory, other)
    before = files(directory)
    with pytest.raises(StoreFilesMismatchError) as err:
        open_read_only(spec(engine), directory, origin="job.properties:3")
    assert (err.value.configured, err.value.found) == (engine, other)
    message = str(err.value)
    assert f"written by the {other} engine" in message and "job.properties:3" in message
    assert f"--set stores.s.factory={other}" in message
    assert files(directory) == before


def test_a_directory_without_engine_files_is_an_error_not_a_new_store(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "OFFSET").write_text("{}")
    with pytest.raises(StoreError, match="holds no rocksdb files"):
        open_read_only(spec("rocksdb"), tmp_path / "s")
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["OFFSET"]
