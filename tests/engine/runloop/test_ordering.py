"""The run loop's ordering, window and commit guarantees, each as a named scenario.

Helpers and the scripted source are in ``_runloop_helpers``.
"""

from __future__ import annotations

import io
import os
import random
import threading
import time
from pathlib import Path

import orjson
import pytest

from weir.engine.metrics import MetricsReporter
from weir.engine.runloop.loop import RunLoop, StopReason
from weir.engine.task import RequestScope, TaskWrapper, load_task_factory
from weir.recovery.checkpoint import MemoryCheckpointManager

from tests.engine.runloop._helpers import (
    A,
    B,
    SHARED,
    Gate,
    HeldCallbacks,
    Recording,
    RecordingCheckpoints,
    ScriptedSource,
    _controller,
    eos,
    instance,
    msgs,
    offsets_of,
    run,
)

pytestmark = pytest.mark.timeout(30)


# ----------------------------------------------------------------------------------------
# processing and ordering
# ----------------------------------------------------------------------------------------

def test_inline_tasks_process_in_order_on_the_loop_thread_and_stop_at_end_of_stream():
    checkpoints = MemoryCheckpointManager()
    ta, tb = Recording(), Recording()
    source = ScriptedSource(*msgs(A, 0, 1), *msgs(B, 0), *msgs(A, 2), *msgs(B, 1, 2),
                            eos(A, 3), eos(B, 3))
    summary = run([instance(ta, [A], "Partition 0", checkpoints=checkpoints),
                   instance(tb, [B], "Partition 1", checkpoints=checkpoints)], source)
    assert summary.reason is StopReason.END_OF_STREAM
    assert dict(summary.processed) == {"Partition 0": 3, "Partition 1": 3}
    assert ta.offsets == [0, 1, 2] and tb.offsets == [0, 1, 2]
    assert {thread for _, thread in ta.seen + tb.seen} == {threading.current_thread().name}
    assert offsets_of(checkpoints, "Partition 0") == {("test", "clicks", 0): 2}
    assert offsets_of(checkpoints, "Partition 1") == {("test", "clicks", 1): 2}


def test_concurrency_one_on_a_thread_pool_runs_one_process_at_a_time_in_order():
    class Exclusive:
        def __init__(self):
            self.active = self.max_active = 0
            self.seen: list[tuple[int, str]] = []
            self.lock = threading.Lock()

        def process(self, envelope, collector, coordinator):
            with self.lock:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            self.seen.append((envelope.offset, threading.current_thread().name))
            time.sleep(0.0005)
            with self.lock:
                self.active -= 1

    tasks = [Exclusive(), Exclusive()]
    source = ScriptedSource(*[e for o in range(25) for e in (*msgs(A, o), *msgs(B, o))],
                            eos(A, 25), eos(B, 25))
    cfg = {"job.container.thread.pool.size": "4", "task.max.concurrency": "1"}
    run([instance(tasks[0], [A], "Partition 0", cfg), instance(tasks[1], [B], "Partition 1", cfg)],
        source, cfg, name="pool")
    for task in tasks:
        assert task.max_active == 1
        assert [o for o, _ in task.seen] == list(range(25))
        assert all(thread.startswith("weir-task-pool") for _, thread in task.seen)


def test_window_never_overlaps_process_and_nothing_starts_until_it_ends():
    class Windowed:
        def __init__(self):
            self.in_flight = 0
            self.in_window = False
            self.windows = 0
            self.violations: list[str] = []
            self.lock = threading.Lock()
            self.done = 0

        def process_async(self, envelope, collector, coordinator, callback):
            with self.lock:
                if self.in_window:
                    self.violations.append(f"process {envelope.offset} during window")
                self.in_flight += 1

            def finish():
                time.sleep(0.0003)
                with self.lock:
                    self.in_flight -= 1
                    self.done += 1
                callback.complete()
            threading.Thread(target=finish).start()

        def window(self, collector, coordinator):
            with self.lock:
                if self.in_flight:
                    self.violations.append(f"window with {self.in_flight} in flight")
                self.in_window = True
            time.sleep(0.0002)
            with self.lock:
                self.in_window = False
                self.windows += 1

    task = Windowed()
    cfg = {"task.max.concurrency": "4", "job.container.thread.pool.size": "2",
           "task.window.ms": "2"}
    source = ScriptedSource(*msgs(A, *range(150)), Gate(lambda: task.windows >= 3), eos(A, 150))
    inst = instance(task, [A], config=cfg)
    run([inst], source, cfg)
    assert task.violations == []
    assert task.done == 150 and task.windows >= 3
    assert inst.metrics.windows.count == task.windows


