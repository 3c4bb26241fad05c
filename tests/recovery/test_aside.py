"""Setting a store's files aside during a rebuild (recovery/_aside.py)."""

from __future__ import annotations

import pytest

from weir.recovery._aside import SetAside, aside_path, recover_interrupted_rebuild
from weir.recovery.offset_file import write_offset_file
from weir.stores.errors import StoreLockedError
from weir.stores.locking import DirectoryLock


@pytest.fixture
def store_dir(tmp_path):
    d = tmp_path / "counts" / "Partition_0"
    (d / "sub").mkdir(parents=True)
    (d / "data").write_bytes(b"old data")
    (d / "sub" / "x").write_bytes(b"x")
    return d


def listing(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_set_aside_moves_every_file_and_put_back_restores_them(store_dir):
    before = listing(store_dir)
    aside = SetAside.move(store_dir, store="counts")
    assert aside.path == aside_path(store_dir) and listing(store_dir) == []
    (store_dir / "partial").write_bytes(b"half a rebuild")
    aside.put_back()
    assert listing(store_dir) == before and not aside.path.exists()
    assert (store_dir / "data").read_bytes() == b"old data"


def test_nothing_to_set_aside_in_an_empty_or_missing_directory(tmp_path):
    assert SetAside.move(tmp_path / "new", store="counts") is None
    assert (tmp_path / "new").is_dir()


def test_discard_and_keep(store_dir):
    SetAside.move(store_dir, store="counts").discard()
    assert not aside_path(store_dir).exists()
    (store_dir / "data").write_bytes(b"again")
    kept = SetAside.move(store_dir, store="counts").keep()
    assert kept.name.startswith("Partition_0.kept-") and (kept / "data").read_bytes() == b"again"


def test_setting_aside_refuses_while_another_process_has_the_store_open(store_dir):
    with DirectoryLock.acquire(store_dir, store="counts"):
        with pytest.raises(StoreLockedError):
            SetAside.move(store_dir, store="counts")
    assert (store_dir / "data").exists()


def test_an_interrupted_rebuild_is_undone(store_dir):
    SetAside.move(store_dir, store="counts")
    (store_dir / "partial").write_bytes(b"half")
    note = recover_interrupted_rebuild(store_dir, store="counts")
    assert "interrupted" in note
    assert listing(store_dir) == ["data", "sub", "sub/x"]


def test_a_finished_rebuild_loses_its_set_aside_copy(store_dir):
    SetAside.move(store_dir, store="counts")
    write_offset_file(store_dir, "counts", "filelog.c", 5, engine="rocksdb")
    note = recover_interrupted_rebuild(store_dir, store="counts")
    assert "had finished" in note and not aside_path(store_dir).exists()
    assert listing(store_dir) == ["OFFSET"]


def test_no_interrupted_rebuild_means_nothing_to_do(store_dir):
    assert recover_interrupted_rebuild(store_dir, store="counts") is None
