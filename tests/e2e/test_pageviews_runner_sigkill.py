"""The README's pageviews application (examples/pageviews) as real `weir run` processes with two
container processes, under its default guarantee (exactly-once on the file log), where only the
*runner* is SIGKILLed, several times, at random points (right after a restart too): its orphaned
containers notice, stop with a final commit and exit, and the next run continues from those
commits. Every per-minute window and every session is then emitted exactly once with the value
of a direct computation: a stop that is not the end of the input records no end-of-stream and no
watermark beyond what was read (issue: stage-1 windows restarted "at the end of input" and
dropped views as late).

``WEIR_LONG_TESTS=1`` kills more often on a larger input.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.test_pageviews_sigkill import (load_example, panes_of, start, views_committed,
                                              write_properties)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LONG = bool(os.environ.get("WEIR_LONG_TESTS"))
VIEWS = 12_000 if LONG else 5_000
KILLS = 8 if LONG else 4
ORPHANED = "the runner process"


def kill_runner_at(workdir: Path, target: int, rng: random.Random) -> tuple[bool, str]:
    """Start the job and SIGKILL its runner process only once the checkpoints cover ``target``
    views (plus a random delay; at once when they already do). Returns whether it was killed,
    and the output of the run and its containers: reading it to its end waits for the orphaned
    containers (they write to the same pipe) to finish their final commit and exit."""
    proc = start(workdir)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if views_committed(workdir) >= target:
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 0.3))
    try:
        os.kill(proc.pid, signal.SIGKILL)        # the runner only, not its process group
    except ProcessLookupError:
        pass
    output, _ = proc.communicate(timeout=240)
    if proc.returncode == -signal.SIGKILL:
        return True, output
    assert proc.returncode == 0, output
    return False, output


def test_pageviews_with_only_the_runner_sigkilled_emit_every_window_once_with_the_exact_value(
        tmp_path):
    example = load_example()
    write_properties(tmp_path, "job.container.count=2\n")
    config = example.app_config(tmp_path)
    views = example.generate(config, VIEWS)
    rng = random.Random(41)
    targets = sorted(rng.uniform(0.1, 0.95) * VIEWS for _ in range(KILLS))
    outputs = [kill_runner_at(tmp_path, int(t), rng) for t in targets]
    final = start(tmp_path)
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output
    killed = [out for was_killed, out in outputs if was_killed]
    assert len(killed) >= KILLS - 1, f"only {len(killed)} of {KILLS} runs were killed mid-run"
    assert any(ORPHANED in out for out in killed), killed[-1][-3000:]   # orphans committed

    minutes, sessions = example.truth(views)
    panes = panes_of(example, tmp_path, "views-per-minute")
    emitted = Counter((p["key"], p["start"]) for p in panes)
    assert [w for w, n in emitted.items() if n != 1] == []          # once each, read committed
    wrong = {(p["key"], p["start"]): (p["value"], minutes.get((p["key"], p["start"])))
             for p in panes if p["value"] != minutes.get((p["key"], p["start"]))}
    assert wrong == {} and set(emitted) == set(minutes)
    late = [out for out in (*killed, output) if " late element" in out]   # logged drops
    assert late == [], late[0][-3000:]
    got_sessions = Counter((p["key"], p["start"], p["end"], p["value"])
                           for p in panes_of(example, tmp_path, "sessions"))
    assert got_sessions == sessions
