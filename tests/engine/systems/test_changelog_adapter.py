"""SystemChangelogSink / SystemChangelogSource over real systems, and ensure_changelog_stream."""

from __future__ import annotations

import uuid

import pytest

from weir.engine.errors import SystemError_
from weir.engine.model import SystemStreamPartition
from weir.engine.systems.api import CleanupPolicy
from weir.engine.systems.changelog import (
    SystemChangelogSink,
    SystemChangelogSource,
    ensure_changelog_stream,
)
from weir.engine.systems.memory import (
    MemorySystemConsumer,
    MemorySystemFactory,
    reset_memory_systems,
)
from weir.engine.systems.registry import SystemRegistry
from weir.stores.changelog import NO_BULK_READER, NO_OFFSET, ChangelogSink, ChangelogSource
from weir.stores.config import Config

from tests.engine.systems._changelog import open_sink


def test_sink_appends_changes_and_tombstones_to_its_partition(registry):
    sink, ssp = open_sink(registry)
    assert isinstance(sink, ChangelogSink)
    sink.append(b"a", b"1")
    sink.append(b"b", b"2")
    sink.append(b"a", None)
    sink.flush()
    source = SystemChangelogSource(registry, ssp)
    assert isinstance(source, ChangelogSource)
    assert list(source.read(0, 10)) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"a", None)]
    other = SystemChangelogSource(registry, ssp._replace(partition=0))
    assert other.newest_offset() == NO_OFFSET and list(other.read(0, 10)) == []


def test_sink_refuses_a_null_key(registry):
    sink, _ = open_sink(registry)
    with pytest.raises(SystemError_, match="needs a key"):
        sink.append(None, b"x")


def test_source_offsets_of_empty_and_filled_partitions(registry):
    sink, ssp = open_sink(registry)
    source = SystemChangelogSource(registry, ssp)
    assert (source.oldest_offset(), source.newest_offset()) == (0, NO_OFFSET)
    for i in range(5):
        sink.append(b"k%d" % i, b"v")
    sink.flush()
    assert (source.oldest_offset(), source.newest_offset()) == (0, 4)


def test_read_is_inclusive_and_clamped_to_what_exists(registry):
    sink, ssp = open_sink(registry)
    for i in range(2500):  # more than one poll's worth
        sink.append(b"k%d" % (i % 7), b"%d" % i)
    sink.flush()
    source = SystemChangelogSource(registry, ssp)
    assert [o for o, _, _ in source.read(3, 5)] == [3, 4, 5]
    assert [o for o, _, _ in source.read(2497, 10_000)] == [2497, 2498, 2499]
    assert [o for o, _, _ in source.read(0, 2499)] == list(range(2500))
    assert list(source.read(7, 6)) == []
    assert list(source.read(2500, 3000)) == []


def test_an_abandoned_read_stops_its_consumer(registry, monkeypatch):
    sink, ssp = open_sink(registry)
    for i in range(10):
        sink.append(b"k", b"%d" % i)
    sink.flush()
    stopped = []
    source = SystemChangelogSource(registry, ssp)
    real = source._new_consumer

    def tracking_consumer():
        consumer = real()
        stop = consumer.stop
        consumer.stop = lambda: (stopped.append(True), stop())
        return consumer

    source._new_consumer = tracking_consumer
    records = source.read(0, 9)
    assert next(records)[0] == 0
    records.close()
    assert stopped == [True]


def test_source_from_a_factory_and_config(registry):
    sink, ssp = open_sink(registry)
    sink.append(b"x", b"y")
    sink.flush()
    source = SystemChangelogSource(registry.factory(registry.name), ssp, registry.config)
    assert list(source.read(0, 0)) == [(0, b"x", b"y")]


def test_ensure_changelog_stream_creates_a_compacted_stream_once(registry):
    admin = registry.admin(registry.name)
    assert ensure_changelog_stream(admin, "counts-changelog", 4) is True
    assert ensure_changelog_stream(admin, "counts-changelog", 4) is False
    assert admin.partition_count("counts-changelog") == 4
    if hasattr(admin, "stream_meta"):  # file log
        assert admin.stream_meta("counts-changelog").cleanup_policy is CleanupPolicy.COMPACT
    else:
        assert admin.cleanup_policy("counts-changelog") is CleanupPolicy.COMPACT
    with pytest.raises(SystemError_, match="has 4 partitions but the job needs 8"):
        ensure_changelog_stream(admin, "counts-changelog", 8)


# -- compaction gaps --------------------------------------------------------------------------

class _CompactedConsumer(MemorySystemConsumer):
    """The memory consumer with the offsets of overwritten keys removed, as a compacted log
    delivers them: every record but the latest per key is gone."""

    def poll(self, ssps, timeout):
        got = super().poll(ssps, timeout)
        out = {}
        for ssp, envs in got.items():
            latest = _latest_offsets(self.system, ssp)
            kept = [e for e in envs if e.is_end_of_stream or e.offset in latest]
            if kept:
                out[ssp] = kept
            elif envs:  # everything in this batch was compacted: read on
                return self.poll(ssps, timeout)
        return out