def test_window_runs_between_messages_of_an_inline_task():
    class Windowed(Recording):
        windows = 0

        def window(self, collector, coordinator):
            self.events.append(("window",))
            self.windows += 1

    task = Windowed()
    source = ScriptedSource(*msgs(A, 0, 1), Gate(lambda: task.windows >= 2), *msgs(A, 2), eos(A, 3))
    inst = instance(task, [A], config={"task.window.ms": "1"})
    run([inst], source, {"task.window.ms": "1"})
    kinds = [e[0] for e in task.events]
    assert [e[2] for e in task.events if e[0] == "process"] == [0, 1, 2]
    last_process = max(i for i, kind in enumerate(kinds) if kind == "process")
    assert kinds[:last_process].count("window") >= 2   # the gate held message 2 back
    assert inst.metrics.snapshot()["window-calls"] == task.windows


# ----------------------------------------------------------------------------------------
# checkpoints and concurrency > 1
# ----------------------------------------------------------------------------------------

def test_checkpoint_never_passes_an_unfinished_message_when_completions_come_out_of_order():
    task = HeldCallbacks(3)
    first_done = threading.Event()
    writes_before_first_done: list = []
    checkpoints = RecordingCheckpoints(on_write=lambda name, cp: writes_before_first_done.append(
        dict(cp.input_offsets)) if not first_done.is_set() else None)
    inst = instance(task, [A], config={"task.max.concurrency": "3"}, checkpoints=checkpoints)
    processed_while_held = []

    def control():
        assert task.all_started.wait(10)
        callback2, coordinator2 = task.calls[2]
        coordinator2.commit()           # message 2 asks for a commit ...
        callback2.complete()            # ... and finishes before 0 and 1
        task.calls[1][0].complete()
        time.sleep(0.05)                # give a broken loop every chance to commit now
        processed_while_held.append(dict(inst.last_processed))
        first_done.set()
        task.calls[0][0].complete()

    controller = _controller(control)
    source = ScriptedSource(*msgs(A, 0, 1, 2), Gate(first_done.is_set), eos(A, 3))
    run([inst], source, {"task.max.concurrency": "3"})
    controller.join(5)
    assert writes_before_first_done == []
    assert processed_while_held == [{}]
    assert checkpoints.events[0] == ("checkpoint", "Partition 0", {("test", "clicks", 0): 2})
    assert inst.metrics.processed.count == 3


def test_commit_requested_by_a_message_covers_it_but_not_messages_finished_after_it():
    task = HeldCallbacks(2)
    checkpoints = RecordingCheckpoints()
    inst = instance(task, [A], config={"task.max.concurrency": "2"}, checkpoints=checkpoints)
    released = threading.Event()

    def control():
        assert task.all_started.wait(10)
        task.calls[1][0].complete()         # 1 finishes first but must wait for 0
        callback0, coordinator0 = task.calls[0]
        coordinator0.commit()
        callback0.complete()
        released.set()

    controller = _controller(control)
    run([inst], ScriptedSource(*msgs(A, 0, 1), Gate(released.is_set), eos(A, 2)),
        {"task.max.concurrency": "2"})
    controller.join(5)
    assert [e[2] for e in checkpoints.events] == [{("test", "clicks", 0): 0},
                                                   {("test", "clicks", 0): 1}]


