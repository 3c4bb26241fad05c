"""Small task classes for container and runner tests (named in configs as ``module:Class``)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import AsyncStreamTask, EndOfStreamListenerTask, InitableTask, StreamTask

__all__ = ["PassThrough", "PassThroughCallback", "PassThroughCoroutine", "HoldAfterSending",
           "CountWords", "FailAt", "SigtermAt", "ShutdownAt", "EnvProbe",
           "ModulesAtFirstMessage"]


class PassThrough(StreamTask):
    """Copies every message to ``<system>.<stream>-out``, keeping key and partition."""

    def process(self, envelope, collector, coordinator):
        ssp = envelope.ssp
        collector.send(OutgoingMessageEnvelope(
            SystemStream(ssp.system, f"{ssp.stream}-out"), envelope.message, key=envelope.key,
            partition=ssp.partition))


def _copy(envelope, collector) -> None:
    ssp = envelope.ssp
    collector.send(OutgoingMessageEnvelope(SystemStream(ssp.system, f"{ssp.stream}-out"),
                                           envelope.message, key=envelope.key,
                                           partition=ssp.partition))


class PassThroughCallback(AsyncStreamTask):
    """PassThrough in the callback form: sends, then completes from another thread."""

    def process_async(self, envelope, collector, coordinator, callback):
        _copy(envelope, collector)
        threading.Thread(target=callback.complete).start()


class PassThroughCoroutine(AsyncStreamTask):
    """PassThrough in the coroutine form (``async def process`` on the asyncio thread)."""

    async def process(self, envelope, collector, coordinator):
        _copy(envelope, collector)


HOLD_RELEASE = threading.Event()
"""Set by the test to let :class:`HoldAfterSending` calls finish."""


class HoldAfterSending(AsyncStreamTask):
    """Sends like PassThrough, then keeps the message in flight until HOLD_RELEASE is set:
    the run loop is never idle meanwhile."""

    async def process(self, envelope, collector, coordinator):
        import asyncio
        _copy(envelope, collector)
        while not HOLD_RELEASE.is_set():
            await asyncio.sleep(0.001)


class CountWords(StreamTask, InitableTask, EndOfStreamListenerTask):
    """Counts messages per message text in store ``counts``; at end of stream sends every
    count to ``<system>.counts-out`` (key: word, message: count), to the partition the task
    reads (so tasks in different containers never write the same partition)."""

    def init(self, context):
        self.counts = context.store("counts")
        ssp = min(context.ssps)
        self.system, self.partition = ssp.system, ssp.partition

    def process(self, envelope, collector, coordinator):
        word = envelope.message
        self.counts.put(word, (self.counts.get(word) or 0) + 1)

    def on_end_of_stream(self, collector, coordinator):
        with self.counts.all() as it:
            for word, n in it:
                collector.send(OutgoingMessageEnvelope(
                    SystemStream(self.system, "counts-out"), n, key=word, partition=self.partition))


class EnvProbe(CountWords):
    """CountWords that, at init, writes what its process sees into ``$WEIR_PROBE_DIR/<task>``:
    ``$WEIR_PROBE_MARK``, its pid and its parent's pid (how the container process started)."""

    def init(self, context):
        super().init(context)
        out = os.path.join(os.environ["WEIR_PROBE_DIR"], str(context.task_name))
        with open(out, "w") as f:
            f.write(f"{os.environ.get('WEIR_PROBE_MARK', '')} {os.getpid()} {os.getppid()}")


class FailAt(CountWords):
    """CountWords that raises on the message ``boom``."""

    def process(self, envelope, collector, coordinator):
        if envelope.message == "boom":
            raise ValueError("the message was boom")
        super().process(envelope, collector, coordinator)


class SigtermAt(CountWords):
    """CountWords that sends SIGTERM to its own process on the message ``stop``."""

    def process(self, envelope, collector, coordinator):
        super().process(envelope, collector, coordinator)
        if envelope.message == "stop":
            os.kill(os.getpid(), signal.SIGTERM)


class ShutdownAt(CountWords):
    """CountWords that asks the container to stop on the message ``stop``."""

    def process(self, envelope, collector, coordinator):
        super().process(envelope, collector, coordinator)
        if envelope.message == "stop":
            from weir.engine.task import RequestScope
            coordinator.shutdown(RequestScope.ALL_TASKS_IN_CONTAINER)


STUCK_RELEASE = threading.Event()
"""Set by the test to let a :class:`StuckAt` call that timed out finish."""


class StuckAt(CountWords):
    """CountWords whose ``process`` blocks on the message ``stuck`` until STUCK_RELEASE is set,
    then touches its store (as a call abandoned after a callback timeout would)."""

    def process(self, envelope, collector, coordinator):
        if envelope.message == "stuck":
            STUCK_RELEASE.wait(60)
            self.counts.get("stuck")  # must not find the store closed under it
        super().process(envelope, collector, coordinator)


class ModulesAtFirstMessage(StreamTask):
    """Writes the names of the modules imported by then to ``$WEIR_TEST_MODULES`` at its first
    message (what a ``weir run`` process loaded to get there)."""

    done = False

    def process(self, envelope, collector, coordinator):
        if not ModulesAtFirstMessage.done:
            ModulesAtFirstMessage.done = True
            Path(os.environ["WEIR_TEST_MODULES"]).write_text("\n".join(sorted(sys.modules)))
