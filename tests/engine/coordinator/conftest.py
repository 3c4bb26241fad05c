"""Fixtures of the coordinator tests."""

from __future__ import annotations

import pytest

from weir.engine.coordinator import JobCoordinator

from tests.engine.coordinator._helpers import create_inputs, job_config


@pytest.fixture
def coordinator(tmp_path):
    """A started job coordinator serving its HTTP endpoint: a word-count job with two
    containers over four input partitions; stopped after the test."""
    config = job_config(tmp_path, **{"job.container.count": "2"})
    create_inputs(config, 4)
    coordinator = JobCoordinator(config)
    coordinator.start()
    coordinator.serve()
    yield coordinator
    coordinator.stop()
