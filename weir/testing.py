"""Testing tasks and applications: ``from weir.testing import TestRunner, advance``.

See docs/TASKS.md ("Testing tasks"); the code lives in :mod:`weir.engine.testing`.
"""

from weir.engine.testing import (Advance, InjectedCrash, Record, RunResult, TestRunError,
                                 TestRunner, VirtualClock, advance)

__all__ = ["TestRunner", "RunResult", "Record", "Advance", "advance", "TestRunError",
           "InjectedCrash", "VirtualClock"]
