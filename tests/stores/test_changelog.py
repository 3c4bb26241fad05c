"""The changelog seams: every capability declared with its default, and every forwarding
wrapper (in stores, recovery and the engine) forwarding every capability it does not change."""

from __future__ import annotations

import inspect

import pytest

from weir.engine.container.exactly_once import TransactionalChangelog
from weir.engine.container.task_storage import TrackedChangelog
from weir.recovery.store_restore import CheckedSink, CheckedSource, GuardedSink
from weir.stores.changelog import (NO_BULK_READER, SINK_CAPABILITIES, SOURCE_CAPABILITIES,
                                   UNKNOWN_IDENTITY, Changelog, ChangelogSink, ChangelogSource,
                                   ForwardingChangelog, ForwardingSink, ForwardingSource)


class ListChangelog(Changelog):
    """Only the required capabilities: every optional one is the declared default."""

    def __init__(self):
        self.records: list[tuple[bytes, bytes | None]] = []

    def append(self, key, value):
        self.records.append((key, value))

    def flush(self):
        pass

    def oldest_offset(self):
        return 0

    def newest_offset(self):
        return len(self.records) - 1

    def read(self, start, end):
        return ((o, k, v) for o, (k, v) in enumerate(self.records) if start <= o <= end)


class Recording(Changelog):
    """Every capability overridden: records which one was called with what."""

    def __init__(self):
        self.calls: list[tuple[str, tuple]] = []

    def _call(self, name, *args):
        self.calls.append((name, args))
        return f"<{name}>"

    def append(self, key, value): return self._call("append", key, value)
    def flush(self): return self._call("flush")
    def append_all(self, items): return self._call("append_all", items)
    def append_columns(self, keys, values): return self._call("append_columns", keys, values)
    def oldest_offset(self): return self._call("oldest_offset")
    def newest_offset(self):
        self._call("newest_offset")
        return 41
    def read(self, start, end):
        self._call("read", start, end)
        return iter(())
    def read_batches(self, start, end, *, into=None):
        self._call("read_batches", start, end, into)
        return iter(())
    def bulk_reader(self): return self._call("bulk_reader")
    def split(self, start, end, parts): return self._call("split", start, end, parts)
    def identity(self): return self._call("identity")
    def min_compaction_lag_ms(self): return self._call("min_compaction_lag_ms")
    @property
    def partition(self): return self._call("partition")
    def probe(self, offset): return self._call("probe", offset)


_NO_TOKEN = ("read", "read_batches", "probe", "newest_offset")
"""Capabilities whose result is not the recorded token."""

_ARGS = {"append": (b"k", b"v"), "append_all": ([(b"k", b"v")],),
         "append_columns": ([b"k"], [b"v"]), "read": (0, 9), "read_batches": (0, 9),
         "split": (0, 9, 2), "probe": (7,)}


def _use(obj, name):
    if isinstance(getattr(type(obj), name), property):
        return getattr(obj, name)
    result = getattr(obj, name)(*_ARGS.get(name, ()))
    return list(result) if inspect.isgenerator(result) else result


def test_the_capability_lists_name_every_member_of_the_seams():
    def members(cls):
        return {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}
    assert members(ChangelogSink) == set(SINK_CAPABILITIES)
    assert members(ChangelogSource) == set(SOURCE_CAPABILITIES)


def test_a_changelog_with_only_the_required_capabilities_gets_the_declared_defaults():
    log = ListChangelog()
    log.append_all([(b"a", b"1"), (b"b", b"2")])
    log.append_columns([b"a"], [None])
    assert log.records == [(b"a", b"1"), (b"b", b"2"), (b"a", None)]
    batches = list(log.read_batches(0, 2))
    assert [(b.pairs, b.last, b.records, b.nbytes) for b in batches] == [
        ([(b"a", b"1"), (b"b", b"2"), (b"a", None)], 2, 3, 5)]
    assert log.bulk_reader() is NO_BULK_READER
    assert log.split(3, 9, 4) == [(3, 9)]
    assert log.identity() is UNKNOWN_IDENTITY
    assert log.min_compaction_lag_ms() is None
    assert log.partition is None
    assert log.probe(5) is None


