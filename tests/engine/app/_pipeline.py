"""Run an application of ``_apps.py`` in this process over a file log in a temp directory."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from weir.engine.app.runner import prepare_application
from weir.engine.container.runner import JobResult, run_job
from weir.engine.container.status import StatusMode
from weir.engine.model import OutgoingMessageEnvelope, SystemStream
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.recovery.storage import ProgressMode
from weir.stores.config import Config

from tests._processes import stream_envelopes

__all__ = ["Pipeline", "read_stream"]


def read_stream(registry: SystemRegistry, ss: SystemStream) -> list[tuple[Any, Any, int, int]]:
    """Every record of ``ss`` as ``(key bytes, value bytes, timestamp, partition)``."""
    return [(env.key, env.message, env.timestamp, p)
            for p, envs in stream_envelopes(registry, ss.system, ss.stream).items()
            for env in envs]


class Pipeline:
    """A temp file log, an application config and helpers to feed, run and read it."""

    def __init__(self, root: Path, app: str, **extra: Any):
        self.root = Path(root)
        values = {
            "job.name": "t",
            "app.class": f"tests.engine.app._apps:{app}",
            "systems.filelog.root": str(self.root / "log"),
            "systems.filelog.default.stream.samza.offset.default": "oldest",
            "task.checkpoint.path": str(self.root / "checkpoints"),
            "job.logged.store.base.dir": str(self.root / "state"),
            "job.non-logged.store.base.dir": str(self.root / "state"),
            "task.watermark.interval.ms": "20",
        }
        values.update({k.replace("__", "."): str(v) for k, v in extra.items()})
        self.config = Config(values)
        self.registry = SystemRegistry(self.config)

    def with_config(self, **extra: Any) -> "Pipeline":
        self.config = self.config.merged({k.replace("__", "."): str(v) for k, v in extra.items()})
        self.registry = SystemRegistry(self.config)
        return self

    def create(self, stream: str, partitions: int, *, bounded: bool = True) -> None:
        self.registry.admin("filelog").create_stream(StreamSpec(stream, partitions, bounded=bounded))

    def produce(self, stream: str, items: Iterable[Any], partition: Callable[[int, Any], int], *,
                key: Callable[[Any], Any] | None = None, end: bool = True,
                timestamp: Callable[[Any], int] | None = None) -> None:
        """JSON values (string keys from ``key``); ``partition(i, item)`` picks the partition,
        ``timestamp(item)`` the record timestamp (default: the time of writing)."""
        producer = self.registry.producer("filelog")
        producer.register("test")
        producer.start()
        ss = SystemStream("filelog", stream)
        try:
            for i, item in enumerate(items):
                k = None if key is None else str(key(item)).encode()
                producer.send("test", OutgoingMessageEnvelope(
                    ss, json.dumps(item).encode(), key=k, partition=partition(i, item),
                    **({} if timestamp is None else {"timestamp": timestamp(item)})))
            producer.flush("test")
            if end:
                producer.end_stream(stream)
        finally:
            producer.stop()

    def end(self, stream: str) -> None:
        self.registry.admin("filelog").end_stream(stream)

    def job_config(self, stage: int | None = None) -> Config:
        return prepare_application(self.config, stage=stage, registry=self.registry)[1]

    def run(self, stage: int | None = None) -> JobResult:
        result = run_job(self.job_config(stage), status=StatusMode.OFF, progress=ProgressMode.QUIET)
        assert result.exit_code == 0, "\n".join(result.summary_lines())
        return result

    def outputs(self, stream: str = "out", *, string_keys: bool = False
                ) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every output record, JSON-decoded (keys decoded as
        UTF-8 strings with ``string_keys``)."""
        def key(k: bytes | None) -> Any:
            return None if k is None else k.decode() if string_keys else json.loads(k)
        return [(key(k), json.loads(v), ts)
                for k, v, ts, _ in read_stream(self.registry, SystemStream("filelog", stream))]
