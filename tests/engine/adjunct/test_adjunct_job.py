"""Adjunct stores in a running container (real file log, RocksDB): messages of an adjunct
stream fill the store and never reach the task; bootstrap streams are read to their head
before the first other message; a broadcast store is one store per container written by one
task; tasks cannot write; extractors, projection, rejected keys; the manager factory."""

from __future__ import annotations

import time

import pytest

from weir.engine.adjunct import AdjunctKeyError
from weir.engine.errors import TaskError
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.checkpoint import FileCheckpointManager
from weir.stores.errors import ReadOnlyStoreError

from tests.engine.adjunct import _support as S
from tests.engine.adjunct import _tasks as T

PRODUCTS = [(f"sku{i}", {"name": f"n{i}", "price": i, "stock": 100 + i}) for i in range(20)]
CLICKS = [(f"sku{i % 25}", {"sku": f"sku{i % 25}"}) for i in range(50)]


@pytest.fixture(autouse=True)
def _seen():
    T.SEEN.clear()
    yield
    T.SEEN.clear()


def prepare(tmp_path, products=PRODUCTS, clicks=CLICKS, **kw):
    cfg = S.config(tmp_path, **kw)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks", "enriched")
    S.produce(registry, "products", products, partition=0)
    S.produce(registry, "clicks", clicks)
    S.end(registry, "products", "clicks")
    return cfg, registry


def test_plain_partitioned_store_fills_from_its_partition_and_its_messages_never_reach_the_task(tmp_path):
    # products partitioned like the clicks: task P holds products of partition P only.
    products = [(f"sku{i}", {"name": f"n{i}"}) for i in range(20)]
    cfg = S.config(tmp_path, broadcast=False, bootstrap=False)
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks", "enriched")
    S.produce(registry, "products", products)  # alternating partitions
    S.produce(registry, "clicks", [], partition=0)
    S.end(registry, "products", "clicks")
    container = S.run(cfg)
    assert set(T.SEEN) == set()  # no click, and no product message was delivered
    assert sorted(u.writer for u in container.adjunct.units) == ["Partition 0", "Partition 1"]
    assert sorted(S.contents(cfg, "Partition_0")) == sorted(f"sku{i}" for i in range(0, 20, 2))
    assert sorted(S.contents(cfg, "Partition_1")) == sorted(f"sku{i}" for i in range(1, 20, 2))


def test_bootstrap_stream_is_read_to_its_head_before_any_click(tmp_path):
    cfg, registry = prepare(tmp_path)
    S.run(cfg)
    out = S.read(registry, "enriched")
    assert len(out) == len(CLICKS)
    assert {m["products_seen"] for m in out} == {20}  # every click saw the whole table
    assert all(m["name"] == (f"n{m['sku'][3:]}" if int(m["sku"][3:]) < 20 else None) for m in out)
    assert {s for streams in T.SEEN.values() for s in streams} == {"clicks"}


def test_broadcast_store_is_one_store_per_container_written_by_the_first_task(tmp_path):
    cfg, registry = prepare(tmp_path)
    container = S.run(cfg)
    (unit,) = container.adjunct.units
    assert unit.writer == "Partition 0" and unit.readers == ["Partition 0", "Partition 1"]
    a, b = (inst.context.store("products") for inst in container.instances)
    assert a._store is b._store  # one store under both views
    feeds = {inst.task_name: [f.writer for fs in inst.adjunct.feeds.values() for f in fs]
             for inst in container.instances}
    assert feeds == {"Partition 0": [True, True], "Partition 1": [False, False]}
    assert (tmp_path / "state" / "products" / "broadcast-container-0" / "v0").is_dir()


def test_a_task_writing_its_adjunct_store_gets_read_only_store_error(tmp_path):
    cfg, registry = prepare(tmp_path, clicks=[("sku1", {"sku": "sku1", "write": True})])
    with pytest.raises(TaskError) as info:
        S.run(cfg)
    assert isinstance(info.value.__cause__, ReadOnlyStoreError)
    assert "store 'products'" in str(info.value.__cause__)


