"""``weir.testing``: a task run to its end in this process from Python lists; outputs,
stores, metrics; a crash at an offset and the restart; processing time advanced by the
input lists."""

from __future__ import annotations

import pytest

from weir import (InitableTask, OutgoingMessageEnvelope, StreamTask, SystemStream,
                  WindowableTask)
from weir.testing import Record, TestRunError, TestRunner, advance

OUT = SystemStream("filelog", "counts")
COUNTING = {"systems.filelog.samza.key.serde": "string",
            "systems.filelog.samza.msg.serde": "json",
            "stores.counts.factory": "rocksdb", "stores.counts.key.serde": "string",
            "stores.counts.msg.serde": "int64", "stores.counts.changelog": "filelog.counts-log"}


class WordCount(StreamTask, InitableTask):
    def init(self, context):
        self.counts = context.store("counts")

    def process(self, envelope, collector, coordinator):
        word = envelope.message
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        collector.send(OutgoingMessageEnvelope(OUT, {"word": word, "count": count}, key=word))


class EditsPerWindow(StreamTask, InitableTask, WindowableTask):
    def init(self, context):
        self.clock = context.clock
        self.edits = 0

    def process(self, envelope, collector, coordinator):
        self.edits += 1

    def window(self, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(
            SystemStream("filelog", "stats"), {"edits": self.edits, "at": self.clock.now_ms()}))
        self.edits = 0


def test_a_task_runs_to_the_end_of_list_inputs_and_its_outputs_and_stores_are_read():
    with TestRunner(WordCount, config=COUNTING) as runner:
        runner.input("filelog.words", ["a", "b", "a"], partitions=2, key=lambda w: w)
        runner.output("filelog.counts", partitions=2)

        result = runner.run()

        assert sorted((m["word"], m["count"]) for m in result.output("filelog.counts")) == [
            ("a", 1), ("a", 2), ("b", 1)]
        assert result.store("counts") == {"a": 2, "b": 1}
        assert {r.key for r in result.records("filelog.counts")} == {"a", "b"}
        assert not result.crashed


def test_a_crash_at_an_offset_restores_the_stores_exactly_and_outputs_at_least_once():
    words = ["a", "b", "a", "c", "a", "b"]
    with TestRunner(WordCount, config=COUNTING, commit_every=2) as runner:
        runner.input("filelog.words", words)            # one partition: offsets 0..5
        runner.output("filelog.counts")
        runner.crash_at("filelog.words", offset=3)

        crashed = runner.run()
        restarted = runner.run()

        assert crashed.crash[1] == 3 and crashed.store("counts") == {"a": 2, "b": 1}
        assert not restarted.crashed
        assert restarted.store("counts") == {"a": 3, "b": 2, "c": 1}  # nothing counted twice
        sent = [(m["word"], m["count"]) for m in restarted.output("filelog.counts")]
        # offsets 0-1 committed; 2 was processed, not committed, and processed again
        assert sent == [("a", 1), ("b", 1), ("a", 2), ("a", 2), ("c", 1), ("a", 3), ("b", 2)]


def test_a_crash_point_never_reached_is_an_error():
    with TestRunner(WordCount, config=COUNTING) as runner:
        runner.input("filelog.words", ["a"])
        runner.output("filelog.counts")
        runner.crash_at("filelog.words", offset=9)
        with pytest.raises(TestRunError, match="without reaching the planned crash"):
            runner.run()


def test_advancing_processing_time_runs_window_at_the_same_messages_every_run():
    config = {"systems.filelog.samza.msg.serde": "json", "task.window.ms": "10000"}
    with TestRunner(EditsPerWindow, config=config, start_ms=1_000_000) as runner:
        runner.input("filelog.edits", [{"t": 1}, {"t": 2}, advance(10_000), {"t": 3},
                                       advance(25_000)])
        runner.output("filelog.stats")

        result = runner.run()

        assert result.output("filelog.stats") == [{"edits": 2, "at": 1_010_000},
                                                  {"edits": 1, "at": 1_035_000}]


def test_records_carry_keys_partitions_and_timestamps():
    class Echo(StreamTask):
        def process(self, envelope, collector, coordinator):
            collector.send(OutgoingMessageEnvelope(
                SystemStream("filelog", "echo"), envelope.message, key=envelope.key,
                partition=envelope.ssp.partition, timestamp=envelope.timestamp))

    with TestRunner(Echo, config={"systems.filelog.samza.msg.serde": "string",
                                  "systems.filelog.samza.key.serde": "string"}) as runner:
        runner.input("filelog.in", {1: [Record("x", key="k", timestamp=42)]}, partitions=2)
        runner.output("filelog.echo", partitions=2)
        (record,) = runner.run().records("filelog.echo")

    assert (record.message, record.key, record.partition, record.timestamp) == ("x", "k", 1, 42)


def test_a_failing_task_raises_with_the_jobs_error():
    class Fails(StreamTask):
        def process(self, envelope, collector, coordinator):
            raise ValueError("bad edit")

    with TestRunner(Fails, config={"systems.filelog.samza.msg.serde": "string"}) as runner:
        runner.input("filelog.in", ["x"])
        with pytest.raises(TestRunError, match="bad edit"):
            runner.run()


def test_the_runner_leaves_nothing_behind(tmp_path):
    runner = TestRunner(WordCount, config=COUNTING)
    runner.input("filelog.words", ["a"])
    runner.output("filelog.counts")
    runner.run()
    data_dir = runner.data_dir
    runner.close()
    assert not data_dir.exists()
    with pytest.raises(TestRunError, match="closed"):
        runner.run()


def test_an_applications_processing_time_windows_close_as_the_input_lists_advance_time():
    from weir.engine.app import StreamApplication, Windows

    class ClicksPerTenSeconds(StreamApplication):
        def describe(self, app):
            clicks = app.input("filelog.clicks", msg_serde="json")
            (clicks.window(Windows.tumbling_window(10_000, lambda: 0, lambda m, n: n + 1),
                           name="per-10s")
                   .send_to(app.output("filelog.per-10s", key_serde="json", msg_serde="json",
                                       partitions=1)))

    with TestRunner(app=ClicksPerTenSeconds, start_ms=1_000_000) as runner:
        runner.input("filelog.clicks", [{"c": 1}, {"c": 2}, advance(10_000), {"c": 3},
                                        advance(10_000)])
        result = runner.run()
        panes = [(p["start"], p["value"]) for p in result.output("filelog.per-10s")]

    assert panes[:2] == [(1_000_000, 2), (1_010_000, 1)]   # closed by the advanced clock
