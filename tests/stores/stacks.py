"""Store factories for the contract and model tests: every engine x every layer stack.

A *stack* is what ``build_store`` composes for a config:

- ``raw``: no cache, no changelog (serialized layer straight over the engine);
- ``cached``: a small object cache (8 entries, write batch 4) so that evictions and
  write-downs happen all the time;
- ``cached+logged``: the same plus a :class:`FileChangelog`.

Engines whose module is not importable yet are skipped, not failed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

__all__ = ["ENGINES", "STACKS", "StoreFactory", "engine_param", "engine_available"]

ENGINES = ("memory", "rocksdb", "lmdb")
STACKS = ("raw", "cached", "cached+logged")
PERSISTENT = ("rocksdb", "lmdb")

_MODULES = {"memory": "weir.stores.engines.memory", "rocksdb": "weir.stores.engines.rocksdb",
            "lmdb": "weir.stores.engines.lmdb"}


def engine_available(engine: str) -> bool:
    try:
        importlib.import_module(_MODULES[engine])
    except ModuleNotFoundError:
        return False
    return True


def engine_param(engine: str) -> Any:
    """A pytest param for ``engine`` that is skipped while its module does not exist."""
    marks = () if engine_available(engine) else (
        pytest.mark.skip(reason=f"{_MODULES[engine]} is not importable yet"),)
    return pytest.param(engine, marks=marks, id=engine)


@dataclass
class StoreFactory:
    """Opens (and reopens) one store of ``engine`` with layer ``stack`` under ``root``."""

    engine: str
    stack: str
    root: Path
    key_serde: str = "bytes"
    value_serde: str = "bytes"
    cache_size: int = 8
    batch_size: int = 4
    name: str = "s"
    extra: dict[str, str] = field(default_factory=dict)
    changelog: FileChangelog | None = None
    opened: list[Any] = field(default_factory=list)

    @property
    def persistent(self) -> bool:
        return self.engine in PERSISTENT

    @property
    def logged(self) -> bool:
        return self.stack.endswith("logged")

    def config(self) -> Config:
        values = {
            f"stores.{self.name}.factory": self.engine,
            f"stores.{self.name}.key.serde": self.key_serde,
            f"stores.{self.name}.msg.serde": self.value_serde,
        }
        if self.stack == "raw":
            values[f"stores.{self.name}.object.cache.size"] = "0"
        else:
            values[f"stores.{self.name}.object.cache.size"] = str(self.cache_size)
            values[f"stores.{self.name}.write.batch.size"] = str(self.batch_size)
        if self.logged:
            values[f"stores.{self.name}.changelog"] = f"filelog.{self.name}-changelog"
        values.update(self.extra)
        return Config(values)

    @property
    def directory(self) -> Path:
        return self.root / self.name

    def open(self) -> Any:
        config = self.config()
        spec = StoreSpec.from_config(config, self.name)
        if self.logged and self.changelog is None:
            self.changelog = FileChangelog(self.root / f"{self.name}.changelog")
        store = build_store(spec, self.directory, changelog=self.changelog if self.logged else None,
                            config=config)
        self.opened.append(store)
        return store

    def reopen(self, store: Any) -> Any:
        """Close ``store`` and open it again (same directory and changelog)."""
        store.close()
        return self.open()

    def close_all(self) -> None:
        for store in self.opened:
            store.close()
        if self.changelog is not None:
            self.changelog.close()