def _latest_offsets(system, ssp):
    admin = MemorySystemFactory().get_admin(system, {})
    newest = admin.metadata([ssp])[ssp].newest
    reader = MemorySystemConsumer(system, fetch_max=10_000)
    reader.register(ssp, 0)
    reader.start()
    latest = {}
    for env in reader.poll([ssp], 0).get(ssp, []):
        if env.offset <= newest:
            latest[env.key] = env.offset
    return set(latest.values())


class CompactedMemoryFactory(MemorySystemFactory):
    def get_consumer(self, system, config):
        return _CompactedConsumer(system, fetch_max=3)


def test_read_skips_compaction_gaps_including_at_the_end_of_the_range():
    name = f"compacted-{uuid.uuid4().hex[:8]}"
    reg = SystemRegistry(Config({f"systems.{name}.factory": f"{__name__}:CompactedMemoryFactory"}))
    reg.name = name
    sink, ssp = open_sink(reg, partitions=1, partition=0)
    for key, value in [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None),
                       (b"d", b"1"), (b"d", b"2"), (b"d", b"3")]:
        sink.append(key, value)
    sink.flush()
    source = SystemChangelogSource(reg, ssp)
    # surviving offsets: a@2, c@3, b@4 (tombstone), d@7
    assert list(source.read(0, 7)) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", None),
                                       (7, b"d", b"3")]
    assert list(source.read(0, 6)) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", None)]
    assert list(source.read(5, 6)) == []
    reset_memory_systems(name)



def test_read_skips_the_gaps_of_a_compacted_file_log_changelog(tmp_path):
    reg = SystemRegistry(Config({"systems.filelog.root": str(tmp_path / "log"),
                                 "systems.filelog.segment.bytes": "256",
                                 "systems.filelog.compaction.interval.ms": "0",
                                 "systems.filelog.compaction.min.lag.ms": "0",
                                 "systems.filelog.compaction.tombstone.retention.ms": "0"}))
    reg.name = "filelog"
    sink, ssp = open_sink(reg, partitions=1, partition=0)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(200):
        key, value = b"k%d" % (i % 5), (None if i % 17 == 0 else b"v%d" % i)
        if i in (3, 100):  # written once: survives compaction between long gaps
            key = b"once-%d" % i
        sink.append(key, value)
        latest[key] = (i, value)
    sink.flush()
    sink.producer.stop()  # release the writer so compaction can seal and rewrite segments
    reports = reg.admin("filelog").compact(ssp.stream)
    assert any(r.compacted for r in reports)
    source = SystemChangelogSource(reg, ssp)
    records = list(source.read(0, 199))
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(offsets) < 200  # gaps, in order
    replay = {}
    for _, key, value in records:
        replay[key] = value
    assert {k: v for k, v in replay.items() if v is not None} == \
        {k: v for k, (_, v) in latest.items() if v is not None}
    # a range whose tail was compacted away ends without waiting for missing offsets
    assert offsets[:2] == [3, 100]
    assert [o for o, _, _ in source.read(0, 99)] == [3]
    assert list(source.read(4, 99)) == []


# -- restore over a file log changelog that compacts while the job runs -------------------------

@pytest.mark.parametrize("engine", ["memory", "rocksdb"])
def test_restore_equals_the_checkpoint_when_compaction_ran_between_commit_and_crash(
        tmp_path, engine):
    """A committed record superseded only by uncommitted writes must survive the writer's
    roll-time compaction: restore rebuilds the state *at the checkpoint* and trims the rest."""
    from weir.recovery.checkpoint import Checkpoint
    from weir.recovery.storage import ProgressMode, TaskStorageManager
    from weir.stores.spec import StoreSpec

    cfg = Config({"systems.filelog.root": str(tmp_path / "log"),
                  "systems.filelog.segment.bytes": "300",
                  "systems.filelog.compaction.interval.ms": "1",
                  "stores.counts.factory": engine, "stores.counts.key.serde": "string",
                  "stores.counts.msg.serde": "int64",
                  "stores.counts.changelog": "filelog.counts-changelog"})
    reg = SystemRegistry(cfg)
    ssp = SystemStreamPartition("filelog", "counts-changelog", 0)
    ensure_changelog_stream(reg.admin("filelog"), ssp.stream, 1)
    spec = StoreSpec.from_config(cfg, "counts")

    def life():
        producer = reg.producer("filelog")
        producer.register("counts")
        producer.start()
        tsm = TaskStorageManager("Partition 0", [spec], tmp_path / "state",
                                 {"counts": (SystemChangelogSink(producer, ssp, "counts"),
                                             SystemChangelogSource(reg, ssp))},
                                 cfg, progress=ProgressMode.QUIET)
        return producer, tsm

    producer, tsm = life()
    store = tsm.open(None)["counts"]
    store.put("k", 1)
    for i in range(20):
        store.put(f"committed-{i}", i)
    checkpoint = Checkpoint({}, tsm.flush())
    store.put("k", 2)                                  # uncommitted from here on
    for i in range(200):                               # rolls (and compacts) many segments
        store.put(f"pad-{i % 7}", i)
    tsm.flush()                                        # the changelog has it all ...
    tsm.close()                                        # ... and the process "crashes"
    producer.stop()

    producer, tsm = life()
    with tsm.open(checkpoint)["counts"].all() as it:
        restored = dict(it)
    tsm.close()
    producer.stop()
    assert restored == {"k": 1, **{f"committed-{i}": i for i in range(20)}}


