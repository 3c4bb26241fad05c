"""Fixtures of the file log tests: a log root on disk and helpers that write and read it."""

from __future__ import annotations

import pytest

from weir.engine.systems.api import CleanupPolicy, StreamSpec
from weir.engine.systems.filelog import FileLogAdmin, FileLogSettings, PartitionWriter
from weir.stores.config import Config

SYSTEM = "fl"


class Log:
    """A file log system under a temporary root, with shortcuts for tests."""

    def __init__(self, root: str, **config: str):
        self.root = root
        self.config = Config({f"systems.{SYSTEM}.root": root,
                              **{f"systems.{SYSTEM}.{k.replace('_', '.')}": v
                                 for k, v in config.items()}})
        self.settings = FileLogSettings.from_config(SYSTEM, self.config)
        self.admin = FileLogAdmin(self.settings)

    def create(self, stream: str = "s", partitions: int = 1, *, compact: bool = False,
               bounded: bool = False, **config: str) -> str:
        self.admin.create_stream(StreamSpec(
            stream, partitions, CleanupPolicy.COMPACT if compact else CleanupPolicy.DELETE,
            bounded, {k.replace("_", "."): v for k, v in config.items()}))
        return stream

    def writer(self, stream: str = "s", partition: int = 0) -> PartitionWriter:
        return self.admin.writer(stream, partition)

    def write(self, records, stream: str = "s", partition: int = 0) -> list[int]:
        """Append ``(key, value)`` or ``(key, value, ts)`` records in one writer; flush."""
        with self.writer(stream, partition) as w:
            offsets = [w.append(*r) for r in records]
            w.flush()
        return offsets

    def read(self, stream: str = "s", partition: int = 0, offset: int = 0, max_records=10**9):
        reader = self.admin.reader(stream, partition, offset)
        try:
            return reader.read_records(max_records)
        finally:
            reader.close()

    def pdir(self, stream: str = "s", partition: int = 0) -> str:
        return f"{self.root}/{stream}/{partition}"


@pytest.fixture
def log(tmp_path):
    return Log(str(tmp_path / "log"))


@pytest.fixture
def make_log(tmp_path):
    def make(**config: str) -> Log:
        return Log(str(tmp_path / "log"), **config)
    return make
