"""read_changelog (restore's bulk read of a changelog partition) gives what the readers give:
the last value per key of a range, on plain, zstd and compacted segments, across segment
boundaries, with damage raised as CorruptRecordError at its offset; changelog_parts splits a
range at segment boundaries."""

from __future__ import annotations

import os
import pickle
import random

import pytest

from weir.engine.errors import CorruptRecordError
from weir.engine.systems.filelog._format import encode_record
from weir.engine.systems.filelog.bulk import ChangelogLocation, changelog_parts, read_changelog
from weir.engine.systems.filelog.segment import list_segments

from tests.engine.systems.filelog.test_writer import _flip_byte


def _records(n: int, keys: int, seed: int = 7) -> list[tuple[bytes, bytes | None]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = b"key-%04d" % rng.randrange(keys)
        out.append((key, None if rng.random() < 0.1 else b"value-%06d" % i))
    return out


def _expected(records, start: int, end: int) -> dict:
    state = {}
    for key, value in records[start:end + 1]:
        state[key] = value
    return state


def _collect(location, start, end, **kw):
    state, records, last = {}, 0, None
    for batch in read_changelog(location, start, end, **kw):
        state.update(batch.pairs)
        records += batch.records
        last = batch.last
    return state, records, last


@pytest.mark.parametrize("compression", ["none", "zstd"])
@pytest.mark.parametrize("start,end", [(0, 599), (0, 199), (137, 480), (550, 10_000)])
def test_a_range_reads_the_last_value_of_each_key_across_segments(make_log, compression,
                                                                  start, end):
    log = make_log(segment_bytes="2000", compression=compression)
    log.create(compact=True)
    records = _records(600, 40)
    log.write(records)
    assert len(list_segments(log.pdir())) > 3
    location = ChangelogLocation(log.root, "s", 0)
    state, count, last = _collect(location, start, end, batch_records=50)
    assert state == _expected(records, start, end)
    assert count == min(end, 599) - start + 1 and last == min(end, 599)


def test_bytes_count_the_keys_and_values_read(log):
    log.create()
    log.write([(b"ab", b"123"), (b"c", None), (b"ab", b"")])
    (batch,) = read_changelog(ChangelogLocation(log.root, "s", 0), 0, 2)
    assert (batch.records, batch.nbytes, batch.pairs) == (3, 2 + 3 + 1 + 2, {b"ab": b"", b"c": None})


def test_into_collects_every_batch_in_one_dict(log):
    log.create()
    log.write([(b"k%d" % (i % 5), b"%d" % i) for i in range(30)])
    into: dict = {}
    batches = list(read_changelog(ChangelogLocation(log.root, "s", 0), 0, 29, batch_records=7,
                                  into=into))
    assert len(batches) == 5 and all(b.pairs is into for b in batches)
    assert into == {b"k%d" % k: b"%d" % (25 + k) for k in range(5)}


def test_a_compacted_partition_with_gaps_reads_the_surviving_records(make_log):
    log = make_log(segment_bytes="600", compaction_min_lag_ms="0")
    log.create(compact=True)
    records = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(120)] + [(b"tail", b"t")] * 3
    log.write(records)
    log.admin.compact("s")
    location = ChangelogLocation(log.root, "s", 0)
    state, count, last = _collect(location, 0, 122)
    assert state == _expected(records, 0, 122)
    assert count == len(log.read()) < 123 and last == 122
    # A range starting inside a gap begins at the next surviving record.
    assert _collect(location, 5, 122)[0] == {r.key: r.value for r in log.read(offset=5)}


def test_damage_in_the_range_raises_at_the_damaged_records_offset(log):
    log.create()
    log.write([(b"k%d" % i, b"value-%d" % i) for i in range(50)])
    path = list_segments(log.pdir())[-1].path
    position = sum(len(encode_record(b"k%d" % i, b"value-%d" % i)) for i in range(20))
    _flip_byte(path, position + 12)  # inside record 20
    with pytest.raises(CorruptRecordError) as err:
        _collect(ChangelogLocation(log.root, "s", 0), 0, 49)
    assert err.value.offset == 20 and err.value.path == path
    assert err.value.position == position


def test_a_range_before_the_damage_reads_normally(log):
    log.create()
    records = [(b"k%d" % i, b"value-%d" % i) for i in range(50)]
    log.write(records)
    path = list_segments(log.pdir())[-1].path
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) - 3)
        f.write(b"\x00\x00\x00")  # the last record is damaged
    state, count, _ = _collect(ChangelogLocation(log.root, "s", 0), 0, 40)
    assert state == _expected(records, 0, 40) and count == 41


def test_an_empty_or_missing_partition_reads_nothing(log, tmp_path):
    log.create()
    assert _collect(ChangelogLocation(log.root, "s", 0), 0, 100) == ({}, 0, None)
    assert _collect(ChangelogLocation(str(tmp_path / "none"), "s", 0), 0, 100) == ({}, 0, None)


