"""Testing tasks and applications: ``weir.testing`` (docs/TASKS.md, "Testing tasks").

:class:`TestRunner` runs a task or an application to its end in this process on the memory
system, with inputs given as Python lists; its :class:`RunResult` reads the output streams,
the stores and the metrics. ``crash_at`` injects a crash at an offset (the next run restarts
from the last checkpoint); :func:`advance` markers in input lists move processing time on,
which drives ``window`` and ``context.clock``. :class:`FileChangelog` is a changelog in one
local file for tests of stores and storage managers without a stream system.
"""

from __future__ import annotations

from weir.engine.testing.file_changelog import FileChangelog
from weir.engine.testing.harness import InjectedCrash, VirtualClock
from weir.engine.testing.runner import (Advance, Record, RunResult, TestRunError, TestRunner,
                                        advance)

__all__ = ["TestRunner", "RunResult", "Record", "Advance", "advance", "TestRunError",
           "InjectedCrash", "VirtualClock", "FileChangelog"]
