"""Running documentation examples the way a user would, without leaving files behind.

Examples create their directories with ``tempfile.mkdtemp()``, as a reader of the docs would;
while they run, :func:`run_doctests` points ``tempfile`` at the test's own ``tmp_path``, which
pytest removes, so no example leaves a directory in the system's temporary directory.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["run_doctests", "temp_files_in"]


@contextlib.contextmanager
def temp_files_in(tmp_path: Path) -> Iterator[Path]:
    """Within the block, ``tempfile.mkdtemp()`` and friends create under ``tmp_path``."""
    saved = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        yield tmp_path
    finally:
        tempfile.tempdir = saved


def run_doctests(module_name: str, tmp_path: Path,
                 optionflags: int = doctest.ELLIPSIS) -> doctest.TestResults:
    """``doctest.testmod`` of ``module_name`` with temporary files under ``tmp_path``."""
    module = importlib.import_module(module_name)
    with temp_files_in(tmp_path):
        return doctest.testmod(module, optionflags=optionflags)
