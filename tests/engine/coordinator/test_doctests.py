"""The examples in the coordinator's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["weir.engine.coordinator.messages", "weir.engine.coordinator.settings",
           "weir.engine.coordinator.stream", "weir.engine.coordinator.submit",
           "weir.engine.coordinator.prometheus"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)

    assert result.failed == 0 and result.attempted > 0