def test_source_names_its_partition_and_probing_past_the_end_of_an_intact_log_is_quiet(
        registry):
    sink, ssp = open_sink(registry)
    for i in range(3):
        sink.append(b"k%d" % i, b"v")
    sink.flush()
    source = SystemChangelogSource(registry, ssp)
    assert source.partition == ssp.partition
    source.probe(source.newest_offset() + 1)  # nothing there: no error
    source.probe(0)  # a readable record: no error either


def test_probing_a_file_log_damaged_at_its_end_raises_the_corrupt_record(tmp_path):
    import os

    from weir.engine.errors import CorruptRecordError
    reg = SystemRegistry(Config({"systems.fl.factory": "filelog",
                                 "systems.fl.root": str(tmp_path / "log")}))
    reg.name = "fl"
    sink, ssp = open_sink(reg, partitions=1, partition=0)
    for i in range(40):
        sink.append(b"k%d" % i, b"value-%d" % i)
    sink.flush()
    segment = next((tmp_path / "log" / "store-changelog" / "0").glob("*.log"))
    with open(segment, "r+b") as f:  # damage record 20 of 40: valid records follow it
        size = os.path.getsize(segment)
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    source = SystemChangelogSource(reg, ssp)
    try:
        newest = source.newest_offset()
    except CorruptRecordError as exc:  # a file log that reports damage from its metadata
        assert exc.path == str(segment)
        return
    assert newest < 39
    with pytest.raises(CorruptRecordError) as info:
        source.probe(newest + 1)
    assert info.value.offset == newest + 1 and info.value.path == str(segment)


# -- restore's bulk read, identity and compaction lag --------------------------------------------

def test_read_batches_gives_the_last_value_per_key_on_any_system(registry):
    sink, ssp = open_sink(registry)
    for i in range(10):
        sink.append(b"k%d" % (i % 3), None if i == 9 else b"%d" % i)
    sink.flush()
    source = SystemChangelogSource(registry, ssp)
    state, records, lasts = {}, 0, []
    for batch in source.read_batches(2, 100):
        state.update(dict(batch.pairs))
        records += batch.records
        lasts.append(batch.last)
    assert state == {b"k2": b"8", b"k1": b"7", b"k0": None} and records == 8
    assert lasts[-1] == 9
    assert list(source.read_batches(20, 30)) == []


def test_a_file_log_changelog_offers_a_worker_reader_and_splits_at_segments(tmp_path):
    reg = SystemRegistry(Config({"systems.filelog.root": str(tmp_path / "log"),
                                 "systems.filelog.segment.bytes": "256"}))
    reg.name = "filelog"
    sink, ssp = open_sink(reg, partitions=1, partition=0)
    for i in range(100):
        sink.append(b"k%02d" % i, b"v%d" % i)
    sink.flush()
    source = SystemChangelogSource(reg, ssp)
    reader = source.bulk_reader()
    assert reader is not NO_BULK_READER
    into: dict = {}
    assert sum(b.records for b in reader(0, 99, into=into)) == 100 and len(into) == 100
    parts = source.split(0, 99, 3)
    assert len(parts) == 3 and parts[0][0] == 0 and parts[-1][1] == 99
    assert isinstance(source.identity(), str)
    assert source.min_compaction_lag_ms() == 14_400_000


def test_memory_changelogs_have_no_worker_reader():
    name = f"memory-{uuid.uuid4().hex[:8]}"
    reg = SystemRegistry(Config({f"systems.{name}.factory": "memory"}))
    reg.name = name
    _, ssp = open_sink(reg)
    source = SystemChangelogSource(reg, ssp)
    assert source.bulk_reader() is NO_BULK_READER and source.split(0, 9, 4) == [(0, 9)]
    reset_memory_systems(name)


def test_a_store_s_compaction_lag_is_set_on_the_changelog_it_creates(tmp_path):
    reg = SystemRegistry(Config({"systems.filelog.root": str(tmp_path / "log")}))
    admin = reg.admin("filelog")
    assert ensure_changelog_stream(admin, "cl", 2, store="s", min_compaction_lag_ms=60_000)
    assert admin.stream_settings("cl").compaction_min_lag_ms == 60_000
    source = SystemChangelogSource(reg, SystemStreamPartition("filelog", "cl", 1))
    assert source.min_compaction_lag_ms() == 60_000