@pytest.mark.parametrize("seed", range(3))
def test_every_checkpoint_covers_only_finished_messages_on_a_pool_with_concurrency(seed):
    # Sync tasks on a 4-thread pool, 4 in flight, random durations, a commit every
    # millisecond: each checkpoint is written while no process() of the task runs and
    # covers finished messages only.
    rng = random.Random(seed)
    delays = [rng.choice([0, 0, 0.0002, 0.001]) for _ in range(300)]
    finished: set[int] = set()
    running = [0]
    lock = threading.Lock()
    uncovered: list = []

    class Sleepy:
        def process(self, envelope, collector, coordinator):
            with lock:
                running[0] += 1
            time.sleep(delays[envelope.offset])
            with lock:
                running[0] -= 1
                finished.add(envelope.offset)

    def check(name, checkpoint):
        committed = checkpoint.input_offsets.get(A, -1)
        with lock:
            missing = [o for o in range(committed + 1) if o not in finished]
            if missing or running[0]:
                uncovered.append((committed, missing[:5], running[0]))

    checkpoints = RecordingCheckpoints(on_write=check)
    cfg = {"job.container.thread.pool.size": "4", "task.max.concurrency": "4",
           "task.commit.ms": "1"}
    inst = instance(Sleepy(), [A], config=cfg, checkpoints=checkpoints)
    run([inst], ScriptedSource(*msgs(A, *range(300)), eos(A, 300)), cfg)
    assert uncovered == []
    assert offsets_of(checkpoints, "Partition 0") == {A: 299}


def test_coordinator_commit_of_the_current_task_and_of_all_tasks():
    events: list = []
    checkpoints = RecordingCheckpoints(events)
    ta = Recording({(A, 1): lambda c: c.commit()}, events)
    tb = Recording({(B, 1): lambda c: c.commit(RequestScope.ALL_TASKS_IN_CONTAINER)}, events)
    source = ScriptedSource(*msgs(A, 0, 1), *msgs(B, 0, 1), *msgs(A, 2), eos(A, 3), eos(B, 2))
    run([instance(ta, [A], "Partition 0", checkpoints=checkpoints),
         instance(tb, [B], "Partition 1", checkpoints=checkpoints)], source)
    assert events[:7] == [
        ("process", 0, 0), ("process", 0, 1),
        ("checkpoint", "Partition 0", {("test", "clicks", 0): 1}),
        ("process", 1, 0), ("process", 1, 1),
        ("checkpoint", "Partition 0", {("test", "clicks", 0): 1}),
        ("checkpoint", "Partition 1", {("test", "clicks", 1): 1}),
    ]


# ----------------------------------------------------------------------------------------
# end of stream, broadcast inputs, wrappers, metrics
# ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("pool", ["0", "2"])
def test_end_of_stream_listener_runs_after_the_last_message_then_commit_then_the_loop_ends(pool):
    events: list = []

    class Listener(Recording):
        def on_end_of_stream(self, collector, coordinator):
            self.events.append(("end-of-stream", len(self.seen)))

    checkpoints = RecordingCheckpoints(events)
    cfg = {"job.container.thread.pool.size": pool}
    task = Listener(events=events)
    summary = run([instance(task, [A, B], config=cfg, checkpoints=checkpoints)],
                  ScriptedSource(*msgs(A, 0), eos(A, 1), *msgs(B, 0, 1), eos(B, 2)), cfg)
    assert summary.reason is StopReason.END_OF_STREAM
    assert events[-2:] == [("end-of-stream", 3),
                           ("checkpoint", "Partition 0",
                            {("test", "clicks", 0): 0, ("test", "clicks", 1): 1})]
    assert events.count(("end-of-stream", 3)) == 1


