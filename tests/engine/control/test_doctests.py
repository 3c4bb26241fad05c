"""The examples in the docstrings of the control and application packages run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["weir.engine.control.errors", "weir.engine.control.messages",
           "weir.engine.control.serde", "weir.engine.control.states",
           "weir.engine.control.sources", "weir.engine.control.sender",
           "weir.engine.control.task_control", "weir.engine.control.plane",
           "weir.engine.control.drain", "weir.engine.control.settings",
           "weir.engine.app.windows", "weir.engine.app.graph", "weir.engine.app.serdes"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
