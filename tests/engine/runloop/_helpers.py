"""The scripted source and helpers shared by the run-loop tests (test_runloop_*.py).

The input is a scripted source: envelopes, gates (deliver nothing until a condition holds)
and failures, in order. Tests synchronize with events and gates, never with timing
assertions; short sleeps inside tasks only widen the window in which a broken guarantee
would show.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable


from weir.engine.runloop.instance import TaskInstance
from weir.engine.model import IncomingMessageEnvelope, SystemStreamPartition
from weir.engine.runloop.loop import RunLoop
from weir.engine.runloop.source import EnvelopeSource
from weir.recovery.checkpoint import MemoryCheckpointManager

__all__ = [
    "_controller",
    "A",
    "B",
    "eos",
    "Fail",
    "Gate",
    "HeldCallbacks",
    "instance",
    "msgs",
    "offsets_of",
    "Recording",
    "RecordingCheckpoints",
    "run",
    "ScriptedSource",
    "SHARED",
]


# ----------------------------------------------------------------------------------------
# the scripted source and helpers
# ----------------------------------------------------------------------------------------

class Gate:
    """Script item: deliver nothing until ``ready()`` is true."""

    def __init__(self, ready: Callable[[], bool]):
        self.ready = ready


class Fail:
    """Script item: ``choose`` raises ``exc``."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class _Counters:
    def __init__(self):
        self.chosen = 0

    def snapshot(self):
        return {"chosen": self.chosen}


class ScriptedSource(EnvelopeSource):
    """``choose(timeout)`` over a script; waits (without spinning) when nothing is ready."""

    def __init__(self, *items):
        self._items = deque(items)
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self.chosen: list[IncomingMessageEnvelope] = []
        self.counters = _Counters()

    def choose(self, timeout: float):
        with self._lock:
            while self._items:
                item = self._items[0]
                if isinstance(item, Gate):
                    if not item.ready():
                        break
                    self._items.popleft()
                    continue
                self._items.popleft()
                if isinstance(item, Fail):
                    raise item.exc
                self.chosen.append(item)
                self.counters.chosen += 1
                return item
        self._idle.wait(min(timeout, 0.002))
        return None

    def metrics(self):
        return self.counters.snapshot


A = SystemStreamPartition("test", "clicks", 0)
B = SystemStreamPartition("test", "clicks", 1)
SHARED = SystemStreamPartition("test", "rates", 0)


def msgs(ssp, *offsets):
    return [IncomingMessageEnvelope(ssp, o, f"k{o}", f"{ssp.partition}:{o}") for o in offsets]


def eos(ssp, offset):
    return IncomingMessageEnvelope.end_of_stream(ssp, offset)


def instance(task, ssps, name="Partition 0", config=None, checkpoints=None, **kw):
    return TaskInstance(name, task, ssps, config or {}, checkpoints=checkpoints, **kw)


def run(instances, source, config=None, **kw):
    loop = RunLoop(instances, source, config, **kw)
    for inst in instances:
        inst.init()
    try:
        return loop.run()
    finally:
        for inst in instances:
            inst.close()


def offsets_of(checkpoints, task_name):
    cp = checkpoints.read_last(task_name)
    return None if cp is None else dict(cp.input_offsets)


class RecordingCheckpoints(MemoryCheckpointManager):
    def __init__(self, events=None, on_write=None):
        super().__init__()
        self.events = events if events is not None else []
        self.on_write = on_write

    def write(self, task_name, checkpoint):
        self.events.append(("checkpoint", str(task_name), dict(checkpoint.input_offsets)))
        if self.on_write is not None:
            self.on_write(task_name, checkpoint)
        super().write(task_name, checkpoint)


class Recording:
    """A sync task recording (offset, thread) per message; optional per-offset actions."""

    def __init__(self, actions=None, events=None):
        self.seen: list[tuple[int, str]] = []
        self.actions = actions or {}
        self.events = events if events is not None else []

    def process(self, envelope, collector, coordinator):
        self.seen.append((envelope.offset, threading.current_thread().name))
        self.events.append(("process", envelope.ssp.partition, envelope.offset))
        action = self.actions.get((envelope.ssp, envelope.offset))
        if action is not None:
            action(coordinator)

    @property
    def offsets(self):
        return [o for o, _ in self.seen]


class HeldCallbacks:
    """A callback task that hands every callback to the test."""

    def __init__(self, expected: int):
        self.calls: dict[int, tuple] = {}
        self.all_started = threading.Event()
        self.expected = expected

    def process_async(self, envelope, collector, coordinator, callback):
        self.calls[envelope.offset] = (callback, coordinator)
        if len(self.calls) >= self.expected:
            self.all_started.set()


def _controller(target):
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread
