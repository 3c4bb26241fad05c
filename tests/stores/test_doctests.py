"""The examples in the storage core's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["weir.stores.api", "weir.stores.serdes", "weir.stores.spec", "weir.stores.builder", "weir.stores.filesink",
           "weir.stores.engines.memory", "weir.stores.locking", "weir.stores.layers.cached", "weir.stores.layers.logged",
           "weir.stores.layers.readonly", "weir.stores.layers.serialized", "weir.stores.layers.locked"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
