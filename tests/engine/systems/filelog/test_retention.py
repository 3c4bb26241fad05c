"""Retention by size and age, compaction (latest per key, tombstones, gaps, merging),
and recovery from interrupted maintenance."""

from __future__ import annotations

import os
import shutil

import pytest

from weir.engine.errors import SystemError_
from weir.engine.systems.filelog._index import load_index
from weir.engine.systems.filelog.retention import maintain
from weir.engine.systems.filelog.segment import list_segments

DAY_MS = 86_400_000


def _sizes(log):
    return [os.path.getsize(s.path) for s in list_segments(log.pdir())]


def test_retention_by_size_deletes_the_oldest_sealed_segments(make_log):
    writer_log = make_log(segment_bytes="1000")
    writer_log.create()
    writer_log.write([(None, b"x" * 80)] * 100)   # ~11 KB over ~11 segments
    log = make_log(segment_bytes="1000", retention_bytes="3000")
    before = list_segments(log.pdir())
    report = log.admin.apply_retention("s")[0]
    after = list_segments(log.pdir())
    assert report.deleted_segments == len(before) - len(after) > 0
    assert after == before[-len(after):]          # a prefix went, in order
    assert sum(_sizes(log)) <= 3000 and after[-1] == before[-1]
    md = log.admin.metadata([_ssp()])[_ssp()]
    assert (md.oldest, md.upcoming) == (after[0].base, 100)
    assert [r.offset for r in log.read(offset=after[0].base)][0] == after[0].base


def _ssp():
    from weir.engine.model import SystemStreamPartition
    return SystemStreamPartition("fl", "s", 0)


def test_retention_by_age_deletes_segments_sealed_too_long_ago(make_log):
    log = make_log(segment_bytes="1000", retention_ms=str(DAY_MS))
    log.create()
    log.write([(None, b"x" * 80)] * 50)
    segments = list_segments(log.pdir())
    meta, settings = log.admin.stream_meta("s"), log.admin.stream_settings("s")
    now = load_index(segments[0].index_path, os.path.getsize(segments[0].path)).sealed_ms
    report = maintain(log.pdir(), meta, settings, partition=0, now_ms=now + DAY_MS - 1)
    assert report.deleted_segments == 0
    report = maintain(log.pdir(), meta, settings, partition=0, now_ms=now + 2 * DAY_MS)
    assert report.deleted_segments == len(segments) - 1      # never the active one
    assert list_segments(log.pdir()) == segments[-1:]


def test_the_writer_applies_retention_when_it_rolls(make_log):
    log = make_log(segment_bytes="1000", retention_bytes="2500")
    log.create()
    log.write([(None, b"x" * 80)] * 80)
    assert sum(_sizes(log)) <= 2500 + 1000


def _compacted_stream(make_log, **config):
    config.setdefault("compaction_min_lag_ms", "0")
    log = make_log(segment_bytes="600", **config)
    log.create(compact=True)
    return log


def test_compaction_keeps_the_latest_value_per_key_and_their_offsets(make_log):
    log = _compacted_stream(make_log)
    records = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(120)] + [(b"tail", b"t")] * 3
    log.write(records)
    before = {r.offset: (r.key, r.value) for r in log.read()}
    report = log.admin.compact("s")[0].compaction
    after = log.read()
    active_base = list_segments(log.pdir())[-1].base
    sealed = [r for r in after if r.offset < active_base]
    latest = {}
    for offset, (key, _) in before.items():
        if offset < active_base:
            latest[key] = offset
    assert sorted(r.offset for r in sealed) == sorted(latest.values())
    assert all(before[r.offset] == (r.key, r.value) for r in after)   # offsets preserved
    assert [r.offset for r in after if r.offset >= active_base] == \
        [o for o in before if o >= active_base]
    assert report.records_after < report.records_before
    assert report.segments_after < report.segments_before             # merged


def test_readers_starting_inside_gaps_get_the_next_surviving_record(make_log):
    log = _compacted_stream(make_log)
    log.write([(b"same", b"v%d" % i) for i in range(60)] + [(b"other", b"o")] * 20)
    log.admin.compact("s")
    offsets = [r.offset for r in log.read()]
    assert offsets[0] > 0 and offsets != list(range(offsets[0], offsets[0] + len(offsets)))
    for start in range(0, 80, 7):
        assert [r.offset for r in log.read(offset=start)] == [o for o in offsets if o >= start]
    md = log.admin.metadata([_ssp()])[_ssp()]
    assert (md.oldest, md.upcoming) == (0, 80)


def test_compaction_drops_tombstones_only_after_the_retention_delay(make_log):
    log = _compacted_stream(make_log, compaction_tombstone_retention_ms=str(DAY_MS))
    log.write([(b"gone", b"1"), (b"kept", b"1"), (b"gone", None)] + [(b"pad", b"p" * 50)] * 30)
    meta, settings = log.admin.stream_meta("s"), log.admin.stream_settings("s")
    first = list_segments(log.pdir())[0]
    sealed_ms = load_index(first.index_path, os.path.getsize(first.path)).sealed_ms
    maintain(log.pdir(), meta, settings, partition=0, compact=True, now_ms=sealed_ms + 1000)
    keys = [(r.key, r.value) for r in log.read() if r.key != b"pad"]
    assert keys == [(b"kept", b"1"), (b"gone", None)]        # old value gone, tombstone kept
    report = maintain(log.pdir(), meta, settings, partition=0, compact=True,
                      now_ms=sealed_ms + DAY_MS + 1000)
    assert report.compaction.tombstones_dropped == 1
    assert [(r.key, r.value) for r in log.read() if r.key != b"pad"] == [(b"kept", b"1")]


