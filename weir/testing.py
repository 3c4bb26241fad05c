"""Testing tasks, applications and stores: ``from weir.testing import TestRunner, advance``.

:class:`FileChangelog` is a changelog in one local file, for tests of stores and storage
managers without a stream system (docs/STORES.md).

See docs/TASKS.md ("Testing tasks"); the code lives in :mod:`weir.engine.testing`.
"""

from weir.engine.testing import (Advance, FileChangelog, InjectedCrash, Record, RunResult,
                                 TestRunError, TestRunner, VirtualClock, advance)

__all__ = ["TestRunner", "RunResult", "Record", "Advance", "advance", "TestRunError",
           "InjectedCrash", "VirtualClock", "FileChangelog"]