def test_a_changelog_missing_a_required_capability_cannot_be_made():
    class NoRead(Changelog):
        def append(self, key, value): ...
        def flush(self): ...
        def oldest_offset(self): return 0
        def newest_offset(self): return -1
    with pytest.raises(TypeError, match="read"):
        NoRead()


def test_a_wrapper_refuses_what_is_not_a_declared_changelog():
    class Structural:  # the methods, but no declared defaults for the rest
        def append(self, key, value): ...
        def flush(self): ...
    with pytest.raises(TypeError, match="ChangelogSink"):
        ForwardingSink(Structural())


@pytest.mark.parametrize("make", [
    lambda inner: ForwardingSink(inner),
    lambda inner: ForwardingSource(inner),
    lambda inner: ForwardingChangelog(inner, inner),
    lambda inner: TrackedChangelog(inner, inner),
], ids=["ForwardingSink", "ForwardingSource", "ForwardingChangelog", "TrackedChangelog"])
def test_forwarding_wrappers_pass_every_capability_through(make):
    inner = Recording()
    wrapper = make(inner)
    names = [n for n in SINK_CAPABILITIES if isinstance(wrapper, ChangelogSink)]
    names += [n for n in SOURCE_CAPABILITIES if isinstance(wrapper, ChangelogSource)]
    for name in names:
        inner.calls.clear()
        _use(wrapper, name)
        assert inner.calls and inner.calls[-1][0] in (name, "append_all", "newest_offset"), name


def test_the_exactly_once_changelog_forwards_every_source_capability():
    """The capabilities it once lacked (issue 25): the bulk read, the worker reader, the
    split, the identity, the compaction lag."""
    inner = Recording()
    inner.ssp = type("SSP", (), {"stream": "cl", "partition": 0})()
    wrapper = TransactionalChangelog(inner, inner, producer=None)
    for name in SOURCE_CAPABILITIES:
        if name == "newest_offset":
            continue  # its own: the transactional writer's position
        inner.calls.clear()
        result = _use(wrapper, name)
        assert [c[0] for c in inner.calls] == [name], name
        if name not in _NO_TOKEN:
            assert result == f"<{name}>", name


def test_restores_checked_wrappers_pass_every_capability_through():
    inner = Recording()
    source = CheckedSource(inner)
    for name in SOURCE_CAPABILITIES:
        inner.calls.clear()
        result = _use(source, name)
        assert [c[0] for c in inner.calls] == [name], name
        if name not in _NO_TOKEN:
            assert result == f"<{name}>", name
    sink = CheckedSink(inner)
    for name in SINK_CAPABILITIES:
        inner.calls.clear()
        _use(sink, name)
        assert inner.calls, name


def test_the_guarded_sink_guards_every_write_capability(tmp_path):
    from weir.recovery.offset_file import OFFSET_FILE_NAME, write_offset_file
    for name in ("append", "append_all", "append_columns"):
        directory = tmp_path / name
        directory.mkdir()
        write_offset_file(directory, "s", "cl", 5, engine="memory", now_ms=0)
        inner = Recording()
        guard = GuardedSink(inner, directory)
        guard.clean = True
        _use(guard, name)
        assert not (directory / OFFSET_FILE_NAME).exists(), name
        assert guard.unflushed and [c[0] for c in inner.calls] == [name]


def test_a_capability_added_to_a_seam_but_not_forwarded_is_refused(monkeypatch):
    from weir.stores import changelog
    monkeypatch.setattr(ChangelogSource, "compacted_up_to", lambda self: None, raising=False)
    with pytest.raises(TypeError, match="compacted_up_to"):
        changelog._check_forwarding()
    monkeypatch.setattr(changelog, "SOURCE_CAPABILITIES",
                        changelog.SOURCE_CAPABILITIES + ("compacted_up_to",))
    with pytest.raises(TypeError, match=r"_SourceForwarding does not forward \['compacted_up_to'\]"):
        changelog._check_forwarding()
