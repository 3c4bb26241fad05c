"""The examples in the storage core's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["stores.api", "stores.serdes", "stores.spec", "stores.builder", "stores.filesink",
           "stores.engines.memory", "stores.locking", "stores.layers.cached", "stores.layers.logged",
           "stores.layers.readonly", "stores.layers.serialized"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