def test_a_location_pickles_for_worker_processes(log):
    location = ChangelogLocation(log.root, "s", 3)
    assert pickle.loads(pickle.dumps(location)) == location


def test_parts_split_a_range_at_segment_boundaries_in_similar_sizes(make_log):
    log = make_log(segment_bytes="2000")
    log.create()
    log.write(_records(600, 40))
    location = ChangelogLocation(log.root, "s", 0)
    bases = [s.base for s in list_segments(log.pdir())]
    parts = changelog_parts(location, 0, 599, 3)
    assert len(parts) == 3
    assert parts[0][0] == 0 and parts[-1][1] == 599
    assert all(hi + 1 == lo for (_, hi), (lo, _) in zip(parts, parts[1:]))  # contiguous
    assert all(lo in bases for lo, _ in parts[1:])                           # at boundaries
    sizes = [hi - lo + 1 for lo, hi in parts]
    assert max(sizes) < 2 * min(sizes)
    assert changelog_parts(location, 0, 599, 1) == [(0, 599)]
    assert changelog_parts(location, 3, 5, 4) == [(3, 5)]  # inside one segment


# -- the chunk parse (parse_into_dict) against the record-at-a-time parse_records -----------

def _reference(buf: bytes, pos: int, stop: int) -> tuple[dict, int, int, object, int]:
    from weir.engine.systems.filelog._format import parse_records
    out: list = []
    end, ordinal, why = parse_records(
        buf, pos, range(stop), 0, stop,
        lambda ctx, offset, key, value, ts, size: (key, value, size), None, out)
    return ({k: v for k, v, _ in out}, end, ordinal, why, sum(s for _, _, s in out))


def _chunk_parse(buf: bytes, pos: int, stop: int) -> tuple[dict, int, int, object, int]:
    from weir.engine.systems.filelog.bulk import parse_into_dict
    out: dict = {}
    nbytes = [0]
    end, ordinal, why = parse_into_dict(buf, pos, range(stop), 0, stop, None, nbytes, out)
    return out, end, ordinal, why, nbytes[0]


def _shaped_records(rng: random.Random, n: int) -> list[tuple[bytes, bytes | None]]:
    """Stretches of one shape (fixed-width keys and values) broken by records of other
    shapes: tombstones, empty values, another key or value width (one of the same record
    length, (20, 96) beside (16, 100)); keys repeat."""
    out: list[tuple[bytes, bytes | None]] = []
    while len(out) < n:
        klen, vlen = rng.choice([(16, 100), (8, 8), (3, 1), (16, 99), (20, 96)])
        for _ in range(rng.choice([1, 2, 5, 70, 300])):
            key = rng.randbytes(klen) if rng.random() < 0.7 else b"k" * klen
            value = rng.choice([rng.randbytes(vlen)] * 20 + [None, b""])
            out.append((key, value))
    return out[:n]


@pytest.mark.parametrize("seed", range(12))
def test_the_chunk_parse_stores_what_the_record_parse_reads(seed):
    rng = random.Random(seed)
    records = _shaped_records(rng, 3000)
    buf = b"".join(encode_record(k, v, i) for i, (k, v) in enumerate(records))
    cut = rng.choice([len(buf), len(buf) - rng.randrange(1, 130)])  # a partial tail, or none
    stop = rng.choice([len(records), rng.randrange(1, len(records))])
    got = _chunk_parse(buf[:cut], 0, stop)
    assert got == _reference(buf[:cut], 0, stop)


@pytest.mark.parametrize("damaged", [0, 1, 63, 64, 65, 700, 2999])
def test_the_chunk_parse_stops_at_a_damaged_record_of_a_uniform_stretch(damaged):
    rng = random.Random(damaged)
    records = [(rng.randbytes(16), rng.randbytes(100)) for _ in range(3000)]
    buf = bytearray(b"".join(encode_record(k, v) for k, v in records))
    size = len(encode_record(*records[0]))
    buf[damaged * size + 40] ^= 0x01  # a key byte of record ``damaged``: its CRC fails
    out, pos, ordinal, why, _ = got = _chunk_parse(bytes(buf), 0, len(records))
    assert got == _reference(bytes(buf), 0, len(records))
    assert (pos, ordinal, why.name) == (damaged * size, damaged, "BAD")
    assert out == dict(records[:damaged])


def test_the_chunk_parse_stops_in_front_of_a_batch_header_inside_a_stretch():
    from weir.engine.systems.filelog._txn_format import encode_batch_header
    records = [(b"%016d" % i, b"v" * 100) for i in range(200)]
    head = b"".join(encode_record(k, v) for k, v in records[:150])
    buf = head + encode_batch_header(7, 0, 0, 50, 0, -1) + b"".join(
        encode_record(k, v) for k, v in records[150:])
    got = _chunk_parse(buf, 0, 400)
    assert got == _reference(buf, 0, 400)
    assert got[1:4] == (len(head), 150, got[3]) and got[3].name == "EXT"
