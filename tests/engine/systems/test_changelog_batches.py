"""SystemChangelogSink batches (append_all / append_columns) and the container's
TrackedChangelog over them: the same records as one append per change, on real systems."""

from __future__ import annotations

import pytest

from weir.engine.container.task_storage import TrackedChangelog
from weir.engine.errors import SystemError_
from weir.engine.systems.changelog import SystemChangelogSource
from weir.stores.layers.logged import LoggedLayer
from weir.stores.engines.memory import MemoryEngine

from tests.engine.systems._changelog import open_sink


def test_batches_append_in_order_after_single_appends(registry):
    sink, ssp = open_sink(registry)
    sink.append(b"a", b"1")
    assert sink.append_all([(b"b", b"2"), (b"a", None)]) == 2
    assert sink.append_columns([b"c", b"d"], [b"3", None]) == 2
    assert sink.append_all(iter([(b"e", b"5")])) == 1
    sink.flush()
    assert list(SystemChangelogSource(registry, ssp).read(0, 10)) == [
        (0, b"a", b"1"), (1, b"b", b"2"), (2, b"a", None), (3, b"c", b"3"), (4, b"d", None),
        (5, b"e", b"5")]


def test_a_batch_with_a_null_key_is_refused(registry):
    sink, _ = open_sink(registry)
    with pytest.raises(SystemError_, match="needs a key"):
        sink.append_all([(b"a", b"1"), (None, b"2")])


def test_tracked_changelog_counts_batched_appends_in_the_newest_offset(registry):
    sink, ssp = open_sink(registry)
    tracked = TrackedChangelog(sink, SystemChangelogSource(registry, ssp))
    tracked.append(b"a", b"1")
    assert tracked.newest_offset() == 0
    tracked.append_all([(b"k%d" % i, b"v") for i in range(700)])
    tracked.append_columns([b"x", b"y"], [b"1", None])
    tracked.flush()
    assert tracked.newest_offset() == 702
    assert SystemChangelogSource(registry, ssp).newest_offset() == 702


def test_tracked_changelog_asks_the_system_again_after_a_failed_batch(registry):
    sink, ssp = open_sink(registry)
    tracked = TrackedChangelog(sink, SystemChangelogSource(registry, ssp))
    assert tracked.newest_offset() == -1
    with pytest.raises(SystemError_):
        tracked.append_all([(b"a", b"1"), (b"b", b"2"), (None, b"3")])
    # Whatever part of the batch reached the log, the tracked offset agrees with the system.
    assert tracked.newest_offset() == SystemChangelogSource(registry, ssp).newest_offset()


def test_a_logged_store_write_down_reaches_the_changelog_as_one_batch(registry):
    sink, ssp = open_sink(registry)
    calls = []
    send_batch = sink._send_batch
    if send_batch is not None:
        sink._send_batch = lambda *a, **k: (calls.append(len(a[3])), send_batch(*a, **k))[1]
    store = LoggedLayer(MemoryEngine("s"), TrackedChangelog(sink, SystemChangelogSource(
        registry, ssp)))
    store.write_batch([(b"k%d" % i, b"v%d" % i) for i in range(500)] + [(b"k0", None)])
    store.flush()
    assert calls == ([501] if send_batch is not None else [])
    records = list(SystemChangelogSource(registry, ssp).read(0, 1000))
    assert len(records) == 501 and records[-1] == (500, b"k0", None)
