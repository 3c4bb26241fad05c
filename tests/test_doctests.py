"""Every docstring example of ``weir.stores``, ``weir.recovery`` and ``weir.engine`` runs and
prints what it claims (temporary files go to the test's ``tmp_path``; see tests/_doctests.py)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from weir.engine.config.job import load_all_declarations

from tests._doctests import run_doctests


def _modules_with_examples() -> list[str]:
    out = []
    for name in load_all_declarations():
        source = Path(importlib.import_module(name).__file__).read_text(encoding="utf-8")
        if ">>> " in source:
            out.append(name)
    return out


MODULES = _modules_with_examples()


def test_the_three_packages_have_examples_to_run():
    assert {"weir.stores.spec", "weir.recovery.storage", "weir.engine.config.job",
            "weir.engine.systems.filelog.writer"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path):
    result = run_doctests(name, tmp_path)
    assert result.failed == 0