def test_adjunct_offsets_and_versions_are_checkpointed_with_the_task(tmp_path):
    cfg, registry = prepare(tmp_path)
    S.run(cfg)
    cp = FileCheckpointManager(tmp_path / "checkpoints")
    cp.register("Partition 1")
    cp.start()
    last = cp.read_last("Partition 1")
    cp.stop()
    offsets = {(s[1], s[2]): o for s, o in last.input_offsets.items()}
    assert offsets[("products", 0)] == 19  # read at bootstrap, recorded as processed
    assert ("products", 1) not in offsets  # an empty partition: nothing processed
    assert last.extras["adjunct"]["products"] == {
        "serving": 0, "building": None, "offsets": {"0": 19}}


def test_changes_after_bootstrap_keep_updating_the_store_and_tombstones_delete(tmp_path):
    cfg = S.config(tmp_path, **{"task.commit.ms": "50"})
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks", "enriched")
    S.produce(registry, "products", PRODUCTS, partition=0)
    S.produce(registry, "clicks", [("sku1", {"sku": "sku1"})], partition=0)
    container = S.build(cfg)
    thread, errors = S.running(container)
    try:
        wait_for(lambda: len(S.read(registry, "enriched")) == 1 or errors)
        view = container.adjunct.units[0].store.view()
        # CDC while running: an update and a delete, then clicks that must see them.
        S.produce(registry, "products", [("sku1", {"name": "renamed"}), ("sku2", None)],
                  partition=0)
        wait_for(lambda: view.get("sku2") is None and view.get("sku1") == {"name": "renamed"}
                 or errors)
        S.produce(registry, "clicks", [("sku1", {"sku": "sku1"}), ("sku2", {"sku": "sku2"})],
                  partition=0)
    finally:
        S.end(registry, "products", "clicks")
        thread.join(60)
    assert not errors, errors
    out = S.read(registry, "enriched")
    assert [m["name"] for m in out] == ["n1", "renamed", None]
    assert out[-1]["products_seen"] == 19


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except LookupError:
            pass
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


# -- extractors, projection, rejected keys --------------------------------------------------

def test_projection_keeps_only_the_named_fields(tmp_path):
    cfg, registry = prepare(tmp_path, **{"stores.products.adstore.projection": "name"})
    S.run(cfg)
    assert S.contents(cfg)["sku3"] == {"name": "n3"}


def test_a_user_extractor_decides_key_and_value(tmp_path):
    products = [(f"k{i}", {"sku": f"sku{i}", "name": f"n{i}"}) for i in range(3)]
    cfg = S.config(tmp_path, **{
        "stores.products.adstore.key.value.extractor.factory": "tests.engine.adjunct._tasks:UpperSku"})
    registry = SystemRegistry(cfg)
    S.create(registry, "products", "clicks", "enriched")
    S.produce(registry, "products", products, partition=0)
    S.end(registry, "products", "clicks")
    S.run(cfg)
    held = S.contents(cfg)
    assert held["SKU1"] == {"name": "n1"} and "sku1" not in held


@pytest.mark.parametrize("bootstrap", [True, False], ids=["at-bootstrap", "while-running"])
def test_a_rejected_key_stops_with_an_error_naming_stream_partition_and_offset(tmp_path, bootstrap):
    products = PRODUCTS[:3] + [(None, {"name": "no key"})] + PRODUCTS[3:5]
    cfg, registry = prepare(tmp_path, products=products, bootstrap=bootstrap)
    with pytest.raises((AdjunctKeyError, TaskError)) as info:
        S.run(cfg)
    err = info.value if isinstance(info.value, AdjunctKeyError) else info.value.__cause__
    assert isinstance(err, AdjunctKeyError)
    assert (err.ssp.stream, err.ssp.partition, err.offset) == ("products", 0, 3)
    assert "log.products partition 0 offset 3" in str(err)
    assert "stores.products.adstore.rejected.keys=drop" in str(err)


