"""Closing an LMDB iterator, snapshot or engine from one thread while another thread's loop runs
over it: the loop stops with StoreClosedError, and the process does not crash.

py-lmdb releases the GIL inside each cursor step, so a close that aborted the read transaction
under a running step used to free the cursor in use (SIGSEGV). The races run in a child
process, so that a crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.stores.engines._proc import REPO

RACE = """
    import json, random, sys, threading, time
    from weir.stores.engines.lmdb import LMDBEngine
    from weir.stores.errors import StoreClosedError

    what, trials, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    engine = LMDBEngine("s", path)
    engine.put_all([(b"k%07d" % i, b"v" * 50) for i in range(200_000)])
    engine.flush()
    outcomes = {}
    rng = random.Random(5)
    for _ in range(trials):
        if what == "engine":
            engine.close()
            engine = LMDBEngine("s", path)
        snap = engine.snapshot(None, None) if what == "snapshot" else None
        it = snap.iterator() if snap is not None else engine.all()
        running = threading.Event()

        def loop():
            outcome = "ran to the end"
            try:
                for n, _ in enumerate(it):
                    if n == 10:
                        running.set()
            except StoreClosedError:
                outcome = "closed"
            except Exception as exc:
                outcome = repr(exc)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            running.set()

        thread = threading.Thread(target=loop)
        thread.start()
        running.wait()
        time.sleep(rng.random() * 0.004)
        (it if what == "iterator" else snap if what == "snapshot" else engine).close()
        thread.join()
    engine.close()
    print(json.dumps(outcomes))
"""


@pytest.mark.parametrize("what", ["iterator", "snapshot", "engine"])
def test_closing_from_another_thread_stops_a_running_loop_without_crashing(what, tmp_path):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(RACE), what, "40",
                           str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, f"child died with {proc.returncode}: {proc.stderr[-2000:]}"
    outcomes = json.loads(proc.stdout)
    assert set(outcomes) <= {"closed", "ran to the end"}, outcomes
    assert outcomes.get("closed", 0) > 0, outcomes
