"""Real jobs: hello-samza's TumblingWindowExample ported with Samza's processing-time windows
counts every view whatever the order of their timestamps; on event time, views later than the
watermark are not lost silently: counted, logged and sent to the window's late output."""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections import Counter

import pytest

from tests.engine.app._pipeline import Pipeline
from weir.engine.container.runner import run_job
from weir.engine.container.status import StatusMode
from weir.recovery.storage import ProgressMode

pytestmark = pytest.mark.timeout(180)

INPUT, OUTPUT = "pageview-tumbling-input", "pageview-tumbling-output"


def page_views(n: int, seed: int = 24) -> list[dict]:
    """``n`` views of 40 users; timestamps 1 ms apart, shuffled by up to 50 ms (as records
    from several producers arrive)."""
    rng = random.Random(seed)
    views = [{"userId": f"user{rng.randrange(40)}", "country": "india",
              "pageId": f"site.com/{rng.randrange(9)}", "i": i, "ts": 1_000_000 + i}
             for i in range(n)]
    for v in views:
        v["ts"] += rng.randrange(50) - 25
    return views


def test_the_ported_tumbling_window_example_counts_every_view_on_processing_time(tmp_path):
    views = page_views(5_000)
    p = Pipeline(tmp_path, "TumblingWindowExample", test__window__ms=200,
                 job__container__count=1)
    p.create(INPUT, 2)
    p.produce(INPUT, views, lambda i, v: i % 2, key=lambda v: v["userId"],
              timestamp=lambda v: v["ts"])
    p.run()
    per_user = Counter()
    for key, value, _ in p.outputs(OUTPUT, string_keys=True):
        assert key == value["userId"] and value["timing"] == "on_time"
        per_user[key] += value["count"]
    assert per_user == Counter(v["userId"] for v in views)   # no view lost, none twice


def test_event_time_views_behind_the_watermark_are_counted_logged_and_sent_to_the_late_output(
        tmp_path, caplog):
    views = page_views(2_000)
    on_time, late = views[:1_900], views[1_900:]
    for v in late:
        v["ts"] = 1_000_000 + v["i"] % 100           # the first window, long closed by then
    p = Pipeline(tmp_path, "EventTimeViewsWithLateOutput", test__window__ms=100,
                 task__watermark__max__out__of__orderness__ms=50,   # the shuffle is on time
                 job__container__count=1, metrics__reporter__interval__ms=600_000,
                 metrics__reporter__file=tmp_path / "metrics.jsonl")
    p.create(INPUT, 2)
    p.produce(INPUT, on_time, lambda i, v: i % 2, key=lambda v: v["userId"],
              timestamp=lambda v: v["ts"], end=False)
    box, config = {}, p.job_config()                   # planned: the outputs exist
    with caplog.at_level(logging.WARNING, logger="weir.app"):
        job = threading.Thread(target=lambda: box.setdefault("result", run_job(
            config, status=StatusMode.OFF, progress=ProgressMode.QUIET)), daemon=True)
        job.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:             # the first windows have closed
            if any(value["start"] >= 1_001_000 for _, value, _ in p.outputs(OUTPUT, string_keys=True)):
                break
            time.sleep(0.05)
        p.produce(INPUT, late, lambda i, v: i % 2, key=lambda v: v["userId"],
                  timestamp=lambda v: v["ts"])
        job.join(120)
    assert box["result"].exit_code == 0, "\n".join(box["result"].summary_lines())

    counted = Counter()
    for key, pane, _ in p.outputs(OUTPUT, string_keys=True):
        counted[key] += pane["value"]
    dropped = Counter(key for key, _, _ in p.outputs("late-views", string_keys=True))
    assert dropped == Counter(v["userId"] for v in late)       # exactly the late views
    assert counted == Counter(v["userId"] for v in on_time)
    assert sorted(value["i"] for _, value, _ in p.outputs("late-views", string_keys=True)) == [v["i"] for v in late]
    warnings = [r.getMessage() for r in caplog.records if "late element" in r.getMessage()]
    assert warnings and "window 'count' dropped" in warnings[0]
    in_all = {}                                                # the last word of each task
    for w in warnings:
        task = re.match(r"task '([^']+)'", w).group(1)
        in_all[task] = int(re.search(r"\(([\d,]+) in all\)", w).group(1).replace(",", ""))
    assert sum(in_all.values()) == len(late)
    reports = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    metric = "late-dropped-t-1-window-count"
    totals = sum(task.get(metric, 0) for task in reports[-1]["metrics"]["tasks"].values())
    assert totals == len(late)