def test_compaction_of_zstd_segments_stays_compressed_and_readable(make_log):
    log = _compacted_stream(make_log, compression="zstd")
    log.write([(b"k%d" % (i % 5), b"v%d" % i) for i in range(100)])
    log.admin.compact("s")
    segments = list_segments(log.pdir())
    assert all(s.compressed and s.generation for s in segments[:-1])
    values = {r.key: r.value for r in log.read()}
    assert values == {b"k%d" % k: b"v%d" % max(i for i in range(100) if i % 5 == k)
                      for k in range(5)}


def test_compaction_leaves_segments_younger_than_the_min_lag_alone(make_log):
    log = _compacted_stream(make_log, compaction_min_lag_ms=str(DAY_MS))
    log.write([(b"k", b"old")] + [(b"pad", b"p" * 50)] * 20)
    first_young = len(list_segments(log.pdir())) - 1
    log.write([(b"k", b"new")] + [(b"pad2", b"p" * 50)] * 20)
    segments = list_segments(log.pdir())
    meta, settings = log.admin.stream_meta("s"), log.admin.stream_settings("s")
    sealed_ms = [load_index(s.index_path, os.path.getsize(s.path)).sealed_ms
                 for s in segments[:-1]]
    # only the first segments are old enough: k=old must stay, superseded by a young record
    now = sealed_ms[first_young - 1] + DAY_MS
    assert now < sealed_ms[first_young] + DAY_MS
    report = maintain(log.pdir(), meta, settings, partition=0, compact=True, now_ms=now)
    assert 0 < report.compaction.segments_before < len(segments) - 1
    values = [r.value for r in log.read() if r.key == b"k"]
    assert values == [b"old", b"new"]
    assert segments[first_young:] == list_segments(log.pdir())[-len(segments[first_young:]):]
    # once every segment is old enough, the young record supersedes the old one
    report = maintain(log.pdir(), meta, settings, partition=0, compact=True,
                      now_ms=max(sealed_ms) + DAY_MS)
    assert [r.value for r in log.read() if r.key == b"k"] == [b"new"]


def test_the_writer_compacts_periodically_when_it_rolls(make_log):
    log = _compacted_stream(make_log, compaction_interval_ms="1")
    log.write([(b"same", b"v" * 40)] * 60)
    assert any(s.generation for s in list_segments(log.pdir()))
    assert len(log.read()) < 60


def test_compact_refuses_a_delete_stream(log):
    log.create()
    with pytest.raises(SystemError_, match="only compact streams"):
        log.admin.compact("s")


def test_an_interrupted_compaction_leaves_a_readable_partition_and_is_cleaned_up(make_log,
                                                                                  tmp_path):
    log = _compacted_stream(make_log)
    log.write([(b"k%d" % (i % 3), b"v%d" % i) for i in range(90)])
    expected = {r.key: r.value for r in log.read()}
    backup = tmp_path / "backup"
    shutil.copytree(log.pdir(), backup)
    log.admin.compact("s")
    # put the inputs back beside the outputs: a crash before the inputs were deleted
    for name in os.listdir(backup):
        if not os.path.exists(os.path.join(log.pdir(), name)):
            shutil.copy(backup / name, log.pdir())
    assert {r.key: r.value for r in log.read()} == expected
    offsets = [r.offset for r in log.read()]
    assert offsets == sorted(set(offsets))                   # no record twice
    report = log.admin.apply_retention("s")[0]
    assert report.cleaned_files > 0
    assert {r.key: r.value for r in log.read()} == expected
    assert all(s.generation for s in list_segments(log.pdir())[:-1])


def test_on_demand_compaction_shows_progress_and_ends_with_a_summary_line(make_log, capsys):
    log = _compacted_stream(make_log)
    log.create("two", partitions=2, compact=True)
    for p in (0, 1):
        log.write([(b"k", b"v%d" % i) for i in range(40)], "two", p)
    log.admin.compact("two", progress=True)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("stream 'two': 2 partition(s); compacted ")
    assert "tombstones dropped" in lines[-1] and lines[-1].endswith(" s")


def test_an_interrupted_compression_leaves_both_copies_readable_then_the_plain_one_goes(
        make_log, tmp_path):
    plain = make_log(segment_bytes="1000")
    plain.create()
    plain.write([(None, b"%d" % i + b"." * 60) for i in range(60)])
    first = list_segments(plain.pdir())[0]
    shutil.copy(first.path, tmp_path / "plain.log")
    shutil.copy(first.index_path, tmp_path / "plain.log.idx")
    zstd = make_log(segment_bytes="1000", compression="zstd")
    zstd.admin.apply_retention("s")
    assert list_segments(zstd.pdir())[0].compressed
    shutil.copy(tmp_path / "plain.log", first.path)             # as if the crash came before
    shutil.copy(tmp_path / "plain.log.idx", first.index_path)   # the plain file was removed
    assert [r.offset for r in zstd.read()] == list(range(60))
    assert zstd.admin.apply_retention("s")[0].cleaned_files == 2
    assert not os.path.exists(first.path)
    assert [r.offset for r in zstd.read()] == list(range(60))


def test_cleanup_removes_temp_files_of_dead_processes_only(log):
    log.create()
    log.write([(None, b"x")])
    dead = subprocess_pid_that_exited()
    for pid in (dead, os.getppid()):
        with open(os.path.join(log.pdir(), f"00000000000000000000.log.idx.{pid}.7.tmp"), "wb"):
            pass
    log.admin.apply_retention("s")
    left = [n for n in os.listdir(log.pdir()) if n.endswith(".tmp")]
    assert left == [f"00000000000000000000.log.idx.{os.getppid()}.7.tmp"]


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid
