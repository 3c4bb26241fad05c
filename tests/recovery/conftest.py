"""Fixtures for recovery tests: real store directories and real file changelogs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from weir.recovery.checkpoint import Checkpoint
from weir.recovery.storage import ProgressMode, TaskStorageManager
from weir.stores.config import Config
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

TASK = "Partition 0"


def store_config(engine: str, *, name: str = "counts", logged: bool = True,
                 cache: int | None = None) -> dict[str, str]:
    cfg = {f"stores.{name}.factory": engine, f"stores.{name}.key.serde": "string",
           f"stores.{name}.msg.serde": "int64"}
    if logged:
        cfg[f"stores.{name}.changelog"] = f"filelog.{name}-changelog"
    if cache is not None:
        cfg[f"stores.{name}.object.cache.size"] = str(cache)
        if cache:
            cfg[f"stores.{name}.write.batch.size"] = str(min(cache, 500))
    return cfg


def changelog_state(log: FileChangelog) -> dict[bytes, bytes]:
    """The state a changelog describes: the latest value of every key, tombstones dropped."""
    state: dict[bytes, bytes | None] = {}
    for _, key, value in log.read(0, log.newest_offset()):
        state[key] = value
    return {k: v for k, v in state.items() if v is not None}


@dataclass
class Task:
    """One task's stores over real directories and file changelogs, across 'process lives'.

    ``open()`` starts a life (fresh FileChangelog objects, as a new process would have) and
    ``close()`` ends it cleanly. Crashes are imitated by passing an older checkpoint than the
    last flush (``tests/recovery/test_crash.py`` kills real processes).
    """

    base: Path
    config: Config
    clock: object = None
    tsm: TaskStorageManager | None = None
    logs: dict[str, FileChangelog] = field(default_factory=dict)

    @property
    def specs(self) -> list[StoreSpec]:
        names = sorted({k.split(".")[1] for k in self.config if k.endswith(".factory")})
        return [StoreSpec.from_config(self.config, n) for n in names]

    def log(self, store: str = "counts") -> FileChangelog:
        return self.logs[store]

    def open(self, checkpoint: Checkpoint | None = None, **kwargs):
        self.logs = {s.name: FileChangelog(self.base / "changelogs" / f"{s.name}.log")
                     for s in self.specs if s.logged}
        kwargs.setdefault("progress", ProgressMode.QUIET)
        if self.clock is not None:
            kwargs.setdefault("clock", self.clock)
        self.tsm = TaskStorageManager(TASK, self.specs, self.base / "state",
                                      {n: (log, log) for n, log in self.logs.items()},
                                      self.config, **kwargs)
        return self.tsm.open(checkpoint)

    def commit(self) -> Checkpoint:
        return Checkpoint({("filelog", "input", 0): 0}, self.tsm.flush())

    def open_and_commit(self, items=(("a", 1),)) -> tuple[dict, Checkpoint]:
        """Open with no checkpoint, put ``items`` into ``counts`` and commit: the open stores
        and the checkpoint."""
        stores = self.open(None)
        stores["counts"].put_all(list(items))
        return stores, self.commit()

    def close(self) -> None:
        self.tsm.close()
        for log in self.logs.values():
            log.close()

    def store_dir(self, store: str = "counts") -> Path:
        return self.tsm.store_directory(store)

    def stats(self, store: str = "counts"):
        return self.tsm.restore_stats[store]


@pytest.fixture
def make_task(tmp_path):
    def make(config: dict[str, str], **kwargs) -> Task:
        return Task(tmp_path, Config(config), **kwargs)
    return make
