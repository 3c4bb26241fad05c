"""Fixtures shared by the system tests."""

from __future__ import annotations

import uuid

import pytest

from weir.engine.systems.memory import reset_memory_systems
from weir.engine.systems.registry import SystemRegistry
from weir.stores.config import Config


@pytest.fixture(params=["memory", "filelog"])
def registry(request, tmp_path):
    """A SystemRegistry with one system of each kind in turn, under a fresh name
    (``registry.name``); a file log lives in ``tmp_path/log``."""
    name = f"{request.param}-{uuid.uuid4().hex[:8]}"
    cfg = {f"systems.{name}.factory": request.param}
    if request.param == "filelog":
        cfg[f"systems.{name}.root"] = str(tmp_path / "log")
    reg = SystemRegistry(Config(cfg))
    reg.name = name
    yield reg
    reset_memory_systems(name)
