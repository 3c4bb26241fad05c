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

import pytest

from tests.e2e._pageviews import (Victim, assert_every_window_once_exact, kill_once_committed,
                                  load_example, start, write_properties)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

LONG = bool(os.environ.get("WEIR_LONG_TESTS"))
VIEWS = 12_000 if LONG else 5_000
KILLS = 8 if LONG else 4
ORPHANED = "the runner process"


def test_pageviews_with_only_the_runner_sigkilled_emit_every_window_once_with_the_exact_value(
        tmp_path):
    example = load_example()
    write_properties(tmp_path, "job.container.count=2\n")
    config = example.app_config(tmp_path)
    views = example.generate(config, VIEWS)
    rng = random.Random(41)
    targets = sorted(rng.uniform(0.1, 0.95) * VIEWS for _ in range(KILLS))
    outputs = [kill_once_committed(tmp_path, int(t), rng, Victim.RUNNER, 240)
               for t in targets]
    final = start(tmp_path)
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output
    killed = [out for was_killed, out in outputs if was_killed]
    assert len(killed) >= KILLS - 1, f"only {len(killed)} of {KILLS} runs were killed mid-run"
    assert any(ORPHANED in out for out in killed), killed[-1][-3000:]   # orphans committed

    assert_every_window_once_exact(example, tmp_path, views)
    late = [out for out in (*killed, output) if " late element" in out]   # logged drops
    assert late == [], late[0][-3000:]
