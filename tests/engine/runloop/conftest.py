"""Fixtures of the run-loop tests."""

from __future__ import annotations

import pytest

from weir.engine.runloop.asyncio_thread import AsyncioThread


@pytest.fixture
def asyncio_thread():
    """The asyncio thread coroutine tasks run on, stopped after the test."""
    runner = AsyncioThread("weir-asyncio-test")
    yield runner
    runner.stop()
