"""A second signal that lands while a stop handler runs does not deadlock it.

The process group's SIGTERM and the runner's forwarded SIGTERM reach a container process
together; Python runs the second handler inside the first, and ``Container.shutdown`` sets a
``threading.Event`` under a lock that is not re-entrant: the nested handler waited for it for
ever and the container (and with it ``weir run``) hung after a clean group stop. Real signals
in a fresh interpreter; the container stands in for ``Container.shutdown``'s lock, with the
second SIGTERM sent while it is held."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CONTAINER = """\
import os, signal, threading

class Container:
    # Stops as Container.shutdown does: under a lock that is not re-entrant (Event.set),
    # and the second SIGTERM lands while it is held.
    def __init__(self):
        self.lock, self.stops, self.stop_requested = threading.Lock(), 0, False

    def shutdown(self, *args):
        with self.lock:
            if self.stops == 0:
                os.kill(os.getpid(), signal.SIGTERM)  # handled at the next instruction
            self.stops += 1
            self.stop_requested = True

container = Container()
"""

HANDLERS = {
    "container process": """\
from weir.engine.container.process import GracefulStop
signal.signal(signal.SIGTERM, GracefulStop(container, "0"))
os.kill(os.getpid(), signal.SIGTERM)
""",
    "runner": """\
from weir.engine.container.runner import _Signals
with _Signals() as signals:
    signals.attach(container.shutdown)
    os.kill(os.getpid(), signal.SIGTERM)
""",
}


@pytest.mark.parametrize("where", sorted(HANDLERS))
def test_a_signal_inside_the_stop_handler_returns_and_the_first_stop_completes(where):
    code = textwrap.dedent(CONTAINER) + textwrap.dedent(HANDLERS[where]) + \
        "print('stopped', container.stops)\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {where}'s stop handler deadlocked on a second signal")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped 1"
