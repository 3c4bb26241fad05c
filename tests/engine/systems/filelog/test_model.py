"""Property tests against a model: whatever is written, rolled, compressed and compacted, a
reader from any offset gets exactly the surviving records, in offset order, unchanged."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.systems.filelog.segment import list_segments

from tests.engine.systems.filelog.conftest import Log

records_st = st.lists(
    st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]),
              st.one_of(st.none(), st.binary(max_size=60))),
    min_size=1, max_size=120)


@settings(max_examples=25, deadline=None)
@given(records=records_st, segment_bytes=st.integers(150, 1500), zstd=st.booleans(),
       compact=st.booleans(), start=st.integers(0, 130))
def test_readers_get_exactly_the_surviving_records_from_any_offset(
        tmp_path_factory, records, segment_bytes, zstd, compact, start):
    root = tmp_path_factory.mktemp("model") / uuid.uuid4().hex
    config = {"segment_bytes": str(segment_bytes), "compaction_min_lag_ms": "0"}
    if zstd:
        config["compression"] = "zstd"
    log = Log(str(root), **config)
    log.create(compact=compact)
    assert log.write(records) == list(range(len(records)))
    if compact:
        log.admin.compact("s")
    active_base = list_segments(log.pdir())[-1].base
    latest = {}
    for offset, (key, _) in enumerate(records):
        if key is not None and offset < active_base:
            latest[key] = offset
    survivors = [o for o, (key, _) in enumerate(records)
                 if not compact or key is None or o >= active_base or latest[key] == o]
    got = log.read(offset=min(start, len(records)))
    assert [r.offset for r in got] == [o for o in survivors if o >= start]
    assert all((r.key, r.value) == records[r.offset] for r in got)
    md = log.admin.metadata([_ssp()])[_ssp()]
    assert (md.oldest, md.upcoming) == (0, len(records))


def _ssp():
    from weir.engine.model import SystemStreamPartition
    return SystemStreamPartition("fl", "s", 0)


def test_a_reader_inside_a_segment_that_compaction_replaces_reads_on_consistently(make_log):
    log = make_log(segment_bytes="400", compaction_min_lag_ms="0")
    log.create(compact=True)
    records = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(150)]
    log.write(records)
    reader = log.admin.reader("s", 0, 0)
    first = reader.read_records(5)                 # holds the first segment open
    log.admin.compact("s")
    rest = reader.read_records(10_000)
    offsets = [r.offset for r in first + rest]
    assert offsets == sorted(set(offsets))         # increasing, no record twice
    assert all((r.key, r.value) == records[r.offset] for r in first + rest)
    assert {r.key: r.value for r in first + rest} == {k: v for k, v in records}
    with log.writer() as w:                        # the writer continues after compaction
        assert w.append(b"k0", b"new") == 150
        w.flush()
    assert [(r.offset, r.value) for r in reader.read_records(10)] == [(150, b"new")]
