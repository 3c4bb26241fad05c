"""Low-level tasks that listen to control messages (named in configs as ``module:Class``)."""

from __future__ import annotations

import asyncio
import json
import os
import threading

from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.task import (AsyncStreamTask, DrainListenerTask, EndOfStreamListenerTask,
                              InitableTask, StreamTask, WatermarkListenerTask)

__all__ = ["Recorder", "AsyncRecorder", "Drainer"]

LOG = SystemStream("filelog", "log")


class Recorder(StreamTask, InitableTask, WatermarkListenerTask, EndOfStreamListenerTask):
    """Writes what it sees, in order, to ``filelog.log`` partition of its first input:
    ``["m", value]``, ``["wm", watermark]``, ``["eos"]``."""

    def init(self, context):
        self.partition = min(context.ssps).partition

    def _log(self, collector, *item):
        collector.send(OutgoingMessageEnvelope(LOG, json.dumps(item).encode(), key=None,
                                               partition=self.partition))

    def process(self, envelope, collector, coordinator):
        self._log(collector, "m", envelope.message.decode() if isinstance(envelope.message, bytes)
                  else envelope.message)

    def on_watermark(self, watermark, collector, coordinator):
        self._log(collector, "wm", watermark)

    def on_end_of_stream(self, collector, coordinator):
        self._log(collector, "eos")


class AsyncRecorder(AsyncStreamTask, InitableTask, WatermarkListenerTask, EndOfStreamListenerTask):
    """Coroutine task with up to task.max.concurrency in flight; ``on_watermark`` records how
    many messages were in flight when it ran (must be 0: control is a barrier)."""

    def init(self, context):
        self.partition = min(context.ssps).partition
        self.in_flight = 0
        self.lock = threading.Lock()

    async def process(self, envelope, collector, coordinator):
        with self.lock:
            self.in_flight += 1
        await asyncio.sleep(0.001)
        collector.send(OutgoingMessageEnvelope(LOG, json.dumps(["m", envelope.message.decode()])
                                               .encode(), key=None, partition=self.partition))
        with self.lock:
            self.in_flight -= 1

    def on_watermark(self, watermark, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(
            LOG, json.dumps(["wm", watermark, self.in_flight]).encode(), key=None,
            partition=self.partition))

    def on_end_of_stream(self, collector, coordinator):
        collector.send(OutgoingMessageEnvelope(LOG, json.dumps(["eos"]).encode(), key=None,
                                               partition=self.partition))


class Drainer(StreamTask, InitableTask, DrainListenerTask, EndOfStreamListenerTask):
    """Counts messages; ``on_drain`` / ``on_end_of_stream`` write which one ran to a file
    named by ``test.marker.dir``."""

    def init(self, context):
        self.dir = context.config["test.marker.dir"]
        self.name = context.task_name
        self.count = 0

    def process(self, envelope, collector, coordinator):
        self.count += 1

    def _mark(self, what):
        with open(os.path.join(self.dir, f"{self.name}.{what}"), "w") as f:
            f.write(str(self.count))

    def on_drain(self, collector, coordinator):
        self._mark("drain")

    def on_end_of_stream(self, collector, coordinator):
        self._mark("eos")
