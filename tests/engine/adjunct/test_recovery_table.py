"""The adjunct recovery table, cell by cell, on real RocksDB files and a real file log: what a
container start finds of a store (none / invalid / valid, or in memory), crossed with a
bootstrap stream or not, decides where the input is read from and whether it is read to its
head before any task runs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from weir.engine.adjunct.storage import AdjunctStorage
from weir.engine.config.job import JobConfig
from weir.engine.container.settings import JobSettings
from weir.engine.jobmodel.model import build_job_model
from weir.engine.model import SystemStreamPartition
from weir.engine.config.streams import all_input_streams
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.adjunct import ADJUNCT_OFFSETS_FILE, AdjunctStart
from weir.recovery.checkpoint import Checkpoint

from tests.engine.adjunct import _support as S

P0 = SystemStreamPartition(S.SYSTEM, "products", 0)
P1 = SystemStreamPartition(S.SYSTEM, "products", 1)
PRODUCTS = [(f"sku{i}", {"name": f"n{i}"}) for i in range(6)]


def storage(cfg) -> AdjunctStorage:
    registry = SystemRegistry(cfg)
    settings = JobSettings.from_config(cfg, registry)
    model = build_job_model(cfg, registry.partition_counts(all_input_streams(cfg)))
    return AdjunctStorage(settings.adjuncts, {s.name: s for s in settings.stores},
                          model.containers["0"].tasks, "0", JobConfig.from_config(cfg),
                          registry, cfg)


def first_start(tmp_path: Path, **kw) -> tuple:
    """A first start that fills the store from 6 products (3 per partition) and closes it."""
    cfg = S.config(tmp_path, **kw)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks")
    S.produce(registry, "products", PRODUCTS)
    adj = storage(cfg)
    adj.open({})
    store = adj.stores()[0]
    if not kw.get("bootstrap", True):  # filled alongside: apply what the consumers would
        for ssp in (P0, P1):
            store.applied(str(ssp.partition), 2)
        for key, value in PRODUCTS:
            store.put(key, value)
    adj.close()
    return cfg, registry


def directory(tmp_path: Path) -> Path:
    return tmp_path / "state" / "products" / "broadcast-container-0"


def reopen(cfg, last=None) -> tuple:
    adj = storage(cfg)
    stats = adj.open(last or {})
    return adj, stats[0], adj.stores()[0]


def make_invalid(tmp_path: Path) -> None:
    (directory(tmp_path) / ADJUNCT_OFFSETS_FILE).write_bytes(b"{not json")


CHECKPOINT = {"Partition 0": Checkpoint({P0: 1, P1: 0}, {}),
              "Partition 1": Checkpoint({P0: 1, P1: 0}, {})}


# -- persistent x bootstrap -----------------------------------------------------------------

def test_persistent_none_bootstrap_creates_and_forces_bootstrap_from_oldest(tmp_path):
    cfg = S.config(tmp_path)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks")
    S.produce(registry, "products", PRODUCTS)
    adj, stats, store = reopen(cfg)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.OLDEST, False, True)
        assert stats.records == 6
        assert store.view().get("sku5") == {"name": "n5"}
        assert adj.starts("Partition 1") == {P0: 3, P1: 3}  # the consumers start at the head
    finally:
        adj.close()


def test_persistent_invalid_bootstrap_recreates_and_forces_bootstrap(tmp_path):
    cfg, registry = first_start(tmp_path)
    stray = directory(tmp_path) / "v7"
    stray.mkdir()
    make_invalid(tmp_path)
    adj, stats, store = reopen(cfg)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.OLDEST, True, True)
        assert "corrupt" in stats.reason
        assert stats.records == 6 and not stray.exists()
        assert store.view().get("sku0") == {"name": "n0"}
    finally:
        adj.close()


def test_persistent_valid_bootstrap_continues_from_the_offset_beside_the_store(tmp_path):
    cfg, registry = first_start(tmp_path)
    S.produce(registry, "products", [("sku9", {"name": "n9"}), ("sku0", None)])
    adj, stats, store = reopen(cfg)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.STORE_OFFSET, False, True)
        assert stats.records == 2  # only what came after offset 2 of each partition
        assert store.view().get("sku9") == {"name": "n9"} and store.view().get("sku0") is None
        assert store.view().get("sku1") == {"name": "n1"}
        assert adj.starts("Partition 0") == {P0: 4, P1: 4}
    finally:
        adj.close()


# -- persistent x not bootstrap ---------------------------------------------------------------

def test_persistent_none_not_bootstrap_creates_and_continues_from_the_checkpoint(tmp_path):
    cfg = S.config(tmp_path, bootstrap=False)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks")
    S.produce(registry, "products", PRODUCTS)
    adj, stats, store = reopen(cfg, CHECKPOINT)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.CHECKPOINT, False, False)
        assert stats.records == 0 and store.view().get("sku0") is None  # filled alongside
        assert adj.starts("Partition 0") == {P0: 2, P1: 1}
    finally:
        adj.close()


def test_persistent_invalid_not_bootstrap_recreates_and_continues_from_the_checkpoint(tmp_path):
    cfg, registry = first_start(tmp_path, bootstrap=False)
    make_invalid(tmp_path)
    adj, stats, store = reopen(cfg, CHECKPOINT)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.CHECKPOINT, True, False)
        assert store.view().get("sku0") is None  # the old files are gone
        assert adj.starts("Partition 1") == {P0: 2, P1: 1}
    finally:
        adj.close()


def test_persistent_valid_not_bootstrap_continues_from_the_offset_beside_the_store(tmp_path):
    cfg, registry = first_start(tmp_path, bootstrap=False)
    adj, stats, store = reopen(cfg, CHECKPOINT)
    try:
        assert (stats.decision.start, stats.decision.recreate, stats.decision.blocking) == (
            AdjunctStart.STORE_OFFSET, False, False)
        assert store.view().get("sku4") == {"name": "n4"}
        assert adj.starts("Partition 0") == {P0: 3, P1: 3}  # not the checkpoint's 2 and 1
    finally:
        adj.close()


# -- in memory ---------------------------------------------------------------------------------

def test_in_memory_bootstrap_always_bootstraps_again(tmp_path):
    cfg, registry = first_start(tmp_path, engine="memory")
    adj, stats, store = reopen(cfg, CHECKPOINT)
    try:
        assert (stats.decision.start, stats.decision.blocking) == (AdjunctStart.OLDEST, True)
        assert stats.records == 6 and store.view().get("sku3") == {"name": "n3"}
        assert not directory(tmp_path).exists()  # nothing on disk for a memory store
    finally:
        adj.close()


def test_in_memory_not_bootstrap_continues_from_the_checkpoint(tmp_path):
    cfg, registry = first_start(tmp_path, engine="memory", bootstrap=False)
    adj, stats, store = reopen(cfg, CHECKPOINT)
    try:
        assert (stats.decision.start, stats.decision.blocking) == (AdjunctStart.CHECKPOINT, False)
        assert stats.records == 0
        assert adj.starts("Partition 0") == {P0: 2, P1: 1}
    finally:
        adj.close()


# -- validity by age and by the recorded offset ---------------------------------------------

def test_a_store_older_than_the_staleness_limit_is_invalid_and_bootstrapped_again(tmp_path):
    cfg, registry = first_start(tmp_path, **{"stores.products.adstore.staleness.ms": "60000"})
    old = time.time() - 3600
    os.utime(directory(tmp_path) / ADJUNCT_OFFSETS_FILE, (old, old))
    adj, stats, store = reopen(cfg)
    try:
        assert "stale" in stats.reason and "adstore.staleness.ms" in stats.reason
        assert stats.decision.recreate and stats.records == 6
    finally:
        adj.close()


def test_a_store_whose_recorded_offset_is_past_the_stream_is_invalid(tmp_path):
    cfg, registry = first_start(tmp_path)
    # The stream is deleted and created again, shorter than the store remembers.
    registry.admin(S.SYSTEM).delete_stream("products")
    S.create(registry, "products")
    S.produce(registry, "products", PRODUCTS[:2])
    adj, stats, store = reopen(cfg)
    try:
        assert "past the stream's newest offset" in stats.reason
        assert stats.decision.recreate and stats.records == 2
        assert store.view().get("sku5") is None  # nothing of the old incarnation survives
    finally:
        adj.close()


def test_a_store_of_other_partitions_is_invalid(tmp_path):
    cfg, registry = first_start(tmp_path)
    cfg2 = S.config(tmp_path, **{"task.broadcast.inputs": f"{S.SYSTEM}.products#0"})
    adj, stats, store = reopen(cfg2)
    try:
        assert "partitions" in stats.reason and stats.decision.recreate
        assert stats.records == 3
    finally:
        adj.close()


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_the_offset_file_records_the_offsets_applied(tmp_path, engine):
    first_start(tmp_path, engine=engine)
    from weir.recovery.adjunct import read_adjunct_offsets
    recorded = read_adjunct_offsets(directory(tmp_path))
    assert dict(recorded.offsets) == {"0": 2, "1": 2}
    assert (recorded.engine, recorded.input, recorded.serving) == (engine, "log.products", 0)


def test_an_offset_file_that_is_a_directory_is_a_typed_error_and_nothing_is_removed(tmp_path):
    from weir.recovery.adjunct import AdjunctStoreError, list_adjunct_stores
    cfg, registry = first_start(tmp_path)
    offsets = directory(tmp_path) / ADJUNCT_OFFSETS_FILE
    offsets.unlink()
    offsets.mkdir()
    (offsets / "note").write_text("put here by hand")
    before = sorted(p.relative_to(tmp_path) for p in directory(tmp_path).rglob("*"))
    with pytest.raises(AdjunctStoreError) as err:
        reopen(cfg)
    assert str(offsets) in str(err.value) and "is a directory" in str(err.value)
    assert "Move it out of" in str(err.value)
    assert sorted(p.relative_to(tmp_path) for p in directory(tmp_path).rglob("*")) == before
    (listed,) = list_adjunct_stores(tmp_path / "state")  # the tools show it, they do not fail
    assert "is a directory" in listed[1]
