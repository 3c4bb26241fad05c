"""Store factories for the contract and model tests: every engine x every layer stack.

A *stack* is what ``build_store`` composes for a config:

- ``raw``: no cache, no changelog (serialized layer straight over the engine);
- ``cached``: a small object cache (8 entries, write batch 4) so that evictions and
  write-downs happen all the time;
- ``cached+logged``: the same plus a :class:`FileChangelog`.

The engines are every engine of the registry (:mod:`weir.stores.engines.registry`) when this
module is imported: an engine registered before (``pytest -p <module that registers it>``,
docs/ENGINES.md) runs the whole contract. Engines whose preload modules do not import are
skipped, not failed.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from weir.stores.builder import build_store
from weir.stores.config import Config
from weir.stores.engines.registry import store_engine, store_engines
from weir.testing import FileChangelog
from weir.stores.spec import StoreSpec

__all__ = ["ENGINES", "PERSISTENT", "STACKS", "StoreFactory", "engine_param",
           "engine_available"]

ENGINES = tuple(e.name for e in store_engines())
"""Every registered engine."""
PERSISTENT = tuple(e.name for e in store_engines() if e.persistent)
"""The registered engines whose files outlive the process."""
STACKS = ("raw", "cached", "cached+logged")


def engine_available(engine: str) -> bool:
    try:
        for module in store_engine(engine).preload:
            importlib.import_module(module)
    except ModuleNotFoundError:
        return False
    return True


def engine_param(engine: str) -> Any:
    """A pytest param for ``engine`` that is skipped while its modules do not import."""
    marks = () if engine_available(engine) else (
        pytest.mark.skip(reason=f"the modules of engine {engine} do not import"),)
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
        return store_engine(self.engine).persistent

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
