"""Running a module's docstring examples the way a user would, without leaving files behind.

Examples create their directories with ``tempfile.mkdtemp()``, as a reader of the docs would;
while they run, :func:`run_doctests` points ``tempfile`` at the test's own ``tmp_path``, which
pytest removes, so no example leaves a directory in the system's temporary directory.
"""

from __future__ import annotations

import doctest
import importlib
import tempfile
from pathlib import Path

__all__ = ["run_doctests"]


def run_doctests(module_name: str, tmp_path: Path,
                 optionflags: int = doctest.ELLIPSIS) -> doctest.TestResults:
    """``doctest.testmod`` of ``module_name`` with temporary files under ``tmp_path``."""
    module = importlib.import_module(module_name)
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        return doctest.testmod(module, optionflags=optionflags)
    finally:
        tempfile.tempdir = saved