@pytest.mark.parametrize("bootstrap", [True, False], ids=["at-bootstrap", "while-running"])
def test_a_rejected_key_is_dropped_and_counted_when_configured(tmp_path, bootstrap):
    products = PRODUCTS[:3] + [(None, {"name": "no key"})] * 2 + PRODUCTS[3:5]
    cfg, registry = prepare(tmp_path, products=products, bootstrap=bootstrap,
                            **{"stores.products.adstore.rejected.keys": "drop"})
    container = S.run(cfg)
    assert container.adjunct.units[0].store.counters.rejected == 2
    assert len(S.contents(cfg)) == 5


def test_the_manager_factory_replaces_the_manager(tmp_path):
    T.CountingManager.applied = 0
    cfg, registry = prepare(tmp_path, bootstrap=False, **{
        "job.adstore.manager.factory": "tests.engine.adjunct._tasks:CountingManager"})
    container = S.run(cfg)
    assert all(type(i.adjunct).__name__ == "Counting" for i in container.instances)
    # every product message reached both tasks' managers (the second one only skips them)
    assert T.CountingManager.applied == 2 * len(PRODUCTS)


def test_an_adjunct_store_with_a_changelog_is_refused(tmp_path):
    from weir.stores.errors import ConfigError
    cfg, registry = prepare(tmp_path, **{"stores.products.changelog": "log.products-changelog"})
    with pytest.raises(ConfigError, match="adjunct input and a changelog"):
        S.run(cfg)


def test_an_adjunct_stream_that_is_no_input_is_refused(tmp_path):
    from weir.stores.errors import ConfigError
    cfg, registry = prepare(tmp_path, **{"task.broadcast.inputs": ""})
    with pytest.raises(ConfigError, match="task.inputs.*task.broadcast.inputs"):
        S.run(cfg)


@pytest.mark.parametrize("task,extra", [
    ("Enrich", {}),
    ("Enrich", {"job.container.thread.pool.size": "2", "task.max.concurrency": "2"}),
    ("AsyncEnrich", {}),
    ("CallbackEnrich", {"job.container.thread.pool.size": "2"}),
], ids=["sync-inline", "sync-thread-pool", "coroutine", "callback"])
def test_every_task_shape_gets_only_its_own_messages_and_reads_the_store(tmp_path, task, extra):
    cfg, registry = prepare(tmp_path, bootstrap=False, task=task, **extra)
    S.run(cfg)
    assert {s for streams in T.SEEN.values() for s in streams} == {"clicks"}
    assert sum(len(v) for v in T.SEEN.values()) == len(CLICKS)
    assert len(S.read(registry, "enriched")) == len(CLICKS)
    assert len(S.contents(cfg)) == 20


def test_a_store_behind_a_readers_checkpoint_rewinds_that_task_on_purpose(tmp_path):
    # Broadcast, not bootstrap, persistent: the readers skip the stream's messages and may
    # checkpoint further than the writer's store recorded before a crash. The store's offset
    # is the truth: the reader's position goes back to it without a CheckpointRegressionError
    # at the commits made while the writer catches up again.
    from weir.recovery.adjunct import read_adjunct_offsets, write_adjunct_offsets
    import dataclasses
    products = [(f"sku{i}", {"name": f"n{i}"}) for i in range(60)]
    cfg, registry = prepare(tmp_path, products=products, clicks=[], bootstrap=False)
    S.run(cfg)
    directory = tmp_path / "state" / "products" / "broadcast-container-0"
    recorded = read_adjunct_offsets(directory)
    assert dict(recorded.offsets) == {"0": 59, "1": -1}
    # as if the writer had recorded offset 9 when the reader had checkpointed 59
    write_adjunct_offsets(directory, dataclasses.replace(recorded, offsets={"0": 9, "1": -1}))
    container = S.build(cfg)
    container._start()
    try:
        for inst in container.instances:  # a commit before the writer caught up again
            checkpoint = inst.commit()
            assert checkpoint.input_offsets[("log", "products", 0)] == 9
        container.loop.run()
    finally:
        container._closers.close_all(failed=False)
    (unit,) = container.adjunct.units
    assert unit.stats.decision.start.value == "store-offset"
    assert len(S.contents(cfg)) == 60  # 10..59 applied again: the same content
    assert read_adjunct_offsets(directory).offsets["0"] == 59
