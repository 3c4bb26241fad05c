"""The README's pageviews application (examples/pageviews) as real `weir run` processes under
its default guarantee (exactly-once on the file log):

* SIGKILLed several times mid-run, then run to the end: every per-minute window and every
  session is emitted exactly once, read committed, with the value of a direct computation
  (at-least-once left windows counted too high and sessions wrong: issue 23 item 8);
* drained with `weir drain` mid-run and restarted: windows the drain closed early come as an
  ``early`` pane (index 0) refined by an ``on_time`` pane (index 1) that carries the whole
  value, so a consumer keeping the latest pane per window is right.

``WEIR_LONG_TESTS=1`` kills more often on a larger input.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.e2e._pageviews import (Victim, assert_every_window_once_exact, example_env,
                                  kill_once_committed, load_example, panes_of, start,
                                  views_committed, write_properties)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LONG = bool(os.environ.get("WEIR_LONG_TESTS"))
VIEWS = 12_000 if LONG else 5_000
KILLS = 8 if LONG else 4


def latest_panes(panes: list[dict], identity) -> dict:
    """The pane with the highest index per ``identity(pane)``."""
    out = {}
    for pane in panes:
        k = identity(pane)
        if k not in out or pane["index"] > out[k]["index"]:
            out[k] = pane
    return out


def test_sigkilled_pageviews_emit_every_window_once_with_the_exact_value(tmp_path):
    example = load_example()
    write_properties(tmp_path, "# the test: the run is killed at random points\n")
    config = example.app_config(tmp_path)
    views = example.generate(config, VIEWS)
    rng = random.Random(23)
    targets = sorted(rng.uniform(0.1, 0.9) * VIEWS for _ in range(KILLS))
    killed = sum(kill_once_committed(tmp_path, int(t), rng, Victim.PROCESS_GROUP, 180)[0]
                 for t in targets)
    final = start(tmp_path)
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output
    assert killed >= KILLS - 1, f"only {killed} of {KILLS} runs were killed mid-run"

    panes = assert_every_window_once_exact(example, tmp_path, views)
    assert all((p["timing"], p["index"]) == ("on_time", 0) for p in panes)


def test_a_drained_and_restarted_pageviews_refines_its_early_panes(tmp_path):
    example = load_example()
    write_properties(tmp_path, "task.drain.poll.interval.ms=50\n")
    config = example.app_config(tmp_path)
    views = example.make_views(VIEWS)
    half = len(views) // 2
    example.write_views(config, views[:half], end=False)
    job = start(tmp_path)
    try:
        deadline = time.monotonic() + 180
        while views_committed(tmp_path) < half // 2:
            assert time.monotonic() < deadline and job.poll() is None, job.stdout.read()
            time.sleep(0.05)
        drain = subprocess.run([sys.executable, "-m", "weir", "drain", "app.properties",
                                "--wait", "120"], cwd=tmp_path, env=example_env(),
                               capture_output=True,
                               text=True, timeout=180)
        assert drain.returncode == 0, drain.stdout + drain.stderr
        output, _ = job.communicate(timeout=120)
        assert job.returncode == 0, output
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    drained = panes_of(example, tmp_path, "views-per-minute")
    assert any(p["timing"] == "early" for p in drained)   # the drain closed windows early

    example.write_views(config, views[half:], end=True)   # the redeploy reads the rest
    final = start(tmp_path)
    output, _ = final.communicate(timeout=300)
    assert final.returncode == 0, output

    minutes, sessions = example.truth(views)
    panes = panes_of(example, tmp_path, "views-per-minute")
    latest = latest_panes(panes, lambda p: (p["key"], p["start"]))
    assert {w: p["value"] for w, p in latest.items()} == minutes
    histories: dict = {}
    for p in panes:
        histories.setdefault((p["key"], p["start"]), []).append((p["timing"], p["index"]))
    assert set(map(tuple, histories.values())) <= {(("on_time", 0),),
                                                    (("early", 0), ("on_time", 1))}
    assert (("early", 0), ("on_time", 1)) in set(map(tuple, histories.values()))
    # sessions grow (a view the drain held back may even come before a session's start): a
    # pane replaces the panes of its key whose window it contains and whose index is lower
    assert Counter((p["key"], p["start"], p["end"], p["value"])
                   for p in latest_sessions(panes_of(example, tmp_path, "sessions"))) == sessions


def latest_sessions(panes: list[dict]) -> list[dict]:
    """What a consumer keeps of session panes read in order (docs/APPLICATIONS.md, Panes)."""
    kept: list[dict] = []
    for pane in panes:
        kept = [k for k in kept if not (k["key"] == pane["key"] and k["index"] < pane["index"]
                                        and pane["start"] <= k["start"]
                                        and k["end"] <= pane["end"])]
        kept.append(pane)
    return kept
