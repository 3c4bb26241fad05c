"""Versioned adjunct stores on real engines: the next version is built beside the served one,
a seal switches atomically and drops the old version, a reader pinned for one call never sees
a mix of versions (hypothesis, with real threads), and the offset file names the versions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.recovery.adjunct import AdjunctStore, pinned, read_adjunct_offsets
from weir.stores.adjunct import AdjunctSpec
from weir.stores.config import Config
from weir.stores.errors import ReadOnlyStoreError
from weir.stores.spec import StoreSpec


def make(tmp_path: Path | None, engine: str = "rocksdb", partitions=("0",),
         concurrent: bool = False) -> AdjunctStore:
    cfg = Config({"stores.m.factory": engine, "stores.m.key.serde": "string",
                  "stores.m.msg.serde": "int64", "stores.m.adstore.input": "log.model",
                  "stores.m.adstore.versioned": "true"})
    store = AdjunctStore(StoreSpec.from_config(cfg, "m"), AdjunctSpec.from_config(cfg, "m"),
                         tmp_path / "m" if tmp_path is not None else None, cfg,
                         partitions=partitions, concurrent=concurrent)
    store.open(None)
    return store


def write_version(store: AdjunctStore, version: int, keys: int, offset: int,
                  partition: str = "0") -> int:
    for i in range(keys):
        store.put(f"k{i}", version)
        store.applied(partition, offset)
        offset += 1
    store.seal(partition, offset)
    return offset + 1


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb", "memory"])
def test_the_next_version_is_built_beside_the_served_one_and_switched_at_the_seal(tmp_path, engine):
    store = make(tmp_path, engine)
    view = store.view()
    try:
        assert view.get("k0") is None and store.serving is None  # nothing sealed yet
        offset = write_version(store, 1, 3, 0)
        assert (store.serving, store.building, view.get("k2")) == (1, 2, 1)
        store.put("k0", 2)  # building version 2: the served version is unchanged
        assert view.get("k0") == 1
        write_version(store, 2, 3, offset)
        assert (store.serving, view.get("k0"), view.version) == (2, 2, 2)
        if engine != "memory":
            assert sorted(p.name for p in (tmp_path / "m").iterdir() if p.is_dir()) == ["v2", "v3"]
            recorded = read_adjunct_offsets(tmp_path / "m")
            assert (recorded.serving, recorded.building, dict(recorded.offsets)) == (2, 3, {"0": 7})
        with pytest.raises(ReadOnlyStoreError):
            view.put("k0", 5)
    finally:
        store.close()


def test_a_version_is_served_once_every_partition_sealed_it(tmp_path):
    store = make(tmp_path, partitions=("0", "1"))
    try:
        store.put("a", 1)
        store.seal("0", 1)
        assert store.serving is None
        assert read_adjunct_offsets(tmp_path / "m").sealed == ("0",)
        store.seal("1", 0)
        assert store.serving == 1 and store.view().get("a") == 1
    finally:
        store.close()


def test_the_old_version_is_dropped_only_when_its_last_reader_lets_go(tmp_path):
    store = make(tmp_path)
    try:
        offset = write_version(store, 1, 2, 0)
        with pinned(store):
            write_version(store, 2, 2, offset)
            assert store.view().get("k0") == 1  # still the pinned version
            assert (tmp_path / "m" / "v1").is_dir()
        assert store.view().get("k0") == 2
        assert not (tmp_path / "m" / "v1").exists()
    finally:
        store.close()


def test_reopening_serves_the_recorded_version_and_resumes_the_one_being_built(tmp_path):
    store = make(tmp_path)
    offset = write_version(store, 1, 3, 0)
    store.put("k0", 2)  # the first record of version 2 ...
    store.applied("0", offset)
    store.flush()
    store.close()  # ... then the process goes away while version 2 is being built
    recorded = read_adjunct_offsets(tmp_path / "m")
    assert (recorded.serving, recorded.building, dict(recorded.offsets)) == (1, 2, {"0": 4})
    again = AdjunctStore(store.spec, store.adjunct, tmp_path / "m", store.config,
                         partitions=["0"])
    again.open(recorded)
    try:
        assert again.view().get("k0") == 1  # serves the current version at restart
        again.put("k1", 2)  # resumes the next one where it was
        again.seal("0", offset + 2)
        assert [again.view().get(f"k{i}") for i in range(3)] == [2, 2, None]
    finally:
        again.close()


# -- a seal of a version without records (issue 23, point 1) --------------------------------

@pytest.mark.parametrize("engine", ["rocksdb", "lmdb", "memory"])
def test_a_repeated_seal_keeps_serving_the_version_it_serves(tmp_path, engine, caplog):
    store = make(tmp_path, engine)
    try:
        offset = write_version(store, 1, 3, 0)
        with caplog.at_level("WARNING", logger="weir.adjunct"):
            store.seal("0", offset)  # the operator retries `weir log produce model --seal`
        assert (store.serving, store.building, store.view().get("k1")) == (1, 2, 1)
        assert store.describe()["duplicate_seals"] == 1
        assert "holds no record: taken for a repeated seal" in caplog.text
        assert "version 1 stays served" in caplog.text and "--seal-empty" in caplog.text
        write_version(store, 2, 2, offset + 1)  # the next dataset still builds version 2
        assert (store.serving, store.view().get("k1"), store.view().get("k2")) == (2, 2, None)
    finally:
        store.close()


def test_a_seal_of_an_empty_version_switches_nothing_before_the_first_version(tmp_path):
    store = make(tmp_path)
    try:
        store.seal("0", 0)
        assert store.serving is None and store.building == 1
    finally:
        store.close()


def test_an_empty_dataset_sealed_on_purpose_is_served(tmp_path):
    from weir.stores.adjunct import SealKind
    store = make(tmp_path, partitions=("0", "1"))
    try:
        store.put("a", 1)
        store.seal("0", 1)
        store.seal("1", 0)
        assert store.serving == 1
        store.seal("0", 2, SealKind.EMPTY)
        store.close()  # a restart between the two partitions' seals keeps the intent
        again = AdjunctStore(store.spec, store.adjunct, tmp_path / "m", store.config,
                             partitions=["0", "1"])
        again.open(read_adjunct_offsets(tmp_path / "m"))
        again.seal("1", 1)
        assert again.serving == 2 and again.view().get("a") is None
        again.close()
    finally:
        store.close()


# -- the property: a pinned call sees one version ------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(versions=st.integers(2, 6), keys=st.integers(1, 30), readers=st.integers(1, 4),
       engine=st.sampled_from(["rocksdb", "memory"]))
def test_a_version_switch_under_concurrent_readers_never_shows_a_mix(tmp_path_factory, versions,
                                                                     keys, readers, engine):
    tmp = tmp_path_factory.mktemp("versions")
    store = make(tmp, engine, concurrent=True)
    view = store.view()
    offset = write_version(store, 1, keys, 0)
    stop = threading.Event()
    mixes: list = []
    calls = [0]

    def reader():
        while not stop.is_set():
            with pinned(store):  # one process() call
                seen = {view.get(f"k{i}") for i in range(keys)}
                with view.all() as it:
                    seen |= {v for _, v in it}
            calls[0] += 1
            if len(seen) != 1:
                mixes.append(seen)

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    for t in threads:
        t.start()
    try:
        for version in range(2, versions + 1):
            offset = write_version(store, version, keys, offset)
    finally:
        stop.set()
        for t in threads:
            t.join()
        store.close()
    assert not mixes, mixes[:3]
    assert calls[0] > 0


def test_list_adjunct_stores_shows_each_stores_versions(tmp_path):
    from weir.recovery.adjunct import list_adjunct_stores
    cfg = Config({"stores.m.factory": "rocksdb", "stores.m.key.serde": "string",
                  "stores.m.msg.serde": "int64", "stores.m.adstore.input": "log.model",
                  "stores.m.adstore.versioned": "true"})
    store = AdjunctStore(StoreSpec.from_config(cfg, "m"), AdjunctSpec.from_config(cfg, "m"),
                         tmp_path / "m" / "Partition_0", cfg, partitions=["0"])
    store.open(None)
    write_version(store, 1, 2, 0)
    store.close()
    ((path, recorded),) = list_adjunct_stores(tmp_path)
    assert path == tmp_path / "m" / "Partition_0"
    assert (recorded.store, recorded.serving, recorded.building) == ("m", 1, 2)