@pytest.mark.parametrize("pool", ["0", "2"])
def test_a_shared_ssp_reaches_every_owner_from_its_own_starting_offset(pool):
    cfg = {"job.container.thread.pool.size": pool}
    ta, tb = Recording(), Recording()
    ia = instance(ta, [A, SHARED], "Partition 0", cfg, starting_offsets={SHARED: 0})
    ib = instance(tb, [B, SHARED], "Partition 1", cfg, starting_offsets={SHARED: 2})
    run([ia, ib], ScriptedSource(*msgs(SHARED, 0, 1, 2, 3), eos(SHARED, 4), eos(A, 0), eos(B, 0)),
        cfg)
    assert ta.offsets == [0, 1, 2, 3] and tb.offsets == [2, 3]
    assert ib.metrics.skipped.count == 2


class CountingWrapper(TaskWrapper):
    calls = {"process": 0, "window": 0}

    def process(self, envelope, collector, coordinator):
        CountingWrapper.calls["process"] += 1
        return self.wrapped.process(envelope, collector, coordinator)

    def window(self, collector, coordinator):
        CountingWrapper.calls["window"] += 1
        return self.wrapped.window(collector, coordinator)


class WindowedRecording(Recording):
    def window(self, collector, coordinator):
        self.events.append(("window",))


def test_a_configured_task_wrapper_sees_every_process_and_window_call():
    CountingWrapper.calls.update(process=0, window=0)
    cfg = {"task.class": "tests.engine.runloop.test_ordering:WindowedRecording",
           "task.wrapper.class": "tests.engine.runloop.test_ordering:CountingWrapper",
           "task.window.ms": "1"}
    task = load_task_factory(cfg)()
    run([instance(task, [A], config=cfg)],
        ScriptedSource(*msgs(A, 0, 1, 2), Gate(lambda: CountingWrapper.calls["window"] >= 2),
                       eos(A, 3)), cfg)
    inner = task.wrapped
    assert CountingWrapper.calls["process"] == 3 == len(inner.seen)
    assert CountingWrapper.calls["window"] == inner.events.count(("window",)) >= 2


def test_metrics_snapshot_and_the_json_lines_reporter(tmp_path):
    task = Recording({(A, 1): lambda c: c.commit()})
    cfg = {"metrics.reporter.interval.ms": "1", "metrics.reporter.file": str(tmp_path / "m.jsonl")}
    inst = instance(task, [A], config=cfg, checkpoints=MemoryCheckpointManager())
    source = ScriptedSource(*msgs(A, *range(130)), eos(A, 130))
    loop = RunLoop([inst], source, cfg, name="c0")
    inst.init()
    loop.run()
    snap = loop.metrics_snapshot()
    task_metrics = snap["tasks"]["Partition 0"]
    assert task_metrics["messages-processed"] == 130
    assert task_metrics["commit-calls"] == 2          # requested at offset 1, end of stream
    assert task_metrics["process-ns"]["count"] == 2   # inline path: every 64th message timed
    assert snap["consumers"] == {"chosen": 131}
    assert "null-choices" in snap["run-loop"]
    lines = (tmp_path / "m.jsonl").read_bytes().splitlines()
    last = orjson.loads(lines[-1])
    assert last["source"] == "c0"
    assert last["metrics"]["tasks"]["Partition 0"]["messages-processed"] == 130


def test_the_reporter_file_opened_from_config_is_closed_when_the_loop_stops(tmp_path):
    path = tmp_path / "m.jsonl"
    cfg = {"metrics.reporter.interval.ms": "60000", "metrics.reporter.file": str(path)}
    run([instance(Recording(), [A], config=cfg)], ScriptedSource(*msgs(A, 0), eos(A, 1)), cfg)
    assert len(path.read_bytes().splitlines()) == 1          # the final report
    open_files = [os.readlink(fd) for fd in Path("/proc/self/fd").iterdir()
                  if fd.is_symlink() and os.path.exists(fd)]
    assert str(path) not in open_files


def test_reporter_given_directly_gets_a_final_report():
    out = io.BytesIO()
    reporter = MetricsReporter("c1", interval_ms=60_000, stream=out)
    run([instance(Recording(), [A])], ScriptedSource(*msgs(A, 0), eos(A, 1)), reporter=reporter)
    assert reporter.reports == 1 and b'"c1"' in out.getvalue()
