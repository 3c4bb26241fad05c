"""Run a Python snippet in a real child process that reports when it is ready and then waits.

Used by the lock and crash tests: the child holds a lock or has written data, the test acts
on it (reads the error it causes, or SIGKILLs it) and then checks what survives.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

__all__ = ["Child", "REPO"]

REPO = Path(__file__).resolve().parents[3]


class Child:
    """A child Python process running ``code`` with ``args`` in ``sys.argv[1:]``.

    ``code`` must print ``ready`` (flushed) when the test may act, then block reading stdin.
    """

    def __init__(self, code: str, *args: object):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=REPO)
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            raise AssertionError(f"child did not get ready: {line!r}\n{err}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL

    def finish(self) -> None:
        """Let the child leave its wait and exit normally."""
        self.proc.communicate(input="", timeout=30)

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)
