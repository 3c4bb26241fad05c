"""Fixtures of the coordinator tests."""

from __future__ import annotations

import pytest

from tests.engine.coordinator._helpers import serving_coordinator


@pytest.fixture
def coordinator(tmp_path):
    """A started job coordinator serving its HTTP endpoint: a word-count job with two
    containers over four input partitions; stopped after the test."""
    yield from serving_coordinator(tmp_path)
