"""Shared helpers of the coordinator tests: a word-count job on a real file log."""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from weir.engine.config.job import load_config
from weir.engine.coordinator import JobCoordinator
from weir.engine.model import SystemStream, SystemStreamPartition
from weir.engine.systems.api import StreamSpec
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config

from tests._processes import produce as shared_produce

BASE = {
    "job.name": "coord_test",
    "task.class": "tests.engine._jobs:CountWords",
    "task.inputs": "filelog.words",
    "systems.filelog.samza.key.serde": "string",
    "systems.filelog.samza.msg.serde": "string",
    "systems.filelog.streams.counts-out.samza.msg.serde": "int64",
    "systems.filelog.default.stream.samza.offset.default": "oldest",
    "stores.counts.factory": "rocksdb",
    "stores.counts.key.serde": "string",
    "stores.counts.msg.serde": "int64",
    "stores.counts.changelog": "filelog.counts-changelog",
    "task.shutdown.ms": "5000",
}
STREAM = "__samza_coordinator_coord-test_1"


def write_job(tmp_path: Path, drop: tuple[str, ...] = (), **extra: str) -> Path:
    """``job.properties`` in ``tmp_path`` with every path inside it; returns its path."""
    lines = {k: v for k, v in BASE.items() if k not in drop}
    lines.update({"systems.filelog.root": str(tmp_path / "log"),
                  "task.checkpoint.path": str(tmp_path / "checkpoints"),
                  "job.logged.store.base.dir": str(tmp_path / "state"),
                  "job.non-logged.store.base.dir": str(tmp_path / "state")})
    lines.update(extra)
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def job_config(tmp_path: Path, drop: tuple[str, ...] = (), **extra: str) -> Config:
    return load_config(write_job(tmp_path, drop, **extra))


def words(n: int, first: int = 0) -> list[str]:
    return [f"w{(i * 7) % 13}" for i in range(first, first + n)]


def create_inputs(config: Config, partitions: int, *, bounded: bool = True) -> None:
    admin = SystemRegistry(config).admin("filelog")
    admin.create_stream(StreamSpec("words", partitions, bounded=bounded))
    admin.create_stream(StreamSpec("counts-out", partitions))


def produce(config: Config, items: list[str], partitions: int, *, first: int = 0,
            end: bool = False) -> None:
    shared_produce(SystemRegistry(config), "words", items, partitions=partitions, first=first,
                   end=end, serialize=True)


def emitted_counts(config: Config, partitions: int) -> Counter:
    """The counts each task sent at end of stream (the last per word and partition)."""
    registry = SystemRegistry(config)
    consumer = registry.consumer("filelog")
    serdes = registry.serdes_for(SystemStream("filelog", "counts-out"))
    ssps = [SystemStreamPartition("filelog", "counts-out", p) for p in range(partitions)]
    for ssp in ssps:
        consumer.register(ssp, 0)
    consumer.start()
    last: dict[tuple[int, str], int] = {}
    try:
        while True:
            got = consumer.poll(ssps, 0.2)
            if not any(got.values()):
                break
            for ssp, envs in got.items():
                for env in envs:
                    env = serdes.deserialize(env)
                    last[(ssp.partition, env.key)] = env.message
    finally:
        consumer.stop()
    out: Counter = Counter()
    for (_, word), n in last.items():
        out[word] += n
    return out


def serving(tmp_path: Path, **extra: str) -> JobCoordinator:
    """A started coordinator of a two-container job serving its HTTP endpoint (stop it)."""
    config = job_config(tmp_path, **{"job.container.count": "2", **extra})
    create_inputs(config, 4)
    coordinator = JobCoordinator(config)
    coordinator.start()
    coordinator.serve()
    return coordinator


def connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=30,
                                    source_address=(source, 0))


def read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def busy_connections(coordinator: JobCoordinator, count: int,
                     source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections that each started a request and send no more of it (the server
    waits for the rest of its headers); returns once the server reads them all."""
    socks = []
    for _ in range(count):
        sock = connect(coordinator.url, source)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
    reading = coordinator._server.connections
    while reading().reading < count:
        time.sleep(0.005)
    return socks


def serving_coordinator(tmp_path: Path, **extra: str):
    """A started job coordinator serving its HTTP endpoint (a generator for fixtures): the
    word-count job with two containers over four input partitions and the ``extra`` keys;
    stopped when the fixture ends."""
    config = job_config(tmp_path, **{"job.container.count": "2", **extra})
    create_inputs(config, 4)
    coordinator = JobCoordinator(config)
    coordinator.start()
    coordinator.serve()
    yield coordinator
    coordinator.stop()
